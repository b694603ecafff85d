package typed

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"runtime/debug"
	"sync"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// TimeMode is the kind of time a stateful processor's timers and the
// clock of TimerValues run on, as Spark's TimeMode.
type TimeMode int

const (
	// TimeModeNone: no timers; a timer call is an error.
	TimeModeNone TimeMode = iota
	// TimeModeProcessingTime: timers fire once the batch's processing time
	// reaches them (at or after them), as Spark's.
	TimeModeProcessingTime
	// TimeModeEventTime: timers fire once the watermark reaches them (at
	// or after them), as Spark's. It needs a watermark.
	TimeModeEventTime
)

// String names the mode as Spark's TimeMode does.
func (m TimeMode) String() string {
	switch m {
	case TimeModeProcessingTime:
		return "ProcessingTime"
	case TimeModeEventTime:
		return "EventTime"
	}
	return "None"
}

func (m TimeMode) runtime() runtime.TimeMode {
	switch m {
	case TimeModeProcessingTime:
		return runtime.ProcessingTimeMode
	case TimeModeEventTime:
		return runtime.EventTimeMode
	}
	return runtime.NoTime
}

// TimerValues are the batch's clocks, as a handler sees them. The zero
// watermark means there is none yet.
type TimerValues struct {
	processingTime, watermark time.Time
	// For a processor that judges which of its rows are late (lateJudge):
	// the watermark rows are late by (runtime.Batch.LateWatermark), and
	// what counts a row it drops as late and sends it to LateRows.
	lateWatermark time.Time
	dropLate      func(eventTime time.Time)
}

// CurrentProcessingTime returns the batch's processing time.
func (t TimerValues) CurrentProcessingTime() time.Time { return t.processingTime }

// CurrentWatermark returns the batch's event-time watermark: the epoch
// (Spark's 0) in a query's first batch, and the zero time in a query
// without a watermark.
func (t TimerValues) CurrentWatermark() time.Time { return t.watermark }

// ExpiredTimerInfo describes the timer a HandleExpiredTimer call is for.
type ExpiredTimerInfo struct{ expiry time.Time }

// ExpiryTime returns the instant the timer was registered for.
func (e ExpiredTimerInfo) ExpiryTime() time.Time { return e.expiry }

// StatefulProcessor is Spark's transformWithState processor, typed: the
// state of each key lives in state variables the processor declares in
// Init (NewValueState, NewListState, NewMapState, each with an optional
// time to live), and it may register any number of timers per key.
//
// In each batch, HandleInputRows is called once per key with rows, with
// the key's rows in arrival order; then HandleExpiredTimer once per timer
// due, in expiry order, including for keys that had rows. The ctx of a
// call scopes the state variables and timers to its key: pass it to
// their methods (from the handler's own goroutines too, until it
// returns). It is cancelled when the query stops.
//
// Init is called at every start of a query, before any handler; Close, if
// the processor has it (io.Closer), when the query stops, or when its start
// fails after Init. HandleExpiredTimer (ExpiredTimerHandler) is needed only
// by a processor that registers timers; without it, a timer that fires
// does nothing, as Spark's default. A query calls the handlers of one key
// one at a time; with Concurrency(n), handlers of different keys run on up
// to n goroutines, so a processor's own fields must then be safe for
// concurrent use.
//
// A processor value serves one query at a time: Init binds the state
// variables it keeps in its fields to the query whose start calls it,
// and Close is that query's. Until the query has stopped (its Stop or
// AwaitTermination has returned; a query that could not end,
// ErrStoreNotClosed, keeps it), a start with the same value (another
// query, another transformWithState of the same query, another task of a
// kafka.App) fails with ErrProcessorInUse, before a second Init could
// rebind the first query's variables. This holds for any processor that
// is a pointer to a type with fields, settings only or not: make one value
// per query (in an App, in the task's build function). A processor type
// of size zero holds nothing and may be shared.
//
// rows may be ranged over, any number of times, during the call only.
// emit may be called from the handler's goroutines too; the calls are
// serialised, and their rows reach the sink in the order of the calls. A
// handler that returns because its ctx was cancelled should return an
// error that wraps ctx.Err() (%w), so that the query reports a stop, not a
// failure.
type StatefulProcessor[K comparable, In, Out any] interface {
	Init(h *Handle) error
	HandleInputRows(ctx context.Context, key K, rows iter.Seq[In], timers TimerValues, emit func(Out)) error
}

