package runtime_test

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/streamgen/streamgen/runtime"
)

// commitBatches commits batches from..to-1 on s, each adding id+1 to the
// sum of key "k" and writing an entry of its own.
func commitBatches(t *testing.T, s *runtime.Store, from, to int64) {
	t.Helper()
	for id := from; id < to; id++ {
		b := s.NewBatch()
		v, ok, err := b.Get(sumVar, []byte("k"), nil)
		if err != nil {
			t.Fatal(err)
		}
		var sum int64
		if ok {
			sum = int64(binary.BigEndian.Uint64(v))
		}
		b.Put(sumVar, []byte("k"), nil, u64(sum+id+1))
		b.Put(sumVar, []byte(fmt.Sprint("batch", id)), nil, u64(id))
		if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

// sumUpTo is the sum commitBatches leaves after batch id.
func sumUpTo(id int64) int64 { return (id + 1) * (id + 2) / 2 }

// contents reads what a store holds: its progress, the sum, and the
// number of entries.
func contents(s *runtime.Store) (batch, sum int64, entries int, err error) {
	p, _, err := s.Progress()
	if err != nil {
		return 0, 0, 0, err
	}
	b := s.NewBatch()
	defer b.Close()
	err = b.ScanVar(sumVar, func(key, _, value []byte) error {
		entries++
		if string(key) == "k" {
			sum = int64(binary.BigEndian.Uint64(value))
		}
		return nil
	})
	return p.BatchID, sum, entries, err
}

// checkConsistent reopens fs and checks that state and progress describe
// the same batch; it returns that batch.
func checkConsistent(t *testing.T, fs vfs.FS, opts runtime.StoreOptions) int64 {
	t.Helper()
	s := open(t, fs, opts)
	defer s.Close()
	batch, sum, entries, err := contents(s)
	if err != nil {
		t.Fatal(err)
	}
	want := 0 // "k" and an entry per batch
	if batch >= 0 {
		want = int(batch + 2)
	}
	if sum != sumUpTo(batch) || entries != want {
		t.Fatalf("progress says batch %d (sum %d, %d entries), the state holds sum %d in %d entries", batch, sumUpTo(batch), want, sum, entries)
	}
	return batch
}

func readVFS(t *testing.T, fs vfs.FS, path string) []byte {
	t.Helper()
	f, err := fs.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeVFS(t *testing.T, fs vfs.FS, path string, data []byte) {
	t.Helper()
	f, err := fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
}

// ckptFiles lists the checkpoint's files with their sizes.
func ckptFiles(t *testing.T, fs vfs.FS) []string {
	t.Helper()
	names, err := fs.List("ckpt")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range names {
		st, err := fs.Stat("ckpt/" + n)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s:%d", n, st.Size()))
	}
	slices.Sort(out)
	return out
}

// fileNamed returns the checkpoint file whose name has the prefix or
// suffix; it fails when there is not exactly one.
func fileNamed(t *testing.T, fs vfs.FS, match func(string) bool) string {
	t.Helper()
	names, _ := fs.List("ckpt")
	var found []string
	for _, n := range names {
		if match(n) {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		t.Fatalf("checkpoint files %v: want one match, found %v", names, found)
	}
	return "ckpt/" + found[0]
}

func hasSuffix(s string) func(string) bool {
	return func(n string) bool { return strings.HasSuffix(n, s) }
}
func hasPrefix(s string) func(string) bool {
	return func(n string) bool { return strings.HasPrefix(n, s) }
}

// flushedCheckpoint makes a checkpoint of 5 batches whose state is in a
// table (Pebble flushes the replayed log when it opens the store again),
// then commits batches 5..5+inLog-1 into the log only.
func flushedCheckpoint(t *testing.T, inLog int64) *vfs.MemFS {
	t.Helper()
	fs := vfs.NewMem()
	s := open(t, fs, runtime.StoreOptions{})
	commitBatches(t, s, 0, 5)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, fs, runtime.StoreOptions{})
	commitBatches(t, s, 5, 5+inLog)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	fileNamed(t, fs, hasSuffix(".sst"))
	return fs
}

// currentManifest is the MANIFEST that Pebble's marker names
// ("marker.manifest.000002.MANIFEST-000006").
func currentManifest(t *testing.T, fs vfs.FS) string {
	t.Helper()
	marker := fileNamed(t, fs, hasPrefix("marker.manifest."))
	return "ckpt/" + marker[strings.LastIndexByte(marker, '.')+1:]
}

func clone(t *testing.T, fs vfs.FS) *vfs.MemFS {
	t.Helper()
	c := vfs.NewMem()
	if _, err := vfs.Clone(fs, c, "ckpt", "ckpt"); err != nil {
		t.Fatal(err)
	}
	return c
}

// expectRefused opens fs, expects an error that wraps want and says each
// of says, and checks that the refused open changed no file.
func expectRefused(t *testing.T, fs vfs.FS, want error, says ...string) error {
	t.Helper()
	before := ckptFiles(t, fs)
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
	if err == nil {
		batch, sum, entries, rerr := contents(s)
		s.Close()
		t.Fatalf("the damaged checkpoint opened: batch %d, sum %d, %d entries, read error %v", batch, sum, entries, rerr)
	}
	if !errors.Is(err, want) {
		t.Fatalf("error does not wrap %v: %v", want, err)
	}
	for _, w := range says {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("error does not say %q: %v", w, err)
		}
	}
	if after := ckptFiles(t, fs); !slices.Equal(before, after) {
		t.Fatalf("the refused open changed the checkpoint's files:\nbefore %v\nafter  %v", before, after)
	}
	return err
}

// TestCorruptCheckpointIsRefused damages the files of a checkpoint made on
// vfs.NewMem (every few bytes of its table flipped, the table truncated
// or gone, the MANIFEST truncated) and opens it: each is refused with the
// damaged file and the way out, and the refused open changes no file;
// none opens with other contents than were committed.
func TestCorruptCheckpointIsRefused(t *testing.T) {
	base := flushedCheckpoint(t, 0)
	table := fileNamed(t, base, hasSuffix(".sst"))
	data := readVFS(t, base, table)
	const wayOut = "start the query from a fresh checkpoint directory"
	refused := 0
	for off := 0; off < len(data); off += 3 {
		fs := clone(t, base)
		d := slices.Clone(data)
		d[off] ^= 0x5a
		writeVFS(t, fs, table, d)
		s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
		if err != nil {
			if !errors.Is(err, runtime.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), table) || !strings.Contains(err.Error(), wayOut) {
				t.Fatalf("byte %d of %s flipped: %v", off, table, err)
			}
			refused++
			continue
		}
		// Pebble checksums every block: only the footer's padding is
		// free to change.
		batch, sum, entries, err := contents(s)
		s.Close()
		if err != nil || batch != 4 || sum != sumUpTo(4) || entries != 6 {
			t.Fatalf("byte %d of %s flipped: opened with batch %d, sum %d, %d entries, error %v", off, table, batch, sum, entries, err)
		}
	}
	if refused < len(data)/3*9/10 {
		t.Fatalf("only %d of %d flipped bytes refused", refused, len(data)/3)
	}

	fs := clone(t, base)
	writeVFS(t, fs, table, data[:len(data)/2])
	expectRefused(t, fs, runtime.ErrCorruptCheckpoint, table, "size mismatch", wayOut)

	fs = clone(t, base)
	if err := fs.Remove(table); err != nil {
		t.Fatal(err)
	}
	expectRefused(t, fs, runtime.ErrCorruptCheckpoint, strings.TrimPrefix(strings.TrimSuffix(table, ".sst"), "ckpt/"), wayOut)

	// A MANIFEST cut short is malformed, or opens, in Pebble, as the
	// edits before the cut: here none, an empty store, which a writable
	// open would make final by deleting the table.
	manifest := currentManifest(t, base)
	content := readVFS(t, base, manifest)
	for _, cut := range []int{0, 20, len(content) / 2, len(content) - 1} {
		fs := clone(t, base)
		writeVFS(t, fs, manifest, content[:cut])
		expectRefused(t, fs, runtime.ErrCorruptCheckpoint, strings.TrimPrefix(manifest, "ckpt/"), "fresh checkpoint directory")
	}
}

// TestLostBatchesAreRefused: Pebble opens without a word a store that has
// lost committed batches; the commit file makes each such start an error
// that says what is missing and what starting would do, and changes no
// file. Deleting the commit file accepts the loss.
func TestLostBatchesAreRefused(t *testing.T) {
	t.Run("log cut short", func(t *testing.T) {
		base := flushedCheckpoint(t, 5)
		log := fileNamed(t, base, hasSuffix(".log"))
		data := readVFS(t, base, log)
		// (The log ends in an 11-byte trailer written at Close.)
		for _, cut := range []int{len(data) / 4, len(data) / 2, len(data) - 20} {
			fs := clone(t, base)
			writeVFS(t, fs, log, data[:cut])
			err := expectRefused(t, fs, runtime.ErrRewoundCheckpoint, "commit file ckpt/STREAMGEN-COMMIT says batch 9 was committed", "would rewind the query", "used again", "sinks")
			if errors.Is(err, runtime.ErrCorruptCheckpoint) {
				t.Fatalf("a rewind is not corruption: %v", err)
			}
			if err := fs.Remove("ckpt/STREAMGEN-COMMIT"); err != nil {
				t.Fatal(err)
			}
			if batch := checkConsistent(t, fs, runtime.StoreOptions{}); batch < 4 || batch >= 9 {
				t.Fatalf("log cut at %d of %d: the store holds batch %d", cut, len(data), batch)
			}
		}
	})
	t.Run("log removed", func(t *testing.T) {
		fs := flushedCheckpoint(t, 5)
		if err := fs.Remove(fileNamed(t, fs, hasSuffix(".log"))); err != nil {
			t.Fatal(err)
		}
		expectRefused(t, fs, runtime.ErrRewoundCheckpoint, "progress is batch 4", "batches 5 to 9 are lost")
	})
	t.Run("MANIFEST marker removed", func(t *testing.T) {
		fs := flushedCheckpoint(t, 0)
		if err := fs.Remove(fileNamed(t, fs, hasPrefix("marker.manifest."))); err != nil {
			t.Fatal(err)
		}
		expectRefused(t, fs, runtime.ErrRewoundCheckpoint, "the store is empty", "batches 0 to 4 were committed", "batch ids would restart at 0")
	})
	t.Run("MANIFEST truncated, batches in the log", func(t *testing.T) {
		// The log replays the last batches' progress into a store that
		// lost the tables with the state of the earlier ones.
		fs := flushedCheckpoint(t, 3)
		manifest := currentManifest(t, fs)
		writeVFS(t, fs, manifest, readVFS(t, fs, manifest)[:50])
		// The commit file's mark of the MANIFEST tells first.
		err := expectRefused(t, fs, runtime.ErrRewoundCheckpoint, "the MANIFEST was cut short", "since batch 7 was committed", manifest)
		if !errors.Is(err, runtime.ErrCorruptCheckpoint) {
			t.Errorf("a truncated MANIFEST is not reported as corrupt: %v", err)
		}
		// A commit file of an earlier version, which marks no MANIFEST:
		// the store is found without its tables.
		fs = flushedCheckpoint(t, 3)
		writeVFS(t, fs, manifest, readVFS(t, fs, manifest)[:50])
		writeVFS(t, fs, "ckpt/STREAMGEN-COMMIT", []byte(`{"format":1,"batchId":7}`))
		expectRefused(t, fs, runtime.ErrRewoundCheckpoint, "lost its tables", "progress of batch 7", manifest)
	})
}

// TestMachineCrashIsNotTakenForLoss: with SyncInterval, the commit file
// follows the synced point, not the commits, so a machine crash, which
// keeps only synced data and loses the last interval's batches as
// asynchronous progress tracking allows, always opens; and the commit
// file does follow the batches.
func TestMachineCrashIsNotTakenForLoss(t *testing.T) {
	opts := runtime.StoreOptions{SyncInterval: 2 * time.Millisecond}
	fs := vfs.NewCrashableMem()
	s := open(t, fs, opts)
	r := rand.New(rand.NewPCG(3, 3))
	recorded := int64(-1)
	for id := int64(0); id < 200; id += 5 {
		commitBatches(t, s, id, id+5)
		if r.IntN(4) > 0 {
			continue
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		batch := checkConsistent(t, crashed, opts)
		if rec := commitFileBatch(t, crashed); rec > batch {
			t.Fatalf("after a machine crash at batch %d the store holds batch %d and the commit file says %d", id+4, batch, rec)
		} else {
			recorded = max(recorded, rec)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if rec := commitFileBatch(t, fs); rec != 199 {
		t.Fatalf("after Close the commit file says batch %d, want 199", rec)
	}
	if recorded < 0 {
		t.Fatal("no crash found the commit file written: the test does not reach the case it is for")
	}
}

// commitFileBatch reads the commit file's batch id (-1 for none).
func commitFileBatch(t *testing.T, fs vfs.FS) int64 {
	t.Helper()
	if _, err := fs.Stat("ckpt/STREAMGEN-COMMIT"); err != nil {
		return -1
	}
	var rec struct {
		BatchID int64 `json:"batchId"`
	}
	if err := json.Unmarshal(readVFS(t, fs, "ckpt/STREAMGEN-COMMIT"), &rec); err != nil {
		t.Fatal(err)
	}
	return rec.BatchID
}

// TestProcessCrashLosesNothing: with SyncInterval, a commit hands the
// batch to Pebble's log writer, which writes it to the file at once and
// syncs later. A process crash, where the operating system keeps what was
// written (a crash clone that keeps all unsynced data), loses no
// committed batch; a machine crash (a clone of the synced data only)
// loses at most the batches after the last sync, and the sync comes
// within the interval.
func TestProcessCrashLosesNothing(t *testing.T) {
	t.Run("process crash", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			// An interval that never passes: no sync after the first.
			opts := runtime.StoreOptions{SyncInterval: time.Hour}
			fs := vfs.NewCrashableMem()
			s := open(t, fs, opts)
			defer s.Close()
			commitBatches(t, s, 0, 20)
			// The log writer's goroutine writes what the commit handed it
			// right after (synctest.Wait lets it run until it waits again);
			// before, NoSync commits stayed in its buffer until a 32 KiB
			// block filled or the next sync.
			synctest.Wait()
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
			if batch := checkConsistent(t, crashed, opts); batch != 19 {
				t.Fatalf("a process crash after committing batch 19 loses batches: the store holds batch %d", batch)
			}
			// A machine crash keeps only what was synced: the batches after
			// the last sync (here all, within the one interval) may be lost,
			// and the store opens consistent.
			checkConsistent(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), opts)
		})
	})
	t.Run("machine crash", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			opts := runtime.StoreOptions{SyncInterval: 20 * time.Millisecond}
			fs := vfs.NewCrashableMem()
			s := open(t, fs, opts)
			defer s.Close()
			commitBatches(t, s, 0, 10)
			// Within an interval (of the bubble's virtual time) the batches
			// are synced, which the commit file then records.
			time.Sleep(opts.SyncInterval)
			synctest.Wait()
			if got := commitFileBatch(t, fs); got < 9 {
				t.Fatalf("batch 9 not synced an interval after its commit: the commit file says %d", got)
			}
			commitBatches(t, s, 10, 20)
			batch := checkConsistent(t, fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0}), opts)
			if batch < 9 {
				t.Fatalf("a machine crash lost synced batches: the store holds batch %d, batch 9 was synced", batch)
			}
		})
	})
}

