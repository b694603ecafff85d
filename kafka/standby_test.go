package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// newStandbyApp is the counting App of the standby tests, with one
// standby per partition and a one-second session timeout.
func newStandbyApp(conn kafka.Connection, dir, addr string, watch *appWatch) *kafka.App {
	return newCountingApp(conn, kafka.AppOptions{Group: "killed", Dir: dir, StandbyReplicas: 1, AdvertisedAddr: addr}, watch)
}

// newCountingApp is an App of group opts.Group counting clicks per user
// exactly once, from topic clicks to topic counts, with a one-second
// session timeout, reporting its batches and rebalances to watch; opts
// gives the rest.
func newCountingApp(conn kafka.Connection, opts kafka.AppOptions, watch *appWatch) *kafka.App {
	return newCountingAppOf(conn, opts, watch, countClicks)
}

// newCountingAppOf is newCountingApp with count for its function.
func newCountingAppOf(conn kafka.Connection, opts kafka.AppOptions, watch *appWatch, count func(string, iter.Seq[fixtures.Click], *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error)) *kafka.App {
	opts.Connection, opts.Topics, opts.ExactlyOnce = conn, []string{"clicks"}, true
	if opts.SessionTimeout == 0 {
		opts.SessionTimeout = time.Second
	}
	opts.Options = []runtime.Option{runtime.PollInterval(time.Millisecond), runtime.Listener(watch)}
	opts.OnAssigned = func([]int32) { watch.signal() }
	opts.OnRevoked = func([]int32) { watch.signal() }
	return kafka.NewApp(opts, func(task *kafka.Task) (kafka.Starter, error) {
		// No StartingOffsets: a task's source reads from the earliest
		// offset by default (TestAppReset counts the records produced
		// before the App's first Run and before its run after Reset).
		src := task.Source(kafka.Options{MaxOffsetsPerTrigger: 20})
		return countingTask(conn, task, src, count), nil
	})
}

// countingTask is the counting App's task: src's clicks counted per
// user by count, written to topic counts in the task's transactions.
func countingTask(conn kafka.Connection, task *kafka.Task, src *kafka.TopicSource, count func(string, iter.Seq[fixtures.Click], *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error)) kafka.Starter {
	sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "counts",
		Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }, Transactions: task.Transactions()})
	task.OnClose(sink.Close)
	byUser := typed.GroupByKey(typed.From[fixtures.Click](src), func(c *fixtures.Click) string { return c.User })
	return typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), sink)
}

// newCountingCluster is an embedded cluster for the counting App: groups
// that accept its one-second session timeout, clients that heartbeat
// every 50 ms, topic clicks of the given partitions and counts of two.
func newCountingCluster(t *testing.T, partitions int32) (kafka.Connection, *kadm.Client) {
	t.Helper()
	conn, adm := newCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "clicks", partitions)
	createTopic(t, adm, "counts", 2)
	return conn, adm
}

