package runtime

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"
)

// Batch is one micro-batch as the plan's stages and operators see it:
// its id, its watermark and processing time, and what they report of it.
// The loop makes one per batch and passes it to the calls of that batch
// only; it is not safe for concurrent use.
type Batch struct {
	// ID is the batch id: the epoch sinks use to stay idempotent.
	ID int64
	// Watermark is the event-time watermark in effect for the whole batch
	// (computed from the batches before it); zero when the plan has none.
	Watermark time.Time
	// LateWatermark is the watermark rows are late by: a row at or before
	// it (a window that ends at or before it) is dropped before a
	// stateful operator. It is the watermark the batch before ran with,
	// which is what that batch evicted by, as Spark's
	// eventTimeWatermarkForLateEvents: a row that its operator has not
	// yet closed a window or a session for is not late, though it is at
	// or before Watermark (this batch evicts it, with the rows an
	// operator before wrote as the watermark passed them). In a query's
	// first batch it is the batch's own (the epoch); zero when the plan
	// has no watermark, or the batch before ran without one.
	LateWatermark time.Time
	// lateHeld are, by operator, what the rows reaching it are late by
	// where it ran the batch before with the watermark held (see
	// LateWatermarkOf); nil when none did.
	lateHeld []time.Time
	// Now is the batch's processing time: constant within the batch, and
	// the same in a batch run again after a failure as in its first
	// attempt.
	Now time.Time
	// First is true for the first batch of a new checkpoint.
	First bool
	// MemoryBudget is the bytes an operator's gathered rows may take
	// before it spills them to SpillDir (see BatchMemory).
	MemoryBudget int64
	SpillDir     string

	// started is when this attempt of the batch started, for its report,
	// and lastTrigger when the trigger before it did (zero: none).
	started, lastTrigger time.Time

	state  *StateBatch
	ops    []opRun
	inputs []inputRun
	// watermarks are by watermark and partition (see watermarkKey), active
	// by partition (see partitionKey).
	watermarks map[string]time.Time
	// marked is true when the batches before had marks: the watermark is
	// then reported even while it is still the epoch.
	marked bool
	// lastWatermarks are, by watermark, the latest partition's, until
	// flushWatermark.
	lastWatermarks []partitionWatermark
	// restored are the keys of watermarks the query restored whose
	// partitions have had no rows since (Progress.RestoredMarks), less those
	// whose rows came in the batch.
	restored    map[string]bool
	active      map[string]bool
	deadLetters []DeadLetter
	outputRows  int64
	// otherSinkRows are the rows written to the query's further sinks
	// (Output.Sink), in order.
	otherSinkRows []int64
	// eventTimes are the statistics of the event times seen (Spark's
	// eventTime: min, max, avg).
	eventTimes eventTimeStats
	// err is the first state error: it fails the batch whatever the
	// operator did with it. Operators that handle keys concurrently record
	// it from their goroutines.
	err atomic.Pointer[error]
	// live is the query's running batch, which the reading publishes
	// to; nil outside a query (ReadAll).
	live *liveBatch
	// tables are the static tables the batch used (see UseTable).
	tables []TableProgress
}

// UseTable records that the batch joins its rows with version of a static
// table, for its progress report: the first call for a name counts.
func (b *Batch) UseTable(t TableProgress) {
	for _, u := range b.tables {
		if u.Name == t.Name {
			return
		}
	}
	b.tables = append(b.tables, t)
}

type inputRun struct {
	name string
	rows int64
	// unpublished are the rows read and not yet added to live.
	unpublished int64
	// counter is the source as an InputCounter, nil when it is not one;
	// current is the input of its last record, planned and done its
	// inputs in the batch.
	counter       InputCounter
	current       string
	planned, done int64
	// active is the partition MarkActive last marked, when marked is
	// set: the rows of a partition come together, so most marks are of
	// it.
	active string
	marked bool
}

