package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
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
	// Required. Run (and Reset) lock it (Dir/APP.LOCK): one instance at
	// a time, in this process or another, may keep its checkpoints
	// there. A partition's directory stays when its task moves to
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
	// listeners, runtime.BlockCacheSize). The App sets the checkpoint,
	// the committer and the state cache (StateCacheSize), and, with
	// ExactlyOnce, a SyncInterval (DefaultTaskSyncInterval) that Options
	// may override. A dead-letter sink is not one of them (every task's
	// query would write its batches' letters over the others'): see
	// DeadLetters.
	Options []runtime.Option
	// DeadLetters, when set, makes the dead-letter sink of a task's
	// query, and of a repartition task's (whose letters are the records
	// for which RepartitionBy fails), once the task's sources are made:
	// one per task, written by that query alone, say a
	// runtime.DeadLetterDir under a directory of the task's Name, or a
	// DeadLetterTopic with the task's Transactions (its letters then in
	// each batch's transaction), its Name for WriterID and its Sources
	// for Originals; a sink that needs closing registers its Close with
	// Task.OnClose. Without it, a task's bad records are logged and
	// skipped.
	DeadLetters func(task *Task) runtime.DeadLetterSink
	// StateCacheSize is the memory the instance's tasks share for their
	// caches of committed state (runtime.SharedCaches), however many
	// partitions it owns, as Kafka Streams shares its record cache among
	// an instance's threads: each task's cache holds an equal share,
	// rebalanced as tasks start and stop. The default is a single
	// query's, runtime.DefaultStateCacheSize (256 MiB); a negative size
	// turns the state caches off. BlockCacheSize, when positive, is one
	// Pebble block cache that the tasks share, in which Pebble also
	// reserves each task's memtables (4 to 12 MiB a task, unless Options
	// set runtime.MemTableSize); with 0 each task has a block cache of its
	// own, of runtime.BlockCacheSize (128 MiB by default, and room for
	// its memtables).
	StateCacheSize, BlockCacheSize int64
	// RepartitionBy, when set, makes the App write the input through a
	// repartition topic first, as Kafka Streams does for a grouping by
	// something other than the message key: for each record, the key
	// RepartitionBy returns is the key of the record's copy in the topic
	// (Group and "-repartition", made at the first start with as many
	// partitions as the input, and checked after), so that the records of
	// a key are in one partition of it and reach one task. The tasks'
	// sources (Task.Source) then read the repartition topic, from its
	// earliest offset. The topic keeps its records until read (retention.ms
	// -1, set on a topic made by an earlier version too), and the App
	// deletes those its tasks have read and committed (by every source
	// of a task that reads it, as of a commit of the group's offsets
	// that the group took; with ChangelogOptions.AsyncProgress, by a
	// transaction committed) every 30 s, as Kafka Streams purges its
	// repartition topics. The copying
	// runs as a task of its own per input partition (a query named Group
	// "/repartition/" and the partition, its progress in the changelog
	// topic Group and "-repartition-changelog"), exactly once with
	// ExactlyOnce. A record for which RepartitionBy fails is a dead
	// letter of that query.
	RepartitionBy func(m *Message) ([]byte, error)
	// OnAssigned and OnRevoked, when set, are called with the partitions
	// whose tasks the instance starts and, once they have stopped, those
	// it gave up, from the group's goroutine. A task whose producer was
	// fenced (see App) is given up too, at the group's next assignment,
	// and started again if that assignment still gives its partition.
	OnAssigned, OnRevoked func(partitions []int32)
	// StandbyReplicas is how many other instances keep a warm copy of
	// each partition's state (Kafka Streams' num.standby.replicas): a
	// standby follows the partition's changelog into its own checkpoint
	// under Dir, never reading the input, so that when the partition
	// comes to it (its owner died or left) its task restores only the
	// changelog's tail. The group gives a partition to its owner if it
	// can, else to the instance with the freshest copy (see App). At
	// most the instances less one; 0, the default, keeps none.
	StandbyReplicas int
	// Tags say where this instance runs, as Kafka Streams' client.tag.*
	// settings do: {"zone": "eu-west-1a"}, say. StandbyTags are the keys
	// the group spreads each partition's standbys over (Kafka Streams'
	// rack.aware.assignment.tags): each standby goes, where one can, to
	// an instance whose value of each of those keys is none of the
	// partition's owner's and other standbys' (a key whose every value
	// they use holds back no more), so that losing a zone leaves a warm
	// copy elsewhere; then, among those, to the freshest copy and the
	// fewest standbys. Where no instance left can, the standby goes as
	// without tags, and the group's leader logs a warning. Spreading
	// comes before balance: a zone with few instances gets many standbys.
	// An instance without one of the keys is not held back by it, as in
	// Kafka Streams. Every key of StandbyTags must be in Tags; the group's
	// leader decides with its own StandbyTags, so give every instance the
	// same (a leader logs a warning naming the members whose differ).
	Tags        map[string]string
	StandbyTags []string
	// AcceptableRecoveryLag is how many changelog records behind its end
	// an instance's copy of a partition's state may be for the group to
	// count it caught up (Kafka Streams' acceptable.recovery.lag); the
	// default, 0, means 10,000. When a balance would move a partition
	// from its live owner (an instance joined) to an instance whose copy
	// is not caught up, the owner keeps it and that instance warms a copy
	// up as a standby; once the copy is caught up the instance asks for a
	// rebalance, which moves the partition with only the copy's tail to
	// restore, rather than stopping it for a cold restore.
	AcceptableRecoveryLag int64
	// MaxWarmupReplicas bounds the partitions kept with their owner while
	// a copy warms up (Kafka Streams' max.warmup.replicas); the default,
	// 0, means 2. Negative: none, a partition moves at once and its new
	// owner restores it.
	MaxWarmupReplicas int
	// OnTaskError, when set, decides what the failure of a task does (a
	// fenced task is not a failure: see App; nor is a checkpoint that
	// another process holds, such as streamgen inspect: the task starts
	// again, as below, until it is free; and a task whose store failed
	// and was left open, runtime.ErrStoreLeftOpen, ends Run whatever it
	// says: its checkpoint stays locked until the process ends), as Kafka Streams'
	// StreamsUncaughtExceptionHandler: StopInstance ends Run with the
	// error, which is what happens without it (SHUTDOWN_CLIENT), but for
	// a task that failed because Kafka was slow or out of reach for
	// longer than its writes wait (a write past ProduceTimeout, an error
	// Kafka calls retriable that the client gave up on,
	// TRANSACTION_ABORTABLE), which starts again as RestartTask says,
	// until Kafka answers, as Kafka Streams revives a corrupted task;
	// RestartTask starts the task again from its checkpoint, after a
	// pause that doubles with each restart of the partition since its
	// last batch, from 100 ms to 30 s, and the failed batch runs again
	// (REPLACE_THREAD). It is called from the task's goroutine: calls
	// for different partitions may be concurrent.
	OnTaskError func(partition int32, err error) TaskErrorAction
	// StateCleanupDelay is how long the checkpoint of a partition that
	// this instance neither runs nor keeps a standby of stays under Dir
	// (Kafka Streams' state.cleanup.delay.ms): while it stays, the
	// partition coming back restores only the changelog's tail, and the
	// group counts the copy when it places the partition; past the delay
	// it is removed, its disk given back. The default, 0, means 10
	// minutes; negative keeps every checkpoint.
	StateCleanupDelay time.Duration
	// InstanceID makes the instance a static member of the group
	// (Kafka's group.instance.id, KIP-345, which Kafka Streams passes
	// through): when it stops it does not leave the group, and when it
	// starts again with the same InstanceID within SessionTimeout the
	// group gives it its partitions back, their tasks starting from
	// their checkpoints, and moves no partition: a rolling restart costs
	// no rebalance. Give each instance its own, the same at every start
	// (a StatefulSet pod's name), and a SessionTimeout longer than a
	// restart takes. Of two instances started with one InstanceID, the
	// group fences the older: its Run ends with an error saying so.
	// Empty, the default: a dynamic member, which leaves the group when
	// it stops.
	InstanceID string
	// SessionTimeout is how long the group waits for a silent instance
	// before it moves the instance's partitions (an instance killed, a
	// machine lost): the time a failover takes to start. The default is
	// the client's (45 s); a heartbeat is sent every tenth of it.
	SessionTimeout time.Duration
	// RebalanceTimeout is how long the group gives its instances to
	// rejoin once a rebalance begins (Kafka's rebalance.timeout.ms): an
	// instance that has not rejoined by then, for instance one still
	// finishing the batch of a partition it gives up, leaves the group
	// and joins again. It also bounds how long an instance waits for an
	// answer to its join before it tries again (plus the client's request
	// timeout overhead, 10 s). The default is the client's (60 s).
	RebalanceTimeout time.Duration
	// AdvertisedAddr is the address ("host:port") this instance answers
	// reads of state on (App.StateHandler, served by the program), as
	// the other instances reach it: they forward a read of a key whose
	// partition this instance owns there. It is sent to the group in the
	// instance's join metadata; an instance forwards only to addresses
	// the group's assignment names. Empty: reads are not forwarded to
	// this instance.
	AdvertisedAddr string
	// KeyPartition, when set, gives the input partition of a grouping
	// key's encoding (a string key's bytes, an integer's 8 big-endian
	// bytes with the sign bit flipped, a record's binary encoding; a
	// window's or a grouping set's key without its window or set), for
	// StateHandler to find the task that holds it: for input partitioned
	// otherwise than by Kafka's default partitioner over that encoding.
	// Input keyed by an integer that a Java producer wrote with
	// IntegerSerializer or LongSerializer (4 or 8 big-endian bytes, the
	// sign bit kept) needs it, as Kafka Streams' queryMetadataForKey
	// needs the key's serializer: decode the 8 bytes given, and hash the
	// bytes the producer wrote.
	KeyPartition func(key []byte, partitions int32) int32
	// StateClient is the HTTP client StateHandler forwards reads with
	// (by default one that follows no redirect): one with TLS settings,
	// for instances that serve their state over TLS, with StateScheme
	// "https". The caller's Authorization and Cookie headers go with a
	// forwarded read, to the instance the group's assignment names.
	StateClient *http.Client
	StateScheme string
	// GroupingSetsKeepPartitions says that no set of a typed.GroupingSets
	// aggregation rolls up a dimension the input is partitioned by (as
	// sets (user, page) and (user) over input keyed by user), so that
	// each task holds all the rows of each of its keys: the App then runs
	// such an aggregation on an input of more than one partition, which
	// it otherwise refuses. Cube and Rollup, whose grand total takes rows
	// from every partition, are refused still, and so is a GroupingSets
	// with a set that rolls up every dimension.
	GroupingSetsKeepPartitions bool
}

