package typed

import (
	"context"
	"encoding/binary"
	"fmt"
	"iter"
	"math"
	"reflect"
	"slices"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// Over is the rows an OVER aggregation (AggregateOver) aggregates for
// each row of a key: the row itself, and those before it in event-time
// order that the frame takes.
type Over struct {
	rows      bool // a frame of rows, not of a range of time
	unbounded bool
	d         time.Duration
	n         int
}

// RangePreceding is the frame RANGE BETWEEN d PRECEDING AND CURRENT ROW:
// the key's rows whose times are from the row's time less d to the
// row's time, both included, so rows of the same time (peers) each count
// every peer.
func RangePreceding(d time.Duration) Over { return Over{d: d} }

// RowsPreceding is the frame ROWS BETWEEN n PRECEDING AND CURRENT ROW:
// the row and the n rows of its key before it, in event-time order, rows
// of the same time in the order they arrived.
func RowsPreceding(n int) Over { return Over{rows: true, n: n} }

// RangeUnbounded is the frame RANGE BETWEEN UNBOUNDED PRECEDING AND
// CURRENT ROW: every row of the key up to the row's time, its peers
// included.
func RangeUnbounded() Over { return Over{unbounded: true} }

// RowsUnbounded is the frame ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT
// ROW: every row of the key up to the row itself, in event-time order,
// rows of the same time in the order they arrived.
func RowsUnbounded() Over { return Over{rows: true, unbounded: true} }

// String writes the frame as the call that makes it.
func (o Over) String() string {
	switch {
	case o.rows && o.unbounded:
		return "RowsUnbounded()"
	case o.unbounded:
		return "RangeUnbounded()"
	case o.rows:
		return fmt.Sprintf("RowsPreceding(%d)", o.n)
	}
	return "RangePreceding(" + o.d.String() + ")"
}

// AggregateOver is Flink's OVER aggregation over event time (SUM(x) OVER
// (PARTITION BY key ORDER BY rowtime RANGE BETWEEN INTERVAL '1' HOUR
// PRECEDING AND CURRENT ROW)): each row of the keyed stream ks is written
// once, as row(key, the row, the aggregate of agg over its frame), when
// the watermark reaches its time, a key's rows of a batch in event-time
// order; so the stream needs a watermark (WithWatermark), whose event
// time eventTime should be too, and the output mode is Append. Late rows
// are dropped (counted, and sent to the watermark's LateRows) as Flink
// drops them: for the unbounded frames, a row at or before the
// watermark; for the bounded ones, a row at or before the key's last
// row written (Flink's last triggering time), so that a key's row behind
// the watermark (which other keys' rows moved) is still written after
// the rows of its key already written, and a key's first rows are
// written however far behind the watermark they come. The key's rows
// are kept in state until they are written and no frame of a later row
// can take them: for RangePreceding, the rows within d of the key's last
// row written, until the watermark is more than d past it (then the key
// keeps nothing, its last row written forgotten too, as Flink's cleanup
// of a RANGE frame's state forgets it: a row after that is written with
// a frame of the rows it comes with); for RowsPreceding, the n latest,
// and the time of the last row written; for the unbounded frames, the
// accumulator only. A key's rows kept are one state value, read and written once
// in a batch that brings the key rows or whose watermark reaches some: a
// key of very many rows waiting (a watermark far behind them) costs
// their size each such batch. A bounded frame slides over a key's rows
// with Add and Merge (Aggregator has no retraction): about two Adds and
// two Merges a row, whatever the frame's length, so that a float sum
// may differ in its last bits from one added in order; with an
// accumulator that holds slices, maps or pointers (which Add and Merge
// may change in place), each frame is folded anew from Zero, n Adds for
// a frame of n rows, shared by the row's peers. The rows, and for the
// unbounded frames the accumulator, must have a binary encoding
// (generated records), which Start checks.
//
// It runs as a transformWithState of event time, named
// "AggregateOver(frame, aggregator type)" in its progress and checkpoint
// (another output row type keeps the checkpoint; another frame or
// aggregator is a change of the pipeline), with state variables "rows",
// "done" and, for the unbounded frames, "acc". agg and row are called on the query's
// goroutine, with pointers valid during the call.
func AggregateOver[K comparable, T, Acc, Out, Row any](ks KeyedStream[K, T], eventTime func(*T) time.Time, over Over,
	agg Aggregator[T, Acc, Out], row func(key K, r *T, out Out) Row) Stream[Row] {
	processor := func() *overProcessor[K, T, Acc, Out, Row] {
		return &overProcessor[K, T, Acc, Out, Row]{eventTime: eventTime, over: over, agg: agg, row: row}
	}
	s := TransformWithState[K, T, Row](ks, processor(), TimeModeEventTime, Append)
	switch {
	case !over.unbounded && over.rows && over.n < 0:
		s.p = s.p.failed("streamgen: AggregateOver: %v: n must not be negative", over)
	case !over.unbounded && !over.rows && over.d < 0:
		s.p = s.p.failed("streamgen: AggregateOver: %v: d must not be negative", over)
	}
	// Each compile of the stream (each branch of an output that reads it,
	// each start) runs a processor of its own: a processor value serves
	// one operator of one query.
	return once(Stream[Row]{p: s.p, attach: func(c *compiler, emit func(*Row)) {
		TransformWithState[K, T, Row](ks, processor(), TimeModeEventTime, Append).attach(c, emit)
	}})
}

// overProcessor is AggregateOver's processor. rows holds, in one value
// (see encode), the key's rows not yet written (their times after done)
// and those that a later row's frame may take, in event-time order but
// for the rows appended since it was last written, peers in arrival
// order; done (Unix nanoseconds) is, for the unbounded frames, the
// watermark up to which the rows are written, and for the bounded ones,
// the time of the last row written (Flink's last triggering time; a
// checkpoint of an earlier version holds the watermark there, which
// only makes a row between the two late once).
type overProcessor[K comparable, T, Acc, Out, Row any] struct {
	eventTime func(*T) time.Time
	over      Over
	agg       Aggregator[T, Acc, Out]
	row       func(K, *T, Out) Row

	h     *Handle
	codec valueCodec[T]
	rows  *ValueState[string]
	done  *ValueState[int64]
	acc   *ValueState[Acc]
	buf   []byte // a row's encoding
	// slide says that bounded frames are aggregated as they slide (see
	// frames): the accumulator holds no memory that Add or Merge could
	// change through a copy of it.
	slide bool
}

// operatorName names the operator in progress reports and the
// checkpoint by its frame and aggregator, not by the processor's type,
// which names the output's too: a restart with another output row type
// keeps the checkpoint; one with another frame or aggregator is a change
// of the pipeline (runtime.AllowPipelineChanges).
func (p *overProcessor[K, T, Acc, Out, Row]) operatorName() string {
	return fmt.Sprintf("AggregateOver(%v, %T)", p.over, p.agg)
}

// judgesLateRows: a bounded frame's rows at or before the watermark
// reach the processor, which drops those at or before the key's last
// row written (HandleInputRows).
func (p *overProcessor[K, T, Acc, Out, Row]) judgesLateRows() bool { return !p.over.unbounded }

// describeInfo keeps in the checkpoint what the aggregator's
// accumulators depend on (describedAggregator): the unbounded frames
// store one, and the bounded ones fold their frames anew each batch from
// rows whose type the operator's name holds.
//
// Its timers are set a nanosecond before the instant they wait for, to
// fire once the time is past them.
func (p *overProcessor[K, T, Acc, Out, Row]) describeInfo(info *runtime.OperatorInfo) {
	info.InclusiveTimers = false
	if p.over.unbounded {
		describe(info, p.agg)
	}
}

func (p *overProcessor[K, T, Acc, Out, Row]) Init(h *Handle) error {
	p.h = h
	var err error
	if p.codec, err = newValueCodec[T](); err != nil {
		return fmt.Errorf("AggregateOver: the rows: %w", unprefixed(err))
	}
	p.slide = holdsNoReferences(reflect.TypeFor[Acc]())
	p.rows = NewValueState[string](h, "rows")
	p.done = NewValueState[int64](h, "done")
	if p.over.unbounded {
		p.acc = NewValueState[Acc](h, "acc")
	}
	return nil
}

// HandleInputRows drops the late rows and keeps the others, and, once
// the watermark is past done (for the unbounded frames, has moved since
// the key last wrote; for the bounded ones, is past the key's last row
// written, which it nearly always is) or has reached a new row, writes
// the rows it has reached (see advance): every row of the key at or
// before it is here or kept. So a key's rows are read and written once
// in a batch, not once for the rows and again for their timer, and a row
// is written in the batch after it comes in, or in its own. Otherwise
// the new rows are appended to the bytes of those kept, which are not
// decoded, with a timer just before the earliest (a timer fires once the
// watermark is past it: a row is written once the watermark reaches it,
// as in Flink).
func (p *overProcessor[K, T, Acc, Out, Row]) HandleInputRows(ctx context.Context, key K, rows iter.Seq[T], timers TimerValues, emit func(Row)) error {
	done, err := p.written(ctx)
	if err != nil {
		return err
	}
	// A bounded frame's row is late at or before the key's last row
	// written (none, for a key that has written none, or whose rows are
	// forgotten), as in Flink; it is dropped, counted and sent to
	// LateRows. (The watermark drops an unbounded frame's late rows
	// before they come here: a row dropped here has a time that is not
	// the watermark's, or comes from an operator's output without a
	// watermark after it.)
	late := done
	list := slices.Collect(rows)
	n := 0
	for i := range list {
		if t := p.eventTime(&list[i]); t.UnixNano() > late {
			list[n] = list[i]
			n++
		} else if timers.dropLate != nil {
			timers.dropLate(t)
		}
	}
	list = list[:n]
	if len(list) == 0 {
		return nil
	}
	earliest := p.eventTime(&list[0])
	for i := range list[1:] {
		if t := p.eventTime(&list[i+1]); t.Before(earliest) {
			earliest = t
		}
	}
	if wm := timers.CurrentWatermark(); !earliest.After(wm) || wm.UnixNano() > done {
		return p.advance(ctx, key, done, list, wm, emit)
	}
	kept, _, err := p.rows.Get(ctx)
	if err != nil {
		return err
	}
	all, err := p.encode([]byte(kept), list)
	if err != nil {
		return err
	}
	if err := p.rows.Update(ctx, string(all)); err != nil {
		return err
	}
	return p.h.RegisterTimer(ctx, earliest.Add(-time.Nanosecond))
}

// HandleExpiredTimer writes, at the first timer of a batch, the key's
// rows that the watermark has reached (see advance). The key's other
// timers of the batch, and a timer of rows that HandleInputRows wrote,
// find their rows written.
func (p *overProcessor[K, T, Acc, Out, Row]) HandleExpiredTimer(ctx context.Context, key K, timers TimerValues, expired ExpiredTimerInfo, emit func(Row)) error {
	done, err := p.written(ctx)
	if err != nil {
		return err
	}
	if expired.ExpiryTime().UnixNano() < done {
		// A timer just before rows that are written.
		return nil
	}
	return p.advance(ctx, key, done, nil, timers.CurrentWatermark(), emit)
}

// advance writes every row of the key at or before the watermark wm
// (the rows kept and the new ones, after done), each with its frame's
// aggregate; then it keeps only the rows a later row's frame may take
// and those that wait, and sets a timer just before the earliest that
// waits.
func (p *overProcessor[K, T, Acc, Out, Row]) advance(ctx context.Context, key K, done int64, fresh []T, wm time.Time, emit func(Row)) error {
	list, err := p.load(ctx)
	if err != nil {
		return err
	}
	// The rows kept are in order; those appended since, and the new
	// ones, come after them. Each row's time is read once, and the rows
	// sorted by it.
	list, times := p.byTime(append(list, fresh...))
	first := len(list) // the first row not yet written
	for i := range list {
		if times[i].UnixNano() > done {
			first = i
			break
		}
	}
	last := first // the rows to write are list[first:last]
	for last < len(list) && !times[last].After(wm) {
		last++
	}
	var acc Acc
	if p.over.unbounded {
		var ok bool
		if acc, ok, err = p.acc.Get(ctx); err != nil {
			return err
		}
		if !ok {
			acc = p.agg.Zero()
		}
	}
	f := frames[T, Acc, Out]{agg: p.agg, rows: list, slide: p.slide}
	lo := 0 // the first row of a RangePreceding frame
	for i := first; i < last; {
		t := times[i]
		end := i + 1 // the peers of list[i] are list[i:end]
		for end < last && times[end].Equal(t) {
			end++
		}
		switch {
		case p.over.unbounded && p.over.rows:
			for j := i; j < end; j++ {
				acc = p.agg.Add(acc, &list[j])
				emit(p.row(key, &list[j], p.agg.Result(acc)))
			}
		case p.over.unbounded:
			for j := i; j < end; j++ {
				acc = p.agg.Add(acc, &list[j])
			}
			for j := i; j < end; j++ {
				emit(p.row(key, &list[j], p.agg.Result(acc)))
			}
		case p.over.rows:
			for j := i; j < end; j++ {
				emit(p.row(key, &list[j], p.agg.Result(f.of(max(0, j-p.over.n), j+1))))
			}
		default:
			// The frame is list[lo:end]: lo only moves on, as t does.
			from := t.Add(-p.over.d)
			for times[lo].Before(from) {
				lo++
			}
			out := p.agg.Result(f.of(lo, end))
			for j := i; j < end; j++ {
				emit(p.row(key, &list[j], out))
			}
		}
		i = end
	}
	// Keep the rows not written, and those a later row's frame may take.
	if last < len(list) {
		// The rows that wait: a timer at the earliest.
		if err := p.h.RegisterTimer(ctx, times[last].Add(-time.Nanosecond)); err != nil {
			return err
		}
	}
	if p.over.unbounded {
		// A later row is after the watermark (an earlier one is late):
		// the accumulator holds the rows up to it.
		if err := p.acc.Update(ctx, acc); err != nil {
			return err
		}
		if err := p.keep(ctx, list[last:]); err != nil {
			return err
		}
		return p.done.Update(ctx, wm.UnixNano())
	}
	// A bounded frame's later row is after the last row written.
	if last > first {
		done = times[last-1].UnixNano()
	}
	keepFrom := last
	written := time.Unix(0, done)
	forgotten := false
	switch {
	case p.over.rows:
		keepFrom = max(0, last-p.over.n)
	case done == math.MinInt64:
		// None written yet: every row waits, and is kept.
	case last == len(list) && wm.After(written.Add(p.over.d)):
		// No row waits and the watermark is more than d past the last
		// written: the key keeps nothing, as Flink's cleanup forgets a
		// RANGE frame's state (a later row's frame takes none of these,
		// unless it is behind the watermark).
		keepFrom, forgotten = len(list), true
	default:
		// A later row's frame starts after written-d.
		from := written.Add(-p.over.d)
		for keepFrom > 0 && times[keepFrom-1].After(from) {
			keepFrom--
		}
		if keepFrom < last && last == len(list) {
			// No row waits: a timer once the watermark is d past the
			// last row written forgets the rows kept, if no row comes.
			if err := p.h.RegisterTimer(ctx, written.Add(p.over.d)); err != nil {
				return err
			}
		}
	}
	if keepFrom == len(list) {
		if err := p.rows.Clear(ctx); err != nil {
			return err
		}
		if done == math.MinInt64 || forgotten {
			return p.done.Clear(ctx) // the key leaves no state
		}
		// No row is kept, but the time of the last written is (Flink's
		// last triggering time): a later row at or before it is late. A
		// ROWS frame keeps it, as Flink's does; a RANGE frame's goes with
		// a timer once the watermark is d past it.
		if !p.over.rows {
			if err := p.h.RegisterTimer(ctx, written.Add(p.over.d)); err != nil {
				return err
			}
		}
		return p.done.Update(ctx, done)
	}
	if err := p.keep(ctx, list[keepFrom:]); err != nil {
		return err
	}
	return p.done.Update(ctx, done)
}

// keep keeps rows as the key's (see encode), or none.
func (p *overProcessor[K, T, Acc, Out, Row]) keep(ctx context.Context, rows []T) error {
	if len(rows) == 0 {
		return p.rows.Clear(ctx)
	}
	kept, err := p.encode(nil, rows)
	if err != nil {
		return err
	}
	return p.rows.Update(ctx, string(kept))
}

// byTime returns rows sorted by event time, peers in their order, and
// the rows' times.
func (p *overProcessor[K, T, Acc, Out, Row]) byTime(rows []T) ([]T, []time.Time) {
	order := make([]int, len(rows))
	times := make([]time.Time, len(rows))
	for i := range rows {
		order[i], times[i] = i, p.eventTime(&rows[i])
	}
	slices.SortStableFunc(order, func(a, b int) int { return times[a].Compare(times[b]) })
	sorted := make([]T, len(rows))
	sortedTimes := make([]time.Time, len(rows))
	for k, i := range order {
		sorted[k], sortedTimes[k] = rows[i], times[i]
	}
	return sorted, sortedTimes
}

// encode appends rows to b, each as uvarint(length) and its encoding.
func (p *overProcessor[K, T, Acc, Out, Row]) encode(b []byte, rows []T) ([]byte, error) {
	for i := range rows {
		var err error
		if p.buf, err = p.codec.encode(p.buf[:0], &rows[i]); err != nil {
			return nil, fmt.Errorf("AggregateOver: a row does not encode: %w", unprefixed(err))
		}
		b = append(binary.AppendUvarint(b, uint64(len(p.buf))), p.buf...)
	}
	return b, nil
}

// written returns how far the key has written (done), or math.MinInt64
// when it keeps nothing.
func (p *overProcessor[K, T, Acc, Out, Row]) written(ctx context.Context) (int64, error) {
	done, ok, err := p.done.Get(ctx)
	if !ok {
		done = math.MinInt64
	}
	return done, err
}

// load reads the key's rows (see encode).
func (p *overProcessor[K, T, Acc, Out, Row]) load(ctx context.Context) ([]T, error) {
	raw, _, err := p.rows.Get(ctx)
	if err != nil {
		return nil, err
	}
	var rows []T
	for b := []byte(raw); len(b) > 0; {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, fmt.Errorf("AggregateOver: the stored rows are corrupt")
		}
		rows = append(rows, *new(T))
		if err := p.codec.decode(b[w:w+int(n)], &rows[len(rows)-1]); err != nil {
			return nil, fmt.Errorf("AggregateOver: a stored row does not decode: %w", unprefixed(err))
		}
		b = b[w+int(n):]
	}
	return rows, nil
}

