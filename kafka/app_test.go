package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"maps"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// appWatch follows the instances of an app: the rows their tasks read and
// the partitions each runs, signalling every change.
type appWatch struct {
	mu      sync.Mutex
	rows    int64
	changed chan struct{}
}

func newAppWatch() *appWatch { return &appWatch{changed: make(chan struct{}, 1)} }

func (w *appWatch) signal() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

func (w *appWatch) OnQueryProgress(p runtime.QueryProgress) {
	w.mu.Lock()
	if !strings.Contains(p.Name, "/repartition/") { // the rows the counting tasks read
		w.rows += p.NumInputRows
	}
	w.mu.Unlock()
	w.signal()
}

// waitFor waits until done holds, checking it at every change.
func (w *appWatch) waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	ctx := testContext(t)
	for {
		w.mu.Lock()
		ok := done()
		w.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

// sameRows fails the test unless the tasks read n rows in all: more is
// rows read twice.
func (w *appWatch) sameRows(t *testing.T, n int64) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rows != n {
		t.Fatalf("the tasks read %d rows, want %d: rows read twice", w.rows, n)
	}
}

// runningApp is an instance of the app, running until stopped.
type runningApp struct {
	app    *kafka.App
	cancel context.CancelFunc
	done   chan error
}

func (r *runningApp) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatalf("the instance ended with %v", err)
	}
}

// TestAppScalesOut counts clicks per user with an App over a topic of
// four partitions, exactly once. One instance takes all four partitions;
// a second joins and takes some of them, restoring their state from the
// changelog; the first leaves, and the second takes the rest. Every
// user's counts, read back with read_committed, rise at each update and
// end at a plain loop's count: no state was lost or counted twice as the
// partitions moved.
func TestAppScalesOut(t *testing.T) {
	conn, adm := newCluster(t)
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "clicks", 4)
	createTopic(t, adm, "counts", 2)
	in := clicks(600, 10)
	watch := newAppWatch()
	var assignments []string
	start := func(name string) *runningApp {
		t.Helper()
		var app *kafka.App
		app = kafka.NewApp(kafka.AppOptions{
			Connection:  conn,
			Group:       "counter",
			Topics:      []string{"clicks"},
			Dir:         "tasks",
			ExactlyOnce: true,
			Options:     []runtime.Option{runtime.FileSystem(vfs.NewMem()), runtime.PollInterval(time.Millisecond), runtime.Listener(watch)},
			OnAssigned: func(ps []int32) {
				watch.mu.Lock()
				assignments = append(assignments, name)
				watch.mu.Unlock()
				watch.signal()
			},
			OnRevoked: func([]int32) { watch.signal() },
		}, func(task *kafka.Task) (kafka.Starter, error) {
			src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
			return countingTask(conn, task, src, countClicks), nil
		})
		ctx, cancel := context.WithCancel(testContext(t))
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(ctx) }()
		return r
	}
	all := []int32{0, 1, 2, 3}
	first := start("first")
	defer first.cancel()
	watch.waitFor(t, "the first instance to run all four tasks", func() bool { return slices.Equal(first.app.Tasks(), all) })
	produce(t, conn, clickRecords(t, "clicks", 4, in[:200])...)
	watch.waitFor(t, "200 rows", func() bool { return watch.rows >= 200 })
	watch.sameRows(t, 200)

	second := start("second")
	defer second.cancel()
	watch.waitFor(t, "the second instance to take partitions", func() bool {
		a, b := first.app.Tasks(), second.app.Tasks()
		return len(b) > 0 && len(a)+len(b) == 4 && slices.Equal(slices.Sorted(slices.Values(append(a, b...))), all)
	})
	produce(t, conn, clickRecords(t, "clicks", 4, in[200:400])...)
	watch.waitFor(t, "400 rows", func() bool { return watch.rows >= 400 })
	watch.sameRows(t, 400)

	first.stop(t)
	watch.waitFor(t, "the second instance to run all four tasks", func() bool { return slices.Equal(second.app.Tasks(), all) })
	produce(t, conn, clickRecords(t, "clicks", 4, in[400:])...)
	watch.waitFor(t, "600 rows", func() bool { return watch.rows >= 600 })
	watch.sameRows(t, 600)
	second.stop(t)

	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)

	// The group's committed offsets follow the tasks': no lag.
	committed, err := adm.FetchOffsets(testContext(t), "counter")
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(testContext(t), "clicks")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(o kadm.ListedOffset) {
		c, _ := committed.Lookup("clicks", o.Partition)
		if c.At != o.Offset {
			t.Errorf("partition %d: the group committed offset %d, and the partition ends at %d", o.Partition, c.At, o.Offset)
		}
	})
}

// TestAppRefusesAndFails: topics that are not co-partitioned are refused
// with their partition counts, a task that fails ends Run with its
// error, naming the partition, and an App runs once.
func TestAppRefusesAndFails(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "a", 2)
	createTopic(t, adm, "b", 3)
	build := func(task *kafka.Task) (kafka.Starter, error) {
		return nil, errors.New("no pipeline for partition " + strconv.Itoa(int(task.Partition)))
	}
	err := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "g", Topics: []string{"a", "b"}, Dir: t.TempDir()}, build).Run(testContext(t))
	if err == nil || !strings.Contains(err.Error(), `topic "a" has 2 partitions and "b" has 3`) {
		t.Fatalf("Run on topics of 2 and 3 partitions gave %v", err)
	}
	app := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "g", Topics: []string{"a"}, Dir: t.TempDir()}, build)
	err = app.Run(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "task ") || !strings.Contains(err.Error(), "no pipeline for partition") {
		t.Fatalf("Run with a failing task gave %v", err)
	}
	if err := app.Run(testContext(t)); err == nil || !strings.Contains(err.Error(), "an App runs once") {
		t.Fatalf("a second Run gave %v", err)
	}
	err = kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "g", Topics: []string{"a"}, Dir: t.TempDir(),
		StandbyReplicas: -1, SessionTimeout: -time.Second, RebalanceTimeout: -time.Second,
		Tags: map[string]string{"zone": "a"}, StandbyTags: []string{"zone", "rack"}}, build).Run(testContext(t))
	for _, want := range []string{"StandbyReplicas -1 is negative", "SessionTimeout -1s is negative", "RebalanceTimeout -1s is negative",
		`StandbyTags: "rack" is not a key of Tags`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Run with bad options gave %v, want it to say %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), `"zone" is not a key`) {
		t.Errorf("Run refused a StandbyTags key that Tags has: %v", err)
	}
}

