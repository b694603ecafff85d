package kafka_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/internal/testenv"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
)

// The environment of the child process TestAppSurvivesSIGKILL starts:
// the brokers and the directory of its instance.
const (
	childBrokersEnv = "STREAMGEN_TEST_APP_BROKERS"
	childDirEnv     = "STREAMGEN_TEST_APP_DIR"
)

// groupRetry is how often the test looks at the group's offsets when
// nothing else happens: the App tries a refused commit again every half
// second.
const groupRetry = 200 * time.Millisecond

// fastGroup makes a group member that dies leave the group in three
// seconds, not the default 45.
var fastGroup = []kgo.Opt{kgo.SessionTimeout(3 * time.Second), kgo.HeartbeatInterval(300 * time.Millisecond)}

// newCounterApp is the App of the kill test: clicks counted per user,
// exactly once, five records a batch every 20 ms (so that the input
// lasts a few seconds), with the listeners given; changed, when set, is
// called as tasks start and stop.
func newCounterApp(conn kafka.Connection, dir string, changed func(), more ...runtime.Option) *kafka.App {
	if changed == nil {
		changed = func() {}
	}
	return kafka.NewApp(kafka.AppOptions{
		Connection:  conn,
		Group:       "killed",
		Topics:      []string{"clicks"},
		Dir:         dir,
		ExactlyOnce: true,
		Options:     append([]runtime.Option{runtime.WithTrigger(runtime.ProcessingTime(20 * time.Millisecond))}, more...),
		OnAssigned:  func([]int32) { changed() },
		OnRevoked:   func([]int32) { changed() },
	}, func(task *kafka.Task) (kafka.Starter, error) {
		src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 5})
		return countingTask(conn, task, src, countClicks), nil
	})
}

// printProgress prints a line per batch to stderr, for the parent.
type printProgress struct{ mu sync.Mutex }

func (p *printProgress) OnQueryProgress(qp runtime.QueryProgress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(os.Stderr, "committed %s batch %d\n", qp.Name, qp.BatchID)
}

// TestAppChildProcess is the instance TestAppSurvivesSIGKILL runs in a
// process of its own, and kills.
func TestAppChildProcess(t *testing.T) {
	brokers := os.Getenv(childBrokersEnv)
	if brokers == "" {
		t.Skip("the child process of TestAppSurvivesSIGKILL")
	}
	conn := kafka.Connection{Brokers: strings.Split(brokers, ","), ClientOptions: fastGroup}
	err := newCounterApp(conn, os.Getenv(childDirEnv), nil, runtime.Listener(&printProgress{})).Run(context.Background())
	t.Fatalf("the child's app ended: %v", err) // it runs until killed
}

