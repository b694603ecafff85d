package runtime

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/streamgen/streamgen/internal/atomicfile"
)

// ErrIncompatibleCheckpoint is wrapped by the error Start returns for a
// checkpoint written by a pipeline this one cannot continue.
var ErrIncompatibleCheckpoint = errors.New("streamgen: incompatible checkpoint")

// The key space. Every key starts with one of these bytes, so each kind of
// entry is a contiguous range:
//
//	metaKey                                                     Meta (JSON)
//	progressKey                                                 Progress (JSON)
//	originKey                                                   creation time (RFC 3339)
//	planKey                                                     the planned batch (JSON)
//	reportPrefix    batchID(8)                                  a progress report (JSON; see keepReport)
//	committerPrefix name                                        a committer's record (see SetCommitterRecord)
//	startDeletionPrefix statekey                                a state key Start deleted, until a batch gives it to the committer (see TakeStartDeletions)
//	statePrefix     partition(4) op(1) var(1) uvarint(len(key)) key suffix   state entry
//	timerPrefix     partition(4) op(1) expiry(8) key                         timer, by expiry
//	timerKeyPrefix  partition(4) op(1) uvarint(len(key)) key expiry(8)       timer, by key
//
// originKey is written once, when the store is created, and never again:
// once Pebble has flushed anything it lives in a table, so a store that
// holds progress (replayed from its write-ahead log) but no origin has
// lost its tables (see verify).
//
// partition is the input partition that owns the entry (big-endian, so a
// partition's entries are contiguous and can be moved, restored or dropped
// alone); op is the operator's index and var the state variable's id, one
// byte each. A key's entries of one variable share the prefix up to the
// key, so "everything of this key" is one prefix; a point value has an
// empty suffix, list and map entries have their element's suffix. A
// variable ordered by event time (eventorder.go) has the entry's 8-byte
// time as its key and the grouping key as its suffix, so that its entries
// sort by time.
//
// Timers are written to two indexes: by expiry, so that the timers due
// below a threshold are one range scan, and by key, so that a key's timers
// are listed and deleted without a scan of the whole index. The one-shot
// timers of an operator that never lists them (OperatorInfo.OneShotTimers)
// are in the index by expiry alone, and removed, once fired, by one range
// deletion.
const (
	metaKey      = "\x01meta"
	progressKey  = "\x02progress"
	originKey    = "\x03origin"
	planKey      = "\x04plan"
	reportPrefix = 0x05
	// (committerPrefix, 0x06, is the committers' records.)
	// startDeletionPrefix keeps, for a committer that mirrors the store,
	// the keys Start deleted (deleteVariable) until a batch that gives
	// them to the committer commits (see TakeStartDeletions): not a
	// mirrored record.
	startDeletionPrefix = 0x07
	statePrefix         = 0x10
	timerPrefix         = 0x20
	timerKeyPrefix      = 0x21
)

// Scope names one stateful operator's entries within one input partition.
type Scope struct {
	// Partition is the input partition that owns the state. A files or
	// memory source is partition 0.
	Partition uint32
	// Operator is the operator's index in the plan.
	Operator uint8
}

// Var names one state variable of a Scope.
type Var struct {
	Scope
	// Variable is the variable's id within its operator.
	Variable uint8
}

// StoreOptions tune a Store. The zero value is the default.
type StoreOptions struct {
	// FS is the file system; nil means the operating system's. Tests use
	// vfs.NewMem().
	FS vfs.FS
	// SyncInterval, when positive, commits batches without waiting for the
	// disk (asynchronous progress tracking): each commit hands its batch
	// to Pebble's log writer, whose goroutine writes it to the log file at
	// once and syncs the file at most once per SyncInterval. Faster; a
	// process crash loses nothing Pebble has written, and a machine crash
	// loses at most the batches after the last sync, which are replayed
	// from their sources. Since state and offsets commit together,
	// nothing is lost or counted twice either way. A committed batch's
	// memory is held until its sync, and Pebble takes at most 4095
	// batches waiting for one: more within an interval wait for it. The
	// default, 0, syncs every commit.
	SyncInterval time.Duration
	// SyncAtOnce, with SyncInterval, has Pebble sync the log as soon as
	// it is asked to rather than at most once per SyncInterval; commits
	// still do not wait for their syncs. A query whose plans are synced
	// (a plain sink's: see AtLeastOnceSink) sets it: each plan's sync
	// would otherwise wait for the interval after the sync before it,
	// and hold every batch that long.
	SyncAtOnce bool
	// CacheSize is the size in bytes of Pebble's block cache, which keeps
	// recently read state in memory, and in which Pebble reserves the
	// memory of its memtables (MemTableSize each, up to about two) while
	// they are written and flushed: it bounds what the blocks and the
	// memtables take together. The default is DefaultBlockCacheSize, 128
	// MiB, for blocks, plus room for two memtables. (Pebble's own
	// default, 8 MiB, is taken up by its memtables, leaving state reads
	// to go to disk.) On Linux with cgo, where the blocks and memtables
	// are C memory, the pages of the blocks the cache lets go are given
	// back to the system every few seconds (glibc's malloc_trim), which
	// would otherwise keep them: the process's resident memory then
	// follows the cache's size rather than the most its blocks ever took.
	CacheSize int64
	// MemTableSize is the size in bytes of each of Pebble's memtables,
	// where batches' writes go before they are flushed to a table:
	// Pebble grows a store's memtables from 256 KiB, doubling at each
	// flush, up to it, and more than one while they are flushed. A larger
	// memtable folds the rewrites of a key (a count updated batch after
	// batch) into one entry before they reach a table, and takes batches
	// of up to half its size (a larger batch is flushed as a table of its
	// own), which leaves Pebble's compactions less to do. The default is
	// DefaultMemTableSize, 64 MiB; for a store that shares caches with
	// others (Shared, as a Kafka App's tasks do), Pebble's 4 MiB, so that
	// what an instance's stores take does not grow by that much with each
	// partition it owns.
	MemTableSize int64
	// StateCacheSize is the budget in bytes of the cache of committed
	// state entries in front of Pebble, least recently used out first.
	// The default is DefaultStateCacheSize, 256 MiB; a negative size
	// turns it off. Every batch's writes still commit to Pebble: the
	// cache changes no durability. The
	// cache's memory is outside the Go heap (on Unix), so the budget is
	// what it takes of the process's resident memory, at most. For a
	// store that was empty when opened, a sixteenth of the budget each
	// may go to two Bloom filters, of the keys the cache evicted and of
	// the keys lists, maps and joins' buffers have had entries for: a
	// read of a key that never had state then skips Pebble.
	// Without it (no cache, a store opened with state, a restore) every
	// read the cache cannot answer goes to Pebble.
	StateCacheSize int64
	// CloseTimeout bounds how long Close waits for Pebble to close: past
	// it, Close returns an error wrapping ErrStoreNotClosed and leaves the
	// store open (a disk that hangs, a write stalled behind a flush that
	// keeps failing). The default is 30 seconds.
	CloseTimeout time.Duration
	// Shared, when not nil, gives the store a share of budgets that
	// other stores in the process share with it (see SharedCaches), in
	// place of StateCacheSize (a negative one still turns the state cache
	// off), and of CacheSize if it shares a block cache.
	Shared *SharedCaches
	// RangeReads says the store's operators read state by range scans of
	// a key's entries (a join's buffers) more than by point reads: L0 is
	// then compacted from 4 tables, Pebble's default, rather than 16, since
	// a scan looks at every L0 table (Bloom filters answer point reads
	// only). Start sets it from the plan.
	RangeReads bool
	// DiskReserve is how many bytes of the checkpoint's file system the
	// store leaves free: OpenStore refuses to open a store for writing
	// with less free, and a commit that would leave less, counting its
	// batch twice (once in Pebble's log, once in the table it is flushed
	// to), fails the store with an error wrapping ErrDiskFull before any
	// of it is written. Pebble ends the process, with no error to recover,
	// when its log cannot be closed or created as it moves to a new one
	// on a full disk; the reserve stops the query cleanly before that,
	// with every batch committed before kept. The reserve applied is at
	// most a twentieth of the file system's size, so that a small disk
	// still has room to work in, but never under the space Pebble
	// preallocates for a log file (110% of MemTableSize: 70.4 MiB with
	// the default 64 MiB memtables; a smaller MemTableSize lowers it). It
	// guards the query's own writes: another process, or Pebble's
	// background compactions, can still use the space, and a compaction
	// that meets a full disk fails the store as any storage fault does.
	// The default is DefaultDiskReserve; a negative reserve turns the
	// check off. File systems that cannot report their free space (Pebble's
	// in-memory one) are not checked.
	DiskReserve int64
}

