package runtime

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// stateCache keeps committed state entries in memory, in front of Pebble,
// least recently used first out once their bytes pass the budget. It
// holds only what is committed: a batch's writes enter it when the batch
// commits (applyCommitted), so reading through it is the same as reading
// Pebble, and recovery does not depend on it. An entry known to be absent
// is cached too (a nil value), since most reads of a new key find nothing.
// Safe for concurrent use.
type stateCache struct {
	mu      sync.Mutex
	budget  int64
	size    int64
	index   map[string]int32
	entries []cacheEntry
	free    []int32
	// head is the most recently used entry, tail the least; -1 when empty.
	head, tail int32
	// hits and misses count reads, for progress and metrics.
	hits, misses int64
}

type cacheEntry struct {
	key        string
	value      []byte
	absent     bool
	prev, next int32
}

// cacheEntryOverhead approximates the bytes an entry costs beyond its key
// and value: the map slot, the entry, the slice and string headers and the
// rounding of the two allocations to their size classes (measured: about
// 150 bytes an entry for 20-byte keys and small values).
const cacheEntryOverhead = 128

func newStateCache(budget int64) *stateCache {
	return &stateCache{budget: budget, index: map[string]int32{}, head: -1, tail: -1}
}

// get returns a cached entry: cached is false when the cache does not know
// the key; otherwise ok says whether the entry exists. value is copied
// into buf.
func (c *stateCache) get(key []byte, buf []byte) (value []byte, ok, cached bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, found := c.index[string(key)]
	if !found {
		c.misses++
		return nil, false, false
	}
	c.hits++
	c.touch(i)
	e := &c.entries[i]
	if e.absent {
		return nil, false, true
	}
	return append(buf[:0], e.value...), true, true
}

// put records a committed entry's value (absent: it has none).
func (c *stateCache) put(key, value []byte, absent bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.set(key, value, absent)
}

func (c *stateCache) set(key, value []byte, absent bool) {
	if i, found := c.index[string(key)]; found {
		e := &c.entries[i]
		c.size += int64(len(value) - len(e.value))
		e.value = append(e.value[:0], value...)
		e.absent = absent
		c.touch(i)
		c.evict()
		return
	}
	cost := int64(len(key) + len(value) + cacheEntryOverhead)
	if cost > c.budget {
		return
	}
	var i int32
	if n := len(c.free); n > 0 {
		i, c.free = c.free[n-1], c.free[:n-1]
	} else {
		c.entries = append(c.entries, cacheEntry{})
		i = int32(len(c.entries) - 1)
	}
	k := string(key)
	c.entries[i] = cacheEntry{key: k, value: append([]byte(nil), value...), absent: absent, prev: -1, next: c.head}
	if c.head >= 0 {
		c.entries[c.head].prev = i
	}
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
	c.index[k] = i
	c.size += cost
	c.evict()
}

// touch makes entry i the most recently used.
func (c *stateCache) touch(i int32) {
	if c.head == i {
		return
	}
	c.unlink(i)
	e := &c.entries[i]
	e.prev, e.next = -1, c.head
	c.entries[c.head].prev = i
	c.head = i
	if c.tail < 0 {
		c.tail = i
	}
}

func (c *stateCache) unlink(i int32) {
	e := &c.entries[i]
	if e.prev >= 0 {
		c.entries[e.prev].next = e.next
	} else {
		c.head = e.next
	}
	if e.next >= 0 {
		c.entries[e.next].prev = e.prev
	} else {
		c.tail = e.prev
	}
}

// evict drops least recently used entries until the cache is within its
// budget.
func (c *stateCache) evict() {
	for c.size > c.budget && c.tail >= 0 {
		i := c.tail
		c.unlink(i)
		e := &c.entries[i]
		c.size -= int64(len(e.key) + len(e.value) + cacheEntryOverhead)
		delete(c.index, e.key)
		*e = cacheEntry{}
		c.free = append(c.free, i)
	}
}

// clear forgets everything (after a range deletion, which may cover any
// cached entry).
func (c *stateCache) clear() {
	clear(c.index)
	c.entries, c.free = c.entries[:0], c.free[:0]
	c.head, c.tail, c.size = -1, -1, 0
}

// applyCommitted brings the cache up to date with a committed batch: each
// state entry it set or deleted is cached with its new value; a range
// deletion clears the cache.
func (c *stateCache) applyCommitted(b *pebble.Batch) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := b.Reader()
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			c.clear()
			return err
		}
		if !ok {
			return nil
		}
		if len(key) == 0 || key[0] != statePrefix {
			if kind == pebble.InternalKeyKindRangeDelete {
				c.clear()
			}
			continue
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			c.set(key, value, false)
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete:
			c.set(key, nil, true)
		default:
			c.clear()
		}
	}
}