// poll waits until cond holds, looking every few milliseconds.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx := testContext(t)
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// TestAppStandbyFailover runs the App in two instances with one standby
// per partition: each instance owns two partitions and keeps the other
// two warm, following their changelog. When one instance dies (its
// transactions left open), the other takes its partitions from its
// standbys: their restore reads nothing (the standbys were caught up),
// where a cold one would read the whole changelog. The counts read back
// with read_committed are a plain loop's, rising at every update.
func TestAppStandbyFailover(t *testing.T) {
	conn, adm := newCountingCluster(t, 4)
	in := clicks(1200, 21)
	first, second := in[:800], in[800:]
	produce(t, conn, clickRecords(t, "clicks", 4, first)...)
	watch := newAppWatch()
	ctx := testContext(t)
	var apps []*runningApp
	for i := range 2 {
		app := newStandbyApp(conn, t.TempDir(), fmt.Sprintf("127.0.0.1:%d", 9000+i), watch)
		runCtx, cancel := context.WithCancel(ctx)
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(runCtx) }()
		defer r.cancel()
		apps = append(apps, r)
	}
	all := []int32{0, 1, 2, 3}
	poll(t, "two tasks and two standbys on each instance", func() bool {
		var tasks, standbys []int32
		for _, r := range apps {
			st := r.app.Status()
			if running(r.app) != 2 || len(st.Standbys) != 2 {
				return false
			}
			for _, ts := range st.Tasks {
				tasks = append(tasks, ts.Partition)
			}
			for _, s := range st.Standbys {
				standbys = append(standbys, s.Partition)
			}
		}
		slices.Sort(tasks)
		slices.Sort(standbys)
		return slices.Equal(tasks, all) && slices.Equal(standbys, all)
	})
	// The group's assignment names every partition's owner and standby,
	// with their addresses, the same on both instances.
	st := apps[0].app.Status()
	for _, p := range st.Partitions {
		if p.Owner == "" || p.OwnerAddr == "" || len(p.StandbyAddrs) != 1 || p.StandbyAddrs[0] == p.OwnerAddr {
			t.Fatalf("partition %d: %+v", p.Partition, p)
		}
	}
	if fmt.Sprint(st.Partitions) != fmt.Sprint(apps[1].app.Status().Partitions) {
		t.Fatalf("the instances see different assignments:\n%+v\n%+v", st.Partitions, apps[1].app.Status().Partitions)
	}
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	changelogEnds, err := adm.ListEndOffsets(ctx, "killed-changelog")
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the standbys to catch up with the changelog", func() bool {
		for _, r := range apps {
			for _, s := range r.app.Status().Standbys {
				if end, _ := changelogEnds.Lookup("killed-changelog", s.Partition); s.Lag != 0 || s.Position < end.Offset-1 {
					return false
				}
			}
		}
		return true
	})

	dying, survivor := apps[0], apps[1]
	moved := dying.app.Tasks()
	dying.die(t)
	survivor.awaitTasks(t, 4)
	for _, ts := range survivor.app.Status().Tasks {
		if !slices.Contains(moved, ts.Partition) {
			continue
		}
		end, _ := changelogEnds.Lookup("killed-changelog", ts.Partition)
		if ts.RestoredFrom != "standby" || ts.RestoredRecords != 0 || end.Offset == 0 {
			t.Errorf("partition %d came from %q, restoring %d records (a cold restore reads the changelog's %d): want its standby's copy, caught up",
				ts.Partition, ts.RestoredFrom, ts.RestoredRecords, end.Offset)
		}
	}
	if rs := survivor.app.Status().Rebalances; len(rs) < 2 || !slices.Equal(rs[len(rs)-1].Assigned, moved) {
		t.Errorf("the survivor's rebalances %+v do not end with taking %v", rs, moved)
	}

	// The survivor's metrics say the same.
	reg := prometheus.NewRegistry()
	reg.MustRegister(survivor.app.Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			got[f.GetName()] += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	if got["streamgen_app_tasks"] != 4 || got["streamgen_app_standbys"] != 0 || got["streamgen_app_tasks_restoring"] != 0 || got["streamgen_app_assignment_changes_total"] < 2 {
		t.Errorf("the survivor's metrics: %v", got)
	}

	produce(t, conn, clickRecords(t, "clicks", 4, second)...)
	if ends, err = adm.ListEndOffsets(ctx, "clicks"); err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	survivor.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// TestAppStandbysInAnotherZone: four instances, two in zone a and two in
// zone b, with one standby per partition spread over the zone tag
// (AppOptions.Tags and StandbyTags): once the group settles, every
// partition's standby is in the other zone than its owner, on every
// instance's view of the assignment.
func TestAppStandbysInAnotherZone(t *testing.T) {
	// Four instances settle in a few probing rebalances: not 5 s apart.
	kafka.SetProbeInterval(t, 100*time.Millisecond)
	conn, _ := newCountingCluster(t, 4)
	watch := newAppWatch()
	ctx := testContext(t)
	zoneOf := map[string]string{}
	var apps []*runningApp
	for i := range 4 {
		addr := fmt.Sprintf("127.0.0.1:%d", 9100+i)
		zone := []string{"a", "b"}[i/2]
		zoneOf[addr] = zone
		app := newCountingApp(conn, kafka.AppOptions{Group: "zones", Dir: t.TempDir(), StandbyReplicas: 1, AdvertisedAddr: addr,
			Tags: map[string]string{"zone": zone}, StandbyTags: []string{"zone"}}, watch)
		runCtx, cancel := context.WithCancel(ctx)
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(runCtx) }()
		defer r.cancel()
		apps = append(apps, r)
	}
	// The views of the assignment that satisfied the wait: a rebalance
	// after it (a missed heartbeat) does not make them partial.
	var views [][]kafka.PartitionStatus
	poll(t, "a task on each instance, and a standby of every partition", func() bool {
		views = views[:0]
		for _, r := range apps {
			st := r.app.Status()
			if running(r.app) != 1 || len(st.Partitions) != 4 {
				return false
			}
			for _, p := range st.Partitions {
				if p.OwnerAddr == "" || len(p.StandbyAddrs) == 0 {
					return false
				}
			}
			views = append(views, st.Partitions)
		}
		return true
	})
	for _, view := range views {
		for _, p := range view {
			if len(p.StandbyAddrs) != 1 || zoneOf[p.OwnerAddr] == "" || zoneOf[p.StandbyAddrs[0]] == zoneOf[p.OwnerAddr] {
				t.Errorf("partition %d: owner %s (zone %q), standbys %v: want one, in the other zone", p.Partition, p.OwnerAddr, zoneOf[p.OwnerAddr], p.StandbyAddrs)
			}
		}
	}
	for _, r := range apps {
		r.stop(t)
	}
}