// DefaultTaskSyncInterval is how often, with ExactlyOnce, a task syncs
// its local checkpoint (runtime.SyncInterval) unless Options say
// otherwise: each batch is durable in its Kafka transaction, so a sync
// per batch (a disk flush on the batch's path) buys nothing; it costs
// about half of a batch's time at 20k events/s.
const DefaultTaskSyncInterval = 100 * time.Millisecond

// Starter is what a task's build function returns: a pipeline that
// starts as a query, such as a *typed.Writer, or a *typed.Writers for a
// query of several outputs (its Kafka sinks all in the task's
// transactions, with ExactlyOnce).
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
	// name is the task's query's; sources those its Source, SourceOf and
	// GlobalSource made (the repartition task's input, for one).
	name    string
	sources []*TopicSource
	// fenced gives the task up as fenced (see App.start), for what finds
	// its producer fenced outside its query's batches.
	fenced func(error)
}

// fenceHookKey carries Task.fenced in the context of a task's run.
type fenceHookKey struct{}

// fenceHook returns the Task.fenced that ctx carries, or nil.
func fenceHook(ctx context.Context) func(error) {
	f, _ := ctx.Value(fenceHookKey{}).(func(error))
	return f
}

// Source returns a source of the task's partition of the App's topics
// (of the repartition topic, with RepartitionBy, read from its earliest
// offset), with opts for the rest (starting offsets, MaxOffsetsPerTrigger,
// ...): its Connection, Topics, TopicPattern and Partitions are the
// App's. Without StartingOffsets, a task with no checkpoint reads its
// partition from its earliest offset, as Kafka Streams' tasks do (its
// auto.offset.reset), where a plain Source starts at the latest. It is
// closed with the task.
func (t *Task) Source(opts Options) *TopicSource {
	opts.Connection = t.app.opts.Connection
	opts.StartingOffsets = taskStart(opts.StartingOffsets)
	opts.Topics, opts.TopicPattern = nil, ""
	opts.Partitions = map[string][]int32{}
	topics := t.app.opts.Topics
	if t.app.opts.RepartitionBy != nil {
		// Every copy is read, as Kafka Streams reads its repartition
		// topics: a task that starts after its copies were made (the
		// repartition task reads the input from the earliest offset)
		// would otherwise skip them.
		topics = []string{t.app.repartitionTopic()}
		opts.StartingOffsets = Earliest()
	}
	for _, topic := range topics {
		opts.Partitions[topic] = []int32{t.Partition}
	}
	if opts.Name == "" {
		opts.Name = "kafka:" + topics[0] + "/" + strconv.Itoa(int(t.Partition))
	}
	return t.track(Source(opts))
}

// taskStart is the starting offsets of a task's source: s, or Earliest
// when s is the zero value.
func taskStart(s StartingOffsets) StartingOffsets {
	if s.kind == startDefault {
		return Earliest()
	}
	return s
}

// SourceOf returns a source of the task's partition of topic alone, one
// of the App's Topics, with opts for the rest (see Source): for a join of
// two of them, each side its own source (the topics are co-partitioned:
// a key in the same partition of each). It is closed with the task.
func (t *Task) SourceOf(topic string, opts Options) *TopicSource {
	opts.Connection = t.app.opts.Connection
	opts.StartingOffsets = taskStart(opts.StartingOffsets)
	opts.Topics, opts.TopicPattern = nil, ""
	opts.Partitions = map[string][]int32{topic: {t.Partition}}
	if opts.Name == "" {
		opts.Name = "kafka:" + topic + "/" + strconv.Itoa(int(t.Partition))
	}
	return t.track(Source(opts))
}

// GlobalSource returns a source of every partition of topic, which need
// not be one of the App's Topics, for a table each task keeps whole (Kafka
// Streams' GlobalKTable): joined with the task's partition of a stream,
// it holds every key, whichever partition has it. Every task reads the
// whole topic into its own state. It is closed with the task.
//
// For a GlobalKTable's timing, give the table's rows no event time (no
// WithWatermark on it) and opts no MaxOffsetsPerTrigger: a join then
// applies the table's updates a batch read before the stream's rows, so
// the first batch joins against the whole topic, as a GlobalKTable is
// loaded before any stream row, and each later one against the table as
// far as it has read. With event time on both, the join merges the two
// by it, as it does a co-partitioned table.
func (t *Task) GlobalSource(topic string, opts Options) *TopicSource {
	opts.Connection = t.app.opts.Connection
	opts.StartingOffsets = taskStart(opts.StartingOffsets)
	opts.Topics, opts.TopicPattern, opts.Partitions = []string{topic}, "", nil
	if opts.Name == "" {
		opts.Name = "kafka:" + topic
	}
	return t.track(Source(opts))
}

// track keeps s among the task's sources, closed with the task.
func (t *Task) track(s *TopicSource) *TopicSource {
	t.sources = append(t.sources, s)
	t.OnClose(s.Close)
	return s
}

// Name returns the name of the task's query: the App's Group, "/" and
// the partition, or, for a repartition task, Group, "/repartition/" and
// the partition.
func (t *Task) Name() string { return t.name }

