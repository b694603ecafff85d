package typed

import (
	"context"
	"fmt"
	"io"
	"math"
	"reflect"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"time"
	"unsafe"

	"github.com/streamgen/streamgen/runtime"
)

// compiler turns a typed pipeline into the runtime's plan for one query,
// and is then the state its stages share while the query runs: the batch
// and the row being pushed. One query's loop uses it, from one goroutine.
type compiler struct {
	plan runtime.Plan
	// ops are the stateful operators as typed knows them, by index.
	ops []operatorInfo

	// Set while the query runs.
	ctx   context.Context
	batch *runtime.Batch
	// input and partition are those of the row being pushed, and
	// rowBytes the size of the record it was decoded from.
	input     int
	partition string
	rowBytes  int
	// source names the input of the row being pushed, and record is the
	// record it was decoded from, while hasRecord says there is one (not
	// for a memory stream's rows): what a dead letter of the row says
	// (see outOfRange). A copy, not a pointer to the decoder's argument,
	// which would move every record to the heap.
	source    string
	record    runtime.Record
	hasRecord bool
	// eventTime is the event time of the row being pushed, set by
	// WithWatermark (zero before it), and eventNanos the same in Unix
	// nanoseconds (runtime.ClampedNanos); eventRow is that row, and
	// eventFn the function (funcPointer) the WithWatermark read it with,
	// while the row is pushed from there (see eventNanosOf).
	eventTime  time.Time
	eventNanos int64
	eventRow   unsafe.Pointer
	eventFn    unsafe.Pointer
	// lateRow, set while a WithWatermark with a LateRows sink pushes a
	// row, returns a function that sends that row to the sink, once
	// however often it is called: for an operator that drops, as late, a
	// row made of it, by a rule the WithWatermark cannot apply (session
	// windows with GapBy, as the row reaches it, or JoiningOpenSessions,
	// when the batch runs). A stage that holds rows back (MapAsync) keeps
	// each one's with its place.
	lateRow func() func()
	// stage names the user function running, for the message of a panic.
	stage string
	// attaching are the operators whose input is being attached, the
	// innermost last: a WithWatermark takes the innermost as the
	// operator its rows reach first (see lateSlot); slots are every
	// operator's, by index.
	attaching []*lateSlot
	slots     []*lateSlot
	// stamped is the number of operators registered when the last
	// WithWatermark was attached (see attachFrom).
	stamped int
	// errs are what compiling found wrong (a processor's Init failed).
	errs []error
	// closers are closed when the query stops, or when its start fails.
	closers []io.Closer
	// outputMode is the query's, set once it is known (after compiling).
	outputMode OutputMode
	// prepares run at Start, before the query, after the operators'
	// prepare: they load what stages need (a static table).
	prepares []func(ctx context.Context) error
	// batchEnds run once the sink has the batch's rows: stages release
	// what the batch held (a static table's version).
	batchEnds []func()
	// fans are the streams compiled so far that several branches of the
	// pipeline may read, by the identity of the stream: an input that two
	// branches read (a self-join) is compiled once, and its rows go to
	// both; so is a WithWatermark or a stateful operator that two outputs
	// of WriteAll read (within one output each read compiles it anew: see
	// once).
	fans map[*byte]any
	// reached are the operators that the streams compiled once and read
	// again have upstream (themselves included), appended as each is read
	// again: an operator whose input reads one has them upstream too.
	reached []int
	// unstamped is set when a stateful operator compiled before is read
	// again with no WithWatermark after it (see attachFrom).
	unstamped bool
	// flushes hand on the rows stages hold back (MapAsync), upstream
	// first: see runtime.Plan.Flush.
	flushes []func()
	// output is the index of the output being compiled (WriteAll).
	output int
	// tables are the static tables the query joins, each a *queryTable
	// by its *Table: every join with a table uses one run of it.
	tables map[any]any
}

