package typed_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// fullDisk injects ENOSPC into the operations it counts (writes, or only
// syncs) from the one with index `after` on, while on.
type fullDisk struct {
	syncsOnly bool
	after     int64
	on        atomic.Bool
	ops       atomic.Int64
}

func (d *fullDisk) MaybeError(op errorfs.Op) error {
	if !d.on.Load() || op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	if d.syncsOnly && op.Kind != errorfs.OpFileSync && op.Kind != errorfs.OpFileSyncData && op.Kind != errorfs.OpFileSyncTo {
		return nil
	}
	if d.ops.Add(1) > d.after {
		return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

func (d *fullDisk) String() string { return fmt.Sprintf("ENOSPC after %d", d.after) }

// await waits for q to end, with a deadline as a safety net: a query that
// hangs fails the test instead of the test binary.
func await(t *testing.T, q *typed.Query) error {
	t.Helper()
	select {
	case <-q.Done():
		return q.Err()
	case <-time.After(20 * time.Second):
		t.Fatalf("the query did not end (status %+v)", q.Status())
		return nil
	}
}

// TestStorageFaultsEndTheQuery fills the disk of a checkpoint at every
// point of a query's run: errorfs fails with ENOSPC every write (or every
// sync) from the n-th on, for every n up to the run's last. Each run ends
// (no panic, no hang) either cleanly or with an error that wraps
// ErrStoreFailed and names the checkpoint directory and the cause; and
// the query started again on the same checkpoint, with the disk freed,
// ends with the counts of the whole input: nothing committed was lost,
// nothing counted twice.
func TestStorageFaultsEndTheQuery(t *testing.T) {
	in := clicks(60, 5)
	want := expectedCounts(in)
	for _, syncsOnly := range []bool{false, true} {
		for _, interval := range []time.Duration{0, time.Millisecond} {
			t.Run(fmt.Sprintf("syncsOnly=%v/syncInterval=%v", syncsOnly, interval), func(t *testing.T) {
				run := func(fs vfs.FS, sink *batchSink[fixtures.UserCount]) error {
					m := typed.NewMemoryStream[fixtures.Click]("clicks", 6)
					m.Add(in...)
					q, err := countPipeline(m, sink).Start(context.Background(),
						runtime.Checkpoint("ckpt"), runtime.FileSystem(fs), runtime.SyncInterval(interval),
						runtime.WithTrigger(runtime.AvailableNow()), runtime.CloseTimeout(5*time.Second),
						runtime.StateCacheSize(1<<20)) // the default's index takes a while to allocate, at each of the many starts
					if err != nil {
						return err
					}
					return await(t, q)
				}
				// A clean run counts the operations.
				disk := &fullDisk{syncsOnly: syncsOnly, after: 1 << 62}
				disk.on.Store(true)
				if err := run(errorfs.Wrap(vfs.NewMem(), disk), newSink[fixtures.UserCount]()); err != nil {
					t.Fatal(err)
				}
				total := disk.ops.Load()
				failedRunning := 0
				for n := range total + 1 {
					mem := vfs.NewMem()
					disk := &fullDisk{syncsOnly: syncsOnly, after: n}
					disk.on.Store(true)
					sink := newSink[fixtures.UserCount]()
					err := run(errorfs.Wrap(mem, disk), sink)
					if err != nil {
						if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), "in ckpt") || !strings.Contains(err.Error(), "no space left on device") {
							t.Fatalf("disk full after %d of %d operations: %v", n, total, err)
						}
						if len(sink.snapshot()) > 0 {
							failedRunning++
						}
					}
					if err := run(mem, sink); err != nil {
						t.Fatalf("disk full after %d of %d operations, then freed: %v", n, total, err)
					}
					sameCounts(t, latest(sink.rows()), want)
				}
				if failedRunning == 0 {
					t.Fatal("no run failed after its first batch: the test does not reach the commits")
				}
			})
		}
	}
}

