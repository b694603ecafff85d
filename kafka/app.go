package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/runtime"
)

// AppOptions configure an App.
type AppOptions struct {
	Connection
	// Group is the consumer group the instances of the application share
	// (Kafka Streams' application.id): the partitions of the input are
	// divided among its members. It also names the changelog topic and
	// the transactional IDs by default. Required.
	Group string
	// Topics are the input topics. Required. With more than one they must
	// be co-partitioned, as Kafka Streams requires of a join's inputs:
	// the same number of partitions, a key in the same partition of each.
	// The group is balanced on the first; the task of partition p reads
	// partition p of every topic.
	Topics []string
	// Dir is where the tasks keep their checkpoints: Dir/<partition>.
	// Required. A partition's directory stays when its task moves to
	// another instance, so that its state is caught up from the changelog
	// rather than read in full when the partition comes back.
	Dir string
	// Changelog is the changelog topic, with one partition per input
	// partition; the default is Group and "-changelog".
	Changelog string
	// ExactlyOnce commits each task's batches in Kafka transactions (see
	// Transactions), with the transactional ID Group, "-" and the
	// partition; each task's sinks take them from Task.Transactions.
	// Without it each batch is copied to the changelog before it commits
	// (Changelog: at-least-once).
	ExactlyOnce bool
	// ChangelogOptions are further options of each task's changelog:
	// ReplicationFactor, ProduceTimeout, AsyncProgress (with ExactlyOnce).
	// Their Connection, Topic, Partitions and TransactionalID are the
	// App's.
	ChangelogOptions ChangelogOptions
	// Options are runtime options of every task's query (a trigger,
	// listeners, a state cache size: each task has its own). The App
	// sets the checkpoint and the committer.
	Options []runtime.Option
	// OnAssigned and OnRevoked, when set, are called with the partitions
	// whose tasks the instance starts and, once they have stopped, those
	// it gave up, from the group's goroutine.
	OnAssigned, OnRevoked func(partitions []int32)
}

// Starter is what a task's build function returns: a pipeline that
// starts as a query, such as a *typed.Writer.
type Starter interface {
	Start(ctx context.Context, opts ...runtime.Option) (*runtime.Query, error)
}

// Task is the part of an App that owns one partition of its input: one
// query, with its own checkpoint, changelog partition and, exactly once,
// transactions. Its build function makes the query's sources with Source
// and its Kafka sinks with Transactions. A Task is used by its build
// function only; its methods are not safe for concurrent use.
type Task struct {
	// Partition is the input partition the task owns.
	Partition int32
	app       *App
	txn       *Transactions
	closers   []func()
}

// Source returns a source of the task's partition of the App's topics,
// with opts for the rest (starting offsets, MaxOffsetsPerTrigger, ...):
// its Connection, Topics, TopicPattern and Partitions are the App's. It is
// closed with the task.
func (t *Task) Source(opts Options) *TopicSource {
	opts.Connection = t.app.opts.Connection
	opts.Topics, opts.TopicPattern = nil, ""
	opts.Partitions = map[string][]int32{}
	for _, topic := range t.app.opts.Topics {
		opts.Partitions[topic] = []int32{t.Partition}
	}
	if opts.Name == "" {
		opts.Name = "kafka:" + t.app.opts.Topics[0] + "/" + strconv.Itoa(int(t.Partition))
	}
	s := Source(opts)
	t.OnClose(s.Close)
	return s
}

// Transactions returns the task's transactions, for its Kafka sinks and
// dead-letter topic (SinkOptions.Transactions), or nil without
// AppOptions.ExactlyOnce.
func (t *Task) Transactions() *Transactions { return t.txn }

// OnClose registers f to run when the task has stopped: to close a sink
// the build function made.
func (t *Task) OnClose(f func()) { t.closers = append(t.closers, f) }

// App runs a streaming application over Kafka on any number of
// instances, as Kafka Streams does: the instances join one consumer group,
// the group divides the input's partitions among them, and an instance
// runs one task per partition it is given, each a query of its own over
// that partition, with its state in a checkpoint of its own and in the
// partition's changelog partition. When a partition moves (an instance
// joins, leaves or dies), the instance that gives it up stops its task
// after the batch in flight commits, and the one that takes it starts
// the task, which restores the partition's state from the changelog (from
// where its local checkpoint, if it has one, stopped) and resumes at the
// partition's committed offsets.
//
// Rows of a key must reach one partition (the message key is the
// grouping key, hashed by the producer), or each task counts its own
// part of the key. Each task keeps its own event-time watermark, as each
// Kafka Streams task keeps its own stream time.
//
// Make one with NewApp and call Run. The methods are safe for concurrent
// use.
type App struct {
	opts  AppOptions
	build func(*Task) (Starter, error)
	err   error

	mu    sync.Mutex
	tasks map[int32]*runningTask
	// group is the group's client, while Run runs; read are the offsets
	// each task's last batch read to, which the group's committed
	// offsets follow.
	group *kgo.Client
	read  map[int32]map[string]map[int32]kgo.EpochOffset
	// failed receives the first task failure.
	failed chan error
	// partitions is the input's partition count.
	partitions int32
}

