package typed_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// batchSink keeps the rows of each batch, replacing a batch written
// again: the contract of an idempotent sink. fail, when set, makes a write
// fail after storing the rows (a crash between the sink and the commit).
type batchSink[T any] struct {
	mu      sync.Mutex
	batches map[int64][]T
	fail    func(batchID int64) error
}

func newSink[T any]() *batchSink[T] { return &batchSink[T]{batches: map[int64][]T{}} }

func (s *batchSink[T]) Write(_ context.Context, id int64, rows []T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batches[id] = slices.Clone(rows)
	if s.fail != nil {
		return s.fail(id)
	}
	return nil
}

// snapshot returns a copy of the batches kept.
func (s *batchSink[T]) snapshot() map[int64][]T {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[int64][]T, len(s.batches))
	for id, rows := range s.batches {
		out[id] = slices.Clone(rows)
	}
	return out
}

// rows returns every row in batch order.
func (s *batchSink[T]) rows() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := make([]int64, 0, len(s.batches))
	for id := range s.batches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []T
	for _, id := range ids {
		out = append(out, s.batches[id]...)
	}
	return out
}

var _ typed.Sink[int] = (*batchSink[int])(nil)

// checkpoint is an in-memory checkpoint that outlives the queries run on
// it, so that a test can stop a query and start another where it stopped.
type checkpoint struct{ fs vfs.FS }

func newCheckpoint() *checkpoint { return &checkpoint{fs: vfs.NewMem()} }

func (c *checkpoint) opts(more ...runtime.Option) []runtime.Option {
	return append([]runtime.Option{runtime.Checkpoint("ckpt"), runtime.FileSystem(c.fs), runtime.PollInterval(time.Millisecond)}, more...)
}

// openCheckpoint opens the checkpoint "ckpt" in fs as streamgen inspect
// reads it, and its description; the caller closes it.
func openCheckpoint(t *testing.T, fs vfs.FS) (*runtime.CheckpointReader, runtime.Meta) {
	t.Helper()
	c, err := runtime.OpenCheckpointFS(fs, "ckpt")
	if err != nil {
		t.Fatal(err)
	}
	meta, _, err := c.Meta()
	if err != nil {
		c.Close()
		t.Fatal(err)
	}
	return c, meta
}

// runToEnd starts w with an AvailableNow trigger and waits for it.
func runToEnd[T any](t *testing.T, w *typed.Writer[T], opts ...runtime.Option) error {
	t.Helper()
	q, err := w.Start(context.Background(), append(opts, runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// batchRowsToEnd runs w to the end of its input, as runToEnd, and
// returns the rows the sink got in this run's batches, each as text
// makes it, sorted, and the rows its first operator dropped as late.
func batchRowsToEnd[T any](t *testing.T, w *typed.Writer[T], sink *batchSink[T], text func(T) string, opts ...runtime.Option) (rows []string, dropped int64) {
	t.Helper()
	q, err := w.Start(t.Context(), append(opts, runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	batches := sink.snapshot()
	for _, p := range q.RecentProgress() {
		for _, r := range batches[p.BatchID] {
			rows = append(rows, text(r))
		}
		dropped += p.StateOperators[0].NumRowsDroppedByWatermark
	}
	slices.Sort(rows)
	return rows, dropped
}

func runtimeFlush() runtime.Option { return runtime.FlushEventTime() }

// runAvailableNow runs w once with AvailableNow on ck, and returns the
// query, the progress of the batches it ran and each one's rows in
// sink, in order.
func runAvailableNow[T any](t *testing.T, w *typed.Writer[T], ck *checkpoint, sink *batchSink[T]) (*runtime.Query, []runtime.QueryProgress, [][]T) {
	t.Helper()
	q, err := w.Start(t.Context(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	batches := sink.snapshot()
	progress := q.RecentProgress()
	rows := make([][]T, len(progress))
	for i, p := range progress {
		rows[i] = batches[p.BatchID]
	}
	return q, progress, rows
}
