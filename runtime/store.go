package runtime

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrIncompatibleCheckpoint is wrapped by the error Start returns for a
// checkpoint written by a pipeline this one cannot continue.
var ErrIncompatibleCheckpoint = errors.New("streamgen: incompatible checkpoint")

// The key space. Every key starts with one of these bytes, so each kind of
// entry is a contiguous range:
//
//	metaKey                                                     Meta (JSON)
//	progressKey                                                 Progress (JSON)
//	statePrefix     partition(4) op(1) var(1) uvarint(len(key)) key suffix   state entry
//	timerPrefix     partition(4) op(1) expiry(8) key                         timer, by expiry
//	timerKeyPrefix  partition(4) op(1) uvarint(len(key)) key expiry(8)       timer, by key
//
// partition is the input partition that owns the entry (big-endian, so a
// partition's entries are contiguous and can be moved, restored or dropped
// alone); op is the operator's index and var the state variable's id, one
// byte each. A key's entries of one variable share the prefix up to the
// key, so "everything of this key" is one prefix; a point value has an
// empty suffix, list and map entries have their element's suffix.
//
// Timers are written to two indexes: by expiry, so that the timers due
// below a threshold are one range scan, and by key, so that a key's timers
// are listed and deleted without a scan of the whole index.
const (
	metaKey        = "\x01meta"
	progressKey    = "\x02progress"
	statePrefix    = 0x10
	timerPrefix    = 0x20
	timerKeyPrefix = 0x21
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
	// disk and syncs the log at this interval instead (asynchronous
	// progress tracking): faster, and a machine crash loses the batches of
	// the last interval, which are replayed from their sources. Since state
	// and offsets commit together, nothing is lost or counted twice either
	// way. The default, 0, syncs every commit.
	SyncInterval time.Duration
	// CacheSize is the size in bytes of Pebble's block cache, which keeps
	// recently read state in memory. The default is 128 MiB. (Pebble's
	// own default, 8 MiB, is taken up by its memtables, leaving state
	// reads to go to disk.)
	CacheSize int64
	// StateCacheSize is the budget in bytes of the cache of committed
	// state entries in front of Pebble, least recently used out first.
	// The default is 256 MiB; a negative size turns it off. Every batch's
	// writes still commit to Pebble: the cache changes no durability. The
	// cache's memory is outside the Go heap (on Unix), so the budget is
	// what it takes of the process's resident memory, at most.
	StateCacheSize int64
}

// Store is a query's state in Pebble: state entries, timers, the
// pipeline's description and the progress of the last committed batch.
// Reads of committed data (Progress) and NewBatch are safe for concurrent
// use; a StateBatch is not. Close waits for the background sync loop, if
// any, to stop.
type Store struct {
	db    *pebble.DB
	cache *pebble.Cache
	// state caches committed state entries; nil when turned off.
	state *stateCache
	opts  StoreOptions
	stop  chan struct{}
	done  sync.WaitGroup
}

// OpenStore opens (creating it if needed) the store in dir.
func OpenStore(dir string, opts StoreOptions) (*Store, error) {
	if opts.CacheSize <= 0 {
		opts.CacheSize = 128 << 20
	}
	cache := pebble.NewCache(opts.CacheSize)
	popts := &pebble.Options{FS: opts.FS, Logger: quietLogger{}, Cache: cache}
	if popts.FS == nil {
		popts.FS = vfs.Default
	}
	// Bloom filters let a read of a key that has no state yet (every new
	// key) skip the tables that cannot hold it.
	popts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open(dir, popts)
	if err != nil {
		cache.Unref()
		return nil, fmt.Errorf("streamgen: open checkpoint %s: %w", dir, err)
	}
	s := &Store{db: db, cache: cache, opts: opts, stop: make(chan struct{})}
	if opts.StateCacheSize >= 0 {
		budget := opts.StateCacheSize
		if budget == 0 {
			budget = 256 << 20
		}
		empty, err := s.hasNoState()
		if err != nil {
			s.Close()
			return nil, err
		}
		s.state = newStateCache(budget, empty)
	}
	if opts.SyncInterval > 0 {
		s.done.Add(1)
		go s.syncLoop()
	}
	return s, nil
}

