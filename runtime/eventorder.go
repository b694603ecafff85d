package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// A variable ordered by event time (EncodingByEventTime) keeps one entry
// per grouping key, and the grouping key begins with the event time the
// entry lives until: 8 bytes as appendInstant writes them, then the rest
// of the key. The entry is stored with the 8 bytes as its key and the
// rest as its suffix,
//
//	statePrefix partition(4) op(1) var(1) 0x08 instant(8) rest
//
// so the variable's entries sort by time, and those at or before the
// watermark are one range deletion: no expiry index, and no read of what
// is deleted (the loop counts it in memory, see timedCounts).
// Deduplication with the event time in its key keeps its keys so, as
// Spark's dropDuplicates evicts by the watermark column. The entries have
// no value.
//
// These entries do not go through the state cache (Start tells the cache
// which variables to leave out, stateCache.skip): a batch's new keys are
// put once and seldom read again, and the cache would have to follow
// every range deletion. A read of a key later than every committed entry
// (the common case: new rows come after the old ones) does not reach
// Pebble at all.

// timedKeyLen is the length of the time that begins a key of a variable
// ordered by event time.
const timedKeyLen = 8

// TimedNanos returns t as the time that begins a key of a variable
// ordered by event time (EncodingByEventTime): Unix nanoseconds, clamped
// as TimerInstant clamps.
func TimedNanos(t time.Time) int64 {
	// Within these seconds UnixNano is exact and inside the clamp: one
	// read of the seconds instead of two comparisons of times, per row.
	const minSec, maxSec = math.MinInt64/int64(time.Second) + 1, math.MaxInt64/int64(time.Second) - 1
	if s := t.Unix(); s > minSec && s < maxSec {
		return t.UnixNano()
	}
	return timerNanos(t)
}

// AppendTimedKey appends the start of such a key: ns (from TimedNanos) in
// 8 bytes whose order is time order. The rest of the key follows.
func AppendTimedKey(b []byte, ns int64) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(ns)^1<<63)
}

// timedState is an operator's variable ordered by event time, as the loop
// keeps it: its id and its count of entries.
type timedState struct {
	id uint8
	// index says its entries are not state rows (StateInfo.Index).
	index  bool
	counts timedCounts
}

// timedVar is what a batch knows of a variable ordered by event time.
type timedVar struct {
	v Var
	// latest is the latest instant (appendInstant's bytes as a number)
	// among the variable's committed entries; known says it was read.
	latest uint64
	known  bool
	// deleted is the end (exclusive) of the instants the batch has
	// deleted (0: none): reads below it see the deletion through the
	// batch's index.
	deleted uint64
	// puts are the instants of the entries the batch has put, in order,
	// for the loop's count once it commits (timedCounts).
	puts []uint64
}

// timed returns the batch's record of v.
func (b *StateBatch) timed(v Var) *timedVar {
	for i := range b.timedVars {
		if b.timedVars[i].v == v {
			return &b.timedVars[i]
		}
	}
	b.timedVars = append(b.timedVars, timedVar{v: v})
	return &b.timedVars[len(b.timedVars)-1]
}

// timedPrefix appends the prefix of v's entries: up to the length of the
// time.
func timedPrefix(k []byte, v Var) []byte {
	k = appendScope(k, statePrefix, v.Scope)
	return append(k, v.Variable, timedKeyLen)
}

// instantBits reads the 8 bytes of an instant (appendInstant's) as a
// number of the same order.
func instantBits(key []byte) uint64 { return binary.BigEndian.Uint64(key) }

// HasTimed reports whether variable v, ordered by event time, holds the
// entry of key (which begins with its time, see AppendTimedKey), as the
// batch sees it. unwritten says the batch has not written the entry (the
// caller knows): a key later than every committed entry is then known
// absent without a read.
func (b *StateBatch) HasTimed(v Var, key []byte, unwritten bool) (bool, error) {
	if err := b.store.Err(); err != nil {
		return false, err
	}
	if len(key) < timedKeyLen {
		return false, fmt.Errorf("streamgen: a key of %d bytes does not begin with its event time", len(key))
	}
	t := b.timed(v)
	at := instantBits(key)
	if unwritten && at >= t.deleted {
		if !t.known {
			if err := b.readLatest(t); err != nil {
				return false, err
			}
		}
		if at > t.latest {
			return false, nil
		}
	}
	b.key = append(entryKey(b.key[:0], v, key[:timedKeyLen]), key[timedKeyLen:]...)
	var (
		closer io.Closer
		err    error
	)
	if unwritten && at >= t.deleted {
		if err := b.settled(); err != nil {
			return false, err
		}
		_, closer, err = b.db.Get(b.key)
	} else {
		ib, ierr := b.indexed()
		if ierr != nil {
			return false, ierr
		}
		_, closer, err = ib.Get(b.key)
	}
	if errors.Is(err, pebble.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, b.readError(err)
	}
	closer.Close()
	return true, nil
}

