package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
)

// DeadLetterDir returns a sink that writes the dead letters of batch N, one
// JSON object per line, to dir/dead-letters-N.jsonl (see BatchFiles: the
// file appears complete or not at all, a batch written again replaces it,
// and a batch with no dead letters has none; the hidden file
// dir/.dead-letters-query names the query that wrote them). dir is created
// when first needed.
//
// The sink is safe for concurrent use, though two concurrent writes of the
// same batch leave either one's file.
func DeadLetterDir(dir string) DeadLetterSink {
	return deadLetterDir{files: NewBatchFiles(dir, "dead-letters-")}
}

type deadLetterDir struct{ files *BatchFiles }

// RewindAfter removes the dead letters of the batches after batchID (see
// BatchRewinder).
func (d deadLetterDir) RewindAfter(ctx context.Context, batchID int64) error {
	if err := d.files.RemoveAfter(ctx, batchID); err != nil {
		return fmt.Errorf("streamgen: dead letters: remove those of the batches after %d: %w", batchID, err)
	}
	return nil
}

func (d deadLetterDir) WriteDeadLetters(ctx context.Context, batchID int64, letters []DeadLetter) error {
	err := d.files.Write(ctx, batchID, len(letters) == 0, func(w io.Writer) error {
		enc := json.NewEncoder(w) // one object and a newline per Encode
		enc.SetEscapeHTML(false)
		for i := range letters {
			if err := enc.Encode(&letters[i]); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("streamgen: write dead letters: %w", err)
	}
	return nil
}

// MemoryDeadLetters is a DeadLetterSink that keeps the dead letters in
// memory, for tests. A batch written again replaces its letters. The zero
// value is not ready for use; call DeadLetterMemory. It is safe for
// concurrent use: the query writes while a test reads.
type MemoryDeadLetters struct {
	mu      sync.Mutex
	batches map[int64][]DeadLetter
}

// DeadLetterMemory returns an empty MemoryDeadLetters.
func DeadLetterMemory() *MemoryDeadLetters {
	return &MemoryDeadLetters{batches: make(map[int64][]DeadLetter)}
}

// WriteDeadLetters keeps a copy of letters as the dead letters of batchID,
// replacing any kept before.
func (m *MemoryDeadLetters) WriteDeadLetters(ctx context.Context, batchID int64, letters []DeadLetter) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(letters) == 0 {
		delete(m.batches, batchID)
		return nil
	}
	m.batches[batchID] = slices.Clone(letters)
	return nil
}

// AtLeastOnce is true: a batch's letters written again replace its
// letters, in full (see AtLeastOnceSink).
func (m *MemoryDeadLetters) AtLeastOnce() bool { return true }

// Letters returns a copy of all the dead letters kept, in batch order and
// in order within a batch.
func (m *MemoryDeadLetters) Letters() []DeadLetter {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []DeadLetter
	for _, id := range slices.Sorted(maps.Keys(m.batches)) {
		all = append(all, m.batches[id]...)
	}
	return all
}

// RejectRow hands an output row that a sink's destination refuses (a
// record larger than its topic takes, say) to the query's dead-letter
// sink, as a dead letter of the batch being written, and reports whether
// it did. It reports false when the query has no dead-letter sink, or
// ctx is not one that a query gave a sink's Write: the sink then fails
// the write, so that no row is dropped unseen. A sink that rejects a row
// must reject it again when the batch is written again, so that the
// batch's letters are the same. Safe for concurrent use.
func RejectRow(ctx context.Context, letter DeadLetter) bool {
	r, _ := ctx.Value(rejectsKey{}).(*rejects)
	if r == nil {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.b.deadLetters = append(r.b.deadLetters, letter)
	return true
}

// rejects collects the rows the sinks of batch b reject (RejectRow).
type rejects struct {
	mu sync.Mutex
	b  *Batch
}

type rejectsKey struct{}

// withRejects returns ctx for the sinks of batch b: with the query's
// dead-letter sink, one that takes their rejected rows.
func (q *Query) withRejects(ctx context.Context, b *Batch) context.Context {
	if q.cfg.deadLetters == nil {
		return ctx
	}
	return context.WithValue(ctx, rejectsKey{}, &rejects{b: b})
}