// hasNoState reports whether the store holds no state entry.
func (s *Store) hasNoState() (bool, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{statePrefix}, UpperBound: []byte{statePrefix + 1}})
	if err != nil {
		return false, fmt.Errorf("streamgen: read checkpoint: %w", err)
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return false, fmt.Errorf("streamgen: read checkpoint: %w", err)
	}
	return empty, nil
}

// quietLogger drops Pebble's informational messages (a line per replayed
// log file at every start) and keeps its errors.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	slog.Error("streamgen: pebble: " + fmt.Sprintf(format, args...))
}
func (quietLogger) Fatalf(format string, args ...any) {
	panic("streamgen: pebble: " + fmt.Sprintf(format, args...))
}

// syncLoop syncs the log every SyncInterval until Close.
func (s *Store) syncLoop() {
	defer s.done.Done()
	t := time.NewTicker(s.opts.SyncInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			// An empty synced write makes every earlier write durable.
			_ = s.db.LogData(nil, pebble.Sync)
		}
	}
}

// Close stops the sync loop, syncs, and closes the database.
func (s *Store) Close() error {
	close(s.stop)
	s.done.Wait()
	err := s.db.LogData(nil, pebble.Sync)
	if cerr := s.db.Close(); err == nil {
		err = cerr
	}
	s.cache.Unref()
	if s.state != nil {
		s.state.close()
	}
	return err
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
}

// Progress returns the progress of the last committed batch; ok is false
// for a new checkpoint (then BatchID is -1).
func (s *Store) Progress() (p Progress, ok bool, err error) {
	v, closer, err := s.db.Get([]byte(progressKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return Progress{BatchID: -1}, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("streamgen: read progress: %w", err)
	}
	defer closer.Close()
	if err := json.Unmarshal(v, &p); err != nil {
		return p, false, fmt.Errorf("streamgen: checkpoint progress is corrupt: %w", err)
	}
	return p, true, nil
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

// Commit writes the progress into b and commits b atomically: state,
// timers and progress become visible and durable together (durable at
// once, or within SyncInterval). b cannot be used afterwards.
func (s *Store) Commit(b *StateBatch, p Progress) error {
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("streamgen: encode progress: %w", err)
	}
	if err := b.b.Set([]byte(progressKey), v, nil); err != nil {
		return err
	}
	opts := pebble.Sync
	if s.opts.SyncInterval > 0 {
		opts = pebble.NoSync
	}
	if err := b.b.Commit(opts); err != nil {
		return fmt.Errorf("streamgen: commit batch %d: %w", p.BatchID, err)
	}
	if s.state != nil {
		if err := s.state.applyCommitted(b.b); err != nil {
			return fmt.Errorf("streamgen: batch %d: update the state cache: %w", p.BatchID, err)
		}
	}
	return b.b.Close()
}

// StateBatch is the state and timer writes of one micro-batch. Its reads
// see the committed state overlaid with the batch's own earlier writes;
// nothing of it is visible to other readers, or durable, until it is
// committed, and a batch that is dropped (Close without Commit) leaves the
// store as it was. Not safe for concurrent use.
type StateBatch struct {
	db    *pebble.DB
	cache *stateCache
	b     *pebble.Batch
	key   []byte // the key being built
	val   []byte // the value of the last Get
	tmp   []byte // a value being built
	// written is true once the batch holds a write; rangeDeleted once it
	// holds a range deletion.
	written, rangeDeleted bool
}

// NewBatch starts a batch.
func (s *Store) NewBatch() *StateBatch {
	return &StateBatch{db: s.db, cache: s.state, b: s.db.NewBatch()}
}

// indexed returns the batch with an index of its writes, for reads that
// must see them. A batch starts without one: indexing every write costs
// about as much as the write, and a batch whose reads all miss its writes
// (a count per key reads each key once, before writing it) never needs it.
// The first read that may see a write indexes the writes so far, once.
func (b *StateBatch) indexed() (*pebble.Batch, error) {
	if b.b.Indexed() {
		return b.b, nil
	}
	ib := b.db.NewIndexedBatch()
	if err := ib.Apply(b.b, nil); err != nil {
		ib.Close()
		return nil, fmt.Errorf("streamgen: index the batch's writes: %w", err)
	}
	b.b.Close()
	b.b = ib
	return ib, nil
}

// Close drops a batch that was not committed.
func (b *StateBatch) Close() error { return b.b.Close() }

func appendScope(k []byte, prefix byte, s Scope) []byte {
	k = append(k, prefix)
	k = binary.BigEndian.AppendUint32(k, s.Partition)
	return append(k, s.Operator)
}

// entryKey appends the key of the entries of (v, key): the prefix that
// a suffix completes.
func entryKey(k []byte, v Var, key []byte) []byte {
	k = appendScope(k, statePrefix, v.Scope)
	k = append(k, v.Variable)
	k = binary.AppendUvarint(k, uint64(len(key)))
	return append(k, key...)
}

// Get returns the value of the entry (v, key, suffix) and whether there is
// one. The value is valid until the next call on b.
func (b *StateBatch) Get(v Var, key, suffix []byte) (value []byte, ok bool, err error) {
	return b.get(v, key, suffix, !b.written)
}

// get reads an entry; unwritten says that the batch holds no write of it
// (the caller knows), so the committed state is read directly, without
// the batch's index.
func (b *StateBatch) get(v Var, key, suffix []byte, unwritten bool) (value []byte, ok bool, err error) {
	b.key = append(entryKey(b.key[:0], v, key), suffix...)
	var (
		found  []byte
		closer io.Closer
	)
	if unwritten && !b.rangeDeleted {
		if b.cache != nil && b.key[0] == statePrefix {
			return b.getCached()
		}
		found, closer, err = b.db.Get(b.key)
	} else {
		ib, ierr := b.indexed()
		if ierr != nil {
			return nil, false, ierr
		}
		found, closer, err = ib.Get(b.key)
	}
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("streamgen: read state: %w", err)
	}
	b.val = append(b.val[:0], found...)
	closer.Close()
	return b.val, true, nil
}