// DefaultDiskReserve is the default of StoreOptions.DiskReserve and of the
// query option DiskReserve: 256 MiB, room for Pebble's new log file (110%
// of a 4 MiB memtable), a memtable's flush and its MANIFEST.
const DefaultDiskReserve = 256 << 20

// DefaultCloseTimeout is the default of StoreOptions.CloseTimeout and of
// the query option CloseTimeout.
const DefaultCloseTimeout = 30 * time.Second

// Store is a query's state in Pebble: state entries, timers, the
// pipeline's description and the progress of the last committed batch,
// and, next to Pebble's files, the commit file (see commitFileName).
// Reads of committed data (Progress), Err and NewBatch are safe for
// concurrent use; a StateBatch is not. Close waits for the background
// sync loop, if any, to stop, and for Pebble to close, up to
// CloseTimeout.
//
// The first storage fault, met by any call or by Pebble's background work,
// is the store's failure (Err): from then on every read, write and commit
// returns it. See storefail.go.
type Store struct {
	db *pebble.DB
	// closeOnce runs Close's work once; closeErr is what it returned.
	closeOnce sync.Once
	closeErr  error
	// lock is the checkpoint directory's lock, taken before Pebble opens
	// (see lockCheckpoint) and held until Close: Pebble's opens borrow it.
	lock *pebble.Lock
	// lockFile is lock's file lock: closing it releases the directory
	// whatever holds references to lock (an open left behind, see
	// openPebble).
	lockFile io.Closer
	cache    *pebble.Cache
	// state caches committed state entries; nil when turned off.
	state *stateCache
	dir   string
	fs    vfs.FS
	opts  StoreOptions

	// failure is the first failure, set once (fail); failed is closed
	// then.
	failure atomic.Pointer[failure]
	failed  chan struct{}
	// wedged is set when a panic left Pebble's commit pipeline with its
	// lock held: DB.Close would wait for it for ever, so Close does not
	// call it.
	wedged atomic.Bool
	// commitFailed is set when Pebble reports that a commit's log write
	// or sync failed (Logger.Fatalf, "fatal commit error"), which Apply
	// does not return.
	commitFailed atomic.Bool
	// stuck is closed when a commit waits for ever on a log file that
	// failed as Pebble moved to a new one (stick); stuckOnce closes it.
	stuck     chan struct{}
	stuckOnce sync.Once

	// mu guards pending and inFlight.
	mu sync.Mutex
	// inFlight is the work handed to a goroutine that the next batch runs
	// alongside (see inflight.go); nil when none.
	inFlight *inFlight
	// pending are the batches committed without waiting for their log
	// sync (SyncInterval), oldest first, which the sync loop waits for;
	// wake tells it of a new one.
	pending []pendingBatch
	wake    chan struct{}
	// recording guards recorded, the batch id in the commit file (-1 for
	// none), and serializes the file's writes.
	recording sync.Mutex
	recorded  int64
	// mark is the commit file's mark of the MANIFEST (manifestMark),
	// guarded by recording; work counts Pebble's flushes and compactions
	// for it.
	mark *manifestMark
	work pebbleWork
	// opening is set while pebble.Open runs (openPebble).
	opening atomic.Bool
	// reportsPruned is set once keepReport has dropped every report
	// older than the kept ones; lastReport is the batch of the last report
	// kept (a report after a gap drops the older ones with a range).
	reportsPruned atomic.Bool
	lastReport    atomic.Int64

	stop chan struct{}
	done sync.WaitGroup

	// readMu is held, shared, by each read of a snapshot (ReadSnapshot) and,
	// alone, by Close before Pebble closes: a snapshot is never open when
	// Pebble closes. readsClosed, set when Close begins, refuses new
	// reads, without waiting for the ones open.
	readMu      sync.RWMutex
	readsClosed atomic.Bool

	// keepDeleted says to keep the keys deleteVariable deletes, under
	// startDeletionPrefix, for a committer that mirrors the store (see
	// TakeStartDeletions). Set before the metadata is checked, read by
	// the query's goroutine after. deletionsTaken says that they were
	// taken, so that the next commit deletes them.
	keepDeleted    bool
	deletionsTaken bool

	// sorter orders large batches for Pebble; used by commit only, one
	// commit at a time.
	sorter batchSorter
	// spare holds the memory of a committed batch for the next one to
	// write into (see reuse): the bytes of a batch that Pebble took in a
	// sorted copy, and the cache hints.
	spare atomic.Pointer[spareBatch]
	// lastBatch is the size of the last batch committed, which the next
	// starts at when no spare is kept: a large batch that starts small
	// doubles its bytes, a copy each time, on its way.
	lastBatch atomic.Int64
}

// spareBatch is the memory of a batch that the next can reuse.
type spareBatch struct {
	data  []byte
	hints []int32
}

// spareBatchMax is the most memory of a batch kept for the next: a
// larger batch's bytes go back to the collector, so that a query of very
// large batches does not hold a second copy of one between them. Up to
// it, reusing the bytes costs no more memory than a new batch would (the
// old one would be garbage while the new one fills), and saves growing
// the new one and the page faults of writing into fresh memory: a batch
// of 200k rows of 150 bytes is 30 MiB.
const spareBatchMax = 64 << 20

// pendingBatch is a batch committed with a sync requested and not waited
// for.
type pendingBatch struct {
	b  *pebble.Batch
	id int64
	// plan is set for a batch's plan (WritePlan): its sync records
	// nothing.
	plan bool
}

