package runtime

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"os"
	"slices"
	"sync"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
)

// stateCache keeps committed state entries in memory, in front of Pebble,
// least recently used first out once they pass the budget. It holds only
// what is committed: a batch's writes enter it when the batch commits
// (applyCommitted), so reading through it is the same as reading Pebble,
// and recovery does not depend on it. An entry known to be absent is cached
// too (with no value), since most reads of a new key find nothing; and
// while the cache is complete (it has seen every state entry since the
// store was empty, and recorded the keys of those it evicted in its
// evictedFilter), a key it does not hold and has not evicted has no state,
// and Pebble is not asked.
//
// Its memory is outside the Go heap where the system allows it (an
// anonymous mapping), so that the collector neither scans it nor doubles
// it (GOGC): the budget is what the cache takes. Keys and values are
// appended to an arena; entries, without pointers and in a mapping of
// their own, say where. When the arena is full, the least recently used
// entries are evicted down to half of it and the live records move down
// over the dead ones (compact). The index from key hashes to entries is
// an open-addressing table of integers (see cacheIndex).
//
// Safe for concurrent use.
type stateCache struct {
	mu     sync.Mutex
	budget int64
	seed   maphash.Seed
	// hashMask is ANDed into every key hash: all ones, except in tests
	// that force hashes to collide.
	hashMask uint64
	index    cacheIndex // hash of the key → its entry
	// entries are the slots, at most maxEntries of them, grown as needed
	// within the capacity of entryMemory (so never copied); free lists the
	// unused ones.
	entries     []cacheEntry
	entryMemory []byte
	// indexMemory holds the index's two tables (see cacheIndex).
	indexMemory [2][]byte
	maxEntries  int
	free        []int32
	// head is the most recently used entry, tail the least; -1 when empty.
	head, tail int32
	// arena holds the entries' records from 0 to used (see
	// cacheRecordHeader).
	arena    []byte
	used     int
	live     int64 // bytes of the live records in the arena
	complete bool
	// filter holds the keys evicted with a value while complete; nil
	// until the first such eviction. Its memory comes out of the arena's
	// budget.
	filter *evictedFilters
	// share is the budget the cache is held to: its budget, or its share
	// of a shared one.
	share int64
	// rows holds the keys that have had an entry of a scanned variable
	// (scanned: a join's buffer, a list, a map) since the store was
	// empty, while rowsComplete: a scan of such a key's entries that it
	// has not seen finds nothing, and Pebble is not asked. Made at the
	// first such entry, out of the arena's budget.
	rows         *evictedFilters
	rowsComplete bool
	// scanned has a bit for each scanned variable, by operator and
	// variable id. Set before the first batch.
	scanned      *[256 * 256 / 64]uint64
	hits, misses int64
	// warmSum adds up what warm reads, so that the reads are not dropped.
	warmSum uint64
	// arenaLimit and entryLimit bound the arena's use and the slots in
	// use: the arena's length and maxEntries, or less while the cache
	// shares a budget with others (shared, see sharedBudget).
	arenaLimit, entryLimit int
	shared                 *sharedBudget
	// uncached marks the variables (by operator and variable id) whose
	// entries the cache does not hold: those ordered by event time, which
	// are read without it (see eventorder.go). Set before the first
	// batch.
	uncached map[[2]uint8]bool
}

type cacheEntry struct {
	hash       uint64
	off        uint32
	klen, vlen uint32
	absent     bool
	used       bool
	prev, next int32
}

// cacheEntrySize is what an entry costs beyond its key and value: the slot
// and its share of the index.
// The index takes 8 bytes a slot at a load between 0.35 and 0.7.
const cacheEntrySize = int64(unsafe.Sizeof(cacheEntry{})) + 16