// TestAppRepartitions counts clicks per user from a topic whose records
// are not keyed by user (spread over three partitions in turn): the App
// writes them through its repartition topic keyed by user
// (RepartitionBy), so that each user's clicks reach one task. Two
// instances share the work, exactly once; the counts, read back with
// read_committed, are a plain loop's, and each user is in one partition
// of the repartition topic.
func TestAppRepartitions(t *testing.T) {
	conn, adm := newCluster(t)
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "clicks", 3)
	createTopic(t, adm, "counts", 2)
	in := clicks(450, 11)
	records := func(part []fixtures.Click, from int) []*kgo.Record {
		out := make([]*kgo.Record, len(part))
		for i := range part {
			v, err := part[i].MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			out[i] = &kgo.Record{Topic: "clicks", Partition: int32((from + i) % 3), Value: v}
		}
		return out
	}
	watch := newAppWatch()
	var fss []vfs.FS
	start := func() *runningApp {
		t.Helper()
		fs := vfs.NewMem()
		fss = append(fss, fs)
		app := kafka.NewApp(kafka.AppOptions{
			Connection:  conn,
			Group:       "by-user",
			Topics:      []string{"clicks"},
			Dir:         "tasks",
			ExactlyOnce: true,
			RepartitionBy: func(m *kafka.Message) ([]byte, error) {
				var c fixtures.Click
				if err := c.UnmarshalJSON(m.Value); err != nil {
					return nil, err
				}
				return []byte(c.User), nil
			},
			Options:    []runtime.Option{runtime.FileSystem(fs), runtime.PollInterval(time.Millisecond), runtime.Listener(watch)},
			OnAssigned: func([]int32) { watch.signal() },
			OnRevoked:  func([]int32) { watch.signal() },
		}, func(task *kafka.Task) (kafka.Starter, error) {
			src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
			return countingTask(conn, task, src, countClicks), nil
		})
		ctx, cancel := context.WithCancel(testContext(t))
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(ctx) }()
		return r
	}
	first := start()
	defer first.cancel()
	produce(t, conn, records(in[:200], 0)...)
	watch.waitFor(t, "200 rows", func() bool { return watch.rows >= 200 })
	watch.sameRows(t, 200)
	second := start()
	defer second.cancel()
	watch.waitFor(t, "the second instance to take partitions", func() bool {
		a, b := first.app.Tasks(), second.app.Tasks()
		return len(a) > 0 && len(b) > 0 && len(a)+len(b) == 3
	})
	produce(t, conn, records(in[200:], 200)...)
	watch.waitFor(t, "450 rows", func() bool { return watch.rows >= 450 })
	watch.sameRows(t, 450)
	first.stop(t)
	second.stop(t)

	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
	partitionOf := map[string]int32{}
	for _, rec := range consumeWith(t, conn, adm, "by-user-repartition", kgo.ReadCommitted()) {
		if p, ok := partitionOf[string(rec.Key)]; ok && p != rec.Partition {
			t.Fatalf("user %s is in partitions %d and %d of the repartition topic", rec.Key, p, rec.Partition)
		}
		partitionOf[string(rec.Key)] = rec.Partition
	}
	if len(partitionOf) != len(expectedCounts(in)) {
		t.Fatalf("the repartition topic holds %d users, want %d", len(partitionOf), len(expectedCounts(in)))
	}

	// Ten minutes after its tasks stopped (StateCleanupDelay's default),
	// an instance has removed their checkpoints and their repartition
	// tasks'.
	now := time.Now()
	kafka.CleanStateDirs(first.app, now)
	kafka.CleanStateDirs(first.app, now.Add(11*time.Minute))
	for _, dir := range []string{"tasks", "tasks/repartition"} {
		names, err := fss[0].List(dir)
		if err != nil {
			t.Fatal(err)
		}
		if names = slices.DeleteFunc(names, func(n string) bool { return n == "repartition" || n == "APP.LOCK" }); len(names) != 0 {
			t.Errorf("%s holds %v after the delay, want nothing", dir, names)
		}
	}
}

// cacheWatch keeps, per task, the largest state cache a progress report
// of it showed, and which tasks' queries have started (their stores are
// open), signalling each start to changed.
type cacheWatch struct {
	mu      sync.Mutex
	largest map[string]int64
	started map[string]bool
	changed *appWatch
}

func (w *cacheWatch) OnQueryStarted(e runtime.QueryStarted) {
	w.mu.Lock()
	w.started[e.Name] = true
	w.mu.Unlock()
	w.changed.signal()
}

func (w *cacheWatch) startedTasks() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.started)
}

func (w *cacheWatch) OnQueryProgress(p runtime.QueryProgress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.largest[p.Name] = max(w.largest[p.Name], p.StateStore.StateCacheBytes)
}

// TestAppSharesTheStateCache: an instance's tasks share one state cache
// budget (AppOptions.StateCacheSize). Four tasks, all started before the
// input arrives, count 4,000 users, about 100 KiB of cached state each:
// every task's cache stays within its quarter of a 128 KiB budget (one
// of its own would hold all its users), and none is empty. A quarter
// share of 32 KiB gives a quarter of it to entry slots, which fill
// first: a cache of about 17 KiB (a half share would fill about 34 KiB),
// so at most 24 KiB tells a quarter share from a half.
// The counts are a plain loop's.
func TestAppSharesTheStateCache(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "clicks", 4)
	createTopic(t, adm, "counts", 2)
	const budget = 128 << 10
	in := make([]fixtures.Click, 4000)
	for i := range in {
		in[i] = fixtures.Click{User: fmt.Sprintf("user-%04d", i), Time: time.Unix(1_700_000_000+int64(i), 0).UTC(), Page: "p"}
	}
	watch := newAppWatch()
	caches := &cacheWatch{largest: map[string]int64{}, started: map[string]bool{}, changed: watch}
	all := []int32{0, 1, 2, 3}
	app := kafka.NewApp(kafka.AppOptions{
		Connection:     conn,
		Group:          "counter",
		Topics:         []string{"clicks"},
		Dir:            "tasks",
		StateCacheSize: budget,
		Options: []runtime.Option{runtime.FileSystem(vfs.NewMem()), runtime.PollInterval(time.Millisecond),
			runtime.Listener(caches), runtime.Listener(watch)},
		OnAssigned: func([]int32) { watch.signal() },
	}, func(task *kafka.Task) (kafka.Starter, error) {
		src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
		return countingTask(conn, task, src, countClicks), nil
	})
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Run(ctx) }()
	watch.waitFor(t, "the four tasks", func() bool { return slices.Equal(app.Tasks(), all) && caches.startedTasks() == 4 })
	produce(t, conn, clickRecords(t, "clicks", 4, in)...)
	watch.waitFor(t, "every row", func() bool { return watch.rows >= int64(len(in)) })
	watch.sameRows(t, int64(len(in)))
	r.stop(t)
	caches.mu.Lock()
	defer caches.mu.Unlock()
	if len(caches.largest) != 4 {
		t.Fatalf("reports of %d tasks: %v", len(caches.largest), caches.largest)
	}
	for name, n := range caches.largest {
		if n <= 0 || n > budget*3/16 {
			t.Errorf("task %s: its state cache held up to %d bytes, want some and at most %d (a quarter share of %d)", name, n, budget*3/16, budget)
		}
	}
	onceEach(t, userCounts(t, conn, adm, kgo.ReadUncommitted()), in)
}

// claimTransactionalID starts and aborts a transaction with id, as a
// process that took over a task would: the producer that had the ID is
// fenced.
func claimTransactionalID(t *testing.T, conn kafka.Connection, id string) {
	t.Helper()
	other, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.TransactionalID(id))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.EndTransaction(testContext(t), kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
}

// TestAppRejoinsWhenATaskIsFenced: another process claims a task's
// transactional ID, as an instance that took the partition over while
// this one missed the group's session timeout would. The task's next
// batch is fenced. The instance gives the task up and rejoins the group,
// where it used to end Run; the group gives it the partition again, and
// the task, restored, counts on. Every count, read back with
// read_committed, is a plain loop's, each once.
func TestAppRejoinsWhenATaskIsFenced(t *testing.T) {
	conn, adm := newCountingCluster(t, 4)
	appGivesUpTaskZero(t, conn, adm, 31, func() { claimTransactionalID(t, conn, "killed-0") })
}

