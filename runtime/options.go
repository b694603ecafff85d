package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Option configures a query at Start. Options are validated together, in
// one place, and a bad combination is an error from Start.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// Options is one option that applies opts, in order: for a library that
// hands its users a set of options as one.
func Options(opts ...Option) Option {
	return optionFunc(func(c *config) {
		for _, o := range opts {
			if o != nil {
				o.apply(c)
			}
		}
	})
}

type config struct {
	name            string
	checkpoint      string
	fs              vfs.FS
	trigger         Trigger
	syncInterval    time.Duration
	idleTimeout     time.Duration
	pollInterval    time.Duration
	deadLetters     DeadLetterSink
	listeners       []any
	clock           func() time.Time
	progressKeep    int
	flush           bool
	noDataBatches   bool
	allowChanges    bool
	allowFieldLoss  bool
	committer       func(*Store) Committer
	manualClock     *ManualClock
	batchMemory     int64
	spillDir        string
	stateCache      int64
	diskReserve     int64
	blockCache      int64
	memTable        int64
	shared          *SharedCaches
	closeTimeout    time.Duration
	progressLog     *slog.Logger
	watermarkPolicy WatermarkPolicy
	// watermarkPolicySet says the start asked for watermarkPolicy.
	watermarkPolicySet bool
	// partitionWatermarkPolicy combines a watermark's source partitions.
	partitionWatermarkPolicy WatermarkPolicy
	operatorChecks           []func([]OperatorInfo) error
	windowCloses             int
	// maxBatchState is MaxBatchStateBytes (negative: none).
	maxBatchState int64
	idleEvents    time.Duration
}

func defaultConfig() config {
	return config{
		trigger:       AsSoonAsPossible(),
		pollInterval:  100 * time.Millisecond,
		clock:         time.Now,
		progressKeep:  100,
		noDataBatches: true,
		batchMemory:   256 << 20,
		closeTimeout:  DefaultCloseTimeout,
		windowCloses:  DefaultWindowClosesPerBatch,
		maxBatchState: DefaultMaxBatchStateBytes,
		idleEvents:    DefaultIdleEventInterval,
	}
}

// RecentProgressUpdates sets how many progress reports the query keeps
// for RecentProgress: the latest n, 100 by default, as Spark's
// spark.sql.streaming.numRecentProgressUpdates. n must be positive.
func RecentProgressUpdates(n int) Option {
	return optionFunc(func(c *config) { c.progressKeep = n })
}

// Name names the query in progress reports.
func Name(name string) Option { return optionFunc(func(c *config) { c.name = name }) }

// CheckOperators makes Start call check with the description of each
// stateful operator of the plan, before it opens the checkpoint, and
// refuse to start with the error check returns: for a host that runs
// only the pipelines it can serve (kafka.App refuses an aggregation over
// grouping sets on an input of more than one partition). Options may
// give several; each is called.
func CheckOperators(check func(operators []OperatorInfo) error) Option {
	return optionFunc(func(c *config) { c.operatorChecks = append(c.operatorChecks, check) })
}

// Checkpoint keeps the query's state and progress in dir, so that a query
// started again with the same dir resumes where it stopped. Without it the
// state lives in memory and is gone when the query stops.
func Checkpoint(dir string) Option { return optionFunc(func(c *config) { c.checkpoint = dir }) }

// FileSystem sets the file system of the checkpoint, such as vfs.NewMem()
// in tests. The default is the operating system's.
func FileSystem(fs vfs.FS) Option { return optionFunc(func(c *config) { c.fs = fs }) }

// FileSystemOf returns the file system that opts give a query's
// checkpoint (FileSystem; the operating system's by default), for a
// program that opens the checkpoints of the queries it starts.
func FileSystemOf(opts ...Option) vfs.FS {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if cfg.fs == nil {
		return vfs.Default
	}
	return cfg.fs
}

// WithTrigger sets when batches run. The default is AsSoonAsPossible.
func WithTrigger(t Trigger) Option { return optionFunc(func(c *config) { c.trigger = t }) }