// opRun is an operator's share of a batch.
type opRun struct {
	scope            Scope
	updated, removed int64
	late             int64
	// total is the operator's state rows after the batch's calls so far;
	// metrics its own figures (see KeyState.AddMetric).
	total    int64
	metrics  map[string]int64
	keyState KeyState
	// dirty marks the groups whose state the batch has written: a read of
	// a group that is not dirty reads the committed state directly, unless
	// a key with no group (an initial state's, a timer's) was written.
	dirty           []bool
	ungroupedWrites bool
	// oneShot says the operator's timers are one-shot
	// (OperatorInfo.OneShotTimers).
	oneShot bool
	// left, when not zero, is the instant of the first of the operator's
	// due timers that the batch left to the next, past
	// WindowClosesPerBatch.
	left time.Time
	// held, when not zero, is the watermark the operator ran with, held
	// behind the batch's at the first window an operator before it left.
	held time.Time
}

func (o *opRun) isDirty(group int32) bool {
	return group < 0 || o.ungroupedWrites || int(group) >= len(o.dirty) || o.dirty[group]
}

// LateWatermarkOf returns the watermark that the rows reaching operator
// op (its index in the plan) are late by: LateWatermark, or, where op ran
// the batch before with the watermark held behind the query's (see
// WindowClosesPerBatch), the one it ran with. A stage that judges
// whether a row is late for the operator it goes to asks this; in the
// operator's own calls, LateWatermark is its.
func (b *Batch) LateWatermarkOf(op int) time.Time {
	if op >= 0 && op < len(b.lateHeld) && !b.lateHeld[op].IsZero() {
		return b.lateHeld[op]
	}
	return b.LateWatermark
}

// partitionKey names a partition of an input in the committed progress:
// the source's name and the partition.
func partitionKey(source, partition string) string { return source + "#" + partition }

// AddInputRows counts n rows read from input (decoded or not).
func (b *Batch) AddInputRows(input int, n int64) {
	b.inputs[input].rows += n
	if b.live != nil {
		b.live.rows.Add(n)
	}
}

// publishEvery is how many rows of a source RecordRead counts before it
// tells the running batch's status: one atomic add per that many rows.
const publishEvery = 1024

// RecordRead counts a record read from input (decoded or not), as
// AddInputRows(input, 1), for a reader that reads record by record: the
// query's Status sees the count every 1024 records, and, for a source
// that counts its inputs (InputCounter), each input as the next begins.
func (b *Batch) RecordRead(input int, r Record) {
	in := &b.inputs[input]
	in.rows++
	if b.live == nil {
		return
	}
	if in.unpublished++; in.unpublished == publishEvery {
		b.live.rows.Add(in.unpublished)
		in.unpublished = 0
	}
	if in.counter != nil {
		if name := in.counter.InputOf(r); name != in.current {
			if in.current != "" && in.done < in.planned {
				in.done++
				b.live.inputsDone.Add(1)
			}
			in.current = name
		}
	}
}

// inputRead publishes what is left of input's counts once its source has
// been read to the end: its rows, and all its inputs as done (those with
// no record too).
func (b *Batch) inputRead(input int) {
	in := &b.inputs[input]
	if b.live == nil {
		return
	}
	b.live.rows.Add(in.unpublished)
	b.live.inputsDone.Add(in.planned - in.done)
	in.unpublished, in.done = 0, in.planned
}

// AdvanceWatermark records a row of input's partition, under the plan's
// watermark mark, whose event time, less the watermark's delay, is t: the
// partition's mark, for later batches, is the largest such t.
func (b *Batch) AdvanceWatermark(mark, input int, partition string, t time.Time) {
	b.advance(mark, input, partition, ClampedNanos(t))
}

// ObserveRow records a row of input's partition with event time ns
// (Unix nanoseconds, as ClampedNanos gives them), under the plan's
// watermark mark and its delay: ObserveEventTime and AdvanceWatermark
// (of the time ns, cut to the millisecond before it as Spark's
// watermark takes event times, less delay) in one call, for the per-row
// path.
func (b *Batch) ObserveRow(mark, input int, partition string, ns int64, delay time.Duration) {
	b.eventTimes.addNanos(ns)
	if r := ns % int64(time.Millisecond); r != 0 && ns > math.MinInt64+int64(time.Millisecond) {
		ns -= r
		if r < 0 {
			ns -= int64(time.Millisecond)
		}
	}
	if ns >= math.MinInt64+int64(delay) {
		ns -= int64(delay)
	}
	b.advance(mark, input, partition, ns)
}

