package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrIncompatibleCheckpoint is wrapped by the error OpenStore returns for a
// checkpoint written by a pipeline this one cannot continue.
var ErrIncompatibleCheckpoint = errors.New("streamgen: incompatible checkpoint")

// The key space. Every key starts with one of these bytes, so each kind of
// entry is a contiguous range:
//
//	metaKey                                       Meta (JSON)
//	progressKey                                   Progress (JSON)
//	statePrefix  op  name 0x00  uvarint(len(key)) key  [suffix]   state value
//	timerPrefix  op  expiry(8, ordered)  key      timer (no value)
//
// op is the operator's index as one byte (a pipeline has fewer than 256
// stateful operators). Timers are an index ordered by expiry, so the timers
// due at a watermark are one range scan. To find a key's timer, an
// operator keeps its expiry in the key's state (one point read), rather
// than the store keeping a second index by key that every timer change
// would have to write.
const (
	metaKey     = "\x01meta"
	progressKey = "\x02progress"
	statePrefix = 0x10
	timerPrefix = 0x20
)

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
}

// Store is a query's state in Pebble. Reads of committed data (Progress,
// DueTimers) and NewBatch are safe for concurrent use; a Batch is not.
// Close waits for the background sync loop, if any, to stop.
type Store struct {
	db    *pebble.DB
	cache *pebble.Cache
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
	if opts.SyncInterval > 0 {
		s.done.Add(1)
		go s.syncLoop()
	}
	return s, nil
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
	return err
}

// Progress is what a committed batch leaves behind: where the next batch
// starts.
type Progress struct {
	// BatchID is the id of the last committed batch; the next is
	// BatchID+1. Sinks use it as an epoch to stay idempotent.
	BatchID int64 `json:"batchId"`
	// Watermark is the event-time watermark after the batch.
	Watermark time.Time `json:"watermark"`
	// Offsets are the sources' positions after the batch, by source and
	// partition, in each source's own encoding.
	Offsets map[string]json.RawMessage `json:"offsets,omitempty"`
	// MaxEventTime is the largest event time seen, by source partition:
	// the watermark is computed from it.
	MaxEventTime map[string]time.Time `json:"maxEventTime,omitempty"`
	// LastActive is the processing time each partition last had data, for
	// leaving idle partitions out of the watermark.
	LastActive map[string]time.Time `json:"lastActive,omitempty"`
	// StateRows is the number of state rows of each stateful operator,
	// kept up to date batch by batch so that no report has to count them.
	StateRows []int64 `json:"stateRows,omitempty"`
}

// Progress returns the progress of the last committed batch; ok is false
// for a new checkpoint.
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

// Batch is the writes of one micro-batch: state, timers and, at Commit, the
// progress. Nothing of it is visible to readers, or durable, until Commit;
// a batch that is dropped (Close without Commit) leaves the store as it
// was. Get reads committed state, not the batch's own writes: the
// operators read a key's state once per batch, before they write it, so
// they never need to, and a plain batch is much cheaper to fill than one
// indexed for reading. Not safe for concurrent use.
type Batch struct {
	b   *pebble.Batch
	s   *Store
	buf []byte
}

// NewBatch starts a batch.
func (s *Store) NewBatch() *Batch {
	return &Batch{b: s.db.NewBatch(), s: s}
}

// stateKey appends the key of state entry (op, name, key, suffix).
func stateKey(b []byte, op uint8, name string, key, suffix []byte) []byte {
	b = append(b, statePrefix, op)
	b = append(b, name...)
	b = append(b, 0)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return append(b, suffix...)
}

// Get returns the committed state value of (op, name, key), copied; ok is
// false when there is none.
func (b *Batch) Get(op uint8, name string, key []byte) (value []byte, ok bool, err error) {
	b.buf = stateKey(b.buf[:0], op, name, key, nil)
	v, closer, err := b.s.db.Get(b.buf)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("streamgen: read state: %w", err)
	}
	value = append([]byte(nil), v...)
	closer.Close()
	return value, true, nil
}

