package runtime

import (
	"math/bits"
	"unsafe"
)

// evictedFilter is a Bloom filter of the keys a complete state cache has
// evicted with a value (see stateCache.evict); one also holds the keys
// that scanned variables have had entries for (stateCache.rows). A key
// the cache does not hold and the filter has not seen has no state: the
// read of a new key, most reads of a store with many keys (Nexmark q16's
// and q18's, a deduplication's), costs a few memory reads instead of a
// Pebble read, which opens an iterator on every level that may hold it.
// A key the filter may have seen (false positives included) is read from
// Pebble.
//
// It is blocked: each key sets and tests filterProbes bits of one 512-bit
// block (a cache line), so that a test reads one line. At filterBitsPerKey
// bits a key, about 1.2% of the keys never seen test positive. A filter
// holding the keys it was sized for is followed by one twice its size
// (evictedFilters); the last, when no larger one fits the budget, is of
// use up to filterMaxLoad times its keys (5 bits a key: about one test in
// eight of a key never seen passes), and then the cache drops them all
// (and is no longer complete). Keys are counted once: adding a key the
// filter already has counts nothing.
//
// Its memory is a mapping of its own (mapMemory), taken from the cache's
// arena budget. Not safe for concurrent use: the cache's mutex guards it.
type evictedFilter struct {
	mem      []byte
	blocks   [][8]uint64
	keys     int // keys added
	capacity int // keys it is sized for
	max      int // keys beyond which the filter is no use
}

const (
	filterBitsPerKey = 10
	filterProbes     = 6
	filterMaxLoad    = 2
	// filterBudgetShare is the share of a cache's budget its first
	// filter takes: 1/16, 16 MiB of the default 256 MiB, room for 13M
	// keys at 10 bits a key. The filters of evicted keys grow to
	// filterMaxShare sixteenths (1/16, 1/8, 1/4: 112 MiB, 94M keys):
	// for a store that large the cache holds few of its keys anyway, and
	// a filter's 10 bits answer for a key that its cache slot could not.
	filterBudgetShare = 16
	filterMaxShare    = 7
)

// evictedFiltersMax is the most memory the filters of evicted keys of a
// cache with budget bytes take (filterMaxShare sixteenths).
func evictedFiltersMax(budget int64) int64 { return budget * filterMaxShare / 16 }

// evictedFilters are the generations of a cache's filter of evicted keys,
// each twice the size of the one before; a key is added to the last. The
// filter of scanned keys is one generation, never grown.
type evictedFilters struct {
	gens  []*evictedFilter
	bytes int64
}

// newEvictedFilters returns filters whose first is of about n bytes (nil
// below one block).
func newEvictedFilters(n int64) *evictedFilters {
	f := newEvictedFilter(n)
	if f == nil {
		return nil
	}
	return &evictedFilters{gens: []*evictedFilter{f}, bytes: f.size()}
}

// size is the filters' memory in bytes (0 for nil).
func (fs *evictedFilters) size() int64 {
	if fs == nil {
		return 0
	}
	return fs.bytes
}

// has reports whether h may have been added (false for nil).
func (fs *evictedFilters) has(h uint64) bool {
	if fs == nil {
		return false
	}
	for _, f := range fs.gens {
		if f.has(h) {
			return true
		}
	}
	return false
}

// touch reads the block of h in each filter, as has will (for a caller
// that reads other memory meanwhile), and returns a sum of what it read.
func (fs *evictedFilters) touch(h uint64) (sum uint64) {
	if fs == nil {
		return 0
	}
	for _, f := range fs.gens {
		b, _ := f.block(h)
		sum += b[0]
	}
	return sum
}

// add records h. A last filter holding the keys it is sized for is
// followed by one twice its size if the total stays within limit bytes
// (grew). ok is false once the last filter is past its use.
func (fs *evictedFilters) add(h uint64, limit int64) (grew, ok bool) {
	last := fs.gens[len(fs.gens)-1]
	if last.keys >= last.capacity && fs.bytes+2*last.size() <= limit {
		if f := newEvictedFilter(2 * last.size()); f != nil {
			fs.gens = append(fs.gens, f)
			fs.bytes += f.size()
			last, grew = f, true
		}
	}
	return grew, last.add(h)
}

// close returns the filters' memory.
func (fs *evictedFilters) close() {
	if fs != nil {
		for _, f := range fs.gens {
			f.close()
		}
		fs.gens, fs.bytes = nil, 0
	}
}

// newEvictedFilter returns a filter of about n bytes (none below one
// block).
func newEvictedFilter(n int64) *evictedFilter {
	blocks := int(n / 64)
	if blocks == 0 {
		return nil
	}
	f := &evictedFilter{mem: mapMemory(blocks * 64)}
	f.blocks = unsafe.Slice((*[8]uint64)(unsafe.Pointer(unsafe.SliceData(f.mem))), blocks)
	f.capacity = blocks * 512 / filterBitsPerKey
	f.max = filterMaxLoad * f.capacity
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
// is of use for. A key it has already tests positive, and is not counted.
func (f *evictedFilter) add(h uint64) bool {
	b, x := f.block(h)
	had := true
	for range filterProbes {
		p := x >> 55 // 9 bits: a bit of the block
		bit := uint64(1) << (p & 63)
		had = had && b[p>>6]&bit != 0
		b[p>>6] |= bit
		x <<= 9
	}
	if !had {
		f.keys++
	}
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