// appGivesUpTaskZero runs the counting App over 800 clicks on a topic of
// four partitions: fault comes once the group has read the first 400,
// and partition 0's task is then to be given up once, the instance
// rejoining the group; every count, read back with read_committed, is a
// plain loop's, each once.
func appGivesUpTaskZero(t *testing.T, conn kafka.Connection, adm *kadm.Client, seed uint64, fault func()) {
	t.Helper()
	in := clicks(800, seed)
	first, second := in[:400], in[400:]
	produce(t, conn, clickRecords(t, "clicks", 4, first)...)
	ctx := testContext(t)
	watch := newAppWatch()
	app := runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir()}, watch)
	app.poll(t, "the four tasks", func() bool { return running(app.app) == 4 })
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends, app)

	fault()

	countTheRest(t, conn, adm, watch, second, in, app)
	var fenced []kafka.Rebalance
	for _, r := range app.app.Status().Rebalances {
		if r.Fenced {
			fenced = append(fenced, r)
		}
	}
	if len(fenced) != 1 || !slices.Equal(fenced[0].Revoked, []int32{0}) {
		t.Fatalf("tasks given up: %+v, want partition 0 once", fenced)
	}
}

// TestAppTaskFencedWhileIdle: with AsyncProgress, a task's batches wait
// in a transaction that a commit while it is idle ends. Another process
// claims the task's transactional ID while a batch waits: the idle
// commit finds the producer fenced, and the task is given up at once
// and the instance rejoins the group, where it used to keep the
// partition until its next batch. Every count, read back with
// read_committed, is a plain loop's, each once.
func TestAppTaskFencedWhileIdle(t *testing.T) {
	conn, adm := newCountingCluster(t, 4)
	in := clicks(800, 33)
	first, second := in[:400], in[400:]
	var onZero, rest []fixtures.Click
	for _, c := range second {
		if userPartition(c.User, 4) == 0 && len(onZero) < 20 {
			onZero = append(onZero, c)
		} else {
			rest = append(rest, c)
		}
	}
	produce(t, conn, clickRecords(t, "clicks", 4, first)...)
	ctx := testContext(t)
	watch := newAppWatch()
	app := runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir(), ExactlyOnce: true,
		ChangelogOptions: kafka.ChangelogOptions{AsyncProgress: true, AsyncProgressInterval: 2 * time.Second}}, watch)
	app.poll(t, "the four tasks", func() bool { return running(app.app) == 4 })
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	// Two batches of partition 0: the first may commit at once (the
	// interval has passed since the last commit), the second waits.
	read := int64(len(first))
	for _, part := range [][]fixtures.Click{onZero[:10], onZero[10:]} {
		produce(t, conn, clickRecords(t, "clicks", 4, part)...)
		read += int64(len(part))
		watch.waitFor(t, "the batch", func() bool { return watch.rows >= read })
	}
	claimTransactionalID(t, conn, "killed-0")
	fenced := func() (n int) {
		for _, r := range app.app.Status().Rebalances {
			if r.Fenced && slices.Equal(r.Revoked, []int32{0}) {
				n++
			}
		}
		return n
	}
	app.poll(t, "the task fenced while idle", func() bool { return fenced() > 0 })
	countTheRest(t, conn, adm, watch, rest, in, app)
	if n := fenced(); n != 1 {
		t.Fatalf("partition 0 fenced %d times, want once", n)
	}
}

// TestAppReset: Reset refuses while an instance of the App runs, naming
// the group's members. Once the instance has stopped, Reset deletes the
// changelog and the group and removes the checkpoints, and the next Run
// counts the input again from its start (a task's source, given no
// StartingOffsets, reads from the earliest offset, as Kafka Streams'): each user's counts rise to its
// plain-loop count twice, never past it. The same holds when the App ran
// on another machine, whose checkpoints the Reset did not remove: they
// are of the deleted changelog, and are not copied back into the new
// one.
func TestAppReset(t *testing.T) {
	for _, tc := range []struct {
		name string
		// elsewhere runs the App, before the Reset, on another machine's
		// Dir, which the Reset does not clear, and after it too.
		elsewhere bool
	}{{"here", false}, {"elsewhere", true}} {
		t.Run(tc.name, func(t *testing.T) {
			conn, adm := newCountingCluster(t, 2)
			ctx := testContext(t)
			in := clicks(300, 51)
			produce(t, conn, clickRecords(t, "clicks", 2, in)...)
			watch := newAppWatch()
			opts := kafka.AppOptions{Group: "killed", Dir: t.TempDir()}
			runOn := opts
			if tc.elsewhere {
				runOn.Dir = t.TempDir()
			}
			countAll := func() {
				t.Helper()
				app := runCountingApp(t, ctx, conn, runOn, watch)
				app.poll(t, "the two tasks", func() bool { return running(app.app) == 2 })
				ends, err := adm.ListEndOffsets(ctx, "clicks")
				if err != nil {
					t.Fatal(err)
				}
				awaitGroupAtEnd(t, adm, watch, ends)
				if err := newCountingApp(conn, opts, watch).Reset(ctx); err == nil || !strings.Contains(err.Error(), "the group has members (127.0.0.1") {
					t.Fatalf("Reset while an instance runs: %v, want a refusal naming its member", err)
				}
				app.stop(t)
			}
			countAll()
			positions := func() map[int32]int64 {
				t.Helper()
				at, err := kafka.LocalPositions(ctx, newCountingApp(conn, runOn, watch))
				if err != nil {
					t.Fatal(err)
				}
				return at
			}
			if at := positions(); len(at) != 2 {
				t.Fatalf("positions before Reset %v, want both partitions'", at)
			}
			before, err := adm.ListTopics(ctx, "killed-changelog")
			if err != nil {
				t.Fatal(err)
			}
			if err := newCountingApp(conn, opts, watch).Reset(ctx); err != nil {
				t.Fatal(err)
			}
			// Nothing but the instances' lock of Dir.
			if entries, err := os.ReadDir(opts.Dir); err != nil || len(entries) != 1 || entries[0].Name() != "APP.LOCK" {
				t.Fatalf("Dir after Reset: %v, %v; want it empty but for APP.LOCK", entries, err)
			}
			// The other machine's checkpoints, of the deleted changelog,
			// offer the group no position.
			if at := positions(); len(at) != 0 {
				t.Fatalf("positions after Reset %v, want none", at)
			}
			// (A new client: the test's caches the topics' metadata.)
			after, err := newAdmin(t, conn).ListTopics(ctx, "killed-changelog")
			if err != nil {
				t.Fatal(err)
			}
			if after["killed-changelog"].ID == before["killed-changelog"].ID {
				t.Fatal("the changelog topic has the same ID after Reset: it was not made again")
			}
			if starts, err := adm.ListEndOffsets(ctx, "killed-changelog"); err != nil {
				t.Fatal(err)
			} else {
				starts.Each(func(o kadm.ListedOffset) {
					if o.Offset != 1 {
						t.Errorf("changelog partition %d ends at %d after Reset, want 1 (the reset's record)", o.Partition, o.Offset)
					}
				})
			}
			countAll()

			want := expectedCounts(in)
			for user, counts := range userCounts(t, conn, adm, kgo.ReadCommitted()) {
				n := want[user].Count
				runs := 0
				for i, c := range counts {
					if i == 0 || c <= counts[i-1] {
						runs++
						if i > 0 && counts[i-1] != n {
							t.Fatalf("user %s: counts %v, want two runs each ending at %d", user, counts, n)
						}
					}
				}
				if runs != 2 || counts[len(counts)-1] != n {
					t.Fatalf("user %s: counts %v, want two runs each ending at %d", user, counts, n)
				}
			}
		})
	}
}

