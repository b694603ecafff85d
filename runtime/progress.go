package runtime

import (
	"encoding/json"
	"strconv"
	"time"
)

// QueryProgress reports one completed micro-batch, with the fields of
// Spark's StreamingQueryProgress.
type QueryProgress struct {
	// ID is the query's id, the same at every start on its checkpoint;
	// RunID is this run's.
	ID    string `json:"id"`
	RunID string `json:"runId"`
	Name  string `json:"name,omitempty"`
	// Timestamp is when the batch started, in UTC, as Spark reports it.
	Timestamp time.Time `json:"timestamp"`
	BatchID   int64     `json:"batchId"`
	// BatchDuration is the batch's whole time in milliseconds, Spark's
	// batchDuration (durationMs' triggerExecution).
	BatchDuration int64 `json:"batchDuration"`
	// NumInputRows counts the rows read, decoded or not.
	NumInputRows int64 `json:"numInputRows"`
	// InputRowsPerSecond is NumInputRows over the time since the trigger
	// before this batch's started, with data or without, as Spark's; 0
	// for a start's first batch.
	InputRowsPerSecond     float64 `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64 `json:"processedRowsPerSecond"`
	// DurationMs holds the time of each phase of the batch, keyed by the
	// Duration constants (DurationLatestOffset, DurationGetBatch, ...).
	DurationMs map[string]int64 `json:"durationMs"`
	// EventTime holds, for a query with a watermark, Spark's statistics of
	// the batch's event times, "min", "max" and "avg", and the "watermark"
	// in effect (absent before the first), as RFC 3339 instants.
	EventTime      map[string]string       `json:"eventTime,omitempty"`
	StateOperators []StateOperatorProgress `json:"stateOperators,omitempty"`
	Sources        []SourceProgress        `json:"sources"`
	Sink           SinkProgress            `json:"sink"`
	// OtherSinks are the query's further sinks, when it writes several
	// (typed.WriteAll), in order.
	OtherSinks []SinkProgress `json:"otherSinks,omitempty"`
	// NumDeadLetters counts the rows that did not decode.
	NumDeadLetters int64 `json:"numDeadLetters"`
	// StateStore reports the state store at the end of the batch, after
	// its commit.
	StateStore StoreProgress `json:"stateStore"`
	// Tables are the static tables the batch's rows were joined with, and
	// the version of each it used.
	Tables []TableProgress `json:"tables,omitempty"`
}

// OutputRows is the rows the batch wrote, as text: the sink's, and,
// for a query of several outputs, each other sink's after a "+" ("3+2").
func (p *QueryProgress) OutputRows() string {
	out := strconv.FormatInt(p.Sink.NumOutputRows, 10)
	for _, s := range p.OtherSinks {
		out += "+" + strconv.FormatInt(s.NumOutputRows, 10)
	}
	return out
}

// OutputRowsTotal is the rows the batch wrote to all its sinks.
func (p *QueryProgress) OutputRowsTotal() int64 {
	n := p.Sink.NumOutputRows
	for _, s := range p.OtherSinks {
		n += s.NumOutputRows
	}
	return n
}

// TableProgress reports a static table a batch joined its rows with.
type TableProgress struct {
	Name string `json:"name"`
	// Version numbers the table's loads, from 1 at the query's start; a
	// batch uses one version throughout.
	Version  int64     `json:"version"`
	Rows     int64     `json:"numRows"`
	LoadedAt time.Time `json:"loadedAt"`
	// OnDisk says the version is kept on disk (typed.TableOnDiskAbove).
	OnDisk bool `json:"onDisk,omitempty"`
}

// The phases of a batch, as keys of QueryProgress.DurationMs.
const (
	// DurationLatestOffset: planning the batch's offsets.
	DurationLatestOffset = "latestOffset"
	// DurationGetBatch: reading and decoding the input, and the stages
	// before the first stateful operator.
	DurationGetBatch = "getBatch"
	// DurationStateOperators: the stateful operators' calls for keys
	// with rows, and the stages between and after them.
	DurationStateOperators = "stateOperators"
	// DurationTimers: the calls for due timers.
	DurationTimers = "timers"
	// DurationSink: writing the outputs and dead letters.
	DurationSink = "sink"
	// DurationAddBatch: everything after reading up to the commit:
	// operators, timers and sinks (Spark's addBatch).
	DurationAddBatch = "addBatch"
	// DurationWALCommit: committing state and progress.
	DurationWALCommit = "walCommit"
	// DurationTriggerExecution: the whole batch.
	DurationTriggerExecution = "triggerExecution"
)

// StateOperatorProgress reports one stateful operator.
type StateOperatorProgress struct {
	// OperatorName is the operator's kind, as Spark's
	// ("mapGroupsWithState", "symmetricHashJoin", ...); Name is its name
	// in the query: the user function's, or the one given it.
	OperatorName              string `json:"operatorName"`
	Name                      string `json:"name,omitempty"`
	NumRowsTotal              int64  `json:"numRowsTotal"`
	NumRowsUpdated            int64  `json:"numRowsUpdated"`
	NumRowsRemoved            int64  `json:"numRowsRemoved"`
	NumRowsDroppedByWatermark int64  `json:"numRowsDroppedByWatermark"`
	// CustomMetrics are the operator's own figures after the batch (a
	// join's rows buffered per side: numLeftRows, numRightRows), as
	// Spark's customMetrics.
	CustomMetrics map[string]int64 `json:"customMetrics,omitempty"`
	// HeldWatermark is, when the operator ran the batch with the
	// watermark held behind the query's (an operator before it left
	// windows to close to the next batches: see WindowClosesPerBatch),
	// the watermark it ran with, as EventTime's "watermark" is written;
	// empty when it ran with the query's.
	HeldWatermark string `json:"heldWatermark,omitempty"`
}

// SourceProgress reports the source of a batch.
type SourceProgress struct {
	Description            string  `json:"description"`
	StartOffset            string  `json:"startOffset"`
	EndOffset              string  `json:"endOffset"`
	NumInputRows           int64   `json:"numInputRows"`
	InputRowsPerSecond     float64 `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64 `json:"processedRowsPerSecond"`
	// NumSkippedInputs counts the inputs the source skipped at its last
	// listing, as not readable at all (see Skipper).
	NumSkippedInputs int64 `json:"numSkippedInputs,omitempty"`
	// LatestOffset is the latest offset available when the batch was
	// planned, as Spark's latestOffset: EndOffset is that far behind it
	// (less, by a per-batch limit).
	LatestOffset string `json:"latestOffset,omitempty"`
	// Lag is, for a source that can tell (LagReporter), how far the
	// batch's end is behind the latest offset, per partition; Metrics
	// sums it up as Spark's Kafka source does: "avgOffsetsBehindLatest",
	// "maxOffsetsBehindLatest", "minOffsetsBehindLatest" (and, for a
	// files source, "filesBehindLatest", "bytesBehindLatest").
	Lag     []PartitionLag    `json:"lag,omitempty"`
	Metrics map[string]string `json:"metrics,omitempty"`
}