// TestAppSurvivesSIGKILL runs the App in two instances, one in a process
// of its own, which is killed with SIGKILL while its tasks are in the
// middle of the input: the other instance takes its partitions once the
// group sees it gone, restores their state from the changelog and fences
// its transactions. The counts read back with read_committed are a plain
// loop's, and rise at every update: nothing lost, nothing doubled.
func TestAppSurvivesSIGKILL(t *testing.T) {
	testenv.SkipUnlessFull(t, "starts a process (examples/appcluster's test kills processes too)")
	conn, adm := newCluster(t, kafka.ListenAddr("127.0.0.1:0"), kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	conn.ClientOptions = fastGroup
	createTopic(t, adm, "clicks", 4)
	createTopic(t, adm, "counts", 2)
	in := clicks(1200, 12)
	produce(t, conn, clickRecords(t, "clicks", 4, in)...)

	// The child: all four partitions until the parent's instance joins.
	child := exec.Command(os.Args[0], "-test.run", "^TestAppChildProcess$")
	child.Env = append(os.Environ(), childBrokersEnv+"="+strings.Join(conn.Brokers, ","), childDirEnv+"="+t.TempDir())
	stderr, err := child.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	committed := make(chan string, 1024)
	go func() {
		defer close(exited)
		lines := bufio.NewScanner(stderr)
		for lines.Scan() {
			if line := lines.Text(); strings.HasPrefix(line, "committed ") {
				select {
				case committed <- line:
				default:
				}
			}
		}
		child.Wait()
	}()
	t.Cleanup(func() {
		child.Process.Kill()
		<-exited
	})
	ctx := testContext(t)
	await := func(n int, what string) {
		t.Helper()
		for range n {
			select {
			case <-committed:
			case <-exited:
				t.Fatalf("the child ended before %s", what)
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v", what, ctx.Err())
			}
		}
	}
	await(4, "its first batches")

	watch := newAppWatch()
	parent := newCounterApp(conn, t.TempDir(), watch.signal, runtime.Listener(watch))
	parentCtx, stopParent := context.WithCancel(ctx)
	defer stopParent()
	parentDone := make(chan error, 1)
	go func() { parentDone <- parent.Run(parentCtx) }()
	watch.waitFor(t, "the parent's instance to take partitions", func() bool { return len(parent.Tasks()) > 0 })
	for len(committed) > 0 { // what the child committed before the rebalance
		<-committed
	}
	await(2, "batches of the child after the rebalance")
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-exited
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	// The child was killed in the middle: a partition it ran was not
	// read to its end.
	if offsets, err := adm.FetchOffsets(ctx, "killed"); err != nil {
		t.Fatal(err)
	} else {
		behind := false
		ends.Each(func(o kadm.ListedOffset) {
			if c, _ := offsets.Lookup("clicks", o.Partition); c.At < o.Offset && !slices.Contains(parent.Tasks(), o.Partition) {
				behind = true
			}
		})
		if !behind {
			t.Fatal("the child had read all its partitions when it was killed: the test kills no task in the middle")
		}
	}

	watch.waitFor(t, "the parent's instance to run all four tasks", func() bool { return len(parent.Tasks()) == 4 })
	awaitGroupAtEnd(t, adm, watch, ends)
	stopParent()
	if err := <-parentDone; err != nil {
		t.Fatal(err)
	}
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// TestAppThreeInstancesOneDies runs the App in three instances, and stops
// one in the middle of the input as a process that dies does (its open
// transactions neither committed nor aborted): the other two take its
// partitions, fence its transactions and restore their state, and the
// counts read back with read_committed are a plain loop's, rising at
// every update.
func TestAppThreeInstancesOneDies(t *testing.T) {
	conn, adm := newCluster(t, kafka.FakeOptions(kfake.GroupMinSessionTimeout(100*time.Millisecond)))
	conn.ClientOptions = fastGroup
	createTopic(t, adm, "clicks", 4)
	createTopic(t, adm, "counts", 2)
	in := clicks(1200, 13)
	produce(t, conn, clickRecords(t, "clicks", 4, in)...)
	watch := newAppWatch()
	ctx := testContext(t)
	var apps []*runningApp
	for range 3 {
		app := newCounterApp(conn, t.TempDir(), watch.signal, runtime.Listener(watch))
		runCtx, cancel := context.WithCancel(ctx)
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(runCtx) }()
		defer r.cancel()
		apps = append(apps, r)
	}
	tasks := func(rs ...*runningApp) (all []int32, each []int) {
		for _, r := range rs {
			ts := r.app.Tasks()
			all = append(all, ts...)
			each = append(each, len(ts))
		}
		slices.Sort(all)
		return all, each
	}
	watch.waitFor(t, "the three instances to share the partitions", func() bool {
		all, each := tasks(apps...)
		return slices.Equal(all, []int32{0, 1, 2, 3}) && !slices.Contains(each, 0)
	})
	watch.waitFor(t, "a fifth of the input", func() bool { return watch.rows >= int64(len(in))/5 })
	dying := apps[1]
	if len(dying.app.Tasks()) == 0 {
		t.Fatal("the instance to stop runs no task")
	}
	dying.die(t)
	watch.mu.Lock()
	read := watch.rows
	watch.mu.Unlock()
	if read >= int64(len(in)) {
		t.Fatal("the input was all read when the instance stopped: the test stops no task in the middle")
	}
	survivors := []*runningApp{apps[0], apps[2]}
	watch.waitFor(t, "the two others to run the four tasks", func() bool {
		all, _ := tasks(survivors...)
		return slices.Equal(all, []int32{0, 1, 2, 3})
	})
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
	for _, r := range survivors {
		r.cancel()
		if err := <-r.done; err != nil {
			t.Fatal(err)
		}
	}
	onceEach(t, userCounts(t, conn, adm, kgo.ReadCommitted()), in)
}

// awaitClicksRead waits until the group's committed offsets reach the
// end of topic clicks as it is now.
func awaitClicksRead(t *testing.T, adm *kadm.Client, watch *appWatch) {
	t.Helper()
	ends, err := adm.ListEndOffsets(testContext(t), "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)
}

// awaitGroupAtEnd waits until the group "killed" has committed the end
// offsets of every partition of "clicks": the App's tasks, which its
// committed offsets follow, have read all the input. It fails the test
// at once if one of apps ends meanwhile.
func awaitGroupAtEnd(t *testing.T, adm *kadm.Client, watch *appWatch, ends kadm.ListedOffsets, apps ...*runningApp) {
	t.Helper()
	ctx := testContext(t)
	for {
		offsets, err := adm.FetchOffsets(ctx, "killed")
		if err != nil {
			t.Fatal(err)
		}
		var behind []string
		ends.Each(func(o kadm.ListedOffset) {
			if c, _ := offsets.Lookup("clicks", o.Partition); c.At < o.Offset {
				behind = append(behind, fmt.Sprintf("partition %d at %d of %d", o.Partition, c.At, o.Offset))
			}
		})
		if len(behind) == 0 {
			return
		}
		for _, a := range apps {
			a.alive(t, "the input read to its end")
		}
		select {
		case <-watch.changed: // a batch, a rebalance
		case <-time.After(groupRetry): // a commit the group refused, tried again
		case <-ctx.Done():
			t.Fatalf("the input was never read to its end (the group's offsets: %v): %v", behind, ctx.Err())
		}
	}
}