// TestAppRefusedSessionTimeout: a session timeout the group coordinator
// refuses (below the broker's group.min.session.timeout.ms, 6 s by
// default) ends Run with an error that says so, rather than an App that
// waits for ever for partitions.
func TestAppRefusedSessionTimeout(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "clicks", 2)
	app := newStandbyApp(conn, t.TempDir(), "", newAppWatch())
	err := app.Run(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "refuses the session timeout 1s") {
		t.Fatalf("Run: %v", err)
	}
}

// running counts the tasks of an instance that have restored their state
// and run.
func running(a *kafka.App) int {
	n := 0
	for _, ts := range a.Status().Tasks {
		if !ts.Restoring {
			n++
		}
	}
	return n
}

// TestAppRemovesUnusedCheckpoints: an instance that gives partitions up
// keeps their checkpoints for StateCleanupDelay, as Kafka Streams'
// state.cleanup.delay.ms, then removes them; those of the partitions it
// runs stay. When the partitions come back, their tasks restore from the
// changelog, and the counts are a plain loop's, each once.
func TestAppRemovesUnusedCheckpoints(t *testing.T) {
	conn, adm := newCountingCluster(t, 4)
	ctx := testContext(t)
	in := clicks(900, 41)
	produce(t, conn, clickRecords(t, "clicks", 4, in[:300])...)
	watch := newAppWatch()
	dir := t.TempDir()
	owner := runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: dir, StateCleanupDelay: time.Hour}, watch)
	poll(t, "the four tasks", func() bool { return running(owner.app) == 4 })
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)

	newcomer := runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir()}, watch)
	poll(t, "two tasks on each instance", func() bool {
		return running(owner.app) == 2 && running(newcomer.app) == 2
	})
	dirs := func() []string {
		t.Helper()
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			if e.Name() != "APP.LOCK" { // the instance's lock of Dir
				names = append(names, e.Name())
			}
		}
		return names
	}
	var kept []string
	for _, p := range owner.app.Tasks() {
		kept = append(kept, fmt.Sprint(p))
	}
	now := time.Now()
	for _, at := range []time.Time{now, now.Add(59 * time.Minute)} {
		kafka.CleanStateDirs(owner.app, at)
		if got := dirs(); len(got) != 4 {
			t.Fatalf("checkpoints %v before the delay, want all four", got)
		}
	}
	kafka.CleanStateDirs(owner.app, now.Add(61*time.Minute))
	if got := dirs(); !slices.Equal(got, kept) {
		t.Fatalf("checkpoints %v after the delay, want those of the tasks running, %v", got, kept)
	}

	produce(t, conn, clickRecords(t, "clicks", 4, in[300:600])...)
	newcomer.stop(t)
	poll(t, "the owner to run the four tasks again", func() bool { return running(owner.app) == 4 })
	for _, ts := range owner.app.Status().Tasks {
		if !slices.Contains(kept, fmt.Sprint(ts.Partition)) && (ts.RestoredFrom != "changelog" || ts.RestoredRecords == 0) {
			t.Errorf("partition %d came back from %q with %d records, want the changelog's", ts.Partition, ts.RestoredFrom, ts.RestoredRecords)
		}
	}
	countTheRest(t, conn, adm, watch, in[600:], in, owner)
}