// fan hands the rows of a stream compiled once to every branch of the
// pipeline that reads it.
type fan[T any] struct {
	c     *compiler
	emits []func(*T)
	// asRead: each branch sees a row as read (no event time yet), for an
	// input.
	asRead bool
	// ops are the operators upstream of the stream (itself included).
	ops []int
	// dropped is set, for a WithWatermark, when a branch drops the row
	// being handed out as late.
	dropped bool
	// output is the output whose compiling compiled the stream.
	output int
}

// shared returns the fan of the stream id, and whether it was compiled
// before: then emit is added to it, the operators upstream of the stream
// are marked reached, and the caller compiles nothing.
func shared[T any](c *compiler, id *byte, emit func(*T)) (*fan[T], bool) {
	if f, ok := c.fans[id].(*fan[T]); ok {
		f.emits = append(f.emits, emit)
		c.reached = append(c.reached, f.ops...)
		return f, true
	}
	if c.fans == nil {
		c.fans = map[*byte]any{}
	}
	f := &fan[T]{c: c, emits: []func(*T){emit}}
	c.fans[id] = f
	return f, false
}

// compiled records, once the stream of f is compiled, the operators
// upstream of it: those registered since ops and those reached since
// reached (lengths of c.ops and c.reached before it was).
func (f *fan[T]) compiled(ops, reached int) {
	f.ops = upstreamSet(ops, len(f.c.ops), f.c.reached[reached:])
}

// upstreamSet returns the operators from up to to, and those of reached,
// in order, each once.
func upstreamSet(from, to int, reached []int) []int {
	var up []int
	for i := from; i < to; i++ {
		up = append(up, i)
	}
	for _, i := range reached {
		if !slices.Contains(up, i) {
			up = append(up, i)
		}
	}
	slices.Sort(up)
	return up
}

// emit hands a row to each branch.
func (f *fan[T]) emit(t *T) {
	if len(f.emits) == 1 {
		f.emits[0](t)
		return
	}
	et := f.c.eventTime
	if f.asRead {
		et = time.Time{}
	}
	for _, emit := range f.emits {
		f.c.eventTime = et
		emit(t)
	}
}

// sharedAcrossOutputs is shared for a stream that only the outputs of
// WriteAll share: read again within the output that compiled it, it
// returns a nil fan, and the caller compiles the stream anew, as a query
// of one output always has (so that its checkpoint keeps its operators).
func sharedAcrossOutputs[T any](c *compiler, id *byte, emit func(*T)) (*fan[T], bool) {
	if f, ok := c.fans[id].(*fan[T]); ok && f.output == c.output {
		return nil, false
	}
	f, registered := shared(c, id, emit)
	if !registered {
		f.output = c.output
	}
	return f, registered
}

// once makes the stateful operator of s compile once per query however
// many outputs of WriteAll read it (see compiler.fans): its state and its
// rows are one, each output gets every row it writes. Within one output,
// each branch that reads it compiles it anew, as before outputs could
// share one, so that the checkpoint of a query of one output keeps its
// operators (a self-join of an operator's rows has two copies of it).
func once[T any](s Stream[T]) Stream[T] {
	id := new(byte)
	attach := s.attach
	s.attach = func(c *compiler, emit func(*T)) {
		f, registered := sharedAcrossOutputs(c, id, emit)
		if f == nil {
			attach(c, emit)
			return
		}
		if registered {
			c.unstamped = true
			return
		}
		ops, reached := len(c.ops), len(c.reached)
		attach(c, f.emit)
		f.compiled(ops, reached)
	}
	return s
}

// closeAll closes what the compiled pipeline opened, for a start that
// failed.
func (c *compiler) closeAll() {
	for _, cl := range c.closers {
		cl.Close()
	}
	for _, close := range c.plan.Closers {
		close()
	}
}