// Sources returns the Kafka sources the task's query reads (for a
// DeadLetterTopic's Originals): those its build function made, or the
// input of a repartition task.
func (t *Task) Sources() []*TopicSource { return slices.Clone(t.sources) }

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
// (a batch that is committing finishes; one that is not is abandoned,
// and runs again where the partition goes), and the one that takes it
// starts the task, which restores the partition's state from the
// changelog (from where its local checkpoint, if it has one, stopped) and
// resumes at the partition's committed offsets.
//
// Rows of a key must reach one partition (the message key is the
// grouping key, hashed by the producer), or each task counts its own
// part of the key. For that reason an aggregation over grouping sets
// (typed.Cube, Rollup, GroupingSets), whose rolled-up keys take rows from
// every partition, is refused on an input of more than one partition:
// the task fails at its start, saying so (see
// GroupingSetsKeepPartitions). Each task keeps its own event-time
// watermark, as each Kafka Streams task keeps its own stream time.
//
// Without ExactlyOnce nothing fences an instance that lost its
// partitions (it missed the group's session timeout) and has not seen it
// yet: for a moment it and the partitions' new owner may both write a
// partition's changelog and output. With ExactlyOnce the new owner's
// transactional ID fences it: the fenced task stops, its transaction
// aborted, and the instance rejoins the group, as a Kafka Streams thread
// does on a TaskMigratedException, and goes on with what the group gives
// it (the same partition too, when the fencing was the cluster aborting
// a transaction that outlived its timeout). Other task failures end Run,
// unless AppOptions.OnTaskError starts the task again.
// The input's partition count is read when Run starts, and must stay
// that of the changelog: partitions added to the input move keys to
// other partitions, away from their state, so an instance given a
// partition past the count it read stops with an error, and Run refuses
// an input whose count is not the changelog's, both saying to Reset the
// App, as Kafka Streams refuses internal topics of another count.
//
// Make one with NewApp and call Run, once. Tasks is safe for concurrent
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
	read  map[int32]*readOffsets
	// pendingReads are, with AsyncProgress, the offsets each task's last
	// batch read to, waiting for a transaction that holds the batch to
	// commit (promoteReadLocked): until then the batch may still be
	// aborted and run again. (A transaction commits every batch produced
	// before it: the last batch's wait is the others'.)
	pendingReads map[int32]pendingRead
	// commitNow wakes commitOffsets.
	commitNow chan struct{}
	// consumed are, with RepartitionBy, the repartition topic's offsets
	// each partition's task has read to and committed; purgeable those of
	// them known before a commit of the group's offsets that the group
	// took (the instance still owned the partitions then: a task of a
	// partition the group has given to another instance, which restored
	// from an earlier batch, goes on committing until it notices); and
	// purged those up to which purgeRepartition has deleted its records.
	consumed, purgeable, purged map[int32]int64
	// uncommitted are, with AsyncProgress, the offsets a task's batches
	// read the repartition topic to that its transactions have not
	// committed yet: they join consumed once one has.
	uncommitted map[int32]uncommittedOffset
	// commitLooks and purgePasses count commitOffsets' looks for offsets
	// to commit and purgeRepartition's passes (tests).
	commitLooks, purgePasses atomic.Int64
	// failed receives the first task failure.
	failed chan error
	// partitions is the input's partition count.
	partitions int32
	// abandoned makes the tasks stop as if their process died: their
	// transactions neither committed nor aborted (tests).
	abandoned atomic.Bool
	// ran is set by the first Run; statePartitions is the input's
	// partition count once Run has read it, for StateHandler.
	ran             atomic.Bool
	statePartitions atomic.Int32
	// forwardLogged is when (Unix nanoseconds) a read of state that could
	// not be forwarded was last logged.
	forwardLogged atomic.Int64
	// caches are the tasks' caches, made by Run.
	caches *runtime.SharedCaches

	// assignment is the group's last assignment, as the leader described
	// it to this instance: its standbys, every partition's owner and
	// their addresses. reassigned wakes the standbys' manager.
	assignment atomic.Pointer[assignmentInfo]
	reassigned chan struct{}
	// Guarded by mu: standbys are the standbys running, positions the
	// changelog offsets this instance's copies of the partitions hold
	// (the join metadata tells the group), standbyStats what each
	// standby last told, and queries the tasks' queries.
	standbys     map[int32]*runningTask
	positions    map[int32]int64
	standbyStats map[int32]standbyStats
	// standbyHeldPeak is the most records a standby has held at once.
	standbyHeldPeak int
	queries         map[int32]*runtime.Query
	// probed is the assignment for which a caught-up warm-up asked for a
	// rebalance, at probedAt.
	probed   *assignmentInfo
	probedAt time.Time
	// taskStatus describes the tasks running, rebalances the latest
	// assignment changes (Status).
	taskStatus map[int32]TaskStatus
	rebalances []Rebalance
	// handedOver marks the partitions whose standby gave its checkpoint
	// to the task starting; restoring are the tasks starting.
	handedOver map[int32]bool
	restoring  map[int32]restoring
	// restoredRecords and restoreTime add up the tasks' restores, and
	// assignments counts the assignment changes (Collector).
	restoredRecords int64
	restoreTime     time.Duration
	assignments     int64
	// owned are the partitions the group gave this instance, whether
	// their task runs or not; fenced are the partitions whose task
	// stopped, fenced, since OnRevoked was last called.
	owned  map[int32]bool
	fenced []int32
	// holders counts, by partition, the task and standby goroutines that
	// may have its checkpoint open; unheld is when a partition's
	// checkpoint was last seen held by none (see cleanStateDirs).
	holders map[int32]int
	unheld  map[int32]time.Time
	// fencedTasks counts the tasks fenced, taskRestarts the tasks started
	// again after a failure (Collector); restarts counts, by partition,
	// those since the partition's last batch, which sets the pause
	// before the next (restartTask).
	fencedTasks, taskRestarts int64
	restarts                  map[int32]int
	// waiting are the tasks that wait to start again after a failure
	// (restartTask), for Status.
	waiting map[int32]waitingTask
	// taskGoroutines are the tasks' goroutines, which Run waits for.
	taskGoroutines sync.WaitGroup
}

// restoring is a task that restores its state.
type restoring struct {
	from      string
	since     time.Time
	changelog *atomic.Pointer[changelog]
}