// TestAppRepartitionsOldRecords: the repartition task copies each record
// with its timestamp, here two years old. franz-go counts a record's
// delivery timeout from its timestamp, so a transactional producer with
// one failed every copy at once ("records have timed out"), and the App
// could not get past its first batch; the produces are bounded by their
// contexts instead. The counts are a plain loop's, each once.
func TestAppRepartitionsOldRecords(t *testing.T) {
	conn, adm := newCountingCluster(t, 2)
	in := clicks(200, 71) // of November 2023
	produce(t, conn, clickRecords(t, "clicks", 2, in)...)
	watch := newAppWatch()
	app := runCountingApp(t, testContext(t), conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir(),
		RepartitionBy: func(m *kafka.Message) ([]byte, error) { return m.Key, nil }}, watch)
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	app.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// TestAppRestartCountsSinceTheLastBatch: a task that fails twice in a
// row is started again twice, and Status shows its two restarts while
// the third attempt runs; once a batch has run, they count from zero
// again (the pause before a restart doubles with them, so a task that
// fails once a day does not wait the longest).
func TestAppRestartCountsSinceTheLastBatch(t *testing.T) {
	for _, repartition := range []bool{false, true} {
		t.Run(fmt.Sprintf("repartition=%v", repartition), func(t *testing.T) { testAppRestartCounts(t, repartition) })
	}
}

// testAppRestartCounts is TestAppRestartCountsSinceTheLastBatch, with a
// repartition task beside the failing one or not: its batches, which go
// on, do not reset the count.
func testAppRestartCounts(t *testing.T, repartition bool) {
	conn, adm := newCountingCluster(t, 2)
	ctx := testContext(t)
	in := clicks(400, 67)
	produce(t, conn, clickRecords(t, "clicks", 2, in)...)
	watch := newAppWatch()
	victim := in[150].User
	p := userPartition(victim, 2)
	var attempts atomic.Int32
	release := make(chan struct{})
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		if user == victim {
			switch attempts.Add(1) {
			case 1, 2:
				return fixtures.UserCount{}, errors.New("a failure")
			case 3:
				<-release
			}
		}
		return countClicks(user, rows, state)
	}
	opts := kafka.AppOptions{Group: "killed", Dir: t.TempDir(), OnTaskError: func(int32, error) kafka.TaskErrorAction { return kafka.RestartTask }}
	if repartition {
		opts.RepartitionBy = func(m *kafka.Message) ([]byte, error) { return m.Key, nil } // the same partitions
	}
	app := runApp(t, ctx, newCountingAppOf(conn, opts, watch, count))
	restarts := func() int {
		for _, ts := range app.app.Status().Tasks {
			if ts.Partition == p {
				return ts.Restarts
			}
		}
		return -1
	}
	app.poll(t, "the third attempt", func() bool { return attempts.Load() == 3 })
	if n := restarts(); n != 2 {
		t.Fatalf("partition %d's task shows %d restarts in its third attempt, want 2", p, n)
	}
	close(release)
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	// (With a repartition task, the group is at the end once that has
	// copied the input: the counting task may still be in its batch.)
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	app.poll(t, "no restarts shown once a batch has run", func() bool { return restarts() == 0 })
	app.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// TestAppRestartsAFailedTask: with OnTaskError answering RestartTask, a
// task whose function fails once starts again from its checkpoint, where
// Run used to end. OnTaskError hears the error, naming the partition; the
// failed batch runs again, and the counts are a plain loop's, each once.
func TestAppRestartsAFailedTask(t *testing.T) {
	conn, adm := newCountingCluster(t, 2)
	in := clicks(400, 61)
	produce(t, conn, clickRecords(t, "clicks", 2, in)...)
	watch := newAppWatch()
	victim := in[150].User
	var failed atomic.Bool
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		if user == victim && failed.CompareAndSwap(false, true) {
			return fixtures.UserCount{}, errors.New("a failure, once")
		}
		return countClicks(user, rows, state)
	}
	onTaskError, heard := taskErrors(kafka.RestartTask)
	opts := kafka.AppOptions{Group: "killed", Dir: t.TempDir(), OnTaskError: onTaskError}
	runUntilRead(t, conn, adm, opts, watch, count)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
	p := userPartition(victim, 2)
	want := fmt.Sprintf(`%d: streamgen: kafka app "killed": task %d:`, p, p)
	if heard := heard(); len(heard) != 1 || !strings.HasPrefix(heard[0], want) || !strings.Contains(heard[0], "a failure, once") {
		t.Fatalf("OnTaskError heard %q, want one error of partition %d's task", heard, p)
	}
}

// TestAppRepartitionTopicKeepsCopies: the repartition topic keeps its
// copies, however old their timestamps, until the tasks have read them
// (as Kafka Streams' repartition topics, retention.ms -1), though the
// broker's retention runs before a slow task starts, and the tasks read
// every copy whatever starting offsets they ask for; a topic made by an
// earlier version, with the broker's retention, is given the same. Once
// read and committed, the copies are deleted (DeleteRecords), as Kafka
// Streams purges them.
func TestAppRepartitionTopicKeepsCopies(t *testing.T) {
	kafka.SetRepartitionPurgeInterval(t, 50*time.Millisecond)
	for _, tc := range []struct {
		name     string
		starting kafka.StartingOffsets
		made     bool // the topic is there, made with the broker's retention
	}{
		{"earliest", kafka.Earliest(), false},
		{"latest", kafka.Latest(), false},
		{"made before", kafka.Earliest(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, conn, adm := newFakeCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
			conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
			ctx := testContext(t)
			forever := "-1"
			if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"retention.ms": &forever}, "clicks"); err != nil {
				t.Fatal(err)
			}
			createTopic(t, adm, "counts", 1)
			if tc.made {
				createTopic(t, adm, "old-repartition", 1)
			}
			in := clicks(100, 71) // stamped November 2023: older than the broker's retention
			produce(t, conn, clickRecords(t, "clicks", 1, in)...)

			watch := newAppWatch()
			release := make(chan struct{})
			app := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "old", Topics: []string{"clicks"}, Dir: t.TempDir(), ExactlyOnce: true,
				SessionTimeout: time.Second, RepartitionBy: func(m *kafka.Message) ([]byte, error) { return m.Key, nil },
				Options: []runtime.Option{runtime.PollInterval(time.Millisecond), runtime.Listener(watch)}},
				func(task *kafka.Task) (kafka.Starter, error) {
					<-release // the counting task is slow to start
					src := task.Source(kafka.Options{StartingOffsets: tc.starting})
					return countingTask(conn, task, src, countClicks), nil
				})
			running := runApp(t, ctx, app)
			running.poll(t, "the repartition task to copy every click", func() bool {
				ends, err := adm.ListEndOffsets(ctx, "old-repartition")
				if err != nil || ends.Error() != nil {
					return false // not made yet
				}
				return len(consume(t, conn, adm, "old-repartition")) == len(in)
			})
			fake.ApplyRetention() // the broker's periodic retention pass
			close(release)

			// A click of now, after the old ones: once it is counted, every
			// click before it is.
			last := fixtures.Click{User: "zed", Time: time.Now(), Page: "p0"}
			produce(t, conn, clickRecords(t, "clicks", 1, []fixtures.Click{last})...)
			running.poll(t, "the last click's count", func() bool { _, ok := userCounts(t, conn, adm, kgo.ReadCommitted())["zed"]; return ok })
			// The copies read are deleted: the topic starts after them.
			running.poll(t, "the copies read deleted", func() bool {
				starts, err := adm.ListStartOffsets(ctx, "old-repartition")
				if err != nil || starts.Error() != nil {
					return false
				}
				o, _ := starts.Lookup("old-repartition", 0)
				return o.Offset > int64(len(in))
			})
			running.stop(t)
			onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), append(in, last))
		})
	}
}