// bigState keeps a value of 1 MiB per user: a batch of five users is
// larger than half of a 4 MiB memtable (the query's MemTableSize), which
// Pebble flushes to a table at once.
func bigState(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.StateV3]) (fixtures.UserCount, error) {
	n := 0
	for range rows {
		n++
	}
	state.Update(fixtures.StateV3{Count: strings.Repeat(fmt.Sprint(n%10), 1<<20)})
	return fixtures.UserCount{User: user, Count: int64(n)}, nil
}

// TestFailedFlushEndsAnIdleQuery: the one batch of the input is flushed
// to a table after its commit, and the flush fails on a full disk
// (ENOSPC on every table write); Pebble retries it in a loop, and the
// query, idle once its input is done, does not call the store again. The
// failure, reported by Pebble's BackgroundError, ends the query anyway,
// with an error naming the directory and the cause, and closing the store
// ends Pebble's retries.
func TestFailedFlushEndsAnIdleQuery(t *testing.T) {
	synctest.Test(t, failedFlushEndsAnIdleQuery)
}

// failedFlushEndsAnIdleQuery runs in a bubble of virtual time, so that a
// minute of Pebble's flush retries passes at once.
func failedFlushEndsAnIdleQuery(t *testing.T) {
	var injected atomic.Int64
	fs := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			injected.Add(1)
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(clicks(50, 6)...)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, bigState), newSink[fixtures.UserCount]()).OutputMode(typed.Update)
	q, err := w.Start(context.Background(), runtime.Checkpoint("ckpt"), runtime.FileSystem(fs), runtime.PollInterval(time.Hour), runtime.MemTableSize(4<<20))
	if err != nil {
		t.Fatal(err)
	}
	err = await(t, q)
	if p, ok := q.LastProgress(); !ok || p.BatchID != 0 {
		t.Fatalf("the batch did not commit (the query ended with %v): %+v", err, p)
	}
	if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), "in ckpt") || !strings.Contains(err.Error(), ".sst: no space left on device") {
		t.Fatalf("error: %v", err)
	}
	n := injected.Load()
	time.Sleep(time.Minute) // virtual: Pebble retries a flush every second
	synctest.Wait()
	if after := injected.Load(); after != n {
		t.Fatalf("Pebble still flushes after the query ended: %d failed table writes, then %d", n, after)
	}
}

// hangingDisk blocks every sync of Pebble's log while on, until released:
// a disk that stops answering.
type hangingDisk struct {
	on      atomic.Bool
	blocked chan struct{} // closed when a sync blocks
	once    sync.Once
	release chan struct{}
}

func (d *hangingDisk) MaybeError(op errorfs.Op) error {
	isSync := op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo
	if d.on.Load() && isSync && strings.HasSuffix(op.Path, ".log") {
		d.once.Do(func() { close(d.blocked) })
		<-d.release
	}
	return nil
}

func (d *hangingDisk) String() string { return "hanging log syncs" }

// TestStopReturnsWhileTheDiskHangs: a commit waits for a log sync that
// never returns; Stop returns after the close timeout anyway, with an
// error that says the store did not close and names its directory, and
// the query counts as ended.
func TestStopReturnsWhileTheDiskHangs(t *testing.T) {
	before := goruntime.NumGoroutine()
	disk := &hangingDisk{blocked: make(chan struct{}), release: make(chan struct{})}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 10)
	ev := &events{}
	q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(),
		runtime.Checkpoint("ckpt"), runtime.FileSystem(errorfs.Wrap(vfs.NewMem(), disk)),
		runtime.PollInterval(time.Millisecond), runtime.CloseTimeout(100*time.Millisecond), runtime.Listener(ev))
	if err != nil {
		t.Fatal(err)
	}
	disk.on.Store(true)
	m.Add(clicks(10, 7)...)
	select {
	case <-disk.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("no commit reached the log sync")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- q.Stop() }()
	select {
	case err = <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not return")
	}
	if !errors.Is(err, runtime.ErrStoreNotClosed) || !strings.Contains(err.Error(), "in ckpt") {
		t.Fatalf("Stop: %v", err)
	}
	select {
	case <-q.Done():
	default:
		t.Fatal("Done is not closed after Stop returned")
	}
	if q.Err() != err || q.Status().Message != "Stopped" {
		t.Fatalf("Err %v, status %+v", q.Err(), q.Status())
	}
	ev.mu.Lock()
	if len(ev.terminated) != 1 || ev.terminated[0] != err {
		t.Fatalf("OnQueryTerminated: %v", ev.terminated)
	}
	ev.mu.Unlock()
	// Once the disk answers, the abandoned goroutine ends and closes the
	// store, without a second OnQueryTerminated.
	close(disk.release)
	waitFor(t, "the goroutines to end", func() bool { return goruntime.NumGoroutine() <= before })
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if len(ev.terminated) != 1 {
		t.Fatalf("OnQueryTerminated: %v", ev.terminated)
	}
}