// ClampedNanos is t in Unix nanoseconds, the least or greatest int64 for
// a time outside their range (years before 1678 or after 2262), which
// UnixNano leaves undefined. It is safe for concurrent use.
func ClampedNanos(t time.Time) int64 {
	const minSec, maxSec = math.MinInt64/int64(time.Second) + 1, math.MaxInt64/int64(time.Second) - 1
	switch s := t.Unix(); {
	case s < minSec:
		return math.MinInt64
	case s > maxSec:
		return math.MaxInt64
	}
	return t.UnixNano()
}

// advance is AdvanceWatermark in Unix nanoseconds.
func (b *Batch) advance(mark, input int, partition string, ns int64) {
	// Rows come in runs of one partition: the run's largest time is kept
	// aside, for each watermark (the branches of one input each have
	// theirs, and their rows alternate), and reaches the map when the
	// partition changes.
	if mark >= len(b.lastWatermarks) {
		b.lastWatermarks = append(b.lastWatermarks, make([]partitionWatermark, mark+1-len(b.lastWatermarks))...)
	}
	w := &b.lastWatermarks[mark]
	if w.set && w.input == input && w.partition == partition {
		w.ns = max(w.ns, ns)
		return
	}
	b.flushMark(w)
	*w = partitionWatermark{set: true, mark: mark, input: input, partition: partition, ns: ns}
}

// partitionWatermark is the watermark of the partition whose rows came
// last, not yet in Batch.watermarks.
type partitionWatermark struct {
	set         bool
	mark, input int
	partition   string
	ns          int64 // Unix nanoseconds
}

// flushWatermark moves the last partitions' watermarks into the map.
func (b *Batch) flushWatermark() {
	for i := range b.lastWatermarks {
		b.flushMark(&b.lastWatermarks[i])
	}
}

// flushMark moves w, a last partition's watermark, into the map.
func (b *Batch) flushMark(w *partitionWatermark) {
	if !w.set {
		return
	}
	t := time.Unix(0, w.ns).UTC()
	k := watermarkKey(w.mark, b.inputs[w.input].name, w.partition)
	if b.restored[k] {
		// Its first rows since the restart: its mark starts again from
		// them, as Spark's does.
		delete(b.restored, k)
		delete(b.watermarks, k)
	}
	if m, ok := b.watermarks[k]; !ok || t.After(m) {
		b.watermarks[k] = t
	}
	w.set = false
}

// eventTimeStats accumulates event times, in Unix nanoseconds: their
// least, greatest and mean. The mean is kept as a sum of differences from
// the first time, so a row costs no division.
type eventTimeStats struct {
	n        int64
	min, max int64
	base     int64   // the first time
	sum      float64 // of each time less base
}

func (s *eventTimeStats) add(t time.Time) { s.addNanos(ClampedNanos(t)) }

func (s *eventTimeStats) addNanos(ns int64) {
	if s.n == 0 {
		s.min, s.max, s.base = ns, ns, ns
	} else {
		s.min, s.max = min(s.min, ns), max(s.max, ns)
	}
	s.n++
	s.sum += float64(ns - s.base)
}

// mean returns the mean time, in Unix nanoseconds.
func (s *eventTimeStats) mean() int64 { return s.base + int64(s.sum/float64(s.n)) }

// ObserveEventTime adds a row's event time to the batch's statistics
// (the eventTime of its progress report: min, max and avg).
func (b *Batch) ObserveEventTime(t time.Time) { b.eventTimes.add(t) }

// MarkActive records that input's partition had rows in the batch, which
// keeps it in the watermark when partitions may go idle.
func (b *Batch) MarkActive(input int, partition string) {
	in := &b.inputs[input]
	if in.marked && in.active == partition {
		return
	}
	in.active, in.marked = partition, true
	b.active[partitionKey(in.name, partition)] = true
}