// TestAppStaticMembersRestartInPlace: two instances with InstanceIDs
// share four partitions. One stops and starts again with its InstanceID
// within the session timeout, as in a rolling restart: it gets its
// partitions back, their tasks starting from their checkpoints, and the
// other instance neither gives up nor takes any. The counts are a plain
// loop's, each once.
func TestAppStaticMembersRestartInPlace(t *testing.T) {
	conn, adm := newCountingCluster(t, 4)
	ctx := testContext(t)
	in := clicks(900, 43)
	produce(t, conn, clickRecords(t, "clicks", 4, in[:300])...)
	watch := newAppWatch()
	start := func(id, dir string) *runningApp {
		return runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: dir, InstanceID: id, SessionTimeout: 10 * time.Second}, watch)
	}
	dirA := t.TempDir()
	a := start("a", dirA)
	poll(t, "the first instance to run the four tasks", func() bool { return running(a.app) == 4 })
	b := start("b", t.TempDir())
	poll(t, "two tasks on each instance", func() bool { return running(a.app) == 2 && running(b.app) == 2 })
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	owned, changes := a.app.Tasks(), len(b.app.Status().Rebalances)

	a.stop(t)
	produce(t, conn, clickRecords(t, "clicks", 4, in[300:600])...)
	a = start("a", dirA)
	poll(t, "the restarted instance to run two tasks", func() bool { return running(a.app) == 2 })
	if got := a.app.Tasks(); !slices.Equal(got, owned) {
		t.Fatalf("the restarted instance runs %v, want its own %v", got, owned)
	}
	for _, ts := range a.app.Status().Tasks {
		if ts.RestoredFrom != "checkpoint" {
			t.Errorf("partition %d came from %q, want its checkpoint", ts.Partition, ts.RestoredFrom)
		}
	}
	produce(t, conn, clickRecords(t, "clicks", 4, in[600:])...)
	if ends, err = adm.ListEndOffsets(ctx, "clicks"); err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	if got := b.app.Status().Rebalances; len(got) != changes {
		t.Fatalf("the other instance's assignment changed: %+v", got[changes:])
	}
	a.stop(t)
	b.stop(t)
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// TestAppInstanceIDFencesTheOlder: an instance started with the
// InstanceID of one running makes the group fence the older one, whose
// Run ends with an error naming the InstanceID; the newer runs the tasks.
func TestAppInstanceIDFencesTheOlder(t *testing.T) {
	conn, _ := newCountingCluster(t, 2)
	ctx := testContext(t)
	watch := newAppWatch()
	start := func() *runningApp {
		return runCountingApp(t, ctx, conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir(), InstanceID: "pod-0"}, watch)
	}
	older := start()
	poll(t, "the two tasks", func() bool { return running(older.app) == 2 })
	newer := start()
	select {
	case err := <-older.done:
		if err == nil || !strings.Contains(err.Error(), `InstanceID "pod-0"`) {
			t.Fatalf("the older instance ended with %v, want an error naming its InstanceID", err)
		}
	case <-ctx.Done():
		t.Fatal("the older instance was never fenced")
	}
	poll(t, "the newer instance to run the two tasks", func() bool { return running(newer.app) == 2 })
	newer.stop(t)
}