// runningTask is a task's query as it runs: cancel stops it, done is
// closed once it has stopped and the task's resources are closed.
type runningTask struct {
	cancel context.CancelFunc
	done   chan struct{}
	// stopped is closed by a task's cancel (nil for a standby).
	stopped chan struct{}
	// stopping is set (under App.mu) once a standby is cancelled; store
	// is a standby's open checkpoint, for stale reads.
	stopping bool
	store    *runtime.Store
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
	a := &App{opts: opts, build: build, tasks: map[int32]*runningTask{}, failed: make(chan error, 1), read: map[int32]*readOffsets{}, pendingReads: map[int32]pendingRead{}, commitNow: make(chan struct{}, 1),
		consumed: map[int32]int64{}, purgeable: map[int32]int64{}, purged: map[int32]int64{}, uncommitted: map[int32]uncommittedOffset{},
		reassigned: make(chan struct{}, 1), standbys: map[int32]*runningTask{}, positions: map[int32]int64{}, standbyStats: map[int32]standbyStats{},
		queries: map[int32]*runtime.Query{}, taskStatus: map[int32]TaskStatus{}, handedOver: map[int32]bool{}, restoring: map[int32]restoring{}, owned: map[int32]bool{},
		holders: map[int32]int{}, unheld: map[int32]time.Time{}, restarts: map[int32]int{}}
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
	if runtime.DeadLettersOf(o.Options...) != nil {
		errs = append(errs, errors.New("a dead-letter sink in Options would be every task's, each writing its batches' letters over the others': set DeadLetters, which makes one per task"))
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
	if o.BlockCacheSize < 0 {
		errs = append(errs, fmt.Errorf("BlockCacheSize %d is negative", o.BlockCacheSize))
	}
	if o.StandbyReplicas < 0 {
		errs = append(errs, fmt.Errorf("StandbyReplicas %d is negative", o.StandbyReplicas))
	}
	if o.AcceptableRecoveryLag < 0 {
		errs = append(errs, fmt.Errorf("AcceptableRecoveryLag %d is negative", o.AcceptableRecoveryLag))
	}
	for _, key := range o.StandbyTags {
		if _, ok := o.Tags[key]; !ok {
			errs = append(errs, fmt.Errorf("StandbyTags: %q is not a key of Tags (Kafka Streams: \"Contains invalid value [%s] which doesn't have corresponding tag set via [client.tag.] prefix.\")", key, key))
		}
	}
	if o.SessionTimeout < 0 {
		errs = append(errs, fmt.Errorf("SessionTimeout %v is negative", o.SessionTimeout))
	}
	if o.RebalanceTimeout < 0 {
		errs = append(errs, fmt.Errorf("RebalanceTimeout %v is negative", o.RebalanceTimeout))
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
	if a.ran.Swap(true) {
		return fmt.Errorf("streamgen: kafka app %q: Run was called before: an App runs once (make another with NewApp)", a.opts.Group)
	}
	unlock, err := a.lockDir()
	if err != nil {
		return err
	}
	defer unlock()
	partitions, err := a.checkTopics(ctx)
	if err != nil {
		return err
	}
	a.partitions = partitions
	a.statePartitions.Store(partitions)
	positions := a.localPositions(a.changelogTopicID(ctx))
	a.mu.Lock()
	a.positions = positions
	a.mu.Unlock()
	a.caches = runtime.NewSharedCaches(a.opts.StateCacheSize, a.opts.BlockCacheSize)
	defer a.caches.Close() // each task's store holds the block cache while it is open
	if a.opts.RepartitionBy != nil {
		if err := a.ensureRepartitionTopic(ctx); err != nil {
			return err
		}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The group client's own context outlives runCtx, so that the client
	// can leave the group after Run's context ends; cancelling it fails
	// the client's requests in flight (see leave).
	clientCtx, killClient := context.WithCancel(context.Background())
	defer killClient()
	groupOpts := []kgo.Opt{kgo.Balancers(&appBalancer{standbys: a.opts.StandbyReplicas, standbyTags: a.opts.StandbyTags, warm: a.opts.warmups(), info: a.memberInfo, assigned: a.setAssignment})}
	if t := a.opts.SessionTimeout; t > 0 {
		groupOpts = append(groupOpts, kgo.SessionTimeout(t), kgo.HeartbeatInterval(max(t/10, 10*time.Millisecond)))
	}
	if t := a.opts.RebalanceTimeout; t > 0 {
		groupOpts = append(groupOpts, kgo.RebalanceTimeout(t))
	}
	if id := a.opts.InstanceID; id != "" {
		groupOpts = append(groupOpts, kgo.InstanceID(id))
	}
	group, err := a.opts.Connection.newClient(append(groupOpts,
		kgo.WithContext(clientCtx),
		kgo.ConsumerGroup(a.opts.Group),
		kgo.ConsumeTopics(a.opts.Topics[0]),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(func(_ context.Context, _ *kgo.Client, assigned map[string][]int32) {
			a.assigned(runCtx, assigned[a.opts.Topics[0]])
		}),
		kgo.OnPartitionsRevoked(func(_ context.Context, _ *kgo.Client, revoked map[string][]int32) {
			a.revoked(revoked[a.opts.Topics[0]], false)
		}),
		kgo.OnPartitionsLost(func(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
			a.revoked(lost[a.opts.Topics[0]], true)
		}),
	)...)
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
	retried := make(chan struct{})
	go func() {
		defer close(retried)
		a.commitOffsets(runCtx, group)
	}()
	standbysDone := make(chan struct{})
	go func() {
		defer close(standbysDone)
		a.manageStandbys(runCtx)
	}()
	cleaned := make(chan struct{})
	go func() {
		defer close(cleaned)
		a.cleanStateDirsEvery(runCtx)
	}()
	polled := make(chan struct{})
	go func() {
		// Polled, though nothing is fetched (the topic is paused): the
		// poll returns when Run ends.
		defer close(polled)
		var warned time.Time
		for runCtx.Err() == nil {
			fetches := group.PollFetches(runCtx)
			if fetches.IsClientClosed() {
				return
			}
			// The group's own failures come as fetch errors: a join the
			// coordinator refuses for good ends Run; others are logged.
			for _, fe := range fetches.Errors() {
				if runCtx.Err() != nil || errors.Is(fe.Err, context.Canceled) {
					continue
				}
				if errors.Is(fe.Err, kerr.InvalidSessionTimeout) {
					a.fail(fmt.Errorf("streamgen: kafka app %q: the group coordinator refuses the session timeout %v (the broker's group.min/max.session.timeout.ms bound it): %w",
						a.opts.Group, a.opts.SessionTimeout, fe.Err))
					return
				}
				if errors.Is(fe.Err, kerr.FencedInstanceID) {
					a.fail(fmt.Errorf("streamgen: kafka app %q: another instance started with InstanceID %q, and the group fenced this one: %w",
						a.opts.Group, a.opts.InstanceID, fe.Err))
					return
				}
				if time.Since(warned) > 10*time.Second {
					warned = time.Now()
					slog.Warn("streamgen: kafka app: the group", "group", a.opts.Group, "error", fe.Err)
				}
			}
		}
	}()
	select {
	case <-runCtx.Done():
	case err = <-a.failed:
	}
	cancel()
	<-polled
	<-retried
	<-standbysDone
	<-cleaned
	a.leave(group, killClient) // the revoke stops the tasks
	a.revoked(a.running(), true)
	a.taskGoroutines.Wait() // and those fenced, no longer among them
	return err
}

// fail ends Run with err, unless another error has already.
func (a *App) fail(err error) {
	select {
	case a.failed <- err:
	default:
	}
}

// leave leaves the group, waiting for its coordinator at most the session
// timeout, and closes the group's client: a coordinator that does not
// answer (a group that cannot form, holding its member's join) must not
// hold Run after its context has ended. Past the deadline, kill fails the
// client's requests in flight, so that Close, which waits for the join in
// flight, returns at once. The group expires a member that left without a
// word after the session timeout anyway.
func (a *App) leave(group *kgo.Client, kill context.CancelFunc) {
	timeout, _ := group.OptValue(kgo.SessionTimeout).(time.Duration)
	if timeout <= 0 {
		timeout = 45 * time.Second // franz-go's default
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := group.LeaveGroupContext(ctx)
	cancel()
	if err != nil {
		slog.Warn("streamgen: kafka app: the group was not left in the session timeout; closing", "group", a.opts.Group, "timeout", timeout, "error", err)
		kill()
	}
	group.Close()
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
		return 0, fmt.Errorf("streamgen: kafka app %q: describe the input topics: %w", a.opts.Group, a.opts.Connection.explain(err))
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
	// The changelog, made with the input's partitions: another count
	// means the input's changed since, and each task's state no longer
	// holds its keys (Kafka Streams refuses its internal topics so).
	changelog, err := kadm.NewClient(client).ListTopics(ctx, a.opts.Changelog)
	if err != nil {
		return 0, fmt.Errorf("streamgen: kafka app %q: describe the changelog topic: %w", a.opts.Group, a.opts.Connection.explain(err))
	}
	if d, ok := changelog[a.opts.Changelog]; ok && d.Err == nil {
		if p := int32(len(d.Partitions)); p != n {
			return 0, fmt.Errorf("streamgen: kafka app %q: the changelog topic %q has %d partitions and the input %d: %s",
				a.opts.Group, a.opts.Changelog, p, n, partitionsChanged)
		}
	}
	return n, nil
}

// partitionsChanged says why an App refuses an input whose partition
// count changed, and what to do.
const partitionsChanged = "the input's partition count changed since the App's state was made, and a key's partition follows the count " +
	"(the producer hashes it over the partitions), so each task's state no longer holds the keys its partition now has: " +
	"stop every instance, Reset the App (its state is made again from the input), and run it again; or keep the input's partition count"

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
	// In one look: the tasks fenced since the last callback, given up
	// before they start again, and the partitions to start, those newly
	// assigned and those still owned whose task was fenced (a
	// cooperative assignment names only the new ones). A task fenced
	// after this look waits for the next callback, which the rejoin its
	// fencing asks for brings.
	a.mu.Lock()
	fenced := a.fenced
	a.fenced = nil
	for _, p := range partitions {
		a.owned[p] = true
	}
	var idle, added []int32
	for _, p := range slices.Sorted(maps.Keys(a.owned)) {
		if p >= a.partitions {
			added = append(added, p)
			delete(a.owned, p)
		} else if _, running := a.tasks[p]; !running {
			idle = append(idle, p)
		}
	}
	a.mu.Unlock()
	if len(added) > 0 {
		a.fail(fmt.Errorf("streamgen: kafka app %q: the group gave this instance partitions %v of the input, which had %d partitions when it started: %s",
			a.opts.Group, added, a.partitions, partitionsChanged))
		return
	}
	a.onRevoked(fenced)
	var started []int32
	for _, p := range idle {
		a.start(ctx, p, nil)
		started = append(started, p)
	}
	if len(started) > 0 {
		a.mu.Lock()
		a.rebalanced(Rebalance{Time: time.Now(), Assigned: started})
		a.mu.Unlock()
		if a.opts.OnAssigned != nil {
			a.opts.OnAssigned(started)
		}
	}
}

// start starts the task of partition p: its query runs on a goroutine
// that the task's entry owns, until it is cancelled or fails. With
// replace, it starts the task again in place of replace, unless that is
// no longer p's task (revoked meanwhile).
func (a *App) start(ctx context.Context, p int32, replace *runningTask) (started bool) {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	// rt.cancel, which a revoke calls, also ends a restart's pause (see
	// restartTask); cancel stops the task's queries only.
	stopped := make(chan struct{})
	var stopOnce sync.Once
	rt := &runningTask{done: make(chan struct{}), stopped: stopped, cancel: func() {
		cancel()
		stopOnce.Do(func() { close(stopped) })
	}}
	a.mu.Lock()
	if replace != nil && a.tasks[p] != replace {
		a.mu.Unlock()
		cancel()
		return false
	}
	a.tasks[p] = rt
	a.hold(p)
	// A standby of the partition gives its checkpoint to the task.
	standby := a.standbys[p]
	if standby != nil {
		// Running, or stopping (no longer wanted): either way it holds
		// the checkpoint until done.
		standby.stopping = true
		standby.cancel()
	}
	a.mu.Unlock()
	// A task fenced stops the partition's tasks, not the instance; so
	// does one that failed, when OnTaskError says to start it again.
	var fencedBy, restartAfter atomic.Pointer[error]
	// A commit outside the task's batches (AsyncProgress's, while it is
	// idle) that finds the producer fenced stops the task the same way.
	ctx = context.WithValue(ctx, fenceHookKey{}, func(err error) {
		fencedBy.CompareAndSwap(nil, &err)
		cancel()
	})
	run := func(what string, task func(context.Context, int32) error) func() {
		return func() {
			err := task(ctx, p)
			switch {
			case err == nil || ctx.Err() != nil:
			case taskMigrated(err):
				fencedBy.CompareAndSwap(nil, &err)
				cancel()
			case errors.Is(err, runtime.ErrCheckpointInUse):
				// Another process holds the partition's checkpoint
				// (inspect, a backup): as Kafka Streams retries a
				// task's state directory lock, the task starts again
				// after a pause (restartTask), whatever OnTaskError
				// says, until it is free or the partition moves.
				err = fmt.Errorf("streamgen: kafka app %q: %s %d: %w", a.opts.Group, what, p, err)
				restartAfter.CompareAndSwap(nil, &err)
				cancel()
			case errors.Is(err, runtime.ErrStoreLeftOpen):
				// The partition's store failed and was left open (a log
				// file that failed as Pebble moved to a new one): its
				// checkpoint stays locked until the process ends, so no
				// start in this one could take it.
				a.fail(fmt.Errorf("streamgen: kafka app %q: %s %d: %w", a.opts.Group, what, p, err))
			default:
				err = fmt.Errorf("streamgen: kafka app %q: %s %d: %w", a.opts.Group, what, p, err)
				// Without OnTaskError, a task that failed because Kafka
				// was slow or out of reach for longer than the client
				// waits starts again after a pause (restartTask), its
				// transaction aborted and its failed batch run again,
				// as Kafka Streams revives a task on a
				// TaskCorruptedException; any other failure ends Run.
				action := StopInstance
				if kafkaUnavailable(err) {
					action = RestartTask
				}
				if a.opts.OnTaskError != nil {
					action = a.opts.OnTaskError(p, err)
				}
				if action == RestartTask {
					restartAfter.CompareAndSwap(nil, &err)
					cancel()
					return
				}
				a.fail(err)
			}
		}
	}
	a.taskGoroutines.Add(1)
	go func() {
		defer a.taskGoroutines.Done()
		defer close(rt.done)
		defer a.release(p)
		if standby != nil {
			<-standby.done
			slog.Info("streamgen: kafka app: a standby becomes the task", "group", a.opts.Group, "partition", p)
		}
		var wg sync.WaitGroup
		if a.opts.RepartitionBy != nil {
			wg.Go(run("repartition task", a.runRepartition))
		}
		wg.Go(run("task", a.runTask))
		wg.Wait()
		if err := fencedBy.Load(); err != nil {
			a.taskFenced(p, rt, *err)
		} else if err := restartAfter.Load(); err != nil {
			a.restartTask(parent, p, rt, *err)
		}
	}()
	return true
}

// waitingTask is a task that waits to start again: why, and when it does.
type waitingTask struct {
	err  string
	next time.Time
}

// restartTask starts the failed task rt of partition p again, after a
// pause that doubles with each restart of the partition since its last
// batch (100 ms, at most 30 s), unless the partition is revoked or Run
// ends meanwhile.
func (a *App) restartTask(ctx context.Context, p int32, rt *runningTask, err error) {
	a.mu.Lock()
	a.restarts[p]++
	n := a.restarts[p]
	pause := min(100*time.Millisecond<<min(n-1, 9), 30*time.Second)
	if a.waiting == nil {
		a.waiting = map[int32]waitingTask{}
	}
	a.waiting[p] = waitingTask{err: err.Error(), next: time.Now().Add(pause)}
	a.mu.Unlock()
	slog.Warn("streamgen: kafka app: a task failed; it starts again", "group", a.opts.Group, "partition", p, "restarts", n, "after", pause, "error", err)
	select {
	case <-ctx.Done():
	case <-rt.stopped: // revoked: the revoke waits for this goroutine
	case <-time.After(pause):
	}
	a.mu.Lock()
	delete(a.waiting, p)
	a.mu.Unlock()
	select {
	case <-ctx.Done():
		return
	case <-rt.stopped:
		return
	default:
	}
	if a.start(ctx, p, rt) {
		a.mu.Lock()
		a.taskRestarts++
		a.mu.Unlock()
	}
}

// taskFenced gives up the task of partition p, whose producer was fenced,
// as Kafka Streams does on a TaskMigratedException: another instance took
// the partition while this one missed the group's session timeout (a
// pause, a network partition), or the cluster aborted a transaction that
// outlived its timeout; or whose producer lost its sequence (see
// taskMigrated). The instance rejoins the group, which starts
// the task again if it still gives this instance the partition (see
// assigned); its state comes back from its checkpoint and changelog, and
// the batch that was fenced runs again.
func (a *App) taskFenced(p int32, rt *runningTask, err error) {
	a.mu.Lock()
	if a.tasks[p] != rt { // revoked meanwhile
		a.mu.Unlock()
		return
	}
	delete(a.tasks, p)
	delete(a.read, p) // the restarted task's restored progress sets them
	a.fenced = append(a.fenced, p)
	a.fencedTasks++
	a.rebalanced(Rebalance{Time: time.Now(), Revoked: []int32{p}, Lost: true, Fenced: true})
	group := a.group
	a.mu.Unlock()
	slog.Warn("streamgen: kafka app: a task was fenced: the instance rejoins the group", "group", a.opts.Group, "partition", p, "error", err)
	if group != nil {
		group.ForceRebalance()
	}
}

// reportFenced calls OnRevoked with the partitions whose tasks were
// fenced since it was last called, from the group's goroutine.
func (a *App) reportFenced() {
	a.mu.Lock()
	fenced := a.fenced
	a.fenced = nil
	a.mu.Unlock()
	a.onRevoked(fenced)
}

// onRevoked calls OnRevoked, if set, with partitions, if any.
func (a *App) onRevoked(partitions []int32) {
	if len(partitions) > 0 && a.opts.OnRevoked != nil {
		a.opts.OnRevoked(partitions)
	}
}

// dirLock is the file under Dir whose lock an App's Run, or Reset, holds.
const dirLock = "APP.LOCK"

// lockDir takes the lock of Dir, as Kafka Streams locks its state
// directory: one App instance at a time keeps its checkpoints there, in
// this process or another. It returns the function that lets it go.
// (A partition's checkpoint held by another process, which the lock
// leaves out, such as streamgen inspect, only delays its task: see
// runTask's caller.)
func (a *App) lockDir() (unlock func(), err error) {
	fsys := runtime.FileSystemOf(a.opts.Options...)
	if err := fsys.MkdirAll(a.opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("streamgen: kafka app %q: make Dir %s: %w", a.opts.Group, a.opts.Dir, err)
	}
	dir := a.opts.Dir
	if fsys == vfs.Default {
		// One spelling of the directory, so that the lock's check within
		// the process (fcntl locks do not conflict there) sees two Apps
		// given it as "state" and "/abs/state", or through a link.
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
			if real, err := filepath.EvalSymlinks(abs); err == nil {
				dir = real
			}
		}
	}
	path := fsys.PathJoin(dir, dirLock)
	lock, err := fsys.Lock(path)
	if err != nil {
		return nil, fmt.Errorf("streamgen: kafka app %q: Dir %s is in use by another App instance, in this process or another (its lock %s: %v): give each instance a Dir of its own", a.opts.Group, a.opts.Dir, path, err)
	}
	return func() { lock.Close() }, nil
}

// runTask builds, starts and runs the task of partition p until ctx is
// done or its query fails.
func (a *App) runTask(ctx context.Context, p int32) error {
	task := &Task{Partition: p, app: a, fenced: fenceHook(ctx), name: a.opts.Group + "/" + strconv.Itoa(int(p))}
	defer func() {
		for i := len(task.closers) - 1; i >= 0; i-- {
			task.closers[i]()
		}
	}()
	// Where the task's state comes from, as Status tells it.
	a.mu.Lock()
	from := "changelog"
	if a.handedOver[p] {
		from = "standby"
	} else if _, ok := a.positions[p]; ok {
		from = "checkpoint"
	}
	delete(a.handedOver, p)
	a.mu.Unlock()
	copts := a.opts.ChangelogOptions
	copts.Connection, copts.Topic, copts.Partitions = a.opts.Connection, a.opts.Changelog, a.partitions
	copts.TransactionalID = a.opts.Group + "-" + strconv.Itoa(int(p))
	committer, txn, made := a.taskCommitter(copts, task, from == "standby")
	task.txn = txn
	pipeline, err := a.build(task)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	var opts []runtime.Option
	if a.opts.ExactlyOnce {
		// The batch's transaction is its durable record: the local
		// checkpoint need not be synced at every batch (one that a crash
		// leaves behind is caught up from the changelog at the next
		// start). Options given override it.
		opts = append(opts, runtime.SyncInterval(DefaultTaskSyncInterval))
	}
	opts = append(append(opts, a.opts.Options...), runtime.CheckOperators(a.checkOperators), runtime.Checkpoint(filepath.Join(a.opts.Dir, strconv.Itoa(int(p)))), committer,
		runtime.Name(task.name), runtime.WithSharedCaches(a.caches))
	if a.opts.DeadLetters != nil {
		opts = append(opts, runtime.DeadLetters(a.opts.DeadLetters(task)))
	}
	// (With RepartitionBy, the group's offsets are of the repartition
	// task's input.)
	listener := groupOffsets{a: a, p: p, task: true, offsets: a.opts.RepartitionBy == nil}
	if copts.AsyncProgress {
		listener.txn = txn
	}
	opts = append(opts, runtime.Listener(listener))
	// While it restores, Status reports how far.
	a.mu.Lock()
	a.restoring[p] = restoring{from: from, since: time.Now(), changelog: made}
	a.mu.Unlock()
	q, err := pipeline.Start(ctx, opts...)
	a.mu.Lock()
	delete(a.restoring, p)
	a.mu.Unlock()
	if err != nil {
		return err
	}
	slog.Debug("streamgen: kafka app: task started", "group", a.opts.Group, "partition", p)
	if a.opts.RepartitionBy == nil {
		a.followStore(p, made.Load())
	}
	a.mu.Lock()
	a.queries[p] = q
	ts := TaskStatus{Partition: p, Started: time.Now(), RestoredFrom: from}
	if c := made.Load(); c != nil {
		ts.RestoredRecords, ts.RestoreTook = c.restored, c.restoreTook
	}
	a.taskStatus[p] = ts
	a.restoredRecords += ts.RestoredRecords
	a.restoreTime += ts.RestoreTook
	a.mu.Unlock()
	slog.Info("streamgen: kafka app: task restored", "group", a.opts.Group, "partition", p, "from", from, "records", ts.RestoredRecords, "took", ts.RestoreTook)
	err = q.AwaitTermination()
	a.mu.Lock()
	if a.queries[p] == q {
		delete(a.queries, p)
		delete(a.taskStatus, p)
	}
	if c := made.Load(); c != nil {
		// The query has stopped: its changelog's offsets are still.
		if at, ok := c.ends[p]; ok {
			a.positions[p] = at
		}
	}
	a.mu.Unlock()
	return err
}

// checkOperators refuses a task's pipeline that the App cannot run
// right: an aggregation over grouping sets (typed.Cube, Rollup,
// GroupingSets) on an input of more than one partition. Its rolled-up
// keys (the grand total, a key with the dimension input is partitioned
// by rolled up) take rows from every partition, and each task, seeing
// only its own, would write its partition's share under the key, as if
// it were the whole. GroupingSetsKeepPartitions lets groupingSets run.
func (a *App) checkOperators(ops []runtime.OperatorInfo) error {
	if a.partitions <= 1 {
		return nil
	}
	for _, op := range ops {
		if op.Kind == "groupingSets" && a.opts.GroupingSetsKeepPartitions && slices.Contains(op.GroupingSets, uint32(1)<<op.Dimensions-1) {
			return fmt.Errorf("the groupingSets aggregation %q cannot run in an App of %d partitions, GroupingSetsKeepPartitions or not: one of its sets rolls up every dimension, and that grand total takes rows from every partition. "+
				"Run it on an input of one partition, or leave the grand total to another query", op.Name, a.partitions)
		}
		if runtime.IsGroupingSetKind(op.Kind) && (op.Kind != "groupingSets" || !a.opts.GroupingSetsKeepPartitions) {
			return fmt.Errorf("the %s aggregation %q cannot run in an App of %d partitions: its rolled-up keys take rows from every partition, and each task sees only its own, so each would write a share of a key's aggregate as if it were the whole. "+
				"Run it on an input of one partition, or in two Apps: the first writes each row under each of its grouping sets' keys to a topic keyed by them, and the second aggregates that topic by key%s",
				op.Kind, op.Name, a.partitions, keepHint(op.Kind))
		}
	}
	return nil
}

// keepHint names, in the refusal of a groupingSets aggregation, the
// setting for sets that keep the partitioning dimension.
func keepHint(kind string) string {
	if kind != "groupingSets" {
		return ""
	}
	return "; if no set rolls up the dimension the input is partitioned by, set GroupingSetsKeepPartitions"
}

// taskCommitter returns the committer option of a task's query (its
// changelog partition, through transactions with ExactlyOnce, which it
// returns too) and where its changelog will be once the query has
// started. standbyCopy says the task starts on the copy a standby
// handed over (see changelog.standbyCopy).
func (a *App) taskCommitter(copts ChangelogOptions, task *Task, standbyCopy bool) (runtime.Option, *Transactions, *atomic.Pointer[changelog]) {
	var txn *Transactions
	if a.opts.ExactlyOnce {
		txn = ExactlyOnce(copts)
		txn.task, txn.app = task.Partition, a
		task.OnClose(txn.Close)
	}
	made := new(atomic.Pointer[changelog])
	return runtime.WithCommitter(func(s *runtime.Store) runtime.Committer {
		c := newChangelog(copts, s)
		c.txn, c.task, c.onFenced, c.standbyCopy = txn, task.Partition, task.fenced, standbyCopy
		made.Store(c)
		return c
	}), txn, made
}

// followStore moves the group's offsets of partition p to those of the
// task's checkpoint as it starts (restored, perhaps, from a changelog
// that an instance that died wrote further than it committed to the
// group): a task with nothing new to read runs no batch to move them. It
// reads the progress Restore recorded, not the store, which the query may
// already be closing.
func (a *App) followStore(p int32, c *changelog) {
	if c == nil || !c.restoredHasProgress {
		return
	}
	read := offsetsRead(c.restoredProgress.Offsets)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.read[p] != nil || len(read) == 0 {
		return // a batch has reported already: its offsets are newer
	}
	a.read[p] = &readOffsets{offsets: read, seq: 1}
	a.signalCommit()
}

// revoked stops the tasks of partitions (a batch that is committing
// finishes; one that is not is abandoned), all at once, and waits for
// them; for partitions revoked, not lost, it commits their offsets to the
// group. A revoke of many partitions takes about one task's stop.
func (a *App) revoked(partitions []int32, lost bool) {
	defer a.reportFenced()
	var stopped []int32
	var stopping []*runningTask
	a.mu.Lock()
	for _, p := range partitions {
		delete(a.owned, p)
		if rt, ok := a.tasks[p]; ok {
			delete(a.tasks, p)
			rt.cancel()
			stopped, stopping = append(stopped, p), append(stopping, rt)
		}
	}
	a.mu.Unlock()
	if len(stopping) > 0 {
		// A revoke holds the partitions from their next owner until it
		// returns: its start and its length are in the log.
		slog.Info("streamgen: kafka app: stopping the tasks of revoked partitions", "group", a.opts.Group, "partitions", stopped, "lost", lost)
		defer func(start time.Time) {
			slog.Info("streamgen: kafka app: revoked partitions released", "group", a.opts.Group, "partitions", stopped, "took", time.Since(start))
		}(time.Now())
	}
	for i, rt := range stopping {
		<-rt.done
		// What its task read is the next owner's to purge (a lost
		// partition's task may have gone on after the group gave it
		// away).
		a.mu.Lock()
		delete(a.consumed, stopped[i])
		delete(a.uncommitted, stopped[i])
		a.mu.Unlock()
		if !lost { // a lost partition's commit would not be accepted
			a.commitRevoked(stopped[i])
			continue
		}
		// Where its next task's restored progress says, not where
		// this one read to.
		a.mu.Lock()
		delete(a.read, stopped[i])
		delete(a.pendingReads, stopped[i])
		a.mu.Unlock()
	}
	if len(stopped) > 0 {
		a.mu.Lock()
		a.rebalanced(Rebalance{Time: time.Now(), Revoked: stopped, Lost: lost})
		a.mu.Unlock()
		a.onRevoked(stopped)
	}
}

// groupOffsets is a task's listener that moves the group's committed
// offsets of the task's partitions to where its batches have read, so
// that tools reading a group's lag see the App's. The offsets that
// count are in the task's checkpoint and changelog: these follow them,
// asynchronously, and at the latest when the task stops; with
// AsyncProgress, those of the batches in Kafka (see pendingReads).
type groupOffsets struct {
	a *App
	p int32
	// task is set for the partition's task, not its repartition task:
	// a batch of the task's own resets its restart count. offsets is set
	// for the query whose input the group's offsets are of.
	task, offsets bool
	// txn is set for a task with AsyncProgress: its transactions commit
	// a batch after the batch reports its progress.
	txn *Transactions
}

// uncommittedOffset is an offset of the repartition topic that a task's
// batches up to batch read to, with AsyncProgress: their records are in
// Kafka once a transaction of txn that holds batch has committed (the
// batch's changelog records were produced into the transaction open as
// it committed locally, which the batch itself may have committed, or a
// commit while idle, before it reported its progress). A task stopped
// with its transaction aborted leaves txn where it was: the offset never
// joins consumed.
type uncommittedOffset struct {
	txn    *Transactions
	batch  int64
	offset int64
}

// promoteLocked moves partition p's uncommitted offset to consumed once
// its transactions have committed it; a.mu is held.
func (a *App) promoteLocked(p int32) {
	u, ok := a.uncommitted[p]
	if ok && u.txn.inKafka.Load() > u.batch {
		a.consumed[p] = max(a.consumed[p], u.offset)
		delete(a.uncommitted, p)
	}
}

func (g groupOffsets) OnQueryProgress(qp runtime.QueryProgress) {
	offsets := map[string]json.RawMessage{}
	for i, src := range qp.Sources {
		offsets[strconv.Itoa(i)] = json.RawMessage(src.EndOffset)
	}
	read := offsetsRead(offsets)
	if g.task {
		consumed, ok := g.consumed(offsets)
		g.a.mu.Lock()
		delete(g.a.restarts, g.p) // a batch ran: a later failure waits the least again
		switch {
		case ok && g.txn != nil:
			// Committed once a transaction that holds the batch is (the
			// batch may have committed one itself, or a commit while idle):
			// a restore reads from what the last one committed.
			g.a.promoteLocked(g.p)
			u, waits := g.a.uncommitted[g.p]
			if !waits || u.txn != g.txn {
				u = uncommittedOffset{txn: g.txn}
			}
			u.batch, u.offset = max(u.batch, qp.BatchID), max(u.offset, consumed)
			g.a.uncommitted[g.p] = u
		case ok:
			// Committed: the task never reads before it again.
			g.a.consumed[g.p] = max(g.a.consumed[g.p], consumed)
		}
		g.a.mu.Unlock()
	}
	if !g.offsets || len(read) == 0 {
		return
	}
	g.a.mu.Lock()
	defer g.a.mu.Unlock()
	if g.txn != nil {
		// With AsyncProgress the batch is in Kafka once a transaction
		// that holds it commits, which may be after a later batch, or
		// never (aborted, the batch runs again): the group's offsets
		// wait for it, as Kafka Streams commits them in the
		// transaction. (Those of an earlier start of the task, whose
		// transaction did not commit, are replaced.)
		g.a.promoteReadLocked(g.p)
		g.a.pendingReads[g.p] = pendingRead{txn: g.txn, batch: qp.BatchID, offsets: read}
		g.a.promoteReadLocked(g.p)
		return
	}
	g.a.setReadLocked(g.p, read)
}

// consumed returns, with RepartitionBy, the least offset of the task's
// partition of the repartition topic that its sources (each of which
// reports its offsets in every batch) have read to: a task may read it
// through more than one source.
func (g groupOffsets) consumed(sources map[string]json.RawMessage) (int64, bool) {
	if g.a.opts.RepartitionBy == nil {
		return 0, false
	}
	tp := topicPartition{topic: g.a.repartitionTopic(), partition: g.p}
	least, found := int64(0), false
	for _, raw := range sources {
		o, err := decodeOffsets(raw)
		if err != nil {
			continue // not a Kafka source's
		}
		if off, ok := o[tp]; ok && (!found || off < least) {
			least, found = off, true
		}
	}
	return least, found
}

// offsetsRead reads the Kafka offsets among sources' offsets (others are
// skipped) as the group commits them.
func offsetsRead(sources map[string]json.RawMessage) map[string]map[int32]kgo.EpochOffset {
	read := map[string]map[int32]kgo.EpochOffset{}
	for _, raw := range sources {
		o, err := decodeOffsets(raw)
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
	return read
}

// readOffsets are the offsets a task has read to: seq numbers their
// updates, and committed is the seq the group last confirmed.
type readOffsets struct {
	offsets        map[string]map[int32]kgo.EpochOffset
	seq, committed int64
}

// pendingRead is what a batch of a task with AsyncProgress read to,
// waiting for txn to commit the batch.
type pendingRead struct {
	txn     *Transactions
	batch   int64
	offsets map[string]map[int32]kgo.EpochOffset
}

// setReadLocked records that the task of p has read to offsets, for the
// group's next commit; a.mu is held.
func (a *App) setReadLocked(p int32, offsets map[string]map[int32]kgo.EpochOffset) {
	r := a.read[p]
	if r == nil {
		r = &readOffsets{}
		a.read[p] = r
	}
	r.offsets, r.seq = offsets, r.seq+1
	a.signalCommit()
}

// promoteReadLocked moves the offsets of the task of p's last batch
// from pendingReads to read once the batch is in Kafka (a transaction
// that holds it committed), as promoteLocked does the consumed offsets;
// a.mu is held.
func (a *App) promoteReadLocked(p int32) {
	r, ok := a.pendingReads[p]
	if ok && r.txn.inKafka.Load() > r.batch {
		a.setReadLocked(p, r.offsets)
		delete(a.pendingReads, p)
	}
}

// signalCommit wakes commitOffsets; a.mu is held.
func (a *App) signalCommit() {
	select {
	case a.commitNow <- struct{}{}:
	default:
	}
}

// groupCommitRetry is how often commitOffsets looks again for offsets
// the group has not confirmed (a commit that raced a rebalance).
const groupCommitRetry = 500 * time.Millisecond

// commitOffsets commits, until ctx is done, the offsets the running
// tasks have read to and the group has not confirmed: when a task
// reports a batch, and every groupCommitRetry. It is the only goroutine
// that commits while tasks run, so the queries never wait on the group
// (a commit waits out a rebalance), and commits are sent in order.
func (a *App) commitOffsets(ctx context.Context, group *kgo.Client) {
	tick := time.NewTicker(groupCommitRetry)
	defer tick.Stop()
	var purge <-chan time.Time
	if a.purges() {
		t := time.NewTicker(repartitionPurgeInterval)
		defer t.Stop()
		purge = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-purge:
			a.purgeRepartition(ctx, group)
			a.purgePasses.Add(1)
			continue
		case <-tick.C:
		case <-a.commitNow:
		}
		a.commitRead(ctx, group)
		a.commitLooks.Add(1)
	}
}

// commitRead commits the offsets the running tasks have read to and the
// group has not confirmed (see commitOffsets).
func (a *App) commitRead(ctx context.Context, group *kgo.Client) {
	a.mu.Lock()
	all := map[string]map[int32]kgo.EpochOffset{}
	seqs := map[int32]int64{}
	// With purging, a commit also confirms the offsets read from the
	// repartition topic: one of offsets committed before, when only
	// they moved.
	for p := range a.uncommitted {
		a.promoteLocked(p) // (deleting p while ranging is safe)
	}
	for p := range a.pendingReads {
		a.promoteReadLocked(p)
	}
	consumed := maps.Clone(a.consumed)
	confirm := false
	for p, o := range consumed {
		confirm = confirm || o > a.purgeable[p]
	}
	for p, r := range a.read {
		if _, running := a.tasks[p]; !running || r.committed >= r.seq && !confirm {
			continue
		}
		seqs[p] = r.seq
		for topic, parts := range r.offsets {
			if all[topic] == nil {
				all[topic] = map[int32]kgo.EpochOffset{}
			}
			maps.Copy(all[topic], parts)
		}
	}
	a.mu.Unlock()
	if len(all) == 0 {
		return
	}
	group.CommitOffsetsSync(ctx, all, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err = commitError(resp, err); err != nil {
			slog.Debug("streamgen: kafka app: commit the group's offsets", "group", a.opts.Group, "error", err)
			return
		}
		a.mu.Lock()
		for p, seq := range seqs {
			if r := a.read[p]; r != nil {
				r.committed = max(r.committed, seq)
			}
		}
		for p, o := range consumed {
			// (Not a partition given up meanwhile: a commit waits
			// out a rebalance, and is then the new generation's.)
			if _, held := a.consumed[p]; held {
				a.purgeable[p] = max(a.purgeable[p], o)
			}
		}
		a.mu.Unlock()
	})
}

// repartitionPurgeInterval is how often an App deletes the records of
// its repartition topic that its tasks have read and committed, as
// Kafka Streams' repartition.purge.interval.ms (30 s).
var repartitionPurgeInterval = 30 * time.Second

// purges reports whether the App deletes the records of its repartition
// topic once read: with RepartitionBy. (With AsyncProgress, only what
// the tasks' transactions have committed: see uncommittedOffset.)
func (a *App) purges() bool { return a.opts.RepartitionBy != nil }

// purgeRepartition deletes the records of the repartition topic before
// the offsets its tasks have read and committed, as known at a commit of
// the group's offsets that the group took (DeleteRecords), as Kafka
// Streams purges its repartition topics after a commit: the topic keeps
// its records until then (retention.ms -1), however late a task reads
// them.
func (a *App) purgeRepartition(ctx context.Context, group *kgo.Client) {
	topic := a.repartitionTopic()
	offsets := kadm.Offsets{}
	a.mu.Lock()
	for p, o := range a.purgeable {
		if o > a.purged[p] {
			offsets.AddOffset(topic, p, o, -1)
		}
	}
	a.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	resp, err := kadm.NewClient(group).DeleteRecords(ctx, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		slog.Warn("streamgen: kafka app: delete the records read from the repartition topic", "group", a.opts.Group, "topic", topic, "error", err)
		return
	}
	a.mu.Lock()
	offsets.Each(func(o kadm.Offset) { a.purged[o.Partition] = max(a.purged[o.Partition], o.At) })
	a.mu.Unlock()
}

// commitRevoked commits, in a revoke, what partition p's task read to,
// before the partition moves.
func (a *App) commitRevoked(p int32) {
	a.mu.Lock()
	a.promoteReadLocked(p) // (the task's stop commits its open transaction)
	group, r := a.group, a.read[p]
	delete(a.read, p)
	delete(a.pendingReads, p)
	a.mu.Unlock()
	if group == nil || r == nil || r.committed >= r.seq {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), defaultChangelogProduceTimeout)
	defer cancel()
	group.CommitOffsetsSync(ctx, r.offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err = commitError(resp, err); err != nil {
			slog.Debug("streamgen: kafka app: commit the group's offsets of a revoked partition", "group", a.opts.Group, "partition", p, "error", err)
		}
	})
}