// DeadLetter records a record that could not be read or decoded.
func (b *Batch) DeadLetter(d DeadLetter) { b.deadLetters = append(b.deadLetters, d) }

// ScanState calls fn with each key of operator op and its value of
// variable (the entries with no suffix), in key order, as the batch sees
// them: an operator's whole state, as Complete mode writes it.
func (b *Batch) ScanState(op int, variable uint8, fn func(key, value []byte) error) error {
	err := b.state.ScanVar(Var{Scope: b.ops[op].scope, Variable: variable}, func(key, suffix, value []byte) error {
		if len(suffix) > 0 {
			return nil
		}
		return fn(key, value)
	})
	if err != nil {
		return b.fail(err)
	}
	return nil
}

// DropLate counts a row dropped before operator op for being late.
func (b *Batch) DropLate(op int) { b.ops[op].late++ }

// Go runs fn on a goroutine of its own that the query waits for, as an
// operator that handles keys concurrently waits for its calls before the
// batch goes on: Stop, AwaitTermination and ProcessAllAvailable called
// from fn know it for the query's own (see ErrAwaitedByQuery). Go must be
// called from the call of the batch that the query made (HandleRows',
// RowsDone's), not from another goroutine.
//
//go:noinline
func (b *Batch) Go(fn func()) {
	go fn()
}

// NewKeyState returns a KeyState of its own for group's key of operator
// op, for an operator that handles keys concurrently: each call gets one,
// valid until the batch ends. The batch's state is still not safe for
// concurrent use: the operator serialises the calls to its KeyStates.
func (b *Batch) NewKeyState(op int, groups *Groups, group int32) *KeyState {
	k := &KeyState{}
	k.reset(b, op, groups.Key(group), group)
	return k
}

// KeyStateOf returns a KeyState of its own for key of operator op, outside
// any group (an initial state's key, which may have no rows), valid until
// the batch ends.
func (b *Batch) KeyStateOf(op int, key []byte) *KeyState {
	k := &KeyState{}
	k.reset(b, op, append([]byte(nil), key...), -1)
	return k
}

// KeyFor returns the state of key for operator op, outside any group, for
// an operator's work after its keys' calls (RowsDone): the KeyState is the
// operator's own, valid until the next call, and key is not copied.
func (b *Batch) KeyFor(op int, key []byte) *KeyState {
	k := &b.ops[op].keyState
	k.reset(b, op, key, -1)
	return k
}

// KeyOf returns the state of group's key for operator op (see KeyState),
// for an operator's InitialState. The KeyState is valid until the next
// call.
func (b *Batch) KeyOf(op int, groups *Groups, group int32) *KeyState {
	k := &b.ops[op].keyState
	k.reset(b, op, groups.Key(group), group)
	return k
}

// fail records a state error; the first one fails the batch.
func (b *Batch) fail(err error) error {
	b.err.CompareAndSwap(nil, &err)
	return err
}

// failure returns the batch's first state error, or nil.
func (b *Batch) failure() error {
	if p := b.err.Load(); p != nil {
		return *p
	}
	return nil
}

// Groups gathers a batch's rows by key: each key is a group, numbered in
// order of its first row, and each row belongs to a group, rows numbered in
// arrival order. The stage before an operator keeps the rows themselves in
// its own typed slice, at their numbers, and its own index from keys to
// groups (a Go map of the typed key is cheaper than one of encoded bytes):
// it calls NewGroup for a key it has not seen in the batch and AddRow for
// every row. Not safe for concurrent use.
type Groups struct {
	// keys holds the groups' encoded keys one after another; ends[i] is
	// where key i ends.
	keys    []byte
	keyEnds []int32
	keyOf   []int32
	// order and ends are the rows sorted by group, made by sort.
	order, ends []int32
	// index is the groups by encoded key that GroupOf keeps.
	index map[string]int32
}

// NewGroup adds a group for the encoded key, which must not have one in
// the batch, and returns its number. The key is copied.
func (g *Groups) NewGroup(key []byte) int32 {
	g.keys = append(g.keys, key...)
	g.keyEnds = append(g.keyEnds, int32(len(g.keys)))
	return int32(len(g.keyEnds) - 1)
}