// TestAppStandbyAfterReset: a standby whose checkpoint is of the
// changelog a Reset deleted (its machine was not cleared) rebuilds its
// copy from the new topic. The first run counts each click as ten (the
// bug the Reset is for); after the Reset and more input, one instance
// counts everything again, then a second, on the machine of the first
// run, joins and keeps a standby of the partition it does not take,
// after the new changelog has grown past the offsets its checkpoint
// recorded. The first instance dies, and the second takes the partition
// from its standby. Read from its recorded offsets, the standby kept the
// first run's counts, on which the counting went on.
func TestAppStandbyAfterReset(t *testing.T) {
	conn, adm := newCountingCluster(t, 2)
	ctx := testContext(t)
	in := clicks(600, 77)
	first, second, third := in[:200], in[200:400], in[400:]
	produce(t, conn, clickRecords(t, "clicks", 2, first)...)
	watch := newAppWatch()
	countTen := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count += 10
		}
		state.Update(c)
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	stale, fresh := t.TempDir(), t.TempDir()
	opts := func(dir string, port int) kafka.AppOptions {
		return kafka.AppOptions{Group: "killed", Dir: dir, StandbyReplicas: 1, AdvertisedAddr: fmt.Sprintf("127.0.0.1:%d", port)}
	}
	atEnd := func() { t.Helper(); awaitClicksRead(t, adm, watch) }
	buggy := runApp(t, ctx, newCountingAppOf(conn, opts(stale, 9000), watch, countTen))
	poll(t, "the two tasks", func() bool { return running(buggy.app) == 2 })
	atEnd()
	buggy.stop(t)
	if err := newCountingApp(conn, opts(fresh, 9001), watch).Reset(ctx); err != nil {
		t.Fatal(err)
	}

	produce(t, conn, clickRecords(t, "clicks", 2, second)...)
	dying := runApp(t, ctx, newCountingApp(conn, opts(fresh, 9001), watch))
	poll(t, "the two tasks", func() bool { return running(dying.app) == 2 })
	atEnd()
	survivor := runApp(t, ctx, newCountingApp(conn, opts(stale, 9000), watch))
	changelogEnds, err := adm.ListEndOffsets(ctx, "killed-changelog")
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "a task and a caught-up standby on each instance", func() bool {
		for _, r := range []*runningApp{dying, survivor} {
			st := r.app.Status()
			if running(r.app) != 1 || len(st.Standbys) != 1 {
				return false
			}
			s := st.Standbys[0]
			if end, _ := changelogEnds.Lookup("killed-changelog", s.Partition); s.Lag != 0 || s.Position < end.Offset-1 {
				return false
			}
		}
		return true
	})
	dying.die(t)
	survivor.awaitTasks(t, 2)
	produce(t, conn, clickRecords(t, "clicks", 2, third)...)
	atEnd()
	survivor.stop(t)

	want := expectedCounts(in)
	for user, counts := range userCounts(t, conn, adm, kgo.ReadCommitted()) {
		// The counts since the Reset: after the last fall.
		since := 0
		for i := 1; i < len(counts); i++ {
			if counts[i] <= counts[i-1] {
				since = i
			}
		}
		if after := counts[since:]; after[0] > 10 || after[len(after)-1] != want[user].Count {
			t.Fatalf("user %s: counts %v; want those since the Reset to start again and end at %d", user, counts, want[user].Count)
		}
	}
}

