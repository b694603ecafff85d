package runtime

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"slices"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// StateBatch is the state and timer writes of one micro-batch. Its reads
// see the committed state overlaid with the batch's own earlier writes;
// nothing of it is visible to other readers, or durable, until it is
// committed, and a batch that is dropped (Close without Commit) leaves the
// store as it was. Not safe for concurrent use.
type StateBatch struct {
	store *Store
	db    *pebble.DB
	cache *stateCache
	b     *pebble.Batch
	key   []byte // the key being built
	// rangeLo and rangeHi are the bounds of ScanRange's scan.
	rangeLo, rangeHi []byte
	val              []byte // the value of the last Get
	tmp              []byte // a value being built
	// written is true once the batch holds a write; rangeDeleted once it
	// holds a range deletion of state entries that reads must see through
	// the batch's index.
	written, rangeDeleted bool
	// closed is true once b is committed or closed: Pebble pools its
	// batches, so a second Close would release one in use. offered is
	// true once commit has given b to Pebble.
	closed, offered bool
	// writtenKeys holds the hashes of the state entries the batch set or
	// deleted, so that the expiry pass, and a read of an entry of a key
	// the batch has written, read an entry the batch did not write
	// through the cache, not the batch's index (a hash shared by two keys
	// only costs the slower read). It is built from the batch's writes
	// when first asked (nil until then; most batches never read a key
	// they wrote), and kept up to date from then on.
	writtenKeys map[uint64]struct{}
	// timerKeys holds the by-time index keys of the timers the batch set
	// or deleted, each ending at its timerEnds: a due-timer scan of a
	// range with none of them reads the committed timers alone.
	timerKeys []byte
	timerEnds []int32
	timerSets []bool // whether each was a set (or a deletion)
	// scannedKeys holds the hashes of the keys (entryKey) of scanned
	// variables (see stateCache.scan) that the batch set or deleted an
	// entry of: a scan of another key's entries sees no write of the
	// batch, and reads the committed state alone.
	scannedKeys map[uint64]struct{}
	// ttlLow holds, per clock, the earliest expiry the batch has put in
	// the expiry index (math.MaxInt64: none), and expired the (scope,
	// clock) ranges whose due entries the batch has deleted: an expiry
	// pass below ttlLow over a range not expired before sees no write of
	// the batch, and reads the committed index without indexing the batch.
	ttlLow  [2]int64
	expired []expiredRange
	// hints are the cache slots of the batch's state writes, in order
	// (-1: unknown), for the cache's update at commit; read and readSlot
	// are the key and slot of the last read through the cache.
	hints    []int32
	read     []byte
	readSlot int32
	// warmKeys and warmBuf are warm's keys and their bytes.
	warmKeys [][]byte
	warmBuf  []byte
	// after is the commit in flight when the batch began (nil: none, or
	// it has ended), which reads of the committed state wait for.
	after atomic.Pointer[inFlight]
	// timedVars are the variables ordered by event time that the batch
	// has read or written (see eventorder.go).
	timedVars []timedVar
	// reads is the batch's iterator over the committed state, for its
	// scans that skip its own writes (nil until the first): one iterator
	// moved between bounds costs much less than one per scan, and the
	// committed state does not change while the batch is open.
	reads *pebble.Iterator
}

// expiredRange is a (scope, clock) range of the expiry index whose due
// entries a batch has deleted.
type expiredRange struct {
	scope Scope
	clock ExpiryClock
}

// writtenSeed seeds the hashes of StateBatch.writtenKeys.
var writtenSeed = maphash.MakeSeed()

// NewBatch starts a batch.
func (s *Store) NewBatch() *StateBatch { return s.newBatch(false) }

// newWriteBatch starts a batch that will write about as much as the last
// one committed: when no spare is kept, its bytes are sized at once to
// the last one's. (A batch that only reads, such as the loop's look for
// due timers, takes NewBatch's: sizing it would allocate what it never
// uses, at every poll.)
func (s *Store) newWriteBatch() *StateBatch { return s.newBatch(true) }

