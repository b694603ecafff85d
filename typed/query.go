package typed

import (
	"context"
	"errors"
	"fmt"
	"strings"

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
// FlatMapGroupsWithState or TransformWithState, which for a generated
// binding is its directive's mode=), or Append without one, unless set
// with OutputMode.
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
	c := compile(w.s, func(t *T) { out = appendDoubling(out, t) })
	if err := w.validate(ctx, c); err != nil {
		c.closeAll()
		return nil, err
	}
	c.plan.Outputs = append([]runtime.Output{{Description: sinkDescription(w.sink),
		Write: func(ctx context.Context, b *runtime.Batch) (n int64, err error) {
			defer c.catch(&err)
			n = int64(len(out))
			// The runtime names the sink and the batch.
			err = unprefixed(w.sink.Write(ctx, b.ID, out))
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
	// fix says how to make the query's mode m: by OutputMode, or by
	// leaving it out when the operators' own mode is m.
	fix := func(m OutputMode) string {
		if w.modeSet {
			return fmt.Sprintf("use WriteTo(...).OutputMode(typed.%v), or leave OutputMode out: the query then takes its operator's mode", m)
		}
		return fmt.Sprintf("use WriteTo(...).OutputMode(typed.%v)", m)
	}
	for _, op := range c.ops {
		switch {
		case op.aggregation:
			if mode == Append && !(op.windowed && op.watermarked) {
				errs = append(errs, fmt.Errorf("%s (%s): the Append output mode needs event-time windows and a watermark, as in Spark (a row is written once, when the watermark closes its window): use WriteTo(...).OutputMode(typed.Update) or typed.Complete", op.kind, op.function))
			}
		case hasAggregation:
			// Before an aggregation, an operator's rows must be final.
			if op.mode != Append {
				errs = append(errs, fmt.Errorf("%s (%s) is followed by an aggregation, so its output mode must be Append (rows that will not change): give it typed.Append (mode=append in its %s directive)", op.kind, op.function, directiveOf(op.kind)))
			}
		case mode == Complete:
			errs = append(errs, fmt.Errorf("%s (%s) does not support the Complete output mode: %s", op.kind, op.function, fix(op.mode)))
		case op.kind == "mapGroupsWithState" && mode != Update:
			errs = append(errs, fmt.Errorf("mapGroupsWithState (%s) needs the Update output mode; the query has %v: %s", op.function, mode, fix(Update)))
		case (op.kind == "flatMapGroupsWithState" || op.kind == "transformWithState") && op.mode != mode:
			errs = append(errs, fmt.Errorf("%s (%s) is in %v mode; the query has %v: %s, or give the operator typed.%v (mode=%s in its %s directive)", op.kind, op.function, op.mode, mode, fix(op.mode), mode, strings.ToLower(mode.String()), directiveOf(op.kind)))
		}
		if op.mode == Complete && !op.aggregation {
			errs = append(errs, fmt.Errorf("%s (%s): the operator's output mode must be Append or Update", op.kind, op.function))
		}
		if op.timeout == EventTimeTimeout && !op.watermarked {
			errs = append(errs, fmt.Errorf("%s (%s) uses EventTimeTimeout but its input has no watermark: add typed.WithWatermark before it (watermark=DURATION in its %s directive)", op.kind, op.function, directiveOf(op.kind)))
		}
		if op.needsWatermark && !op.watermarked {
			errs = append(errs, fmt.Errorf("%s (%s) uses TimeModeEventTime but its input has no watermark: add typed.WithWatermark before it (watermark=DURATION in its %s directive)", op.kind, op.function, directiveOf(op.kind)))
		}
		if op.prepare != nil {
			if err := op.prepare(ctx); err != nil {
				errs = append(errs, fmt.Errorf("%s (%s): %w", op.kind, op.function, unprefixed(err)))
			}
		}
	}
	// Each error is one line of the message, under its one prefix.
	for i, err := range errs {
		errs[i] = unprefixed(err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: cannot start the query: %w", unprefixed(err))
	}
	return nil
}

// directiveOf names the directive that generates a binding of an
// operator of kind.
func directiveOf(kind string) string {
	if kind == "transformWithState" {
		return "//streamgen:processor"
	}
	return "//streamgen:" + kind
}