// newPurgeCluster is an embedded cluster for the repartition purge's
// tests, which purge every 20 ms until the test ends: topics clicks, of
// one partition, holding 60 clicks of seed, and counts.
func newPurgeCluster(t *testing.T, seed uint64) (*kfake.Cluster, kafka.Connection, *kadm.Client, []fixtures.Click) {
	t.Helper()
	kafka.SetRepartitionPurgeInterval(t, 20*time.Millisecond)
	fake, conn, adm := newFakeCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "clicks", 1)
	createTopic(t, adm, "counts", 1)
	in := clicks(60, seed)
	produce(t, conn, clickRecords(t, "clicks", 1, in)...)
	return fake, conn, adm, in
}

// TestAppRepartitionPurgesWhatEverySourceRead: a task that reads the
// repartition topic through two sources, one slower than the other, loses
// nothing to the purge: the copies are deleted up to the least offset its
// sources have read.
func TestAppRepartitionPurgesWhatEverySourceRead(t *testing.T) {
	_, conn, adm, in := newPurgeCluster(t, 7)
	ctx := testContext(t)
	taskErr := make(chan error, 10)
	app := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "two", Topics: []string{"clicks"}, Dir: t.TempDir(), ExactlyOnce: true,
		RepartitionBy: func(m *kafka.Message) ([]byte, error) { return m.Key, nil },
		OnTaskError:   func(p int32, err error) kafka.TaskErrorAction { taskErr <- err; return kafka.StopInstance },
		Options:       []runtime.Option{runtime.PollInterval(time.Millisecond)}},
		func(task *kafka.Task) (kafka.Starter, error) {
			fast := typed.Filter(typed.From[fixtures.Click](task.Source(kafka.Options{Name: "fast"})), func(c *fixtures.Click) bool { return c.Page == "p0" || c.Page == "p1" })
			slow := typed.Filter(typed.From[fixtures.Click](task.Source(kafka.Options{Name: "slow", MaxOffsetsPerTrigger: 2})), func(c *fixtures.Click) bool { return c.Page == "p2" || c.Page == "p3" })
			sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "counts",
				Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }, Transactions: task.Transactions()})
			task.OnClose(sink.Close)
			byUser := typed.GroupByKey(typed.Union(fast, slow), func(c *fixtures.Click) string { return c.User })
			return typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks), sink), nil
		})
	running := runApp(t, ctx, app)
	want := expectedCounts(in)
	running.poll(t, "every click counted", func() bool {
		select {
		case err := <-taskErr:
			t.Fatalf("the task failed: %v", err)
		default:
		}
		got := userCounts(t, conn, adm, kgo.ReadCommitted())
		for u, w := range want {
			if c := got[u]; len(c) == 0 || c[len(c)-1] != w.Count {
				return false
			}
		}
		return true
	})
	running.stop(t)
}

// firstOffset returns the first offset partition 0 of topic holds.
func firstOffset(t *testing.T, adm *kadm.Client, topic string) int64 {
	t.Helper()
	starts, err := adm.ListStartOffsets(testContext(t), topic)
	if err != nil || starts.Error() != nil {
		t.Fatal(err, starts.Error())
	}
	o, _ := starts.Lookup(topic, 0)
	return o.Offset
}

// TestAppRepartitionPurgesAfterAGroupCommit: the copies read are deleted
// only once a commit of the group's offsets after reading them is taken
// (the instance still held its partitions): while the group refuses the
// commits, nothing is deleted; once it takes one, they are.
func TestAppRepartitionPurgesAfterAGroupCommit(t *testing.T) {
	fake, conn, adm, in := newPurgeCluster(t, 9)
	ctx := testContext(t)
	var refuse atomic.Bool
	var refused atomic.Int64
	refuse.Store(true)
	fake.ControlKey(int16(kmsg.OffsetCommit), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		req := kreq.(*kmsg.OffsetCommitRequest)
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.GroupAuthorizationFailed.Code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	watch := newAppWatch()
	app := runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "refused", Topics: []string{"clicks"}, Dir: t.TempDir(),
		RepartitionBy: func(m *kafka.Message) ([]byte, error) { return m.Key, nil }}, watch)
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	start := func() int64 { return firstOffset(t, adm, "refused-repartition") }
	// Commits refused after every click was counted, each tried again
	// every half second, while the purge runs every 20 ms.
	after := refused.Load()
	app.poll(t, "three more commits refused", func() bool { return refused.Load() >= after+3 })
	if s := start(); s != 0 {
		t.Fatalf("the repartition topic starts at %d while the group refused every commit, want 0", s)
	}
	refuse.Store(false)
	app.poll(t, "the copies read deleted", func() bool { return start() >= int64(len(in)) })
	app.stop(t)
}