// GroupOf returns the group of the encoded key, adding one when the batch
// has none, and whether it added it. It is NewGroup for an operator whose
// index of typed keys can miss a key the batch has: keys that differ as
// values but encode alike (a NaN, unequal to itself; two times of one
// instant and offset in two *time.Location values), which must be one
// group, as their state is one entry. An operator uses GroupOf or
// NewGroup, not both.
func (g *Groups) GroupOf(key []byte) (group int32, added bool) {
	if i, ok := g.index[string(key)]; ok {
		return i, false
	}
	i := g.NewGroup(key)
	if g.index == nil {
		g.index = make(map[string]int32)
	}
	g.index[string(key)] = i
	return i, true
}

// Lookup returns the group of the encoded key, if the batch has one, for
// an operator that uses GroupOf (with NewGroup alone, it finds none).
func (g *Groups) Lookup(key []byte) (group int32, ok bool) {
	group, ok = g.index[string(key)]
	return group, ok
}

// AddRow adds the next row, to group.
func (g *Groups) AddRow(group int32) { g.keyOf = append(g.keyOf, group) }

// Len returns the number of groups.
func (g *Groups) Len() int { return len(g.keyEnds) }

// Rows returns the number of rows gathered.
func (g *Groups) Rows() int { return len(g.keyOf) }

// Key returns the encoded key of group i, valid until the next NewGroup.
func (g *Groups) Key(i int32) []byte {
	start := int32(0)
	if i > 0 {
		start = g.keyEnds[i-1]
	}
	return g.keys[start:g.keyEnds[i]:g.keyEnds[i]]
}

// sort orders the row numbers by group (a counting sort: each group's
// rows stay in arrival order).
func (g *Groups) sort() {
	n := len(g.keyEnds)
	g.ends = slices.Grow(g.ends[:0], n)[:n]
	clear(g.ends)
	for _, i := range g.keyOf {
		g.ends[i]++
	}
	for i := 1; i < n; i++ {
		g.ends[i] += g.ends[i-1]
	}
	g.order = slices.Grow(g.order[:0], len(g.keyOf))[:len(g.keyOf)]
	// Fill from the back, so that each group's rows end up in arrival
	// order with no second array of positions.
	next := g.ends
	for j := len(g.keyOf) - 1; j >= 0; j-- {
		i := g.keyOf[j]
		next[i]--
		g.order[next[i]] = int32(j)
	}
	// next (that is, ends) now holds each group's start; turn it back.
	for i := range n - 1 {
		g.ends[i] = g.ends[i+1]
	}
	if n > 0 {
		g.ends[n-1] = int32(len(g.keyOf))
	}
}

// rowsOf returns the row numbers of group i, after sort.
func (g *Groups) rowsOf(i int) []int32 { return g.rowsBetween(i, i+1) }

// rowsBetween returns the row numbers of groups i to j-1, after sort.
func (g *Groups) rowsBetween(i, j int) []int32 {
	start := int32(0)
	if i > 0 {
		start = g.ends[i-1]
	}
	return g.order[start:g.ends[j-1]]
}

// Reset empties the groups for the next batch, keeping their memory when
// it is of a size to reuse.
func (g *Groups) Reset() {
	g.keys, g.keyEnds, g.keyOf = g.keys[:0], g.keyEnds[:0], g.keyOf[:0]
	if len(g.index) > 1<<21 {
		g.index = nil // a map only grows: drop one of a huge batch
	} else {
		clear(g.index)
	}
}

// KeyState is one key's state and timers in one operator, during one
// call of the operator's handler. Reads see the batch's earlier writes.
// A state error fails the batch even if the operator ignores it. Counting
// (Updated, Removed) is the operator's: the loop cannot tell what a row
// is. Valid during the call only; not safe for concurrent use.
type KeyState struct {
	b     *Batch
	op    int
	scope Scope
	key   []byte
	// group is the key's group, or -1 (a timer's key).
	group int32
}

