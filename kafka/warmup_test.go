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
			conn, adm := newCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
			conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
			createTopic(t, adm, "clicks", 4)
			createTopic(t, adm, "counts", 2)
			in := clicks(1200, 22)
			first, second := in[:800], in[800:]
			produce(t, conn, clickRecords(t, "clicks", 4, first)...)
			watch := newAppWatch()
			ctx := testContext(t)
			start := func() *runningApp {
				app := newCountingApp(conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir(), MaxWarmupReplicas: tc.warmups}, watch)
				runCtx, cancel := context.WithCancel(ctx)
				r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
				go func() { r.done <- app.Run(runCtx) }()
				t.Cleanup(r.cancel)
				return r
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

			produce(t, conn, clickRecords(t, "clicks", 4, second)...)
			if ends, err = adm.ListEndOffsets(ctx, "clicks"); err != nil {
				t.Fatal(err)
			}
			awaitGroupAtEnd(t, adm, watch, ends)
			newcomer.stop(t)
			owner.stop(t)
			onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
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
	cluster, err := kafka.Embedded(ctx, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	conn := cluster.Connection()
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	adm := kadm.NewClient(client)
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
		app := newCountingApp(conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir()}, watch)
		runCtx, cancel := context.WithCancel(ctx)
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(runCtx) }()
		t.Cleanup(r.cancel)
		return r
	}
	owner := start()
	poll(t, "the first instance to run the four tasks", func() bool { return running(owner.app) == 4 })
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	kafka.FakeCluster(cluster).Compact()

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

	produce(t, conn, clickRecords(t, "clicks", 4, second)...)
	if ends, err = adm.ListEndOffsets(ctx, "clicks"); err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	newcomer.stop(t)
	owner.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}