// TestAppRepartitionPurgesWhatTransactionsCommitted: with AsyncProgress,
// a task's batches are in Kafka only once its transaction commits, and a
// restore reads the repartition topic from what the last one committed:
// the copies its batches read are not deleted while the transaction
// holding them is open (two looks of the group's commit and two purges
// after every click was counted), and are once it commits.
func TestAppRepartitionPurgesWhatTransactionsCommitted(t *testing.T) {
	_, conn, adm, in := newPurgeCluster(t, 11)
	ctx := testContext(t)
	watch := newAppWatch()
	app, held := newHeldApp(conn, kafka.AppOptions{Group: "async", RepartitionBy: func(m *kafka.Message) ([]byte, error) { return m.Key, nil }}, t.TempDir(), watch)
	running := runApp(t, ctx, app)
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	start := func() int64 { return firstOffset(t, adm, "async-repartition") }
	looks := kafka.CommitLooks(app)
	running.poll(t, "two looks of the group's commit", func() bool { return kafka.CommitLooks(app) >= looks+2 })
	passes := kafka.PurgePasses(app)
	running.poll(t, "two purges", func() bool { return kafka.PurgePasses(app) >= passes+2 })
	if s := start(); s != 0 {
		t.Fatalf("the repartition topic starts at %d while the transaction holding every batch is open, want 0", s)
	}
	kafka.CommitWhenIdle(held.Load())
	running.poll(t, "the copies read deleted", func() bool { return start() >= int64(len(in)) })
	running.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// newHeldApp is the counting App over topic clicks with AsyncProgress
// (every 50 ms), whose first task's transaction commits no batch until
// kafka.CommitWhenIdle is given the transactions held returns.
func newHeldApp(conn kafka.Connection, opts kafka.AppOptions, dir string, watch *appWatch) (*kafka.App, *atomic.Pointer[kafka.Transactions]) {
	var held atomic.Pointer[kafka.Transactions]
	opts.Connection, opts.Topics, opts.Dir, opts.ExactlyOnce = conn, []string{"clicks"}, dir, true
	opts.ChangelogOptions = kafka.ChangelogOptions{AsyncProgress: true, AsyncProgressInterval: 50 * time.Millisecond}
	opts.Options = []runtime.Option{runtime.PollInterval(time.Millisecond), runtime.Listener(watch)}
	return kafka.NewApp(opts, func(task *kafka.Task) (kafka.Starter, error) {
		if held.CompareAndSwap(nil, task.Transactions()) {
			kafka.HoldCommits(task.Transactions())
		}
		return countingTask(conn, task, task.Source(kafka.Options{MaxOffsetsPerTrigger: 20}), countClicks), nil
	}), &held
}

// TestAppGroupOffsetsWaitForTheTransaction: with AsyncProgress, a task's
// batches are in Kafka once a transaction that holds them commits, and
// may yet be aborted and run again before; the group's committed
// offsets, which lag dashboards read, follow the batches in Kafka, not
// those committed locally (as Kafka Streams commits them in the
// transaction): none while the transaction holding every batch is open
// (two looks of the group's commit after every click was counted), the
// end once it commits.
func TestAppGroupOffsetsWaitForTheTransaction(t *testing.T) {
	_, conn, adm, in := newPurgeCluster(t, 13)
	ctx := testContext(t)
	watch := newAppWatch()
	app, held := newHeldApp(conn, kafka.AppOptions{Group: "held"}, t.TempDir(), watch)
	running := runApp(t, ctx, app)
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	committed := func() int64 {
		offsets, err := adm.FetchOffsets(ctx, "held")
		if err != nil {
			t.Fatal(err)
		}
		o, ok := offsets.Lookup("clicks", 0)
		if !ok {
			return -1
		}
		return o.At
	}
	looks := kafka.CommitLooks(app)
	running.poll(t, "two looks of the group's commit", func() bool { return kafka.CommitLooks(app) >= looks+2 })
	if at := committed(); at > 0 {
		t.Fatalf("the group committed offset %d while the transaction holding every batch is open, want none", at)
	}
	kafka.CommitWhenIdle(held.Load())
	running.poll(t, "the group's offset at the end", func() bool { return committed() == int64(len(in)) })
	running.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// TestAppRepartitionPurgesWhatABatchCommitted: with AsyncProgress, a
// batch that commits the transaction itself (its interval has passed:
// here every batch's) is in Kafka before it reports its progress, and
// the copies it read are deleted while the task is idle after it, with
// no later transaction to wait for.
func TestAppRepartitionPurgesWhatABatchCommitted(t *testing.T) {
	_, conn, adm, in := newPurgeCluster(t, 17)
	ctx := testContext(t)
	watch := newAppWatch()
	app := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "due", Topics: []string{"clicks"}, Dir: t.TempDir(), ExactlyOnce: true,
		ChangelogOptions: kafka.ChangelogOptions{AsyncProgress: true, AsyncProgressInterval: time.Nanosecond},
		RepartitionBy:    func(m *kafka.Message) ([]byte, error) { return m.Key, nil },
		Options:          []runtime.Option{runtime.PollInterval(time.Millisecond), runtime.Listener(watch)}},
		func(task *kafka.Task) (kafka.Starter, error) {
			return countingTask(conn, task, task.Source(kafka.Options{}), countClicks), nil
		})
	running := runApp(t, ctx, app)
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	running.poll(t, "the copies read deleted", func() bool { return firstOffset(t, adm, "due-repartition") >= int64(len(in)) })
	running.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// TestAppAsyncProgressIdleCommitAborted: with AsyncProgress, the commit
// while idle of the transaction holding every batch so far fails (EndTxn
// answers UNKNOWN_SERVER_ERROR once) and is aborted. The task fails at
// once, idle as it is (its batches are committed locally, not in Kafka),
// and, started again, rebuilds its checkpoint from the changelog and
// counts every click again: each is counted once in what Kafka
// committed, and no transaction committed later passes for the aborted
// one in the repartition topic's purge.
func TestAppAsyncProgressIdleCommitAborted(t *testing.T) {
	fake, conn, adm, in := newPurgeCluster(t, 13)
	ctx := testContext(t)
	var armed, failed atomic.Bool
	fake.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		if req.TransactionalID != "idle-0" || !req.Commit || !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		failed.Store(true)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil, true
	})
	var held atomic.Pointer[kafka.Transactions]
	taskErr := make(chan error, 10)
	watch := newAppWatch()
	app := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "idle", Topics: []string{"clicks"}, Dir: t.TempDir(), ExactlyOnce: true,
		ChangelogOptions: kafka.ChangelogOptions{AsyncProgress: true, AsyncProgressInterval: 50 * time.Millisecond},
		RepartitionBy:    func(m *kafka.Message) ([]byte, error) { return m.Key, nil },
		OnTaskError:      func(p int32, err error) kafka.TaskErrorAction { taskErr <- err; return kafka.RestartTask },
		Options:          []runtime.Option{runtime.PollInterval(time.Millisecond), runtime.Listener(watch)}},
		func(task *kafka.Task) (kafka.Starter, error) {
			if held.CompareAndSwap(nil, task.Transactions()) {
				kafka.HoldCommits(task.Transactions())
			}
			return countingTask(conn, task, task.Source(kafka.Options{}), countClicks), nil
		})
	running := runApp(t, ctx, app)
	watch.waitFor(t, "every click counted", func() bool { return watch.rows >= int64(len(in)) })
	armed.Store(true)
	kafka.CommitWhenIdle(held.Load())
	select {
	case err := <-taskErr:
		if !failed.Load() || !strings.Contains(err.Error(), "aborted") {
			t.Fatalf("the task failed with %v, want the aborted commit while idle", err)
		}
	case <-ctx.Done():
		t.Fatal("the task went on idle after its transaction was aborted")
	}
	// One more click, after the task started again.
	more := []fixtures.Click{{User: "ann", Time: in[len(in)-1].Time.Add(time.Second), Page: "p0"}}
	produce(t, conn, clickRecords(t, "clicks", 1, more)...)
	all := append(in, more...)
	running.poll(t, "every click counted in what Kafka committed", func() bool { return sameLast(userCounts(t, conn, adm, kgo.ReadCommitted()), all) })
	running.poll(t, "the copies read deleted", func() bool { return firstOffset(t, adm, "idle-repartition") >= int64(len(all)) })
	running.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), all)
}

// TestAppDeadLettersPerTask: each task's query, and each repartition
// task's, writes its dead letters to a sink of its own
// (AppOptions.DeadLetters, a directory per task's Name): records for
// which RepartitionBy fails are the repartition tasks' letters, values
// that do not decode the counting tasks', and each bad record is a
// letter once, whichever partition it came from and however the
// queries' batch ids overlap; the good clicks are counted once. A
// dead-letter sink in Options, which every task's query would share, is
// refused.
func TestAppDeadLettersPerTask(t *testing.T) {
	conn, adm := newCountingCluster(t, 2)
	ctx := testContext(t)
	in := clicks(120, 21)
	records := clickRecords(t, "clicks", 2, in)
	// The loop's answer: which bad record is whose letter.
	want := map[string]string{} // raw value → the query that letters it
	for i := range 12 {
		p := int32(i % 2)
		if i%3 == 0 {
			v := fmt.Sprintf(`{"user":"nokey-%d"}`, i)
			records = append(records, &kgo.Record{Topic: "clicks", Partition: p, Key: nil, Value: []byte(v)})
			want[v] = fmt.Sprintf("killed/repartition/%d", p)
		} else {
			v := fmt.Sprintf(`{"user": broken %d`, i)
			records = append(records, &kgo.Record{Topic: "clicks", Partition: p, Key: []byte("ann"), Value: []byte(v)})
			want[v] = fmt.Sprintf("killed/%d", userPartition("ann", 2))
		}
	}
	produce(t, conn, records...)
	dir := t.TempDir()
	opts := kafka.AppOptions{Group: "killed", Dir: t.TempDir(), // (the group awaitClicksRead follows)
		RepartitionBy: func(m *kafka.Message) ([]byte, error) {
			if len(m.Key) == 0 {
				return nil, errors.New("no key")
			}
			return m.Key, nil
		},
		DeadLetters: func(task *kafka.Task) runtime.DeadLetterSink {
			return runtime.DeadLetterDir(filepath.Join(dir, task.Name()))
		}}
	watch := newAppWatch()
	app := runCountingApp(t, ctx, conn, opts, watch)
	app.awaitTasks(t, 2)
	awaitClicksRead(t, adm, watch)
	app.poll(t, "every click counted", func() bool { return sameLast(userCounts(t, conn, adm, kgo.ReadCommitted()), in) })
	app.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)

	got := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasPrefix(d.Name(), "dead-letters-") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var l runtime.DeadLetter
			if err := json.Unmarshal([]byte(line), &l); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if q, dup := got[l.Raw]; dup {
				t.Errorf("%q is a letter twice: of %s and of %s", l.Raw, q, rel)
			}
			got[l.Raw] = rel
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Errorf("letters by query %v, want %v", got, want)
	}

	shared := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "shared", Topics: []string{"clicks"}, Dir: t.TempDir(),
		Options: []runtime.Option{runtime.DeadLetters(runtime.DeadLetterDir(dir))}},
		func(task *kafka.Task) (kafka.Starter, error) {
			return countingTask(conn, task, task.Source(kafka.Options{}), countClicks), nil
		})
	if err := shared.Run(ctx); err == nil || !strings.Contains(err.Error(), "set DeadLetters") {
		t.Errorf("an App with a dead-letter sink in Options: %v, want a refusal", err)
	}
}