// failingCommit holds the first write of Pebble's log once armed (the
// commit of the batch its sink armed it in) until released, then fails it
// and every write after it with ENOSPC: a disk that fills while a commit
// is in flight.
type failingCommit struct {
	armed, failing atomic.Bool
	release        chan struct{}
	timedOut       atomic.Bool
}

func (d *failingCommit) MaybeError(op errorfs.Op) error {
	if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	if !d.failing.Load() {
		if !d.armed.Load() || !strings.HasSuffix(op.Path, ".log") {
			return nil
		}
		select {
		case <-d.release:
		case <-time.After(10 * time.Second): // a safety net: the test fails
			d.timedOut.Store(true)
		}
		d.failing.Store(true)
	}
	return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
}

func (d *failingCommit) String() string { return "ENOSPC from a held commit on" }

// TestFailedCommitInFlightEndsTheQuery: batch 1's commit runs while batch
// 2 is read and processed, and fails (its log write, on a full disk)
// after batch 2's function has run. The query ends with the store's
// failure, naming the cause; batch 2 reached no sink. Started again with
// the disk freed, the query replays batch 1 on exactly its first input and
// ends with the counts of the whole input.
func TestFailedCommitInFlightEndsTheQuery(t *testing.T) {
	in := clicks(12, 8)
	in = append(in, click("zed", 100)) // batch 2 (6 rows a batch)
	want := expectedCounts(in)
	mem := vfs.NewMem()
	disk := &failingCommit{release: make(chan struct{})}
	var released sync.Once
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		if user == "zed" && disk.armed.Load() {
			released.Do(func() { close(disk.release) })
		}
		return countClicks(user, rows, state)
	}
	run := func(fs vfs.FS, sink *batchSink[fixtures.UserCount]) error {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 6)
		m.Add(in...)
		byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		w := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), sink).OutputMode(typed.Update)
		q, err := w.Start(context.Background(), runtime.Checkpoint("ckpt"), runtime.FileSystem(fs),
			runtime.WithTrigger(runtime.AvailableNow()), runtime.CloseTimeout(5*time.Second))
		if err != nil {
			return err
		}
		return await(t, q)
	}
	sink := newSink[fixtures.UserCount]()
	sink.fail = func(id int64) error {
		if id == 1 {
			disk.armed.Store(true) // the next log write is batch 1's commit
		}
		return nil
	}
	err := run(errorfs.Wrap(mem, disk), sink)
	if disk.timedOut.Load() {
		t.Fatal("batch 2's function did not run while batch 1's commit was in flight")
	}
	if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), "in ckpt") || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("the query ended with %v, want the store's failure", err)
	}
	first := sink.snapshot()
	if _, ok := first[2]; ok || len(first[1]) == 0 {
		t.Fatalf("the sink saw batches %v, want 0 and 1 only", slices.Sorted(maps.Keys(first)))
	}

	sink.fail = nil
	replay := newSink[fixtures.UserCount]()
	if err := run(mem, replay); err != nil {
		t.Fatalf("the start after the failure: %v", err)
	}
	again := replay.snapshot()
	if _, ok := again[0]; ok {
		t.Fatal("batch 0, committed, ran again")
	}
	if !slices.Equal(again[1], first[1]) {
		t.Fatalf("batch 1 replayed as %v, its first attempt wrote %v", again[1], first[1])
	}
	got := latest(append(slices.Clone(first[0]), replay.rows()...))
	sameCounts(t, got, want)
}