// newStateCache returns a cache of budget bytes: an arena of three
// quarters of it and slots for the rest. complete says the store holds no
// state yet.
func newStateCache(budget int64, complete bool) *stateCache {
	arena := budget * 3 / 4
	slots := (budget - arena) / cacheEntrySize
	if arena > 1<<32-1 {
		arena = 1<<32 - 1 // offsets are 32 bits
	}
	c := &stateCache{
		budget: budget, seed: maphash.MakeSeed(), hashMask: ^uint64(0),
		head: -1, tail: -1, complete: complete, share: budget, rowsComplete: complete,
		arena:       mapMemory(int(arena)),
		entryMemory: mapMemory(int(slots) * int(unsafe.Sizeof(cacheEntry{}))),
		maxEntries:  int(slots),
	}
	c.arenaLimit, c.entryLimit = len(c.arena), c.maxEntries
	// The index grows up to room for every entry the budget allows, in
	// two mappings of that size (see cacheIndex): only the pages of the
	// table in use are taken. Its budget share (cacheEntrySize: 16 bytes
	// an entry) covers its largest table at the default budget; a power
	// of two of slots kept under 70% full takes 11 to 23 bytes an entry,
	// so at some budgets it is up to 4% over.
	n := cacheIndexSlotsFor(int(slots))
	c.index.limit = n
	for i := range c.indexMemory {
		c.indexMemory[i] = mapMemory(n * 8)
		c.index.tables[i] = unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(c.indexMemory[i]))), n)
	}
	c.index.use(c.index.tables[0][:min(n, cacheIndexFirstSlots)])
	if n := len(c.entryMemory) / int(unsafe.Sizeof(cacheEntry{})); n > 0 {
		// Entries hold no pointers: they may live in memory the collector
		// does not know.
		c.entries = unsafe.Slice((*cacheEntry)(unsafe.Pointer(unsafe.SliceData(c.entryMemory))), n)[:0]
	}
	return c
}