// OpenStore opens (creating it if needed) the store in dir.
//
// A checkpoint with a commit file is checked first, on a read-only open
// that changes nothing on disk: a store that is damaged (wrapping
// ErrCorruptCheckpoint) or holds less than the commit file says was
// committed (wrapping ErrRewoundCheckpoint) is refused with what is
// wrong, the file, and the way out, before Pebble, opened for writing,
// would delete the tables it no longer knows of.
func OpenStore(dir string, opts StoreOptions) (*Store, error) {
	if opts.CloseTimeout <= 0 {
		opts.CloseTimeout = DefaultCloseTimeout
	}
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	if opts.DiskReserve == 0 {
		opts.DiskReserve = DefaultDiskReserve
	}
	s := &Store{dir: dir, fs: opts.FS, opts: opts, recorded: -1, failed: make(chan struct{}), stuck: make(chan struct{}), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	if err := atomicfile.MkdirAllFS(opts.FS, dir, 0o755); err != nil {
		return nil, &storeError{kinds: []error{ErrStoreFailed}, dir: dir, cause: fmt.Errorf("create the directory: %w", err), hint: createHint(err)}
	}
	lock, lockFile, err := lockCheckpoint(opts.FS, dir, inUseQueryHint)
	if err != nil {
		return nil, err
	}
	s.lock, s.lockFile = lock, lockFile
	if err := s.diskRoom(0, "open the store"); err != nil {
		lock.Close()
		return nil, err
	}
	if err := s.open(); err != nil {
		lock.Close()
		return nil, err
	}
	if opts.SyncInterval > 0 {
		s.done.Add(1)
		go s.syncLoop()
	}
	if opts.FS == vfs.Default {
		// Another process (streamgen inspect) may ask for a snapshot.
		s.done.Add(1)
		go s.serveSnapshots()
	}
	return s, nil
}

// open opens Pebble under s.lock: verified against the commit file
// first, if there is one (see OpenStore).
func (s *Store) open() error {
	rec, found, err := readCommitFile(s.fs, s.dir)
	if err != nil {
		return err
	}
	cache := s.opts.Shared.blockCache()
	if cache == nil {
		cache = pebble.NewCache(s.blockCacheSize())
	}
	defer cache.Unref() // each DB holds its own reference
	if found {
		s.recorded = rec.BatchID
		if err := checkManifest(s.fs, s.dir, rec.BatchID, rec.Manifest); err != nil {
			return err
		}
		if err := s.verify(cache, rec); err != nil {
			return err
		}
	}
	db, err := s.openPebble(cache, found, false)
	if err != nil {
		return s.openError(err)
	}
	s.db = db
	// An open that recorded a failure (Logger.Fatalf on a MANIFEST that
	// cannot be written, corruption met while replaying) may still return
	// a DB.
	if err := s.Err(); err != nil {
		s.closeDB()
		return err
	}
	if err := s.writeOrigin(); err != nil {
		s.closeDB()
		return err
	}
	shared := s.opts.Shared.stateBudget()
	if s.opts.StateCacheSize >= 0 && (s.opts.Shared == nil || shared != nil) {
		empty, err := s.hasNoState()
		if err != nil {
			s.closeDB()
			return err
		}
		if shared != nil {
			s.state = shared.newCache(empty)
		} else {
			budget := s.opts.StateCacheSize
			if budget == 0 {
				budget = DefaultStateCacheSize
			}
			s.state = newStateCache(budget, empty)
		}
	}
	s.cache = cache
	cache.Ref()
	return nil
}

// pebbleOptions are the options of the store's Pebble. mustExist refuses
// to create a store where a commit file says one was; readOnly opens it
// for verify.
func (s *Store) pebbleOptions(cache *pebble.Cache, mustExist, readOnly bool) *pebble.Options {
	hooks := pebbleHooks{s}
	popts := &pebble.Options{
		FS: dirSyncs{errorfs.Wrap(s.fs, noWritesOnceFailed{s}), s}, Cache: cache, Logger: hooks, EventListener: hooks.listener(),
		ErrorIfNotExists: mustExist, ReadOnly: readOnly, Lock: s.lock,
	}
	if s.opts.SyncInterval > 0 {
		// Commits request a sync without waiting for it (Commit): the
		// log writer writes each batch to the file at once, and syncs no
		// more often than this.
		interval := s.opts.SyncInterval
		if !s.opts.SyncAtOnce {
			popts.WALMinSyncInterval = func() time.Duration { return interval }
		}
	}
	// Bloom filters let a read of a key that has no state yet (every new
	// key) skip the tables that cannot hold it.
	popts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	// Memtables of 64 MiB in place of Pebble's 4 MiB (MemTableSize), in
	// a block cache with room for them: in the Nexmark queries, where a
	// window's count or an auction's best bid is rewritten batch after
	// batch, q4 ran at 450–459k events per CPU-second at 30M events
	// against 378–380k, and q8 at 2.93M against 1.77M at 100M, with 217
	// MiB more resident (2026-12-05: bench/README.md and its history); in
	// a block cache of 128 MiB in all, q4 at 30M was slower (360k), its
	// reads' blocks pushed out by the memtables' reservations.
	popts.MemTableSize = uint64(s.memTableSize())
	// A batch of over half a memtable's writes becomes a memtable of its
	// own and is flushed to an L0 table: a query with large batches adds
	// an L0 table per batch, each over the key range of the whole batch.
	// Compacting L0 from 4 overlapping tables (Pebble's default) rewrites
	// the base level every 4 such batches; from 16, a quarter as often,
	// for up to 16 L0 tables a point read looks at (through their Bloom
	// filters, which mostly answer no). Reads of state the state cache
	// holds, or knows to be absent, do not reach Pebble at all. At 1M
	// keys of count per key, whose reads all stay in the cache, the
	// compactions took 0.9 s of the run's 4 s of CPU with 8, and the run
	// is about 5% shorter with 16. A store larger than the cache pays at
	// its reads: 6M keys took 24 s with 16 and 23 s with 8
	// (bench/README.md, "Writes in key order"; both measured with 4 MiB
	// memtables, before they were 64 MiB).
	popts.L0CompactionThreshold = 16
	popts.L0StopWritesThreshold = 48
	if s.opts.RangeReads {
		// A scan of a key's entries (a join's rows in a time range) seeks
		// in every L0 table: from 16 the join's stream-stream benchmark
		// took 51 s, from 4 41 s.
		popts.L0CompactionThreshold = 4
		popts.L0StopWritesThreshold = 12
	} else {
		// No compactions of tables for their density of point deletions
		// alone, but where a join's buffers are scanned by range (the
		// rows it forgets are point deletions, at the front of each
		// key's range). Pebble picks them to spare scans stepping over
		// deletions. The store's scans over long runs of them (the
		// timers that fired or moved, the rows a time to live or the
		// watermark expired) meet range deletions as a rule; those that
		// meet point deletions are within one key's entries (a list's or
		// a map's removed elements, a key's timers), long only for a key
		// that lives long and churns; and the point deletions of a key's
		// state (an auction closed, a window written) are met by point
		// reads, through Bloom filters. In Nexmark q4 and q9 at 100M
		// events, where such deletions follow the writes of millions of
		// keys, those compactions rewrote the last level's tables again
		// and again: without them, 331–345k against 441–443k events per
		// CPU-second in q4, 228–231k against 275–279k in q9
		// (2026-12-05: bench/README.md and its history). Compactions by
		// size, which weigh a table's deletions by what they free, still
		// carry the deletions down.
		popts.Experimental.TombstoneDenseCompactionThreshold = -1
	}
	// Disk-health checks: an operation that takes over 5 seconds is
	// reported (EventListener.DiskSlow, a warning), while it lasts.
	popts.WithFSDefaults()
	return popts
}

// blockCacheSize is the capacity of the store's own block cache (see
// StoreOptions.CacheSize).
func (s *Store) blockCacheSize() int64 {
	if s.opts.CacheSize > 0 {
		return s.opts.CacheSize
	}
	return DefaultBlockCacheSize + 2*s.memTableSize()
}

// memTableSize is the size of the store's memtables (see
// StoreOptions.MemTableSize).
func (s *Store) memTableSize() int64 {
	switch {
	case s.opts.MemTableSize > 0:
		return s.opts.MemTableSize
	case s.opts.Shared != nil:
		return pebbleMemTableSize
	}
	return DefaultMemTableSize
}

// hasNoState reports whether the store holds no state entry.
func (s *Store) hasNoState() (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{statePrefix}, UpperBound: []byte{statePrefix + 1}})
	if err != nil {
		return false, s.fail(fmt.Errorf("read checkpoint: %w", err))
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return false, s.fail(fmt.Errorf("read checkpoint: %w", err))
	}
	return empty, s.Err()
}