func (k *KeyState) reset(b *Batch, op int, key []byte, group int32) {
	k.b, k.op, k.scope, k.key, k.group = b, op, b.ops[op].scope, key, group
}

// wrote marks the key's state written in the batch.
func (k *KeyState) wrote() {
	o := &k.b.ops[k.op]
	if k.group < 0 {
		o.ungroupedWrites = true
		return
	}
	if n := int(k.group) + 1; n > len(o.dirty) {
		o.dirty = slices.Grow(o.dirty, n-len(o.dirty))[:n]
	}
	o.dirty[k.group] = true
}

// Key returns the encoded key.
func (k *KeyState) Key() []byte { return k.key }

// Fail records err as the batch's failure, as a state error is: the
// batch fails whatever the caller does with the error it returns. For an
// operator's own errors about state (a value that does not decode).
func (k *KeyState) Fail(err error) error { return k.check(err) }

// Batch returns the batch of the call.
func (k *KeyState) Batch() *Batch { return k.b }

func (k *KeyState) check(err error) error {
	if err != nil {
		return k.b.fail(fmt.Errorf("key %q: %w", k.key, err))
	}
	return nil
}

func (k *KeyState) v(variable uint8) Var { return Var{Scope: k.scope, Variable: variable} }

// Get returns the key's value of variable (suffix nil) or an entry of it;
// the value is valid until the next call.
func (k *KeyState) Get(variable uint8, suffix []byte) ([]byte, bool, error) {
	unwritten := !k.b.ops[k.op].isDirty(k.group)
	v, ok, err := k.b.state.get(k.v(variable), k.key, suffix, unwritten)
	return v, ok, k.check(err)
}

// Written reports whether the batch may hold writes of the key's state
// (from an earlier call, or an initial state): until it does, a caller that
// tracks its own writes may read the rest with GetCommitted.
func (k *KeyState) Written() bool { return k.b.ops[k.op].isDirty(k.group) }

// GetCommitted reads the key's entry as committed, without the batch's
// writes: for a caller that knows the batch has not written it.
func (k *KeyState) GetCommitted(variable uint8, suffix []byte) ([]byte, bool, error) {
	v, ok, err := k.b.state.get(k.v(variable), k.key, suffix, true)
	return v, ok, k.check(err)
}

// Put sets the key's value of variable (suffix nil) or an entry of it.
func (k *KeyState) Put(variable uint8, suffix, value []byte) error {
	k.wrote()
	return k.check(k.b.state.Put(k.v(variable), k.key, suffix, value))
}

// PutExpiring sets the key's value of variable (suffix nil) or an entry of
// it, expiring at at (zero: never) on clock: see AppendExpiring for the
// layout, which Get then returns.
func (k *KeyState) PutExpiring(variable uint8, suffix, value []byte, at time.Time, clock ExpiryClock) error {
	k.wrote()
	return k.check(k.b.state.PutExpiring(k.v(variable), k.key, suffix, value, at, clock))
}

// LastSuffix returns the greatest suffix among the key's entries of
// variable (a copy); ok is false when it has none.
func (k *KeyState) LastSuffix(variable uint8) (suffix []byte, ok bool, err error) {
	suffix, ok, err = k.b.state.LastSuffix(k.v(variable), k.key)
	return suffix, ok, k.check(err)
}

// Delete removes the key's value of variable (suffix nil) or an entry.
func (k *KeyState) Delete(variable uint8, suffix []byte) error {
	k.wrote()
	return k.check(k.b.state.Delete(k.v(variable), k.key, suffix))
}

// StopScan, returned by a KeyState scan's fn, ends the scan there: the
// scan returns nil, and the batch goes on. Any other error from fn fails
// the batch.
var StopScan = errors.New("stop the scan")

// Scan calls fn for each entry of the key's variable, in suffix order;
// fn must not write the key's state nor start another scan.
func (k *KeyState) Scan(variable uint8, fn func(suffix, value []byte) error) error {
	return k.checkScan(k.b.state.Scan(k.v(variable), k.key, fn))
}