func (s *Store) newBatch(sized bool) *StateBatch {
	b := &StateBatch{store: s, db: s.db, cache: s.state, ttlLow: [2]int64{math.MaxInt64, math.MaxInt64}, readSlot: -1}
	b.after.Store(s.inFlightWork())
	spare := s.spare.Swap(nil)
	if n := s.lastBatch.Load(); sized && spare == nil && n > sizedBatchMin {
		b.b = s.db.NewBatchWithSize(int(min(n, maxBatchHint)))
	} else {
		b.b = s.db.NewBatch()
	}
	if spare != nil {
		clear(spare.data[:batchrepr.HeaderLen])
		if err := b.b.SetRepr(spare.data[:batchrepr.HeaderLen]); err != nil {
			b.b.Close()
			b.b = s.db.NewBatch()
		}
		b.hints = spare.hints[:0]
	}
	return b
}

// maxBatchHint is the largest size a batch starts at.
const maxBatchHint = 1 << 30

// sizedBatchMin is the size of the last batch past which a new batch
// without a spare's bytes (the last was indexed, or too large to keep)
// starts at that size rather than growing to it by doubling.
const sizedBatchMin = 1 << 20

// reuse closes pb, a batch that Pebble will not see (it took a copy, or
// the batch is dropped), and keeps its bytes and the hints for the next
// batch to write into, instead of growing new ones: a large batch's bytes
// double several times as it fills. Called by commit, once the batch's
// reads are over, and by Close.
func (s *Store) reuse(pb *pebble.Batch, hints []int32) {
	data := pb.Repr()
	// The batch is given bytes of its own, so that Pebble, which pools
	// closed batches, keeps nothing of data.
	if err := pb.SetRepr(make([]byte, batchrepr.HeaderLen)); err != nil || cap(data) > spareBatchMax {
		pb.Close()
		return
	}
	pb.Close()
	s.spare.Store(&spareBatch{data: data[:0], hints: hints[:0]})
}

// bytes is the size of the batch's writes.
func (b *StateBatch) bytes() int {
	if b.b == nil {
		return 0
	}
	return b.b.Len()
}

// indexed returns the batch with an index of its writes, for reads that
// must see them. A batch starts without one: indexing every write costs
// about as much as the write, and a batch whose reads all miss its writes
// (a count per key reads each key once, before writing it) never needs it.
// The first read that may see a write indexes the writes so far, once.
func (b *StateBatch) indexed() (*pebble.Batch, error) {
	// An indexed batch reads the committed state under its writes.
	if err := b.settled(); err != nil {
		return nil, err
	}
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

// noteWritten records that the batch writes the entry b.key, once
// writtenKeys is kept, and the key of a scanned variable's entry.
func (b *StateBatch) noteWritten() {
	if b.writtenKeys != nil {
		b.writtenKeys[maphash.Bytes(writtenSeed, b.key)] = struct{}{}
	}
	if b.cache != nil && len(b.key) >= 7 && b.cache.isScanned(b.key[5], b.key[6]) {
		if p, ok := entryPrefix(b.key); ok {
			if b.scannedKeys == nil {
				b.scannedKeys = make(map[uint64]struct{})
			}
			b.scannedKeys[maphash.Bytes(writtenSeed, p)] = struct{}{}
		} else {
			b.rangeDeleted = true // unknown: reads go through the batch
		}
	}
}

// mayHaveWritten reports whether the batch may hold a write of the entry
// b.key: false means it surely does not.
func (b *StateBatch) mayHaveWritten() (bool, error) {
	if b.rangeDeleted {
		return true, nil
	}
	if b.writtenKeys == nil {
		if err := b.collectWritten(); err != nil {
			return true, err
		}
	}
	_, ok := b.writtenKeys[maphash.Bytes(writtenSeed, b.key)]
	return ok, nil
}

// collectWritten builds writtenKeys from the state entries the batch has
// set or deleted so far.
func (b *StateBatch) collectWritten() error {
	b.writtenKeys = make(map[uint64]struct{})
	r := b.b.Reader()
	for {
		_, key, _, ok, err := r.Next()
		if err != nil {
			return fmt.Errorf("streamgen: read the batch's writes: %w", err)
		}
		if !ok {
			return nil
		}
		if len(key) > 0 && key[0] == statePrefix {
			b.writtenKeys[maphash.Bytes(writtenSeed, key)] = struct{}{}
		}
	}
}

// Close drops a batch that was not committed; after Commit it does
// nothing. The memory of a batch Pebble never saw goes to the next batch
// when none is kept (a read-only batch of the loop's took it).
func (b *StateBatch) Close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	b.closeReads()
	if !b.offered && !b.b.Indexed() && b.store.spare.Load() == nil {
		b.store.reuse(b.b, b.hints)
		return nil
	}
	return b.b.Close()
}