// operatorInfo is what the query's checks need of an operator.
type operatorInfo struct {
	kind, function string
	// late, when not nil, decides for the operator that drops late rows
	// first how late a row with event time et is under watermark wm: the
	// number of its groups it is late for (0: not late). nil: a row at or
	// before the watermark is late once.
	late           func(et, wm time.Time) int64
	mode           OutputMode
	timeout        Timeout
	watermarked    bool
	needsWatermark bool
	// aggregation is an operator whose output mode is the query's
	// (Complete, Update or Append); windowed, one over event-time windows;
	// sessions, one over session windows.
	aggregation, windowed, sessions bool
	// join is a stream-stream join, which needs the Append mode;
	// timeJoin, one on a time condition (JoinWithin); asOfJoin, a
	// stream-table join as of the rows' times (AsOf).
	join, timeJoin, asOfJoin bool
	// part is one of the operators that make another's work (a
	// foreign-key join's first two): the output-mode rules, which would
	// refuse it as they refuse that one, are told of that one only.
	part bool
	// prepare runs at Start, before the query: it reads and checks what
	// the operator needs (an initial state).
	prepare func(ctx context.Context) error
	// upstream is where the operators upstream of this one begin among the
	// compiler's: they are ops[upstream:index] (those registered while its
	// input was attached), and those of reached, read again from a
	// stream compiled before (see compiler.fans).
	upstream int
	reached  []int
}

// compile builds the plan of a query that writes s to out.
func compile[T any](s Stream[T], emit func(*T)) *compiler {
	c := &compiler{}
	s.attach(c, emit)
	c.finish()
	return c
}

// finish completes the plan once every output's stream is attached.
func (c *compiler) finish() {
	// Every batch, with data or not: the rows an operator writes in a
	// batch without data (its timers', its evictions') are checked
	// against that batch's watermark and counted in its report.
	c.plan.Begin = c.begin
	if len(c.flushes) > 0 {
		c.plan.Flush = func(ctx context.Context, b *runtime.Batch) (err error) {
			defer c.catch(&err)
			c.begin(ctx, b)
			for _, flush := range c.flushes {
				flush()
			}
			return nil
		}
	}
	for i, op := range c.plan.Operators {
		if op.Info().DropsLateRows {
			c.slots[i].drops, c.slots[i].rule = true, c.ops[i].late
		}
	}
}

// lateSlot is an operator as a WithWatermark before it sees it: the
// operator its rows reach first (through stateless stages), whose rule
// decides which rows are late there. Each WithWatermark has its own, so
// that a branch's rows are judged by the operator they go to, not by
// another branch's (the clicks a join takes, by the join's windows,
// not by those of a count before the join on its other side); an
// operator that drops no late rows (flatMapGroupsWithState without an
// event-time timeout) gets them all, as in Spark.
type lateSlot struct {
	index int
	drops bool
	// rule is operatorInfo.late.
	rule func(et, wm time.Time) int64
}

// addOperator attaches the operator's input with attachInput, which
// registers the operators upstream of it, then registers op as the next
// operator and returns its index.
func (c *compiler) addOperator(attachInput func(), op runtime.Operator, info operatorInfo) int {
	info.upstream = len(c.ops)
	reached := len(c.reached)
	slot := &lateSlot{}
	c.attaching = append(c.attaching, slot)
	attachInput()
	info.reached = slices.Clone(c.reached[reached:])
	c.attaching = c.attaching[:len(c.attaching)-1]
	c.plan.Operators = append(c.plan.Operators, op)
	c.ops = append(c.ops, info)
	slot.index = len(c.plan.Operators) - 1
	c.slots = append(c.slots, slot)
	return slot.index
}

// attachFrom attaches an input with attach and reports whether its rows
// come out of an operator with no WithWatermark after it (an operator was
// registered while the input was attached, and after the last
// WithWatermark attached on its way): such rows carry no event time of a
// WithWatermark, so an operator that reads its rows' time from one cannot
// be given them. A WithWatermark after the operator stamps them again.
func (c *compiler) attachFrom(attach func()) (fromOperator bool) {
	n := len(c.ops)
	c.stamped, c.unstamped = -1, false
	attach()
	return len(c.ops) > n && c.stamped < len(c.ops) || c.unstamped
}

// noEventTime is the error of an operator whose input's rows come out of
// another operator and which reads their event time from a WithWatermark.
func noEventTime(op, what, fix string) error {
	return fmt.Errorf("%s: %s come out of a stateful operator before it, and such rows carry no event time of a WithWatermark (the watermark's function reads the rows of its input): %s", op, what, fix)
}

