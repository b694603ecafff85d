package typed

import (
	"fmt"
	"sync/atomic"
)

// This file holds what the bindings that streamgen generates for
// //streamgen:mapGroupsWithState, //streamgen:flatMapGroupsWithState and
// //streamgen:processor directives call beyond the operators themselves.

// lateRowsOption is a sink of late rows given to a generated binding: a
// Sink[In] of the binding's input type. used is set when the binding's
// watermark took it, so that one given to an operator whose input has no
// watermark from its binding is an error at Start, not silently ignored.
type lateRowsOption struct {
	sink any
	used atomic.Bool // atomic: one option may go to pipelines built at once
}

// watermarkOptions returns LateRows of l's sink, for the watermark of a
// binding whose input is a Stream[In], and marks l used; nil when l is nil
// or its sink is not a Sink[In].
func watermarkOptions[In any](l *lateRowsOption) []WatermarkOption[In] {
	if l == nil {
		return nil
	}
	sink, ok := l.sink.(Sink[In])
	if !ok {
		return nil
	}
	l.used.Store(true)
	return []WatermarkOption[In]{LateRows(sink)}
}

// check reports a late-rows option that no binding's watermark took.
func (l *lateRowsOption) check() error {
	if l == nil || l.used.Load() {
		return nil
	}
	return fmt.Errorf("late rows sink %T: it was given to an operator that is not a generated binding with watermark=, or whose input is not a stream of the sink's rows; without a binding, pass typed.LateRows(sink) to WithWatermark", l.sink)
}

// BindingLateRows is the option that sends the rows too late for the
// watermark of a generated (flat)mapGroupsWithState binding to sink, as
// LateRows does for WithWatermark; K, S and In are the binding's key,
// state and input types. The generator writes, beside each binding whose
// directive sets watermark=, a function <binding>LateRows(sink) that
// returns it with the types filled in: call that one. Rows are late, and
// dropped, only where the operator drops them (with timeout=event).
func BindingLateRows[K comparable, S, In any](sink Sink[In]) GroupsOption[K, S] {
	l := &lateRowsOption{sink: sink}
	return func(c *groupsConfig[K, S]) { c.late = l }
}

// BindingWatermarkOptions returns the options of WithWatermark that opts,
// given to a generated binding, hold: LateRows, from BindingLateRows. For
// generated code.
func BindingWatermarkOptions[K comparable, S, In any](opts []GroupsOption[K, S]) []WatermarkOption[In] {
	var cfg groupsConfig[K, S]
	for _, o := range opts {
		o(&cfg)
	}
	return watermarkOptions[In](cfg.late)
}

// ProcessorLateRows is BindingLateRows for a binding of a
// //streamgen:processor type: the rows too late for its watermark go to
// sink. The generator writes <binding>LateRows(sink) for it too.
func ProcessorLateRows[In any](sink Sink[In]) ProcessorOption {
	l := &lateRowsOption{sink: sink}
	return processorOptionFunc(func(c *processorConfig) { c.late = l })
}

// ProcessorWatermarkOptions is BindingWatermarkOptions for the options of
// a processor's binding. For generated code.
func ProcessorWatermarkOptions[In any](opts []ProcessorOption) []WatermarkOption[In] {
	var cfg processorConfig
	for _, o := range opts {
		o.applyProcessor(&cfg)
	}
	return watermarkOptions[In](cfg.late)
}