// SyncInterval syncs the checkpoint at this interval instead of at every
// batch (asynchronous progress tracking): faster; a process crash loses
// nothing Pebble has written, and after a machine crash the batches of
// the last interval run again from their input; nothing is lost or
// counted twice. A sink that neither removes a batch's output
// (BatchRewinder: the files sink) nor writes every attempt in full
// (AtLeastOnceSink: a Kafka topic, the console),
// such as a ForeachWriter or a Sink of the user's, has each batch's plan
// synced before it runs, so that the batch runs again on the same input;
// the log is then synced as soon as a plan or a commit asks, rather than
// once per interval (each plan's sync would wait for the interval after
// the one before it, and hold its batch that long), and the commits
// still do not wait for their syncs. The default, 0, syncs every batch.
// See StoreOptions.SyncInterval and "Storage faults" in the package doc.
func SyncInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.syncInterval = d })
}

// IdleTimeout leaves a source partition out of the watermark once it has
// had no data for d, so that one quiet partition does not hold the
// watermark back. The default, 0, never does.
func IdleTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.idleTimeout = d }) }

// PollInterval is how long a query that found no new data waits before it
// looks again. When every source is a DataWaiter (a Kafka source), the
// wait ends as soon as data arrives, so the interval bounds the wait, not
// the latency. The default is 100ms.
func PollInterval(d time.Duration) Option { return optionFunc(func(c *config) { c.pollInterval = d }) }

// DeadLetters sends records that cannot be decoded to s. Without it they
// are counted and logged in the progress report only.
func DeadLetters(s DeadLetterSink) Option { return optionFunc(func(c *config) { c.deadLetters = s }) }

// DeadLettersOf returns the dead-letter sink that opts set, or nil.
func DeadLettersOf(opts ...Option) DeadLetterSink {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	return cfg.deadLetters
}

// Listener adds a listener. It must implement at least one of
//
//	OnQueryStarted(QueryStarted)
//	OnQueryProgress(QueryProgress)
//	OnQueryIdle(QueryIdle)
//	OnQueryTerminated(QueryTerminated)
//
// (Start refuses a value that implements none), which the query's
// goroutine calls in order; a slow listener slows the query. A listener
// may stop its query: Stop, called there, returns at once, and the query
// ends once the listener has returned. When the
// query's goroutine does not end within the close timeout (see
// CloseTimeout), OnQueryTerminated is called by the goroutine that gives
// up on it (Stop's caller, or the query's watch of its store), and no
// method is called after it. New methods may be added without breaking
// listeners.
func Listener(l any) Option {
	return optionFunc(func(c *config) { c.listeners = append(c.listeners, l) })
}

// IdleEventInterval is how often a query that has nothing to do tells
// its listeners so (OnQueryIdle): at the first trigger that finds nothing
// after a batch (or the start), then at most once an interval while it
// finds nothing, as Spark's spark.sql.streaming.noDataProgressEventInterval;
// a dashboard of the progress reports can tell a query waiting for data
// from one that is stuck. The default is DefaultIdleEventInterval.
func IdleEventInterval(d time.Duration) Option {
	return optionFunc(func(c *config) { c.idleEvents = d })
}

// DefaultIdleEventInterval is IdleEventInterval's default: 10 seconds,
// as Spark's.
const DefaultIdleEventInterval = 10 * time.Second

// LogProgress logs a line on l at level Info for each committed batch,
// after the listeners have seen its report: the query's name (its id
// without one), the batch id, rows in and out, the rows processed per
// second, the batch's duration, the watermark when there is one, the state
// rows over all operators, the rows dropped as late and the dead letters
// (see LogAttrs). The default logs nothing.
func LogProgress(l *slog.Logger) Option { return optionFunc(func(c *config) { c.progressLog = l }) }

