package kafka_test

import (
	"context"
	"runtime/pprof"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestAppRunStopsWhileTheGroupCannotForm: an App whose consumer group
// never forms (the coordinator takes its member's join and never answers,
// nor answers a leave) still returns from Run soon after its context
// ends: it leaves the group with the session timeout as deadline, then
// closes.
func TestAppRunStopsWhileTheGroupCannotForm(t *testing.T) {
	const session = time.Second
	e, err := kafka.Embedded(testContext(t), kafka.SeedTopics(2, "clicks"), kafka.FakeOptions(kfake.GroupMinSessionTimeout(session)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	fake := kafka.FakeCluster(e)
	stuck := make(chan struct{})
	var once sync.Once
	fake.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.JoinGroupRequest).MemberID == "" {
			return nil, nil, false // the coordinator gives the member its id
		}
		fake.KeepControl()
		once.Do(func() { close(stuck) })
		return nil, nil, true // and never answers its join
	})
	fake.ControlKey(int16(kmsg.LeaveGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		return nil, nil, true
	})
	conn := e.Connection()
	conn.ClientOptions = []kgo.Opt{kgo.SessionTimeout(session), kgo.HeartbeatInterval(100 * time.Millisecond)}
	app := kafka.NewApp(kafka.AppOptions{
		Connection: conn, Group: "stuck", Topics: []string{"clicks"}, Dir: "tasks",
		Options: []runtime.Option{runtime.FileSystem(vfs.NewMem())},
	}, func(task *kafka.Task) (kafka.Starter, error) {
		src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
		return typed.WriteTo(typed.From[fixtures.Click](src), typed.NewMemorySink[fixtures.Click]()), nil
	})
	ctx, cancel := context.WithCancel(testContext(t))
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	select {
	case <-stuck:
	case err := <-done:
		t.Fatalf("Run returned before its group was stuck: %v", err)
	}
	start := time.Now()
	cancel()
	// A bound for a hang, not a measure of speed: the leave's deadline is
	// the session timeout.
	select {
	case err := <-done:
		t.Logf("Run returned %v after %v", err, time.Since(start))
	case <-time.After(session + 20*time.Second):
		var dump strings.Builder
		pprof.Lookup("goroutine").WriteTo(&dump, 1)
		t.Fatalf("Run has not returned %v after its context ended; goroutines:\n%s", time.Since(start), dump.String())
	}
}

// TestAppStopsTasksTogether: the tasks of the partitions an instance gives
// up in a rebalance stop together, not one after another: each task's
// close waits until another task of the revoke is closing too, which
// tasks stopped one at a time never reach (the first would wait for its
// bound).
func TestAppStopsTasksTogether(t *testing.T) {
	const partitions = 16
	conn, adm := newCluster(t)
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "clicks", partitions)
	var mu sync.Mutex
	closing, alone := 0, 0
	another := make(chan struct{})
	started := make(chan int32, 2*partitions)
	newApp := func() *kafka.App {
		return kafka.NewApp(kafka.AppOptions{
			Connection: conn, Group: "together", Topics: []string{"clicks"}, Dir: t.TempDir(),
			Options: []runtime.Option{runtime.FileSystem(vfs.NewMem())},
		}, func(task *kafka.Task) (kafka.Starter, error) {
			defer func() { started <- task.Partition }()
			task.OnClose(func() {
				mu.Lock()
				if closing++; closing == 2 {
					close(another)
				}
				mu.Unlock()
				select {
				case <-another:
				case <-time.After(10 * time.Second): // a bound for a hang
					mu.Lock()
					alone++
					mu.Unlock()
				}
			})
			src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
			return typed.WriteTo(typed.From[fixtures.Click](src), typed.NewMemorySink[fixtures.Click]()), nil
		})
	}
	run := func(app *kafka.App) (context.CancelFunc, chan error) {
		ctx, cancel := context.WithCancel(testContext(t))
		done := make(chan error, 1)
		go func() { done <- app.Run(ctx) }()
		return cancel, done
	}
	wait := func(n int) {
		t.Helper()
		for range n {
			select {
			case <-started:
			case <-testContext(t).Done():
				t.Fatal("tasks did not start")
			}
		}
	}
	first := newApp()
	stopFirst, firstDone := run(first)
	wait(partitions)
	second := newApp()
	stopSecond, secondDone := run(second)
	// The second instance takes some partitions: the first revokes them.
	for len(second.Tasks()) == 0 || len(first.Tasks())+len(second.Tasks()) != partitions {
		wait(1)
	}
	mu.Lock()
	got, gotAlone := closing, alone
	mu.Unlock()
	if got < 2 {
		t.Fatalf("%d tasks closed in the revoke, want several", got)
	}
	if gotAlone > 0 {
		t.Fatalf("%d of the %d tasks the revoke stopped closed alone: the revoke stops them one at a time", gotAlone, got)
	}
	stopSecond()
	stopFirst()
	for _, done := range []chan error{firstDone, secondDone} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}