// ExpiredTimerHandler is implemented by a processor that handles its
// timers: HandleExpiredTimer is called once per timer due, after the
// batch's rows.
type ExpiredTimerHandler[K comparable, Out any] interface {
	HandleExpiredTimer(ctx context.Context, key K, timers TimerValues, expired ExpiredTimerInfo, emit func(Out)) error
}

// InitialStateHandler is implemented by a processor that takes an initial
// state (ProcessorInitialState): HandleInitialState runs once per pair of
// it (a key given twice, twice, in order), in the first batch of a new
// query, before that batch's rows.
type InitialStateHandler[K comparable, S any] interface {
	HandleInitialState(ctx context.Context, key K, initial S, timers TimerValues) error
}

// ErrProcessorInUse is wrapped by the error of a start whose
// transformWithState has a processor value that a running query (or
// another transformWithState of the same one) has already: see
// StatefulProcessor.
var ErrProcessorInUse = errors.New("streamgen: processor value in use by a running query")

// processorsInUse holds the processor values of the queries compiled and
// not yet stopped, by identity, each with a token of its claim.
var processorsInUse struct {
	sync.Mutex
	by map[any]*byte
}

// claimProcessor records that a query being compiled uses p, and returns
// the function that undoes it (once the query stops, or its start fails);
// it fails when another query holds p. A value that is not a pointer, or
// points to a type of size zero (whose values may share one address),
// cannot hold a query's variables, and is not recorded.
func claimProcessor(p any) (release func(), err error) {
	t := reflect.TypeOf(p)
	if t == nil || t.Kind() != reflect.Pointer || t.Elem().Size() == 0 || reflect.ValueOf(p).IsNil() {
		return func() {}, nil
	}
	processorsInUse.Lock()
	defer processorsInUse.Unlock()
	if _, held := processorsInUse.by[p]; held {
		return nil, fmt.Errorf("%w: this %T is the processor of a query that has not stopped; "+
			"Init binds a processor's state variables to one query, so give each query its own value "+
			"(in a kafka.App, make it in the task's build function)", ErrProcessorInUse, p)
	}
	if processorsInUse.by == nil {
		processorsInUse.by = map[any]*byte{}
	}
	token := new(byte)
	processorsInUse.by[p] = token
	return func() {
		processorsInUse.Lock()
		defer processorsInUse.Unlock()
		if processorsInUse.by[p] == token {
			delete(processorsInUse.by, p)
		}
	}, nil
}

// initProcessor calls p's Init with h; a panic in it releases p's claim
// (release) on its way up, so that a caller that recovers can start p
// again.
func initProcessor(p interface{ Init(*Handle) error }, h *Handle, release func()) error {
	done := false
	defer func() {
		if !done {
			release()
		}
	}()
	err := p.Init(h)
	done = true
	return err
}

// ErrInvalidHandleState is wrapped by the error of a state variable or
// timer used outside a handler's call, or declared outside Init, as
// Spark's "invalid handle state".
var ErrInvalidHandleState = errors.New("streamgen: invalid handle state")

// Handle is what Init declares state variables on, and what handlers
// register, delete and list timers with. It is safe for concurrent use by
// the goroutines of one handler's call.
type Handle struct {
	timeMode TimeMode
	inInit   bool
	vars     []*variable
	deleted  []string
	errs     []error
}

// variable is what every state variable shares: its name, kind, time to
// live and id in the store.
type variable struct {
	h        *Handle
	name     string
	kind     string
	ttl      time.Duration
	eventTTL bool // the time to live is in event time
	// eventExpiries says that the stored entries of a variable without a
	// time to live now may carry expiries in event time: written before a
	// restart took its event-time TTL away, they keep them.
	eventExpiries bool
	schema        *codec.Schema // of a record value, for the checkpoint
	// valueType names the value's type, and mapKeyType and mapKey a map
	// variable's key type, for the checkpoint (see runtime.StateInfo).
	valueType, mapKeyType string
	mapKey                *codec.Schema
	id                    uint8
	valid                 bool
	err                   error // why the variable is not valid
}

// StateOption configures a state variable.
type StateOption func(*variable)

