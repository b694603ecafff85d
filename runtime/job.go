package runtime

import (
	"context"
	"encoding/json"
	"time"
)

// Job is a compiled pipeline as the query loop sees it: one source, its
// stateful operators, and a function that runs one micro-batch. Package
// typed builds Jobs from typed streams; the loop knows nothing of types.
type Job interface {
	// Meta describes the stateful operators, for the checkpoint check.
	Meta() Meta
	// Source is the job's input.
	Source() Source
	// WatermarkDelay is the delay of the job's event-time watermark; ok
	// is false for a job without one.
	WatermarkDelay() (delay time.Duration, ok bool)
	// TimersDue reports whether a timer of any stateful operator is due
	// at the given watermark and processing time, in the committed state:
	// then a batch runs even without new data.
	TimersDue(s *Store, watermark, now time.Time) (bool, error)
	// RunBatch runs one micro-batch: it reads the input between
	// run.Start and run.End, processes it, stages state changes in
	// run.Batch and writes the outputs to the sinks (idempotently by
	// run.ID). It must not commit.
	RunBatch(ctx context.Context, run *BatchRun) error
}

// BatchRun is one micro-batch: its inputs, and the counts the job fills
// in. The loop owns it; RunBatch may use it only during the call.
type BatchRun struct {
	ID         int64
	Start, End json.RawMessage
	// Watermark is the event-time watermark in effect for the whole batch
	// (computed from the batches before it), zero when there is none.
	Watermark time.Time
	// Now is the batch's processing time: constant within the batch.
	Now   time.Time
	Store *Store
	Batch *Batch

	// Filled in by RunBatch.

	// MaxEventTime is the largest event time seen by partition; RunBatch
	// raises entries for the rows it reads (it starts as the committed
	// values).
	MaxEventTime map[string]time.Time
	// Active lists partitions that had rows in this batch.
	Active      map[string]bool
	InputRows   int64
	OutputRows  int64
	LateRows    int64
	DeadLetters []DeadLetter
	// StateRows is the number of state rows per operator after the batch
	// (it starts as the committed counts); Updated and Removed count the
	// rows this batch wrote and deleted.
	StateRows    []int64
	StateUpdated []int64
	StateRemoved []int64
	// Durations are the times of the batch's phases, by name, as in
	// Spark's durationMs.
	Durations map[string]time.Duration
}
