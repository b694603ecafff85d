package runtime_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/internal/testenv"
	"github.com/streamgen/streamgen/runtime"
)

// fileReads is a plan over one source that records, batch by batch, the
// files each batch read, and whose sink can be made to fail.
type fileReads struct {
	mu      sync.Mutex
	batches map[int64][]string
	// failBatch, when not negative, fails the sink of that batch once.
	failBatch int64
	// offsetBytes records, per Next call, the bytes of the offsets it
	// read and wrote beyond the listing: the planning work that the
	// processed-file log costs.
	offsetBytes []int
}

func newFileReads() *fileReads { return &fileReads{batches: map[int64][]string{}, failBatch: -1} }

// counting wraps a source to measure Next's offsets.
type counting struct {
	runtime.Source
	r *fileReads
}

func (c counting) Next(ctx context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit) (json.RawMessage, error) {
	end, err := c.Source.Next(ctx, committed, upTo, limit)
	c.r.mu.Lock()
	c.r.offsetBytes = append(c.r.offsetBytes, len(committed)+len(end))
	c.r.mu.Unlock()
	return end, err
}

func (c counting) CheckStart() error { return c.Source.(runtime.StartChecker).CheckStart() }

func (c counting) DescribeOffset(o json.RawMessage) string {
	return c.Source.(runtime.OffsetDescriber).DescribeOffset(o)
}

func (c counting) Lag(position, latest json.RawMessage) ([]runtime.PartitionLag, error) {
	return c.Source.(runtime.LagReporter).Lag(position, latest)
}

func (c counting) Committed(start, end json.RawMessage) {
	if l, ok := c.Source.(runtime.CommitListener); ok {
		l.Committed(start, end)
	}
}

func (r *fileReads) plan(src runtime.Source) *runtime.Plan {
	src = counting{src, r}
	return &runtime.Plan{
		Inputs: []runtime.Input{{Source: src, Read: func(ctx context.Context, b *runtime.Batch, start, end json.RawMessage) error {
			return src.Read(ctx, start, end, func(rec runtime.Record) error {
				b.AddInputRows(0, 1)
				name, _, _ := strings.Cut(rec.Position, ":")
				r.mu.Lock()
				r.batches[b.ID] = append(r.batches[b.ID], name)
				r.mu.Unlock()
				return nil
			})
		}}},
		Outputs: []runtime.Output{{Description: "test", Write: func(ctx context.Context, b *runtime.Batch) (int64, error) {
			r.mu.Lock()
			defer r.mu.Unlock()
			if b.ID == r.failBatch {
				r.failBatch = -1
				return 0, errors.New("sink fails")
			}
			return 0, nil
		}}},
	}
}

func (r *fileReads) read(id int64) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.batches[id])
}

// runAvailable runs plan to the end of what is available and returns its
// reports.
func runAvailable(t *testing.T, plan *runtime.Plan, checkpoint string) ([]runtime.QueryProgress, error) {
	t.Helper()
	var reports []runtime.QueryProgress
	var mu sync.Mutex
	q, err := runtime.Start(context.Background(), plan, runtime.Checkpoint(checkpoint), runtime.WithTrigger(runtime.AvailableNow()),
		runtime.Listener(progressFunc(func(p runtime.QueryProgress) { mu.Lock(); reports = append(reports, p); mu.Unlock() })))
	if err != nil {
		return nil, err
	}
	err = q.AwaitTermination()
	mu.Lock()
	defer mu.Unlock()
	return reports, err
}

type progressFunc func(runtime.QueryProgress)

func (f progressFunc) OnQueryProgress(p runtime.QueryProgress) { f(p) }