// commitError is the error of an offset commit: its request's, or the
// first of its partitions'.
func commitError(resp *kmsg.OffsetCommitResponse, err error) error {
	if err != nil || resp == nil {
		return err
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if perr := kerr.ErrorForCode(p.ErrorCode); perr != nil {
				return perr
			}
		}
	}
	return nil
}

// repartitionTopic is the topic RepartitionBy's copies go to.
func (a *App) repartitionTopic() string { return a.opts.Group + "-repartition" }

// ensureRepartitionTopic creates the repartition topic with the input's
// partition count, or checks the one there.
func (a *App) ensureRepartitionTopic(ctx context.Context) error {
	client, err := a.opts.Connection.newClient()
	if err != nil {
		return fmt.Errorf("streamgen: kafka app %q: client: %w", a.opts.Group, err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	topic := a.repartitionTopic()
	rf := a.opts.ChangelogOptions.ReplicationFactor
	if rf == 0 {
		rf = -1
	}
	// Kept until read, as Kafka Streams keeps its repartition topics
	// (retention.ms -1): a copy of an old record, or one a task reads
	// late, would otherwise go at the broker's retention; the App deletes
	// the records its tasks have read (purgeRepartition).
	forever := "-1"
	resp, err := adm.CreateTopic(ctx, a.partitions, rf, map[string]*string{"retention.ms": &forever}, topic)
	if err == nil {
		err = resp.Err
	}
	if err == nil {
		return nil
	}
	if !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("streamgen: kafka app %q: create the repartition topic %q: %w", a.opts.Group, topic, err)
	}
	details, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		return fmt.Errorf("streamgen: kafka app %q: describe the repartition topic %q: %w", a.opts.Group, topic, err)
	}
	if n := int32(len(details[topic].Partitions)); n != a.partitions {
		return fmt.Errorf("streamgen: kafka app %q: the repartition topic %q has %d partitions, and the input %d: they must be equal (delete the topic to have it made again)",
			a.opts.Group, topic, n, a.partitions)
	}
	// A topic made by an earlier version kept the broker's retention.
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var rc kadm.ResourceConfig
		if rc, err = configs.On(topic, nil); err == nil {
			err = rc.Err
		}
		for _, c := range rc.Configs {
			if c.Key == "retention.ms" && c.MaybeValue() == forever {
				return nil
			}
		}
	}
	if err == nil {
		var altered kadm.AlterConfigsResponses
		altered, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: &forever}}, topic)
		for _, r := range altered {
			if err == nil {
				err = r.Err
			}
		}
	}
	if err != nil {
		slog.Warn("streamgen: kafka app: the repartition topic keeps the broker's retention, under which copies not yet read may be deleted: set its retention.ms to -1",
			"group", a.opts.Group, "topic", topic, "error", err)
	}
	return nil
}