// checkScan is check, with StopScan ending the scan well.
func (k *KeyState) checkScan(err error) error {
	if errors.Is(err, StopScan) {
		return nil
	}
	return k.check(err)
}

// ScanRange calls fn for each entry of the key's variable whose suffix is
// at or after from and before to (nil: no end), in suffix order; fn must
// not write the key's state nor start another scan.
func (k *KeyState) ScanRange(variable uint8, from, to []byte, fn func(suffix, value []byte) error) error {
	return k.checkScan(k.b.state.ScanRange(k.v(variable), k.key, from, to, fn))
}

// ScanCommitted is ScanRange over the committed state alone, without the
// batch's writes: for an operator that keeps what the batch wrote in the
// range itself, so that the batch's writes need no index (a Pebble batch
// that is read is indexed, and each write to it costs a sorted insert).
// The batch's scans of the committed state share one iterator: fn must
// not start another (ScanCommitted, Batch.ScanTimedThrough).
func (k *KeyState) ScanCommitted(variable uint8, from, to []byte, fn func(suffix, value []byte) error) error {
	return k.checkScan(k.b.state.ScanRangeCommitted(k.v(variable), k.key, from, to, fn))
}

// Clear removes every entry of the key's variable.
func (k *KeyState) Clear(variable uint8) error {
	k.wrote()
	return k.check(k.b.state.DeleteKey(k.v(variable), k.key))
}

// RegisterTimer sets a timer of the key at at (see TimerInstant).
func (k *KeyState) RegisterTimer(at time.Time) error {
	if k.b.ops[k.op].oneShot {
		return k.check(k.b.state.setByExpiry(k.scope, k.key, at))
	}
	return k.check(k.b.state.RegisterTimer(k.scope, k.key, at))
}

// DeleteTimer removes the key's timer at at, if there is one.
func (k *KeyState) DeleteTimer(at time.Time) error {
	if k.b.ops[k.op].oneShot {
		return k.check(k.b.state.deleteByExpiry(k.scope, k.key, at))
	}
	return k.check(k.b.state.DeleteTimer(k.scope, k.key, at))
}

// errOneShotTimers is the error of listing the timers of an operator whose
// timers are one-shot.
var errOneShotTimers = errors.New("streamgen: the operator's timers are one-shot (OperatorInfo.OneShotTimers): they are not listed by key")

// Timers calls fn with each of the key's timers, in order. It fails for
// an operator whose timers are one-shot (OperatorInfo.OneShotTimers).
func (k *KeyState) Timers(fn func(at time.Time) error) error {
	if k.b.ops[k.op].oneShot {
		return k.check(errOneShotTimers)
	}
	return k.check(k.b.state.KeyTimers(k.scope, k.key, fn))
}

// Updated counts a state row written by the call; added says that the
// row is new, which adds it to the operator's total.
func (k *KeyState) Updated(added bool) {
	o := &k.b.ops[k.op]
	o.updated++
	if added {
		o.total++
	}
}

// Inserted counts a state row written without a call of the operator's
// function (an initial state): the row adds to the total but is not an
// update.
func (k *KeyState) Inserted() { k.b.ops[k.op].total++ }

// AddMetric adds delta to the operator's figure name, kept from batch to
// batch in the checkpoint and reported in the progress (CustomMetrics).
func (k *KeyState) AddMetric(name string, delta int64) { k.b.AddMetric(k.op, name, delta) }

// AddMetric adds delta to operator op's figure name, as KeyState.AddMetric
// does, for a figure of no one key (the rows an operator drops before
// they have one).
func (b *Batch) AddMetric(op int, name string, delta int64) {
	o := &b.ops[op]
	if o.metrics == nil {
		o.metrics = map[string]int64{}
	}
	o.metrics[name] += delta
}

// Dropped counts a state row removed by the call out of the operator's
// total only, not as removed in its report: Spark's join reports so the
// rows it removes as it pads them.
func (k *KeyState) Dropped() { k.b.ops[k.op].total-- }

// Removed counts a state row removed by the call.
func (k *KeyState) Removed() {
	o := &k.b.ops[k.op]
	o.removed++
	o.total--
}