// cappedDisk is a disk of a set capacity over an in-memory file system:
// its free space is the capacity less the size of the files on it, which
// it reports to GetDiskUsage, and it fails every write with ENOSPC once
// they fill it. peak is the most it has held.
type cappedDisk struct {
	vfs.FS
	mem      *vfs.MemFS
	capacity atomic.Int64
	peak     atomic.Int64
}

func newCappedDisk(capacity int64) *cappedDisk {
	d := &cappedDisk{mem: vfs.NewMem()}
	d.capacity.Store(capacity)
	d.FS = errorfs.Wrap(d.mem, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
			return nil
		}
		used := d.used()
		for p := d.peak.Load(); used > p && !d.peak.CompareAndSwap(p, used); p = d.peak.Load() {
		}
		if used >= d.capacity.Load() {
			return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
		}
		return nil
	}))
	return d
}

// used sums the sizes of the files under the root.
func (d *cappedDisk) used() int64 {
	var walk func(dir string) int64
	walk = func(dir string) int64 {
		names, _ := d.mem.List(dir)
		var n int64
		for _, name := range names {
			p := d.mem.PathJoin(dir, name)
			if fi, err := d.mem.Stat(p); err == nil {
				if fi.IsDir() {
					n += walk(p)
				} else {
					n += fi.Size()
				}
			}
		}
		return n
	}
	return walk("/")
}

func (d *cappedDisk) GetDiskUsage(string) (vfs.DiskUsage, error) {
	capacity, used := uint64(d.capacity.Load()), uint64(d.used())
	return vfs.DiskUsage{TotalBytes: capacity, UsedBytes: used, AvailBytes: capacity - min(used, capacity)}, nil
}

// bigCount counts a user's clicks in a state of over 1 MiB: a batch that
// updates three users is a batch Pebble takes as a memtable of its own
// (over half of the query's 4 MiB MemTableSize),
// moving to a new log file for it, which it cannot do on a full disk.
func bigCount(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.StateV3]) (fixtures.UserCount, error) {
	var n int64
	if s, ok := state.Get(); ok {
		if _, err := fmt.Sscan(s.Count, &n); err != nil {
			return fixtures.UserCount{}, err
		}
	}
	for range rows {
		n++
	}
	state.Update(fixtures.StateV3{Count: fmt.Sprint(n, " ", strings.Repeat("x", 1<<20))})
	return fixtures.UserCount{User: user, Count: n}, nil
}

// runBigCounts runs bigCount over in, six clicks a batch, on the
// checkpoint "ckpt" of fs with memtables of 4 MiB (a batch of three users
// is over half of one), to the input's end; more are further options.
func runBigCounts(t *testing.T, in []fixtures.Click, fs vfs.FS, sink *batchSink[fixtures.UserCount], more ...runtime.Option) error {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 6)
	m.Add(in...)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, bigCount), sink).OutputMode(typed.Update)
	opts := append([]runtime.Option{runtime.Checkpoint("ckpt"), runtime.FileSystem(fs), runtime.WithTrigger(runtime.AvailableNow()),
		runtime.StateCacheSize(1 << 20), runtime.MemTableSize(4 << 20)}, more...)
	q, err := w.Start(context.Background(), opts...)
	if err != nil {
		return err
	}
	return await(t, q)
}