// getCached reads the committed entry b.key through the cache.
func (b *StateBatch) getCached() (value []byte, ok bool, err error) {
	v, ok, cached := b.cache.get(b.key, b.val)
	if cached {
		b.val = v
		return v, ok, nil
	}
	found, closer, err := b.db.Get(b.key)
	if errors.Is(err, pebble.ErrNotFound) {
		b.cache.put(b.key, nil, true)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("streamgen: read state: %w", err)
	}
	b.val = append(b.val[:0], found...)
	closer.Close()
	b.cache.put(b.key, b.val, false)
	return b.val, true, nil
}

// Put sets the entry (v, key, suffix).
func (b *StateBatch) Put(v Var, key, suffix, value []byte) error {
	b.key = append(entryKey(b.key[:0], v, key), suffix...)
	b.written = true
	if err := b.b.Set(b.key, value, nil); err != nil {
		return fmt.Errorf("streamgen: write state: %w", err)
	}
	return nil
}

// Delete removes the entry (v, key, suffix).
func (b *StateBatch) Delete(v Var, key, suffix []byte) error {
	b.key = append(entryKey(b.key[:0], v, key), suffix...)
	b.written = true
	if err := b.b.Delete(b.key, nil); err != nil {
		return fmt.Errorf("streamgen: write state: %w", err)
	}
	return nil
}

// Scan calls fn for each entry of (v, key), in order of suffix, with the
// batch's own writes applied. The slices are valid during the call only.
// fn must not write to b; Scan stops at fn's first error and returns it.
func (b *StateBatch) Scan(v Var, key []byte, fn func(suffix, value []byte) error) error {
	lower := entryKey(nil, v, key)
	return b.scan(lower, prefixEnd(lower), func(k, value []byte) error {
		return fn(k[len(lower):], value)
	})
}