// openPebble opens the store's Pebble (see pebbleOptions). Open panics
// when a directory sync fails (atomicfs.Marker.Move: Pebble takes fsync
// errors for unrecoverable) after releasing what it opened: that is an
// error too.
func (s *Store) openPebble(cache *pebble.Cache, mustExist, readOnly bool) (*pebble.DB, error) {
	type opened struct {
		db  *pebble.DB
		err error
	}
	stuck := stuckOpenKey(s.fs, s.dir)
	if n := stuckOpens.count(stuck); n >= maxStuckOpens {
		return nil, &storeError{kinds: []error{ErrStoreFailed}, dir: s.dir,
			cause: fmt.Errorf("%d earlier opens of this checkpoint in this process failed as Pebble flushed the log it replayed, and wait there, each holding that log in memory", n),
			hint:  "fix the disk's fault and restart the process"}
	}
	done := make(chan opened, 1)
	popts := s.pebbleOptions(cache, mustExist, readOnly)
	s.opening.Store(true)
	go func() {
		defer s.opening.Store(false)
		var o opened
		defer func() {
			if r := recover(); r != nil {
				o.err = s.fail(fmt.Errorf("pebble: open: %v", r))
			}
			done <- o
		}()
		o.db, o.err = pebble.Open(s.dir, popts)
	}()
	select {
	case o := <-done:
		return o.db, o.err
	case <-s.failed:
		// Pebble failed while it opened (a table or a MANIFEST it could not
		// write as it flushed the replayed log): Open waits for a flush
		// that Pebble tries again at once after each failure, in a loop
		// (the flush's next table waits for ever instead:
		// noWritesOnceFailed). The open is left behind, as Close leaves a
		// Pebble that does not close in time, and the directory's lock,
		// which it holds a reference to, released: the open changes
		// nothing more in the directory, and a start in this process once
		// the fault is gone (a disk freed) may take the lock again, up to
		// maxStuckOpens times. The goroutine closes the DB if Open ever
		// returns one.
		if s.lockFile != nil {
			s.lockFile.Close()
		}
		stuckOpens.add(stuck, 1)
		go func() {
			if o := <-done; o.db != nil {
				o.db.Close()
			}
			stuckOpens.add(stuck, -1)
		}()
		return nil, s.Err()
	}
}

// maxStuckOpens is how many opens of a checkpoint a process leaves
// behind (openPebble) before it refuses the next: each holds the log it
// replayed in memory, and a start tried again and again on a disk that
// stays at fault (an App restarting a task) would fill the memory.
const maxStuckOpens = 3

// stuckOpens counts the opens left behind, by checkpoint (stuckOpenKey).
var stuckOpens = stuckCounts{n: map[string]int{}}

type stuckCounts struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *stuckCounts) count(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *stuckCounts) add(key string, d int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[key] += d; c.n[key] <= 0 {
		delete(c.n, key)
	}
}

// stuckOpenKey names the checkpoint in dir of fsys: the directory's
// absolute path on the default file system; on another, the directory
// and the file system's identity (a pointer's address, which the opens
// left behind keep in use).
func stuckOpenKey(fsys vfs.FS, dir string) string {
	if fsys == vfs.Default {
		if abs, err := filepath.Abs(dir); err == nil {
			return abs
		}
		return dir
	}
	return fmt.Sprintf("%p %T %s", fsys, fsys, filepath.Clean(dir))
}

// noWritesOnceFailed refuses Pebble's changes to the directory (a file
// made, renamed, linked or removed) once the store has failed:
// Pebble goes on after an error it deems fatal (Logger.Fatalf returns,
// see above), and its next steps, such as a flush tried again into a new
// MANIFEST and the removal of the log it replayed while the marker still
// names the old MANIFEST, would lose committed batches. While Pebble
// opens, a table or a blob file made (a flush's output) waits for ever
// instead: a flush that fails is tried again at once, in a loop that
// would spin on the error (or, were the files made, fill the disk), and
// the open is left behind (openPebble). Open's other changes fail, and
// Open returns their error.
type noWritesOnceFailed struct{ s *Store }

func (n noWritesOnceFailed) String() string { return "no writes once the store has failed" }

func (n noWritesOnceFailed) MaybeError(op errorfs.Op) error {
	switch op.Kind {
	case errorfs.OpCreate, errorfs.OpLink, errorfs.OpRemove, errorfs.OpRemoveAll, errorfs.OpRename, errorfs.OpReuseForWrite:
	default:
		// (Writes to files already open go on: a file whose write
		// failed may be left unclosed by Pebble's error paths.)
		return nil
	}
	select {
	case <-n.s.failed:
		if n.s.opening.Load() && op.Kind == errorfs.OpCreate && (strings.HasSuffix(op.Path, ".sst") || strings.HasSuffix(op.Path, ".blob")) {
			select {} // left behind with the open (see above)
		}
		return fmt.Errorf("%w: no write after it", n.s.Err())
	default:
		return nil
	}
}

// dirSyncs is the FS of the store's Pebble, whose directory (the
// store's) fails the store when a sync of it fails. Pebble panics when
// the sync that makes a marker's move durable fails (atomicfs.Marker.Move:
// fsync errors are unrecoverable, it says): on a flush's or a
// compaction's goroutine, where a MANIFEST moves, that ends the process,
// Open's flush of a replayed log included. There the sync waits for ever
// instead, the store failed: the goroutine changes nothing more, as the
// process that panicked would not, the query ends on the failure
// (Query.watch) and an open is left behind (openPebble). Elsewhere,
// Open's own goroutine included, whose panic openPebble recovers, the
// error is returned; as a commit moves to a new log file (DB.rotateWAL),
// where Pebble panics on it too, the sync waits for ever on the goroutine
// of its own that the commit runs on (see logFile).
type dirSyncs struct {
	vfs.FS
	s *Store
}

// Create and ReuseForWrite make log files that fail the store as
// Pebble moves off them (logFile), and fail it when the new log file
// cannot be made as Pebble moves to it.
func (f dirSyncs) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.Create(name, category)
	return f.s.logFile(name, file, err)
}

func (f dirSyncs) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := f.FS.ReuseForWrite(oldname, newname, category)
	return f.s.logFile(newname, file, err)
}

func (f dirSyncs) OpenDir(name string) (vfs.File, error) {
	d, err := f.FS.OpenDir(name)
	if err != nil || filepath.Clean(name) != filepath.Clean(f.s.dir) {
		// (Another directory, such as a snapshot's (DB.Checkpoint), is
		// not the store's: a fault there is the snapshot's alone.)
		return d, err
	}
	return dirSync{d, f.s}, nil
}

// dirSync is a directory of dirSyncs.
type dirSync struct {
	vfs.File
	s *Store
}

func (d dirSync) Sync() error {
	err := d.File.Sync()
	if err == nil {
		return nil
	}
	cause := fmt.Errorf("sync the directory: %w", err)
	if inRotateWAL() {
		d.s.stick(cause) // a new log file's (see logFile)
	}
	err = d.s.fail(cause)
	if markerMoveOffOpen() {
		select {} // see dirSyncs
	}
	return err
}

// markerMoveOffOpen reports whether the caller is a marker's move
// (atomicfs.Marker.Move) on a goroutine other than pebble.Open's.
func markerMoveOffOpen() bool {
	on := onStack("/vfs/atomicfs.(*Marker).Move", "/pebble/v2.Open")
	return on[0] && !on[1]
}