// TestFullDiskStopsTheQueryCleanly runs a query of large batches on disks
// of sizes from too small to start on to large enough to finish. Pebble
// alone ends the process with a fatal error when the disk fills as it
// moves to a new log file, which it does for every one of these batches;
// with the disk reserve each run ends either cleanly or with an error
// that wraps ErrDiskFull and ErrStoreFailed, says how much was free and
// needed, and comes before the disk is full (no write failed); the query
// started again on the same checkpoint with room to spare ends with the
// counts of a plain loop over the input. (On disks this small the reserve
// is a twentieth of the disk, under the DiskReserve asked for; the
// in-memory file system does not count the log file's preallocation.)
func TestFullDiskStopsTheQueryCleanly(t *testing.T) {
	in := clicks(60, 11)
	want := map[string]int64{}
	for _, c := range in {
		want[c.User]++
	}
	run := func(fs vfs.FS, sink *batchSink[fixtures.UserCount]) error {
		return runBigCounts(t, in, fs, sink, runtime.CloseTimeout(5*time.Second), runtime.DiskReserve(8<<20))
	}
	// A disk that never fills tells how much the query holds on it.
	roomy := newCappedDisk(1 << 40)
	if err := run(roomy, newSink[fixtures.UserCount]()); err != nil {
		t.Fatal(err)
	}
	peak := roomy.peak.Load()
	stopped, finished := 0, 0
	step := int64(3 << 20)
	if testing.Short() {
		step = 9 << 20 // large batches are slow under the race detector
	}
	for capacity := int64(4 << 20); capacity < peak+40<<20; capacity += step {
		disk := newCappedDisk(capacity)
		sink := newSink[fixtures.UserCount]()
		err := run(disk, sink)
		switch {
		case err == nil:
			finished++
		case !errors.Is(err, runtime.ErrDiskFull) || !errors.Is(err, runtime.ErrStoreFailed) ||
			!strings.Contains(err.Error(), "in ckpt") || !strings.Contains(err.Error(), "kept in reserve"):
			t.Fatalf("disk of %d MiB: %v", capacity>>20, err)
		default:
			stopped++
		}
		if disk.peak.Load() >= capacity {
			t.Fatalf("disk of %d MiB: the query filled it (%d bytes): %v", capacity>>20, disk.peak.Load(), err)
		}
		disk.capacity.Store(1 << 40)
		if err := run(disk, sink); err != nil {
			t.Fatalf("disk of %d MiB, then more room: %v", capacity>>20, err)
		}
		got := map[string]int64{}
		for u, c := range latest(sink.rows()) {
			got[u] = c.Count
		}
		if !maps.Equal(got, want) {
			t.Fatalf("disk of %d MiB, then more room: counts %v, want %v", capacity>>20, got, want)
		}
	}
	t.Logf("peak %d MiB: %d runs stopped, %d finished", peak>>20, stopped, finished)
	if stopped == 0 || finished == 0 {
		t.Fatalf("%d runs stopped, %d finished: the sizes miss a case", stopped, finished)
	}
}

// TestMachineCrashLeavesNoBatchTwiceInFiles: with SyncInterval, a machine
// crash (a clone of the checkpoint's synced data only) loses the commits
// of the batches after the last sync, while their files stay in the
// files sink's directory. The next start runs those batches again with
// another split of the input (the batch after the last sync as planned,
// then no cap on the rows of a batch): it removes their files first, so
// that each click is in the output once. (Batch 2 was written again with
// clicks 2 and 3, and batch 3's file, click 3, stayed.) With no sync
// before the crash, nothing is committed: the sink removes the files
// because its marker names the checkpoint's query. A reader of the
// directory saw, at the crash, only the batches durable then (the files
// of the others are hidden until they are), so nothing it read is run
// again.
func TestMachineCrashLeavesNoBatchTwiceInFiles(t *testing.T) {
	for _, lastSync := range []int64{0, -1} {
		synctest.Test(t, func(t *testing.T) {
			in := clicks(4, 7)
			fs := vfs.NewCrashableMem()
			dir := t.TempDir()
			var (
				crashed vfs.FS
				seen    []fixtures.Click
			)
			at := &crashAt{fs: fs, sync: lastSync, crash: 3, crashed: &crashed, then: func() { seen = readPartFiles(t, dir) }}
			sink := typed.FilesSink[fixtures.Click](dir)
			runSyncedHourly(t, fs, in, 1, sink, runtime.Listener(at))
			if crashed == nil {
				t.Fatal("the first run never reached batch 3")
			}
			if want := in[:lastSync+1]; !slices.Equal(seen, want) {
				t.Fatalf("synced after batch %d: at the crash, a reader of the files saw %v, want the durable batches' %v", lastSync, seen, want)
			}
			runSyncedHourly(t, crashed, in, 0, sink)
			rows := readPartFiles(t, dir)
			if !slices.Equal(rows, in) {
				t.Fatalf("synced after batch %d: the files hold %v, want each click once: %v", lastSync, rows, in)
			}
		})
	}
}

