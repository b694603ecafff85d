package typed

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/streamgen/streamgen/runtime"
)

// Query is a running query: see runtime.Query.
type Query = runtime.Query

// Writer is a stream bound to a sink, ready to start. OutputMode changes
// it: a Writer is not safe for concurrent use while it is being set up;
// Start may be called from any goroutine once it is.
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
// type that cannot be encoded, a flatMapGroupsWithState initial state
// with a key twice) is an error here, before anything runs.
func (w *Writer[T]) Start(ctx context.Context, opts ...runtime.Option) (*Query, error) {
	return WriteAll(w).Start(ctx, opts...)
}

// Output is one output of a query: a stream bound to its sink, as WriteTo
// makes it (a *Writer). WriteAll starts several as one query.
type Output interface {
	// bind compiles the output's stream with c (its inputs and operators
	// registered with c) and returns its part of the plan.
	bind(c *compiler) boundOutput
	// sinkValue is the sink the output writes to.
	sinkValue() any
}

// boundOutput is an Output compiled for one query.
type boundOutput struct {
	out  runtime.Output
	errs []error
	// ops are the operators the output's rows come through, in order.
	ops         []int
	mode        OutputMode
	modeSet     bool
	description string
	// index is the output's place among the query's.
	index int
}

func (w *Writer[T]) sinkValue() any { return w.sink }

func (w *Writer[T]) bind(c *compiler) boundOutput {
	var out []T
	ops, reached := len(c.ops), len(c.reached)
	w.s.attach(c, func(t *T) { out = appendDoubling(out, t) })
	b := boundOutput{errs: w.s.p.errs, mode: w.mode, modeSet: w.modeSet, description: sinkDescription(w.sink),
		ops: upstreamSet(ops, len(c.ops), c.reached[reached:])}
	b.out = runtime.Output{Description: b.description,
		Write: func(ctx context.Context, batch *runtime.Batch) (n int64, err error) {
			defer c.catch(&err)
			n = int64(len(out))
			// The runtime names the sink and the batch.
			err = unprefixed(w.sink.Write(ctx, batch.ID, out))
			clear(out)
			out = out[:0]
			return n, err
		}}
	describeSink(&b.out, w.sink)
	return b
}

// Writers are several outputs started as one query: see WriteAll. Like
// a Writer, they describe the query: each Start compiles it anew, so
// they may be started again (a restart) once the last query has
// stopped.
type Writers struct {
	outputs []Output
}

// WriteAll makes one query of several outputs, each a stream bound to its
// sink by WriteTo, as a Kafka Streams topology writes to several topics
// and a Flink job to several sinks: the streams may share their sources
// and stateful operators, which then run once, each output getting every
// row the stream has. So an operator's rows can go to one sink and a
// selection of them, or of its input, to another, with one state and one
// checkpoint, and, in a kafka.App with ExactlyOnce, in one transaction a
// batch.
//
// The outputs write each batch in the order given, each by the batch's
// id (see Sink). The query's progress reports the first as its sink and
// the others as OtherSinks. The query has one output mode, which the
// outputs' operators must agree on: the mode set with OutputMode on any
// of the outputs (all that set one must set the same), else the one the
// operators that bind a mode give (aggregations Update, mapGroupsWithState
// Update, flatMapGroupsWithState its own, joins of two streams Append),
// which must then be the same for all of them (deduplications and
// transformWithState take any); in Complete mode each output needs an
// aggregation. A WithWatermark that several outputs read decides late
// rows for each by the operator its rows reach first there, and gives
// LateRows a row that any of them dropped, once. Within one output, a
// stream read twice (a self-join) is compiled twice, as in a query of
// WriteTo alone. An output given twice is refused, and so is one sink
// given to two outputs (write the Union of their streams to it instead).
func WriteAll(outputs ...Output) *Writers {
	return &Writers{outputs: outputs}
}

