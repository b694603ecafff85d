package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
)

// The timer service: any number of timers per (operator, key), each an
// instant of processing time or event time (an operator has one kind).
// A timer is an entry in two indexes (see the key space in store.go): by
// expiry, for the timers due below a threshold, and by key, for listing
// and deleting one key's timers. Writes and reads go through a
// StateBatch, so they commit with the batch's state and see its own
// earlier writes.
//
// Instants are kept as Unix nanoseconds, so they are clamped to
// [minTimer, maxTimer]: the years 1678 to 2262. maxTimer is one
// nanosecond before EndOfTime, so that a flushed query (whose watermark is
// EndOfTime) fires every timer, however late.
var (
	minTimer = time.Unix(0, math.MinInt64)
	maxTimer = time.Unix(0, math.MaxInt64-1)
)

// EndOfTime is the watermark of a flushed query (see FlushEventTime): past
// every instant a timer can hold.
var EndOfTime = time.Unix(0, math.MaxInt64).UTC()

// TimerInstant returns t as the timer service keeps it: clamped to the
// range of Unix nanoseconds below EndOfTime, in UTC. Registering t or
// TimerInstant(t) is the same.
func TimerInstant(t time.Time) time.Time {
	return time.Unix(0, timerNanos(t)).UTC()
}

func timerNanos(t time.Time) int64 {
	switch {
	case t.Before(minTimer):
		t = minTimer
	case t.After(maxTimer):
		t = maxTimer
	}
	return t.UnixNano()
}

// appendInstant appends t as 8 bytes whose byte order is time order.
func appendInstant(b []byte, t time.Time) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(timerNanos(t))^1<<63)
}

func readInstant(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)^1<<63)).UTC()
}

func expiryKey(b []byte, s Scope, at time.Time, key []byte) []byte {
	b = appendScope(b, timerPrefix, s)
	b = appendInstant(b, at)
	return append(b, key...)
}

func keyTimersPrefix(b []byte, s Scope, key []byte) []byte {
	b = appendScope(b, timerKeyPrefix, s)
	b = binary.AppendUvarint(b, uint64(len(key)))
	return append(b, key...)
}

// RegisterTimer sets a timer of key at instant at (see TimerInstant). A
// timer already set at that instant stays one timer.
func (b *StateBatch) RegisterTimer(s Scope, key []byte, at time.Time) error {
	if err := b.setByExpiry(s, key, at); err != nil {
		return err
	}
	b.key = appendInstant(keyTimersPrefix(b.key[:0], s, key), at)
	if err := b.b.Set(b.key, nil, nil); err != nil {
		return fmt.Errorf("streamgen: write timer: %w", err)
	}
	return nil
}

// setByExpiry writes the timer's entry in the index by expiry: all of a
// one-shot timer (OperatorInfo.OneShotTimers), half of another.
func (b *StateBatch) setByExpiry(s Scope, key []byte, at time.Time) error {
	b.written = true
	b.key = expiryKey(b.key[:0], s, at, key)
	b.noteTimer(true)
	if err := b.b.Set(b.key, nil, nil); err != nil {
		return fmt.Errorf("streamgen: write timer: %w", err)
	}
	return nil
}

// deleteByExpiry removes the timer's entry in the index by expiry: all of
// a one-shot timer, half of another.
func (b *StateBatch) deleteByExpiry(s Scope, key []byte, at time.Time) error {
	b.written = true
	b.key = expiryKey(b.key[:0], s, at, key)
	b.noteTimer(false)
	if err := b.b.Delete(b.key, nil); err != nil {
		return fmt.Errorf("streamgen: write timer: %w", err)
	}
	return nil
}