// TestFilesStartMissingPath: a query on a directory that does not exist
// fails at Start, unless WaitForPath; a path that is a file says so, once.
func TestFilesStartMissingPath(t *testing.T) {
	tmp := t.TempDir()
	missing := filepath.Join(tmp, "nowhere")
	_, err := runtime.Start(context.Background(), newFileReads().plan(runtime.FilesSource(missing, runtime.FilesOptions{})),
		runtime.Checkpoint(filepath.Join(tmp, "cp1")))
	if err == nil || !strings.Contains(err.Error(), "path does not exist: "+missing) || !strings.Contains(err.Error(), "WaitForPath") ||
		strings.Count(err.Error(), "streamgen:") != 1 {
		t.Errorf("Start on a missing directory: %v", err)
	}
	// Nothing was created: not the checkpoint, not the directory.
	if _, err := os.Stat(filepath.Join(tmp, "cp1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Start made its checkpoint: %v", err)
	}

	// With WaitForPath the query starts, and reads the directory once it
	// appears.
	r := newFileReads()
	plan := r.plan(runtime.FilesSource(missing, runtime.FilesOptions{WaitForPath: true}))
	if reports, err := runAvailable(t, plan, filepath.Join(tmp, "cp2")); err != nil || len(reports) != 0 {
		t.Fatalf("with WaitForPath: %d batches, %v", len(reports), err)
	}
	writeFile(t, missing, "a.json", "{}\n")
	if _, err := runAvailable(t, plan, filepath.Join(tmp, "cp2")); err != nil || !slices.Equal(r.read(0), []string{"a.json"}) {
		t.Fatalf("after the directory appeared: read %q, %v", r.read(0), err)
	}

	// A file where the directory should be.
	file := filepath.Join(tmp, "events.json")
	writeFile(t, tmp, "events.json", "{}\n")
	_, err = runtime.Start(context.Background(), newFileReads().plan(runtime.FilesSource(file, runtime.FilesOptions{})),
		runtime.Checkpoint(filepath.Join(tmp, "cp3")))
	want := fmt.Sprintf("streamgen: source files:%s: %s is a file, not a directory", file, file)
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "streamgen:") != 1 {
		t.Errorf("Start on a file: %v\nwant it to begin %q", err, want)
	}
}

// TestFilesEndOffsetNamesBatch: a report's offsets name the batch's files,
// and a batch that failed reads, when run again, exactly the files it was
// planned with, though more arrived meanwhile.
func TestFilesEndOffsetNamesBatch(t *testing.T) {
	tmp := t.TempDir()
	in, cp := filepath.Join(tmp, "in"), filepath.Join(tmp, "cp")
	for _, name := range []string{"a.json", "b.json", "c.json", "d.json", "e.json"} {
		writeFile(t, in, name, "{}\n")
	}
	r := newFileReads()
	r.failBatch = 1
	plan := r.plan(runtime.FilesSource(in, runtime.FilesOptions{MaxFilesPerTrigger: 2}))
	reports, err := runAvailable(t, plan, cp)
	if err == nil || len(reports) != 1 {
		t.Fatalf("first run: %d batches, %v; want batch 0 and batch 1's failure", len(reports), err)
	}
	if got, want := reports[0].Sources[0].EndOffset, `{"files":["a.json","b.json"],"remembered":2}`; got != want {
		t.Errorf("batch 0 endOffset = %s, want %s", got, want)
	}
	planned := r.read(1)
	if !slices.Equal(planned, []string{"c.json", "d.json"}) {
		t.Fatalf("batch 1 read %q", planned)
	}
	// A file that sorts first arrives before the restart: batch 1 still
	// reads what it was planned with; the new file comes after.
	writeFile(t, in, "0.json", "{}\n")
	r.batches = map[int64][]string{}
	reports, err = runAvailable(t, plan, cp)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.read(1); !slices.Equal(got, planned) {
		t.Errorf("batch 1 run again read %q, want %q", got, planned)
	}
	if got, want := reports[0].Sources[0].EndOffset, `{"files":["c.json","d.json"],"remembered":4}`; got != want {
		t.Errorf("batch 1 endOffset = %s, want %s", got, want)
	}
	if got, want := reports[0].Sources[0].StartOffset, `{"files":["a.json","b.json"],"remembered":2}`; got != want {
		t.Errorf("batch 1 startOffset = %s, want %s", got, want)
	}
	// The files are taken oldest first: e.json, written before the
	// restart, then 0.json.
	if got := slices.Concat(r.read(2), r.read(3)); !slices.Equal(got, []string{"e.json", "0.json"}) {
		t.Errorf("batches 2 and 3 read %q, want e.json and 0.json", got)
	}
}