// TestAppStandbyBelowLogStart: the changelog's start moves past a
// standby's position (DeleteRecords, as retention would on a changelog
// that is not only compacted) while the standby is behind (its fetches
// fail). The records deleted are all overwritten after the new start
// (every user clicks again), so the changelog still holds the whole
// state, and the counts must be a plain loop's.
//   - running: the standby, fetching again, rebuilds its copy from the
//     changelog's new start (as Kafka Streams' standby does on
//     OFFSET_OUT_OF_RANGE) and catches up; the instance then takes the
//     partition over from it, its task restoring no record.
//   - handed over: the owner dies first; the task that takes the
//     standby's copy rebuilds it from the changelog, as a new instance
//     would restore it, where its own checkpoint would be refused.
func TestAppStandbyBelowLogStart(t *testing.T) {
	for _, handedOver := range []bool{false, true} {
		t.Run(map[bool]string{false: "running", true: "handed over"}[handedOver], func(t *testing.T) {
			fake, conn, adm := newFakeCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
			conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
			createTopic(t, adm, "clicks", 1)
			createTopic(t, adm, "counts", 2)
			ctx := testContext(t)
			in := clicks(900, 91)
			first, behind, second, third := in[:300], in[300:340], in[340:600], in[600:]
			users := map[string]bool{}
			for _, c := range first {
				users[c.User] = true
			}
			for _, c := range second {
				delete(users, c.User)
			}
			if len(users) != 0 {
				t.Fatalf("users %v do not click in the second part", users)
			}
			produce(t, conn, clickRecords(t, "clicks", 1, first)...)
			watch := newAppWatch()
			a := runApp(t, ctx, newStandbyApp(conn, t.TempDir(), "127.0.0.1:9200", watch))
			b := runApp(t, ctx, newStandbyApp(conn, t.TempDir(), "127.0.0.1:9201", watch))
			apps := []*runningApp{a, b}
			var owner, standby *runningApp
			poll(t, "the task on one instance and its standby on the other", func() bool {
				for i, r := range apps {
					o := apps[1-i]
					if running(r.app) == 1 && len(o.app.Status().Standbys) == 1 {
						owner, standby = r, o
						return true
					}
				}
				return false
			})
			atEnd := func() { t.Helper(); awaitClicksRead(t, adm, watch) }
			changelogEnd := func() int64 {
				t.Helper()
				ends, err := adm.ListEndOffsets(ctx, "killed-changelog")
				if err != nil {
					t.Fatal(err)
				}
				o, _ := ends.Lookup("killed-changelog", 0)
				return o.Offset
			}
			caughtUp := func() bool {
				st := standby.app.Status().Standbys
				return len(st) == 1 && st[0].Lag == 0 && st[0].Position >= changelogEnd()-1
			}
			atEnd()
			poll(t, "the standby to catch up", caughtUp)

			// The standby's fetches (the only ones in a fetch session: the
			// tasks' sources fetch without one, the group's client fetches
			// nothing) fail while blocked: it falls behind.
			var blocked atomic.Bool
			blocked.Store(true)
			fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				if req := kreq.(*kmsg.FetchRequest); !blocked.Load() || req.SessionEpoch < 0 {
					return nil, nil, false
				}
				return nil, fmt.Errorf("blocked"), true
			})
			// (The standby's consumer is past the last transaction's commit
			// marker: the start moves past a batch it has not fetched.)
			produce(t, conn, clickRecords(t, "clicks", 1, behind)...)
			atEnd()
			start := changelogEnd()
			produce(t, conn, clickRecords(t, "clicks", 1, second)...)
			atEnd()
			if _, err := adm.DeleteRecords(ctx, kadm.Offsets{"killed-changelog": {0: {Topic: "killed-changelog", Partition: 0, At: start}}}); err != nil {
				t.Fatal(err)
			}
			before := standby.app.Status().Standbys
			if len(before) != 1 || before[0].Position >= start {
				t.Fatalf("standby %+v: want it behind the new log start %d", before, start)
			}
			if !handedOver {
				blocked.Store(false)
				poll(t, "the standby to rebuild its copy from the changelog's new start and catch up", caughtUp)
			}

			// The owner dies; the other instance takes the task from its standby.
			owner.die(t)
			standby.awaitTasks(t, 1)
			blocked.Store(false)
			ts := standby.app.Status().Tasks
			if len(ts) != 1 || ts[0].RestoredFrom != "standby" || handedOver != (ts[0].RestoredRecords > 0) {
				t.Errorf("tasks %+v: want one restored from the standby, reading the changelog again: %v", ts, handedOver)
			}
			produce(t, conn, clickRecords(t, "clicks", 1, third)...)
			atEnd()
			standby.stop(t)
			onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
		})
	}
}

// TestAppCollectorsShareARegistry: the collectors of two Apps of
// different groups in one process register in one registry, each
// metric once per group; a second collector of one group is refused.
func TestAppCollectorsShareARegistry(t *testing.T) {
	build := func(*kafka.Task) (kafka.Starter, error) { return nil, errors.New("not run") }
	reg := prometheus.NewRegistry()
	for _, g := range []string{"orders", "payments"} {
		app := kafka.NewApp(kafka.AppOptions{Group: g, Topics: []string{g}, Dir: t.TempDir()}, build)
		if err := reg.Register(app.Collector()); err != nil {
			t.Fatalf("the collector of group %s: %v", g, err)
		}
	}
	again := kafka.NewApp(kafka.AppOptions{Group: "orders", Topics: []string{"orders"}, Dir: t.TempDir()}, build)
	if err := reg.Register(again.Collector()); err == nil {
		t.Error("a second collector of group orders was registered")
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		var groups []string
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "group" {
					groups = append(groups, l.GetValue())
				}
			}
		}
		if f.GetName() == "streamgen_app_tasks" && !slices.Equal(groups, []string{"orders", "payments"}) {
			t.Errorf("%s of groups %q, want orders and payments", f.GetName(), groups)
		}
	}
}
