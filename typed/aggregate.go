package typed

import (
	"context"
	"fmt"
	"reflect"
	"time"
	"unsafe"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// Streaming aggregations, as Spark's groupBy(...).agg(...) on a stream:
// over a keyed stream (AggregateByKey), over event-time windows of a
// keyed stream (GroupByWindow, then AggregateWindows), with the output
// modes of Spark:
//
//   - Complete: every batch writes the whole result table; state is never
//     evicted, and a watermark changes nothing.
//   - Update: every batch writes the rows that changed in it; with a
//     watermark, windows whose end is at or before the watermark are
//     evicted.
//   - Append: a window's row is written once, in the batch after the
//     watermark passes its end, and evicted; it needs windows and a
//     watermark.
//
// Late rows are decided as in Spark, by the group and the output mode:
// in Update and Append mode a row is dropped from each of its windows
// whose end is at or before the watermark the batch before ran with,
// Spark's late-event watermark (the batch evicts by its own), and counted
// once for each, in numRowsDroppedByWatermark (a row late for all its
// windows also goes to LateRows); over session windows a row is late
// when the session it alone would make, from its event time to the gap
// after it, ends at or before that watermark (so a row within the gap
// of the watermark may still open or extend a session; with
// JoiningOpenSessions a late row still joins an open session it
// touches, and a dropped one is counted and sent to LateRows as the batch
// runs); over the windows
// of a TimeDifference d, a row at t is late when the window that begins
// after it, which ends at t+1ms+d, ends at or before that watermark
// (Kafka Streams' rule: every window the row would change has closed),
// and a row that is not late changes only the windows still open; in
// Complete mode, and in AggregateByKey, whose key has no event time,
// nothing is dropped.

// WindowedStream is a stream grouped by event-time window and key, ready
// for AggregateWindows.
type WindowedStream[K comparable, T any] struct {
	s         Stream[T]
	windows   Windows
	eventTime func(*T) time.Time
	key       func(*T) K
	codec     keyCodec[K]
	// gapOf, set by GapBy, is each row's session gap.
	gapOf func(*T) time.Duration
}

// GapBy gives each row a session gap of its own, gap(row), in place of
// Session's, as Spark's session_window(time, gapExpr) does: a row at t
// opens [t, t+gap(row)), and a key's sessions that overlap or touch
// merge as with a fixed gap. A row whose gap is zero or negative is
// dropped, as in Spark. With a watermark, a row is late when its own
// [t, t+gap(row)) ends at or before the watermark: the aggregation drops
// it as it reaches it, counts it among its late rows, and has the
// WithWatermark send the row it read to its LateRows sink (with
// JoiningOpenSessions, the batch decides: see there). Session's gap is
// still what the checkpoint records of the windows. With windows other
// than Session's, the query's Start fails. gap is called from the
// query's goroutine, up to twice per row that reaches the aggregation.
func (ws WindowedStream[K, T]) GapBy(gap func(row *T) time.Duration) WindowedStream[K, T] {
	if ws.windows.kind != session {
		ws.s.p = ws.s.p.failed("streamgen: GapBy needs Session windows, not %v", ws.windows)
	}
	ws.gapOf = gap
	return ws
}

// GroupByWindow groups the rows of s by the event-time windows eventTime
// falls in, and by key, as Spark's groupBy(window(time, ...), key). Use
// a key of struct{} (func(*T) struct{}{ return struct{}{} }) to group by
// window alone.
func GroupByWindow[T any, K comparable](s Stream[T], eventTime func(*T) time.Time, w Windows, key func(*T) K) WindowedStream[K, T] {
	if err := w.validate(); err != nil {
		s.p = s.p.failed("%v", err)
	}
	c, err := newKeyCodec[K]()
	if err != nil {
		s.p = s.p.failed("%v", err)
	}
	return WindowedStream[K, T]{s: s, windows: w, eventTime: eventTime, key: key, codec: c}
}

// windowedRow is a row in one of its windows, whose bounds are in
// nanoseconds since 1970 (as Windows.assign gives them); id tells the
// window from the others (Windows.id: its start, or, for cumulative
// windows, its end).
type windowedRow[T any] struct {
	id, end int64
	row     *T
}

// windowKey is the grouping key of a windowed aggregation: Windowed[K]
// with the window's id in nanoseconds (Windows.id: its start, and its
// end is the start plus the windows' size; for cumulative windows, its
// end), which hashes and compares faster than two time.Time values. It
// encodes as Windowed[K] does (windowedCodec).
type windowKey[K comparable] struct {
	start int64
	key   K
}

// AggregateWindows folds each window's rows of each key with agg, and
// writes, for each window and key, the row that row makes of the
// window, the key and the aggregate. The output mode is the query's
// (Complete, Update or Append; Update unless set, but for session
// windows, which Spark refuses in Update mode: Append unless set): see
// the package's notes above. With a watermark, tumbling, sliding and
// cumulative windows close (forgotten, and in Append mode written) at
// most runtime.WindowClosesPerBatch windows (of a key each) in a batch,
// and leave the rest to the batches after it, so that a window with
// millions of keys does not hold all their rows in one batch: an
// operator after it that needs a window's rows together waits for the
// watermark to pass the window (an event-time timeout at its end),
// which it sees only once they are all in. Sliding and cumulative
// windows with a watermark, in Update or Append mode, keep each key's
// rows by slices, each window the merge of its slices' when it closes
// (see slices.go): agg's Merge is called once per slice a window holds,
// and the windows of a key that close together count as one towards
// runtime.WindowClosesPerBatch.
func AggregateWindows[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ws WindowedStream[K, T], agg Aggregator[T, Acc, Out], row func(w Window, key K, out Out) Row,
) Stream[Row] {
	switch ws.windows.kind {
	case session:
		return aggregateSessions[K, T, Acc, Out, Row, PA](ws, agg, row)
	case timeDifference:
		return aggregateTimeDifference[K, T, Acc, Out, Row, PA](ws, agg, row)
	}
	p := ws.s.p
	var assigned Stream[windowedRow[T]]
	assigned.p = p
	fn := funcPointer(ws.eventTime)
	// Late rows are dropped here, before the aggregation's call (which
	// gets none of the checks; see aggregate's end), for windows of one a
	// row: attached within the aggregation's addOperator, whose slot is
	// the last being attached.
	assigned.attach = func(c *compiler, emit func(*windowedRow[T])) {
		var wr windowedRow[T]
		slot := c.attaching[len(c.attaching)-1]
		dropsLate := p.watermarked
		if size, offset, ok := ws.windows.oneEach(); ok {
			// One window a row: its start, without a call per window, and
			// without a division while the rows stay in the window of the
			// row before ([start, end) is empty until the first).
			start, end := int64(1), int64(0)
			ws.s.attach(c, func(t *T) {
				// A row pushed by the WithWatermark whose time it is was
				// judged there, for this operator, by its window (lateFor):
				// late there if and only if late here.
				ns, judged := eventNanosOf(c, t, fn, ws.eventTime)
				if !judged && c.outOfRange(ns) {
					return
				}
				if ns < start || ns >= end {
					start = ns - mod(ns-offset, size)
					end = start + size
				}
				if dropsLate && !judged && windowLate(c, slot.index, end) {
					return
				}
				wr.row, wr.id, wr.end = t, start, end
				emit(&wr)
			})
			return
		}
		ws.s.attach(c, func(t *T) {
			wr.row = t
			ns, pushed := eventNanosOf(c, t, fn, ws.eventTime)
			if !pushed && c.outOfRange(ns) {
				return
			}
			ws.windows.assign(ns, func(start, end int64) {
				if dropsLate && windowLate(c, slot.index, end) {
					return
				}
				wr.id, wr.end = ws.windows.id(start, end), end
				emit(&wr)
			})
		})
	}
	window := func(id int64) Window {
		start, end := ws.windows.bounds(id)
		return Window{Start: time.Unix(0, start).UTC(), End: time.Unix(0, end).UTC()}
	}
	keyed := KeyedStream[windowKey[K], windowedRow[T]]{
		s:     assigned,
		key:   func(r *windowedRow[T]) windowKey[K] { return windowKey[K]{r.id, ws.key(r.row)} },
		codec: windowedCodec(ws.codec, ws.windows),
	}
	// The group front keeps the windows of the rows just before: of no
	// use when a row falls in more windows than it keeps, whose every
	// row would take the slot of a window the next row needs.
	front := func() groupFront[windowKey[K], windowedRow[T]] { return newWindowFront(ws.key) }
	if ws.windows.perRow() > windowFrontSlots {
		front = nil
	}
	if ws.windows.perRow() > 1 {
		// Sliding or cumulative windows, more than one a row.
		return aggregateSliding[K, T, Acc, Out, Row, PA](ws, agg, row, keyed, window, front)
	}
	return aggregate[windowKey[K], windowedRow[T], T, Acc, Out, Row, PA](keyed, agg,
		func(r *windowedRow[T]) *T { return r.row },
		nil, // late rows are dropped as their windows are assigned
		ws.windows.lateFor,
		func(g windowKey[K]) (Window, bool) { return window(g.start), true },
		func(g windowKey[K], out Out) Row { return row(window(g.start), g.key, out) },
		"windowedAggregate", front)
}

// aggregateSliding is AggregateWindows over sliding or cumulative
// windows (more than one a row): by slices, unless the query has no
// watermark, its output mode is Complete, its aggregator folds rows in
// the order they came (arrivalOrdered; but a checkpoint by slices goes on
// by slices), or its checkpoint keeps a state row per window (see
// slices.go); keyed and the rest are the per-window operator's.
func aggregateSliding[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ws WindowedStream[K, T], agg Aggregator[T, Acc, Out], row func(w Window, key K, out Out) Row,
	keyed KeyedStream[windowKey[K], windowedRow[T]], window func(int64) Window, front func() groupFront[windowKey[K], windowedRow[T]],
) Stream[Row] {
	return once(Stream[Row]{p: ws.s.p, attach: func(c *compiler, emit func(*Row)) {
		perWindow, windowAdd, info := newAggregate[windowKey[K], windowedRow[T], T, Acc, Out, Row, PA](c, keyed, agg,
			func(r *windowedRow[T]) *T { return r.row },
			func(r *windowedRow[T]) int64 { return r.end },
			ws.windows.lateFor,
			func(g windowKey[K]) (Window, bool) { return window(g.start), true },
			func(g windowKey[K], out Out) Row { return row(window(g.start), g.key, out) },
			"windowedAggregate", front, emit)
		sliced, sliceAdd := newSliceOp[K, T, Acc, Out, Row, PA](c, ws, agg, row, emit)
		fn := funcPointer(ws.eventTime)
		op := &slidingOp[K, T, Acc, Out, Row, PA]{sliced: sliced, perWindow: perWindow, useSlices: !perWindowSliding.Load()}
		if _, ok := any(agg).(arrivalOrdered); ok && !slicesWhateverTheOrder.Load() {
			// A window by slices merges them in order of time: its rows
			// would be folded in event-time order across slices.
			op.useSlices, op.why, op.ordered = false, foldsInArrivalOrder, true
		}
		if !ws.s.p.watermarked {
			op.useSlices, op.why = false, "its input has no watermark"
		}
		info.prepare = func(context.Context) error {
			if c.outputMode == Complete && op.useSlices {
				op.useSlices, op.why = false, "it is in Complete mode"
			}
			return nil
		}
		var wr windowedRow[T]
		index := c.addOperator(func() {
			ws.s.attach(c, func(t *T) {
				if op.useSlices {
					sliceAdd(t)
					return
				}
				wr.row = t
				ns, pushed := eventNanosOf(c, t, fn, ws.eventTime)
				if !pushed && c.outOfRange(ns) {
					return
				}
				ws.windows.assign(ns, func(start, end int64) {
					wr.id, wr.end = ws.windows.id(start, end), end
					windowAdd(&wr)
				})
			})
		}, op, info)
		perWindow.index, sliced.index = index, index
	}})
}

// AggregateByKey folds each key's rows with agg, and writes, for each
// key, the row that row makes of the key and the aggregate, as Spark's
// groupByKey(...).agg(...). State is kept for every key, as in Spark: a
// key is never evicted. The output mode is Complete or Update (the
// default).
func AggregateByKey[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ks KeyedStream[K, T], agg Aggregator[T, Acc, Out], row func(key K, out Out) Row,
) Stream[Row] {
	return aggregate[K, T, T, Acc, Out, Row, PA](ks, agg,
		func(r *T) *T { return r }, nil, nil,
		func(K) (Window, bool) { return Window{}, false },
		row, "aggregate", nil)
}

// windowLate reports whether a row's window, which ends at end (Unix
// nanoseconds), is late for the operator op, and counts the row as
// dropped there when it is: it ends at or before the watermark rows are
// late by, unless the output mode is Complete.
func windowLate(c *compiler, op int, end int64) bool {
	b := c.batch
	if late := b.LateWatermarkOf(op); c.outputMode != Complete && !late.IsZero() && end <= late.UnixNano() {
		b.DropLate(op)
		return true
	}
	return false
}

// aggregate is the operator of AggregateByKey and of AggregateWindows
// over tumbling, sliding and cumulative windows: G is the grouping key, R the rows it
// gathers, In what the aggregator takes of them. end, when not nil, is
// the end of a row's window in nanoseconds: the row is late once the
// watermark reaches it, unless the output mode is Complete.
func aggregate[G comparable, R, In, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ks KeyedStream[G, R], agg Aggregator[In, Acc, Out], in func(*R) *In, end func(*R) int64,
	lateWindows func(et, wm time.Time) int64,
	windowOf func(G) (Window, bool), output func(G, Out) Row, kind string,
	newFront func() groupFront[G, R],
) Stream[Row] {
	return once(Stream[Row]{p: ks.s.p, attach: func(c *compiler, emit func(*Row)) {
		op, add, info := newAggregate[G, R, In, Acc, Out, Row, PA](c, ks, agg, in, end, lateWindows, windowOf, output, kind, newFront, emit)
		op.index = c.addOperator(func() { ks.s.attach(c, add) }, op, info)
	}})
}

// newAggregate makes the operator of aggregate in the query c compiles,
// and returns it, the function that gives it a row, and its description
// for c; the caller adds it to c.
func newAggregate[G comparable, R, In, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	c *compiler, ks KeyedStream[G, R], agg Aggregator[In, Acc, Out], in func(*R) *In, end func(*R) int64,
	lateWindows func(et, wm time.Time) int64,
	windowOf func(G) (Window, bool), output func(G, Out) Row, kind string,
	newFront func() groupFront[G, R], emit func(*Row),
) (*aggOp[G, R, In, Acc, Out, Row, PA], func(*R), operatorInfo) {
	_, windowed := windowOf(*new(G))
	name := fmt.Sprintf("%T", agg)
	opInfo := operatorInfo{kind: kind, function: name, aggregation: true, windowed: windowed, watermarked: ks.s.p.watermarked}
	dropsLate := windowed && ks.s.p.watermarked && lateWindows != nil
	op := &aggOp[G, R, In, Acc, Out, Row, PA]{gatherer: newGatherer(c, ks, kind+" ("+name+")"),
		agg: agg, in: in, windowOf: windowOf, output: output, emitDown: emit, windowed: windowed}
	if newFront != nil {
		op.front = newFront()
	}
	op.info = runtime.OperatorInfo{
		Kind: kind, Name: name, KeyType: ks.codec.typeName, LegacyKeyType: ks.codec.legacyTypeName, UseKeys: ks.codec.useKeys, ParseKey: ks.codec.parseJSON, Key: ks.codec.schema, Windows: ks.codec.windows,
		States:        []runtime.StateInfo{{Name: "aggregate", Schema: PA(new(Acc)).StreamSchema(), Kind: "value", Encoding: runtime.EncodingRecord}},
		DropsLateRows: dropsLate,
	}
	describe(&op.info, agg)
	info := opInfo // this query's: late reads its compiler
	if dropsLate {
		info.late = func(et, wm time.Time) int64 {
			if c.outputMode == Complete {
				return 0
			}
			return lateWindows(et, wm)
		}
	}
	if windowed && ks.s.p.watermarked {
		op.info.TimeMode = runtime.EventTimeMode
	}
	add := op.fold
	if end != nil && ks.s.p.watermarked {
		add = func(r *R) {
			if windowLate(c, op.index, end(r)) {
				return
			}
			op.fold(r)
		}
	}
	op.mode = &c.outputMode
	op.info.OutputMode = "" // set by the query's mode, in the checkpoint
	op.modeName = func() string { return c.outputMode.String() }
	return op, add, info
}

// aggOp is an aggregation of one query.
type aggOp[G comparable, R, In, Acc, Out, Row any, PA codec.RecordPtr[Acc]] struct {
	gatherer[G, R]
	index    int
	info     runtime.OperatorInfo
	agg      Aggregator[In, Acc, Out]
	in       func(*R) *In
	windowOf func(G) (Window, bool)
	output   func(G, Out) Row
	emitDown func(*Row)
	windowed bool
	mode     *OutputMode
	modeName func() string
	acc      Acc
	buf      []byte
	// partials are the batch's accumulators, by group: rows are folded as
	// they come (Spark's partial aggregation), not kept.
	partials []Acc
	// front, when not nil, finds the group of most rows faster than the
	// group map (see windowFront).
	front groupFront[G, R]
}

// groupFront is a faster way to a row's group than a lookup of its whole
// key in the gatherer's map: find answers for the rows it was told of by
// add, and forgets them all at reset (the end of a batch).
type groupFront[G comparable, R any] interface {
	find(r *R) (group int32, ok bool)
	add(r *R, group int32)
	reset()
}

// fold adds a row to its group's partial accumulator.
func (o *aggOp[G, R, In, Acc, Out, Row, PA]) fold(r *R) {
	if o.front != nil {
		if g, ok := o.front.find(r); ok {
			o.partials[g] = o.agg.Add(o.partials[g], o.in(r))
			return
		}
	}
	g, added := o.foldGroup(o.key(r))
	if added {
		o.partials = append(o.partials, o.agg.Zero())
	}
	if o.front != nil {
		o.front.add(r, g)
	}
	o.partials[g] = o.agg.Add(o.partials[g], o.in(r))
}

func (o *aggOp[G, R, In, Acc, Out, Row, PA]) Info() runtime.OperatorInfo {
	info := o.info
	info.OutputMode = o.modeName()
	// A window's timer fires once, when it closes.
	info.OneShotTimers = o.windowed
	if info.OutputMode != Complete.String() {
		// Spark's StateStoreSaveExec: in Append and Update modes.
		info.NoData = runtime.NoDataOnWatermark
	}
	return info
}
func (o *aggOp[G, R, In, Acc, Out, Row, PA]) Groups() *runtime.Groups { return &o.groups }
func (o *aggOp[G, R, In, Acc, Out, Row, PA]) EndBatch() {
	o.gatherer.end()
	clear(o.partials)
	o.partials = o.partials[:0]
	if o.front != nil {
		o.front.reset()
	}
}

// load reads the key's accumulator into o.acc; ok is false when it has
// none (then o.acc is Zero).
func (o *aggOp[G, R, In, Acc, Out, Row, PA]) load(k *runtime.KeyState) (ok bool, err error) {
	raw, ok, err := k.Get(0, nil)
	if err != nil {
		return false, err
	}
	if !ok {
		o.acc = o.agg.Zero()
		return false, nil
	}
	var acc Acc
	if err := PA(&acc).UnmarshalBinary(raw); err != nil {
		return false, k.Fail(fmt.Errorf("stored aggregate does not decode: %w", unprefixed(err)))
	}
	o.acc = acc
	return true, nil
}

func (o *aggOp[G, R, In, Acc, Out, Row, PA]) emit(g G) {
	r := o.output(g, o.agg.Result(o.acc))
	o.emitDown(&r)
}

func (o *aggOp[G, R, In, Acc, Out, Row, PA]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, _ []int32) error {
	existed, err := o.load(k)
	if err != nil {
		return err
	}
	if existed {
		o.acc = o.agg.Merge(o.acc, o.partials[group])
	} else {
		o.acc = o.partials[group]
	}
	if o.buf, err = PA(&o.acc).AppendBinary(o.buf[:0]); err != nil {
		return k.Fail(fmt.Errorf("aggregate: %w", unprefixed(err)))
	}
	if err := k.Put(0, nil, o.buf); err != nil {
		return err
	}
	k.Updated(!existed)
	g := o.keys[group]
	// A window is closed, by a timer at its end, once the watermark is at
	// or past the end (the timer fires when the watermark is strictly
	// after it, so it sits one nanosecond before the end).
	if w, ok := o.windowOf(g); ok && !existed && o.info.TimeMode == runtime.EventTimeMode && *o.mode != Complete {
		if err := k.RegisterTimer(w.End.Add(-time.Nanosecond)); err != nil {
			return err
		}
	}
	if *o.mode == Update {
		o.emit(g)
	}
	return nil
}

// RowsDone writes, in Complete mode, the whole result table.
func (o *aggOp[G, R, In, Acc, Out, Row, PA]) RowsDone(ctx context.Context, b *runtime.Batch) error {
	if *o.mode != Complete {
		return nil
	}
	var g G
	return b.ScanState(o.index, 0, func(key, value []byte) error {
		if err := o.codec.decode(key, &g); err != nil {
			return fmt.Errorf("a stored key does not decode: %w", unprefixed(err))
		}
		var acc Acc
		if err := PA(&acc).UnmarshalBinary(value); err != nil {
			return fmt.Errorf("stored aggregate does not decode: %w", unprefixed(err))
		}
		o.acc = acc
		o.emit(g)
		return nil
	})
}

// HandleTimer closes a window: in Append mode its row is written, then
// its state is evicted.
func (o *aggOp[G, R, In, Acc, Out, Row, PA]) HandleTimer(ctx context.Context, k *runtime.KeyState, _ time.Time) error {
	var g G
	if err := o.codec.decode(k.Key(), &g); err != nil {
		return fmt.Errorf("a timer's key does not decode: %w", unprefixed(err))
	}
	existed, err := o.load(k)
	if err != nil || !existed {
		return err
	}
	if *o.mode == Append {
		o.emit(g)
	}
	if err := k.Delete(0, nil); err != nil {
		return err
	}
	k.Removed()
	return nil // the timer is one-shot (Info): the runtime removes it
}

// windowFront finds the group of a windowed row by its window's id,
// among the few windows of the batch's latest rows, and its key, in a map
// of the key alone: rows come in rough order of event time, so most fall
// in a window seen just before, and a map of keys hashes less than one
// of windowed keys.
type windowFront[K comparable, T any] struct {
	key    func(*T) K
	n      int // slots in use
	next   int // the slot that add takes next when all are in use
	ids    [windowFrontSlots]int64
	groups [windowFrontSlots]map[K]int32
	// strings, when K is a string (of any name), keeps the keys in
	// place of groups: a table that hashes short keys faster than a
	// map.
	strings *[windowFrontSlots]*stringGroups
}

// windowFrontSlots is how many windows a windowFront keeps.
const windowFrontSlots = 8

func newWindowFront[K comparable, T any](key func(*T) K) *windowFront[K, T] {
	f := &windowFront[K, T]{key: key}
	if reflect.TypeFor[K]().Kind() == reflect.String {
		f.strings = new([windowFrontSlots]*stringGroups)
	}
	return f
}

// asString is k, a string of some name.
func asString[K any](k *K) string { return *(*string)(unsafe.Pointer(k)) }

func (f *windowFront[K, T]) find(r *windowedRow[T]) (int32, bool) {
	for i := range f.n {
		if f.ids[i] == r.id {
			k := f.key(r.row)
			if f.strings != nil {
				return f.strings[i].find(asString(&k))
			}
			g, ok := f.groups[i][k]
			return g, ok
		}
	}
	return 0, false
}

func (f *windowFront[K, T]) add(r *windowedRow[T], g int32) {
	i := 0
	for ; i < f.n && f.ids[i] != r.id; i++ {
	}
	if i == f.n { // a window not kept: take a slot
		if f.n < windowFrontSlots {
			f.n++
		} else {
			i, f.next = f.next, (f.next+1)%windowFrontSlots
		}
		f.ids[i] = r.id
		f.clearSlot(i)
	}
	k := f.key(r.row)
	if f.strings != nil {
		f.strings[i].set(asString(&k), g)
		return
	}
	f.groups[i][k] = g
}

// clearSlot empties slot i, making its table when it has none.
func (f *windowFront[K, T]) clearSlot(i int) {
	if f.strings != nil {
		if f.strings[i] == nil {
			f.strings[i] = newStringGroups()
		}
		f.strings[i].clear()
		return
	}
	if f.groups[i] == nil {
		f.groups[i] = map[K]int32{}
	}
	clear(f.groups[i])
}

func (f *windowFront[K, T]) reset() {
	for i := range f.n {
		f.clearSlot(i)
	}
	f.n, f.next = 0, 0
}
