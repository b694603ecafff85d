package typed

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// Timeout is the kind of timeout a stateful operator uses.
type Timeout int

const (
	// NoTimeout: groups never time out.
	NoTimeout Timeout = iota
	// ProcessingTimeTimeout: a group times out when the wall clock passes
	// the time set with SetTimeoutDuration, even if no data arrives.
	ProcessingTimeTimeout
	// EventTimeTimeout: a group times out in the batch after the
	// watermark passes the time set with SetTimeoutTimestamp. It needs a
	// watermark.
	EventTimeTimeout
)

// timeMode is the kind of time of the timeout's timers.
func (t Timeout) timeMode() runtime.TimeMode {
	switch t {
	case ProcessingTimeTimeout:
		return runtime.ProcessingTimeMode
	case EventTimeTimeout:
		return runtime.EventTimeMode
	}
	return runtime.NoTime
}

// noData is when an operator with the timeout asks for a batch without
// data, as Spark's FlatMapGroupsWithStateExec.shouldRunAnotherBatch.
func (t Timeout) noData() runtime.NoDataRule {
	switch t {
	case ProcessingTimeTimeout:
		return runtime.NoDataEveryTrigger
	case EventTimeTimeout:
		return runtime.NoDataOnWatermark
	}
	return runtime.NoDataNever
}

// String names the timeout as Spark's GroupStateTimeout does.
func (t Timeout) String() string {
	switch t {
	case ProcessingTimeTimeout:
		return "ProcessingTimeTimeout"
	case EventTimeTimeout:
		return "EventTimeTimeout"
	}
	return "NoTimeout"
}

// OutputMode says what a query writes to its sink each batch.
type OutputMode int

const (
	// Append writes only rows that will never change.
	Append OutputMode = iota
	// Update writes the rows that changed in the batch.
	Update
	// Complete writes the whole result every batch.
	Complete
)

// String names the output mode.
func (m OutputMode) String() string {
	switch m {
	case Update:
		return "Update"
	case Complete:
		return "Complete"
	}
	return "Append"
}

// ParseOutputMode reads an output mode by name, in any case ("append",
// "update", "complete"), as Spark's outputMode(String).
func ParseOutputMode(s string) (OutputMode, error) {
	for _, m := range []OutputMode{Append, Update, Complete} {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("streamgen: unknown output mode %q: use append, update or complete", s)
}

// MarshalText names the mode, for flags and configuration files.
func (m OutputMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText reads a mode as ParseOutputMode does, so an OutputMode
// can be a flag (flag.TextVar) or a field of a configuration file.
func (m *OutputMode) UnmarshalText(b []byte) error {
	v, err := ParseOutputMode(string(b))
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// ErrGroupState is wrapped by the errors of GroupState methods used
// against Spark's contract. A misused call changes nothing; the batch
// fails only if the function returns the error (or another), as Spark's
// fails on an exception the function does not catch.
var ErrGroupState = errors.New("streamgen: GroupState")

// GroupState is the state of one group (one key) handed to a
// mapGroupsWithState or flatMapGroupsWithState function, with Spark's
// contract:
//
//   - Exists, Get, Update and Remove read and change the state; changes
//     are committed with the batch.
//   - HasTimedOut is true when the function is called because the group
//     timed out: then it gets no rows. A group with rows in a batch does
//     not time out in it.
//   - The timeout is cleared at every call and must be set again:
//     SetTimeoutDuration with ProcessingTimeTimeout (d > 0),
//     SetTimeoutTimestamp with EventTimeTimeout (after the Unix epoch, and
//     not before the current watermark). Setting the wrong kind is an
//     error. A timeout may be set with no state, or after Remove: the
//     group then keeps only its timeout, and is called again when it
//     times out, with no state.
//   - A processing-time timeout fires in the first batch whose processing
//     time is strictly after it; an event-time timeout in the first batch
//     whose watermark is strictly after it.
//   - CurrentWatermark and CurrentProcessingTime are constant within a
//     batch; CurrentWatermark is the epoch (Spark's 0) until the
//     watermark first rises, and the zero time in a query without one.
//
// A GroupState is valid only during the call it is passed to, and is not
// safe for concurrent use.
type GroupState[S any] struct {
	value      S
	exists     bool
	updated    bool
	removed    bool
	timedOut   bool
	timeout    Timeout
	timeoutAt  time.Time
	timeoutSet bool
	watermark  time.Time
	now        time.Time
}

// Exists reports whether the group has state.
func (s *GroupState[S]) Exists() bool { return s.exists }

// Get returns the state and whether it exists.
func (s *GroupState[S]) Get() (S, bool) { return s.value, s.exists }

// Update sets the state.
func (s *GroupState[S]) Update(v S) {
	s.value, s.exists, s.updated, s.removed = v, true, true, false
}

// Remove deletes the state. A timeout set in the call, before or after,
// stays.
func (s *GroupState[S]) Remove() {
	var zero S
	s.value, s.exists, s.updated, s.removed = zero, false, false, true
}

// HasTimedOut reports whether the call is for a timed-out group.
func (s *GroupState[S]) HasTimedOut() bool { return s.timedOut }

// SetTimeoutDuration times the group out d after the batch's processing
// time, unless it gets data first. It needs ProcessingTimeTimeout and d >
// 0.
func (s *GroupState[S]) SetTimeoutDuration(d time.Duration) error {
	if s.timeout != ProcessingTimeTimeout {
		return s.misuse("SetTimeoutDuration needs ProcessingTimeTimeout; the operator has %v", s.timeout)
	}
	if d <= 0 {
		return s.misuse("SetTimeoutDuration(%v): the duration must be positive", d)
	}
	s.timeoutAt, s.timeoutSet = s.now.Add(d), true
	return nil
}

// SetTimeoutTimestamp times the group out once the watermark passes t,
// unless it gets data first. It needs EventTimeTimeout, and t must be after
// the Unix epoch and not before the current watermark.
func (s *GroupState[S]) SetTimeoutTimestamp(t time.Time) error {
	if s.timeout != EventTimeTimeout {
		return s.misuse("SetTimeoutTimestamp needs EventTimeTimeout; the operator has %v", s.timeout)
	}
	if !t.After(unixEpoch) {
		return s.misuse("SetTimeoutTimestamp(%v): the timestamp must be after the Unix epoch", t)
	}
	if t.Before(s.watermark) {
		return s.misuse("SetTimeoutTimestamp(%v): the timestamp is before the current watermark %v", t, s.watermark)
	}
	s.timeoutAt, s.timeoutSet = t, true
	return nil
}

// CurrentWatermark returns the batch's event-time watermark (zero without
// one).
func (s *GroupState[S]) CurrentWatermark() time.Time { return s.watermark }

// CurrentProcessingTime returns the batch's processing time.
func (s *GroupState[S]) CurrentProcessingTime() time.Time { return s.now }

func (s *GroupState[S]) misuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrGroupState, fmt.Sprintf(format, args...))
}

var unixEpoch = time.Unix(0, 0)