// WithTTL gives a state variable a time to live: each value (or list or
// map entry) expires ttl after the processing time of the batch that wrote
// it, reset by every write, as Spark's TTLConfig. It follows Spark's rule:
// a value whose expiry is at or before the batch's processing time is
// never seen again, in any handler of the batch (timers' too), and is
// removed from the store in that batch, with new data or without. Spark
// takes a TTL in TimeModeProcessingTime only; here it is taken in every
// time mode (beyond Spark), always in processing time: with
// TimeModeEventTime, WithEventTimeTTL gives one in event time.
//
// A new version of a program may give a variable a time to live, change
// its length or take it away: what was written keeps the expiry it was
// written with (none, for what was written without one). Moving it to
// event time (WithEventTimeTTL), or back, is refused at Start: the
// stored expiries are instants of the other clock.
func WithTTL(ttl time.Duration) StateOption {
	return func(v *variable) { v.ttl, v.eventTTL = ttl, false }
}

// WithEventTimeTTL gives a state variable a time to live in event time,
// beyond Spark: each value (or entry) expires ttl after the latest event
// time among the rows of the call that wrote it (or, in a call without
// rows, after the watermark; in an event-time timer's call, after the
// timer's instant; in HandleInitialState's, after the batch's processing
// time, taken for an event time), and is gone, and removed from the store, once the
// watermark reaches that instant. Late data can then not revive state the
// watermark has passed. It needs a watermark, and rows that carry their
// event time: the rows of another stateful operator carry none until a
// WithWatermark after it gives them one (Start refuses the query
// otherwise).
//
// Within a batch, time is taken in order of instants: the event-time
// timers due run before the entries that expire at or after them are
// gone (timers first at equal instants), so a timer due at T sees every
// entry that expires after T, however far the batch moves the watermark
// (one step past both, or the end of a bounded input with
// FlushEventTime, gives what small steps give). The rows' calls see the
// batch's watermark: an entry that expires at or before it is gone. A
// timer of a key whose rows were handled earlier in the batch (the rows'
// call comes first, as in Spark) goes on from that call: it sees the
// entries that call saw and left, judged by the watermark, and what it
// writes expires ttl after that call's base, not before what that call
// wrote.
func WithEventTimeTTL(ttl time.Duration) StateOption {
	return func(v *variable) { v.ttl, v.eventTTL = ttl, true }
}

// declare adds a variable of kind; outside Init it is invalid.
func (h *Handle) declare(name, kind string, opts []StateOption) *variable {
	v := &variable{h: h, name: name, kind: kind, valid: true}
	for _, o := range opts {
		o(v)
	}
	switch {
	case h == nil:
		v.valid, v.err = false, fmt.Errorf("%w: state variable %q declared without a handle", ErrInvalidHandleState, name)
		return v
	case !h.inInit:
		v.valid, v.err = false, fmt.Errorf("%w: state variable %q declared outside Init", ErrInvalidHandleState, name)
		h.errs = append(h.errs, v.err)
		return v
	case v.ttl < 0:
		h.errs = append(h.errs, fmt.Errorf("state variable %q: negative time to live %v", name, v.ttl))
	}
	for _, w := range h.vars {
		if w.name == name {
			h.errs = append(h.errs, fmt.Errorf("state variable %q declared twice", name))
		}
	}
	h.vars = append(h.vars, v)
	return v
}

// DeleteIfExists drops, at start, the data of a state variable that an
// earlier version of the processor declared and this one does not. Call it
// in Init.
func (h *Handle) DeleteIfExists(name string) {
	if !h.inInit {
		h.errs = append(h.errs, fmt.Errorf("%w: DeleteIfExists(%q) outside Init", ErrInvalidHandleState, name))
		return
	}
	h.deleted = append(h.deleted, name)
}

// RegisterTimer sets a timer of the call's key at at. It needs a time
// mode other than TimeModeNone.
func (h *Handle) RegisterTimer(ctx context.Context, at time.Time) error {
	k, err := h.timerScope(ctx, "RegisterTimer")
	if err != nil {
		return err
	}
	return k.RegisterTimer(at)
}

// DeleteTimer removes the call's key's timer at at, if there is one.
func (h *Handle) DeleteTimer(ctx context.Context, at time.Time) error {
	k, err := h.timerScope(ctx, "DeleteTimer")
	if err != nil {
		return err
	}
	return k.DeleteTimer(at)
}

// ListTimers returns the call's key's timers, in order (in
// HandleExpiredTimer, including the one firing).
func (h *Handle) ListTimers(ctx context.Context) ([]time.Time, error) {
	k, err := h.timerScope(ctx, "ListTimers")
	if err != nil {
		return nil, err
	}
	var out []time.Time
	err = k.Timers(func(at time.Time) error {
		out = append(out, at)
		return nil
	})
	return out, err
}