// TestProcessCrashKeepsThePlan: with SyncInterval, the plan of the batch
// after the last commit (its offsets, written before its sinks run) is
// handed to Pebble's log writer as a commit is: a process crash keeps it,
// so the batch runs again with the same offsets. (Written without a sync
// requested, it stayed in the log writer's buffer and was lost.)
func TestProcessCrashKeepsThePlan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		opts := runtime.StoreOptions{SyncInterval: time.Hour}
		fs := vfs.NewCrashableMem()
		s := open(t, fs, opts)
		defer s.Close()
		commitBatches(t, s, 0, 2)
		synctest.Wait()
		if err := s.WritePlan(runtime.PlannedOffsets{BatchID: 2, Ends: map[string]json.RawMessage{"in": json.RawMessage("42")}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
		r := open(t, crashed, opts)
		defer r.Close()
		p, ok, err := r.PlannedBatch()
		if err != nil {
			t.Fatal(err)
		}
		if !ok || p.BatchID != 2 || string(p.Ends["in"]) != "42" {
			t.Fatalf("after a process crash, the planned batch is %+v (found %v), want batch 2 ending at 42", p, ok)
		}
	})
}

// enospc is the error of a full disk.
func enospc(op errorfs.Op) error {
	return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
}

// TestFailedFlushFailsTheStore: a memtable flush that fails on a full
// disk is the store's failure, which the next commit and read return,
// naming the directory and the cause; Close ends Pebble's retries at once
// (it tries again in a loop until then).
func TestFailedFlushFailsTheStore(t *testing.T) {
	synctest.Test(t, failedFlushFailsTheStore)
}