// ScanVar calls fn for each entry of variable v, in order of key, then
// suffix, with the batch's own writes applied: all the state of one
// variable, for tools and tests. The slices are valid during the call.
func (b *StateBatch) ScanVar(v Var, fn func(key, suffix, value []byte) error) error {
	lower := append(appendScope(nil, statePrefix, v.Scope), v.Variable)
	return b.scan(lower, prefixEnd(lower), func(k, value []byte) error {
		n, w := binary.Uvarint(k[len(lower):])
		start := len(lower) + w
		if w <= 0 || uint64(len(k)-start) < n {
			return fmt.Errorf("streamgen: state entry %x has a bad key length", k)
		}
		end := start + int(n)
		return fn(k[start:end], k[end:], value)
	})
}

// LastSuffix returns the greatest suffix among the entries of (v, key),
// as the batch sees them; ok is false when there is none.
func (b *StateBatch) LastSuffix(v Var, key []byte) (suffix []byte, ok bool, err error) {
	lower := entryKey(nil, v, key)
	ib, err := b.indexed()
	if err != nil {
		return nil, false, err
	}
	it, err := ib.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, false, fmt.Errorf("streamgen: scan state: %w", err)
	}
	if it.Last() {
		suffix, ok = append([]byte(nil), it.Key()[len(lower):]...), true
	}
	if err := it.Close(); err != nil {
		return nil, false, fmt.Errorf("streamgen: scan state: %w", err)
	}
	return suffix, ok, nil
}

// DeleteKey removes every entry of (v, key): one range deletion.
func (b *StateBatch) DeleteKey(v Var, key []byte) error {
	lower := entryKey(nil, v, key)
	return b.deleteRange(lower, prefixEnd(lower))
}

// DeleteVar removes every entry of variable v: one range deletion.
func (b *StateBatch) DeleteVar(v Var) error {
	lower := append(appendScope(nil, statePrefix, v.Scope), v.Variable)
	return b.deleteRange(lower, prefixEnd(lower))
}

// DeletePartition removes every state entry and timer of partition p.
func (b *StateBatch) DeletePartition(p uint32) error {
	for _, prefix := range []byte{statePrefix, timerPrefix, timerKeyPrefix} {
		lower := binary.BigEndian.AppendUint32([]byte{prefix}, p)
		if err := b.deleteRange(lower, prefixEnd(lower)); err != nil {
			return err
		}
	}
	return nil
}

func (b *StateBatch) deleteRange(lower, upper []byte) error {
	b.rangeDeleted = true
	if err := b.b.DeleteRange(lower, upper, nil); err != nil {
		return fmt.Errorf("streamgen: write state: %w", err)
	}
	return nil
}

// scan calls fn for each key in [lower, upper) as the batch sees it.
func (b *StateBatch) scan(lower, upper []byte, fn func(key, value []byte) error) error {
	ib, err := b.indexed()
	if err != nil {
		return err
	}
	it, err := ib.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("streamgen: scan state: %w", err)
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("streamgen: scan state: %w", err)
	}
	return nil
}

// prefixEnd returns the smallest key after every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// deleteVariable deletes every entry of variable id of operator op, in
// every partition, and its expiry index entries, and syncs.
func (s *Store) deleteVariable(op, id uint8) error {
	b := s.db.NewBatch()
	defer b.Close()
	// The partition comes first in a state key: find each in turn.
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{statePrefix}, UpperBound: []byte{statePrefix + 1}})
	if err != nil {
		return fmt.Errorf("streamgen: delete state variable: %w", err)
	}
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 5 {
			break
		}
		part := binary.BigEndian.Uint32(k[1:5])
		lower := append(appendScope(nil, statePrefix, Scope{Partition: part, Operator: op}), id)
		if err := b.DeleteRange(lower, prefixEnd(lower), nil); err != nil {
			it.Close()
			return fmt.Errorf("streamgen: delete state variable: %w", err)
		}
		next := binary.BigEndian.AppendUint32([]byte{statePrefix}, part)
		valid = it.SeekGE(prefixEnd(next))
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("streamgen: delete state variable: %w", err)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("streamgen: delete state variable: %w", err)
	}
	if s.state != nil {
		s.state.mu.Lock()
		s.state.clear()
		s.state.mu.Unlock()
	}
	return nil
}