// FlushEventTime makes a query with a Once or AvailableNow trigger end,
// once its input is done, with batches whose watermark moves past every
// event time, so that every pending event-time timeout fires: the end of a
// bounded input, as Flink's final watermark. The timers fire 100k a batch
// at most, the watermark stepping on from batch to batch (all the timers
// of one instant in one step, but a windowed aggregation's, which
// WindowClosesPerBatch splits), so that a flush of millions of windows
// does not hold all their rows at once. The checkpoint then holds the last
// watermark, past every event time, so rows added later are all late.
func FlushEventTime() Option { return optionFunc(func(c *config) { c.flush = true }) }

// Clock sets the processing-time clock, for tests. The default is
// time.Now.
func Clock(now func() time.Time) Option { return optionFunc(func(c *config) { c.clock = now }) }

// NoDataBatches says whether the query runs batches without new data
// (Spark's spark.sql.streaming.noDataMicroBatches.enabled). The default,
// true, runs one as Spark does, after a batch of this start, when an
// operator asks for it (OperatorInfo.NoData, Spark's
// shouldRunAnotherBatch): when the watermark the next batch would have is
// past the last batch's, for an operator that evicts or fires by the
// watermark (event-time timeouts, transformWithState, aggregations in
// Append or Update mode, deduplications, joins), and at every trigger of
// a ProcessingTime trigger for one with a processing-time timeout. It also
// runs one whenever a timer or a state entry's time to live is due (after
// a restart too, where Spark waits for data), and, with FlushEventTime,
// at the end of the input. With the trigger as soon as possible, where
// Spark would run batches without data back to back for a
// processing-time timeout, one runs when a timer is due. With false,
// timers fire only in batches that have data.
func NoDataBatches(enabled bool) Option {
	return optionFunc(func(c *config) { c.noDataBatches = enabled })
}

// AllowPipelineChanges starts the query on a checkpoint whose pipeline
// differs in what the state can survive: other source names, operator
// names, timeouts or output modes, a state type that shares no field
// with the stored one, windows of the stored size that start elsewhere
// or at another slide (the stored windows then finish as they are, and a
// read of state by key no longer finds them; cumulative windows that
// start elsewhere are refused, as another size is), or session windows of
// another gap, or an aggregator that keeps its rows otherwise (TopN of
// another n, CollectSet where CollectList was). Without it such
// a checkpoint is refused with the differences. Other operators, a key or
// state field whose type changed (or a field of the rows an aggregator
// keeps encoded), and windows of another size are refused even so: the
// stored bytes would be misread. A checkpoint written before it kept an
// aggregator's parameters is not compared on them: its first start keeps
// the query's.
func AllowPipelineChanges() Option { return optionFunc(func(c *config) { c.allowChanges = true }) }

// AllowStateFieldLoss starts the query on a checkpoint where a field of a
// state type (or of the rows an aggregator keeps encoded) is gone while a
// field of the same type is new, dropping the
// gone field's stored values, as is meant when the one replaced the
// other. Without it (or AllowPipelineChanges) such a checkpoint is
// refused, since the field was most likely renamed without the tag
// `stream:"id=N"` that keeps its values: the message names both fields
// and the tag. Each field dropped is logged.
func AllowStateFieldLoss() Option { return optionFunc(func(c *config) { c.allowFieldLoss = true }) }

// BatchMemory bounds the memory a batch's gathered rows may take in each
// stateful operator, in bytes (estimated from the rows' size and the input
// they were read from). Past it, an operator whose input rows are records
// spills them to sorted runs on disk and merges them back, key by key, so
// the output is the same for any budget. The default is 256 MiB.
func BatchMemory(bytes int64) Option { return optionFunc(func(c *config) { c.batchMemory = bytes }) }

// SpillDirectory is where operators spill rows past BatchMemory. The
// default is the operating system's temporary directory.
func SpillDirectory(dir string) Option { return optionFunc(func(c *config) { c.spillDir = dir }) }

// StateCacheSize is the budget in bytes of the cache of committed state in
// front of Pebble (see StoreOptions.StateCacheSize): 256 MiB by default, a
// negative size turns it off.
func StateCacheSize(bytes int64) Option { return optionFunc(func(c *config) { c.stateCache = bytes }) }