// readError is the error of a failed read: the store's failure.
func (b *StateBatch) readError(err error) error {
	return b.store.fail(fmt.Errorf("read state: %w", err))
}

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
	if err := b.store.Err(); err != nil {
		return nil, false, err
	}
	b.key = append(entryKey(b.key[:0], v, key), suffix...)
	var (
		found  []byte
		closer io.Closer
	)
	if !unwritten && !b.rangeDeleted && b.cache != nil && !b.cache.skips(b.key) {
		// The batch has writes, but perhaps none of this entry (a key
		// handled again in the batch, by a timer, reads the entries it
		// did not write): then the cache answers, not the batch's index
		// and Pebble.
		written, err := b.mayHaveWritten()
		if err != nil {
			return nil, false, err
		}
		unwritten = !written
	}
	if unwritten && !b.rangeDeleted {
		if b.cache != nil && b.key[0] == statePrefix && !b.cache.skips(b.key) {
			return b.getCached()
		}
		if err := b.settled(); err != nil {
			return nil, false, err
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
		return nil, false, b.readError(err)
	}
	b.val = append(b.val[:0], found...)
	closer.Close()
	return b.val, true, nil
}

// getCached reads the committed entry b.key through the cache.
func (b *StateBatch) getCached() (value []byte, ok bool, err error) {
	if err := b.cacheSettled(); err != nil {
		return nil, false, err
	}
	v, ok, cached, slot := b.cache.get(b.key, b.val)
	b.read, b.readSlot = append(b.read[:0], b.key...), slot
	if cached {
		b.val = v
		return v, ok, nil
	}
	if err := b.settled(); err != nil {
		return nil, false, err
	}
	found, closer, err := b.db.Get(b.key)
	if errors.Is(err, pebble.ErrNotFound) {
		b.cache.put(b.key, nil, true)
		return nil, false, nil
	}
	if err != nil {
		return nil, false, b.readError(err)
	}
	b.val = append(b.val[:0], found...)
	closer.Close()
	b.cache.put(b.key, b.val, false)
	return b.val, true, nil
}

// warm prepares the state cache for reads of the entries (v, key) of
// keys, soon to come (see stateCache.warm).
func (b *StateBatch) warm(v Var, keys [][]byte) {
	if b.cache == nil || b.cacheSettled() != nil {
		return
	}
	b.warmKeys = b.warmKeys[:0]
	b.warmBuf = b.warmBuf[:0]
	for _, k := range keys {
		start := len(b.warmBuf)
		b.warmBuf = entryKey(b.warmBuf, v, k)
		b.warmKeys = append(b.warmKeys, b.warmBuf[start:len(b.warmBuf):len(b.warmBuf)])
	}
	b.cache.warm(b.warmKeys)
}

// prefetchMin is the fewest entries that prefetch reads with an
// iterator: for fewer, the gets that follow read them one by one.
const prefetchMin = 32