// begin makes b the batch the stages see.
func (c *compiler) begin(ctx context.Context, b *runtime.Batch) {
	c.ctx, c.batch = ctx, b
}

// catch, deferred by the entry points the runtime calls, turns a panic in
// a user function into an error that names the function (when a stage set
// it) and carries the stack, so that nothing of the batch is committed.
func (c *compiler) catch(err *error) {
	r := recover()
	if r == nil {
		return
	}
	// The runtime wraps *err in a message of its own, which says
	// "streamgen: " once.
	if e, ok := r.(userPanic); ok {
		*err = unprefixed(e)
		return
	}
	where := ""
	if c.stage != "" {
		where = " (in " + c.stage + ")"
		c.stage = ""
	}
	*err = fmt.Errorf("panic: %v%s\n%s", r, where, debug.Stack())
}

// userPanic is a panic already described (by a stateful operator, which
// knows the key).
type userPanic struct{ error }

// funcPointer is what tells the function value f from others: the
// pointer it holds, to its code and to the variables it closes over.
// Two values with one pointer are one function of the same variables.
func funcPointer[F any](f F) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&f)) }

// eventNanosOf returns eventTime(t), whose funcPointer is fn, in Unix
// nanoseconds clamped as runtime.ClampedNanos clamps them: the time the
// WithWatermark pushing t read, when it read it from t itself with that
// very function (a windowed aggregation given the WithWatermark's
// function, the rows reaching it as they were read or filtered: one call
// of the user's function a row instead of two, and no conversion), else
// a call. pushed says which: a pushed row's time is the one its
// WithWatermark judged it late or not by.
func eventNanosOf[T any](c *compiler, t *T, fn unsafe.Pointer, eventTime func(*T) time.Time) (ns int64, pushed bool) {
	if c.eventRow == unsafe.Pointer(t) && c.eventFn == fn {
		return c.eventNanos, true
	}
	return runtime.ClampedNanos(eventTime(t)), false
}

// The event times the engine keeps: those it holds in Unix nanoseconds
// with room for windows, delays and times to live of years past them
// (int64 nanoseconds end in 1677 and 2262).
var (
	minEventTime  = time.Date(1700, 1, 1, 0, 0, 0, 0, time.UTC)
	maxEventTime  = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
	minEventNanos = minEventTime.UnixNano()
	maxEventNanos = maxEventTime.UnixNano()
)

// outOfRange reports whether ns, the event time (in Unix nanoseconds,
// clamped as runtime.ClampedNanos clamps) of the row being pushed, is
// outside the times the engine keeps, and then makes the row a dead
// letter, with its record's position and bytes: an event time read from
// a field never set (Go's zero time, the year 1) or a unit mistaken
// would otherwise make windows past the ends of int64 (a row in every
// window of millennia) or before their start. The caller drops the row.
func (c *compiler) outOfRange(ns int64) bool {
	if ns >= minEventNanos && ns < maxEventNanos {
		return false
	}
	at := "before 1678"
	switch {
	case ns == math.MaxInt64:
		at = "after 2262"
	case ns != math.MinInt64:
		at = time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
	}
	l := runtime.DeadLetter{Source: c.source, Error: fmt.Sprintf("event time %s is outside the times the engine keeps (%s to %s)",
		at, minEventTime.Format(time.DateOnly), maxEventTime.Format(time.DateOnly))}
	if c.hasRecord {
		l.Position, l.Raw, l.NoValue = c.record.Position, string(c.record.Data), c.record.Data == nil
	}
	c.batch.DeadLetter(l)
	return true
}

// Unwrap returns the error described, so that a user function's
// context.Canceled is still one (a query stopped, not failed).
func (u userPanic) Unwrap() error { return u.error }

// funcName names a user function for messages (reflection, once, when the
// pipeline is built).
func funcName(f any) string {
	if fn := goruntime.FuncForPC(reflect.ValueOf(f).Pointer()); fn != nil {
		return fn.Name()
	}
	return "?"
}