// readLatest reads the latest committed instant of t's variable.
func (b *StateBatch) readLatest(t *timedVar) error {
	if err := b.settled(); err != nil {
		return err
	}
	lower := timedPrefix(nil, t.v)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return b.readError(err)
	}
	t.known, t.latest = true, 0
	if it.Last() {
		if k := it.Key(); len(k) >= len(lower)+timedKeyLen {
			t.latest = instantBits(k[len(lower):])
		}
	}
	if err := it.Close(); err != nil {
		return b.readError(err)
	}
	return nil
}

// PutTimed adds the entry of key (which begins with its time) to
// variable v, ordered by event time. The entry must not exist (HasTimed):
// each put counts as one more entry.
func (b *StateBatch) PutTimed(v Var, key []byte) error {
	if len(key) < timedKeyLen {
		return fmt.Errorf("streamgen: a key of %d bytes does not begin with its event time", len(key))
	}
	t := b.timed(v)
	at := instantBits(key)
	if len(t.puts) == cap(t.puts) {
		t.puts = slices.Grow(t.puts, max(len(t.puts), 1024)) // doubling: a batch puts many
	}
	t.puts = append(t.puts, at)
	b.key = append(entryKey(b.key[:0], v, key[:timedKeyLen]), key[timedKeyLen:]...)
	b.written = true
	if err := b.b.Set(b.key, nil, nil); err != nil {
		return fmt.Errorf("streamgen: write state: %w", err)
	}
	return nil
}

// deleteTimedThrough removes the entries of variable v, ordered by event
// time, whose time is at or before until: one range deletion. It returns
// how many there were: counts' committed ones (see timedCounts) and the
// batch's own.
func (b *StateBatch) deleteTimedThrough(v Var, until time.Time, counts *timedCounts) (int64, error) {
	lower := timedPrefix(nil, v)
	// Entries hold clamped instants (TimerInstant), so end+1 does not
	// wrap: the range ends just after until's entries.
	end := instantBits(appendInstant(nil, until))
	upper := binary.BigEndian.AppendUint64(append([]byte(nil), lower...), end+1)
	t := b.timed(v)
	n := counts.through(end)
	for _, at := range t.puts {
		if at <= end {
			n++
		}
	}
	if err := b.b.DeleteRange(lower, upper, nil); err != nil {
		return 0, fmt.Errorf("streamgen: write state: %w", err)
	}
	b.written = true
	t.deleted = max(t.deleted, end+1)
	return n, nil
}

// timedCounts is the loop's count of the committed entries of a variable
// ordered by event time, by time, in memory: what a range deletion
// removes is counted (for the state rows a progress report gives)
// without reading it. runs are sorted instants, one run per committed
// batch that put entries, less those deleted since: 8 bytes an entry.
// They are read from the store once, at the query's first batch, and
// then follow the batches the query commits (commit). Owned by the
// query's goroutine.
type timedCounts struct {
	loaded bool
	runs   []timedRun
	// spare is the memory of a run wholly deleted, for a batch's puts.
	spare []uint64
}

// timedRun is a run of sorted instants; those before from are deleted.
type timedRun struct {
	at   []uint64
	from int
}

// begin prepares batch b's puts to v: at the query's first batch, it
// reads the instants of v's committed entries.
func (c *timedCounts) begin(b *StateBatch, v Var) error {
	if t := b.timed(v); t.puts == nil {
		t.puts, c.spare = c.spare[:0], nil
	}
	if c.loaded {
		return nil
	}
	lower := timedPrefix(nil, v)
	var run []uint64
	err := b.scanFrom(lower, prefixEnd(lower), true, func(k, _ []byte) error {
		if len(k) < len(lower)+timedKeyLen {
			return fmt.Errorf("streamgen: state entry %x does not begin with its event time", k)
		}
		run = append(run, instantBits(k[len(lower):]))
		return nil
	})
	if err != nil {
		return err
	}
	c.loaded = true
	if len(run) > 0 {
		c.runs = append(c.runs, timedRun{at: run}) // in key order: sorted
	}
	return nil
}