// failedFlushFailsTheStore runs in a bubble of virtual time, so that a
// minute of Pebble's flush retries passes at once.
func failedFlushFailsTheStore(t *testing.T) {
	var tables atomic.Bool
	var injected atomic.Int64
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if tables.Load() && strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			injected.Add(1)
			return enospc(op)
		}
		return nil
	}))
	s := open(t, fs, runtime.StoreOptions{MemTableSize: 4 << 20})
	tables.Store(true)
	// The memtable is 4 MiB: batches of 512 KiB fill it and it is
	// flushed to a table. (Before the store failed on it, the commits
	// went on until the memtables were full, then stalled for ever while
	// Pebble retried the flush in a loop.)
	value := make([]byte, 512<<10)
	failed := make(chan error, 1)
	go func() {
		var err error
		for id := int64(0); err == nil && id < 1000; id++ {
			b := s.NewBatch()
			if _, _, err = b.Get(sumVar, []byte("k"), nil); err == nil {
				b.Put(sumVar, []byte(fmt.Sprint(id)), nil, value)
				err = s.Commit(b, runtime.Progress{BatchID: id})
			}
			b.Close()
		}
		failed <- err
	}()
	var err error
	select {
	case err = <-failed:
	case <-time.After(20 * time.Second):
		t.Fatalf("commits hang (%d failed table writes)", injected.Load())
	}
	if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), "ckpt") || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("error: %v", err)
	}
	if !errors.Is(s.Err(), runtime.ErrStoreFailed) {
		t.Fatalf("Err: %v", s.Err())
	}
	start := time.Now()
	if cerr := s.Close(); !errors.Is(cerr, runtime.ErrStoreFailed) {
		t.Fatalf("Close: %v", cerr)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
	n := injected.Load()
	time.Sleep(time.Minute) // virtual: Pebble retries a flush every second
	synctest.Wait()
	if after := injected.Load(); after != n {
		t.Fatalf("Pebble still writes tables after Close: %d failed writes, then %d", n, after)
	}
}