// onStack reports, for each of names, whether a function whose name ends
// with it is among the caller's callers.
func onStack(names ...string) []bool {
	on := make([]bool, len(names))
	pcs := make([]uintptr, 64)
	frames := goruntime.CallersFrames(pcs[:goruntime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		for i, name := range names {
			on[i] = on[i] || strings.HasSuffix(f.Function, name)
		}
		if !more {
			return on
		}
	}
}

// openError describes an error of pebble.Open.
func (s *Store) openError(err error) error {
	if f := s.Err(); f != nil {
		return f
	}
	if errors.Is(err, pebble.ErrDBDoesNotExist) {
		return s.lostError(commitRecord{BatchID: s.recorded}, storeContents{})
	}
	if msg := err.Error(); strings.Contains(msg, "written in unknown format major version") || strings.Contains(msg, "which is no longer supported") {
		// A store a later version of the program wrote (a downgrade), or
		// one too old to read: not damaged, and nothing to mend.
		return fmt.Errorf("%w: the store in %s is in a format this version does not read (%v): run the version that wrote it, or start from a new checkpoint directory",
			ErrIncompatibleCheckpoint, s.dir, err)
	}
	if isCorruption(err) {
		return &storeError{kinds: []error{ErrCorruptCheckpoint}, dir: s.dir, file: s.damagedFile(err), cause: err, hint: corruptHint}
	}
	return s.fail(err)
}

// damagedFile names, when Pebble's error does not, the file whose damage
// it reports: the format marker that is missing, or the OPTIONS file.
func (s *Store) damagedFile(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "already exists and is not pristine"):
		return s.opts.FS.PathJoin(s.dir, "marker.format-version.* (missing)")
	case strings.Contains(msg, "merger name from file"), strings.Contains(msg, "comparer name from file"), strings.Contains(msg, "OPTIONS"):
		names, _ := s.opts.FS.List(s.dir)
		for _, n := range names {
			if strings.HasPrefix(n, "OPTIONS-") {
				return s.opts.FS.PathJoin(s.dir, n)
			}
		}
	}
	return ""
}

// storeContents is what verify finds in a store.
type storeContents struct {
	progress    Progress
	hasProgress bool
	// hasOrigin says the store holds originKey.
	hasOrigin bool
}

// verify opens the store read-only and compares it with the commit file.
func (s *Store) verify(cache *pebble.Cache, rec commitRecord) error {
	db, err := s.openPebble(cache, true, true)
	if err != nil {
		return s.openError(err)
	}
	s.db = db
	defer s.closeDB()
	var c storeContents
	if c.progress, c.hasProgress, err = s.Progress(); err != nil {
		return err
	}
	if c.hasOrigin, err = s.has(originKey); err != nil {
		return err
	}
	if !c.hasOrigin || !c.hasProgress || c.progress.BatchID < rec.BatchID {
		return s.lostError(rec, c)
	}
	return s.Err()
}

// has reports whether the store holds key.
func (s *Store) has(key string) (bool, error) {
	_, closer, err := s.db.Get([]byte(key))
	if errors.Is(err, pebble.ErrNotFound) {
		return false, s.Err()
	}
	if err != nil {
		return false, s.fail(err)
	}
	closer.Close()
	return true, s.Err()
}

// startWrites are the write options of what the store writes as a query
// starts, before its batches: the origin, the metadata, a dropped
// variable's deletion. They are synced at once, unless the store syncs at
// an interval (SyncInterval): then the sync of the batches after them,
// which the commit file waits for before it records a batch, covers them
// (they are earlier in the same log), and a sync of their own would wait
// for up to the interval after the one before it (Pebble's
// WALMinSyncInterval), holding the start that long.
func (s *Store) startWrites() *pebble.WriteOptions {
	if s.opts.SyncInterval > 0 {
		return pebble.NoSync
	}
	return pebble.Sync
}

// writeOrigin writes originKey into a store that lacks it: a new store,
// or one written before origin keys (verify refuses one that lost it).
func (s *Store) writeOrigin() error {
	ok, err := s.has(originKey)
	if ok || err != nil {
		return err
	}
	return s.write("record the checkpoint's origin", func() error {
		return s.db.Set([]byte(originKey), []byte(time.Now().UTC().Format(time.RFC3339)), s.startWrites())
	})
}

// syncLoop waits, batch by batch in commit order, for the log sync of
// the batches committed with SyncInterval (Pebble syncs within
// SyncInterval of a commit), releases them, and records the synced ones
// in the commit file: when it has caught up with the commits, or once per
// SyncInterval while they keep coming. A failed sync is the store's
// failure, seen as soon as Pebble reports it; the commit file stays where
// it was. It returns once Close has stopped it and it has released every
// pending batch, which needs Pebble closed (its final sync) or failed.
func (s *Store) syncLoop() {
	defer s.done.Done()
	lastRecord := time.Now()
	// unrecorded is the last batch synced and not yet recorded (-1:
	// none); a plan's sync (WritePlan) records only that.
	unrecorded := int64(-1)
	for {
		p, ok := s.nextPending()
		if !ok {
			return
		}
		err := p.b.SyncWait()
		p.b.Close()
		if err != nil {
			s.fail(fmt.Errorf("sync the log of batch %d: %w", p.id, err))
			continue
		}
		if !p.plan {
			unrecorded = p.id
		}
		s.mu.Lock()
		caughtUp := len(s.pending) == 0
		s.mu.Unlock()
		if unrecorded >= 0 && s.Err() == nil && (caughtUp || time.Since(lastRecord) >= s.opts.SyncInterval) {
			if err := s.record(unrecorded); err != nil {
				s.fail(err)
			}
			unrecorded, lastRecord = -1, time.Now()
		}
	}
}

// nextPending returns the oldest pending batch, waiting for one; ok is
// false once Close has stopped the loop and none is left.
func (s *Store) nextPending() (p pendingBatch, ok bool) {
	for {
		s.mu.Lock()
		if len(s.pending) > 0 {
			p = s.pending[0]
			s.pending[0] = pendingBatch{}
			s.pending = s.pending[1:]
			s.mu.Unlock()
			return p, true
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.stop:
			s.mu.Lock()
			left := len(s.pending)
			s.mu.Unlock()
			if left == 0 {
				return p, false
			}
		}
	}
}

// rerecord writes id to the commit file, even when it holds a later one:
// for a store rebuilt from an earlier copy (Restore.Clear).
func (s *Store) rerecord(id int64) error {
	s.recording.Lock()
	defer s.recording.Unlock()
	mark := s.markManifest(nil)
	if err := writeCommitFile(s.fs, s.dir, id, mark); err != nil {
		return err
	}
	s.recorded, s.mark = id, mark
	return nil
}

// unrecord removes the commit file: for a store rebuilt from a copy that
// holds no batch (Restore.Clear).
func (s *Store) unrecord() error {
	s.recording.Lock()
	defer s.recording.Unlock()
	path := s.fs.PathJoin(s.dir, commitFileName)
	if err := s.fs.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove the commit file %s: %w", path, err)
	}
	// Synced, so that a machine that crashes before the store is written
	// again does not bring the file back over a store cleared of what it
	// recorded (one refused, then, as having lost its batches).
	d, err := s.fs.OpenDir(s.dir)
	if err == nil {
		err = d.Sync()
		if cerr := d.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return fmt.Errorf("remove the commit file %s: sync its directory: %w", path, err)
	}
	s.recorded = -1
	return nil
}

// recordedBatch returns the last batch the commit file records as
// durable (-1 for none).
func (s *Store) recordedBatch() int64 {
	s.recording.Lock()
	defer s.recording.Unlock()
	return s.recorded
}

