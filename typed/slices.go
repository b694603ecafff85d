package typed

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// Sliding and cumulative windows by slices. A row of windows
// Sliding(size, slide) falls in size/slide of them (rounded up), one of
// Cumulate(step, size) in up to size/step; kept per window, each row
// updates as many accumulators, and each batch writes as many state
// rows for a key. Cut event time instead into slices as long as the
// greatest common divisor of size and slide, or as the step: every
// window holds a slice whole or not at all, so a row updates one slice,
// and a window's aggregate is the merge of its slices', done once, when
// it closes (as Flink's window operators share slices between windows).
// A key's open slices are one state row (runtime.EncodingSlices), with
// the instant through which its windows have closed; its one timer sits
// at the end of its earliest window still open. When it fires, every
// window of the key that the watermark has passed closes
// (runtime.WindowClosesPerBatch counts them as one), and a batch's rows
// of a key first close the windows the late watermark has passed that a
// bound left to later, since rows late for them may follow.
//
// Slices need windows that close: the query has a watermark, and its
// output mode is Update or Append (in Complete mode, or without a
// watermark, no window is ever evicted, and a key's one row would grow
// with every slice of its history). A checkpoint written with a state
// row per window keeps that layout (slidingOp.ChooseLayout).

// perWindowSliding makes the queries built after it keep sliding and
// cumulative windows' state per window, as versions before slices did
// (tests: a checkpoint of that layout).
var perWindowSliding atomic.Bool

// slicesWhateverTheOrder makes the queries built after it keep sliding
// and cumulative windows by slices whatever their aggregator, as versions
// before arrivalOrdered did (tests: a checkpoint of that layout).
var slicesWhateverTheOrder atomic.Bool

// sliceAcc is a slice's accumulator: start is its start, in Unix
// nanoseconds.
type sliceAcc[Acc any] struct {
	start int64
	acc   Acc
}

// partialSlice is a batch's accumulator of a slice of a key: next is the
// index, in sliceOp.pool, of the key's slice added before (-1: none).
type partialSlice[Acc any] struct {
	start int64
	acc   Acc
	next  int32
}

// sliceOp is an aggregation over sliding or cumulative windows, by
// slices, of one query.
type sliceOp[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]] struct {
	gatherer[K, T]
	modalInfo
	index   int
	agg     Aggregator[T, Acc, Out]
	windows Windows
	slice   int64 // the slices' length, in nanoseconds
	// The windows' ends fall every endStep (the slide, or a cumulative
	// window's step) at endPhase modulo it.
	endStep, endPhase int64
	eventTime         func(*T) time.Time
	output            func(Window, K, Out) Row
	emitDown          func(*Row)
	// heads is, by group, the index in pool of the group's partial
	// accumulator added last (-1: none): rows come in rough order of
	// event time, so it is most often the slice of the next row too.
	heads []int32
	pool  []partialSlice[Acc]
	// lengths is, by group, the number of its partial accumulators; far
	// finds those of a group with more than chainWalk of them (a batch
	// of a backlog, hours of event time), whose chain would be walked
	// for every row.
	lengths []int32
	far     map[groupSlice]int32
	// touched holds the batch's accumulators of the key being handled,
	// in order of start; merged is where they merge with its slices.
	touched []sliceAcc[Acc]
	merged  []sliceAcc[Acc]
	// The state of the key being handled: the instant through which its
	// windows have closed (math.MinInt64: none yet), and its open
	// slices, in order of start.
	closed int64
	slices []sliceAcc[Acc]
	ends   []int64
	buf    []byte
	// shared says the accumulator holds memory a copy shares (slices,
	// maps, pointers), which Merge may change or pass on: a slice's,
	// merged into several windows, is copied first (through copyBuf).
	shared  bool
	copyBuf []byte
}

