package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/codec"
)

// Plan is a compiled pipeline as the query's loop runs it:
//
//	inputs ─► stateless stages ─► operator 0 ─► stateless stages ─► operator 1 … ─► outputs
//
// The loop owns the order of a batch's phases and measures them: plan the
// sources' offsets; read every input (which pushes rows through the
// stateless stages into the first operator's groups, or to the outputs);
// then, operator by operator, call it for each key with rows, in order of
// each key's first row, then for each timer due; write the outputs; commit.
// Rows an operator emits go, through the stateless stages after it, to the
// next operator's groups or to the outputs, so each operator has all its
// input when its turn comes.
//
// Package typed compiles typed streams into a Plan; the stages are its
// closures, and the loop knows nothing of record types. A Plan is made for
// one query and used by its goroutine only.
type Plan struct {
	Inputs    []Input
	Operators []Operator
	// Outputs are written after the operators, in order. The first is the
	// query's sink, whose rows the progress reports count; others are the
	// query's further sinks (Output.Sink) and side outputs (late rows).
	Outputs []Output
	// Closers are called once the query has stopped, after its
	// operators' Close: they stop what the stages started (a static
	// table's refresh).
	Closers []func() error
	// Begin, when set, is called at the start of every batch, before
	// any input is read: with data or without (a batch of timers or of a
	// watermark that moved), so that the stages see the batch the
	// operators' rows are written in.
	Begin func(ctx context.Context, b *Batch)
	// Flush, when set, is called once the inputs are read and after each
	// operator's phase (its keys with rows, then its timers), before the
	// next: stages that hold rows back (an asynchronous map's calls in
	// flight) hand them on, so that each operator, and each output, has
	// all its input when its turn comes. An error fails the batch.
	Flush func(ctx context.Context, b *Batch) error
	// Watermarks is the number of the pipeline's event-time watermarks
	// (0: none), each an input of the query's watermark whose partitions'
	// values the stages report with Batch.ObserveRow or
	// Batch.AdvanceWatermark, by its number (see watermark.go).
	Watermarks int
}

// Input is one source of a plan and the stage that reads it.
type Input struct {
	Source Source
	// Read reads the source's records after start up to end and pushes
	// them through the stages that follow, telling b what it saw
	// (AddInputRows, MarkActive, AdvanceWatermark, DeadLetter).
	Read func(ctx context.Context, b *Batch, start, end json.RawMessage) error
}

// Output is a sink of a plan: Write writes what the stages gathered for
// the batch, idempotently by its id, and returns the number of rows.
type Output struct {
	Description string
	Write       func(ctx context.Context, b *Batch) (rows int64, err error)
	// Rewind, when not nil, removes what the sink holds of the batches
	// after the one given (see BatchRewinder).
	Rewind func(ctx context.Context, batchID int64) error
	// AtLeastOnce is true for a sink that writes every attempt of a
	// batch in full and skips none by its id (see AtLeastOnceSink).
	AtLeastOnce bool
	// Sink is true for a sink of the query's own rather than a side
	// output: the progress reports count the rows of each (the first as
	// the sink, the others as OtherSinks).
	Sink bool
	// CheckStart, when not nil, tells before the query starts that the
	// sink cannot be written (see StartChecker).
	CheckStart func() error
	// Publish, when not nil, makes a batch's output visible once the
	// batch is durable (see BatchPublisher).
	Publish func(batchID int64) error
}

// TimeMode is the kind of time an operator's timers are set in.
type TimeMode int

const (
	// NoTime: the operator has no timers.
	NoTime TimeMode = iota
	// ProcessingTime: timers fire once the batch's processing time is
	// strictly past them (or reaches them: OperatorInfo.InclusiveTimers).
	ProcessingTimeMode
	// EventTime: timers fire once the watermark is strictly past them
	// (or reaches them).
	EventTimeMode
)