// record writes id to the commit file, unless it holds id or later.
func (s *Store) record(id int64) error {
	s.recording.Lock()
	defer s.recording.Unlock()
	if id <= s.recorded {
		return nil
	}
	mark := s.markManifest(s.mark)
	if err := writeCommitFile(s.fs, s.dir, id, mark); err != nil {
		return err
	}
	s.recorded, s.mark = id, mark
	return nil
}

// Close stops the sync loop, closes the database (which syncs its log),
// records the batches that sync made durable in the commit file, and
// returns the store's failure, if any. It waits for Pebble up to
// CloseTimeout; past it, or when a failed commit left Pebble's commit
// pipeline locked, it returns an error wrapping ErrStoreNotClosed and
// leaves Pebble's files open and locked until the process ends. A second
// call returns what the first did.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Store) close() error {
	close(s.stop)
	s.readsClosed.Store(true)
	if s.wedged.Load() {
		why := "a failed commit left Pebble's commit pipeline locked"
		wedgedStores.Lock()
		wedgedStores.why[stuckOpenKey(s.fs, s.dir)] = why
		wedgedStores.Unlock()
		return leftOpen{s.notClosed(why)}
	}
	closed := make(chan error, 1)
	// The reads of snapshots in progress end first (a new one waits, then
	// finds the store closed), within the close timeout like the rest.
	// Pebble closes next: its final sync releases the sync loop, which
	// may be waiting for a sync Pebble delays by up to SyncInterval; the
	// loop then records the last synced batch.
	// When Close has given up waiting, the goroutine releases what Close
	// would have, once Pebble has closed (a snapshot read that outlived
	// the timeout, then ended): the directory is not locked for ever.
	var (
		handOver       sync.Mutex
		finished, gone bool
	)
	release := func() error {
		s.cache.Unref()
		if s.state != nil {
			s.state.close()
		}
		releaseCHeap(true) // the cache's blocks, Pebble's memtables (cheap.go)
		return s.lock.Close()
	}
	go func() {
		s.readMu.Lock()
		s.readMu.Unlock() // only waits for the reads open
		err := s.closeDB()
		s.done.Wait()
		handOver.Lock()
		finished = true
		if gone {
			release()
		}
		handOver.Unlock()
		closed <- err
	}()
	t := time.NewTimer(s.opts.CloseTimeout)
	defer t.Stop()
	var err error
	select {
	case err = <-closed:
	case <-t.C:
		handOver.Lock()
		if !finished {
			gone = true
			handOver.Unlock()
			return s.notClosed(fmt.Sprintf("Pebble did not close within %v", s.opts.CloseTimeout))
		}
		handOver.Unlock()
		err = <-closed
	}
	if lerr := release(); lerr != nil && err == nil {
		err = fmt.Errorf("release the checkpoint's lock: %w", lerr)
	}
	if f := s.Err(); f != nil {
		return f
	}
	if err != nil {
		// The final sync failed: batches after the last one synced may
		// be lost, as in a machine crash.
		return s.fail(fmt.Errorf("close: %w", err))
	}
	return nil
}

// closeDB closes Pebble, turning a panic of its Close (a DB left in an
// inconsistent state by an earlier failure) into an error.
func (s *Store) closeDB() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble: close: panic: %v", r)
		}
	}()
	return s.db.Close()
}

// notClosed is Close's error when Pebble stays open.
func (s *Store) notClosed(why string) error {
	if s.state != nil && s.state.shared != nil {
		// Its state cache stays mapped, for the call that may still
		// read it, but gives its share back to the stores left.
		s.state.shared.leave(s.state)
	}
	err := fmt.Errorf("%w in %s: %s; its files stay open and locked until it does (or the process ends)", ErrStoreNotClosed, s.dir, why)
	if f := s.Err(); f != nil {
		err = fmt.Errorf("%w (after: %w)", err, f)
	}
	return err
}

// wedgedStores says why each store of the process left open with its
// commit pipeline locked (Store.Close on a wedged store) holds its
// checkpoint's lock, by checkpoint (stuckOpenKey): until the process
// ends. A start on it then says so (lockCheckpoint), where another
// process's lock, or a store's whose Close timed out and may yet finish,
// gives ErrCheckpointInUse.
var wedgedStores = struct {
	sync.Mutex
	why map[string]string
}{why: map[string]string{}}

// heldByWedged says why a store of the process left open holds the lock
// of the checkpoint in dir of fsys until the process ends; ok is false
// if none does.
func heldByWedged(fsys vfs.FS, dir string) (why string, ok bool) {
	wedgedStores.Lock()
	defer wedgedStores.Unlock()
	why, ok = wedgedStores.why[stuckOpenKey(fsys, dir)]
	return why, ok
}

// Progress is what a committed batch leaves behind: where the next batch
// starts.
type Progress struct {
	// BatchID is the id of the last committed batch; the next is
	// BatchID+1. Sinks use it as an epoch to stay idempotent.
	BatchID int64 `json:"batchId"`
	// Watermark is the event-time watermark the batch ran with.
	Watermark time.Time `json:"watermark"`
	// Offsets are the sources' positions after the batch, by source name,
	// in each source's own encoding.
	Offsets map[string]json.RawMessage `json:"offsets,omitempty"`
	// PartitionWatermarks are the watermarks of the sources' partitions
	// (see partitionKey): the largest event time seen less the delay. The
	// query's watermark is computed from them.
	PartitionWatermarks map[string]time.Time `json:"partitionWatermarks,omitempty"`
	// LastActive is the processing time each partition last had data, for
	// leaving idle partitions out of the watermark.
	LastActive map[string]time.Time `json:"lastActive,omitempty"`
	// StateRows is the number of state rows of each stateful operator,
	// kept up to date batch by batch so that no report has to count them.
	StateRows []int64 `json:"stateRows,omitempty"`
	// OperatorMetrics are each operator's own figures (see
	// KeyState.AddMetric), kept up to date as StateRows.
	OperatorMetrics []map[string]int64 `json:"operatorMetrics,omitempty"`
	// HeldWatermarks are, by operator, the watermark each ran the batch
	// with where it was held behind Watermark (see
	// WindowClosesPerBatch), zero elsewhere: what the rows reaching it
	// in the next batch are late by (Batch.LateWatermarkOf).
	HeldWatermarks []time.Time `json:"heldWatermarks,omitempty"`
	// StateBytesPerRecord is the bytes of state writes the batches wrote
	// per input record, as the last batch with input and writes measured
	// it, for MaxBatchStateBytes: the size of the next batch's plan.
	StateBytesPerRecord int64 `json:"stateBytesPerRecord,omitempty"`

	// ranWith, once a start has restored the progress (Watermark is then
	// the next batch's), is the watermark the committed batch ran with:
	// what the next batch's rows are late by (Batch.LateWatermark).
	ranWith  time.Time
	restored bool
	// RestoredMarks are the keys of PartitionWatermarks that a start
	// restored and whose partitions have had no rows since (see
	// nextWatermark): kept, so that the next start computes the
	// watermark its first batch runs with as the batch after this one
	// would have, not from marks this run left out.
	RestoredMarks map[string]bool `json:"restoredMarks,omitempty"`
}

// Progress returns the progress of the last committed batch; ok is false
// for a new checkpoint (then BatchID is -1).
func (s *Store) Progress() (p Progress, ok bool, err error) {
	if err := s.Err(); err != nil {
		return p, false, err
	}
	return s.readProgress(s.db)
}

// ErrStoreClosed is the error of a read of the state of a query that has
// stopped (Query.ReadState).
var ErrStoreClosed = errors.New("streamgen: the query has stopped: its state is closed")

