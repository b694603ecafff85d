package typed

import (
	"context"
	"errors"
	"fmt"

	"github.com/streamgen/streamgen/runtime"
)

// Query is a running query: see runtime.Query.
type Query = runtime.Query

// Writer is a stream bound to a sink, ready to start.
type Writer[T any] struct {
	s       Stream[T]
	sink    Sink[T]
	mode    OutputMode
	modeSet bool
}

// WriteTo binds s to sink. The output mode is that of the stream's
// stateful operators (Update after MapGroupsWithState, the mode given to
// FlatMapGroupsWithState), or Append without one, unless set with
// OutputMode.
func WriteTo[T any](s Stream[T], sink Sink[T]) *Writer[T] {
	return &Writer[T]{s: s, sink: sink}
}

// OutputMode sets the query's output mode.
func (w *Writer[T]) OutputMode(m OutputMode) *Writer[T] {
	w.mode, w.modeSet = m, true
	return w
}

// Start compiles the pipeline and starts the query (see runtime.Start for
// the options). A pipeline that cannot run as built (an output mode its
// operators do not allow, an event-time timeout without a watermark, a key
// type that cannot be encoded, an initial state with a key twice) is an
// error here, before anything runs.
func (w *Writer[T]) Start(ctx context.Context, opts ...runtime.Option) (*Query, error) {
	var out []T
	c := compile(w.s, func(t *T) { out = append(out, *t) })
	if err := w.validate(ctx, c); err != nil {
		c.closeAll()
		return nil, err
	}
	c.plan.Outputs = append([]runtime.Output{{Description: sinkDescription(w.sink),
		Write: func(ctx context.Context, b *runtime.Batch) (n int64, err error) {
			defer c.catch(&err)
			n = int64(len(out))
			err = w.sink.Write(ctx, b.ID, out)
			clear(out)
			out = out[:0]
			return n, err
		}}}, c.plan.Outputs...)
	q, err := runtime.Start(ctx, &c.plan, opts...)
	if err != nil {
		c.closeAll()
	}
	return q, err
}

// sinkDescription names a sink in progress reports.
func sinkDescription(s any) string {
	if d, ok := s.(interface{ Description() string }); ok {
		return d.Description()
	}
	return fmt.Sprintf("%T", s)
}

func (w *Writer[T]) validate(ctx context.Context, c *compiler) error {
	errs := append(append([]error(nil), w.s.p.errs...), c.errs...)
	mode := w.mode
	hasAggregation := false
	for _, op := range c.ops {
		hasAggregation = hasAggregation || op.aggregation
	}
	if !w.modeSet && len(c.ops) > 0 {
		mode = c.ops[len(c.ops)-1].mode
		if hasAggregation {
			mode = Update
		}
	}
	c.outputMode = mode
	for _, op := range c.ops {
		switch {
		case op.aggregation:
			if mode == Append && !(op.windowed && op.watermarked) {
				errs = append(errs, fmt.Errorf("%s (%s): the Append output mode needs event-time windows and a watermark, as in Spark (a row is written once, when the watermark closes its window): use WriteTo(...).OutputMode(typed.Update) or typed.Complete", op.kind, op.function))
			}
		case hasAggregation:
			// Before an aggregation, an operator's rows must be final.
			if op.mode != Append {
				errs = append(errs, fmt.Errorf("%s (%s) is followed by an aggregation, so its output mode must be Append (rows that will not change)", op.kind, op.function))
			}
		case mode == Complete:
			errs = append(errs, fmt.Errorf("%s (%s) does not support the Complete output mode: use WriteTo(...).OutputMode(typed.%v)", op.kind, op.function, op.mode))
		case op.kind == "mapGroupsWithState" && mode != Update:
			errs = append(errs, fmt.Errorf("mapGroupsWithState (%s) needs the Update output mode; the query has %v: use WriteTo(...).OutputMode(typed.Update)", op.function, mode))
		case (op.kind == "flatMapGroupsWithState" || op.kind == "transformWithState") && op.mode != mode:
			errs = append(errs, fmt.Errorf("%s (%s) is in %v mode; the query has %v: use WriteTo(...).OutputMode(typed.%v)", op.kind, op.function, op.mode, mode, op.mode))
		}
		if op.mode == Complete && !op.aggregation {
			errs = append(errs, fmt.Errorf("%s (%s): the operator's output mode must be Append or Update", op.kind, op.function))
		}
		if op.timeout == EventTimeTimeout && !op.watermarked {
			errs = append(errs, fmt.Errorf("%s (%s) uses EventTimeTimeout but its input has no watermark (WithWatermark)", op.kind, op.function))
		}
		if op.needsWatermark && !op.watermarked {
			errs = append(errs, fmt.Errorf("%s (%s) uses TimeModeEventTime but its input has no watermark (WithWatermark)", op.kind, op.function))
		}
		if op.prepare != nil {
			if err := op.prepare(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): %w", op.kind, op.function, err))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: cannot start the query: %w", err)
	}
	return nil
}