// QueryInfo is what a handler's call knows of its query, as Spark's
// StatefulProcessorHandle.getQueryInfo: the query's id (Query.ID, kept
// by its checkpoint across restarts), this run's (Query.RunID, new at
// every start) and the id of the batch the call runs in (the epoch a
// sink is given): enough to make a handler's writes elsewhere
// idempotent.
type QueryInfo struct {
	QueryID, RunID string
	BatchID        int64
}

// QueryInfo returns the query, run and batch of the handler's call whose
// ctx is given; it fails outside a call (in Init, or with another ctx).
func (h *Handle) QueryInfo(ctx context.Context) (QueryInfo, error) {
	s, err := scopeOf(ctx, "QueryInfo")
	if err != nil {
		return QueryInfo{}, err
	}
	return QueryInfo{QueryID: runtime.QueryIDOf(ctx), RunID: runtime.RunIDOf(ctx), BatchID: s.k.Batch().ID}, nil
}

func (h *Handle) timerScope(ctx context.Context, what string) (*keyScope, error) {
	if h.timeMode == TimeModeNone {
		return nil, fmt.Errorf("%w: %s needs a time mode other than TimeModeNone", ErrInvalidHandleState, what)
	}
	return scopeOf(ctx, what)
}

// keyScope is one key's call: its state, in the batch, through the
// runtime's KeyState, whose operations it serialises with a lock shared by
// every call of the batch (the batch's writes are not safe for concurrent
// use), so its methods are safe for concurrent use by the call's
// goroutines.
type keyScope struct {
	mu  *sync.Mutex
	k   *runtime.KeyState
	now time.Time
	// watermark is the batch's; eventTime the latest event time of the
	// call's rows, or the watermark (the base of event-time TTLs).
	watermark, eventTime time.Time
	// written holds the entries the call wrote, latest last, their
	// suffixes and values in arena, so that reading them back costs no
	// read of the batch; seqs the next sequence number of each list the
	// call appended to. Both are reused from call to call.
	written []scopeWrite
	arena   []byte
	seqs    []listSeq
	// latest indexes written by variable and suffix (the id's byte, then
	// the suffix), once the call has written more than scopeIndexMin
	// entries: a call that writes many entries reads each back in
	// constant time.
	latest   map[string]int32
	indexKey []byte
	own      []int32 // scan's writes of a variable
	scratch  []byte
	encoded  []byte // a value being written
	mapKey   []byte // the encoded map key being read or written
	// clean is true when the batch held no write of the key when the call
	// began: then what the call did not write is read as committed.
	clean bool
	// timerAt is the instant of the event-time timer the call handles
	// (zero: none): the clock of event-time TTLs in the call.
	timerAt time.Time
	// memo is one more than the id of the variable whose entries the
	// call last scanned whole (0: none, or written since), and memoBuf
	// and memoEnds their suffixes, live or expired: a clear that follows
	// (ListState's Get, then Clear or Put) deletes them without scanning
	// the state again.
	memo     int
	memoBuf  []byte
	memoEnds []int32
	// memoEach is the function of the scan in progress, which record
	// calls after noting the suffix; recordFn is record, bound once so
	// that a scan allocates no closure.
	memoEach func(suffix, raw []byte) error
	recordFn func(suffix, raw []byte) error
}

// scopeWrite is an entry a call wrote: its variable, and where its suffix
// and its stored value (nil for a deletion) are in the scope's arena.
type scopeWrite struct {
	id                  uint8
	deleted             bool
	suffixAt, suffixLen int32
	valueAt, valueLen   int32
}

type listSeq struct {
	id   uint8
	next uint64
}

// reset readies a scope for a call.
func (s *keyScope) reset(k *runtime.KeyState, b *runtime.Batch, eventTime time.Time) {
	s.k, s.now, s.watermark, s.eventTime, s.clean = k, b.Now, b.Watermark, eventTime, !k.Written()
	s.timerAt = time.Time{}
	s.memo = 0
	s.written, s.arena, s.seqs = s.written[:0], s.arena[:0], s.seqs[:0]
	if len(s.latest) > 1<<16 {
		s.latest = nil // a large index goes back to the collector
	} else {
		clear(s.latest)
	}
}