// LagReporter is implemented by a source that can tell how far a
// position of it is behind its latest (Available): Lag returns that, per
// partition, for the batch's end offset and the latest offset.
type LagReporter interface {
	Lag(position, latest json.RawMessage) ([]PartitionLag, error)
}

// PartitionLag is how far a query's position in a partition of a source
// is behind the latest data there.
type PartitionLag struct {
	// Partition names the partition ("topic/3"; "files" for a files
	// source).
	Partition string `json:"partition"`
	// Position is the query's offset after the batch, Latest the latest
	// available, and Lag the records between them (Latest-Position, for
	// Kafka: transaction markers count, as in Kafka's consumer lag).
	Position int64 `json:"position"`
	Latest   int64 `json:"latest"`
	Lag      int64 `json:"lag"`
	// Bytes, for a files source, are the bytes of the files not yet
	// read; Lag is then the files.
	Bytes int64 `json:"bytes,omitempty"`
}

// setLag records lag and its summary.
func (sp *SourceProgress) setLag(lag []PartitionLag) {
	if len(lag) == 0 {
		return
	}
	sp.Lag = lag
	var sum, hi int64
	lo := lag[0].Lag
	var bytes int64
	files := false
	for _, l := range lag {
		sum += l.Lag
		hi, lo = max(hi, l.Lag), min(lo, l.Lag)
		bytes += l.Bytes
		files = files || l.Partition == "files"
	}
	if files {
		sp.Metrics = map[string]string{"filesBehindLatest": strconv.FormatInt(sum, 10), "bytesBehindLatest": strconv.FormatInt(bytes, 10)}
		return
	}
	sp.Metrics = map[string]string{
		"avgOffsetsBehindLatest": strconv.FormatFloat(float64(sum)/float64(len(lag)), 'f', 1, 64),
		"maxOffsetsBehindLatest": strconv.FormatInt(hi, 10),
		"minOffsetsBehindLatest": strconv.FormatInt(lo, 10),
	}
}

// SinkProgress reports the sink of a batch.
type SinkProgress struct {
	Description   string `json:"description"`
	NumOutputRows int64  `json:"numOutputRows"`
}

// Status is what a query is doing now, as Spark's StreamingQueryStatus,
// with the batch that runs now.
type Status struct {
	Message         string `json:"message"`
	IsDataAvailable bool   `json:"isDataAvailable"`
	IsTriggerActive bool   `json:"isTriggerActive"`
	// Batch is the batch running now, from its start to its commit; the
	// zero RunningBatch between batches.
	Batch RunningBatch `json:"batch,omitzero"`
}

// RunningBatch is how far a batch has gone while it runs, so that a long
// batch shows progress before its report. The counts are published by the
// query's goroutine as it reads (every 1024 rows of a source, at each new
// input and at each source's end), so they may lag the reading by that
// much.
type RunningBatch struct {
	BatchID int64     `json:"batchId"`
	Started time.Time `json:"started"`
	// NumInputRows counts the rows read so far, decoded or not.
	NumInputRows int64 `json:"numInputRows"`
	// InputsPlanned is the number of inputs (the files of a files source)
	// the batch reads, over the sources that know theirs (InputCounter);
	// 0 when none does. InputsDone counts those read to their end.
	InputsDone    int64 `json:"inputsDone"`
	InputsPlanned int64 `json:"inputsPlanned"`
}

// QueryStarted is passed to OnQueryStarted.
type QueryStarted struct {
	ID, RunID, Name string
	Time            time.Time
	// Query is the query, for a listener that reads its state
	// (observe.StateHandler): do not call its Stop or AwaitTermination
	// from OnQueryStarted.
	Query *Query `json:"-"`
}

// QueryIdle is passed to OnQueryIdle: the query found nothing to do at
// Time (the trigger's start) and waits for data, as Spark's
// QueryIdleEvent.
type QueryIdle struct {
	ID, RunID, Name string
	Time            time.Time
}

// QueryTerminated is passed to OnQueryTerminated; Err is nil for a query
// that stopped cleanly.
type QueryTerminated struct {
	ID, RunID string
	Err       error
}
