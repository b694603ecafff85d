package typed

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// Stream is a typed stream of records. It is a description: nothing runs
// until a query over it starts, and each query compiles it anew, so one
// stream may feed several queries. Streams are values; deriving one from
// another does not change the first. The zero Stream is not usable.
type Stream[T any] struct {
	p *plan
	// attach compiles the stream for one query: it connects the stream's
	// rows to emit, registering its inputs and operators with c (upstream
	// first).
	attach func(c *compiler, emit func(*T))
}

// plan is what a stream knows of the pipeline up to it, before any query:
// whether it has a watermark, and any error found while building it
// (reported by Start, so that building reads as a chain of calls). A
// derived stream gets a copy with its additions.
type plan struct {
	watermarked bool
	// watermarkDelay is the delay of the watermark of the rows (of the
	// first watermarked input, for rows of several: as Spark's Union
	// keeps its first child's event-time column).
	watermarkDelay time.Duration
	// eventTime is true where the rows carry the event time of a
	// WithWatermark before them.
	errs []error
}

// with returns a copy of p for a derived stream.
func (p *plan) with(change func(*plan)) *plan {
	q := *p
	q.errs = slices.Clone(p.errs)
	change(&q)
	return &q
}

// failed returns a copy of p with an error.
func (p *plan) failed(format string, args ...any) *plan {
	return p.with(func(q *plan) { q.errs = append(q.errs, fmt.Errorf(format, args...)) })
}

// From reads records of type T from src, decoding each raw record (a JSON
// line) with T's generated decoder. A record that does not decode (among
// them, one without its key, event time or another required field: see
// codec.ErrRequired), or that the source could not read, goes to the
// dead-letter sink with its position and the error; the query goes on.
func From[T any, P codec.RecordPtr[T]](src runtime.Source) Stream[T] {
	return FromFunc(src, func(r runtime.Record) (T, error) {
		var t T
		err := P(&t).UnmarshalJSON(r.Data)
		return t, err
	})
}

// FromFunc reads rows of type T from src with decode, which sees the whole
// record (its Data, Partition, Position and the source's Meta, such as a
// Kafka message's key and headers). A record decode refuses, or that the
// source could not read, goes to the dead-letter sink with its position
// and the error; the query goes on.
func FromFunc[T any](src runtime.Source, decode func(r runtime.Record) (T, error)) Stream[T] {
	id := new(byte)
	return Stream[T]{p: &plan{}, attach: func(c *compiler, emit func(*T)) {
		f, registered := shared(c, id, emit)
		if registered {
			return
		}
		emit, f.asRead = f.emit, true
		input := len(c.plan.Inputs)
		var row T // the row being read (see Map)
		c.plan.Inputs = append(c.plan.Inputs, runtime.Input{Source: src,
			Read: func(ctx context.Context, b *runtime.Batch, start, end json.RawMessage) (err error) {
				defer c.catch(&err)
				c.begin(ctx, b)
				c.input = input
				return src.Read(ctx, start, end, func(r runtime.Record) error {
					b.RecordRead(input, r)
					if r.Err != nil {
						b.DeadLetter(runtime.DeadLetter{Source: src.Name(), Position: r.Position, Error: r.Err.Error(), Raw: string(r.Data)})
						return nil
					}
					c.stage = "decode"
					t, err := decode(r)
					c.stage = ""
					if err != nil {
						b.DeadLetter(runtime.DeadLetter{Source: src.Name(), Position: r.Position, Error: err.Error(), Raw: string(r.Data), NoValue: r.Data == nil})
						return nil
					}
					c.partition, c.rowBytes, c.eventTime = r.Partition, len(r.Data), time.Time{}
					c.source, c.record, c.hasRecord = src.Name(), r, true
					b.MarkActive(input, r.Partition)
					row = t
					emit(&row)
					c.record, c.hasRecord = runtime.Record{}, false
					return nil
				})
			}})
	}}
}

// Map applies f to every row. f gets a pointer to the row to save a copy;
// it must not keep or modify it.
func Map[T, U any](s Stream[T], f func(*T) U) Stream[U] {
	name := funcName(f)
	return Stream[U]{p: s.p, attach: func(c *compiler, emit func(*U)) {
		// The stages after it get a pointer valid during the call: one
		// variable holds each row, instead of one allocation a row.
		var u U
		s.attach(c, func(t *T) {
			c.stage = name
			u = f(t)
			c.stage = ""
			emit(&u)
		})
	}}
}