// newSliceOp makes the operator that aggregates ws by slices in the
// query c compiles, and returns it and the function that gives it a
// row; the caller adds it to c, and sets its index.
func newSliceOp[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	c *compiler, ws WindowedStream[K, T], agg Aggregator[T, Acc, Out], row func(w Window, key K, out Out) Row, emit func(*Row),
) (*sliceOp[K, T, Acc, Out, Row, PA], func(*T)) {
	name := fmt.Sprintf("%T", agg)
	ks := KeyedStream[K, T]{s: ws.s, key: ws.key, codec: ws.codec}
	op := &sliceOp[K, T, Acc, Out, Row, PA]{gatherer: newGatherer(c, ks, "windowedAggregate ("+name+")"),
		agg: agg, windows: ws.windows, slice: sliceLength(ws.windows),
		endStep: int64(ws.windows.slide), endPhase: int64(ws.windows.offset + ws.windows.size),
		eventTime: ws.eventTime, output: row, emitDown: emit,
		shared: !holdsNoReferences(reflect.TypeFor[Acc]())}
	op.mode = &c.outputMode
	op.info = runtime.OperatorInfo{
		Kind: "windowedAggregate", Name: name, KeyType: ws.codec.typeName, LegacyKeyType: ws.codec.legacyTypeName, UseKeys: ws.codec.useKeys, ParseKey: ws.codec.parseJSON, Key: ws.codec.schema,
		Windows:       ws.windows.meta(),
		States:        []runtime.StateInfo{{Name: "slices", Schema: PA(new(Acc)).StreamSchema(), Kind: "value", Encoding: runtime.EncodingSlices}},
		DropsLateRows: true,
		TimeMode:      runtime.EventTimeMode,
		// The key's one timer fires once; HandleTimer sets the next,
		// after the watermark.
		OneShotTimers: true,
	}
	if ws.windows.kind == cumulate {
		op.endStep, op.endPhase = int64(ws.windows.step), int64(ws.windows.offset)
	}
	describe(&op.info, agg)
	fn := funcPointer(ws.eventTime)
	add := func(r *T) {
		ns, pushed := eventNanosOf(c, r, fn, op.eventTime)
		if !pushed && c.outOfRange(ns) {
			return
		}
		s := op.sliceOf(ns)
		// (Every window that holds the slice ends at or after the slice's
		// end: a row whose slice ends after the watermark is late for
		// none.)
		if late := c.batch.LateWatermarkOf(op.index); !late.IsZero() && s+op.slice <= late.UnixNano() {
			// The row is dropped from each of its windows that ends at or
			// before the watermark, as windows kept apart drop it.
			lw, dropped, kept := late.UnixNano(), 0, 0
			op.windows.assign(s, func(_, end int64) {
				if end <= lw {
					dropped++
				} else {
					kept++
				}
			})
			for range dropped {
				c.batch.DropLate(op.index)
			}
			if kept == 0 {
				return
			}
		}
		op.fold(r, s)
	}
	return op, add
}

// groupSlice names a group's partial accumulator of a slice.
type groupSlice struct {
	group int32
	start int64
}

// chainWalk is the most partial accumulators of a group that fold walks
// through to find a row's.
const chainWalk = 4

// sliceLength is the length of the slices of sliding windows w (the
// greatest common divisor of their size and slide) or of cumulative
// ones (their step).
func sliceLength(w Windows) int64 {
	if w.kind == cumulate {
		return int64(w.step)
	}
	return gcd(int64(w.size), int64(w.slide))
}

// gcd is the greatest common divisor of a and b, both positive.
func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// sliceOf is the start of the slice that holds ns.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) sliceOf(ns int64) int64 {
	return ns - mod(ns-int64(o.windows.offset), o.slice)
}

// lastEnd is the end of the last window that holds slice s: the latest
// that starts at or before it (a cumulative window's slide is its size:
// its period's last).
func (o *sliceOp[K, T, Acc, Out, Row, PA]) lastEnd(s int64) int64 {
	return s - mod(s-int64(o.windows.offset), int64(o.windows.slide)) + int64(o.windows.size)
}

// ceilEnd is the first instant at or after x at which a window ends.
// Those that hold slice s end from ceilEnd(s+o.slice) to lastEnd(s),
// every endStep.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) ceilEnd(x int64) int64 {
	return x + mod(o.endPhase-x, o.endStep)
}

// startOf is the start of the window that ends at end.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) startOf(end int64) int64 {
	start, _ := o.windows.bounds(o.windows.id(end-int64(o.windows.size), end))
	return start
}

