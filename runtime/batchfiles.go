package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/streamgen/streamgen/internal/atomicfile"
)

// BatchFiles writes one file per batch id in a directory: the one
// implementation of a sink that is atomic and idempotent by batch id,
// shared by the files sink and the dead-letter directory.
//
// Batch N goes to dir/<prefix>N.jsonl, N padded with zeros to ten digits so
// that lexical order is batch order. A file appears complete or not at all:
// it is written under a hidden temporary name (readers of the directory
// skip names that start with "."), synced and renamed into place. A batch
// written again replaces its file, and a batch with nothing to write has
// no file (one left by an earlier attempt at the batch is removed). dir is
// created when first needed; at the first write, temporary files that a
// crashed process left in it are removed, so a BatchFiles must be the only
// writer of its files in dir.
//
// Before each file a query writes, the hidden file dir/.<prefix>query is
// made to name the query (QueryIDOf), if it does not: a query's first
// write takes the directory's batch files over, so that a later start of
// the same query knows them for its own (see RemoveAfter).
//
// It is safe for concurrent use, though two concurrent writes of the same
// batch leave either one's file.
type BatchFiles struct {
	dir, prefix string
	// published: see NewPublishedBatchFiles; held is set once a query's
	// start has called RemoveAfter, which says that the query publishes
	// the batches (see NewPublishedBatchFiles).
	published bool
	held      atomic.Bool
	clean     sync.Once
	cleanErr  error
	mu        sync.Mutex // serialises the marker's writes
}

// NewBatchFiles returns the batch files prefix* in dir.
func NewBatchFiles(dir, prefix string) *BatchFiles {
	return &BatchFiles{dir: dir, prefix: prefix}
}

// NewPublishedBatchFiles returns the batch files prefix* in dir, each
// written under a hidden name, dir/.<prefix>N.jsonl.pending, and
// published (renamed to its name) by Publish once its batch is durable:
// a reader of the directory sees the batches committed only, as Spark's
// file sink's readers do through its manifest, never one that a failure
// or a machine crash then runs again on other rows. RemoveAfter publishes
// the batches up to the one it is given, whose files a process that died
// left pending. Files written before any RemoveAfter (by a sink whose
// query does not know it for one that publishes: one wrapped in a sink
// that does not pass RewindAfter and PublishBatch on) appear at once.
func NewPublishedBatchFiles(dir, prefix string) *BatchFiles {
	return &BatchFiles{dir: dir, prefix: prefix, published: true}
}

// pendingName is the hidden name batch id's file is written under until
// it is published (NewPublishedBatchFiles).
func (f *BatchFiles) pendingName(batchID int64) string {
	return "." + f.Name(batchID) + ".pending"
}

// Publish renames batch id's pending file to its name, if it has one,
// and syncs the directory (see NewPublishedBatchFiles); it does nothing
// for batch files that are not published.
func (f *BatchFiles) Publish(batchID int64) error {
	if !f.published {
		return nil
	}
	err := f.unhide(batchID)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // a batch without rows, or published already
	case err != nil:
		return err
	}
	return atomicfile.SyncDir(f.dir)
}

// unhide renames batch id's pending file to its name, without syncing
// the directory.
func (f *BatchFiles) unhide(batchID int64) error {
	if err := os.Rename(filepath.Join(f.dir, f.pendingName(batchID)), filepath.Join(f.dir, f.Name(batchID))); err != nil {
		return fmt.Errorf("publish batch %d's file: %w", batchID, err)
	}
	return nil
}

// Name returns the file name of batch id.
func (f *BatchFiles) Name(batchID int64) string {
	return fmt.Sprintf("%s%010d.jsonl", f.prefix, batchID)
}

// markerName is the name of the file that names the query that wrote
// the batch files.
func (f *BatchFiles) markerName() string { return "." + f.prefix + "query" }