// deleteFired removes the one-shot timers of s due below threshold, once
// they have fired: one range deletion over the range DueTimers read, up
// to left (the index entry of the first timer left for the next batch)
// when not nil. It leaves rangeDeleted unset: the range holds the timers
// of s alone, which the state cache does not hold and which no read of
// the batch comes back to once the operator's timers have run (a later
// operator's cursor reads its own range).
func (b *StateBatch) deleteFired(s Scope, threshold time.Time, left []byte) error {
	lower, upper := dueRange(s, threshold)
	if left != nil {
		upper = left
	}
	return b.deleteTimerRange(lower, upper)
}

// dropKeyIndex removes the index by key of s's timers: what a checkpoint
// written before the operator's timers were one-shot left there, which
// nothing reads or deletes any more.
func (b *StateBatch) dropKeyIndex(s Scope) error {
	lower := appendScope(nil, timerKeyPrefix, s)
	return b.deleteTimerRange(lower, prefixEnd(lower))
}

// deleteTimerRange removes the timers' index entries in [lower, upper),
// leaving rangeDeleted unset (see deleteFired).
func (b *StateBatch) deleteTimerRange(lower, upper []byte) error {
	b.written = true
	if err := b.b.DeleteRange(lower, upper, nil); err != nil {
		return fmt.Errorf("streamgen: delete timers: %w", err)
	}
	return nil
}

// DeleteTimer removes the timer of key at instant at, if there is one.
func (b *StateBatch) DeleteTimer(s Scope, key []byte, at time.Time) error {
	if err := b.deleteByExpiry(s, key, at); err != nil {
		return err
	}
	b.key = appendInstant(keyTimersPrefix(b.key[:0], s, key), at)
	if err := b.b.Delete(b.key, nil); err != nil {
		return fmt.Errorf("streamgen: write timer: %w", err)
	}
	return nil
}

// KeyTimers calls fn with each timer of key, in order of expiry: a scan
// of the key's entries in the by-key index only.
func (b *StateBatch) KeyTimers(s Scope, key []byte, fn func(at time.Time) error) error {
	lower := keyTimersPrefix(nil, s, key)
	return b.scan(lower, prefixEnd(lower), func(k, _ []byte) error {
		if len(k) != len(lower)+8 {
			return fmt.Errorf("streamgen: timer index entry of %d bytes for a %d-byte prefix", len(k), len(lower))
		}
		return fn(readInstant(k[len(lower):]))
	})
}

// DeleteKeyTimers removes every timer of key.
func (b *StateBatch) DeleteKeyTimers(s Scope, key []byte) error {
	var at []time.Time
	if err := b.KeyTimers(s, key, func(t time.Time) error { at = append(at, t); return nil }); err != nil {
		return err
	}
	for _, t := range at {
		if err := b.DeleteTimer(s, key, t); err != nil {
			return err
		}
	}
	return nil
}

// Timer is a due timer: its key and instant.
type Timer struct {
	Key []byte
	At  time.Time
}

// TimerCursor walks the timers of a scope due before a threshold, in
// expiry order (then key order), through a batch, a chunk at a time: so
// the handler of one timer may register and delete timers, and a timer
// registered behind the cursor waits for the next batch. The zero value
// is not usable; see StateBatch.DueTimers.
type TimerCursor struct {
	b      *StateBatch
	front  []byte // the start of the scope's index by expiry
	lower  []byte // the next scan starts after this key (inclusive at first)
	upper  []byte
	first  bool
	prefix int
	chunk  []Timer
	done   bool
	// checked is how many of the batch's timer writes the cursor has
	// looked at; ahead are those it found in its range, not yet passed.
	checked int
	ahead   [][]byte
}

// dueChunk is how many timers a cursor reads per scan.
const dueChunk = 256

// DueTimers returns a cursor over the timers of s whose instant is
// strictly before threshold; a threshold at or after EndOfTime takes every
// timer.
func (b *StateBatch) DueTimers(s Scope, threshold time.Time) *TimerCursor {
	lower, upper := dueRange(s, threshold)
	return &TimerCursor{b: b, front: lower, lower: lower, upper: upper, first: true, prefix: len(lower)}
}