// fold adds a row to its key's partial accumulator of slice s.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) fold(r *T, s int64) {
	g, added := o.foldGroup(o.key(r))
	if added {
		o.heads, o.lengths = append(o.heads, -1), append(o.lengths, 0)
	}
	if o.lengths[g] <= chainWalk {
		for i := o.heads[g]; i >= 0; i = o.pool[i].next {
			if p := &o.pool[i]; p.start == s {
				p.acc = o.agg.Add(p.acc, r)
				return
			}
		}
	} else if i, ok := o.far[groupSlice{g, s}]; ok {
		o.pool[i].acc = o.agg.Add(o.pool[i].acc, r)
		return
	}
	o.pool = append(o.pool, partialSlice[Acc]{start: s, acc: o.agg.Add(o.agg.Zero(), r), next: o.heads[g]})
	o.heads[g] = int32(len(o.pool) - 1)
	if o.lengths[g]++; o.lengths[g] > chainWalk {
		if o.far == nil {
			o.far = map[groupSlice]int32{}
		}
		if o.lengths[g] == chainWalk+1 {
			for i := o.heads[g]; i >= 0; i = o.pool[i].next {
				o.far[groupSlice{g, o.pool[i].start}] = i
			}
		} else {
			o.far[groupSlice{g, s}] = o.heads[g]
		}
	}
}

func (o *sliceOp[K, T, Acc, Out, Row, PA]) Info() runtime.OperatorInfo { return o.modalInfo.Info() }
func (o *sliceOp[K, T, Acc, Out, Row, PA]) Groups() *runtime.Groups    { return &o.groups }
func (o *sliceOp[K, T, Acc, Out, Row, PA]) EndBatch() {
	o.gatherer.end()
	clear(o.pool)
	o.pool, o.heads, o.lengths = o.pool[:0], o.heads[:0], o.lengths[:0]
	if len(o.far) > 1<<16 {
		o.far = nil // a map only grows: drop one of a huge batch
	}
	clear(o.far)
}

// decode reads a key's row (runtime.EncodingSlices) into o.closed and
// o.slices.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) decode(raw []byte) error {
	corrupt := fmt.Errorf("stored slices are corrupt")
	o.slices = o.slices[:0]
	closed, w := binary.Varint(raw)
	if w <= 0 {
		return corrupt
	}
	o.closed = closed
	return readTimedAccs[Acc, PA](raw[w:], corrupt, func(start int64, acc Acc) error {
		if n := len(o.slices); n > 0 && o.slices[n-1].start >= start {
			return corrupt
		}
		o.slices = append(o.slices, sliceAcc[Acc]{start: start, acc: acc})
		return nil
	})
}

func (o *sliceOp[K, T, Acc, Out, Row, PA]) encode() ([]byte, error) {
	b, err := appendTimedAccs[Acc, PA](binary.AppendVarint(o.buf[:0], o.closed), len(o.slices), func(i int) (int64, *Acc) {
		return o.slices[i].start, &o.slices[i].acc
	})
	if err != nil {
		return nil, err
	}
	o.buf = b
	return b, nil
}

// load reads the key's row; ok is false when it has none (then no
// window of it has closed, and it has no slices).
func (o *sliceOp[K, T, Acc, Out, Row, PA]) load(k *runtime.KeyState) (bool, error) {
	o.closed, o.slices = math.MinInt64, o.slices[:0]
	return loadValue(k, o.decode)
}

// pending is the end of the key's earliest window still open that holds
// a slice of it; ok is false when there is none.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) pending() (end int64, ok bool) {
	for _, s := range o.slices {
		// (closed+1 does not overflow: closed is at most the watermark.)
		if e := o.ceilEnd(max(o.closed+1, s.start+o.slice)); e <= o.lastEnd(s.start) && (!ok || e < end) {
			end, ok = e, true
		}
	}
	return end, ok
}

// close closes the key's windows that end after o.closed and at or
// before through: in Append mode each that holds a slice is written, in
// order of end; then the slices that no open window holds are dropped.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) close(key K, through int64) {
	if through <= o.closed {
		return
	}
	if *o.mode == Append {
		// The ends of the windows of each slice in turn, those of a
		// slice after those of the slices before it: one sweep, each
		// window once, however many windows a slice is in.
		next := int64(math.MinInt64) // the first end not yet written
		if o.closed != math.MinInt64 {
			next = o.ceilEnd(o.closed + 1)
		}
		for _, s := range o.slices {
			hi := min(o.lastEnd(s.start), through)
			for e := max(next, o.ceilEnd(s.start+o.slice)); e <= hi; e += o.endStep {
				o.write(key, e)
				next = e + o.endStep
			}
		}
	}
	o.closed = through
	o.slices = slices.DeleteFunc(o.slices, func(s sliceAcc[Acc]) bool { return o.lastEnd(s.start) <= through })
}