// runningTask is a task's query as it runs: cancel stops it, done is
// closed once it has stopped and the task's resources are closed.
type runningTask struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// NewApp returns an application whose task of each partition runs the
// query build returns (see App). Options that do not validate make Run
// fail with what is wrong.
func NewApp(opts AppOptions, build func(*Task) (Starter, error)) *App {
	opts.Topics = slices.Clone(opts.Topics)
	opts.Options = slices.Clone(opts.Options)
	if opts.Changelog == "" && opts.Group != "" {
		opts.Changelog = opts.Group + "-changelog"
	}
	a := &App{opts: opts, build: build, tasks: map[int32]*runningTask{}, failed: make(chan error, 1), read: map[int32]map[string]map[int32]kgo.EpochOffset{}}
	a.err = opts.validate()
	if build == nil {
		a.err = errors.Join(a.err, errors.New("streamgen: kafka app: no build function"))
	}
	return a
}

func (o *AppOptions) validate() error {
	var errs []error
	if err := o.Connection.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Group == "" {
		errs = append(errs, errors.New("no Group"))
	}
	if len(o.Topics) == 0 {
		errs = append(errs, errors.New("no Topics"))
	}
	for _, t := range o.Topics {
		if !legalTopic.MatchString(t) {
			errs = append(errs, fmt.Errorf("Topics: %q is not a legal topic name", t))
		}
	}
	if o.Dir == "" {
		errs = append(errs, errors.New("no Dir"))
	}
	if o.ChangelogOptions.AsyncProgress && !o.ExactlyOnce {
		errs = append(errs, errors.New("ChangelogOptions.AsyncProgress needs ExactlyOnce"))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: kafka app: options: %w", err)
	}
	return nil
}

// Run joins the group and runs the tasks of the partitions the group
// gives this instance, until ctx is done (the tasks stop after their
// batches in flight, and the instance leaves the group: nil) or a task
// fails (the others stop too, and Run returns its error).
func (a *App) Run(ctx context.Context) error {
	if a.err != nil {
		return a.err
	}
	partitions, err := a.checkTopics(ctx)
	if err != nil {
		return err
	}
	a.partitions = partitions
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	group, err := a.opts.Connection.newClient(
		kgo.ConsumerGroup(a.opts.Group),
		kgo.ConsumeTopics(a.opts.Topics[0]),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			a.assigned(runCtx, assigned[a.opts.Topics[0]])
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			a.revoked(revoked[a.opts.Topics[0]])
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			a.revoked(lost[a.opts.Topics[0]])
		}),
	)
	if err != nil {
		return fmt.Errorf("streamgen: kafka app %q: client: %w", a.opts.Group, err)
	}
	a.mu.Lock()
	a.group = group
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		a.group = nil
		a.mu.Unlock()
	}()
	// The group only assigns partitions: the tasks' sources read them.
	group.PauseFetchTopics(a.opts.Topics[0])
	polled := make(chan struct{})
	go func() {
		// Polled, though nothing is fetched (the topic is paused): the
		// poll returns when Run ends.
		defer close(polled)
		for runCtx.Err() == nil {
			if group.PollFetches(runCtx).IsClientClosed() {
				return
			}
		}
	}()
	select {
	case <-runCtx.Done():
	case err = <-a.failed:
	}
	cancel()
	<-polled
	group.Close() // leaves the group: the revoke stops the tasks
	a.revoked(a.running())
	return err
}

// checkTopics returns the partition count of the input topics, which
// must be equal.
func (a *App) checkTopics(ctx context.Context) (int32, error) {
	client, err := a.opts.Connection.newClient()
	if err != nil {
		return 0, fmt.Errorf("streamgen: kafka app %q: client: %w", a.opts.Group, err)
	}
	defer client.Close()
	details, err := kadm.NewClient(client).ListTopics(ctx, a.opts.Topics...)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("streamgen: kafka app %q: describe the input topics: %w", a.opts.Group, err)
	}
	var n int32 = -1
	for _, topic := range a.opts.Topics {
		d, ok := details[topic]
		if !ok {
			return 0, fmt.Errorf("streamgen: kafka app %q: input topic %q does not exist", a.opts.Group, topic)
		}
		switch p := int32(len(d.Partitions)); {
		case n < 0:
			n = p
		case p != n:
			return 0, fmt.Errorf("streamgen: kafka app %q: topic %q has %d partitions and %q has %d: the inputs of an app must be co-partitioned (the same partitions, a key in the same partition of each)",
				a.opts.Group, a.opts.Topics[0], n, topic, p)
		}
	}
	return n, nil
}

// running returns the partitions of the tasks running.
func (a *App) running() []int32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	parts := make([]int32, 0, len(a.tasks))
	for p := range a.tasks {
		parts = append(parts, p)
	}
	slices.Sort(parts)
	return parts
}

// Tasks returns the partitions whose tasks run on this instance now.
func (a *App) Tasks() []int32 { return a.running() }

