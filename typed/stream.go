package typed

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// Stream is a typed stream of records. It is a description: nothing runs
// until a query over it starts. Streams are values; deriving one from
// another does not change the first. The zero Stream is not usable.
type Stream[T any] struct {
	p *plan
	// run pushes the rows of one micro-batch, in order, to emit.
	run func(b *batch, emit func(*T)) error
	// watermarked is true downstream of WithWatermark.
	watermarked bool
}

// plan is what a stream knows of the pipeline up to it: its source,
// watermark and stateful operators, and any error found while building it
// (reported by Start, so that building reads as a chain of calls). A
// derived stream gets a copy with its additions, so two pipelines built
// from one stream do not see each other's operators.
type plan struct {
	source    runtime.Source
	watermark *time.Duration
	operators []*operator
	errs      []error
}

// with returns a copy of p for a derived stream.
func (p *plan) with(change func(*plan)) *plan {
	q := *p
	q.operators = slices.Clone(p.operators)
	q.errs = slices.Clone(p.errs)
	change(&q)
	return &q
}

// failed returns a copy of p with an error.
func (p *plan) failed(format string, args ...any) *plan {
	return p.with(func(q *plan) { q.errs = append(q.errs, fmt.Errorf(format, args...)) })
}

// batch is one micro-batch as the stages of a stream see it.
type batch struct {
	ctx context.Context
	run *runtime.BatchRun
	// plan is the whole query's plan.
	plan *plan
	// partition is the source partition of the row being pushed.
	partition string
}

// From reads records of type T from src, decoding each raw record (a JSON
// line) with T's generated decoder. A record that does not decode goes to
// the dead-letter sink with its position and the error; the query goes on.
func From[T any, P codec.RecordPtr[T]](src runtime.Source) Stream[T] {
	p := &plan{source: src}
	return Stream[T]{p: p, run: func(b *batch, emit func(*T)) error {
		started := time.Now()
		defer func() { b.run.Durations["getBatch"] += time.Since(started) }()
		return src.Read(b.ctx, b.run.Start, b.run.End, func(r runtime.Record) error {
			b.run.InputRows++
			var t T
			if err := P(&t).UnmarshalJSON(r.Data); err != nil {
				b.run.DeadLetters = append(b.run.DeadLetters, runtime.DeadLetter{
					Source: src.Name(), Position: r.Position, Error: err.Error(), Raw: string(r.Data),
				})
				return nil
			}
			b.partition = r.Partition
			b.run.Active[r.Partition] = true
			emit(&t)
			return nil
		})
	}}
}

// Map applies f to every row. f gets a pointer to the row to save a copy;
// it must not keep or modify it.
func Map[T, U any](s Stream[T], f func(*T) U) Stream[U] {
	return Stream[U]{p: s.p, watermarked: s.watermarked, run: func(b *batch, emit func(*U)) error {
		return s.run(b, func(t *T) {
			u := f(t)
			emit(&u)
		})
	}}
}

// Filter keeps the rows for which keep returns true.
func Filter[T any](s Stream[T], keep func(*T) bool) Stream[T] {
	return Stream[T]{p: s.p, watermarked: s.watermarked, run: func(b *batch, emit func(*T)) error {
		return s.run(b, func(t *T) {
			if keep(t) {
				emit(t)
			}
		})
	}}
}

// FlatMap replaces every row with the rows f returns.
func FlatMap[T, U any](s Stream[T], f func(*T) []U) Stream[U] {
	return Stream[U]{p: s.p, watermarked: s.watermarked, run: func(b *batch, emit func(*U)) error {
		return s.run(b, func(t *T) {
			for _, u := range f(t) {
				emit(&u)
			}
		})
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
// arrive. The watermark is the largest event time seen, less delay, kept
// per source partition; the query's watermark is the minimum over the
// partitions that are not idle, and a batch uses the watermark computed
// from the batches before it, as in Spark. Rows whose event time is at or
// before the watermark are late: stateful operators downstream do not see
// them; they are counted in the progress report and, with LateRows, sent
// to a side sink.
func WithWatermark[T any](s Stream[T], eventTime func(*T) time.Time, delay time.Duration, opts ...WatermarkOption[T]) Stream[T] {
	var cfg watermarkConfig[T]
	for _, o := range opts {
		o(&cfg)
	}
	p := s.p
	if p.watermark != nil {
		p = p.failed("streamgen: WithWatermark: the stream already has a watermark")
	}
	if delay < 0 {
		p = p.failed("streamgen: WithWatermark: negative delay %v", delay)
	}
	p = p.with(func(q *plan) { q.watermark = &delay })
	return Stream[T]{p: p, watermarked: true, run: func(b *batch, emit func(*T)) error {
		wm := b.run.Watermark
		dropLate := len(b.plan.operators) > 0 && !wm.IsZero()
		var late []T
		err := s.run(b, func(t *T) {
			et := eventTime(t)
			if m, ok := b.run.MaxEventTime[b.partition]; !ok || et.After(m) {
				b.run.MaxEventTime[b.partition] = et
			}
			if dropLate && !et.After(wm) {
				b.run.LateRows++
				if cfg.late != nil {
					late = append(late, *t)
				}
				return
			}
			emit(t)
		})
		if err != nil || cfg.late == nil {
			return err
		}
		// Written every batch, empty or not, so that a batch run again
		// replaces what an earlier attempt wrote.
		if err := cfg.late.Write(b.ctx, b.run.ID, late); err != nil {
			return fmt.Errorf("streamgen: batch %d: late-rows sink: %w", b.run.ID, err)
		}
		return nil
	}}
}

// errStop ends a scan early.
var errStop = errors.New("stop")