// TestDiskReserve: the store keeps StoreOptions.DiskReserve of its file
// system free. OpenStore refuses a disk with less free, and a commit that
// would leave less (counting its batch twice) fails the store before
// Pebble sees the batch, with ErrDiskFull and what was free and needed;
// the batches before it are kept, and the store opens again once there
// is room. The reserve is at most a twentieth of the disk, and a negative
// one turns the check off.
func TestDiskReserve(t *testing.T) {
	const gib = 1 << 30
	mem := vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: 10 * gib, AvailBytes: 100 << 20})
	_, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: mem})
	if !errors.Is(err, runtime.ErrDiskFull) || !errors.Is(err, runtime.ErrStoreFailed) ||
		!strings.Contains(err.Error(), "in ckpt: open the store: 100.0 MiB free of 10.0 GiB, under the 256.0 MiB kept in reserve; ") ||
		!strings.Contains(err.Error(), "free disk space") {
		t.Fatalf("open with 100 MiB free: %v", err)
	}
	open(t, mem, runtime.StoreOptions{DiskReserve: -1}).Close()
	open(t, mem, runtime.StoreOptions{DiskReserve: 64 << 20}).Close()

	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: 10 * gib, AvailBytes: gib})
	s := open(t, mem, runtime.StoreOptions{})
	commitBatches(t, s, 0, 3)
	// Room for the reserve and a few bytes, not for twice the batch.
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: 10 * gib, AvailBytes: runtime.DefaultDiskReserve + 40})
	b := s.NewBatch()
	b.Put(sumVar, []byte("k"), nil, u64(-1))
	err = s.Commit(b, runtime.Progress{BatchID: 3})
	b.Close()
	if !errors.Is(err, runtime.ErrDiskFull) || !errors.Is(err, runtime.ErrStoreFailed) ||
		!strings.Contains(err.Error(), "in ckpt: commit batch 3: 268435496 B free of 10.0 GiB, under the 268435520 B needed (the 256.0 MiB kept in reserve and twice the batch's 32 B)") {
		t.Fatalf("commit with the reserve free: %v", err)
	}
	if !errors.Is(s.Err(), runtime.ErrDiskFull) {
		t.Fatalf("Err: %v", s.Err())
	}
	if err := s.Close(); !errors.Is(err, runtime.ErrDiskFull) {
		t.Fatalf("Close: %v", err)
	}
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: 10 * gib, AvailBytes: gib})
	if batch := checkConsistent(t, mem, runtime.StoreOptions{}); batch != 2 {
		t.Fatalf("the store holds batch %d after the refused commit of batch 3, want 2", batch)
	}

	// On a disk of 1 GiB the reserve is a twentieth, 51.2 MiB, with 4
	// MiB memtables; with the default 64 MiB ones, the 70.4 MiB Pebble
	// preallocates for its next log file.
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: gib, AvailBytes: 80 << 20})
	s = open(t, mem, runtime.StoreOptions{})
	commitBatches(t, s, 3, 4)
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: gib, AvailBytes: 60 << 20})
	b = s.NewBatch()
	err = s.Commit(b, runtime.Progress{BatchID: 4})
	b.Close()
	if !errors.Is(err, runtime.ErrDiskFull) || !strings.Contains(err.Error(), "the 70.4 MiB kept in reserve") {
		t.Fatalf("commit with 60 MiB of 1 GiB free, 64 MiB memtables: %v", err)
	}
	s.Close()
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: gib, AvailBytes: 60 << 20})
	s = open(t, mem, runtime.StoreOptions{MemTableSize: 4 << 20})
	commitBatches(t, s, 4, 5)
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: gib, AvailBytes: 50 << 20})
	b = s.NewBatch()
	err = s.Commit(b, runtime.Progress{BatchID: 5})
	b.Close()
	if !errors.Is(err, runtime.ErrDiskFull) || !strings.Contains(err.Error(), "the 51.2 MiB kept in reserve") {
		t.Fatalf("commit with 50 MiB of 1 GiB free: %v", err)
	}
	s.Close()

	// A restore from a copy of the store is held to the reserve too.
	mem = vfs.NewMem()
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: 10 * gib, AvailBytes: gib})
	s = open(t, mem, runtime.StoreOptions{})
	defer s.Close()
	r, err := s.BeginRestore()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Set([]byte("\x10\x00\x00\x00\x00\x00\x03\x01k"), u64(7)); err != nil {
		t.Fatal(err)
	}
	mem.TestingSetDiskUsage(vfs.DiskUsage{TotalBytes: 10 * gib, AvailBytes: runtime.DefaultDiskReserve + 10})
	if err := r.Finish(); !errors.Is(err, runtime.ErrDiskFull) || !strings.Contains(err.Error(), "in ckpt: restore: ") {
		t.Fatalf("restore with the reserve free: %v", err)
	}
}