// TestFilesOfAnotherQueryStay: a query with a new checkpoint that writes
// to a directory where another query's files are, and whose first batch
// fails, does not remove those files at its next start: they are not its
// own. (Its batches replace the files of the same batch ids, as any
// query's do.)
func TestFilesOfAnotherQueryStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		sink := typed.FilesSink[fixtures.Click](dir)
		earlier := clicks(4, 7)
		runSyncedHourly(t, vfs.NewMem(), earlier, 1, sink)
		// The new query's first batch fails in the sink, then it starts
		// again on the same checkpoint and runs.
		fs := vfs.NewMem()
		failing := &failFirst{Sink: sink}
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		m.Add(clicks(1, 9)...)
		q, err := typed.WriteTo(typed.FromMemory(m), typed.Sink[fixtures.Click](failing)).Start(context.Background(),
			runtime.Checkpoint("ckpt"), runtime.FileSystem(fs), runtime.SyncInterval(time.Hour), runtime.WithTrigger(runtime.AvailableNow()))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err == nil {
			t.Fatal("the first batch did not fail")
		}
		runSyncedHourly(t, fs, clicks(1, 9), 0, sink)
		want := append(clicks(1, 9), earlier[1:]...)
		if rows := readPartFiles(t, dir); !slices.Equal(rows, want) {
			t.Fatalf("the files hold %v, want %v", rows, want)
		}
	})
}

// failFirst is a sink whose first write fails.
type failFirst struct {
	typed.Sink[fixtures.Click]
	failed bool
}

func (f *failFirst) Write(ctx context.Context, batchID int64, rows []fixtures.Click) error {
	if !f.failed {
		f.failed = true
		return errors.New("the sink is down")
	}
	return f.Sink.Write(ctx, batchID, rows)
}

// TestMachineCrashReplaysTheBatchsInput: with SyncInterval and a sink
// that skips a batch id it has seen (a ForeachWriter, as Spark's contract
// allows), a machine crash loses the commits since the last sync, but
// not the plan of a batch whose sink ran: the batch runs again on the
// input its first attempt read, so the writer skips exactly the rows it
// has, and every click reaches it once.
func TestMachineCrashReplaysTheBatchsInput(t *testing.T) {
	// A committer (a Kafka transaction's) commits through the store here:
	// it aborts nothing of the writer's, so it changes nothing.
	committer := runtime.WithCommitter(func(s *runtime.Store) runtime.Committer { return s })
	for _, opts := range [][]runtime.Option{nil, {committer}} {
		synctest.Test(t, func(t *testing.T) {
			in := clicks(6, 7)
			fs := vfs.NewCrashableMem()
			w := &skippingWriter{handled: map[int64]bool{}}
			var crashed vfs.FS
			at := &crashAt{fs: fs, sync: 0, crash: 3, crashed: &crashed, then: func() { w.dead = true }}
			sink := typed.ForeachSink[fixtures.Click](w)
			runSyncedHourly(t, fs, in, 1, sink, append(opts, runtime.Listener(at))...)
			if crashed == nil {
				t.Fatal("the first run never reached batch 3")
			}
			w.dead = false // the process after the crash
			runSyncedHourly(t, crashed, in, 0, sink, opts...)
			if !slices.Equal(w.rows, in) {
				t.Fatalf("with %d options: the writer got %v, want each click once: %v", len(opts), w.rows, in)
			}
		})
	}
}