// frames aggregates the frames rows[lo:end] of a key's rows in event-time
// order, for frames whose lo and end never move back, as a row's frame
// does from one row to the next. When slide is set, it keeps the frame as
// two stacks, a front of aggregates of each row to the front's end
// (suffix) and a back folded as rows come in: each row is folded in
// once to the back and once to a front, and a frame is one Merge, so a
// frame of n rows costs about two Adds and two Merges a row, not n Adds.
// The front is made again, from the rows, when the frame's start passes
// its end. Without slide (an accumulator with slices, maps or pointers,
// which Merge may change through a copy), each frame is folded anew.
type frames[T, Acc, Out any] struct {
	agg   Aggregator[T, Acc, Out]
	rows  []T
	slide bool
	mid   int   // the front is rows[...:mid], the back rows[mid:end]
	end   int   // the rows folded in
	front []Acc // front[k] aggregates rows[k:mid]
	back  Acc
}

// of returns the aggregate of rows[lo:end].
func (f *frames[T, Acc, Out]) of(lo, end int) Acc {
	if !f.slide {
		acc := f.agg.Zero()
		for k := lo; k < end; k++ {
			acc = f.agg.Add(acc, &f.rows[k])
		}
		return acc
	}
	if lo >= f.mid {
		// The front is spent: rows[lo:end] are the new one.
		if f.front == nil {
			f.front = make([]Acc, len(f.rows))
		}
		f.front[end-1] = f.agg.Add(f.agg.Zero(), &f.rows[end-1])
		for k := end - 2; k >= lo; k-- {
			f.front[k] = f.agg.Merge(f.agg.Add(f.agg.Zero(), &f.rows[k]), f.front[k+1])
		}
		f.mid, f.end, f.back = end, end, f.agg.Zero()
		return f.front[lo]
	}
	for ; f.end < end; f.end++ {
		f.back = f.agg.Add(f.back, &f.rows[f.end])
	}
	return f.agg.Merge(f.front[lo], f.back)
}
