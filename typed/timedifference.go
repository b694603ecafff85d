package typed

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// aggregateTimeDifference is AggregateWindows over the windows of a time
// difference (Kafka Streams' sliding windows): each key's state is one
// row of its rows' aggregates by millisecond, from which its windows
// follow (timeWindowsOf). A window closes once the watermark is past its
// last instant (at or past the millisecond after it, the end of the
// half-open Window written for it: as Kafka Streams updates a window
// while its end is at or after the stream time less the grace, and as
// Spark closes a window whose end the watermark has reached), by a
// timer one nanosecond before that millisecond; it is then written
// (Append). Each key has one timer, at the next instant where, in Append
// mode, one of its windows may close (1 ms after an instant, the end of
// the window that ends at it), or an instant be forgotten (once the
// window that begins after it has closed); so a key whose rows stop
// leaves no state, and a key costs one timer however many instants it
// holds.
//
// A row is late, and dropped, as Kafka Streams drops a record: when the
// window that begins after it, whose end is t+1ms+d, ends at or before
// the watermark. A row that is not late counts in the windows still
// open, and makes none that has closed.
func aggregateTimeDifference[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ws WindowedStream[K, T], agg Aggregator[T, Acc, Out], row func(w Window, key K, out Out) Row,
) Stream[Row] {
	name := fmt.Sprintf("%T", agg)
	opInfo := operatorInfo{kind: "slidingWindowAggregate", function: name, aggregation: true, windowed: true, watermarked: ws.s.p.watermarked}
	ks := KeyedStream[K, T]{s: ws.s, key: ws.key, codec: ws.codec}
	diff := int64(ws.windows.size / time.Millisecond)
	return once(Stream[Row]{p: ws.s.p, attach: func(c *compiler, emit func(*Row)) {
		op := &timeDiffOp[K, T, Acc, Out, Row, PA]{gatherer: newGatherer(c, ks, "slidingWindowAggregate ("+name+")"),
			agg: agg, eventTime: ws.eventTime, diff: diff, output: row, emitDown: emit,
			shared: !holdsNoReferences(reflect.TypeFor[Acc]())}
		op.mode = &c.outputMode
		op.info = runtime.OperatorInfo{
			Kind: "slidingWindowAggregate", Name: name, KeyType: ws.codec.typeName, LegacyKeyType: ws.codec.legacyTypeName, UseKeys: ws.codec.useKeys, ParseKey: ws.codec.parseJSON, Key: ws.codec.schema,
			Windows:       &runtime.WindowsMeta{Difference: ws.windows.size, PastEnd: !timeDifferenceAtEnd.Load()},
			States:        []runtime.StateInfo{{Name: "instants", Schema: PA(new(Acc)).StreamSchema(), Kind: "value", Encoding: runtime.EncodingInstants}},
			DropsLateRows: ws.s.p.watermarked,
		}
		describe(&op.info, agg)
		info := opInfo // this query's: late reads its compiler
		if ws.s.p.watermarked {
			op.info.TimeMode = runtime.EventTimeMode
			info.late = func(et, wm time.Time) int64 {
				if c.outputMode == Complete || (millis(et)+1+diff)*int64(time.Millisecond) > wm.UnixNano() {
					return 0
				}
				return 1
			}
		}
		fn := funcPointer(ws.eventTime)
		op.index = c.addOperator(func() {
			ks.s.attach(c, func(r *T) {
				// (See the session windows' check.)
				if ns, pushed := eventNanosOf(c, r, fn, ws.eventTime); !pushed && c.outOfRange(ns) {
					return
				}
				op.add(r)
			})
		}, op, info)
	}})
}

// millis returns t in whole milliseconds since 1970, rounded down.
func millis(t time.Time) int64 {
	ns := t.UnixNano()
	ms := ns / int64(time.Millisecond)
	if ns%int64(time.Millisecond) < 0 {
		ms--
	}
	return ms
}

// msAgg is the aggregate of a key's rows at one millisecond.
type msAgg[Acc any] struct {
	at  int64 // milliseconds since 1970
	acc Acc
	// fresh says a row of the batch is there.
	fresh bool
}

// timeWindow is a window of a time difference, its bounds included, in
// milliseconds.
type timeWindow struct{ start, end int64 }