// Start compiles the outputs' pipelines into one query and starts it; see
// Writer.Start.
func (ws *Writers) Start(ctx context.Context, opts ...runtime.Option) (*Query, error) {
	if len(ws.outputs) == 0 {
		return nil, errors.New("streamgen: cannot start the query: WriteAll of no outputs")
	}
	for i, o := range ws.outputs {
		if slices.Contains(ws.outputs[:i], o) {
			return nil, fmt.Errorf("streamgen: cannot start the query: output %d of WriteAll is output %d again (each batch would be written twice)", i+1, slices.Index(ws.outputs, o)+1)
		}
		if j := slices.IndexFunc(ws.outputs[:i], func(p Output) bool { return sameSink(p.sinkValue(), o.sinkValue()) }); j >= 0 {
			return nil, fmt.Errorf("streamgen: cannot start the query: output %d of WriteAll writes to the sink of output %d (%s), which takes one write a batch, by the batch's id: one output's rows would be lost; write the Union of the two streams to it instead",
				i+1, j+1, sinkDescription(o.sinkValue()))
		}
		place := placeOf(o.sinkValue())
		if j := slices.IndexFunc(ws.outputs[:i], func(p Output) bool { return place != "" && placeOf(p.sinkValue()) == place }); j >= 0 {
			return nil, fmt.Errorf("streamgen: cannot start the query: output %d of WriteAll (%s) writes where output %d (%s) does, %s, one file a batch named by the batch's id: one output's rows would replace the other's; write the Union of the two streams to one sink, or give each its own directory",
				i+1, sinkDescription(o.sinkValue()), j+1, sinkDescription(ws.outputs[j].sinkValue()), place)
		}
	}
	c := &compiler{}
	bound := make([]boundOutput, len(ws.outputs))
	for i, o := range ws.outputs {
		c.output = i
		bound[i] = o.bind(c)
		bound[i].index = i
	}
	c.finish()
	if err := c.validate(ctx, bound); err != nil {
		c.closeAll()
		return nil, err
	}
	// The stages release what a batch held once every output has its rows,
	// or once one fails (the batch ends there).
	for i := range bound {
		out, last := &bound[i].out, i == len(bound)-1
		write := out.Write
		out.Write = func(ctx context.Context, b *runtime.Batch) (int64, error) {
			n, err := write(ctx, b)
			if last || err != nil {
				for _, end := range c.batchEnds {
					end()
				}
			}
			return n, err
		}
	}
	outs := make([]runtime.Output, 0, len(bound)+len(c.plan.Outputs))
	for i := range bound {
		bound[i].out.Sink = true
		outs = append(outs, bound[i].out)
	}
	c.plan.Outputs = append(outs, c.plan.Outputs...)
	q, err := runtime.Start(ctx, &c.plan, opts...)
	if err != nil {
		c.closeAll()
	}
	return q, err
}

// sameSink says a and b are one sink, by identity: the same pointer, or
// equal values of one type. Values that cannot be compared (a func, a
// struct holding one or a slice, even through an interface) are distinct,
// and so are values of a type of size zero, which holds no state a second
// write could upset. Two sinks that write to one place (two FilesSinks of
// one directory) are found out by placeOf.
func sameSink(a, b any) bool {
	t := reflect.TypeOf(a)
	return t != nil && t == reflect.TypeOf(b) && t.Size() > 0 && reflect.ValueOf(a).Comparable() && a == b
}

// placeOf names the place a sink writes to, for the sinks that another
// sink may write to as well (a FilesSink's directory, as an absolute
// path), else "".
func placeOf(sink any) string {
	if p, ok := sink.(interface{ place() string }); ok {
		return p.place()
	}
	return ""
}

// sinkDescription names a sink in progress reports.
func sinkDescription(s any) string {
	if d, ok := s.(interface{ Description() string }); ok {
		return d.Description()
	}
	return fmt.Sprintf("%T", s)
}