// String names the mode.
func (m TimeMode) String() string {
	switch m {
	case ProcessingTimeMode:
		return "ProcessingTime"
	case EventTimeMode:
		return "EventTime"
	}
	return "NoTime"
}

// OperatorInfo describes a keyed stateful operator to the loop and the
// checkpoint.
type OperatorInfo struct {
	// Kind is the operator ("mapGroupsWithState", ...), Name its name in
	// the pipeline (the user function's, by default).
	Kind, Name string
	// Timeout names the operator's timeout setting as its API spells it
	// ("EventTimeTimeout", ...), and OutputMode its output mode; both are
	// recorded in the checkpoint.
	Timeout, OutputMode string
	// TimeMode is the kind of time of the operator's timers.
	TimeMode TimeMode
	// InclusiveTimers says a timer fires once the batch's time (the
	// watermark, or the processing time) reaches it, as Spark's
	// transformWithState's (TimerStateImpl.getExpiredTimers); otherwise
	// once the time is past it, as a GroupState timeout.
	InclusiveTimers bool
	// KeyType and Key describe the grouping key: the name of a basic
	// type, or for a record, its schema and "orderedRecord" (its fields
	// in order, codec.OrderedKey) or "record" (its binary encoding); a
	// window's key has "window+" in front.
	KeyType string
	Key     *codec.Schema
	// Windows, for an operator whose keys begin with a window of
	// tumbling, sliding or cumulative windows (a KeyType with "window+" in front),
	// describes them, and so it does for session windows: the checkpoint
	// keeps it, so that a change of their size is refused at start, a
	// change of their starts or gap unless the pipeline's changes are
	// allowed, and a window read from the checkpoint alone is checked.
	Windows *WindowsMeta
	// LegacyKeyType, when set, is the KeyType of checkpoints that hold
	// the operator's keys in an earlier encoding (a record's binary
	// encoding, before keys were stored in the order of their fields):
	// Start accepts such a checkpoint, which keeps its KeyType. Start
	// calls UseKeys before the first batch, with legacy true on such a
	// checkpoint, and the operator reads and writes its keys in that
	// encoding until the query calls release, when it has stopped.
	// UseKeys fails when the operator cannot (its key codec is shared
	// with a running query that uses the other encoding).
	LegacyKeyType string
	UseKeys       func(legacy bool) (release func(), err error)
	// ParseKey, when set, decodes a grouping key given as JSON and
	// returns its encoding in the store: how a read of the running
	// query's state (Query.LookupState) names a key. Without it, only
	// keys of basic types can be named (in a window or a grouping set or
	// neither: CheckpointReader.ParseKey).
	ParseKey func(json []byte) ([]byte, error)
	// States are the operator's state variables. Their ids in the store
	// are given at start (see VariableIDs).
	States []StateInfo
	// GroupingSets, of an aggregation over grouping sets (Cube, Rollup,
	// GroupingSets), are its sets: bit i set where dimension i is rolled
	// up, of Dimensions. The checkpoint keeps them, and a start with
	// others is refused unless the pipeline's changes are allowed.
	GroupingSets []uint32
	Dimensions   int
	// Params describes what the operator's state depends on beyond its
	// types, as "keeps the 3 best rows": the checkpoint keeps it, and a
	// start with other Params is refused unless the pipeline's changes
	// are allowed.
	Params string
	// Rows is the schema of rows the operator keeps in their binary
	// encoding inside its state values (an aggregator's kept rows): the
	// checkpoint keeps it, and a start whose rows cannot read the stored
	// ones (codec.Compatible) is refused.
	Rows *codec.Schema
	// OutputDelay, when not zero, is how far behind the watermark the
	// operator runs with the event times of the rows it writes may be (a
	// join on a time condition's, as Spark's produceOutputWatermark): the
	// operators after it in the plan run with the watermark that much
	// behind, as Spark's run with the join's output watermark, so that
	// they take its rows for late ones no sooner than it writes them.
	OutputDelay time.Duration
	// Deleted names variables of an earlier version of the operator whose
	// data is deleted at start.
	Deleted []string
	// DropsLateRows is true when rows at or before the watermark are
	// dropped before the operator.
	DropsLateRows bool
	// NoData is when the operator asks for a batch without new data (see
	// NoDataRule).
	NoData NoDataRule
	// OneShotTimers says that the operator's timers are removed by the
	// runtime once they fire (its HandleTimer need not delete the timer
	// it is given) and are never listed by key: each is one entry in the
	// index by expiry instead of two, and a batch's fired timers go in
	// one range deletion instead of one deletion each. KeyState.Timers
	// fails for such an operator, and a timer its HandleTimer sets that
	// is due in the same batch may be removed unfired (one the cursor
	// over the due timers has not yet reached fires). Windowed
	// aggregation sets it: a timer per (window, key) fires once, and so
	// does a key's one timer over windows kept by slices, whose handler
	// sets the next after the watermark.
	OneShotTimers bool
}