// ReadSnapshot returns a reader of the store as it is now: the state, timers
// and progress of the last batch committed, unchanged by the batches
// committed while it is open. It must be closed, soon: Close waits for
// it. A failed store gives its failure.
func (s *Store) ReadSnapshot() (*CheckpointReader, error) {
	if s.readsClosed.Load() {
		return nil, ErrStoreClosed // without waiting behind Close
	}
	s.readMu.RLock()
	if s.readsClosed.Load() {
		s.readMu.RUnlock()
		return nil, ErrStoreClosed
	}
	if err := s.Err(); err != nil {
		s.readMu.RUnlock()
		return nil, err
	}
	snap := s.db.NewSnapshot()
	var once sync.Once
	release := func() (err error) {
		once.Do(func() {
			err = snap.Close()
			s.readMu.RUnlock()
		})
		return err
	}
	s.recording.Lock()
	committed := s.recorded
	s.recording.Unlock()
	return &CheckpointReader{s: s, r: snap, release: release, committed: committed}, nil
}

// readProgress is Progress, read from r: the store or a snapshot of it.
func (s *Store) readProgress(r pebble.Reader) (p Progress, ok bool, err error) {
	v, closer, err := r.Get([]byte(progressKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return Progress{BatchID: -1}, false, s.Err()
	}
	if err != nil {
		return p, false, s.fail(fmt.Errorf("read progress: %w", err))
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &p); err != nil {
		return p, false, fmt.Errorf("streamgen: checkpoint progress is corrupt: %w", err)
	}
	return p, true, nil
}

// PlannedOffsets is a batch's plan, written before the batch runs, as
// Spark's offset log with its metadata: a batch run again after a failure
// reads exactly the input of its first attempt, at its processing time and
// watermark, with data or not, so that it writes the same rows and a sink
// that skips a batch id it has seen (a ForeachWriter whose Open returns
// false) loses nothing.
type PlannedOffsets struct {
	BatchID int64                      `json:"batchId"`
	Ends    map[string]json.RawMessage `json:"ends"`
	// Now is the batch's processing time and Watermark its event-time
	// watermark (zero without one). Plans written before they were
	// recorded have no Now; their batch runs at the time and watermark
	// of its new attempt.
	Now       time.Time `json:"now,omitzero"`
	Watermark time.Time `json:"watermark,omitzero"`
	// WindowCloses is the WindowClosesPerBatch the batch runs with, so
	// that a batch run again closes the same windows whatever the
	// option is at the new start; nil in plans written before it was
	// recorded (the batch runs with the start's).
	WindowCloses *int `json:"windowCloses,omitempty"`
	// Starts are, by source, what a StartPlanner needs to read the batch
	// again from where it was planned to start (a Kafka source's starting
	// offsets); nil in plans written before they were recorded, and for
	// sources that need nothing.
	Starts map[string]json.RawMessage `json:"starts,omitempty"`
}

// PlannedBatch returns the last batch planned; ok is false when none was.
func (s *Store) PlannedBatch() (p PlannedOffsets, ok bool, err error) {
	return s.readPlannedBatch(s.db)
}

// readPlannedBatch is PlannedBatch, read from r.
func (s *Store) readPlannedBatch(r pebble.Reader) (p PlannedOffsets, ok bool, err error) {
	v, closer, err := r.Get([]byte(planKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return p, false, s.Err()
	}
	if err != nil {
		return p, false, s.fail(fmt.Errorf("read the planned batch: %w", err))
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &p); err != nil {
		return p, false, fmt.Errorf("%w in %s: the planned batch is corrupt: %v; %s", ErrCorruptCheckpoint, s.dir, err, corruptHint)
	}
	return p, true, nil
}

// WritePlan records a batch's planned offsets before it runs: synced, or,
// with a SyncInterval, handed to Pebble's log writer with a sync
// requested and not waited for, as a commit is (see apply): a process
// crash then keeps it, and a machine crash that loses it loses the
// batch's commit too.
func (s *Store) WritePlan(p PlannedOffsets) error { return s.writePlan(p, false) }

// writePlan is WritePlan; synced syncs the plan even with a SyncInterval
// (and with it, everything written before it).
func (s *Store) writePlan(p PlannedOffsets, synced bool) error {
	if err := s.Err(); err != nil {
		return err
	}
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("streamgen: encode the planned batch: %w", err)
	}
	if s.opts.SyncInterval <= 0 || synced {
		return s.write("write the planned batch", func() error { return s.db.Set([]byte(planKey), v, pebble.Sync) })
	}
	b := s.db.NewBatch()
	if err := b.Set([]byte(planKey), v, nil); err != nil {
		b.Close()
		return fmt.Errorf("streamgen: write the planned batch: %w", err)
	}
	return s.write("write the planned batch", func() error {
		if err := s.db.ApplyNoSyncWait(b, pebble.Sync); err != nil {
			b.Close()
			return err
		}
		s.pend(pendingBatch{b: b, id: p.BatchID, plan: true})
		return nil
	})
}

// pend hands a batch applied with a sync requested (SyncInterval) to the
// sync loop, which waits for its sync (Batch.SyncWait), then closes it
// and, unless it is a plan, records it.
func (s *Store) pend(p pendingBatch) {
	s.mu.Lock()
	s.pending = append(s.pending, p)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default: // the loop has a wake-up coming
	}
}

// Committer makes one batch durable: its state and timer changes, the
// sources' offsets, the watermark and the batch id, all or nothing. The
// Store is the committer of a query with a checkpoint in Pebble; a
// committer that also commits elsewhere (a Kafka transaction) wraps it.
// The query's loop calls Commit from one goroutine, once per batch, after
// the batch's sinks.
type Committer interface {
	Commit(b *StateBatch, p Progress) error
}

// IdleFailer is a Committer that works while no batch runs (a commit, on
// a timer, of batches it has committed locally) and can fail there: a
// query with no batch to run asks IdleErr before each wait for data and
// ends with its error, as its next batch would, rather than sit idle
// with the failure unseen. IdleErr is called from the query's goroutine
// and must not block.
type IdleFailer interface {
	IdleErr() error
}

// Commit writes the progress into b and commits b atomically: state,
// timers and progress become visible and durable together (durable at
// once, or within SyncInterval), then records the batch in the commit
// file (at once, or when the sync loop sees it synced). b cannot be used
// afterwards. An error after Pebble took the batch (the commit file could
// not be written) leaves the batch committed: the next start resumes
// after it.
func (s *Store) Commit(b *StateBatch, p Progress) error {
	return s.commit(b, p, nil)
}