// through counts the entries at or before end (instantBits).
func (c *timedCounts) through(end uint64) int64 {
	var n int64
	for _, r := range c.runs {
		live := r.at[r.from:]
		n += int64(sort.Search(len(live), func(i int) bool { return live[i] > end }))
	}
	return n
}

// commit follows a committed batch: its deletion of v's entries through
// its record's deleted, then its puts.
func (c *timedCounts) commit(b *StateBatch, v Var) {
	var t *timedVar
	for i := range b.timedVars {
		if b.timedVars[i].v == v {
			t = &b.timedVars[i]
		}
	}
	if t == nil {
		return
	}
	if t.deleted > 0 {
		kept := c.runs[:0]
		for _, r := range c.runs {
			live := r.at[r.from:]
			r.from += sort.Search(len(live), func(i int) bool { return live[i] >= t.deleted })
			if r.from < len(r.at) {
				kept = append(kept, r)
			} else if cap(r.at) > cap(c.spare) {
				c.spare = r.at[:0]
			}
		}
		clear(c.runs[len(kept):])
		c.runs = kept
	}
	run := t.puts[:0] // the batch is done with its puts
	for _, at := range t.puts {
		if at >= t.deleted {
			run = append(run, at)
		}
	}
	t.puts = nil
	if len(run) > 0 {
		slices.Sort(run)
		c.runs = append(c.runs, timedRun{at: run})
	} else if cap(run) > cap(c.spare) {
		c.spare = run
	}
}

// HasTimedThrough reports whether variable v, ordered by event time, has
// a committed entry at or before until: then a batch runs to remove it,
// even without new data.
func (b *StateBatch) HasTimedThrough(v Var, until time.Time) (bool, error) {
	if err := b.settled(); err != nil {
		return false, err
	}
	lower := timedPrefix(nil, v)
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return false, b.readError(err)
	}
	due := false
	if it.First() {
		k := it.Key()
		due = len(k) >= len(lower)+timedKeyLen && instantBits(k[len(lower):]) <= instantBits(appendInstant(nil, until))
	}
	if err := it.Close(); err != nil {
		return false, b.readError(err)
	}
	return due, nil
}

// SeenTimed reports whether the key's entry of variable, a variable
// ordered by event time (EncodingByEventTime), exists: the key begins
// with its time (AppendTimedKey).
func (k *KeyState) SeenTimed(variable uint8) (bool, error) {
	ok, err := k.b.state.HasTimed(k.v(variable), k.key, !k.b.ops[k.op].isDirty(k.group))
	return ok, k.check(err)
}

// PutTimed adds the key's entry to variable, a variable ordered by event
// time: the loop removes it once the watermark reaches the time the key
// begins with.
func (k *KeyState) PutTimed(variable uint8) error {
	k.wrote()
	return k.check(k.b.state.PutTimed(k.v(variable), k.key))
}

// PutTimed adds the entry of key, which begins with its time (see
// AppendTimedKey), to operator op's variable ordered by event time, for an
// operator that keeps an index of its own state there (StateInfo.Index):
// the loop removes the entry once the watermark reaches the time. Its key
// is no group's, and no KeyState reads it.
func (b *Batch) PutTimed(op int, variable uint8, key []byte) error {
	if err := b.state.PutTimed(Var{Scope: b.ops[op].scope, Variable: variable}, key); err != nil {
		return b.fail(err)
	}
	return nil
}

// ScanTimedThrough calls fn with the key of each entry of operator op's
// variable ordered by event time whose time is at or before until, in
// order of time, as committed before the batch (an operator puts none
// that is due in the same batch): what the loop removes at the end of
// the batch's calls, read before it does. The key is valid during the
// call; fn must not write the variable, nor start another scan of the
// committed state (they share one iterator: see KeyState.ScanCommitted).
func (b *Batch) ScanTimedThrough(op int, variable uint8, until time.Time, fn func(key []byte) error) error {
	v := Var{Scope: b.ops[op].scope, Variable: variable}
	lower := timedPrefix(nil, v)
	end := instantBits(appendInstant(nil, until))
	upper := binary.BigEndian.AppendUint64(append([]byte(nil), lower...), end+1)
	if end == 1<<64-1 {
		upper = prefixEnd(lower)
	}
	err := b.state.scanFrom(lower, upper, true, func(k, _ []byte) error { return fn(k[len(lower):]) })
	if err != nil {
		return b.fail(err)
	}
	return nil
}