// NoDataRule is when an operator asks for a batch without new data after
// a batch of the query has run, as Spark's shouldRunAnotherBatch. Besides
// these, a batch without data runs whenever a timer or a state entry's
// time to live is due.
type NoDataRule uint8

const (
	// NoDataNever: the operator asks for none.
	NoDataNever NoDataRule = iota
	// NoDataOnWatermark: when the watermark the next batch would have is
	// past the last batch's (an operator that evicts or fires by the
	// watermark).
	NoDataOnWatermark
	// NoDataEveryTrigger: at every trigger of a ProcessingTime trigger (a
	// processing-time timeout), and as NoDataOnWatermark otherwise.
	NoDataEveryTrigger
)

// StateInfo describes one state variable.
type StateInfo struct {
	Name   string
	Schema *codec.Schema
	// Kind is "value", "list" or "map" ("" for an operator's own row).
	Kind string
	// TTL is the variable's time to live (0: none), measured in event
	// time when EventTimeTTL.
	TTL          time.Duration
	EventTimeTTL bool
	// Encoding is the layout of the variable's entries (EncodingRecord,
	// EncodingExpiring, ...), recorded in the checkpoint so that tools
	// read them without the operator's code.
	Encoding string
	// ValueType names the value's basic type when Schema is nil
	// ("string", "int64", ...; "" for no value); MapKeyType and MapKey
	// describe a map variable's keys in the same way (MapKey is a
	// record key's schema).
	ValueType  string
	MapKeyType string
	MapKey     *codec.Schema
	// Index says the variable's entries index the operator's other state
	// (a join's rows by the time they are forgotten): they are not state
	// rows, and the operator's totals leave them out.
	Index bool
	// NoMatchFlag says the variable is a side of a stream-stream join
	// (EncodingJoinBuffer) whose rows' JoinRowMatched flag is not kept
	// up to date, because the join never reads it (an inner join, or the
	// side an outer join does not write padded): a row that matched
	// after it was stored is not written again to say so. A start whose
	// join reads the flag of such a stored side is refused.
	NoMatchFlag bool
}

// VariableIDs is implemented by an operator that needs to know the ids
// its state variables have in the store: Start calls SetVariableIDs with
// them, in the order of OperatorInfo.States, before the first batch.
type VariableIDs interface {
	SetVariableIDs(ids []uint8)
}

// VariableExpiries is implemented by an operator whose state variables
// may lose their time to live at a restart: Start calls
// SetVariableExpiries, in the order of OperatorInfo.States, with whether
// each variable's stored entries may carry expiries in event time (a
// variable without a TTL now, whose entries written with an event-time
// TTL keep their expiries, judged by the watermark).
type VariableExpiries interface {
	SetVariableExpiries(eventTime []bool)
}