// prefetch reads into the state cache the committed entries, with no
// suffix, of the variables vars of scope, for the keys of the timers due
// (about to fire, whose handlers read them), that the cache does not
// know: with one iterator, in key order, where a get each seeks Pebble's
// levels from the top again (the final flush of an event-time query
// reads the state of every window or key still open, which a store
// larger than the cache holds in Pebble alone). It changes what the
// cache holds, not what a read returns; a read error is left to the gets
// that follow, which read again and report it.
func (b *StateBatch) prefetch(scope Scope, vars []uint8, due []Timer) {
	if b.cache == nil || b.rangeDeleted || len(vars)*len(due) < prefetchMin || b.cacheSettled() != nil {
		return
	}
	b.warmKeys, b.warmBuf = b.warmKeys[:0], b.warmBuf[:0]
	for _, id := range vars {
		v := Var{Scope: scope, Variable: id}
		for j := range due {
			start := len(b.warmBuf)
			b.warmBuf = entryKey(b.warmBuf, v, due[j].Key)
			if j == 0 && b.cache.skips(b.warmBuf[start:]) {
				b.warmBuf = b.warmBuf[:start]
				break
			}
			// warmBuf may move as it grows: an earlier key's slice keeps
			// the bytes it was cut from.
			b.warmKeys = append(b.warmKeys, b.warmBuf[start:len(b.warmBuf):len(b.warmBuf)])
		}
	}
	keys := b.cache.unknown(b.warmKeys)
	if len(keys) < prefetchMin || b.settled() != nil {
		return
	}
	slices.SortFunc(keys, bytes.Compare)
	keys = slices.CompactFunc(keys, bytes.Equal) // two timers of one key
	if b.reads == nil {
		it, err := b.db.NewIter(nil)
		if err != nil {
			return
		}
		b.reads = it
	}
	it := b.reads
	last := keys[len(keys)-1]
	it.SetBounds(keys[0], append(last[:len(last):len(last)], 0)) // up to last, with it
	for _, k := range keys {
		switch {
		case it.SeekGE(k) && bytes.Equal(it.Key(), k):
			v, err := it.ValueAndErr()
			if err != nil {
				return
			}
			b.cache.put(k, v, false)
		case it.Error() == nil:
			b.cache.put(k, nil, true)
		default:
			return
		}
	}
}

// hint records the cache slot of the state write of b.key.
func (b *StateBatch) hint() {
	if b.cache == nil {
		return
	}
	slot := int32(-1)
	if b.readSlot >= 0 && string(b.read) == string(b.key) {
		slot = b.readSlot
	}
	b.hints = append(b.hints, slot)
}

// Put sets the entry (v, key, suffix).
func (b *StateBatch) Put(v Var, key, suffix, value []byte) error {
	b.key = append(entryKey(b.key[:0], v, key), suffix...)
	b.written = true
	b.noteWritten()
	b.hint()
	if err := b.b.Set(b.key, value, nil); err != nil {
		return fmt.Errorf("streamgen: write state: %w", err)
	}
	return nil
}

// Delete removes the entry (v, key, suffix).
func (b *StateBatch) Delete(v Var, key, suffix []byte) error {
	b.key = append(entryKey(b.key[:0], v, key), suffix...)
	b.written = true
	b.noteWritten()
	b.hint()
	if err := b.b.Delete(b.key, nil); err != nil {
		return fmt.Errorf("streamgen: write state: %w", err)
	}
	return nil
}

// Scan calls fn for each entry of (v, key), in order of suffix, with the
// batch's own writes applied. The slices are valid during the call only.
// fn must not write to b, nor start another scan of it (a scan of a key
// the batch has not written moves the batch's one iterator over the
// committed state); Scan stops at fn's first error and returns it.
func (b *StateBatch) Scan(v Var, key []byte, fn func(suffix, value []byte) error) error {
	lower := entryKey(nil, v, key)
	committed, none, err := b.scannedKey(v, lower, false)
	if err != nil || none {
		return err
	}
	return b.scanFrom(lower, prefixEnd(lower), committed, func(k, value []byte) error {
		return fn(k[len(lower):], value)
	})
}

// scannedKey tells a scan of the entries of (v, key), whose entryKey is
// prefix, what it may skip when v is a scanned variable (see
// stateCache.scan): committed becomes true when the batch holds no entry
// of the key, and none is true when the key has never had an entry
// committed either.
func (b *StateBatch) scannedKey(v Var, prefix []byte, committed bool) (_, none bool, err error) {
	if b.cache == nil || b.rangeDeleted || !b.cache.isScanned(v.Operator, v.Variable) {
		return committed, false, nil
	}
	if !committed {
		_, wrote := b.scannedKeys[maphash.Bytes(writtenSeed, prefix)]
		committed = !wrote
	}
	if !committed {
		return false, false, nil
	}
	// A key that has never had an entry has none: a join's reads of the
	// other side, a list's of a key it never had.
	if err := b.cacheSettled(); err != nil {
		return false, false, err
	}
	return true, !b.cache.mayHaveRows(prefix), nil
}