// validate checks the compiled pipeline of outputs and settles the
// query's output mode.
func (c *compiler) validate(ctx context.Context, outputs []boundOutput) error {
	var errs []error
	for _, o := range outputs {
		errs = append(errs, o.errs...)
	}
	errs = append(errs, c.errs...)
	mode, modeSet, err := c.queryMode(outputs)
	if err != nil {
		errs = append(errs, err)
	}
	c.outputMode = mode
	errs = append(errs, checkOutputModes(c.ops, mode, modeSet)...)
	if mode == Complete && len(outputs) > 1 {
		// Each output writes its whole table every batch: each needs an
		// aggregation of its own rows, as a query of it alone would.
		for _, o := range outputs {
			if !slices.ContainsFunc(o.ops, func(i int) bool { return c.ops[i].aggregation }) {
				errs = append(errs, fmt.Errorf("output %d (%s) has no streaming aggregation, and the query is in Complete mode, which writes each output's whole table every batch (Spark: \"Complete output mode not supported when there are no streaming aggregations\"): write it from another query, or use typed.Update", o.index+1, o.description))
			}
		}
	}
	for _, op := range c.ops {
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
	if len(errs) == 0 {
		for _, prepare := range c.prepares {
			if err := prepare(ctx); err != nil {
				errs = append(errs, err)
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

// queryMode returns the output mode of the query of outputs, and whether
// it was set with OutputMode: the one set (outputs that set different
// ones are an error); else, for one output, the one its operators give
// (Update with an aggregation, else the last operator's; Append without
// operators); else the one the operators that bind it give, which must
// agree (aggregations give Update, mapGroupsWithState Update,
// flatMapGroupsWithState its own, joins of two streams Append; the rest,
// deduplications and transformWithState among them, take any), or,
// where none binds it, the first output's with operators.
func (c *compiler) queryMode(outputs []boundOutput) (OutputMode, bool, error) {
	var modes []string
	var mode OutputMode
	found, differ := false, false
	note := func(o boundOutput, m OutputMode) {
		modes = append(modes, fmt.Sprintf("output %d (%s): %v", o.index+1, o.description, m))
		differ = differ || found && m != mode
		if !found {
			mode, found = m, true
		}
	}
	for _, o := range outputs {
		if o.modeSet {
			note(o, o.mode)
		}
	}
	if found {
		if differ {
			return mode, true, fmt.Errorf("the outputs set different output modes (%s): a query has one, which its operators follow; set the same on each, or on one", strings.Join(modes, "; "))
		}
		return mode, true, nil
	}
	if len(outputs) > 1 {
		for _, o := range outputs {
			if m, ok := c.derivedMode(o.ops, true); ok {
				note(o, m)
			}
		}
		if differ {
			return mode, false, fmt.Errorf("the outputs' operators give different output modes (%s): a query has one, which its operators follow; set it with WriteTo(...).OutputMode on an output", strings.Join(modes, "; "))
		}
		if found {
			return mode, false, nil
		}
	}
	for _, o := range outputs {
		if m, ok := c.derivedMode(o.ops, false); ok {
			return m, false, nil
		}
	}
	return Append, false, nil
}

// derivedMode is the output mode the operators ops give: Update with an
// aggregation, else the last one's; with binding, of those only that
// bind a query's mode (see queryMode). ok is false when there is none.
func (c *compiler) derivedMode(ops []int, binding bool) (m OutputMode, ok bool) {
	for _, i := range ops {
		op := c.ops[i]
		switch {
		case op.aggregation && op.sessions:
			// Spark refuses Update for session windows.
			return Append, true
		case op.aggregation:
			return Update, true
		case !binding || op.join || op.kind == "mapGroupsWithState" || op.kind == "flatMapGroupsWithState":
			m, ok = op.mode, true
		}
	}
	return m, ok
}

// checkOutputModes refuses what Spark's UnsupportedOperationChecker
// refuses of a query's stateful operators (ops, upstream first) in output
// mode, and nothing more, each with Spark's reason; modeSet says whether
// the query's mode was given with OutputMode (for the fix a message
// names).
//
//   - mapGroupsWithState: at most one, not with flatMapGroupsWithState,
//     and the query in Update mode.
//   - flatMapGroupsWithState: more than one only all in Append mode in an
//     Append query; without an aggregation in the query, the operator's
//     mode is the query's; with one, the operator is in Append mode.
//   - aggregations: Append needs event-time windows and a watermark;
//     Complete needs an aggregation.
//   - transformWithState: any mode of its own in an Append or Update
//     query (Spark has no rule for it beyond those).
//   - a stateful operator after one whose rows may be older than the
//     watermark by any amount (an event-time timeout, an aggregation in a
//     query not in Append mode, a join on a time condition whose sides
//     forget nothing, a join as of the rows' times) is refused: the
//     global watermark would drop them as late (Spark's
//     checkStreamingQueryGlobalWatermarkLimit). One after a join on a
//     time condition whose sides forget their rows runs with the
//     watermark behind by the join's runtime.OperatorInfo.OutputDelay.
func checkOutputModes(ops []operatorInfo, mode OutputMode, modeSet bool) []error {
	var errs []error
	// fix says how to make the query's mode m: by OutputMode, or by
	// leaving it out when the operators' own mode is m.
	fix := func(m OutputMode) string {
		if modeSet {
			return fmt.Sprintf("use WriteTo(...).OutputMode(typed.%v), or leave OutputMode out: the query then takes its operator's mode", m)
		}
		return fmt.Sprintf("use WriteTo(...).OutputMode(typed.%v)", m)
	}
	var maps, flatMaps []string
	hasAggregation, flatMapsAppend := false, true
	for _, op := range ops {
		switch op.kind {
		case "mapGroupsWithState":
			maps = append(maps, op.function)
		case "flatMapGroupsWithState":
			flatMaps = append(flatMaps, op.function)
			flatMapsAppend = flatMapsAppend && op.mode == Append
		}
		hasAggregation = hasAggregation || op.aggregation
	}
	if len(maps) > 1 {
		errs = append(errs, fmt.Errorf("the query has %d mapGroupsWithState operators (%s): Spark allows one (\"Multiple mapGroupsWithStates are not supported\"); use flatMapGroupsWithState in Append mode, or transformWithState", len(maps), strings.Join(maps, ", ")))
	}
	if len(maps) > 0 && len(flatMaps) > 0 {
		errs = append(errs, fmt.Errorf("the query has mapGroupsWithState (%s) and flatMapGroupsWithState (%s): Spark does not mix them (\"Mixing mapGroupsWithStates and flatMapGroupsWithStates are not supported\")", strings.Join(maps, ", "), strings.Join(flatMaps, ", ")))
	}
	if len(flatMaps) > 1 && (mode != Append || !flatMapsAppend) {
		errs = append(errs, fmt.Errorf("the query has %d flatMapGroupsWithState operators (%s): Spark allows several only when all are in Append mode and so is the query (\"Multiple flatMapGroupsWithStates are not supported when they are not all in append mode or the output mode is not append\")", len(flatMaps), strings.Join(flatMaps, ", ")))
	}
	if mode == Complete && !hasAggregation && len(ops) > 0 {
		// The operators say which one: below.
	} else if mode == Complete && len(ops) == 0 {
		errs = append(errs, fmt.Errorf("the Complete output mode needs a streaming aggregation, and the query has none (Spark: \"Complete output mode not supported when there are no streaming aggregations\"): %s", fix(Append)))
	}
	for i, op := range ops {
		switch {
		case op.part:
		case op.aggregation && op.sessions && mode == Update:
			errs = append(errs, fmt.Errorf("%s (%s): the Update output mode is not supported for session windows, as in Spark (a row that merges two sessions would leave the rows written for them standing; Spark: \"Update output mode not supported for session window on streaming DataFrames/DataSets\"): use typed.Append, which writes each session once it closes, or typed.Complete", op.kind, op.function))
		case op.aggregation && op.sessions && mode == Append && !op.watermarked:
			errs = append(errs, fmt.Errorf("%s (%s): the Append output mode needs a watermark, as in Spark (a session is written once, when the watermark closes it; Spark: \"Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark\"): add typed.WithWatermark before it, or use WriteTo(...).OutputMode(typed.Complete)", op.kind, op.function))
		case op.aggregation:
			if mode == Append && !(op.windowed && op.watermarked) {
				errs = append(errs, fmt.Errorf("%s (%s): the Append output mode needs event-time windows and a watermark, as in Spark (a row is written once, when the watermark closes its window; Spark: \"Append output mode not supported when there are streaming aggregations on streaming DataFrames/DataSets without watermark\"): use WriteTo(...).OutputMode(typed.Update) or typed.Complete", op.kind, op.function))
			}
		case mode == Complete && !hasAggregation:
			errs = append(errs, fmt.Errorf("%s (%s) does not support the Complete output mode: %s (Complete needs an aggregation; Spark: \"Complete output mode not supported when there are no streaming aggregations\")", op.kind, op.function, fix(op.queryMode())))
		case op.kind == "mapGroupsWithState" && mode != Update:
			errs = append(errs, fmt.Errorf("mapGroupsWithState (%s) needs the Update output mode; the query has %v: %s (Spark: \"mapGroupsWithState is not supported with %v output mode\")", op.function, mode, fix(Update), mode))
		case op.kind == "flatMapGroupsWithState" && hasAggregation:
			if op.mode != Append {
				errs = append(errs, fmt.Errorf("flatMapGroupsWithState (%s) is in %v mode in a query with an aggregation: give it typed.Append (mode=append in its %s directive), as Spark asks (\"flatMapGroupsWithState in update mode is not supported with aggregation\")", op.function, op.mode, directiveOf(op.kind)))
			}
		case op.join && mode != Append:
			errs = append(errs, fmt.Errorf("%s (%s): a join of two streams writes each row once, as rows of both sides come: %s (Spark: \"Join between two streaming DataFrames/Datasets is not supported in %v output mode, only in Append output mode\")", op.kind, op.function, fix(Append), mode))
		case op.kind == "flatMapGroupsWithState" && op.mode != mode:
			errs = append(errs, fmt.Errorf("flatMapGroupsWithState (%s) is in %v mode; the query has %v: %s, or give the operator typed.%v (mode=%s in its %s directive) (Spark: \"flatMapGroupsWithState in %s mode is not supported with %v output mode\")", op.function, op.mode, mode, fix(op.mode), mode, strings.ToLower(mode.String()), directiveOf(op.kind), strings.ToLower(op.mode.String()), mode))
		}
		if op.mode == Complete && !op.aggregation {
			errs = append(errs, fmt.Errorf("%s (%s): the operator's output mode must be Append or Update (Spark: \"The output mode of function should be append or update\")", op.kind, op.function))
		}
		if !op.stateful() {
			continue
		}
		for _, j := range op.upstreamOf(i) {
			up := ops[j]
			if why := up.lateForNext(mode); why != "" {
				errs = append(errs, fmt.Errorf("%s (%s) follows %s (%s), %s: rows it writes may be at or before the watermark, so the global watermark would drop them as late, and Spark refuses the query (\"Detected pattern of possible 'correctness' issue due to global watermark\")", op.kind, op.function, up.kind, up.function, why))
			}
		}
	}
	return errs
}

// upstreamOf returns the indices of the operators upstream of op, the
// operator at index i, in order, each once.
func (op operatorInfo) upstreamOf(i int) []int {
	return upstreamSet(op.upstream, i, op.reached)
}

// queryMode is the output mode a query of the operator alone would take.
func (op operatorInfo) queryMode() OutputMode {
	if op.aggregation {
		return Update
	}
	return op.mode
}

// stateful reports whether the operator keeps state that a row before the
// watermark changes, as Spark's isStatefulOperation: every stateful
// operator but the deduplication whose key has no event time.
func (op operatorInfo) stateful() bool { return op.kind != "dropDuplicates" }

// lateForNext says why the rows the operator writes, in a query in mode,
// may be at or before the watermark when they reach a stateful operator
// after it ("" when they are not), as Spark's
// ifCannotBeFollowedByStatefulOperation.
func (op operatorInfo) lateForNext(mode OutputMode) string {
	switch {
	case op.timeout == EventTimeTimeout:
		return "whose event-time timeouts fire once the watermark has passed them"
	case op.timeJoin:
		return "a join on a time condition whose sides forget none of their rows, so that its rows (a match with a row it kept) may be of any age"
	case op.asOfJoin:
		return "a join as of the rows' times, which writes a row once the watermark has passed its time and grace"
	case op.aggregation && mode != Append:
		return fmt.Sprintf("an aggregation in %v mode, whose rows change after the watermark has passed their event time", mode)
	}
	return ""
}

// directiveOf names the directive that generates a binding of an
// operator of kind.
func directiveOf(kind string) string {
	if kind == "transformWithState" {
		return "//streamgen:processor"
	}
	return "//streamgen:" + kind
}
