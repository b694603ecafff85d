package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
)

// TestAppWarmup: an instance joins an App whose one instance owns the
// four partitions' state. With warm-ups (the default), the owner keeps
// the partitions the balance would move while the newcomer warms a copy
// of each up as a standby; once the copies are caught up the newcomer
// asks for a rebalance and takes the partitions from its copies,
// restoring nothing. With MaxWarmupReplicas -1 they move at once and the
// newcomer restores them from the changelog. Either way the counts read
// back with read_committed are a plain loop's, each once.
func TestAppWarmup(t *testing.T) {
	for _, tc := range []struct {
		name    string
		warmups int
		from    string
	}{
		{"warm-ups", 0, "standby"},
		{"none", -1, "changelog"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conn, adm := newCountingCluster(t, 4)
			in := clicks(1200, 22)
			first, second := in[:800], in[800:]
			produce(t, conn, clickRecords(t, "clicks", 4, first)...)
			watch := newAppWatch()
			ctx := testContext(t)
			start := func() *runningApp {
				return runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir(), MaxWarmupReplicas: tc.warmups}, watch)
			}
			owner := start()
			poll(t, "the first instance to run the four tasks", func() bool { return running(owner.app) == 4 })
			ends, err := adm.ListEndOffsets(ctx, "clicks")
			if err != nil {
				t.Fatal(err)
			}
			awaitGroupAtEnd(t, adm, watch, ends)

			newcomer := start()
			poll(t, "two tasks on each instance", func() bool {
				return running(owner.app) == 2 && running(newcomer.app) == 2
			})
			for _, ts := range newcomer.app.Status().Tasks {
				if ts.RestoredFrom != tc.from {
					t.Errorf("partition %d came from %q (%d records restored), want %q", ts.Partition, ts.RestoredFrom, ts.RestoredRecords, tc.from)
				}
				if tc.from == "standby" && ts.RestoredRecords != 0 {
					t.Errorf("partition %d restored %d records from the changelog's tail, want none (its copy was caught up)", ts.Partition, ts.RestoredRecords)
				}
			}
			if tc.from == "standby" {
				// The owner gave the partitions up only once: no
				// rebalance moved them to the newcomer before its copies
				// were warm.
				var revoked []int32
				for _, r := range owner.app.Status().Rebalances {
					revoked = append(revoked, r.Revoked...)
				}
				slices.Sort(revoked)
				if len(revoked) != 2 || len(slices.Compact(revoked)) != 2 {
					t.Errorf("the owner gave up %v, want two partitions, once each", revoked)
				}
			}

			countTheRest(t, conn, adm, watch, second, in, newcomer, owner)
		})
	}
}

// TestAppWarmupFromACompactedChangelog: the newcomer's copies read a
// changelog that compaction left with one record of each key, so one
// progress record, after nearly every other: they apply the records of
// the batches it says complete as they read them, holding at most a
// batch's records at once (held until a progress record, they held
// every record of their partition), and the counts are a plain loop's.
func TestAppWarmupFromACompactedChangelog(t *testing.T) {
	ctx := testContext(t)
	fake, conn, adm := newFakeCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "clicks", 4)
	createTopic(t, adm, "counts", 2)
	// Many users: a partition's state is many keys, each written by
	// several batches.
	in := clicks(1600, 23)
	r := rand.New(rand.NewPCG(23, 23))
	for i := range in {
		in[i].User = fmt.Sprint("u", r.IntN(300))
	}
	first, second := in[:1200], in[1200:]
	produce(t, conn, clickRecords(t, "clicks", 4, first)...)
	watch := newAppWatch()
	start := func() *runningApp {
		return runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir()}, watch)
	}
	owner := start()
	poll(t, "the first instance to run the four tasks", func() bool { return running(owner.app) == 4 })
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	fake.Compact()

	newcomer := start()
	poll(t, "two tasks on each instance", func() bool {
		return running(owner.app) == 2 && running(newcomer.app) == 2
	})
	for _, ts := range newcomer.app.Status().Tasks {
		if ts.RestoredFrom != "standby" {
			t.Errorf("partition %d came from %q, want its warmed-up copy", ts.Partition, ts.RestoredFrom)
		}
	}
	// A batch reads at most 20 clicks (MaxOffsetsPerTrigger), so writes
	// at most 20 users' counts and its progress.
	if held := kafka.StandbyHeldPeak(newcomer.app); held > 21 {
		t.Errorf("a copy held %d records at once, want at most a batch's 21", held)
	}

	countTheRest(t, conn, adm, watch, second, in, newcomer, owner)
}

// runCountingApp runs the counting App (newCountingApp) of opts until the
// test ends or it is stopped.
func runCountingApp(t *testing.T, ctx context.Context, conn kafka.Connection, opts kafka.AppOptions, watch *appWatch) *runningApp {
	return runApp(t, ctx, newCountingApp(conn, opts, watch))
}

// runApp runs app until the test ends or it is stopped.
func runApp(t *testing.T, ctx context.Context, app *kafka.App) *runningApp {
	runCtx, cancel := context.WithCancel(ctx)
	r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Run(runCtx) }()
	t.Cleanup(r.cancel)
	return r
}

// die stops the instance as if its process died: its tasks' transactions
// neither committed nor aborted.
func (r *runningApp) die(t *testing.T) {
	t.Helper()
	kafka.AbandonApp(r.app)
	r.cancel()
	if err := <-r.done; err != nil {
		t.Fatal(err)
	}
}

// awaitTasks waits until the instance runs n tasks, failing the test if
// it ends first.
func (r *runningApp) awaitTasks(t *testing.T, n int) {
	t.Helper()
	r.poll(t, fmt.Sprintf("the instance to run %d tasks", n), func() bool { return running(r.app) == n })
}

// poll is poll that fails the test at once, with the instance's error,
// if its Run ends first: a wait for an App that has ended would
// otherwise last until the safety net runs out, and say nothing of why.
func (r *runningApp) poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll(t, what, func() bool {
		r.alive(t, what)
		return cond()
	})
}

// alive fails the test, with the instance's error, if its Run has ended.
func (r *runningApp) alive(t *testing.T, waiting string) {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for stop
		t.Fatalf("waiting for %s: the instance ended: %v", waiting, err)
	default:
	}
}

// countTheRest produces rest to the clicks, waits for the App's group to
// read them, stops its instances, and checks that the counts read back
// with read_committed are a plain loop's over all of in, each once.
func countTheRest(t *testing.T, conn kafka.Connection, adm *kadm.Client, watch *appWatch, rest, in []fixtures.Click, apps ...*runningApp) {
	t.Helper()
	produce(t, conn, clickRecords(t, "clicks", 4, rest)...)
	ends, err := adm.ListEndOffsets(testContext(t), "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends, apps...)
	for _, a := range apps {
		a.stop(t)
	}
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}
