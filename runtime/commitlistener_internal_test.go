package runtime

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// countSource gives records 1 to n, one a batch; its offsets are the
// count read. It checks, as each batch is told committed, that the
// commit file records the batch as durable.
type countSource struct {
	n    int
	fs   vfs.FS
	t    *testing.T
	mu   sync.Mutex
	told []int
}

func (s *countSource) Name() string { return "count" }
func (s *countSource) Available(context.Context) (json.RawMessage, error) {
	return json.RawMessage(strconv.Itoa(s.n)), nil
}
func (s *countSource) Next(_ context.Context, committed, upTo json.RawMessage, _ ReadLimit) (json.RawMessage, error) {
	at, _ := strconv.Atoi(string(committed))
	if end, _ := strconv.Atoi(string(upTo)); at >= end {
		return committed, nil
	}
	return json.RawMessage(strconv.Itoa(at + 1)), nil
}
func (s *countSource) Read(_ context.Context, start, end json.RawMessage, fn func(Record) error) error {
	return fn(Record{Partition: "p", Data: end, Position: string(end)})
}
func (s *countSource) Committed(start, end json.RawMessage) {
	n, _ := strconv.Atoi(string(end))
	rec, found, err := readCommitFile(s.fs, "ckpt")
	if err != nil || !found || rec.BatchID < int64(n-1) {
		s.t.Errorf("batch %d told committed while the commit file records %d (%v, %v)", n-1, rec.BatchID, found, err)
	}
	s.mu.Lock()
	s.told = append(s.told, n)
	s.mu.Unlock()
}

// TestCommittedOnceDurable: with SyncInterval, a source hears of a batch
// (CommitListener) only once the sync has made it durable, which the
// commit file records, never on its commit alone (a machine crash could
// still take it back: the files source would have deleted files a batch
// run again needs); every batch is told once, in order, by the end.
func TestCommittedOnceDurable(t *testing.T) {
	for _, interval := range []time.Duration{0, 20 * time.Millisecond} {
		fs := vfs.NewMem()
		src := &countSource{n: 6, fs: fs, t: t}
		plan := &Plan{Inputs: []Input{{Source: src, Read: func(ctx context.Context, b *Batch, start, end json.RawMessage) error {
			return src.Read(ctx, start, end, func(Record) error { b.AddInputRows(0, 1); return nil })
		}}}, Outputs: []Output{{Description: "none", Write: func(context.Context, *Batch) (int64, error) { return 0, nil }}}}
		q, err := Start(context.Background(), plan, FileSystem(fs), Checkpoint("ckpt"), WithTrigger(AvailableNow()), SyncInterval(interval))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		src.mu.Lock()
		if got := src.told; len(got) != 6 || got[0] != 1 || got[5] != 6 {
			t.Errorf("SyncInterval %v: told %v, want batches 1 to 6 once each", interval, got)
		}
		src.mu.Unlock()
	}
}

// TestTellCommittedWaitsForTheRecord: the batches committed are told in
// order up to the one the commit file records, and the rest once it
// records them.
func TestTellCommittedWaitsForTheRecord(t *testing.T) {
	s, err := OpenStore("ckpt", StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	src := &countSource{fs: s.fs, t: t}
	q := &Query{store: s, committer: s, plan: &Plan{Inputs: []Input{{Source: &silentSource{src}}}}}
	for id := int64(0); id < 4; id++ {
		q.untold = append(q.untold, committedBatch{id: id, planned: offsets{
			start: []json.RawMessage{json.RawMessage(strconv.Itoa(int(id)))},
			end:   []json.RawMessage{json.RawMessage(strconv.Itoa(int(id) + 1))}}})
	}
	s.recorded = 1
	q.tellCommitted()
	if len(q.untold) != 2 || len(src.told) != 2 {
		t.Fatalf("with batch 1 recorded: told %v, %d left", src.told, len(q.untold))
	}
	s.recorded = 3
	q.tellCommitted()
	if len(q.untold) != 0 || len(src.told) != 4 || src.told[3] != 4 {
		t.Fatalf("with batch 3 recorded: told %v, %d left", src.told, len(q.untold))
	}
}

// silentSource is a countSource that does not check the commit file.
type silentSource struct{ *countSource }

func (s *silentSource) Committed(start, end json.RawMessage) {
	n, _ := strconv.Atoi(string(end))
	s.told = append(s.told, n)
}