// Write writes batch id's file with write, or removes it when empty. ctx
// names the query that writes (QueryIDOf), or none.
func (f *BatchFiles) Write(ctx context.Context, batchID int64, empty bool, write func(io.Writer) error) error {
	if batchID < 0 {
		return fmt.Errorf("negative batch id %d", batchID)
	}
	f.clean.Do(func() { f.cleanErr = atomicfile.RemoveStale(f.dir) })
	if f.cleanErr != nil {
		return f.cleanErr // it names the directory
	}
	name := f.Name(batchID)
	if f.published && f.held.Load() {
		name = f.pendingName(batchID)
	}
	if empty {
		err := os.Remove(filepath.Join(f.dir, name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		}
		// Synced, as a file written is: a removed file that came back
		// after a machine crash would hold an earlier attempt's rows.
		return atomicfile.SyncDir(f.dir)
	}
	if err := f.mark(QueryIDOf(ctx)); err != nil {
		return err
	}
	return atomicfile.Replace(f.dir, name, write)
}

// mark makes the marker name query, when it does not, before the query's
// first file: synced, so that it is there after a crash that left the
// file.
func (f *BatchFiles) mark(query string) error {
	if query == "" {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Read at every file: another query may have taken the directory
	// over since this one's last (one small read beside a synced write).
	owner, err := f.owner()
	if err != nil {
		return err
	}
	if owner != query {
		err := atomicfile.Replace(f.dir, f.markerName(), func(w io.Writer) error {
			_, err := io.WriteString(w, query+"\n")
			return err
		})
		if err != nil {
			return fmt.Errorf("mark the directory as query %s's: %w", query, err)
		}
	}
	return nil
}

// owner returns the query the marker names, or "" when there is none.
func (f *BatchFiles) owner() (string, error) {
	data, err := os.ReadFile(filepath.Join(f.dir, f.markerName()))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(data)), nil
}

// Hold says that the query writing the files publishes their batches
// (Publish), as a start's RemoveAfter does: for batch files made after
// the start (a new directory of a partitioned sink), whose batches are
// written pending from then on.
func (f *BatchFiles) Hold() { f.held.Store(true) }

// RemoveAfter removes the files of the batches after batchID, publishes
// the pending files of those up to it (NewPublishedBatchFiles), and syncs
// the directory (see BatchRewinder). batchID -1 (nothing committed)
// removes them only when the marker names the query of ctx (QueryIDOf):
// the query has written a batch file there, and taken the directory's
// files over from any that wrote there before. A query that wrote none
// leaves another's files.
func (f *BatchFiles) RemoveAfter(ctx context.Context, batchID int64) error {
	f.held.Store(true)
	if batchID < 0 {
		owner, err := f.owner()
		if err != nil && !errors.Is(err, fs.ErrNotExist) { // a dir that is not there has nothing
			return err
		}
		if query := QueryIDOf(ctx); query == "" || owner != query {
			return nil
		}
	}
	entries, err := os.ReadDir(f.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	changed := false
	for _, e := range entries {
		id, pending, ok := f.batchOf(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		switch {
		case id > batchID:
			if err := os.Remove(filepath.Join(f.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		case pending:
			// Of a batch committed and durable whose process died
			// before it was published.
			if err := f.unhide(id); err != nil {
				return err
			}
		default:
			continue
		}
		changed = true
	}
	if !changed {
		return nil
	}
	return atomicfile.SyncDir(f.dir)
}

// batchOf returns the batch id of a file name of f's, and whether it is
// a pending one's (NewPublishedBatchFiles).
func (f *BatchFiles) batchOf(name string) (id int64, pending, ok bool) {
	if f.published {
		if rest, found := strings.CutPrefix(name, "."); found {
			if name, pending = strings.CutSuffix(rest, ".pending"); !pending {
				return 0, false, false
			}
		}
	}
	id, ok = f.batchOfName(name)
	return id, pending, ok
}

// batchOfName returns the batch id of a published file name of f's.
func (f *BatchFiles) batchOfName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, f.prefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, ".jsonl"); !ok || len(digits) < 10 {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	return id, err == nil && id >= 0
}

// BatchRewinder is implemented by a sink that keeps each batch's output
// apart, by batch id (the files sink, the dead-letter directory). With
// SyncInterval, a machine crash can lose the commits of the last batches
// while their output stays, and a checkpoint rebuilt from its changelog
// (AsyncProgress) can be behind the batches its sinks wrote: every start
// of a query calls RewindAfter with the last batch committed, before any
// batch runs, and the sink removes what it holds of the batches after it,
// which run again, perhaps with other rows (another split of the input). With nothing committed,
// batchID is -1: the sink then removes its batches only once the query of
// ctx (QueryIDOf) has written there, for a new query's first start may
// find another query's output where it writes.
type BatchRewinder interface {
	RewindAfter(ctx context.Context, batchID int64) error
}

// BatchPublisher is implemented by a sink whose batches' output becomes
// visible only once the batch is durable (the files sink: see
// NewPublishedBatchFiles). The query calls PublishBatch for each batch it
// commits, in order, once the batch is durable: right after its commit,
// or with SyncInterval after the sync that takes it; and the sink's
// RewindAfter, at a start, publishes those a process that died left. An
// error stops the query; the next start publishes the batch.
type BatchPublisher interface {
	PublishBatch(batchID int64) error
}

type queryKey struct{}

// queryIdent is the value of a query's contexts under queryKey.
type queryIdent struct{ id, runID string }

// QueryIDOf returns the id of the query (Query.ID) whose batch ctx was
// given for, to a sink's Write, RewindAfter or WriteDeadLetters, to a
// source's Read or to an operator's call, or "" for any other context.
func QueryIDOf(ctx context.Context) string {
	q, _ := ctx.Value(queryKey{}).(queryIdent)
	return q.id
}

// RunIDOf returns the id of the run (Query.RunID) of the query whose
// batch ctx was given for, as QueryIDOf, or "" for any other context.
func RunIDOf(ctx context.Context) string {
	q, _ := ctx.Value(queryKey{}).(queryIdent)
	return q.runID
}

// AtLeastOnceSink is implemented by a sink that writes every attempt of
// a batch in full and skips none by its id (a Kafka topic, a console): a
// batch run again on other rows than its first attempt read loses
// nothing there, though the rows of both attempts may stay (in a Kafka
// topic written in transactions, the attempt that did not commit is
// aborted). With SyncInterval, a query
// whose sinks each rewind (BatchRewinder) or are at least once leaves
// each batch's plan to the next sync. Any other sink (a
// ForeachWriter that skips a batch id it has seen, a Sink of the user's)
// has the plan of each batch synced before it runs, so that after a
// machine crash the batch runs again on the same input and it loses
// nothing. A DeadLetterSink is judged the same way.
type AtLeastOnceSink interface {
	AtLeastOnce() bool
}