// Filter keeps the rows for which keep returns true. keep gets a
// pointer to the row to save a copy; it must not keep or modify it (the
// stages after it see the row as read: a windowed aggregation takes the
// event time its WithWatermark read for it; change a row with Map).
func Filter[T any](s Stream[T], keep func(*T) bool) Stream[T] {
	name := funcName(keep)
	return Stream[T]{p: s.p, attach: func(c *compiler, emit func(*T)) {
		s.attach(c, func(t *T) {
			c.stage = name
			ok := keep(t)
			c.stage = ""
			if ok {
				emit(t)
			}
		})
	}}
}

// FlatMap replaces every row with the rows f returns.
func FlatMap[T, U any](s Stream[T], f func(*T) []U) Stream[U] {
	name := funcName(f)
	return Stream[U]{p: s.p, attach: func(c *compiler, emit func(*U)) {
		s.attach(c, func(t *T) {
			c.stage = name
			us := f(t)
			c.stage = ""
			for i := range us {
				emit(&us[i])
			}
		})
	}}
}

// Union merges the rows of streams, as Spark's union of streaming
// Datasets: each stream's sources keep their own offsets, and each
// stream's WithWatermark is an input of the query's watermark, which is
// the least of them (Spark's default multipleWatermarkPolicy; see
// runtime.MultipleWatermarkPolicy): one that has had no rows yet counts as
// the epoch. Within a batch, the rows of the first stream's sources come
// first.
func Union[T any](streams ...Stream[T]) Stream[T] {
	p := &plan{}
	if len(streams) == 0 {
		p = p.failed("streamgen: Union of no streams")
	}
	for _, s := range streams {
		s := s
		p = p.with(func(q *plan) {
			q.errs = append(q.errs, s.p.errs...)
			if !q.watermarked && s.p.watermarked {
				q.watermarkDelay = s.p.watermarkDelay
			}
			q.watermarked = q.watermarked || s.p.watermarked
		})
	}
	return Stream[T]{p: p, attach: func(c *compiler, emit func(*T)) {
		for _, s := range streams {
			s.attach(c, emit)
		}
	}}
}

// WatermarkOption configures WithWatermark.
type WatermarkOption[T any] func(*watermarkConfig[T])

type watermarkConfig[T any] struct {
	late Sink[T]
}

// LateRows sends the rows that arrive too late for the watermark to sink,
// batch by batch, instead of only counting them.
func LateRows[T any](sink Sink[T]) WatermarkOption[T] {
	return func(c *watermarkConfig[T]) { c.late = sink }
}