// timeWindowsOf returns the windows that instants (in order) make with a
// difference of diff, in order of start (and so of end): the window that
// ends at each, and the one that begins 1 ms after each that a later
// instant falls in.
func timeWindowsOf[Acc any](instants []msAgg[Acc], diff int64, into []timeWindow) []timeWindow {
	into = into[:0]
	for i, p := range instants {
		into = append(into, timeWindow{p.at - diff, p.at})
		if i+1 < len(instants) && instants[i+1].at <= p.at+1+diff {
			into = append(into, timeWindow{p.at + 1, p.at + 1 + diff})
		}
	}
	slices.SortFunc(into, func(a, b timeWindow) int { return cmp.Compare(a.start, b.start) })
	return slices.Compact(into)
}

// timeDiffOp is an aggregation over the windows of a time difference, of
// one query.
type timeDiffOp[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]] struct {
	gatherer[K, T]
	modalInfo
	index     int
	agg       Aggregator[T, Acc, Out]
	eventTime func(*T) time.Time
	diff      int64 // milliseconds
	output    func(Window, K, Out) Row
	emitDown  func(*Row)
	instants  []msAgg[Acc]
	windows   []timeWindow
	buf       []byte
	// closedKeys are the keys whose windows the batch's timers have
	// closed (HandleTimer), by encoded key.
	closedKeys map[string]struct{}
	// shared says the accumulator holds memory a copy shares (slices,
	// maps, pointers), which Merge may change or pass on: an instant's,
	// merged into several windows, is copied first (through copyBuf).
	shared  bool
	copyBuf []byte
	// atEnd is 1 when the checkpoint's windows close once the watermark
	// reaches their last instant (written before WindowsMeta.PastEnd),
	// 0 when they close once it is past it: what a window's last instant
	// is compared with is the watermark's millisecond plus atEnd.
	atEnd int64
}

// timeDifferenceAtEnd makes the queries built after it close the windows
// of a time difference once the watermark reaches their last instant, as
// versions before WindowsMeta.PastEnd did (tests: a checkpoint of them).
var timeDifferenceAtEnd atomic.Bool

// ChooseLayout keeps the closing rule of the checkpoint's windows: those
// of a checkpoint written before WindowsMeta.PastEnd close once the
// watermark reaches their last instant.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) ChooseLayout(stored *runtime.OperatorMeta) error {
	w := *o.info.Windows
	w.PastEnd = !timeDifferenceAtEnd.Load()
	if stored != nil && stored.Kind == o.info.Kind && stored.Windows != nil && stored.Windows.Difference != 0 {
		w.PastEnd = stored.Windows.PastEnd
	}
	o.info.Windows, o.atEnd = &w, 0
	if !w.PastEnd {
		o.atEnd = 1
	}
	return nil
}

func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) Groups() *runtime.Groups { return &o.groups }
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) EndBatch() {
	o.gatherer.end()
	clear(o.closedKeys)
}

// decode reads a key's instants (EncodingInstants) into o.instants.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) decode(raw []byte) error {
	o.instants = o.instants[:0]
	return readTimedAccs[Acc, PA](raw, fmt.Errorf("stored instants are corrupt"), func(at int64, acc Acc) error {
		o.instants = append(o.instants, msAgg[Acc]{at: at / int64(time.Millisecond), acc: acc})
		return nil
	})
}

func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) encode() ([]byte, error) {
	b, err := appendTimedAccs[Acc, PA](o.buf[:0], len(o.instants), func(i int) (int64, *Acc) {
		return o.instants[i].at * int64(time.Millisecond), &o.instants[i].acc
	})
	if err != nil {
		return nil, err
	}
	o.buf = b
	return b, nil
}

// load reads the key's instants; ok is false when it has none.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) load(k *runtime.KeyState) (bool, error) {
	o.instants = o.instants[:0]
	return loadValue(k, o.decode)
}

// save writes the key's instants, or deletes its row when none is left.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) save(k *runtime.KeyState, existed bool) error {
	return saveValue(k, existed, len(o.instants) == 0, o.encode, "instants")
}