// write writes the row of the key's window that ends at end: the merge
// of the slices it holds.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) write(key K, end int64) {
	start := o.startOf(end)
	acc := o.agg.Zero()
	from, _ := slices.BinarySearchFunc(o.slices, start, func(s sliceAcc[Acc], start int64) int { return cmp.Compare(s.start, start) })
	for i := from; i < len(o.slices); i++ {
		s := &o.slices[i]
		if s.start >= end {
			break
		}
		next := s.acc
		if o.shared {
			next = copyAcc[Acc, PA](&o.copyBuf, next, o.what)
		}
		acc = o.agg.Merge(acc, next)
	}
	r := o.output(Window{Start: time.Unix(0, start).UTC(), End: time.Unix(0, end).UTC()}, key, o.agg.Result(acc))
	o.emitDown(&r)
}

// addBatch merges the batch's accumulators of the key of group into its
// slices, and keeps them in o.touched, in order of start.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) addBatch(group int32) {
	in := o.touched[:0]
	for i := o.heads[group]; i >= 0; i = o.pool[i].next {
		in = append(in, sliceAcc[Acc]{start: o.pool[i].start, acc: o.pool[i].acc})
	}
	slices.SortFunc(in, func(a, b sliceAcc[Acc]) int { return cmp.Compare(a.start, b.start) })
	out, i := o.merged[:0], 0
	for _, p := range in {
		for i < len(o.slices) && o.slices[i].start < p.start {
			out = append(out, o.slices[i])
			i++
		}
		if i < len(o.slices) && o.slices[i].start == p.start {
			out = append(out, sliceAcc[Acc]{start: p.start, acc: o.agg.Merge(o.slices[i].acc, p.acc)})
			i++
			continue
		}
		out = append(out, p)
	}
	out = append(out, o.slices[i:]...)
	clear(o.slices) // (the accumulators out holds now)
	o.slices, o.merged, o.touched = out, o.slices[:0], in
}

// moveTimer moves the key's timer from the end of its earliest open
// window before (had: it had one) to the one now.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) moveTimer(k *runtime.KeyState, before int64, had bool) error {
	now, has := o.pending()
	if had && has && now == before {
		return nil
	}
	if had {
		if err := k.DeleteTimer(time.Unix(0, before-1).UTC()); err != nil {
			return err
		}
	}
	if has {
		// The timer fires once the watermark is at or past the end.
		return k.RegisterTimer(time.Unix(0, now-1).UTC())
	}
	return nil
}

// unixOrMin is t in Unix nanoseconds, or math.MinInt64 for the zero time.
func unixOrMin(t time.Time) int64 {
	if t.IsZero() {
		return math.MinInt64
	}
	return t.UnixNano()
}

func (o *sliceOp[K, T, Acc, Out, Row, PA]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, _ []int32) error {
	existed, err := o.load(k)
	if err != nil {
		return err
	}
	before, had := o.pending()
	key := o.keys[group]
	// The windows that end at or before the watermark the batch's rows
	// are judged late by are closed, whether or not their timer has fired
	// (a batch leaves windows past runtime.WindowClosesPerBatch to the
	// next): the rows that count in them came before.
	o.close(key, unixOrMin(k.Batch().LateWatermark))
	o.addBatch(group)
	if *o.mode == Update {
		// Each window still open that holds a slice the batch changed.
		o.ends = o.ends[:0]
		for _, p := range o.touched {
			o.windows.assign(p.start, func(_, e int64) {
				if e > o.closed {
					o.ends = append(o.ends, e)
				}
			})
		}
		slices.Sort(o.ends)
		for _, e := range slices.Compact(o.ends) {
			o.write(key, e)
		}
	}
	if err := o.moveTimer(k, before, had); err != nil {
		return err
	}
	return saveValue(k, existed, len(o.slices) == 0, o.encode, "slices")
}