// runUntilRead runs an instance of the counting app of two partitions
// until its group has read them to their ends, and stops it.
func runUntilRead(t *testing.T, conn kafka.Connection, adm *kadm.Client, opts kafka.AppOptions, watch *appWatch,
	count func(string, iter.Seq[fixtures.Click], *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error)) {
	t.Helper()
	ctx := testContext(t)
	app := runApp(t, ctx, newCountingAppOf(conn, opts, watch, count))
	stopAtEnd(t, adm, watch, app)
}

// stopAtEnd waits until the instance runs both partitions' tasks and its
// group has read them to their ends, and stops it.
func stopAtEnd(t *testing.T, adm *kadm.Client, watch *appWatch, app *runningApp) {
	t.Helper()
	app.poll(t, "the two tasks", func() bool { return running(app.app) == 2 })
	ends, err := adm.ListEndOffsets(testContext(t), "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	app.stop(t)
}

// taskErrors returns an OnTaskError that answers action, and a function
// that returns what it heard: "partition: error" for each call.
func taskErrors(action kafka.TaskErrorAction) (func(int32, error) kafka.TaskErrorAction, func() []string) {
	var mu sync.Mutex
	var heard []string
	return func(p int32, err error) kafka.TaskErrorAction {
			mu.Lock()
			defer mu.Unlock()
			heard = append(heard, fmt.Sprintf("%d: %v", p, err))
			return action
		}, func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(heard)
		}
}

// TestAppWaitsForACheckpointInUse: a partition's checkpoint held by
// another process's reader (streamgen inspect, left open) when an
// instance starts does not hold the instance's start up nor end it: the
// other partitions' tasks run, that partition's task starts again until
// the reader lets go, as Kafka Streams retries a task's state directory
// lock, and nothing is lost or counted twice; OnTaskError hears nothing.
func TestAppWaitsForACheckpointInUse(t *testing.T) {
	conn, adm := newCountingCluster(t, 2)
	ctx := testContext(t)
	in := clicks(300, 67)
	produce(t, conn, clickRecords(t, "clicks", 2, in[:200])...)
	watch := newAppWatch()
	onTaskError, heard := taskErrors(kafka.StopInstance)
	opts := kafka.AppOptions{Group: "killed", Dir: t.TempDir(), OnTaskError: onTaskError}
	runUntilRead(t, conn, adm, opts, watch, countClicks)

	reader, err := runtime.OpenCheckpoint(filepath.Join(opts.Dir, "0"))
	if err != nil {
		t.Fatal(err)
	}
	produce(t, conn, clickRecords(t, "clicks", 2, in[200:])...)
	app := runApp(t, ctx, newCountingAppOf(conn, opts, watch, countClicks))
	app.poll(t, "partition 1's task", func() bool { return running(app.app) == 1 })
	// Status lists partition 0's task as waiting, and why.
	app.poll(t, "partition 0's task waiting", func() bool {
		for _, w := range app.app.Status().Waiting {
			if w.Partition == 0 && strings.Contains(w.Error, "in use") && w.Restarts > 0 && !w.NextStart.IsZero() {
				return true
			}
		}
		return false
	})
	select {
	case err := <-app.done:
		t.Fatalf("the instance ended with %v while a reader held a checkpoint", err)
	default:
	}
	if err := reader.Close(); err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, adm, watch, app)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
	if heard := heard(); len(heard) != 0 {
		t.Fatalf("OnTaskError heard %q", heard)
	}
}

// TestAppLocksItsDir: a second instance given the Dir an instance runs on
// (of its group or another) fails at once, naming the Dir, rather than
// wait for checkpoints the first holds; once the first stops, it runs.
func TestAppLocksItsDir(t *testing.T) {
	conn, _ := newCountingCluster(t, 2)
	ctx := testContext(t)
	watch := newAppWatch()
	dir := t.TempDir()
	first := runApp(t, ctx, newCountingApp(conn, kafka.AppOptions{Group: "first", Dir: dir}, watch))
	first.poll(t, "the two tasks", func() bool { return running(first.app) == 2 })
	// The same Dir through a link: one directory, whatever its spelling.
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ group, dir string }{{"first", dir}, {"second", dir}, {"second", link}} {
		err := newCountingApp(conn, kafka.AppOptions{Group: c.group, Dir: c.dir}, watch).Run(ctx)
		if err == nil || !strings.Contains(err.Error(), "Dir "+c.dir+" is in use by another App instance") {
			t.Fatalf("an instance of group %s on the running instance's Dir, as %s: %v", c.group, c.dir, err)
		}
	}
	// Nor does a Reset of another group's App on it delete anything.
	if err := newCountingApp(conn, kafka.AppOptions{Group: "second", Dir: dir}, watch).Reset(ctx); err == nil || !strings.Contains(err.Error(), "is in use by another App instance") {
		t.Fatalf("a Reset on the running instance's Dir: %v", err)
	}
	if entries, err := os.ReadDir(dir); err != nil || len(entries) < 3 {
		t.Fatalf("the running instance's Dir after a refused Reset: %v, %v", entries, err)
	}
	first.stop(t)
	second := runApp(t, ctx, newCountingApp(conn, kafka.AppOptions{Group: "second", Dir: dir}, watch))
	second.poll(t, "the second's tasks", func() bool { return running(second.app) == 2 })
	second.stop(t)
}

// TestAppEndsOnAStoreThatDidNotClose: a task's checkpoint meets an I/O
// error as Pebble moves its log to a new file: the store fails and does
// not close (its files stay locked until the process ends), so no start
// of the task in this process could take the checkpoint. Run ends with
// the failure, though OnTaskError answers RestartTask, where the task
// started again every pause and was refused as if another process held
// the checkpoint, for ever.
func TestAppEndsOnAStoreThatDidNotClose(t *testing.T) {
	conn, _ := newCountingCluster(t, 1)
	produce(t, conn, clickRecords(t, "clicks", 1, clicks(40, 62))...)
	var armed, injected atomic.Bool
	faulty := errorfs.Wrap(vfs.NewMem(), errorfs.InjectorFunc(func(op errorfs.Op) error {
		if armed.Load() && strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpReuseForWrite) &&
			strings.Contains(string(debug.Stack()), ".(*DB).rotateWAL(") && injected.CompareAndSwap(false, true) {
			return errors.New("injected EIO")
		}
		return nil
	}))
	// Each batch's state is over half of the 1 MiB memtables: each moves
	// the log to a new file.
	big := strings.Repeat("x", 600<<10)
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		armed.Store(true)
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		c.Pages = []string{big}
		state.Update(c)
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	onTaskError, heard := taskErrors(kafka.RestartTask)
	opts := kafka.AppOptions{Group: "stuck", Dir: t.TempDir(), OnTaskError: onTaskError, Connection: conn, Topics: []string{"clicks"},
		ExactlyOnce: true, SessionTimeout: time.Second,
		Options: []runtime.Option{runtime.FileSystem(faulty), runtime.MemTableSize(1 << 20), runtime.PollInterval(time.Millisecond)}}
	app := kafka.NewApp(opts, func(task *kafka.Task) (kafka.Starter, error) {
		return countingTask(conn, task, task.Source(kafka.Options{MaxOffsetsPerTrigger: 5}), count), nil
	})
	r := runApp(t, testContext(t), app)
	var err error
	select {
	case err = <-r.done:
	case <-time.After(time.Minute):
		t.Fatalf("Run did not end (OnTaskError heard %q)", heard())
	}
	t.Logf("Run: %v; OnTaskError heard %q", err, heard())
	if !injected.Load() {
		t.Fatalf("no fault injected; Run ended with %v", err)
	}
	if !errors.Is(err, runtime.ErrStoreLeftOpen) || !errors.Is(err, runtime.ErrStoreFailed) || errors.Is(err, runtime.ErrCheckpointInUse) ||
		!strings.Contains(err.Error(), "injected EIO") && !strings.Contains(err.Error(), "restart the process") {
		t.Fatalf("Run: %v (OnTaskError heard %q)", err, heard())
	}
}