// BlockCacheSize is the size in bytes of the checkpoint store's Pebble
// block cache, which keeps recently read blocks of state in memory and
// in which Pebble reserves its memtables' memory (see
// StoreOptions.CacheSize): 128 MiB by default, plus room for two
// memtables (MemTableSize), taken as blocks are read and writes come.
// With StateCacheSize it bounds what a query's state takes in memory.
// Queries that run side by side in a process each have their own, unless
// they share one (WithSharedCaches, a Kafka App's BlockCacheSize).
func BlockCacheSize(bytes int64) Option { return optionFunc(func(c *config) { c.blockCache = bytes }) }

// MemTableSize is the size in bytes of each of the checkpoint store's
// Pebble memtables, where a batch's writes wait to be flushed to a table
// (see StoreOptions.MemTableSize): DefaultMemTableSize, 64 MiB, by
// default, or Pebble's 4 MiB with WithSharedCaches. Pebble grows them to
// it as writes come, so a query that writes little keeps small ones.
func MemTableSize(bytes int64) Option { return optionFunc(func(c *config) { c.memTable = bytes }) }

// DefaultMaxBatchStateBytes is MaxBatchStateBytes' default: 8 MiB, at
// which Nexmark's queries that write the most state a record (q20, q23)
// ran as fast as with no cap, in 40% of the memory or less
// (bench/README.md).
const DefaultMaxBatchStateBytes = 8 << 20

// MaxBatchStateBytes bounds the state a batch writes, as Kafka Streams
// commits a task early once its uncommitted state passes
// statestore.uncommitted.max.bytes. A batch's writes are held in memory
// until it commits, several times over (the batch, its copy in key
// order, the log's), and Pebble takes one of more than half a memtable
// as a memtable of its own, flushed at once: a query whose rows each
// write much state (a join that keeps every row) would take memory and
// flushes in proportion to its batches. So the loop plans each batch from
// the sources that can end a batch after a number of records
// (RecordCapper: a Kafka topic, a memory stream) to no more records than
// fit under bytes at the state bytes per input record the last batch
// wrote (before a batch has measured it, at a kilobyte a record: 8,192
// records by default), shared between the inputs. A query without
// stateful operators, a batch run again as planned and a Once trigger's
// batch are not cut; nor are sources that cannot be (the files source).
// The default is DefaultMaxBatchStateBytes; zero or a negative size turns
// it off.
func MaxBatchStateBytes(bytes int64) Option {
	return optionFunc(func(c *config) { c.maxBatchState = bytes })
}

// WithSharedCaches gives the query's checkpoint store a share of caches
// that the stores of other queries in the process share with it (see
// SharedCaches), in place of caches of its own: StateCacheSize is then
// not used (unless negative: no state cache), nor BlockCacheSize if they
// share a block cache. A query without stateful operators takes no share
// of the state cache budget.
func WithSharedCaches(c *SharedCaches) Option {
	return optionFunc(func(cfg *config) { cfg.shared = c })
}

// DiskReserve is how many bytes of the checkpoint's file system the query
// leaves free (see StoreOptions.DiskReserve): Start refuses to start with
// less free, and a batch whose commit would leave less ends the query
// with an error wrapping ErrDiskFull and ErrStoreFailed, before any of it
// is written; the batches before are kept. The default is
// DefaultDiskReserve, 256 MiB, at most a twentieth of the file system's
// size but never under a log file's preallocation (110% of
// MemTableSize); a negative reserve turns the check off.
func DiskReserve(bytes int64) Option { return optionFunc(func(c *config) { c.diskReserve = bytes }) }

// DefaultWindowClosesPerBatch is the windows (of a key each) a windowed
// aggregation closes in one batch by default (see WindowClosesPerBatch).
const DefaultWindowClosesPerBatch = 100_000