// dueRange is the range of s's index by expiry that holds the timers due
// before threshold.
func dueRange(s Scope, threshold time.Time) (lower, upper []byte) {
	lower = appendScope(nil, timerPrefix, s)
	if threshold.Before(EndOfTime) {
		return lower, appendInstant(append([]byte(nil), lower...), threshold)
	}
	return lower, prefixEnd(lower)
}

var errChunkFull = errors.New("chunk full")

// Next returns the next due timers, at most a chunk of them, or none when
// there are no more. The slices are the cursor's own, valid until the next
// call.
func (c *TimerCursor) Next() ([]Timer, error) {
	c.chunk = c.chunk[:0]
	if c.done {
		return nil, nil
	}
	lower := c.lower
	if !c.first {
		lower = append(c.lower, 0) // the smallest key after the last one read
	}
	var last []byte
	// Without a write of the batch in the range left (the timers the
	// batch registered are mostly later, those it deleted, the fired
	// ones, behind the cursor), the committed timers are the range's,
	// read without indexing the batch.
	committed := !c.b.rangeDeleted && !c.wroteAhead(lower)
	err := c.b.scanFrom(lower, c.upper, committed, func(k, _ []byte) error {
		if len(k) < c.prefix+8 {
			return fmt.Errorf("streamgen: timer index entry of %d bytes", len(k))
		}
		c.chunk = append(c.chunk, Timer{Key: bytes.Clone(k[c.prefix+8:]), At: readInstant(k[c.prefix:])})
		last = append(last[:0], k...)
		if len(c.chunk) == dueChunk {
			return errChunkFull
		}
		return nil
	})
	if err != nil && err != errChunkFull {
		return nil, err
	}
	if err == nil {
		c.done = true
	}
	if last != nil {
		c.lower, c.first = last, false
	}
	return c.chunk, nil
}

// deleteRead removes the index entries by expiry of the timers c has
// walked past, which have fired: one range deletion from the start of
// the scope's index to the cursor's end once it has read them all (to
// the last entry read otherwise). Each handler deletes its own timer,
// but a run of point deletions at the front of the index is what the
// next batch's cursor, which starts there, steps over one by one until
// compactions drop them; it steps over the range deletion at once, and
// the point deletions under it are dropped when the memtable is
// flushed. The range also covers the deletions of timers moved before
// they were due (a timeout set again at each call). (Nexmark q4 at 100M
// events, where each auction has a timer: the cursors' reads took 10 s
// of CPU, 3 s with the range deletions; 27 s without them once Pebble no
// longer compacted tables dense with deletions: see store.go.) A timer
// set in the range since the batch's from-th timer write (one a handler
// registered behind the cursor, for the next batch) is set again after
// it.
func (c *TimerCursor) deleteRead(from int) error {
	if c.first {
		return nil // nothing read
	}
	b := c.b
	lower, upper := c.front, c.upper
	if !c.done {
		upper = append(bytes.Clone(c.lower), 0)
	}
	// The timers whose last write since from, in the range, set them.
	set := map[string]struct{}{}
	for j := from; j < b.timerWrites(); j++ {
		if k := b.timerWritten(j); bytes.Compare(k, lower) >= 0 && bytes.Compare(k, upper) < 0 {
			if b.timerSets[j] {
				set[string(k)] = struct{}{}
			} else if len(set) > 0 {
				delete(set, string(k))
			}
		}
	}
	if err := b.deleteTimerRange(lower, upper); err != nil {
		return err
	}
	for k := range set {
		b.key = append(b.key[:0], k...)
		b.noteTimer(true)
		if err := b.b.Set(b.key, nil, nil); err != nil {
			return fmt.Errorf("streamgen: write timer: %w", err)
		}
	}
	return nil
}

// noteTimer records that the batch writes b.key, an entry of the timers'
// by-time index (see TimerCursor.wroteAhead).
func (b *StateBatch) noteTimer(set bool) {
	b.timerKeys = append(b.timerKeys, b.key...)
	b.timerEnds = append(b.timerEnds, int32(len(b.timerKeys)))
	b.timerSets = append(b.timerSets, set)
}