// scopeIndexMin is the number of entries a call writes before they are
// indexed (below it, a scan of them is faster).
const scopeIndexMin = 16

// at makes the scope's event time the instant of an event-time timer the
// call handles: entries with an event-time TTL that expire before it are
// gone, those that expire at or after it are there (timers come first at
// equal instants), and what the call writes expires its TTL after it.
func (s *keyScope) at(timer time.Time) {
	s.timerAt, s.eventTime = timer, timer
}

// after makes the scope of a timer's call go on from the call with its
// key's rows earlier in the batch, whose event-time base was base: entries
// are judged by the batch's watermark, as in that call, and what the call
// writes expires its TTL after base.
func (s *keyScope) after(base time.Time) {
	s.timerAt, s.eventTime = time.Time{}, base
}

func (s *keyScope) lock() func() {
	s.mu.Lock()
	return s.unlock
}

func (s *keyScope) unlock() { s.mu.Unlock() }

type scopeKey struct{}

func scopeOf(ctx context.Context, what string) (*keyScope, error) {
	s, _ := ctx.Value(scopeKey{}).(*keyScope)
	if s == nil {
		return nil, fmt.Errorf("%w: %s outside a handler's call (pass the handler's ctx)", ErrInvalidHandleState, what)
	}
	return s, nil
}

func (s *keyScope) RegisterTimer(at time.Time) error {
	defer s.lock()()
	return s.k.RegisterTimer(at)
}

func (s *keyScope) DeleteTimer(at time.Time) error {
	defer s.lock()()
	return s.k.DeleteTimer(at)
}

func (s *keyScope) Timers(fn func(time.Time) error) error {
	defer s.lock()()
	return s.k.Timers(fn)
}

// ProcessorOption configures TransformWithState: Concurrency,
// ProcessorInitialState (and ProcessorLateRows, for generated bindings).
type ProcessorOption interface {
	applyProcessor(*processorConfig)
}

type processorConfig struct {
	concurrency int
	// initial holds the initial states given, each an initialState[K]
	// of the key type of the ProcessorInitialState call that made it;
	// TransformWithState checks that K is its own at Start.
	initial []any
	// late is the late-rows sink of a generated binding
	// (ProcessorLateRows), which its watermark takes.
	late *lateRowsOption
}

type processorOptionFunc func(*processorConfig)

func (f processorOptionFunc) applyProcessor(c *processorConfig) { f(c) }

// initialState is an initial state of keys of type K: its keys, and a
// function that hands each pair to the processor p.
type initialState[K comparable] struct {
	keys []K
	each func(p any, each func(key K, handle func(ctx context.Context, timers TimerValues) error) error) error
}

// ProcessorInitialState gives the processor an initial state, as Spark's
// initialState: in the first batch of a new query, before its rows, the
// processor's HandleInitialState (it must implement InitialStateHandler[K,
// S]) runs once per pair, in order: a key given twice is handed both, as
// Spark 4 hands each initial-state row of a key; a restarted query
// ignores the initial state.
func ProcessorInitialState[K comparable, S any](pairs ...Pair[K, S]) ProcessorOption {
	init := initialState[K]{}
	for _, p := range pairs {
		init.keys = append(init.keys, p.Key)
	}
	init.each = func(p any, each func(K, func(context.Context, TimerValues) error) error) error {
		h, ok := p.(InitialStateHandler[K, S])
		if !ok {
			var zero S
			return fmt.Errorf("the processor %T has an initial state of %T but no HandleInitialState(ctx, key, %T, timers) method", p, zero, zero)
		}
		for _, pair := range pairs {
			err := each(pair.Key, func(ctx context.Context, timers TimerValues) error {
				return h.HandleInitialState(ctx, pair.Key, pair.State, timers)
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	return processorOptionFunc(func(c *processorConfig) { c.initial = append(c.initial, init) })
}

// Concurrency runs the handlers of different keys on up to n goroutines
// (the Go form of Spark's asynchronous processor). The rows of one key are
// still handled in order, by one call at a time, and the output reaches the
// sink in the same order as with n = 1, so the output, and the checkpoint,
// are the same for any n. When a call fails, the calls of the batch still
// running see their ctx cancelled. The default is 1.
func Concurrency(n int) ProcessorOption {
	return processorOptionFunc(func(c *processorConfig) { c.concurrency = n })
}

// stack is debug.Stack, for the messages of panics.
var stack = debug.Stack