// assigned starts the tasks of partitions.
func (a *App) assigned(ctx context.Context, partitions []int32) {
	var started []int32
	for _, p := range partitions {
		a.mu.Lock()
		_, running := a.tasks[p]
		a.mu.Unlock()
		if running {
			continue
		}
		a.start(ctx, p)
		started = append(started, p)
	}
	if len(started) > 0 && a.opts.OnAssigned != nil {
		a.opts.OnAssigned(started)
	}
}

// start starts the task of partition p: its query runs on a goroutine
// that the task's entry owns, until it is cancelled or fails.
func (a *App) start(ctx context.Context, p int32) {
	ctx, cancel := context.WithCancel(ctx)
	rt := &runningTask{cancel: cancel, done: make(chan struct{})}
	a.mu.Lock()
	a.tasks[p] = rt
	a.mu.Unlock()
	go func() {
		defer close(rt.done)
		if err := a.runTask(ctx, p); err != nil && ctx.Err() == nil {
			select {
			case a.failed <- fmt.Errorf("streamgen: kafka app %q: task %d: %w", a.opts.Group, p, err):
			default:
			}
		}
	}()
}

// runTask builds, starts and runs the task of partition p until ctx is
// done or its query fails.
func (a *App) runTask(ctx context.Context, p int32) error {
	task := &Task{Partition: p, app: a}
	defer func() {
		for i := len(task.closers) - 1; i >= 0; i-- {
			task.closers[i]()
		}
	}()
	copts := a.opts.ChangelogOptions
	copts.Connection, copts.Topic, copts.Partitions = a.opts.Connection, a.opts.Changelog, a.partitions
	copts.TransactionalID = a.opts.Group + "-" + strconv.Itoa(int(p))
	var committer runtime.Option
	if a.opts.ExactlyOnce {
		task.txn = ExactlyOnce(copts)
		task.txn.task = p
		task.OnClose(task.txn.Close)
		committer = task.txn.Option()
	} else {
		committer = runtime.WithCommitter(func(s *runtime.Store) runtime.Committer {
			c := newChangelog(copts, s)
			c.task = p
			return c
		})
	}
	pipeline, err := a.build(task)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	opts := append(slices.Clone(a.opts.Options), runtime.Checkpoint(filepath.Join(a.opts.Dir, strconv.Itoa(int(p)))), committer,
		runtime.Listener(groupOffsets{a, p}))
	q, err := pipeline.Start(ctx, opts...)
	if err != nil {
		return err
	}
	slog.Info("streamgen: kafka app: task started", "group", a.opts.Group, "partition", p)
	return q.AwaitTermination()
}

// revoked stops the tasks of partitions, each after its batch in flight,
// and waits for them.
func (a *App) revoked(partitions []int32) {
	var stopped []int32
	for _, p := range partitions {
		a.mu.Lock()
		rt, ok := a.tasks[p]
		delete(a.tasks, p)
		a.mu.Unlock()
		if !ok {
			continue
		}
		rt.cancel()
		<-rt.done
		stopped = append(stopped, p)
		a.commitRead(p, true)
	}
	if len(stopped) > 0 && a.opts.OnRevoked != nil {
		a.opts.OnRevoked(stopped)
	}
}

// groupOffsets is a task's listener that moves the group's committed
// offsets of the task's partitions to where its batches have read, so
// that tools reading a group's lag see the App's. The offsets that
// count are in the task's checkpoint and changelog: these follow them,
// asynchronously, and at the latest when the task stops.
type groupOffsets struct {
	a *App
	p int32
}

func (g groupOffsets) OnQueryProgress(qp runtime.QueryProgress) {
	read := map[string]map[int32]kgo.EpochOffset{}
	for _, src := range qp.Sources {
		o, err := decodeOffsets(json.RawMessage(src.EndOffset))
		if err != nil {
			continue // not a Kafka source's
		}
		for tp, off := range o {
			if read[tp.topic] == nil {
				read[tp.topic] = map[int32]kgo.EpochOffset{}
			}
			read[tp.topic][tp.partition] = kgo.EpochOffset{Epoch: -1, Offset: off}
		}
	}
	g.a.mu.Lock()
	g.a.read[g.p] = read
	g.a.mu.Unlock()
	g.a.commitRead(g.p, false)
}

// commitRead commits to the group the offsets partition p's task read
// to: asynchronously, or (a task stopped, in a revoke) synchronously.
func (a *App) commitRead(p int32, sync bool) {
	a.mu.Lock()
	group, read := a.group, a.read[p]
	a.mu.Unlock()
	if group == nil || len(read) == 0 {
		return
	}
	done := func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			slog.Debug("streamgen: kafka app: commit the group's offsets", "group", a.opts.Group, "partition", p, "error", err)
		}
	}
	if sync {
		ctx, cancel := context.WithTimeout(context.Background(), defaultChangelogProduceTimeout)
		defer cancel()
		group.CommitOffsetsSync(ctx, read, done)
		return
	}
	group.CommitOffsets(context.Background(), read, done)
}