// runSyncedHourly writes in to sink, perBatch clicks a batch (0: all),
// with an AvailableNow trigger and the checkpoint "ckpt" in fs synced
// every hour, and waits for the query.
func runSyncedHourly(t *testing.T, fs vfs.FS, in []fixtures.Click, perBatch int, sink typed.Sink[fixtures.Click], opts ...runtime.Option) {
	t.Helper()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
	m.Add(in...)
	q, err := typed.WriteTo(typed.FromMemory(m), sink).Start(context.Background(),
		append([]runtime.Option{runtime.Checkpoint("ckpt"), runtime.FileSystem(fs), runtime.SyncInterval(time.Hour),
			runtime.WithTrigger(runtime.AvailableNow())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
}

// skippingWriter is a ForeachWriter that skips an epoch it has handled;
// dead, it takes nothing (its process has crashed).
type skippingWriter struct {
	handled map[int64]bool
	rows    []fixtures.Click
	dead    bool
}

func (w *skippingWriter) Open(_ int, epoch int64) (bool, error) {
	if w.dead || w.handled[epoch] {
		return false, nil
	}
	w.handled[epoch] = true
	return true, nil
}

func (w *skippingWriter) Process(row fixtures.Click) error {
	w.rows = append(w.rows, row)
	return nil
}

func (w *skippingWriter) Close(error) {}

// crashAt waits, at batch sync's report, for the checkpoint's log to be
// synced (SyncInterval passes: it runs in a synctest bubble, whose clock
// is virtual), and at batch crash's takes a clone of what a machine crash
// leaves of it.
type crashAt struct {
	fs          *vfs.MemFS
	sync, crash int64
	crashed     *vfs.FS
	// then, when set, runs after the clone.
	then func()
}

func (c *crashAt) OnQueryProgress(p runtime.QueryProgress) {
	switch p.BatchID {
	case c.sync:
		time.Sleep(time.Hour + time.Second)
	case c.crash:
		*c.crashed = c.fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		if c.then != nil {
			c.then()
		}
	}
}

// readPartFiles reads the rows of a files sink's directory, in batch
// order.
func readPartFiles(t *testing.T, dir string) []fixtures.Click {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rows []fixtures.Click
	for _, e := range entries { // in name order: batch order
		if strings.HasPrefix(e.Name(), ".") {
			continue // hidden, as a reader of the directory skips them
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(data)) {
			var c fixtures.Click
			if err := c.UnmarshalJSON([]byte(line)); err != nil {
				t.Fatalf("%s: %v", e.Name(), err)
			}
			rows = append(rows, c)
		}
	}
	return rows
}

// TestStartDoesNotWaitForTheSyncInterval: with a SyncInterval of an hour,
// a start writes the checkpoint's origin and description without a sync
// of their own, which would wait for up to the interval after the sync
// before it: on a new checkpoint and on one started again, Start returns
// at once (virtual time), and the run ends at once. What it wrote is made
// durable by the syncs of its batches: after a machine crash that loses
// every write not synced, the next start resumes from the last batch and
// ends with each click counted once.
func TestStartDoesNotWaitForTheSyncInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fs := vfs.NewCrashableMem()
		in := clicks(30, 12)
		sink := newSink[fixtures.UserCount]()
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		for i, part := range [][]fixtures.Click{in[:10], in[10:20]} {
			m.Add(part...)
			start := time.Now()
			q, err := countPipeline(m, sink).Start(context.Background(), runtime.Checkpoint("ckpt"), runtime.FileSystem(fs),
				runtime.SyncInterval(time.Hour), runtime.WithTrigger(runtime.AvailableNow()))
			if err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d >= time.Minute {
				t.Errorf("start %d: Start took %v of virtual time", i, d)
			}
			if err := q.AwaitTermination(); err != nil {
				t.Fatal(err)
			}
			if d := time.Since(start); d >= time.Minute {
				t.Errorf("start %d: the run took %v of virtual time", i, d)
			}
		}
		crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
		m.Add(in[20:]...)
		q, err := countPipeline(m, sink).Start(context.Background(), runtime.Checkpoint("ckpt"), runtime.FileSystem(crashed),
			runtime.SyncInterval(time.Hour), runtime.WithTrigger(runtime.AvailableNow()))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		if p, ok := q.LastProgress(); !ok || p.BatchID != 2 {
			t.Fatalf("after the crash, the run's batch: %+v, want batch 2", p)
		}
		sameCounts(t, latest(sink.rows()), expectedCounts(in))
	})
}