// TestFilesLogCompaction streams 100,000 small files through a query, 5,000
// at a time with a restart after each lot, their modification times a
// second apart and MaxFileAge an hour: every file is read exactly once,
// and the processed-file log, which the checkpoint stores with each batch
// and planning reads, stays as large as an hour of files instead of
// growing with every file read. Processed files are moved away, as a
// cleaning job (Spark's cleanSource) does, so that listing stays small
// too.
func TestFilesLogCompaction(t *testing.T) {
	if testing.Short() {
		t.Skip("makes 100,000 files")
	}
	testenv.SkipUnlessFull(t, "makes 100,000 files")
	const files, lot = 100_000, 5_000
	tmp := t.TempDir()
	in, cp := filepath.Join(tmp, "in"), filepath.Join(tmp, "cp")
	if err := os.MkdirAll(in, 0o755); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	r := newFileReads()
	plan := r.plan(runtime.FilesSource(in, runtime.FilesOptions{MaxFilesPerTrigger: 1000, MaxFileAge: time.Hour}))
	var progressBytes []int
	for start := 0; start < files; start += lot {
		for i := start; i < start+lot; i++ {
			path := filepath.Join(in, fmt.Sprintf("f%06d.json", i))
			if err := os.WriteFile(path, []byte(fmt.Sprintf("{\"i\":%d}\n", i)), 0o644); err != nil {
				t.Fatal(err)
			}
			at := base.Add(time.Duration(i) * time.Second)
			if err := os.Chtimes(path, at, at); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := runAvailable(t, plan, cp); err != nil {
			t.Fatal(err)
		}
		progressBytes = append(progressBytes, committedProgressSize(t, cp))
		for i := start; i < start+lot; i++ {
			if err := os.Remove(filepath.Join(in, fmt.Sprintf("f%06d.json", i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Exactly once: each file in one batch, none missing.
	seen := map[string]int{}
	for _, names := range r.batches {
		for _, n := range names {
			seen[n]++
		}
	}
	if len(seen) != files {
		t.Errorf("%d files read, want %d", len(seen), files)
	}
	for n, c := range seen {
		if c != 1 {
			t.Errorf("%s read %d times", n, c)
		}
	}
	// Flat: the last lot costs no more than the third, once the log holds
	// an hour of files; without compaction it would be 50 times as much.
	early, late := progressBytes[2], progressBytes[len(progressBytes)-1]
	t.Logf("committed progress: %d bytes after lot 3, %d after lot %d", early, late, len(progressBytes))
	if late > early*11/10 {
		t.Errorf("the checkpoint's progress grew from %d to %d bytes", early, late)
	}
	perFile := len(`"f000000.json":1735689600000000000,`)
	if late > 2*3600*perFile {
		t.Errorf("the checkpoint's progress is %d bytes: more than two hours of files", late)
	}
	n := len(r.offsetBytes)
	if n < 100 {
		t.Fatalf("%d plannings", n)
	}
	if e, l := slices.Max(r.offsetBytes[10:20]), slices.Max(r.offsetBytes[n-20:]); l > e*11/10 {
		t.Errorf("planning read and wrote %d offset bytes early on, %d at the end", e, l)
	}
}

// committedProgressSize returns the size of the checkpoint's committed
// progress, which holds the sources' offsets.
func committedProgressSize(t *testing.T, dir string) int {
	t.Helper()
	c, err := runtime.OpenCheckpoint(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p, ok, err := c.Progress()
	if err != nil || !ok {
		t.Fatalf("progress: %v, %v", ok, err)
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// TestCheckpointInUse: a second query on a checkpoint a running query
// holds is refused with what is wrong and what to do, not the lock's
// errno; once the first stops, the checkpoint can be opened again.
func TestCheckpointInUse(t *testing.T) {
	tmp := t.TempDir()
	in, cp := filepath.Join(tmp, "in"), filepath.Join(tmp, "cp")
	writeFile(t, in, "a.json", "{}\n")
	first, err := runtime.Start(context.Background(), newFileReads().plan(runtime.FilesSource(in, runtime.FilesOptions{})),
		runtime.Checkpoint(cp), runtime.WithTrigger(runtime.ProcessingTime(time.Hour)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = runtime.Start(context.Background(), newFileReads().plan(runtime.FilesSource(in, runtime.FilesOptions{})), runtime.Checkpoint(cp))
	want := "streamgen: checkpoint " + cp + " is in use by another query (lock held); "
	if !errors.Is(err, runtime.ErrCheckpointInUse) || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "streamgen:") != 1 {
		t.Errorf("second Start: %v\nwant it to begin %q", err, want)
	}
	// A reader of a running query's checkpoint reads a snapshot the
	// query makes, and removes it when it closes.
	live, err := runtime.OpenCheckpoint(cp)
	if err != nil || !live.Live() || live.Dir() != cp {
		t.Fatalf("OpenCheckpoint of a running query's checkpoint: %v", err)
	}
	if _, ok, err := live.Meta(); err != nil || !ok {
		t.Errorf("the snapshot's metadata: %v, %v", ok, err)
	}
	if err := live.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(cp, "INSPECT", "*")); len(left) != 0 {
		t.Errorf("the snapshot was left behind: %q", left)
	}
	// OpenIdleCheckpointFS asks no snapshot: in use is its answer.
	if idle, err := runtime.OpenIdleCheckpointFS(vfs.Default, cp); !errors.Is(err, runtime.ErrCheckpointInUse) {
		t.Errorf("OpenIdleCheckpointFS of a running query's checkpoint: %v, %v", idle, err)
	}
	if requests, _ := filepath.Glob(filepath.Join(cp, "INSPECT", "*")); len(requests) != 0 {
		t.Errorf("OpenIdleCheckpointFS asked for a snapshot: %q", requests)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	idle, err := runtime.OpenIdleCheckpointFS(vfs.Default, cp)
	if err != nil || idle.Live() {
		t.Fatalf("OpenIdleCheckpointFS after Stop: %v", err)
	}
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	c, err := runtime.OpenCheckpoint(cp)
	if err != nil {
		t.Fatalf("after Stop: %v", err)
	}
	// While it is open for reading, no query starts on it.
	_, err = runtime.Start(context.Background(), newFileReads().plan(runtime.FilesSource(in, runtime.FilesOptions{})), runtime.Checkpoint(cp))
	if !errors.Is(err, runtime.ErrCheckpointInUse) {
		t.Errorf("Start while the checkpoint is open for reading: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := runAvailable(t, newFileReads().plan(runtime.FilesSource(in, runtime.FilesOptions{})), cp); err != nil {
		t.Errorf("Start after the reader closed: %v", err)
	}
}

// TestCheckpointKeepsRecentProgress: the checkpoint keeps the reports of
// the latest 20 batches, as the listener got them, for tools that read it
// without the query.
func TestCheckpointKeepsRecentProgress(t *testing.T) {
	tmp := t.TempDir()
	in, cp := filepath.Join(tmp, "in"), filepath.Join(tmp, "cp")
	for i := range 25 {
		writeFile(t, in, fmt.Sprintf("%02d.json", i), strings.Repeat("{}\n", i+1))
	}
	plan := newFileReads().plan(runtime.FilesSource(in, runtime.FilesOptions{MaxFilesPerTrigger: 1}))
	reports, err := runAvailable(t, plan, cp)
	if err != nil || len(reports) != 25 {
		t.Fatalf("%d batches, %v", len(reports), err)
	}
	c, err := runtime.OpenCheckpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	kept, err := c.RecentProgress()
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 20 {
		t.Fatalf("%d reports kept, want 20", len(kept))
	}
	for i, r := range kept {
		want, _ := json.Marshal(reports[5+i])
		got, _ := json.Marshal(r)
		if string(got) != string(want) {
			t.Errorf("report %d kept as\n%s\nwant\n%s", i, got, want)
		}
		if r.NumInputRows != int64(5+i+1) {
			t.Errorf("batch %d: %d rows in, want %d", r.BatchID, r.NumInputRows, 5+i+1)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Restarted for 7 more files: still the latest 20, batches 12 to 31.
	for i := 25; i < 32; i++ {
		writeFile(t, in, fmt.Sprintf("%02d.json", i), strings.Repeat("{}\n", i+1))
	}
	more, err := runAvailable(t, plan, cp)
	if err != nil || len(more) != 7 {
		t.Fatalf("%d batches after the restart, %v", len(more), err)
	}
	if c, err = runtime.OpenCheckpoint(cp); err != nil {
		t.Fatal(err)
	}
	if kept, err = c.RecentProgress(); err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, r := range kept {
		ids = append(ids, r.BatchID)
	}
	if len(ids) != 20 || ids[0] != 12 || ids[19] != 31 {
		t.Errorf("after the restart the checkpoint keeps the reports of batches %v, want 12 to 31", ids)
	}
}

// TestFilesLag: each batch's report says how many files of the listing
// it was planned from are not read yet, and their bytes, as the files
// left in the directory say: MaxFilesPerTrigger leaves them one batch at
// a time.
func TestFilesLag(t *testing.T) {
	dir := t.TempDir()
	sizes := map[string]int64{}
	names := []string{"a.json", "b.json", "c.json", "d.json"}
	for i, name := range names {
		content := strings.Repeat(fmt.Sprintf("{\"n\":%d}\n", i), i+1)
		writeFile(t, dir, name, content)
		sizes[name] = int64(len(content))
	}
	r := newFileReads()
	q, err := runtime.Start(context.Background(), r.plan(runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 1})),
		runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	reports := q.RecentProgress()
	if len(reports) != len(names) {
		t.Fatalf("%d batches, want one per file", len(reports))
	}
	read := map[string]bool{}
	for _, p := range reports {
		for _, name := range r.batches[p.BatchID] {
			read[name] = true
		}
		var files, bytes int64
		for _, name := range names {
			if !read[name] {
				files, bytes = files+1, bytes+sizes[name]
			}
		}
		s := p.Sources[0]
		want := runtime.PartitionLag{Partition: "files", Position: int64(len(names)) - files, Latest: int64(len(names)), Lag: files, Bytes: bytes}
		if len(s.Lag) != 1 || s.Lag[0] != want {
			t.Fatalf("batch %d: lag %+v, want %+v", p.BatchID, s.Lag, want)
		}
		if s.Metrics["filesBehindLatest"] != fmt.Sprint(files) || s.Metrics["bytesBehindLatest"] != fmt.Sprint(bytes) {
			t.Fatalf("batch %d: metrics %v", p.BatchID, s.Metrics)
		}
	}
}

// TestFilesCleanSource: with CleanDelete or CleanArchive, the files of a
// batch leave the directory once the batch is committed, and not before
// (a batch that fails keeps its files, and reads them when it runs
// again); archived files keep their bytes; every file is read once. A
// start cleans the files of the last batch before it that a process which
// died left behind (already archived, or not), and no file of an earlier
// batch.
func TestFilesCleanSource(t *testing.T) {
	for _, mode := range []runtime.CleanMode{runtime.CleanDelete, runtime.CleanArchive} {
		t.Run(mode.String(), func(t *testing.T) {
			tmp := t.TempDir()
			in, cp, archive := filepath.Join(tmp, "in"), filepath.Join(tmp, "cp"), filepath.Join(tmp, "in", "done")
			content := map[string]string{}
			write := func(name string) {
				content[name] = fmt.Sprintf("{\"file\":%q}\n", name)
				writeFile(t, in, name, content[name])
			}
			for _, name := range []string{"a.json", "b.json", "c.json", "d.json", "e.jsonl.gz"} {
				write(name)
			}
			content["e.jsonl.gz"] = "" // an empty file: no lines, but read, and cleaned
			writeFile(t, in, "e.jsonl.gz", "")
			modTimes := map[string]time.Time{}
			for name := range content {
				info, err := os.Stat(filepath.Join(in, name))
				if err != nil {
					t.Fatal(err)
				}
				modTimes[name] = info.ModTime()
			}
			opts := runtime.FilesOptions{MaxFilesPerTrigger: 2, CleanSource: mode}
			if mode == runtime.CleanArchive {
				opts.ArchiveDir = archive
			}
			r := newFileReads()
			r.failBatch = 1
			src := runtime.FilesSource(in, opts)
			plan := r.plan(src)
			present := func() []string {
				t.Helper()
				entries, err := os.ReadDir(in)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, e := range entries {
					if !e.IsDir() {
						names = append(names, e.Name())
					}
				}
				return names
			}
			if _, err := runAvailable(t, plan, cp); err == nil {
				t.Fatal("batch 1's sink did not fail")
			}
			// Batch 0 (a, b) committed; batch 1 (c, d) failed.
			if got, want := present(), []string{"c.json", "d.json", "e.jsonl.gz"}; !slices.Equal(got, want) {
				t.Fatalf("after batch 1 failed, the directory holds %q, want %q", got, want)
			}
			delete(r.batches, 1) // its failed attempt's reads
			if _, err := runAvailable(t, plan, cp); err != nil {
				t.Fatal(err)
			}
			if got := present(); len(got) != 0 {
				t.Fatalf("after the run, the directory holds %q", got)
			}
			var read []string
			for id := int64(0); id < 3; id++ {
				read = append(read, r.read(id)...)
			}
			if want := []string{"a.json", "b.json", "c.json", "d.json"}; !slices.Equal(read, want) {
				t.Fatalf("the batches read %q, want %q", read, want)
			}
			checkArchive := func(names ...string) {
				t.Helper()
				if mode != runtime.CleanArchive {
					if _, err := os.Stat(archive); !errors.Is(err, os.ErrNotExist) {
						t.Fatalf("CleanDelete made an archive: %v", err)
					}
					return
				}
				for _, name := range names {
					got, err := os.ReadFile(filepath.Join(archive, name))
					if err != nil || string(got) != content[name] {
						t.Fatalf("archived %s: %q, %v; want %q", name, got, err, content[name])
					}
				}
			}
			checkArchive("a.json", "b.json", "c.json", "d.json", "e.jsonl.gz")

			// What a process that died between the last batch's commit
			// and its clean leaves: that batch's file (e.jsonl.gz) back
			// in the directory with its time; when archiving, in both
			// places, as a move cut short leaves it. A file of an earlier
			// batch back with its time (b.json: with a SyncInterval, a
			// process that died leaves the files of every batch since the
			// last sync) is cleaned too, unread. And a.json written
			// again, later: a file of a name read before, which is not
			// read (as in Spark) nor cleaned.
			if mode == runtime.CleanArchive {
				if err := os.Link(filepath.Join(archive, "e.jsonl.gz"), filepath.Join(in, "e.jsonl.gz")); err != nil {
					t.Fatal(err)
				}
			} else {
				writeFile(t, in, "e.jsonl.gz", "")
			}
			write("b.json")
			for _, name := range []string{"e.jsonl.gz", "b.json"} {
				if err := os.Chtimes(filepath.Join(in, name), modTimes[name], modTimes[name]); err != nil {
					t.Fatal(err)
				}
			}
			writeFile(t, in, "a.json", "{\"again\":1}\n")
			later := modTimes["a.json"].Add(time.Minute)
			if err := os.Chtimes(filepath.Join(in, "a.json"), later, later); err != nil {
				t.Fatal(err)
			}
			write("f.json")
			r.batches = map[int64][]string{}
			// The same source: a query that starts again in one process
			// sweeps too.
			plan = r.plan(src)
			if _, err := runAvailable(t, plan, cp); err != nil {
				t.Fatal(err)
			}
			var again []string
			for id := int64(3); id < 6; id++ {
				again = append(again, r.read(id)...)
			}
			if !slices.Equal(again, []string{"f.json"}) {
				t.Fatalf("after the restart the batches read %q, want f.json alone", again)
			}
			want := []string{"a.json"}
			if got := present(); !slices.Equal(got, want) {
				t.Fatalf("after the restart the directory holds %q, want %q", got, want)
			}
			checkArchive("b.json", "e.jsonl.gz", "f.json")
		})
	}
}

// TestFilesCleanSourceOptions: options that cannot clean are refused at
// Start.
func TestFilesCleanSourceOptions(t *testing.T) {
	tmp := t.TempDir()
	in := filepath.Join(tmp, "in")
	writeFile(t, in, "a.json", "{}\n")
	for _, c := range []struct {
		opts runtime.FilesOptions
		want string
	}{
		{runtime.FilesOptions{CleanSource: runtime.CleanArchive}, "CleanSource is CleanArchive but ArchiveDir is not set"},
		{runtime.FilesOptions{CleanSource: runtime.CleanArchive, ArchiveDir: in + "/."}, "is the source's directory"},
		{runtime.FilesOptions{CleanSource: runtime.CleanDelete, ArchiveDir: tmp}, "ArchiveDir is set but CleanSource is delete"},
		{runtime.FilesOptions{CleanSource: 7}, "CleanSource CleanMode(7) is not a CleanMode"},
	} {
		_, err := runtime.Start(context.Background(), newFileReads().plan(runtime.FilesSource(in, c.opts)),
			runtime.Checkpoint(filepath.Join(tmp, "cp")))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: Start gave %v, want an error saying %q", c.opts, err, c.want)
		}
	}
}