// HandleTimer closes the key's windows that the watermark has reached:
// in Append mode each is written; the slices no open window holds are
// evicted.
func (o *sliceOp[K, T, Acc, Out, Row, PA]) HandleTimer(ctx context.Context, k *runtime.KeyState, _ time.Time) error {
	var key K
	if err := o.codec.decode(k.Key(), &key); err != nil {
		return fmt.Errorf("a timer's key does not decode: %w", unprefixed(err))
	}
	existed, err := o.load(k)
	if err != nil || !existed {
		return err
	}
	o.close(key, k.Batch().Watermark.UnixNano())
	// The timer that fired is one-shot (Info): the runtime removes it.
	if err := o.moveTimer(k, 0, false); err != nil {
		return err
	}
	return saveValue(k, existed, len(o.slices) == 0, o.encode, "slices")
}

// slidingOp is an aggregation over sliding or cumulative windows: by slices
// (sliceOp), or, where slices do not serve (Complete mode, no
// watermark) or the checkpoint holds a state row per window, per window
// (aggOp). The choice is made before the first batch: by the output
// mode once it is known, then by the checkpoint (ChooseLayout).
type slidingOp[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]] struct {
	sliced    *sliceOp[K, T, Acc, Out, Row, PA]
	perWindow *aggOp[windowKey[K], windowedRow[T], T, Acc, Out, Row, PA]
	useSlices bool
	// why says why the query keeps its windows per window, when it does
	// of itself.
	why string
	// ordered says the aggregator folds rows in the order they came
	// (arrivalOrdered).
	ordered bool
}

// arrivalOrdered is an aggregator whose result depends on the order of
// its rows (Reduce, CollectList, CollectSet): over sliding and cumulative
// windows it is kept per window, each window folding its rows in the
// order they came, as Kafka Streams' hopping windows and Spark's sliding
// windows do; by slices, merged in order of time, a window's rows would
// be folded in event-time order across its slices.
type arrivalOrdered interface{ foldsInArrivalOrder() }

// foldsInArrivalOrder is slidingOp.why for an arrivalOrdered aggregator.
const foldsInArrivalOrder = "its aggregator folds rows in the order they came"

func (o *slidingOp[K, T, Acc, Out, Row, PA]) op() runtime.Operator {
	if o.useSlices {
		return o.sliced
	}
	return o.perWindow
}

// ChooseLayout keeps a checkpoint's state row per window (a key type
// that begins with the window), and refuses one that keeps slices when
// the query does not (why says why); a query that keeps its windows per
// window only for its aggregator's order of rows (arrivalOrdered) takes
// a checkpoint by slices, as versions before wrote, and goes on by
// slices.
func (o *slidingOp[K, T, Acc, Out, Row, PA]) ChooseLayout(stored *runtime.OperatorMeta) error {
	switch {
	case stored == nil || stored.Kind != o.sliced.info.Kind:
	case strings.HasPrefix(stored.KeyType, "window+"):
		o.useSlices = false
	case o.ordered && o.why == foldsInArrivalOrder && !perWindowSliding.Load() && stored.Variables["slices"].Encoding == runtime.EncodingSlices:
		o.useSlices = true
	case !o.useSlices && stored.Variables["slices"].Encoding == runtime.EncodingSlices:
		return fmt.Errorf("the checkpoint keeps its windows by slices, which only a query with a watermark, in Update or Append mode, reads, and %s: start from a new checkpoint directory, or keep the watermark and the output mode", o.why)
	}
	return nil
}

func (o *slidingOp[K, T, Acc, Out, Row, PA]) Info() runtime.OperatorInfo { return o.op().Info() }
func (o *slidingOp[K, T, Acc, Out, Row, PA]) Groups() *runtime.Groups    { return o.op().Groups() }
func (o *slidingOp[K, T, Acc, Out, Row, PA]) EndBatch()                  { o.op().EndBatch() }
func (o *slidingOp[K, T, Acc, Out, Row, PA]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	return o.op().HandleRows(ctx, k, group, rows)
}
func (o *slidingOp[K, T, Acc, Out, Row, PA]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	return o.op().HandleTimer(ctx, k, expiry)
}

// RowsDone writes, in Complete mode (per window), the whole result
// table.
func (o *slidingOp[K, T, Acc, Out, Row, PA]) RowsDone(ctx context.Context, b *runtime.Batch) error {
	if o.useSlices {
		return nil
	}
	return o.perWindow.RowsDone(ctx, b)
}