// timerWrites returns how many writes of the timers' by-time index the
// batch has made (see noteTimer).
func (b *StateBatch) timerWrites() int { return len(b.timerEnds) }

// timerWritten returns the by-time index entry of the batch's j-th
// timer write (see noteTimer), capped at its length.
func (b *StateBatch) timerWritten(j int) []byte {
	start := int32(0)
	if j > 0 {
		start = b.timerEnds[j-1]
	}
	return b.timerKeys[start:b.timerEnds[j]:b.timerEnds[j]]
}

// timerKeysWritten adds to keys the by-time index entries of the batch's
// writes from the from-th to the to-th that sort before upper:
// a write at or past a walk's end is of no timer it reads (a timer set
// ahead for later, as a one-shot timer's handler sets the next).
func (b *StateBatch) timerKeysWritten(keys map[string]struct{}, from, to int, upper []byte) {
	for j := from; j < to; j++ {
		if k := b.timerWritten(j); bytes.Compare(k, upper) < 0 {
			keys[string(k)] = struct{}{}
		}
	}
}

// timerLive reports whether timer t of s, read by a cursor before the
// writes whose entries touched holds, is still set: unless one of them
// was of its entry, it is.
func (b *StateBatch) timerLive(s Scope, t Timer, touched map[string]struct{}, scratch *[]byte) (bool, error) {
	*scratch = expiryKey((*scratch)[:0], s, t.At, t.Key)
	want := *scratch
	if _, ok := touched[string(want)]; !ok {
		return true, nil
	}
	found := false
	err := b.scan(want, append(bytes.Clone(want), 0), func([]byte, []byte) error {
		found = true
		return nil
	})
	return found, err
}

// wroteAhead reports whether the batch has set or deleted a timer whose
// by-time key is in [lower, c.upper), the range the cursor has left.
// Each write is looked at once, when the cursor first sees it: one
// behind the cursor, or past its end, stays so (the cursor only moves
// on); one ahead is kept until the cursor passes it.
func (c *TimerCursor) wroteAhead(lower []byte) bool {
	c.ahead = slices.DeleteFunc(c.ahead, func(k []byte) bool { return bytes.Compare(k, lower) < 0 })
	b := c.b
	for ; c.checked < b.timerWrites(); c.checked++ {
		k := b.timerWritten(c.checked)
		if bytes.Compare(k, lower) >= 0 && bytes.Compare(k, c.upper) < 0 {
			c.ahead = append(c.ahead, k)
		}
	}
	return len(c.ahead) > 0
}

// timerTimes appends to times, in Unix nanoseconds, the instants of the
// first n timers of s (the earliest), committed ones.
func (b *StateBatch) timerTimes(s Scope, n int, times []int64) ([]int64, error) {
	lower, upper := dueRange(s, EndOfTime)
	seen := 0
	err := b.scan(lower, upper, func(k, _ []byte) error {
		if len(k) >= len(lower)+8 {
			times = append(times, readInstant(k[len(lower):]).UnixNano())
		}
		if seen++; seen == n {
			return errChunkFull
		}
		return nil
	})
	if err != nil && err != errChunkFull {
		return times, err
	}
	return times, nil
}

// countTimers returns the number of s's committed timers.
func (b *StateBatch) countTimers(s Scope) (int, error) {
	lower, upper := dueRange(s, EndOfTime)
	n := 0
	err := b.scan(lower, upper, func([]byte, []byte) error { n++; return nil })
	return n, err
}

// HasDueTimers reports whether any timer of s is due before threshold.
func (b *StateBatch) HasDueTimers(s Scope, threshold time.Time) (bool, error) {
	c := b.DueTimers(s, threshold)
	found := false
	err := b.scan(c.lower, c.upper, func([]byte, []byte) error {
		found = true
		return errChunkFull
	})
	if err != nil && err != errChunkFull {
		return false, err
	}
	return found, nil
}