// WithWatermark declares the event time of the rows and how late they may
// arrive, as Spark's withWatermark. Its mark is the largest event time
// seen, cut to the millisecond (Spark's watermark counts milliseconds: a
// row 0.5 ms after the millisecond of the latest one is not late), less
// delay (cut to the millisecond too, as Spark's delayMs), kept per
// source partition, the least over the partitions that are not idle; the query's watermark starts at the epoch
// and only rises, to its mark (or, with several watermarks, to their
// least, by default), and a batch uses the watermark computed from the
// batches before it, as in Spark. A restart keeps the query's watermark,
// and the marks start again from the rows after it, but a partition
// behind the others still holds its input's mark (see "Spark's rules" in
// the README).
//
// Rows whose event time is at or before the watermark are late, as in
// Spark since 3.4: the watermark the batch before ran with (what that
// batch evicted); a batch evicts by its own, so a row between the two
// still counts. They are dropped (counted in the progress report of that
// operator and, with LateRows, sent to a side sink) when the stateful
// operator the rows reach first drops late rows: mapGroupsWithState and
// flatMapGroupsWithState do with EventTimeTimeout, as in Spark, and so do
// the deduplications, session windows, transformWithState and joins.
// Otherwise they go on (an aggregation after it leaves them out of its
// closed windows itself). Windowed aggregations decide by window, as Spark: a row is
// late for each of its windows whose end is at or before the watermark,
// and in Complete mode never. A row late for all its windows is dropped
// here (and sent to LateRows); one late for some of its sliding windows is
// left out of those, and counted. Session windows whose rows each have a
// gap of their own (GapBy) decide in the aggregation, as each row
// reaches it, and those that join late rows to open sessions
// (JoiningOpenSessions) when the batch runs: either sends the row read
// here to LateRows when it drops it (once, however many of the rows
// made of it it drops).
// Where several outputs of WriteAll read the stream, each decides by the
// operator its rows reach first, and LateRows gets a row that any of them
// dropped once; branches of one output (a self-join) each have a
// watermark stage of their own.
//
// A row whose event time is outside the years 1700 to 2199, the times the
// engine keeps (Go's zero time, of a field never set, is the year 1), is
// a dead letter, with its record's position and bytes; so it is for a
// windowed aggregation or a stream-stream join that reads the time
// itself.
func WithWatermark[T any](s Stream[T], eventTime func(*T) time.Time, delay time.Duration, opts ...WatermarkOption[T]) Stream[T] {
	var cfg watermarkConfig[T]
	for _, o := range opts {
		o(&cfg)
	}
	p := s.p
	if p.watermarked {
		p = p.failed("streamgen: WithWatermark: the stream already has a watermark")
	}
	if delay < 0 {
		p = p.failed("streamgen: WithWatermark: negative delay %v", delay)
	}
	delay = delay.Truncate(time.Millisecond)
	p = p.with(func(q *plan) { q.watermarked, q.watermarkDelay = true, delay })
	name := funcName(eventTime)
	id := new(byte)
	return Stream[T]{p: p, attach: func(c *compiler, emit func(*T)) {
		// The operator this branch's rows reach first decides which of
		// them are late: each branch that reads the stream has its own.
		next := &lateSlot{}
		if n := len(c.attaching); n > 0 {
			next = c.attaching[n-1]
		}
		var f *fan[T]
		branch := func(t *T) {
			b := c.batch
			if late := b.LateWatermarkOf(next.index); next.drops && !late.IsZero() && !c.eventTime.After(late) {
				n := int64(1)
				if next.rule != nil {
					n = next.rule(c.eventTime, late)
				}
				if n > 0 {
					for range n {
						b.DropLate(next.index)
					}
					f.dropped = true
					return
				}
			}
			emit(t)
		}
		f, registered := sharedAcrossOutputs(c, id, branch)
		if f == nil {
			// Read again within one output: a stage of its own, so that
			// an operator before it is compiled anew too.
			f = &fan[T]{c: c, emits: []func(*T){branch}}
		}
		// The rows from here on carry this watermark's event time, even
		// those that came out of an operator before it.
		defer func() { c.stamped, c.unstamped = len(c.ops), false }()
		if registered {
			return
		}
		mark := c.plan.Watermarks
		c.plan.Watermarks++
		var late []T
		if cfg.late != nil {
			c.plan.Outputs = append(c.plan.Outputs, runtime.Output{Description: "late rows",
				Write: func(ctx context.Context, b *runtime.Batch) (int64, error) {
					// Written every batch, empty or not, so that a batch run
					// again replaces what an earlier attempt wrote.
					n := int64(len(late))
					err := unprefixed(cfg.late.Write(ctx, b.ID, late))
					clear(late)
					late = late[:0]
					return n, err
				}})
			describeSink(&c.plan.Outputs[len(c.plan.Outputs)-1], cfg.late)
		}
		// keeper makes the function that sends the row being pushed,
		// current, to LateRows once (c.lateRow): kept, once made.
		var current *T
		var kept func()
		keeper := func() func() {
			if kept == nil {
				row, sent := *current, false
				kept = func() {
					if !sent {
						sent = true
						late = append(late, row)
					}
				}
			}
			return kept
		}
		ops, reached := len(c.ops), len(c.reached)
		fn := funcPointer(eventTime)
		keepsLate := cfg.late != nil
		s.attach(c, func(t *T) {
			c.stage = name
			et := eventTime(t)
			c.stage = ""
			ns := runtime.ClampedNanos(et)
			if c.outOfRange(ns) {
				return
			}
			c.eventTime, c.eventNanos, c.eventRow, c.eventFn = et, ns, unsafe.Pointer(t), fn
			c.batch.ObserveRow(mark, c.input, c.partition, ns, delay)
			// A row late for the operator of every branch that reads it,
			// or of some, is a late row (sent to LateRows once).
			f.dropped = false
			if keepsLate {
				current, kept, c.lateRow = t, nil, keeper
			}
			if len(f.emits) == 1 { // f.emit, a call fewer
				f.emits[0](t)
			} else {
				f.emit(t)
			}
			c.lateRow, c.eventRow = nil, nil
			if f.dropped && keepsLate {
				keeper()()
			}
		})
		f.compiled(ops, reached)
	}}
}