// TestSyncedPlansWaitForNoInterval: with SyncInterval and a sink that
// needs each batch's plan synced before it runs (a ForeachWriter that
// skips a batch id it has seen), the plans' syncs do not wait for the
// interval after the sync before them: six batches with an interval of an
// hour take no hour of the bubble's clock, where each waited for one.
func TestSyncedPlansWaitForNoInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := clicks(6, 7)
		w := &skippingWriter{handled: map[int64]bool{}}
		start := time.Now()
		runSyncedHourly(t, vfs.NewMem(), in, 1, typed.ForeachSink[fixtures.Click](w))
		if took := time.Since(start); took >= time.Hour {
			t.Fatalf("six batches took %v of the bubble's clock: the plans' syncs waited for the interval", took)
		}
		if !slices.Equal(w.rows, in) {
			t.Fatalf("the writer got %v, want %v", w.rows, in)
		}
	})
}

// rotationFault fails, with an I/O error, one operation of the store's
// log as Pebble moves a commit to a new log file: the one of kind op, at
// the n-th move (counted from 1) once on.
type rotationFault struct {
	op     string
	n      int64
	on     atomic.Bool
	moves  atomic.Int64
	failed atomic.Bool
}

func (d *rotationFault) MaybeError(op errorfs.Op) error {
	if !d.on.Load() || d.failed.Load() || !strings.Contains(string(debug.Stack()), ".(*DB).rotateWAL(") {
		return nil
	}
	isLog := strings.HasSuffix(op.Path, ".log")
	var match bool
	switch d.op {
	case "sync":
		match = isLog && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData || op.Kind == errorfs.OpFileSyncTo)
	case "create":
		// (The first operation of a move whose old log's sync passed.)
		match = isLog && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite)
		if match && d.moves.Add(1) != d.n {
			return nil
		}
	case "directory sync":
		match = !isLog && op.Kind == errorfs.OpFileSync
	}
	if !match {
		return nil
	}
	if d.op != "create" && d.moves.Add(1) != d.n {
		return nil
	}
	d.failed.Store(true)
	return &os.PathError{Op: d.op, Path: op.Path, Err: syscall.EIO}
}

func (d *rotationFault) String() string { return "an I/O error as the log moves" }

// TestLogFaultWhileMovingEndsTheQuery: a query whose every batch is over
// half a memtable (Pebble moves each to a new log file) meets an I/O
// error in that move, the first or the second: the old
// log's last sync, the new log's creation, or its directory's sync.
// Pebble panicked there, ending the process. The query ends with an
// error that wraps ErrStoreFailed and names the cause, Stop's wait
// included (no hang); and the next process (a clone of what this one
// wrote) resumes and ends with the counts of a plain loop over the input.
func TestLogFaultWhileMovingEndsTheQuery(t *testing.T) {
	in := clicks(60, 11)
	want := map[string]int64{}
	for _, c := range in {
		want[c.User]++
	}
	run := func(fs vfs.FS, sink *batchSink[fixtures.UserCount]) error {
		return runBigCounts(t, in, fs, sink, runtime.CloseTimeout(time.Hour))
	}
	moves := []int64{1, 2}
	if testing.Short() {
		moves = moves[:1] // large batches are slow under the race detector
	}
	for _, op := range []string{"sync", "create", "directory sync"} {
		for _, n := range moves {
			mem := vfs.NewCrashableMem()
			fault := &rotationFault{op: op, n: n}
			fault.on.Store(true)
			sink := newSink[fixtures.UserCount]()
			err := run(errorfs.Wrap(mem, fault), sink)
			if !fault.failed.Load() {
				t.Fatalf("%s at move %d: no fault injected (the query ended with %v)", op, n, err)
			}
			if !errors.Is(err, runtime.ErrStoreFailed) || !strings.Contains(err.Error(), "in ckpt") || !strings.Contains(err.Error(), "input/output error") {
				t.Fatalf("%s at move %d: %v", op, n, err)
			}
			next := mem.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 100, RNG: rand.New(rand.NewPCG(uint64(n), 1))})
			if err := run(next, sink); err != nil {
				t.Fatalf("%s at move %d, then a new process: %v", op, n, err)
			}
			got := map[string]int64{}
			for u, c := range latest(sink.rows()) {
				got[u] = c.Count
			}
			if !maps.Equal(got, want) {
				t.Fatalf("%s at move %d, then a new process: counts %v, want %v", op, n, got, want)
			}
		}
	}
}