// TestCheckpointThatCannotBeCreated: a checkpoint path under a file is
// refused with what is wrong with it, not with advice about disk space.
func TestCheckpointThatCannotBeCreated(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := runtime.OpenStore(filepath.Join(file, "checkpoint"), runtime.StoreOptions{})
	if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), "a part of the path is a file, not a directory") ||
		strings.Contains(err.Error(), "disk space") {
		t.Fatalf("a checkpoint under a file: %v", err)
	}
}

// failingLogWrites is a file system whose writes to Pebble's log files
// fail with an I/O error (not a full disk) once armed.
func failingLogWrites() (vfs.FS, *atomic.Bool) {
	armed := new(atomic.Bool)
	return errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && strings.HasSuffix(op.Path, ".log") && op.Kind == errorfs.OpFileWrite {
			return errors.New("injected EIO")
		}
		return nil
	})), armed
}

// TestPlanWriteAfterLogFaultFailsTheStore: with a SyncInterval, a log
// write fails; the plans written after it (before the sync loop sees the
// failure) fail the store with ErrStoreFailed rather than panic out of
// Pebble's commit pipeline, and Close returns, with CloseTimeout an hour:
// the store knows Pebble's pipeline is left locked and does not wait for it.
func TestPlanWriteAfterLogFaultFailsTheStore(t *testing.T) {
	for range 8 {
		fs, armed := failingLogWrites()
		s := open(t, fs, runtime.StoreOptions{SyncInterval: time.Hour, CloseTimeout: time.Hour})
		armed.Store(true)
		// Small plans, 128 KiB in all: under the first memtable's 256
		// KiB, so that none moves Pebble to a new log file (that case is
		// TestLogFaultAsPebbleMovesToANewLog's).
		end := json.RawMessage(`"` + strings.Repeat("x", 40) + `"`)
		var err error
		for id := int64(0); id < 2000 && err == nil; id++ {
			err = s.WritePlan(runtime.PlannedOffsets{BatchID: id, Ends: map[string]json.RawMessage{"in": end}})
			goruntime.Gosched() // the log writer's goroutine writes, and fails
		}
		if !errors.Is(err, runtime.ErrStoreFailed) {
			t.Fatalf("plans written while the log's writes fail: %v, want ErrStoreFailed", err)
		}
		s.Close()
	}
}

