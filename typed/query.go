package typed

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// Query is a running query: see runtime.Query.
type Query = runtime.Query

// Writer is a stream bound to a sink, ready to start.
type Writer[T any] struct {
	s    Stream[T]
	sink Sink[T]
	mode OutputMode
}

// WriteTo binds s to sink. The output mode is Append unless set with
// OutputMode.
func WriteTo[T any](s Stream[T], sink Sink[T]) *Writer[T] {
	return &Writer[T]{s: s, sink: sink}
}

// OutputMode sets the query's output mode.
func (w *Writer[T]) OutputMode(m OutputMode) *Writer[T] {
	w.mode = m
	return w
}

// Start checks the pipeline and starts the query (see runtime.Start for
// the options). A pipeline that cannot run as built (an output mode its
// operators do not allow, an event-time timeout without a watermark, a
// key type that cannot be encoded) is an error here, before anything runs.
func (w *Writer[T]) Start(ctx context.Context, opts ...runtime.Option) (*Query, error) {
	if err := w.validate(); err != nil {
		return nil, err
	}
	return runtime.Start(ctx, &job[T]{w: w}, opts...)
}

func (w *Writer[T]) validate() error {
	p := w.s.p
	errs := append([]error(nil), p.errs...)
	for _, op := range p.operators {
		switch {
		case w.mode == Complete:
			errs = append(errs, fmt.Errorf("%s (%s) does not support the Complete output mode", op.kind, op.function))
		case op.kind == "mapGroupsWithState" && w.mode != Update:
			errs = append(errs, fmt.Errorf("mapGroupsWithState (%s) needs the Update output mode; the query has %v", op.function, w.mode))
		case op.kind == "flatMapGroupsWithState" && op.mode != w.mode:
			errs = append(errs, fmt.Errorf("flatMapGroupsWithState (%s) is in %v mode; the query has %v", op.function, op.mode, w.mode))
		}
		if op.mode == Complete {
			errs = append(errs, fmt.Errorf("%s (%s): the operator's output mode must be Append or Update", op.kind, op.function))
		}
		if op.timeout == EventTimeTimeout && !op.watermarked {
			errs = append(errs, fmt.Errorf("%s (%s) uses EventTimeTimeout but its input has no watermark (WithWatermark)", op.kind, op.function))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: cannot start the query: %w", err)
	}
	return nil
}

// job is a Writer as the runtime's query loop sees it.
type job[T any] struct{ w *Writer[T] }

func (j *job[T]) Meta() runtime.Meta {
	var m runtime.Meta
	for _, op := range j.w.s.p.operators {
		m.Operators = append(m.Operators, op.meta)
	}
	return m
}

func (j *job[T]) Source() runtime.Source { return j.w.s.p.source }

func (j *job[T]) WatermarkDelay() (time.Duration, bool) {
	if d := j.w.s.p.watermark; d != nil {
		return *d, true
	}
	return 0, false
}

func (j *job[T]) TimersDue(s *runtime.Store, watermark, now time.Time) (bool, error) {
	for _, op := range j.w.s.p.operators {
		if due, err := op.timersDue(s, watermark, now); due || err != nil {
			return due, err
		}
	}
	return false, nil
}

func (j *job[T]) RunBatch(ctx context.Context, run *runtime.BatchRun) error {
	b := &batch{ctx: ctx, run: run, plan: j.w.s.p}
	var out []T
	started := time.Now()
	if err := j.w.s.run(b, func(t *T) { out = append(out, *t) }); err != nil {
		return err
	}
	run.Durations["addBatch"] = time.Since(started)
	run.OutputRows = int64(len(out))
	if err := j.w.sink.Write(ctx, run.ID, out); err != nil {
		return fmt.Errorf("streamgen: batch %d: sink: %w", run.ID, err)
	}
	return nil
}