// LayoutChooser is implemented by an operator whose state has a layout
// of an earlier version beside its own, and which still runs on a
// checkpoint written in it (as Spark keeps the state format version a
// checkpoint was written with): Start calls ChooseLayout once, before it
// compares the pipeline with the checkpoint's, with the description of
// the operator the checkpoint holds at its place, or nil (a new
// checkpoint, or none there); an error refuses the checkpoint (a layout
// the operator cannot run on as the query is built), and says why.
// Info describes the layout chosen once ChooseLayout has returned (the
// checks of Start's options before it see the operator's own).
type LayoutChooser interface {
	ChooseLayout(stored *OperatorMeta) error
}

// Operator is a keyed stateful operator as the loop runs it. The loop
// calls it from one goroutine.
type Operator interface {
	Info() OperatorInfo
	// Groups holds the batch's rows gathered by key; the stages before
	// the operator add to it.
	Groups() *Groups
	// HandleRows is called once per key of Groups, in order of each key's
	// first row, with the numbers (in arrival order, see Groups.Add) of
	// the key's rows.
	HandleRows(ctx context.Context, k *KeyState, group int32, rows []int32) error
	// HandleTimer is called for each timer due in the batch, in order of
	// expiry, after every HandleRows; the timer is still registered
	// during the call.
	HandleTimer(ctx context.Context, k *KeyState, expiry time.Time) error
	// EndBatch is called when the batch ends, committed or not: the
	// operator drops the rows it kept for it.
	EndBatch()
}

// RowsWarmer is implemented by an operator whose calls read the rows
// they are given: ahead of the calls, the loop hands it the row numbers of
// the next few keys (up to rowsWarmMax rows), for it to read them, so that
// their cache misses overlap instead of each call waiting for its rows in
// turn (a key's rows are scattered over the batch's, among every other
// key's). The loop calls WarmRows from its own goroutine, between calls
// of HandleRows; an operator's concurrent calls may be running meanwhile,
// so WarmRows must not change what they read.
type RowsWarmer interface {
	WarmRows(rows []int32)
}

// rowsWarmMax is the most row numbers the loop hands WarmRows at once.
const rowsWarmMax = 64

// RowsDoner is implemented by an operator with work to do once a batch's
// rows are handled: the loop calls RowsDone in every batch, after the
// last HandleRows (if any: a batch may give it no rows), before the
// timers. An
// operator that handles keys concurrently waits there for its calls to
// end and passes their output on, in key order.
type RowsDoner interface {
	RowsDone(ctx context.Context, b *Batch) error
}

// Closer is implemented by an operator with something to release when the
// query stops (a stateful processor's Close): the loop calls Close once,
// after the last batch.
type Closer interface {
	Close() error
}

// InitialStater is implemented by an operator that has an initial state:
// the loop calls InitialState before the first batch's HandleRows of a
// new query (never on a restarted one). It writes the state with KeyOf
// and adds the keys to Groups (so each is called, with no rows if it has
// none).
type InitialStater interface {
	InitialState(ctx context.Context, b *Batch, op int) error
}

// ReadAll reads every input of a bounded pipeline of stateless stages to
// the end of what its sources have now, outside any query, in one batch
// (its Begin, its inputs, its Flush): for data a query needs before it
// starts, such as an initial state given as a stream. Dead letters are
// returned; nothing is committed.
func ReadAll(ctx context.Context, p *Plan) ([]DeadLetter, error) {
	b := &Batch{
		watermarks: map[string]time.Time{},
		active:     map[string]bool{},
		inputs:     make([]inputRun, len(p.Inputs)),
	}
	for i, in := range p.Inputs {
		b.inputs[i].name = in.Source.Name()
	}
	if p.Begin != nil {
		p.Begin(ctx, b)
	}
	for _, in := range p.Inputs {
		end, err := in.Source.Available(ctx)
		if err != nil {
			return nil, fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), unprefixed(err))
		}
		if err := in.Read(ctx, b, nil, end); err != nil {
			return nil, fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), unprefixed(err))
		}
	}
	if p.Flush != nil {
		if err := p.Flush(ctx, b); err != nil {
			return nil, unprefixed(err)
		}
	}
	return b.deadLetters, nil
}