// TestFaultWhileOpenFlushesTheLog: a start on a checkpoint whose last
// batches are in its log only flushes them to a table and moves to a new
// MANIFEST while Pebble opens. One fault there (the new MANIFEST's sync
// or write failing, on a full disk or otherwise, or its marker not made)
// fails that start with the cause, at once; Pebble, which goes on after
// an error it deems fatal, changes nothing more in the directory (it
// deleted the replayed log while the marker still named the old
// MANIFEST: the next start found the store empty); and the next start,
// the fault gone, holds every committed batch.
func TestFaultWhileOpenFlushesTheLog(t *testing.T) {
	{
		newManifest := func(name string) bool {
			base := name[strings.LastIndexByte(name, '/')+1:]
			return strings.HasPrefix(base, "MANIFEST-") && base != "MANIFEST-000001"
		}
		for _, c := range []struct {
			name string
			kind errorfs.OpKind
			file func(string) bool
			err  error
		}{
			{"MANIFEST sync", errorfs.OpFileSync, newManifest, errorfs.ErrInjected},
			{"MANIFEST sync, disk full", errorfs.OpFileSync, newManifest, &os.PathError{Op: "sync", Path: "MANIFEST", Err: syscall.ENOSPC}},
			{"MANIFEST write", errorfs.OpFileWrite, newManifest, errorfs.ErrInjected},
			{"marker", errorfs.OpCreate, func(name string) bool { return strings.Contains(name, "marker.manifest.") }, errorfs.ErrInjected},
		} {
			mem := vfs.NewCrashableMem()
			s := open(t, mem, runtime.StoreOptions{})
			commitBatches(t, s, 0, 5) // in the log only
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			var fired atomic.Bool
			faulty := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind == c.kind && c.file(op.Path) && fired.CompareAndSwap(false, true) {
					return c.err
				}
				return nil
			}))
			if s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: faulty}); err == nil {
				s.Close()
				if fired.Load() {
					t.Fatalf("%s: the start that met the fault opened", c.name)
				}
				t.Fatalf("%s: no fault met", c.name)
			} else if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), "ckpt") {
				t.Fatalf("%s: %v, want the store failed, naming it", c.name, err)
			}
			// The next process, and then the next start in this one, on
			// the same directory: what Pebble left running here waits for
			// ever on its flush's next table, and the checkpoint's lock
			// was released.
			next := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 2))})
			for _, fs := range []struct {
				what string
				fs   vfs.FS
			}{{"the next process", next}, {"the next start in this process", mem}} {
				s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs.fs})
				if err != nil {
					t.Fatalf("%s: %s: %v", c.name, fs.what, err)
				}
				batch, sum, entries, err := contents(s)
				if err != nil || batch != 4 || sum != sumUpTo(4) || entries != 6 {
					t.Errorf("%s: %s holds batch %d, sum %d, %d entries (%v); want batch 4, %d, 6", c.name, fs.what, batch, sum, entries, err, sumUpTo(4))
				}
				s.Close()
			}
		}
	}
}

// TestFaultWhileOpeningThenOpenAgain: a fault at any one of the writes of
// an open, on a new checkpoint and on one whose batches are in its log
// only, fails that open with the store's failure, or lets it open; in
// either case a second open in the same process, the fault gone, takes
// the checkpoint's lock and holds every batch committed before.
func TestFaultWhileOpeningThenOpenAgain(t *testing.T) {
	for _, c := range []struct {
		committed int64
		full      bool // the write of the fault and every one after it fail
	}{{0, false}, {5, false}, {0, true}, {5, true}} {
		committed := c.committed
		// A clean open counts the writes.
		count := func(fs vfs.FS) (n int64) {
			var ops atomic.Int64
			s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: errorfs.Wrap(fs, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
					ops.Add(1)
				}
				return nil
			}))})
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
			return ops.Load()
		}
		prepare := func() *vfs.MemFS {
			mem := vfs.NewMem()
			if committed > 0 {
				s := open(t, mem, runtime.StoreOptions{})
				commitBatches(t, s, 0, committed) // in the log only
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
			return mem
		}
		total := count(prepare())
		for n := range total {
			mem := prepare()
			var ops atomic.Int64
			faulty := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
				if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && (ops.Add(1)-1 == n || c.full && ops.Load() > n) {
					return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
				}
				return nil
			}))
			if s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: faulty}); err == nil {
				s.Close()
			} else if !errors.Is(err, runtime.ErrStoreFailed) {
				t.Fatalf("%d batches, fault at write %d of %d: %v, want the store failed", committed, n, total, err)
			}
			s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: mem})
			if err != nil {
				t.Fatalf("%d batches, fault at write %d of %d, then open again: %v", committed, n, total, err)
			}
			batch, sum, _, err := contents(s)
			if err != nil || batch != committed-1 || sum != sumUpTo(committed-1) {
				t.Errorf("%d batches, fault at write %d of %d, then open again: batch %d, sum %d (%v)", committed, n, total, batch, sum, err)
			}
			s.Close()
		}
	}
}