// aggregateOf folds the instants w holds.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) aggregateOf(w timeWindow) Acc {
	acc := o.agg.Zero()
	from, _ := slices.BinarySearchFunc(o.instants, w.start, func(p msAgg[Acc], at int64) int { return cmp.Compare(p.at, at) })
	for _, p := range o.instants[from:] {
		if p.at > w.end {
			break
		}
		next := p.acc
		if o.shared {
			next = copyAcc[Acc, PA](&o.copyBuf, next, "slidingWindowAggregate")
		}
		acc = o.agg.Merge(acc, next)
	}
	return acc
}

func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) write(key K, w timeWindow, acc Acc) {
	window := Window{Start: time.UnixMilli(w.start).UTC(), End: time.UnixMilli(w.end + 1).UTC()}
	r := o.output(window, key, o.agg.Result(acc))
	o.emitDown(&r)
}

// timed says windows close by the watermark: timers write (Append) and
// forget them.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) timed() bool {
	return o.info.TimeMode == runtime.EventTimeMode && *o.mode != Complete
}

func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	rows, err := o.rowsOf(k.Batch(), group, rows)
	if err != nil {
		return err
	}
	existed, err := o.load(k)
	if err != nil {
		return err
	}
	b := k.Batch()
	// A window whose last instant is before closed (the millisecond of
	// the watermark of the batch before, plus atEnd) has closed: a row
	// makes none such. A row is late by that millisecond (late).
	closed, late := int64(-1<<63), int64(-1<<63)
	if o.timed() && !b.LateWatermark.IsZero() {
		late = millis(b.LateWatermark)
		closed = late + o.atEnd
	}
	// In Update mode, the windows before the batch's rows: a window not
	// among them is new.
	var before map[int64]bool
	if *o.mode == Update {
		before = map[int64]bool{}
		for _, w := range timeWindowsOf(o.instants, o.diff, o.windows) {
			before[w.end] = true
		}
	}
	// The key's one timer is at the next instant from closed on where a
	// window may close or an instant be forgotten (nextEnd); state written
	// without timers (a query that ran without a watermark, or in
	// Complete mode) has none, and gets one below.
	timer, timed := o.nextEnd(closed)
	added := false
	for _, j := range rows {
		r := &o.rows[j]
		at := millis(o.eventTime(r))
		if at+1+o.diff <= late {
			// Late: every window it would change has closed. (The
			// stage after the watermark drops such rows before they
			// come here, unless another operator is before this one.)
			b.DropLate(o.index)
			continue
		}
		i, found := slices.BinarySearchFunc(o.instants, at, func(p msAgg[Acc], at int64) int { return cmp.Compare(p.at, at) })
		if !found {
			o.instants = slices.Insert(o.instants, i, msAgg[Acc]{at: at, acc: o.agg.Zero()})
		}
		o.instants[i].acc = o.agg.Add(o.instants[i].acc, r)
		o.instants[i].fresh = true
		added = true
	}
	if !added {
		return nil // every row late: the key's state stays as it was
	}
	if o.timed() {
		// Set again when it stays: the same timer, written once more.
		next, _ := o.nextEnd(closed)
		if err := o.moveTimer(k, timer, timed && next != timer, next); err != nil {
			return err
		}
	}
	if *o.mode == Update {
		// The windows still open that changed: new, or holding a row of
		// the batch.
		key := o.keys[group]
		var fresh []int64 // the instants of the batch's rows, in order
		for _, p := range o.instants {
			if p.fresh {
				fresh = append(fresh, p.at)
			}
		}
		o.windows = timeWindowsOf(o.instants, o.diff, o.windows)
		for _, w := range o.windows {
			if w.end < closed {
				continue
			}
			if i, _ := slices.BinarySearch(fresh, w.start); i < len(fresh) && fresh[i] <= w.end || !before[w.end] {
				acc := o.aggregateOf(w)
				o.write(key, w, acc)
			}
		}
	}
	for i := range o.instants {
		o.instants[i].fresh = false
	}
	return o.save(k, existed)
}

// RowsDone writes, in Complete mode, every window of every key.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) RowsDone(ctx context.Context, b *runtime.Batch) error {
	if *o.mode != Complete {
		return nil
	}
	var key K
	return b.ScanState(o.index, 0, func(k, value []byte) error {
		if err := o.codec.decode(k, &key); err != nil {
			return fmt.Errorf("a stored key does not decode: %w", unprefixed(err))
		}
		if err := o.decode(value); err != nil {
			return err
		}
		o.windows = timeWindowsOf(o.instants, o.diff, o.windows)
		for _, w := range o.windows {
			acc := o.aggregateOf(w)
			o.write(key, w, acc)
		}
		return nil
	})
}