// repartitioned is a record on its way to the repartition topic.
type repartitioned struct {
	key, value []byte
	headers    []Header
	timestamp  time.Time
}

// runRepartition runs the repartition task of partition p: a query that
// copies the input's partition p to the repartition topic, each record
// keyed by RepartitionBy, until ctx is done or it fails.
func (a *App) runRepartition(ctx context.Context, p int32) error {
	task := &Task{Partition: p, app: a, fenced: fenceHook(ctx), name: a.opts.Group + "/repartition/" + strconv.Itoa(int(p))}
	defer func() {
		for i := len(task.closers) - 1; i >= 0; i-- {
			task.closers[i]()
		}
	}()
	copts := a.opts.ChangelogOptions
	copts.Connection, copts.Topic, copts.Partitions = a.opts.Connection, a.opts.Group+"-repartition-changelog", a.partitions
	copts.TransactionalID = a.opts.Group + "-repartition-" + strconv.Itoa(int(p))
	committer, txn, made := a.taskCommitter(copts, task, false)
	partitions := map[string][]int32{}
	for _, topic := range a.opts.Topics {
		partitions[topic] = []int32{p}
	}
	task.txn = txn
	src := task.track(Source(Options{Connection: a.opts.Connection, Partitions: partitions, StartingOffsets: Earliest(),
		Name: "kafka:" + a.opts.Topics[0] + "/" + strconv.Itoa(int(p))}))
	sink := &repartitionSink{topic: a.repartitionTopic(),
		producer: producer{conn: a.opts.Connection, what: "kafka repartition topic " + strconv.Quote(a.repartitionTopic()), txn: txn,
			timeout: a.opts.ChangelogOptions.ProduceTimeout}}
	task.OnClose(sink.close)
	rows := From(src, func(m *Message) (repartitioned, error) {
		key, err := a.opts.RepartitionBy(m)
		if err != nil {
			return repartitioned{}, err
		}
		return repartitioned{key: key, value: m.Value, headers: m.Headers, timestamp: m.Timestamp}, nil
	})
	repartitionOffsets := groupOffsets{a: a, p: p, offsets: true}
	if copts.AsyncProgress {
		repartitionOffsets.txn = txn // (its batches are in Kafka once their transaction commits)
	}
	opts := append(slices.Clone(a.opts.Options), runtime.Checkpoint(filepath.Join(a.opts.Dir, "repartition", strconv.Itoa(int(p)))), committer,
		runtime.Name(task.name), runtime.Listener(repartitionOffsets), runtime.WithSharedCaches(a.caches))
	if a.opts.DeadLetters != nil {
		opts = append(opts, runtime.DeadLetters(a.opts.DeadLetters(task)))
	}
	q, err := typed.WriteTo(rows, typed.Sink[repartitioned](sink)).Start(ctx, opts...)
	if err != nil {
		return err
	}
	a.followStore(p, made.Load())
	return q.AwaitTermination()
}