// TestFailureHintsFollowTheCause: a store failure says what to do about
// its cause: a full disk, to free space; an I/O error of the device, to
// check the disk; a read-only file system, to make it writable; and none
// of the others to free disk space. The same for the checkpoint's lock
// file and its commit file, which fail the store too.
func TestFailureHintsFollowTheCause(t *testing.T) {
	type cause struct {
		errno syscall.Errno
		hint  string
	}
	causes := []cause{
		{syscall.ENOSPC, "free disk space"},
		{syscall.EIO, "the device reported an I/O error: check the disk"},
		{syscall.EROFS, "the file system is read-only"},
	}
	failOn := func(errno syscall.Errno, match func(errorfs.Op) bool) vfs.FS {
		mem := vfs.NewMem()
		s := open(t, mem, runtime.StoreOptions{})
		commitBatches(t, s, 0, 2)
		s.Close()
		return errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
			if match(op) {
				return &os.PathError{Op: "op", Path: op.Path, Err: errno}
			}
			return nil
		}))
	}
	check := func(what string, c cause, err error) {
		t.Helper()
		if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), c.errno.Error()) || !strings.Contains(err.Error(), "in ckpt") || !strings.Contains(err.Error(), c.hint) {
			t.Errorf("%s, %v: %v; want the store failed, saying %q", what, c.errno, err, c.hint)
		}
		if c.errno != syscall.ENOSPC && strings.Contains(err.Error(), "free disk space") {
			t.Errorf("%s, %v: %v; want no advice to free disk space", what, c.errno, err)
		}
	}
	for _, c := range causes {
		// A commit's log write.
		var on atomic.Bool
		fs := failOn(c.errno, func(op errorfs.Op) bool {
			return on.Load() && op.Kind.ReadOrWrite() == errorfs.OpIsWrite && strings.HasSuffix(op.Path, ".log")
		})
		s := open(t, fs, runtime.StoreOptions{})
		on.Store(true)
		b := s.NewBatch()
		b.Put(sumVar, []byte("x"), nil, u64(1))
		err := s.Commit(b, runtime.Progress{BatchID: 2})
		if err == nil {
			err = s.Err()
		}
		check("a commit", c, err)
		s.Close()

		// The lock file, and the commit file, at the next open.
		_, err = runtime.OpenStore("ckpt", runtime.StoreOptions{FS: failOn(c.errno, func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpLock
		})})
		check("the lock file", c, err)
		_, err = runtime.OpenStore("ckpt", runtime.StoreOptions{FS: failOn(c.errno, func(op errorfs.Op) bool {
			return op.Kind == errorfs.OpOpen && strings.HasSuffix(op.Path, "/STREAMGEN-COMMIT")
		})})
		check("the commit file", c, err)
	}
}

// TestStuckOpensAreBounded: an open whose flush of the replayed log
// fails is left behind, holding that log in memory (the lock released);
// a process that starts the query again and again on a disk that stays
// at fault leaves a few, then refuses the next open at once, saying why.
// Once the fault is fixed, a new process opens the checkpoint whole.
func TestStuckOpensAreBounded(t *testing.T) {
	mem := vfs.NewCrashableMem()
	s := open(t, mem, runtime.StoreOptions{})
	commitBatches(t, s, 0, 5) // in the log only
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	faulty := errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && strings.Contains(op.Path, "MANIFEST-") {
			return errorfs.ErrInjected
		}
		return nil
	}))
	for i := range 5 {
		_, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: faulty})
		if !errors.Is(err, runtime.ErrStoreFailed) {
			t.Fatalf("open %d: %v, want the store failed", i, err)
		}
		refused := strings.Contains(err.Error(), "3 earlier opens of this checkpoint in this process failed")
		if want := i >= 3; refused != want || !refused && !strings.Contains(err.Error(), errorfs.ErrInjected.Error()) {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	s = open(t, mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 2))}), runtime.StoreOptions{})
	defer s.Close()
	if batch, sum, _, err := contents(s); err != nil || batch != 4 || sum != sumUpTo(4) {
		t.Fatalf("the next process holds batch %d, sum %d (%v)", batch, sum, err)
	}
}