// WindowClosesPerBatch bounds the windows, of a key each, that each
// operator whose timers are one-shot in event time (a windowed
// aggregation with a watermark; see OperatorInfo.OneShotTimers) closes
// in one batch: n, DefaultWindowClosesPerBatch by default; 0 for no
// bound (a key's windows that close together, as sliding and cumulative
// windows kept by slices do, count as one). A batch holds the rows it
// writes until it commits, and a window with millions of keys closes
// them at one instant of the watermark, which no step of the watermark
// splits; past the bound, the batch leaves the rest, in the order of
// their instants and keys, to the batches after it, which run at once
// (without new data if none came, whatever the trigger's interval or
// NoDataBatches), so that a window's rows may be written across several
// batches. Until the operator has closed every window the watermark has
// passed, the operators after it in the plan run with the watermark
// held at the instant of the first it has not closed (their timers,
// time to live and evictions, the rows late for them, and the watermark
// their functions see), as if the watermark had stopped there: each
// sees every row a window writes before it acts on a watermark past
// that window.
func WindowClosesPerBatch(n int) Option { return optionFunc(func(c *config) { c.windowCloses = n }) }

// CloseTimeout bounds how long Stop waits for the query's goroutine and
// its checkpoint store to close, and how long a query whose store failed
// waits for them before it ends: past it the query ends with an error
// wrapping ErrStoreNotClosed, leaving behind a goroutine stuck in a call
// that does not return (a disk that hangs, a write stalled behind a flush
// that keeps failing) and the store's files open. The default is
// DefaultCloseTimeout, 30 seconds.
func CloseTimeout(d time.Duration) Option { return optionFunc(func(c *config) { c.closeTimeout = d }) }

// WithCommitter commits each batch through the committer make returns for
// the query's store, instead of the store itself. Start calls make once,
// after it opens the store; a committer that is a Restorer restores the
// store then, before Start reads it, and one that is a Closer is closed
// when the query ends, before its store.
func WithCommitter(make func(*Store) Committer) Option {
	return optionFunc(func(c *config) { c.committer = make })
}

func (c *config) validate() error {
	var errs []error
	if c.syncInterval < 0 {
		errs = append(errs, fmt.Errorf("SyncInterval %v is negative", c.syncInterval))
	}
	if c.idleTimeout < 0 {
		errs = append(errs, fmt.Errorf("IdleTimeout %v is negative", c.idleTimeout))
	}
	if c.pollInterval <= 0 {
		errs = append(errs, fmt.Errorf("PollInterval %v is not positive", c.pollInterval))
	}
	if c.trigger.kind == triggerInterval && c.trigger.interval <= 0 {
		errs = append(errs, fmt.Errorf("trigger interval %v is not positive", c.trigger.interval))
	}
	if c.flush && !c.trigger.stops() {
		errs = append(errs, errors.New("FlushEventTime needs a Once or AvailableNow trigger"))
	}
	if c.clock == nil {
		errs = append(errs, errors.New("Clock is nil"))
	}
	if c.closeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("CloseTimeout %v is not positive", c.closeTimeout))
	}
	if c.blockCache < 0 {
		errs = append(errs, fmt.Errorf("BlockCacheSize %d is negative", c.blockCache))
	}
	if c.windowCloses < 0 {
		errs = append(errs, fmt.Errorf("WindowClosesPerBatch %d is negative", c.windowCloses))
	}
	if c.progressKeep < 1 {
		errs = append(errs, fmt.Errorf("RecentProgressUpdates %d is not positive", c.progressKeep))
	}
	if c.memTable < 0 {
		errs = append(errs, fmt.Errorf("MemTableSize %d is negative", c.memTable))
	}
	if c.idleEvents <= 0 {
		errs = append(errs, fmt.Errorf("IdleEventInterval %v is not positive", c.idleEvents))
	}
	if c.batchMemory <= 0 {
		errs = append(errs, fmt.Errorf("BatchMemory %d is not positive", c.batchMemory))
	}
	for i, l := range c.listeners {
		if !isListener(l) {
			errs = append(errs, fmt.Errorf("listener %d (%T) has none of the methods OnQueryStarted, OnQueryProgress, OnQueryIdle, OnQueryTerminated", i, l))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: query options: %w", err)
	}
	return nil
}
