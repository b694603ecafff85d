package runtime

import (
	"math/bits"
	"unsafe"
)

// evictedFilter is a Bloom filter of the keys a complete state cache has
// evicted with a value (see stateCache.evict). A key the cache does not
// hold and the filter has not seen has no state: the read of a new key,
// most reads of a store with many keys (Nexmark q16's and q18's, a
// deduplication's), costs a few memory reads instead of a Pebble read,
// which opens an iterator on every level that may hold it. A key the
// filter may have seen (false positives included) is read from Pebble.
//
// It is blocked: each key sets and tests filterProbes bits of one 512-bit
// block (a cache line), so that a test reads one line. At filterBitsPerKey
// bits a key, about 1.2% of the keys never seen test positive; past
// filterMaxLoad times the keys it was sized for, the cache drops it (and
// is no longer complete), since by then most tests would pass.
//
// Its memory is a mapping of its own (mapMemory), taken from the cache's
// arena budget when the cache first evicts. Not safe for concurrent use:
// the cache's mutex guards it.
type evictedFilter struct {
	mem    []byte
	blocks [][8]uint64
	keys   int // keys added
	max    int // keys beyond which the filter is no use
}

const (
	filterBitsPerKey = 10
	filterProbes     = 6
	filterMaxLoad    = 2
	// filterBudgetShare is the share of a cache's budget its filter
	// takes: 1/16, 16 MiB of the default 256 MiB, room for 13M keys at
	// 10 bits a key (dropped past 27M).
	filterBudgetShare = 16
)

// newEvictedFilter returns a filter of about n bytes (none below one
// block).
func newEvictedFilter(n int64) *evictedFilter {
	blocks := int(n / 64)
	if blocks == 0 {
		return nil
	}
	f := &evictedFilter{mem: mapMemory(blocks * 64)}
	f.blocks = unsafe.Slice((*[8]uint64)(unsafe.Pointer(unsafe.SliceData(f.mem))), blocks)
	f.max = filterMaxLoad * blocks * 512 / filterBitsPerKey
	return f
}

// size is the filter's memory in bytes (0 for nil).
func (f *evictedFilter) size() int64 {
	if f == nil {
		return 0
	}
	return int64(len(f.mem))
}

// close returns the filter's memory.
func (f *evictedFilter) close() {
	if f != nil {
		unmapMemory(f.mem)
		f.mem, f.blocks = nil, nil
	}
}

// block returns the block of hash h and the bits to probe in it: the
// block from h's top bits, the probes from a remix of h (the cache's
// index uses h's top bits as well).
func (f *evictedFilter) block(h uint64) (*[8]uint64, uint64) {
	i, _ := bits.Mul64(h, uint64(len(f.blocks)))
	return &f.blocks[i], h * 0x9e3779b97f4a7c15
}

// add records h; it reports false once the filter holds more keys than it
// is of use for.
func (f *evictedFilter) add(h uint64) bool {
	b, x := f.block(h)
	for range filterProbes {
		p := x >> 55 // 9 bits: a bit of the block
		b[p>>6] |= 1 << (p & 63)
		x <<= 9
	}
	f.keys++
	return f.keys <= f.max
}

// has reports whether h may have been added (false for nil).
func (f *evictedFilter) has(h uint64) bool {
	if f == nil {
		return false
	}
	b, x := f.block(h)
	for range filterProbes {
		p := x >> 55
		if b[p>>6]&(1<<(p&63)) == 0 {
			return false
		}
		x <<= 9
	}
	return true
}