// Put sets the state value of (op, name, key).
func (b *Batch) Put(op uint8, name string, key, value []byte) error {
	b.buf = stateKey(b.buf[:0], op, name, key, nil)
	return b.b.Set(b.buf, value, nil)
}

// Delete removes the state value of (op, name, key).
func (b *Batch) Delete(op uint8, name string, key []byte) error {
	b.buf = stateKey(b.buf[:0], op, name, key, nil)
	return b.b.Delete(b.buf, nil)
}

// Timers are kept as Unix nanoseconds: times outside the years 1678-2262
// are clamped to that range (UnixNano is undefined beyond it).
var (
	minTimer = time.Unix(0, math.MinInt64)
	maxTimer = time.Unix(0, math.MaxInt64)
)

// timeBytes encodes t as 8 bytes whose byte order is time order.
func timeBytes(b []byte, t time.Time) []byte {
	switch {
	case t.Before(minTimer):
		t = minTimer
	case t.After(maxTimer):
		t = maxTimer
	}
	return binary.BigEndian.AppendUint64(b, uint64(t.UnixNano())^1<<63)
}

func bytesTime(b []byte) time.Time {
	return time.Unix(0, int64(binary.BigEndian.Uint64(b)^1<<63)).UTC()
}

func timerKey(b []byte, op uint8, at time.Time, key []byte) []byte {
	b = append(b, timerPrefix, op)
	b = timeBytes(b, at)
	return append(b, key...)
}

// SetTimer registers a timer of operator op for key at time at.
func (b *Batch) SetTimer(op uint8, key []byte, at time.Time) error {
	b.buf = timerKey(b.buf[:0], op, at, key)
	return b.b.Set(b.buf, nil, nil)
}

// DeleteTimer removes a timer of operator op for key at time at.
func (b *Batch) DeleteTimer(op uint8, key []byte, at time.Time) error {
	b.buf = timerKey(b.buf[:0], op, at, key)
	return b.b.Delete(b.buf, nil)
}

// Commit writes the progress and commits the batch atomically: state,
// timers and progress become visible and durable together (durable at once,
// or within SyncInterval). The batch cannot be used afterwards.
func (b *Batch) Commit(p Progress) error {
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("streamgen: encode progress: %w", err)
	}
	if err := b.b.Set([]byte(progressKey), v, nil); err != nil {
		return err
	}
	opts := pebble.Sync
	if b.s.opts.SyncInterval > 0 {
		opts = pebble.NoSync
	}
	if err := b.b.Commit(opts); err != nil {
		return fmt.Errorf("streamgen: commit batch %d: %w", p.BatchID, err)
	}
	return b.b.Close()
}

// Close drops a batch that was not committed.
func (b *Batch) Close() error { return b.b.Close() }

// DueTimers calls fn for each committed timer of operator op that expires
// at or before until, in expiry order: a range scan over the timer index,
// not a sweep over keys. It stops at the first error fn returns.
func (s *Store) DueTimers(op uint8, until time.Time, fn func(key []byte, at time.Time) error) error {
	lower := []byte{timerPrefix, op}
	upper := prefixEnd(timerKey(nil, op, until, nil))
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return fmt.Errorf("streamgen: scan timers: %w", err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if err := fn(bytes.Clone(k[10:]), bytesTime(k[2:10])); err != nil {
			return err
		}
	}
	return it.Error()
}

// CountState counts the committed state entries of operator op: the
// "state rows total" of a progress report.
func (s *Store) CountState(op uint8) (int64, error) {
	prefix := []byte{statePrefix, op}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return 0, err
	}
	defer it.Close()
	var n int64
	for it.First(); it.Valid(); it.Next() {
		n++
	}
	return n, it.Error()
}

// prefixEnd returns the smallest key after every key with prefix p.
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