// TestLogFaultAsPebbleMovesToANewLog: Pebble moves commits to a new log
// file every memtable's worth of writes, and for every batch of over half
// a memtable. A fault there (the old file's last sync, write or close,
// the new file's creation, a reused file's stat, or the directory's sync
// that makes the new file durable) made
// Pebble panic with its mutex unlocked: a fatal error that ended the
// process. It fails the store instead: the commit returns an error
// wrapping ErrStoreFailed, every later one too, Close returns at once
// (ErrStoreNotClosed: Pebble's commit pipeline stays locked), the process
// goes on, a start in it is refused with ErrStoreLeftOpen (not taken for
// another process's lock), and the checkpoint, read after the process's
// end, holds every batch whose commit returned.
func TestLogFaultAsPebbleMovesToANewLog(t *testing.T) {
	isLog := func(op errorfs.Op) bool { return strings.HasSuffix(op.Path, ".log") }
	moving := func() bool { return strings.Contains(string(debug.Stack()), ".(*DB).rotateWAL(") }
	type faults = func(errorfs.Op) bool
	for _, c := range []struct {
		name  string
		fault faults
		// closes and stats, when set, fail a log file's close and stat.
		closes, stats func() bool
	}{
		{name: "the old log's last sync", fault: func(op errorfs.Op) bool {
			return isLog(op) && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo) && moving()
		}},
		{name: "the old log's close", closes: moving},
		{name: "a reused log's stat", stats: moving},
		// (The log writer's goroutine writes the old log's end, and fails.)
		{name: "the old log's last write", fault: func(op errorfs.Op) bool { return isLog(op) && op.Kind == errorfs.OpFileWrite }},
		{name: "the new log's creation", fault: func(op errorfs.Op) bool {
			return isLog(op) && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite) && moving()
		}},
		{name: "the directory's sync for the new log", fault: func(op errorfs.Op) bool { return !isLog(op) && op.Kind == errorfs.OpFileSync && moving() }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			var armed atomic.Bool
			var fs vfs.FS = mem
			if c.fault != nil {
				fs = errorfs.Wrap(mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
					if armed.Load() && c.fault(op) {
						return errorfs.ErrInjected
					}
					return nil
				}))
			} else {
				on := func(f func() bool) func() bool {
					if f == nil {
						return nil
					}
					return func() bool { return armed.Load() && f() }
				}
				fs = failingLogFiles{mem, on(c.closes), on(c.stats)}
			}
			opts := runtime.StoreOptions{CloseTimeout: time.Hour, MemTableSize: 1 << 20}
			s := open(t, fs, opts)
			commitBatches(t, s, 0, 3)
			armed.Store(true)
			// Batches of over half a memtable: each moves to a new log file.
			big := bytes.Repeat([]byte("x"), 600<<10)
			returned := int64(2)
			var err error
			for id := int64(3); id < 40; id++ {
				b := s.NewBatch()
				v, ok, gerr := b.Get(sumVar, []byte("k"), nil)
				if gerr != nil {
					err = gerr
					b.Close()
					break
				}
				var sum int64
				if ok {
					sum = int64(binary.BigEndian.Uint64(v))
				}
				b.Put(sumVar, []byte("k"), nil, u64(sum+id+1))
				b.Put(sumVar, []byte(fmt.Sprint("batch", id)), nil, u64(id))
				b.Put(runtime.Var{Variable: 4}, []byte("big"), nil, big)
				if err = s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
					break
				}
				returned = id
			}
			if !errors.Is(err, runtime.ErrStoreFailed) {
				t.Fatalf("commits with %s failing: %v, want ErrStoreFailed", c.name, err)
			}
			if err := s.Commit(s.NewBatch(), runtime.Progress{BatchID: returned + 1}); !errors.Is(err, runtime.ErrStoreFailed) {
				t.Fatalf("a commit after the failure: %v, want ErrStoreFailed", err)
			}
			if err := s.Close(); !errors.Is(err, runtime.ErrStoreNotClosed) || !errors.Is(err, runtime.ErrStoreLeftOpen) {
				t.Fatalf("close: %v, want ErrStoreNotClosed (Pebble's commit pipeline is left locked)", err)
			}
			// A start in this process finds the checkpoint held, and says
			// by what.
			if _, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs}); !errors.Is(err, runtime.ErrStoreLeftOpen) ||
				errors.Is(err, runtime.ErrCheckpointInUse) || !strings.Contains(err.Error(), "restart the process") {
				t.Fatalf("a start in the same process: %v", err)
			}
			// The process ends: what its writes left (synced or not) is
			// what the next start reads.
			crashed := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(1, 1))})
			got := checkConsistent(t, crashed, runtime.StoreOptions{MemTableSize: 1 << 20})
			if got < returned {
				t.Fatalf("the checkpoint holds batch %d, and the commit of batch %d returned", got, returned)
			}
		})
	}
}

// failingLogFiles is an FS whose log files' Close, and Stat, fail when
// closes, and stats, report so (errorfs fails neither).
type failingLogFiles struct {
	vfs.FS
	closes, stats func() bool
}

func (f failingLogFiles) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	return f.wrap(name, file, err)
}

func (f failingLogFiles) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	return f.wrap(newname, file, err)
}

func (f failingLogFiles) wrap(name string, file vfs.File, err error) (vfs.File, error) {
	if err != nil || !strings.HasSuffix(name, ".log") {
		return file, err
	}
	return failingLogFile{file, f}, nil
}

type failingLogFile struct {
	vfs.File
	fs failingLogFiles
}

func (c failingLogFile) Close() error {
	err := c.File.Close()
	if err == nil && c.fs.closes != nil && c.fs.closes() {
		err = errors.New("injected close error")
	}
	return err
}

func (c failingLogFile) Stat() (vfs.FileInfo, error) {
	if c.fs.stats != nil && c.fs.stats() {
		return nil, errors.New("injected stat error")
	}
	return c.File.Stat()
}