// commit is Commit; cached, if not nil, is called once the state cache
// holds the batch's writes (unless the commit fails before).
func (s *Store) commit(b *StateBatch, p Progress, cached func()) (err error) {
	if err := s.Err(); err != nil {
		return err
	}
	b.closeReads()
	s.lastBatch.Store(int64(b.b.Len()))
	if err := s.diskRoom(b.b.Len(), fmt.Sprintf("commit batch %d", p.BatchID)); err != nil {
		return err
	}
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("streamgen: encode progress: %w", err)
	}
	if err := b.b.Set([]byte(progressKey), v, nil); err != nil {
		return err
	}
	if s.deletionsTaken {
		// The committer has them with this batch.
		if err := b.b.DeleteRange([]byte{startDeletionPrefix}, []byte{startDeletionPrefix + 1}, nil); err != nil {
			return err
		}
	}
	// The cache learns the batch's changes before Pebble takes it: Pebble
	// may empty a large batch as it commits it (it becomes a memtable of
	// its own), so the batch cannot be read afterwards.
	var cacheErr error
	if s.state != nil && (len(b.hints) > 0 || b.rangeDeleted) {
		// (A batch whose state writes are all of variables the cache
		// leaves out, or that wrote no state, has nothing to tell it.)
		cacheErr = s.state.applyCommitted(b.b, b.hints)
	}
	if cached != nil {
		cached()
	}
	// A large batch is given to Pebble in key order (sortedbatch.go).
	sorted, ok, err := s.sorter.sortedCopy(s.db, b.b)
	if err != nil {
		// The batch's own writes do not read back: nothing of it may
		// reach the log.
		if s.state != nil {
			s.state.reset()
		}
		return s.fail(fmt.Errorf("commit batch %d: read the batch's writes: %w", p.BatchID, err))
	}
	if ok {
		s.reuse(b.b, b.hints)
		b.b = sorted
	}
	b.offered = true
	if err := s.apply(b, p.BatchID); err != nil {
		if s.state != nil {
			s.state.reset() // it holds changes that never committed
		}
		return err
	}
	s.deletionsTaken = false
	releaseCHeap(false) // what the block cache freed (cheap.go)
	// Pebble has the batch: only its sync (SyncInterval) or the Close
	// below releases it.
	b.closed = true
	if s.opts.SyncInterval > 0 {
		s.pend(pendingBatch{b: b.b, id: p.BatchID})
	} else {
		b.b.Close()
		if err := s.record(p.BatchID); err != nil {
			return s.fail(err)
		}
	}
	if cacheErr != nil {
		return fmt.Errorf("streamgen: batch %d: update the state cache: %w", p.BatchID, cacheErr)
	}
	return nil
}

// write runs f, a write to Pebble, and returns the store's failure: f's
// error, or a failure Pebble recorded meanwhile (Logger.Fatalf), or a
// panic of Pebble's commit pipeline (a log writer that failed before),
// or a log file that failed as Pebble moved to a new one (see commitCall).
func (s *Store) write(what string, f func() error) error {
	if err := s.commitCall(what, f); err != nil {
		return err
	}
	return s.Err()
}

// commitCall runs f, a call that commits to Pebble, on a goroutine of
// its own (onItsOwn). f's error, or its panic (Pebble's commit pipeline,
// meeting a log writer that failed before, panics holding its lock),
// fails the store; a panic, and being stuck, mark it wedged, so that
// Close does not wait for the lock Pebble holds, and leave the batch f
// commits to Pebble: its caller does not close it (Store.closeBatch).
func (s *Store) commitCall(what string, f func() error) error {
	panicked, err := s.onItsOwn(f)
	if panicked != nil {
		s.wedged.Store(true)
		return s.fail(fmt.Errorf("%s: pebble: %v", what, panicked))
	}
	if err != nil {
		return s.fail(fmt.Errorf("%s: %w", what, err))
	}
	return nil
}

// onItsOwn runs f, a call into Pebble that may move its log to a new
// file, on a goroutine of its own, and waits for it, or for the store to
// be stuck (a log file that failed as Pebble moved to a new one, which
// f, or a commit f waits behind, waits on for ever: logFile): then it
// returns the store's failure and leaves f behind. It returns what f
// panicked with, or f's error.
func (s *Store) onItsOwn(f func() error) (panicked any, err error) {
	panicked, returned, err := unlessFailed(s.stuck, f)
	if !returned {
		return nil, s.Err()
	}
	return panicked, err
}

// unlessFailed runs f, a call into Pebble, on a goroutine of its own and
// waits for it, or for failed to close: a store whose files failed can
// leave Pebble waiting for ever (on a flush that cannot end, or a log
// that cannot move), and f with it, which is then left behind. returned
// says whether f returned; panicked is what it panicked with.
func unlessFailed(failed <-chan struct{}, f func() error) (panicked any, returned bool, err error) {
	type result struct {
		err      error
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		var r result
		defer func() {
			r.panicked = recover()
			done <- r
		}()
		r.err = f()
	}()
	select {
	case r := <-done:
		return r.panicked, true, r.err
	case <-failed:
		return nil, false, nil
	}
}

// closeBatch closes b, a batch given to Pebble to commit, unless a failed
// commit left it with Pebble (the store is wedged).
func (s *Store) closeBatch(b *pebble.Batch) {
	if !s.wedged.Load() {
		b.Close()
	}
}

// apply commits b's Pebble batch: synced, or, with SyncInterval, with a
// sync requested and not waited for. NoSync is not enough: Pebble's log
// writer leaves such a batch in its buffer, in the process's memory, until
// a block of the log fills or a later sync, so a process crash could lose
// batches committed long before; a requested sync wakes it at once.
func (s *Store) apply(b *StateBatch, id int64) error {
	err := s.commitCall(fmt.Sprintf("commit batch %d", id), func() error {
		if s.opts.SyncInterval > 0 {
			return s.db.ApplyNoSyncWait(b.b, pebble.Sync)
		}
		return b.b.Commit(pebble.Sync)
	})
	if err != nil {
		if s.wedged.Load() {
			b.closed = true // Pebble may still hold it
		}
		return err
	}
	// A failed log write or sync calls Logger.Fatalf, after which Apply
	// returns nil: the failure it recorded is the commit's. A failure of
	// background work recorded meanwhile (this batch's own flush, on a
	// full disk) is not: the batch is in the synced log, committed, and
	// the store's failure stops the query after it.
	if s.commitFailed.Load() {
		b.closed = true // Pebble may still hold it
		if err := s.Err(); err != nil {
			return err
		}
		return s.fail(fmt.Errorf("commit batch %d: the log write failed", id))
	}
	return nil
}

// deleteVariable deletes every entry of variable id of operator op, in
// every partition, and its expiry index entries, and syncs.
func (s *Store) deleteVariable(op, id uint8) error {
	b := s.db.NewBatch()
	defer s.closeBatch(b)
	// The partition comes first in a state key: find each in turn.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{statePrefix}, UpperBound: []byte{statePrefix + 1}})
	if err != nil {
		return s.fail(fmt.Errorf("delete state variable: %w", err))
	}
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 5 {
			break
		}
		part := binary.BigEndian.Uint32(k[1:5])
		lower := append(appendScope(nil, statePrefix, Scope{Partition: part, Operator: op}), id)
		if s.keepDeleted {
			if err := s.keepKeys(b, lower, prefixEnd(lower)); err != nil {
				it.Close()
				return err
			}
		}
		if err := b.DeleteRange(lower, prefixEnd(lower), nil); err != nil {
			it.Close()
			return fmt.Errorf("streamgen: delete state variable: %w", err)
		}
		next := binary.BigEndian.AppendUint32([]byte{statePrefix}, part)
		valid = it.SeekGE(prefixEnd(next))
	}
	if err := it.Close(); err != nil {
		return s.fail(fmt.Errorf("delete state variable: %w", err))
	}
	if err := s.write("delete state variable", func() error { return b.Commit(s.startWrites()) }); err != nil {
		return err
	}
	if s.state != nil {
		s.state.mu.Lock()
		s.state.clear()
		s.state.mu.Unlock()
	}
	return nil
}

// keepKeys writes into b, under startDeletionPrefix, the committed keys
// in [lower, upper): they are kept, with the deletion, until a batch
// gives them to the committer.
func (s *Store) keepKeys(b *pebble.Batch, lower, upper []byte) error {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return s.fail(fmt.Errorf("delete state variable: %w", err))
	}
	var key []byte
	for it.First(); it.Valid(); it.Next() {
		key = append(append(key[:0], startDeletionPrefix), it.Key()...)
		if err := b.Set(key, nil, nil); err != nil {
			it.Close()
			return fmt.Errorf("streamgen: delete state variable: %w", err)
		}
	}
	if err := it.Close(); err != nil {
		return s.fail(fmt.Errorf("delete state variable: %w", err))
	}
	return nil
}