// TestAppRejoinsWhenATaskLosesItsSequence: the broker refuses a task's
// produce request with OUT_OF_ORDER_SEQUENCE_NUMBER (its producer's
// sequence is lost: records the broker has not got, or state it dropped).
// As Kafka Streams takes it for a task migrated, not the end of the
// application, the instance gives the task up (its transaction aborted)
// and rejoins the group, which gives it the partition again: the task,
// restored, counts on. Every count, read back with read_committed, is a
// plain loop's, each once. The same for UNKNOWN_PRODUCER_ID.
func TestAppRejoinsWhenATaskLosesItsSequence(t *testing.T) {
	for _, code := range []int16{kerr.OutOfOrderSequenceNumber.Code, kerr.UnknownProducerID.Code} {
		t.Run(kerr.ErrorForCode(code).(*kerr.Error).Message, func(t *testing.T) { appLosesSequence(t, code) })
	}
}

func appLosesSequence(t *testing.T, code int16) {
	fake, conn, adm := newFakeCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "clicks", 4)
	createTopic(t, adm, "counts", 2)
	var refused atomic.Bool
	appGivesUpTaskZero(t, conn, adm, 37, func() {
		fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			req := kreq.(*kmsg.ProduceRequest)
			if req.TransactionID == nil || *req.TransactionID != "killed-0" || !refused.CompareAndSwap(false, true) {
				fake.KeepControl()
				return nil, nil, false
			}
			return refusedProduce(req, code), nil, true
		})
	})
	if !refused.Load() {
		t.Fatal("no produce request of task 0 was refused: the test does not lose a sequence")
	}
}

// TestAppRevivesATaskWhoseWritesTimedOut: the broker refuses a task's
// writes with NOT_ENOUGH_REPLICAS (retriable: the client tries again)
// for longer than ProduceTimeout. As Kafka Streams takes a retriable
// error it gave up on for a corrupted task, which it revives rather than
// end the application, the task fails, waits, and starts again (its
// transaction aborted, its state from its checkpoint and changelog) for
// as long as the broker refuses; once it accepts, every count, read back
// with read_committed, is a plain loop's, each once. The same with
// AsyncProgress, only the changelog's writes refused (whose records the
// client fails as the timeout passes). With OnTaskError, its answer
// decides: StopInstance ends Run with the error.
func TestAppRevivesATaskWhoseWritesTimedOut(t *testing.T) {
	for _, tc := range []struct {
		name      string
		async     bool
		onlyTopic string // the topic whose writes are refused; "": every write of task 0
		stop      bool   // OnTaskError answers StopInstance
		fromStart bool   // refused from the App's start: no transaction of task 0 commits before
	}{
		{name: "sink"},
		{name: "changelog, AsyncProgress", async: true, onlyTopic: "killed-changelog"},
		{name: "changelog, AsyncProgress, from the start", async: true, onlyTopic: "killed-changelog", fromStart: true},
		{name: "OnTaskError stops", stop: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, conn, adm := newFakeCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
			// (The client tries a refused write again once it has read
			// the topic's metadata again: at most every MetadataMinAge.)
			conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond), quickMetadata}
			createTopic(t, adm, "clicks", 4)
			createTopic(t, adm, "counts", 2)
			in := clicks(800, 41)
			first, second := in[:400], in[400:]
			produce(t, conn, clickRecords(t, "clicks", 4, first)...)
			ctx := testContext(t)
			watch := newAppWatch()
			opts := kafka.AppOptions{Group: "killed", Dir: t.TempDir(),
				ChangelogOptions: kafka.ChangelogOptions{ProduceTimeout: time.Second, AsyncProgress: tc.async, AsyncProgressInterval: 50 * time.Millisecond}}
			var asked atomic.Int64
			if tc.stop {
				opts.OnTaskError = func(int32, error) kafka.TaskErrorAction { asked.Add(1); return kafka.StopInstance }
			}
			// (A produce request names a topic by its ID, which the
			// topic made before the App's start has.)
			var onlyID [16]byte
			if tc.onlyTopic != "" {
				if _, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, tc.onlyTopic); err != nil {
					t.Fatal(err)
				}
				topics, err := adm.ListTopics(ctx, tc.onlyTopic)
				if err != nil {
					t.Fatal(err)
				}
				onlyID = topics[tc.onlyTopic].ID
			}
			var down atomic.Bool
			var refused atomic.Int64
			refuse := func() {
				down.Store(true)
				fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
					fake.KeepControl()
					req := kreq.(*kmsg.ProduceRequest)
					if !down.Load() || req.TransactionID == nil || *req.TransactionID != "killed-0" {
						return nil, nil, false
					}
					if tc.onlyTopic != "" && !slices.ContainsFunc(req.Topics, func(rt kmsg.ProduceRequestTopic) bool {
						return rt.Topic == tc.onlyTopic || rt.TopicID == onlyID
					}) {
						return nil, nil, false
					}
					refused.Add(1)
					return refusedProduce(req, kerr.NotEnoughReplicas.Code), nil, true
				})
			}
			if tc.fromStart {
				refuse()
			}
			app := runCountingApp(t, ctx, conn, opts, watch)
			app.poll(t, "the four tasks", func() bool { return running(app.app) == 4 })
			if !tc.fromStart {
				ends, err := adm.ListEndOffsets(ctx, "clicks")
				if err != nil {
					t.Fatal(err)
				}
				awaitGroupAtEnd(t, adm, watch, ends, app)
				refuse()
			}
			produce(t, conn, clickRecords(t, "clicks", 4, second)...)
			if tc.stop {
				select {
				case err := <-app.done:
					if err == nil || !strings.Contains(err.Error(), "no acknowledgement from Kafka") || asked.Load() != 1 {
						t.Fatalf("Run ended with %v, OnTaskError asked %d times; want the write's timeout, asked once", err, asked.Load())
					}
				case <-ctx.Done():
					t.Fatal("Run did not end")
				}
				return
			}
			app.poll(t, "partition 0's task failed twice and waiting", func() bool {
				for _, w := range app.app.Status().Waiting {
					if w.Partition == 0 && w.Restarts >= 2 && strings.Contains(w.Error, "no acknowledgement from Kafka") {
						return true
					}
				}
				return false
			})
			down.Store(false)
			countTheRest(t, conn, adm, watch, nil, in, app)
			if refused.Load() == 0 {
				t.Fatal("no write was refused")
			}
		})
	}
}