// close returns the arenas and entries to the system, and gives the
// cache's share of a shared budget to the caches left.
func (c *stateCache) close() {
	if c.shared != nil {
		c.shared.leave(c)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	unmapMemory(c.arena)
	unmapMemory(c.entryMemory)
	c.filter.close()
	c.rows.close()
	c.filter, c.rows = nil, nil
	c.complete, c.rowsComplete = false, false
	for i := range c.indexMemory {
		unmapMemory(c.indexMemory[i])
	}
	c.arena, c.entries, c.entryMemory, c.indexMemory = nil, nil, nil, [2][]byte{}
	c.index = cacheIndex{}
}

func (c *stateCache) key(e *cacheEntry) []byte {
	return c.arena[e.off : e.off+e.klen]
}

func hashKey(c *stateCache, key []byte) uint64 { return maphash.Bytes(c.seed, key) & c.hashMask }

// find returns the entry of key, whose hash is h, or -1.
func (c *stateCache) find(h uint64, key []byte) int32 {
	x := &c.index
	if x.count == 0 {
		return -1
	}
	tag := h >> 32
	for p := h >> x.shift; ; p = (p + 1) & x.mask {
		s := x.slots[p]
		if s == 0 {
			return -1
		}
		if s>>32 == tag {
			i := int32(uint32(s)) - 1
			if e := &c.entries[i]; e.hash == h && bytes.Equal(c.key(e), key) {
				return i
			}
		}
	}
}

// get returns a cached entry: cached is false when the cache does not know
// the key; otherwise ok says whether the entry exists. value is appended to
// buf. slot is where the entry is (-1: not held), a hint for the set of
// the same key (see set).
func (c *stateCache) get(key []byte, buf []byte) (value []byte, ok, cached bool, slot int32) {
	h := hashKey(c, key)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.complete {
		// A key the cache does not hold is then tested in the filter:
		// its block is read now, alongside the index slot, so that the
		// two cache misses of a new key overlap.
		c.warmSum += c.filter.touch(h)
	}
	i := c.find(h, key)
	if i < 0 {
		if c.complete && !c.filter.has(h) {
			c.hits++
			return nil, false, true, -1
		}
		c.misses++
		return nil, false, false, -1
	}
	c.hits++
	c.touch(i)
	e := &c.entries[i]
	if e.absent {
		return nil, false, true, i
	}
	start := e.off + e.klen
	return append(buf[:0], c.arena[start:start+e.vlen]...), true, true, i
}

// unknown returns, in keys' backing array, the keys the cache does not
// know (whose get would miss), without counting them as misses.
func (c *stateCache) unknown(keys [][]byte) [][]byte {
	hashes := make([]uint64, len(keys))
	for i, k := range keys {
		hashes[i] = hashKey(c, k)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := keys[:0]
	for i, k := range keys {
		if c.find(hashes[i], k) < 0 && !(c.complete && !c.filter.has(hashes[i])) {
			out = append(out, k)
		}
	}
	return out
}

// put records a committed entry's value (absent: it has none).
func (c *stateCache) put(key, value []byte, absent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(key, value, absent, -1)
}

// set records a committed entry's value. hint is the slot where the key
// was when it was read (-1: unknown); it saves the lookup when the slot
// still holds the key. A value no longer than the one held is written in
// place.
func (c *stateCache) set(key, value []byte, absent bool, hint int32) {
	c.setHashed(key, value, absent, hint, 0, false)
}

// setHashed is set, given key's hash h if hashed.
func (c *stateCache) setHashed(key, value []byte, absent bool, hint int32, h uint64, hashed bool) {
	i := int32(-1)
	if hint >= 0 && int(hint) < len(c.entries) && c.entries[hint].used && bytes.Equal(c.key(&c.entries[hint]), key) {
		i, h = hint, c.entries[hint].hash
	} else {
		if !hashed {
			h = hashKey(c, key)
		}
		i = c.find(h, key)
	}
	if i >= 0 {
		e := &c.entries[i]
		switch {
		case absent && c.complete && !c.filter.has(h):
			c.remove(i) // a complete cache says so by not holding the key
			return
		case absent || len(value) <= int(e.vlen):
			start := e.off + e.klen
			copy(c.arena[start:start+e.vlen], value)
			c.live -= int64(e.vlen) - int64(len(value)) // the record keeps its length: compact reads it
			e.vlen, e.absent = uint32(len(value)), absent
			c.touch(i)
			return
		}
		c.remove(i)
	} else if absent && c.complete && !c.filter.has(h) {
		return // a complete cache says so by not holding the key
	}
	n := cacheRecordHeader + len(key) + len(value)
	if int64(n) > int64(c.arenaLimit)/4 {
		// Too large to keep: as if evicted at once.
		if !absent {
			c.noteEvicted(h)
		}
		return
	}
	// Make room: a slot, and n bytes at the end of the arena.
	for len(c.entries)-len(c.free) >= c.entryLimit && c.tail >= 0 {
		c.evict()
	}
	if len(c.entries)-len(c.free) >= c.entryLimit {
		if !absent {
			c.noteEvicted(h) // a budget too small for even one entry
		}
		return
	}
	if c.used+n > c.arenaLimit {
		// Down to half the arena: a compaction copies what is left, so
		// each byte written past a full arena costs one byte copied
		// (three, when it kept three quarters: a third of an insert-heavy
		// query's time, Nexmark q18's).
		for c.live+int64(n) > int64(c.arenaLimit)/2 && c.tail >= 0 {
			c.evict()
		}
		c.compact()
	}
	if k := len(c.free); k > 0 {
		i, c.free = c.free[k-1], c.free[:k-1]
	} else {
		c.entries = append(c.entries, cacheEntry{})
		i = int32(len(c.entries) - 1)
	}
	off := c.used + cacheRecordHeader
	binary.LittleEndian.PutUint32(c.arena[c.used:], uint32(i))
	binary.LittleEndian.PutUint32(c.arena[c.used+4:], uint32(len(key)+len(value)))
	copy(c.arena[off:], key)
	copy(c.arena[off+len(key):], value)
	c.used += n
	c.live += int64(n)
	c.entries[i] = cacheEntry{hash: h, off: uint32(off), klen: uint32(len(key)), vlen: uint32(len(value)),
		absent: absent, used: true, prev: -1, next: c.head}
	c.index.insert(h, i)
	if c.head >= 0 {
		c.entries[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

// cacheIndexSlotsFor is the size of an index table for up to n entries:
// a power of two of slots that n leave under 70% full.
func cacheIndexSlotsFor(n int) int {
	slots := cacheIndexMinSlots
	for slots*7 < (n+1)*10 {
		slots *= 2
	}
	return slots
}

// limit bounds the cache to budget bytes, at most the budget it was made
// with: it evicts the least recently used entries down to it, compacts
// the arena if its use is past it, and, when the entries' slots or the
// index are past what the budget allows, moves the entries to the first
// slots and rebuilds the index, giving back the memory of the rest.
func (c *stateCache) limit(budget int64) {
	c.share = budget
	if c.filter.size() > evictedFiltersMax(budget) {
		c.dropFilter() // made for a larger share
	}
	if c.rows.size() > budget/filterBudgetShare {
		c.dropRows()
	}
	c.setLimits()
	for (len(c.entries)-len(c.free) > c.entryLimit || c.live > int64(c.arenaLimit)*3/4) && c.tail >= 0 {
		c.evict()
	}
	if c.used > c.arenaLimit {
		c.compact()
	}
	c.releaseAboveLimit() // a smaller share
	if c.index.tables[0] == nil {
		return // no mapped index (tests)
	}
	slots := min(cacheIndexSlotsFor(c.entryLimit), len(c.index.tables[0]))
	shrink := len(c.entries) > c.entryLimit || len(c.index.slots) > slots
	c.index.limit = slots
	if shrink {
		c.renumber()
		c.index.reset()
		for i := range c.entries {
			c.index.insert(c.entries[i].hash, int32(i))
		}
	}
}

// renumber moves the entries in use to the first slots, in use order, and
// gives back the pages of the slots after them. The index must be rebuilt
// after it. Slots that readers hold as hints may now hold other keys,
// which set checks.
func (c *stateCache) renumber() {
	kept := make([]cacheEntry, 0, len(c.entries)-len(c.free))
	for i := c.head; i >= 0; i = c.entries[i].next {
		kept = append(kept, c.entries[i])
	}
	for k := range kept {
		kept[k].prev, kept[k].next = int32(k-1), int32(k+1)
	}
	c.head, c.tail = -1, -1
	if n := len(kept); n > 0 {
		kept[n-1].next = -1
		c.head, c.tail = 0, int32(n-1)
	}
	copy(c.entries, kept)
	clear(c.entries[len(kept):])
	for k := range kept {
		binary.LittleEndian.PutUint32(c.arena[kept[k].off-cacheRecordHeader:], uint32(k)) // the record's slot
	}
	c.entries, c.free = c.entries[:len(kept)], c.free[:0]
	page := os.Getpagesize()
	if from := (len(kept)*int(unsafe.Sizeof(cacheEntry{})) + page - 1) / page * page; from < len(c.entryMemory) {
		// A slot past the entries is written whole before it is read.
		releaseMemory(c.entryMemory[from:])
	}
}

// sharedBudget is a state cache budget that the stores of several
// queries share (SharedCaches): each cache made on it is sized for the
// whole budget, in address space, and held to an equal share of it,
// which changes as caches are made and closed. A cache whose share
// shrinks gives back what is over its new share at once. Safe for
// concurrent use.
type sharedBudget struct {
	total   int64
	mu      sync.Mutex
	members []*stateCache
}

// newCache makes a cache on the budget.
func (b *sharedBudget) newCache(complete bool) *stateCache {
	c := newStateCache(b.total, complete)
	c.shared = b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members = append(b.members, c)
	b.reshare()
	return c
}

// leave takes c off the budget.
func (b *sharedBudget) leave(c *stateCache) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.members, c); i >= 0 {
		b.members = slices.Delete(b.members, i, i+1)
	}
	b.reshare()
}

// reshare gives every member its share; b.mu is held.
func (b *sharedBudget) reshare() {
	if len(b.members) == 0 {
		return
	}
	share := b.total / int64(len(b.members))
	for _, c := range b.members {
		c.mu.Lock()
		c.limit(share)
		c.mu.Unlock()
	}
}

// remove drops entry i.
func (c *stateCache) remove(i int32) {
	e := &c.entries[i]
	c.unlink(i)
	c.index.delete(e.hash, i)
	c.live -= int64(cacheRecordHeader + e.klen + e.vlen)
	*e = cacheEntry{}
	c.free = append(c.free, i)
}

// setLimits sets arenaLimit and entryLimit from the cache's share of its
// budget: three quarters of it, less the filters' memory (of evicted keys
// and of scanned variables' keys), for the arena (within the arena's
// length), the rest for slots. A lower arenaLimit takes effect at the
// next insert, which compacts the arena under it (see compact).
func (c *stateCache) setLimits() {
	arena := c.share * 3 / 4
	c.arenaLimit = int(max(0, min(arena-c.filter.size()-c.rows.size(), int64(len(c.arena)))))
	c.entryLimit = int(min((c.share-arena)/cacheEntrySize, int64(c.maxEntries)))
}

// evict drops the least recently used entry, recording its key in the
// filter if it has a value.
func (c *stateCache) evict() {
	if c.tail < 0 {
		return
	}
	if e := &c.entries[c.tail]; !e.absent {
		c.noteEvicted(e.hash)
	}
	c.remove(c.tail)
}

// noteEvicted records that the entry of hash h, which has a value, is no
// longer held: a complete cache adds it to its filter (made on the first
// eviction, out of the arena's budget), and is no longer complete when the
// filter is past its use or its share too small for one.
func (c *stateCache) noteEvicted(h uint64) {
	if c.complete {
		c.addToFilter(&c.filter, &c.complete, h, evictedFiltersMax(c.share))
	}
}

// dropFilter gives the filter's memory back to the arena: the cache is no
// longer complete.
func (c *stateCache) dropFilter() { c.drop(&c.filter, &c.complete) }

// addToFilter adds h to *f, the filter of evicted keys or of scanned
// keys, first made (of 1/filterBudgetShare of the budget) if nil, and
// grown within limit bytes; *complete says the filter answers, and is
// cleared, the filter dropped, when it cannot be made or is past its use.
func (c *stateCache) addToFilter(f **evictedFilters, complete *bool, h uint64, limit int64) {
	if *f == nil {
		if *f = newEvictedFilters(c.share / filterBudgetShare); *f == nil {
			*complete = false
			return
		}
		c.setLimits()
	}
	grew, ok := (*f).add(h, limit)
	if !ok {
		c.drop(f, complete)
	} else if grew {
		c.setLimits()
	}
}

// drop clears *complete and gives the memory of *f back to the arena.
func (c *stateCache) drop(f **evictedFilters, complete *bool) {
	*complete = false
	if *f != nil {
		(*f).close()
		*f = nil
		c.setLimits()
	}
}

// cacheRecordHeader is the size of the header before each entry's key
// and value in the arena: the entry's slot and the bytes of key and value
// the record holds (4 bytes each, little-endian). A record is live when
// its slot is in use and says the key starts after this header; a value
// set in place shorter than the one before leaves the record's length as
// it was, so that compact can step over it.
const cacheRecordHeader = 8

// compact moves the live records to the start of the arena, in their
// order, over the dead ones. It writes only where the arena has been
// written before: a compaction into a second arena, whose pages were
// given back after each, took a fifth of the CPU of Nexmark q18 in page
// faults, and doubled the cache's memory while it ran.
func (c *stateCache) compact() {
	w := 0
	for r := 0; r < c.used; {
		slot := binary.LittleEndian.Uint32(c.arena[r:])
		size := cacheRecordHeader + int(binary.LittleEndian.Uint32(c.arena[r+4:]))
		if int(slot) < len(c.entries) {
			if e := &c.entries[slot]; e.used && int(e.off) == r+cacheRecordHeader {
				n := int(e.klen + e.vlen)
				if w != r {
					copy(c.arena[w:w+cacheRecordHeader+n], c.arena[r:r+cacheRecordHeader+n])
				}
				binary.LittleEndian.PutUint32(c.arena[w+4:], uint32(n))
				e.off = uint32(w + cacheRecordHeader)
				w += cacheRecordHeader + n
			}
		}
		r += size
	}
	c.used = w
	c.releaseAboveLimit()
}

// releaseAboveLimit gives back the pages of the arena past arenaLimit (and
// past what is used): the memory the filters took from it, or a smaller
// share's.
func (c *stateCache) releaseAboveLimit() {
	page := os.Getpagesize()
	if from := (max(c.arenaLimit, c.used) + page - 1) / page * page; from < len(c.arena) {
		releaseMemory(c.arena[from:])
	}
}

// touch makes entry i the most recently used.
func (c *stateCache) touch(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	e := &c.entries[i]
	e.prev, e.next = -1, c.head
	if c.head >= 0 {
		c.entries[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

func (c *stateCache) unlink(i int32) {
	e := &c.entries[i]
	if e.prev >= 0 {
		c.entries[e.prev].next = e.next
	} else if c.head == i {
		c.head = e.next
	}
	if e.next >= 0 {
		c.entries[e.next].prev = e.prev
	} else if c.tail == i {
		c.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

// clear forgets every entry (after a range deletion, which may cover any
// cached entry): the cache is no longer complete. What it knows of the
// keys of scanned variables stays: a deletion adds none.
func (c *stateCache) clear() {
	c.index.reset()
	c.entries, c.free = c.entries[:0], c.free[:0]
	c.head, c.tail, c.used, c.live = -1, -1, 0, 0
	c.dropFilter()
}

// dropRows gives the memory of the filter of scanned keys back to the
// arena: scans read Pebble from then on.
func (c *stateCache) dropRows() { c.drop(&c.rows, &c.rowsComplete) }

// scan marks operator op's variable as read by scans of a key's entries
// (a join's buffer, a list, a map): the cache notes which keys have had
// one (see rows). Set before the first batch.
func (c *stateCache) scan(op, variable uint8) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.scanned == nil {
		c.scanned = new([256 * 256 / 64]uint64)
	}
	i := int(op)<<8 | int(variable)
	c.scanned[i/64] |= 1 << (i % 64)
}

// isScanned reports whether operator op's variable is scanned. Safe
// without mu: scanned is set before the first batch.
func (c *stateCache) isScanned(op, variable uint8) bool {
	if c.scanned == nil {
		return false
	}
	i := int(op)<<8 | int(variable)
	return c.scanned[i/64]&(1<<(i%64)) != 0
}

// entryPrefix returns the part of a state entry's key that names its
// variable and key (entryKey), or false for a key too short or malformed.
func entryPrefix(k []byte) ([]byte, bool) {
	if len(k) < 8 {
		return nil, false
	}
	n, w := binary.Uvarint(k[7:])
	if w <= 0 || uint64(len(k)-7-w) < n {
		return nil, false
	}
	return k[:7+w+int(n)], true
}

// noteRows records that the entry k of a scanned variable has been
// written; the caller holds mu.
func (c *stateCache) noteRows(k []byte) {
	if !c.rowsComplete {
		return
	}
	p, ok := entryPrefix(k)
	if !ok {
		c.dropRows()
		return
	}
	// One filter, not grown (its limit is its first size).
	c.addToFilter(&c.rows, &c.rowsComplete, hashKey(c, p), c.share/filterBudgetShare)
}

// mayHaveRows reports whether the key of a scanned variable whose entries
// start with prefix (entryKey) may have had any committed.
func (c *stateCache) mayHaveRows(prefix []byte) bool {
	h := hashKey(c, prefix)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.rowsComplete || c.rows.has(h) {
		return true
	}
	c.hits++
	return false
}

// reset forgets everything, as clear, and the keys of scanned variables
// too (the store's state changed outside the cache: a restore, a failed
// commit), for a caller that does not hold mu.
func (c *stateCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clear()
	c.dropRows()
}

// applyCommitted brings the cache up to date with a batch about to be
// committed (the caller resets the cache if the commit fails): each state
// entry it sets or deletes is cached with its new value; a range deletion
// clears the cache. hints are the slots of the batch's state writes, in
// order, as get last saw their keys (see set).
//
// The writes are applied some at a time (cacheWarmMax): first the
// memory each will read is read for all of them (warmEntries for those
// with a hint, the index slot of the key's hash for the others, keys new
// to the cache), so that the cache misses overlap, then the writes in
// order.
func (c *stateCache) applyCommitted(b *pebble.Batch, hints []int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := b.Reader()
	n := 0 // the state writes so far
	var chunk [cacheWarmMax]pendingSet
	m := 0 // the writes in chunk
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			c.clear()
			c.dropRows()
			return err
		}
		if !ok {
			c.applyChunk(chunk[:m])
			return nil
		}
		if c.rowsComplete && len(key) >= 7 && key[0] == statePrefix && !deletes(kind) && c.isScanned(key[5], key[6]) {
			c.noteRows(key)
		}
		if c.skips(key) && (kind != pebble.InternalKeyKindRangeDelete || c.skips(value) && string(value[:7]) == string(key[:7])) {
			continue // an entry the cache does not hold, or a range of them
		}
		if len(key) == 0 || key[0] != statePrefix {
			// A range deletion that starts outside the state may still
			// reach into it; one that ends before it or starts after it
			// (of timers, expiries) does not.
			if kind == pebble.InternalKeyKindRangeDelete && len(key) > 0 && key[0] < statePrefix && (len(value) == 0 || value[0] >= statePrefix) {
				c.applyChunk(chunk[:m])
				m = 0
				c.clear()
			}
			continue
		}
		hint := int32(-1)
		if n < len(hints) {
			hint = hints[n]
		}
		n++
		switch kind {
		case pebble.InternalKeyKindSet:
			chunk[m] = pendingSet{key: key, value: value, hint: hint}
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete:
			chunk[m] = pendingSet{key: key, absent: true, hint: hint}
		default:
			c.applyChunk(chunk[:m])
			m = 0
			c.clear()
			continue
		}
		if m++; m == len(chunk) {
			c.applyChunk(chunk[:m])
			m = 0
		}
	}
}

// deletes reports whether a batch entry of kind removes entries rather
// than adding one.
func deletes(kind pebble.InternalKeyKind) bool {
	switch kind {
	case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized, pebble.InternalKeyKindRangeDelete:
		return true
	}
	return false
}

// pendingSet is a write applyCommitted is about to apply.
type pendingSet struct {
	key, value []byte
	absent     bool
	hint       int32
	hash       uint64 // of key, when hashed
	hashed     bool
}

// applyChunk applies writes in order, having read what they will read
// first. The caller holds mu.
func (c *stateCache) applyChunk(writes []pendingSet) {
	if len(writes) == 0 {
		return
	}
	var hints [cacheWarmMax]int32
	x := &c.index
	for j := range writes {
		w := &writes[j]
		hints[j] = w.hint
		if w.hint < 0 && len(x.slots) > 0 {
			w.hash, w.hashed = hashKey(c, w.key), true
			c.warmSum += x.slots[w.hash>>x.shift]
		}
	}
	c.warmSum += c.warmEntries(hints[:len(writes)])
	if len(c.entries)-len(c.free)+len(writes) > c.entryLimit {
		// A full cache: each write of a key new to it evicts the least
		// recently used entry.
		c.warmSum += c.warmEvictions(len(writes))
	}
	for j := range writes {
		w := &writes[j]
		c.setHashed(w.key, w.value, w.absent, w.hint, w.hash, w.hashed)
		writes[j] = pendingSet{} // it points into the batch
	}
}

// skips reports whether key is an entry of a variable the cache does not
// hold.
func (c *stateCache) skips(key []byte) bool {
	return len(c.uncached) > 0 && len(key) >= 7 && key[0] == statePrefix && c.uncached[[2]uint8{key[5], key[6]}]
}

// skip makes the cache leave out the entries of operator op's variable.
func (c *stateCache) skip(op, variable uint8) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.uncached == nil {
		c.uncached = map[[2]uint8]bool{}
	}
	c.uncached[[2]uint8{op, variable}] = true
}

// cacheIndex maps key hashes to entries: an open-addressing table with
// linear probing, so that a lookup reads one slot (and seldom its
// neighbours) of a compact array and then the entry. A slot holds the upper
// 32 bits of the hash and, below them, the entry's index plus one; 0 is
// empty. A hash's home slot is its top bits, so the table grows and
// deletes (by shifting the following slots back, leaving no tombstones)
// without reading the entries. Entries of equal hashes take a slot each.
//
// A cache's index has two tables of the most slots it may need (tables),
// in memory mapped for them, and uses a prefix of one: it starts small,
// so that a small state's slots stay close together in the processor's
// caches, and grows four times at a time into the other (then, past a
// few times its first size, to the full size at once), and the old
// table's pages go back. Without tables (tests), it grows on the heap.
type cacheIndex struct {
	slots []uint64
	mask  uint64 // len(slots) - 1
	shift uint8  // 64 - log2(len(slots)): hash >> shift is the home slot
	count int
	// tables are the two tables, empty beyond the one in use; cur is
	// the one slots is a prefix of. limit is the most slots the table
	// may take: the tables' length, or less for a cache held to a share
	// of a budget.
	tables [2][]uint64
	cur    int
	limit  int
}

const cacheIndexMinSlots = 1 << 10

// cacheIndexFirstSlots is the size of a cache's first table: 128 KiB.
// A variable for the tests.
var cacheIndexFirstSlots = 1 << 14

// insert adds entry i, whose hash is h; the caller has made sure it is not
// held.
func (x *cacheIndex) insert(h uint64, i int32) {
	// A table that can grow does so at half full: with linear probing,
	// a search for a key that is not there (every new key's, in a
	// complete cache) probes about 2 slots at half full and 6 at 70%.
	if (x.count+1)*10 > len(x.slots)*7 || (x.count+1)*2 > len(x.slots) && len(x.slots) < x.limit {
		x.grow()
	}
	x.place(h>>32<<32 | uint64(uint32(i+1)))
	x.count++
}

// place puts slot value s in the first empty slot from its home on.
func (x *cacheIndex) place(s uint64) {
	p := s >> x.shift
	for x.slots[p] != 0 {
		p = (p + 1) & x.mask
	}
	x.slots[p] = s
}

// grow makes the table four times larger, or, past four times the first
// size, as large as it can be (or makes the first one): in the other of
// the tables, or on the heap without them. A cache's tables have room for
// all its entries, so they never need more.
func (x *cacheIndex) grow() {
	old := x.slots
	if x.tables[0] == nil {
		x.use(make([]uint64, max(2*len(old), cacheIndexMinSlots)))
	} else {
		// Past a few times the first size, a state is too large for
		// the processor's caches anyway: it goes to the full size at
		// once, rehashing its entries one last time.
		next := x.tables[1-x.cur]
		n := 4 * len(old)
		if n > 4*cacheIndexFirstSlots {
			n = len(next)
		}
		x.use(next[:min(n, x.limit)])
		x.cur = 1 - x.cur
	}
	for _, s := range old {
		if s != 0 {
			x.place(s)
		}
	}
	if x.tables[0] != nil {
		zeroSlots(old)
	}
}

// zeroSlots empties slots of a mapped table, giving its pages back.
func zeroSlots(slots []uint64) {
	zeroMemory(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(slots))), 8*len(slots)))
}

// use makes slots, empty and a power of two long, the table.
func (x *cacheIndex) use(slots []uint64) {
	n := len(slots)
	x.slots = slots
	x.mask = uint64(n - 1)
	x.shift = uint8(64 - bits.TrailingZeros(uint(n)))
}

// delete removes entry i, whose hash is h, if it is held.
func (x *cacheIndex) delete(h uint64, i int32) {
	if x.count == 0 {
		return
	}
	want := h>>32<<32 | uint64(uint32(i+1))
	hole := h >> x.shift
	for x.slots[hole] != want {
		if x.slots[hole] == 0 {
			return
		}
		hole = (hole + 1) & x.mask
	}
	// Shift back each following slot of the run that may move into the
	// hole: one whose home is not after the hole (cyclically) and up to it.
	for p := (hole + 1) & x.mask; x.slots[p] != 0; p = (p + 1) & x.mask {
		s := x.slots[p]
		if (p-s>>x.shift)&x.mask >= (p-hole)&x.mask {
			x.slots[hole] = s
			hole = p
		}
	}
	x.slots[hole] = 0
	x.count--
}

// reset empties the table: a cache's goes back to its first size.
func (x *cacheIndex) reset() {
	if x.tables[0] == nil {
		clear(x.slots)
	} else {
		// Back to the first size, with the pages given back.
		zeroSlots(x.slots)
		x.use(x.tables[x.cur][:min(x.limit, cacheIndexFirstSlots)])
	}
	x.count = 0
}

// cacheWarmMax is the most keys warm and warmEntries take at once.
const cacheWarmMax = 16

// warm reads the index slots, entries and stored keys that gets of keys
// will read, a stage at a time for all of them (see warmEntries), so that
// their cache misses overlap instead of following one another: a get of a
// key not in the processor's caches waits for misses in a row (the slot,
// the entry, the key, the entries before and after it in the use order).
// It changes nothing but warmSum.
func (c *stateCache) warm(keys [][]byte) {
	var (
		hashes  [cacheWarmMax]uint64
		entries [cacheWarmMax]int32
	)
	n := min(len(keys), cacheWarmMax)
	for i := range n {
		hashes[i] = hashKey(c, keys[i])
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	x := &c.index
	if x.count == 0 {
		return
	}
	for i := range n {
		entries[i] = -1
		if s := x.slots[hashes[i]>>x.shift]; s != 0 && s>>32 == hashes[i]>>32 {
			entries[i] = int32(uint32(s)) - 1
		}
	}
	c.warmSum += c.warmEntries(entries[:n])
}

// warmEvictions reads what the next n evictions (up to cacheWarmMax) will
// read, a stage at a time (see warm): the entries from the tail of the
// use order, one after the other (each is found from the one before),
// then, for all of them at once, the index slot and the filter block of
// each one's hash, which evict's removal and noteEvicted read and write.
// It changes nothing, and returns a sum of what it read, for warmSum. The
// caller holds mu.
func (c *stateCache) warmEvictions(n int) (sum uint64) {
	var hashes [cacheWarmMax]uint64
	k := 0
	for i := c.tail; k < min(n, cacheWarmMax) && i >= 0 && int(i) < len(c.entries); k++ {
		e := &c.entries[i]
		hashes[k], i = e.hash, e.prev
	}
	x := &c.index
	var f *evictedFilter
	if c.complete && c.filter != nil {
		f = c.filter.gens[len(c.filter.gens)-1]
	}
	for _, h := range hashes[:k] {
		if len(x.slots) > 0 {
			sum += x.slots[h>>x.shift]
		}
		if f != nil {
			b, _ := f.block(h)
			sum += b[0]
		}
	}
	return sum
}

// warmEntries reads entries (-1: none), then their keys and their
// neighbours in the use order, a stage at a time: what a get or set of
// them reads. It returns a sum of what it read, for warmSum. The caller
// holds mu.
func (c *stateCache) warmEntries(entries []int32) (sum uint64) {
	var offs, prevs, nexts [cacheWarmMax]int32
	n := min(len(entries), cacheWarmMax)
	for i := range n {
		offs[i], prevs[i], nexts[i] = -1, -1, -1
		if e := entries[i]; e >= 0 && int(e) < len(c.entries) {
			en := &c.entries[e]
			offs[i], prevs[i], nexts[i] = int32(en.off), en.prev, en.next
		}
	}
	for i := range n {
		if o := offs[i]; o >= 0 && int(o) < len(c.arena) {
			sum += uint64(c.arena[o])
		}
		if p := prevs[i]; p >= 0 && int(p) < len(c.entries) {
			sum += uint64(c.entries[p].off)
		}
		if p := nexts[i]; p >= 0 && int(p) < len(c.entries) {
			sum += uint64(c.entries[p].off)
		}
	}
	return sum
}