// repartitionSink writes a batch's copies to the repartition topic,
// partitioned by their new key as the Java client does.
type repartitionSink struct {
	topic string
	producer
}

func (s *repartitionSink) Write(ctx context.Context, batchID int64, rows []repartitioned) error {
	records := make([]*kgo.Record, len(rows))
	for i := range rows {
		r := &rows[i]
		records[i] = &kgo.Record{Topic: s.topic, Key: r.key, Value: r.value, Headers: r.headers, Timestamp: r.timestamp}
	}
	if err := s.produce(ctx, records); err != nil {
		return fmt.Errorf("streamgen: %s: batch %d: %w", s.what, batchID, err)
	}
	return nil
}

func (s *repartitionSink) close() { s.producer.close() }

// AtLeastOnce is true: a batch run again is copied again, in full, or in
// a transaction that aborts the attempt that did not commit (see
// runtime.AtLeastOnceSink).
func (s *repartitionSink) AtLeastOnce() bool { return true }

// warmups are the balancer's warm-up rules from the options.
func (o *AppOptions) warmups() warmups {
	w := warmups{lag: o.AcceptableRecoveryLag, max: o.MaxWarmupReplicas}
	if w.lag == 0 {
		w.lag = defaultAcceptableRecoveryLag
	}
	if w.max == 0 {
		w.max = defaultMaxWarmupReplicas
	}
	return w
}