// ScanRange calls fn for each entry of (v, key) whose suffix is at or
// after from and before to (nil: no end), in suffix order, as the batch
// sees them. The slices are valid during the call; fn must not write to
// the batch, nor start another scan of it.
func (b *StateBatch) ScanRange(v Var, key, from, to []byte, fn func(suffix, value []byte) error) error {
	return b.scanRange(v, key, from, to, false, fn)
}

// ScanRangeCommitted is ScanRange over the committed state alone,
// without the batch's writes: for a caller that knows the batch holds
// none in the range, or tracks its own.
func (b *StateBatch) ScanRangeCommitted(v Var, key, from, to []byte, fn func(suffix, value []byte) error) error {
	return b.scanRange(v, key, from, to, true, fn)
}

// scanRange is ScanRange, or ScanRangeCommitted.
func (b *StateBatch) scanRange(v Var, key, from, to []byte, committed bool, fn func(suffix, value []byte) error) error {
	b.rangeLo = entryKey(b.rangeLo[:0], v, key)
	n := len(b.rangeLo)
	committed, none, err := b.scannedKey(v, b.rangeLo, committed)
	if err != nil || none {
		return err
	}
	b.rangeHi = append(b.rangeHi[:0], b.rangeLo...)
	if to != nil {
		b.rangeHi = append(b.rangeHi, to...)
	} else {
		b.rangeHi = appendPrefixEnd(b.rangeHi)
	}
	b.rangeLo = append(b.rangeLo, from...)
	return b.scanFrom(b.rangeLo, b.rangeHi, committed, func(k, value []byte) error {
		return fn(k[n:], value)
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
	if err := b.store.Err(); err != nil {
		return nil, false, err
	}
	lower := entryKey(nil, v, key)
	ib, err := b.indexed()
	if err != nil {
		return nil, false, err
	}
	it, err := ib.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(lower)})
	if err != nil {
		return nil, false, b.readError(err)
	}
	if it.Last() {
		suffix, ok = append([]byte(nil), it.Key()[len(lower):]...), true
	}
	if err := it.Close(); err != nil {
		return nil, false, b.readError(err)
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
	return b.scanFrom(lower, upper, false, fn)
}

// scanFrom is scan; committed says that the batch holds no write in
// [lower, upper) (the caller knows), so the committed state is read
// directly, without the batch's index.
func (b *StateBatch) scanFrom(lower, upper []byte, committed bool, fn func(key, value []byte) error) error {
	if err := b.store.Err(); err != nil {
		return err
	}
	if err := b.settled(); err != nil {
		return err
	}
	if committed && !b.rangeDeleted {
		return b.scanCommitted(lower, upper, fn)
	}
	ib, err := b.indexed()
	if err != nil {
		return err
	}
	it, err := ib.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return b.readError(err)
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return b.readError(err)
	}
	return nil
}

// scanCommitted calls fn for each committed key in [lower, upper),
// through the batch's iterator over the committed state (the caller has
// waited for the commit in flight).
func (b *StateBatch) scanCommitted(lower, upper []byte, fn func(key, value []byte) error) error {
	if b.reads == nil {
		it, err := b.db.NewIter(nil)
		if err != nil {
			return b.readError(err)
		}
		b.reads = it
	}
	it := b.reads
	it.SetBounds(lower, upper)
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key(), it.Value()); err != nil {
			return err
		}
	}
	if err := it.Error(); err != nil {
		return b.readError(err)
	}
	return nil
}

// closeReads closes the batch's iterator over the committed state: before
// the batch commits, and when it closes.
func (b *StateBatch) closeReads() {
	if b.reads != nil {
		b.reads.Close() // its error is Error's, already seen
		b.reads = nil
	}
}

// prefixEnd returns the smallest key after every key with prefix p.
func prefixEnd(p []byte) []byte { return appendPrefixEnd(append([]byte(nil), p...)) }

// appendPrefixEnd turns the prefix p into the smallest key after every
// key with it, in place.
func appendPrefixEnd(end []byte) []byte {
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