// HandleTimer closes, at the first of a key's timers due in the batch,
// every window of the key whose last instant is before the batch's
// watermark (those whose last instant is before the watermark the batch
// before ran with closed then; with atEnd, at or before): in Append mode
// each is written, in order of end; then the instants that no window
// still open needs (those whose following window has closed too) are
// forgotten, and the key's row is written once, and its timer moved to
// the next end (nextEnd). A key's other timers due in the batch (a
// checkpoint from when each instant had its own holds several) only go.
// So a key is read and written once a batch.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	if _, done := o.closedKeys[string(k.Key())]; done || !o.timed() {
		// (A timer of a checkpoint written in Append or Update mode, in
		// Complete mode, which keeps every instant, only goes.)
		return k.DeleteTimer(expiry)
	}
	if o.closedKeys == nil {
		o.closedKeys = map[string]struct{}{}
	}
	o.closedKeys[string(k.Key())] = struct{}{}
	var key K
	if err := o.codec.decode(k.Key(), &key); err != nil {
		return fmt.Errorf("a timer's key does not decode: %w", unprefixed(err))
	}
	existed, err := o.load(k)
	if err != nil {
		return err
	}
	b := k.Batch()
	through := millis(b.Watermark) + o.atEnd
	if *o.mode == Append {
		from := int64(math.MinInt64)
		if !b.LateWatermark.IsZero() {
			from = millis(b.LateWatermark) + o.atEnd
		}
		o.windows = timeWindowsOf(o.instants, o.diff, o.windows)
		for _, w := range o.windows {
			if w.end >= from && w.end < through {
				o.write(key, w, o.aggregateOf(w))
			}
		}
	}
	o.instants = slices.DeleteFunc(o.instants, func(p msAgg[Acc]) bool { return p.at+1+o.diff < through })
	if err := o.save(k, existed); err != nil {
		return err
	}
	if err := k.DeleteTimer(expiry); err != nil {
		return err
	}
	if next, ok := o.nextEnd(through); ok {
		return k.RegisterTimer(time.UnixMilli(next).Add(-time.Nanosecond))
	}
	return nil
}

// nextEnd returns the first millisecond after closed (the watermark's
// plus atEnd, before which the windows' last instants have closed) at
// which, the watermark reaching it, a window of the key's instants
// closes (in Append mode, which writes it then), or an instant is
// forgotten: 1 ms after an instant (its own window's end), or 2 ms+d
// after one (1 ms after its following window's last instant, when that
// window has closed and it is forgotten), each 1 ms earlier with atEnd.
// In Update mode, which writes windows as rows change them, only the
// latter. ok is false when the key has no instants.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) nextEnd(closed int64) (end int64, ok bool) {
	if len(o.instants) == 0 {
		return 0, false
	}
	search := func(at int64) int {
		i, _ := slices.BinarySearchFunc(o.instants, at, func(p msAgg[Acc], at int64) int { return cmp.Compare(p.at, at) })
		return i
	}
	end = math.MaxInt64
	if *o.mode == Append {
		if i := search(closed); i < len(o.instants) {
			end = o.instants[i].at + 1 - o.atEnd // the first instant from closed on
		}
	}
	i := 0 // the first instant whose following window ends at or after closed
	if closed > math.MinInt64+o.diff+1 {
		i = search(closed - 1 - o.diff)
	}
	if i < len(o.instants) {
		end = min(end, o.instants[i].at+2+o.diff-o.atEnd)
	}
	return end, end != math.MaxInt64
}

// moveTimer moves the key's timer from at (when had) to next.
func (o *timeDiffOp[K, T, Acc, Out, Row, PA]) moveTimer(k *runtime.KeyState, at int64, had bool, next int64) error {
	if had {
		if err := k.DeleteTimer(time.UnixMilli(at).Add(-time.Nanosecond)); err != nil {
			return err
		}
	}
	return k.RegisterTimer(time.UnixMilli(next).Add(-time.Nanosecond))
}