// The defaults of AcceptableRecoveryLag and MaxWarmupReplicas, Kafka
// Streams' own.
const (
	defaultAcceptableRecoveryLag = 10_000
	defaultMaxWarmupReplicas     = 2
)

// minProbeInterval is the least time between two rebalances an instance
// asks for when its warm-up copies catch up (Kafka Streams' probing
// rebalances come every probing.rebalance.interval.ms, 10 minutes; here
// a caught-up copy asks at once, but not more often than this). A
// variable for tests.
var minProbeInterval = 5 * time.Second

// defaultStateCleanupDelay is Kafka Streams' state.cleanup.delay.ms.
const defaultStateCleanupDelay = 10 * time.Minute

// removedPrefix starts the name a partition's checkpoint directory is
// renamed to before it is removed, so that a task starting on the
// partition meanwhile makes a new one.
const removedPrefix = ".removed-"

// hold and release count a goroutine that may open partition p's
// checkpoint (a task or a standby), under a.mu.
func (a *App) hold(p int32) {
	a.holders[p]++
	delete(a.unheld, p)
}

func (a *App) release(p int32) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.holders[p]--; a.holders[p] <= 0 {
		delete(a.holders, p)
		a.unheld[p] = time.Now()
	}
}

// cleanStateDirsEvery removes unused checkpoints (cleanStateDirs) until
// ctx is done, at half the delay, at most every minute.
func (a *App) cleanStateDirsEvery(ctx context.Context) {
	delay := a.opts.stateCleanupDelay()
	if delay < 0 {
		return
	}
	tick := time.NewTicker(min(max(delay/2, time.Second), time.Minute))
	defer tick.Stop()
	for {
		a.cleanStateDirs(time.Now())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// cleanStateDirs removes, at time now, the checkpoint directories under
// Dir (a task's, and its repartition task's under Dir/repartition) of
// the partitions that no task or standby of this instance has held for
// StateCleanupDelay (one found at start counts from when it was
// first seen), and what an earlier removal left. The group no longer
// hears of the copy.
func (a *App) cleanStateDirs(now time.Time) {
	delay := a.opts.stateCleanupDelay()
	if delay < 0 {
		return
	}
	fsys := runtime.FileSystemOf(a.opts.Options...)
	entries, err := fsys.List(a.opts.Dir)
	if err != nil {
		return
	}
	var removed []string
	// retire renames dir, under Dir, for removal; the new name is
	// Dir's entry to remove.
	retire := func(p int32, dir, tag string) bool {
		to := removedPrefix + tag + "-" + strconv.FormatInt(now.UnixNano(), 10)
		if err := fsys.Rename(fsys.PathJoin(a.opts.Dir, dir), fsys.PathJoin(a.opts.Dir, to)); err != nil {
			slog.Warn("streamgen: kafka app: removing an unused checkpoint", "group", a.opts.Group, "partition", p, "error", err)
			return false
		}
		removed = append(removed, to)
		return true
	}
	a.mu.Lock()
	for _, name := range entries {
		if strings.HasPrefix(name, removedPrefix) {
			removed = append(removed, name)
			continue
		}
		p, ok := partitionDir(name)
		if !ok || a.holders[p] > 0 {
			continue
		}
		since, ok := a.unheld[p]
		if !ok {
			a.unheld[p] = now
			continue
		}
		if now.Sub(since) < delay {
			continue
		}
		// Renamed while a.mu is held: a task or standby starting on
		// the partition after this makes a new directory. The
		// partition's repartition task's checkpoint goes with it.
		if !retire(p, name, name) {
			continue
		}
		if repartition := fsys.PathJoin("repartition", name); exists(fsys, fsys.PathJoin(a.opts.Dir, repartition)) {
			retire(p, repartition, "repartition-"+name)
		}
		delete(a.unheld, p)
		delete(a.positions, p)
		delete(a.handedOver, p)
		slog.Info("streamgen: kafka app: removing the checkpoint of a partition unused for StateCleanupDelay", "group", a.opts.Group, "partition", p, "unused since", since)
	}
	a.mu.Unlock()
	for _, name := range removed {
		if err := fsys.RemoveAll(fsys.PathJoin(a.opts.Dir, name)); err != nil {
			slog.Warn("streamgen: kafka app: removing an unused checkpoint", "group", a.opts.Group, "dir", name, "error", err)
		}
	}
}

// partitionDir returns the partition whose checkpoint a directory under
// Dir named name holds, if it is one ("0", "1", ...).
func partitionDir(name string) (int32, bool) {
	n, err := strconv.ParseInt(name, 10, 32)
	return int32(n), err == nil && n >= 0 && strconv.Itoa(int(n)) == name
}

// exists reports whether path names a file or directory of fsys.
func exists(fsys vfs.FS, path string) bool {
	_, err := fsys.Stat(path)
	return err == nil
}

func (o *AppOptions) stateCleanupDelay() time.Duration {
	if o.StateCleanupDelay == 0 {
		return defaultStateCleanupDelay
	}
	return o.StateCleanupDelay
}

// TaskErrorAction is what an App does with a task that failed (see
// AppOptions.OnTaskError).
type TaskErrorAction int

const (
	// StopInstance ends Run with the task's error, stopping every task
	// of the instance.
	StopInstance TaskErrorAction = iota
	// RestartTask starts the task again from its checkpoint.
	RestartTask
)
