package runtime

import (
	"bytes"
	"slices"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
)

// Pebble inserts a batch's writes into its memtable, a skiplist, one by
// one: in key order, each insert starts where the last one ended, while
// in arrival order each is a search from the top through memory the cache
// does not hold (with a 64 MiB memtable, which takes batches of up to 32
// MiB, count per key at 1M keys took 4.4 s in arrival order and 2.0 s in
// key order). A batch of more than half a memtable becomes a memtable of
// its own (a flushable batch), whose entries Pebble sorts with a
// comparison sort that decodes both entries at every step; given them in
// order, that sort (pattern-defeating quicksort) only checks them, in one
// pass. So commit gives Pebble a batch of point writes in key order: a
// copy of its records, sorted with a radix sort on the keys' bytes,
// eight at a time.
//
// The copy commits what the batch would: a key written more than once
// keeps only its last write (the one that would win), so that the copy
// is strictly in order (Pebble orders a key's writes newest first, and
// a few out of order would send its sort back to comparing). Range
// deletions go after the point writes: a range deletion deletes what the
// batch wrote before it in its range, and in the copy that is all the
// copy's writes in its range, so a batch that writes in a range after
// deleting it keeps its order (the loop deletes a variable ordered by
// event time after the operator's writes; one that clears a key and
// writes it again is kept in order).

// sortedBatchMin is the size of the smallest batch that is copied in key
// order: below it, a batch's inserts take too little time to matter.
const sortedBatchMin = 64 << 10

// sortedDelsMax is the most range deletions a batch copied in key order
// holds: each is checked against the writes after it.
const sortedDelsMax = 16

// batchSorter holds the scratch space of sortedCopy, kept from one batch
// to the next. Not safe for concurrent use.
type batchSorter struct {
	data  []byte // the batch being sorted
	recs  []sortRec
	dels  []rangeDel
	items []sortItem
	tmp   []sortItem
}

// sortRec is one point write of the batch: where its record and its key
// are in the batch's bytes.
type sortRec struct {
	start, end     uint32
	keyStart, keyN uint32
}

// rangeDel is a range deletion of the batch: its record, its bounds, and
// how many point writes come before it.
type rangeDel struct {
	start, end   uint32
	lower, upper []byte
	after        int
}

// key returns the key of rec i.
func (s *batchSorter) key(i uint32) []byte {
	r := &s.recs[i]
	return s.data[r.keyStart : r.keyStart+r.keyN]
}

// sortItem is a write being sorted: w holds eight bytes of its key from
// the depth being sorted on (big-endian, zero-padded), and tag how many of
// them the key has (0 to 8), or 9 when the key goes on past them. Keys
// with equal words are ordered by tag: one that ends first is a prefix of
// the other.
type sortItem struct {
	w   uint64
	i   uint32
	tag uint8
	// shadowed marks a write that a later write of the same key
	// overrides.
	shadowed bool
}

// sortedCopy returns a new batch holding b's writes in key order, or
// false when b is small, is indexed (its reads go through an index of it,
// kept with it), holds a write other than a set, a deletion of one key or
// a range deletion, or writes in a range after deleting it. The copy is
// b's records, copied as they are, but for writes a later write of the
// same key overrides, and with its range deletions last.
func (s *batchSorter) sortedCopy(db *pebble.DB, b *pebble.Batch) (*pebble.Batch, bool, error) {
	if b.Len() < sortedBatchMin || b.Indexed() {
		return nil, false, nil
	}
	s.data = b.Repr()
	defer func() {
		s.data = nil // b's memory
		clear(s.dels)
		if len(s.recs) > sortScratchMax {
			// Scratch space for a very large batch is not kept for
			// the next.
			s.recs, s.items, s.tmp = nil, nil, nil
		}
	}()
	// Sized at once: a large batch's scratch space is not kept, and
	// doubling it would copy it over and over.
	s.recs, s.dels = slices.Grow(s.recs[:0], int(b.Count())), s.dels[:0]
	r := b.Reader()
	for {
		start := len(s.data) - len(r)
		kind, key, value, ok, err := r.Next()
		if err != nil {
			return nil, false, err
		}
		if !ok {
			break
		}
		if kind == pebble.InternalKeyKindRangeDelete {
			if len(s.dels) == sortedDelsMax {
				return nil, false, nil
			}
			s.dels = append(s.dels, rangeDel{start: uint32(start), end: uint32(len(s.data) - len(r)), lower: key, upper: value, after: len(s.recs)})
			continue
		}
		if kind != pebble.InternalKeyKindSet && kind != pebble.InternalKeyKindDelete {
			return nil, false, nil
		}
		keyStart := 0
		if len(key) > 0 {
			keyStart = int(uintptr(unsafe.Pointer(unsafe.SliceData(key))) - uintptr(unsafe.Pointer(unsafe.SliceData(s.data))))
		}
		s.recs = append(s.recs, sortRec{start: uint32(start), end: uint32(len(s.data) - len(r)), keyStart: uint32(keyStart), keyN: uint32(len(key))})
	}
	if uint64(len(s.recs)+len(s.dels)) != uint64(b.Count()) {
		return nil, false, nil
	}
	for _, d := range s.dels {
		for i := d.after; i < len(s.recs); i++ {
			if k := s.key(uint32(i)); bytes.Compare(k, d.lower) >= 0 && bytes.Compare(k, d.upper) < 0 {
				return nil, false, nil // written after its deletion
			}
		}
	}
	s.items = slices.Grow(s.items[:0], len(s.recs))
	for i := range s.recs {
		s.items = append(s.items, sortItem{i: uint32(i)})
	}
	if cap(s.tmp) < len(s.items) {
		s.tmp = make([]sortItem, len(s.items))
	}
	s.sort(s.items, s.tmp[:len(s.items)], 0)
	repr := make([]byte, 0, len(s.data))
	repr = append(repr, s.data[:batchrepr.HeaderLen]...)
	n := uint32(0)
	for _, it := range s.items {
		if it.shadowed {
			continue
		}
		rec := &s.recs[it.i]
		repr = append(repr, s.data[rec.start:rec.end]...)
		n++
	}
	for _, d := range s.dels {
		repr = append(repr, s.data[d.start:d.end]...)
		n++
	}
	batchrepr.SetCount(repr, n)
	out := db.NewBatch()
	if err := out.SetRepr(repr); err != nil {
		out.Close()
		return nil, false, err
	}
	return out, true, nil
}

// sortScratchMax is the most writes whose scratch space (48 bytes each)
// sortedCopy keeps from one batch to the next.
const sortScratchMax = 256 << 10

// sortInsertionMax is the longest run that sort orders by insertion.
const sortInsertionMax = 24

// sort orders items, whose keys are equal before depth, by their keys
// from depth on, stably. tmp is scratch space of the same length.
func (s *batchSorter) sort(items, tmp []sortItem, depth int) {
	if len(items) <= sortInsertionMax {
		s.insertionSort(items, depth)
		return
	}
	var counts [9][256]uint32
	for j := range items {
		it := &items[j]
		it.w, it.tag = keyWord(s.key(it.i), depth)
		counts[8][it.tag]++
		w := it.w
		for k := range 8 {
			counts[k][byte(w>>(8*k))]++
		}
	}
	// A least significant digit radix sort, tag first: each pass is
	// stable, and a pass whose digit is the same for all is skipped.
	src, dst := items, tmp
	for _, k := range [...]int{8, 0, 1, 2, 3, 4, 5, 6, 7} {
		if radixPass(&counts[k], src, dst, k) {
			src, dst = dst, src
		}
	}
	if &src[0] != &items[0] {
		copy(items, src)
	}
	// Runs of keys equal in the eight bytes that go on past them are
	// sorted on the next eight.
	for start := 0; start < len(items); {
		end := start + 1
		for end < len(items) && items[end].w == items[start].w && items[end].tag == items[start].tag {
			end++
		}
		switch {
		case end-start > 1 && items[start].tag == 9:
			s.sort(items[start:end], tmp[start:end], depth+8)
		case end-start > 1:
			// Keys that end in these bytes and are equal in them are
			// the same key: the last write wins.
			for j := start; j < end-1; j++ {
				items[j].shadowed = true
			}
		}
		start = end
	}
}

// radixPass moves src into dst ordered by digit k, stably, given the
// digits' counts, and reports whether it did: false when every item has
// the same digit, so that the order is already right. Digit k is byte k
// of the word (0 the least significant), or the tag for k = 8.
func radixPass(counts *[256]uint32, src, dst []sortItem, k int) bool {
	var offsets [256]uint32
	sum := uint32(0)
	for d, c := range counts {
		if int(c) == len(src) {
			return false
		}
		offsets[d] = sum
		sum += c
	}
	if k == 8 {
		for _, it := range src {
			dst[offsets[it.tag]] = it
			offsets[it.tag]++
		}
		return true
	}
	shift := uint(8 * k)
	for _, it := range src {
		d := byte(it.w >> shift)
		dst[offsets[d]] = it
		offsets[d]++
	}
	return true
}

// insertionSort orders a short run by the keys' bytes from depth on,
// stably, and marks the writes a later write of the same key overrides.
func (s *batchSorter) insertionSort(items []sortItem, depth int) {
	for j := 1; j < len(items); j++ {
		it := items[j]
		key := s.key(it.i)[depth:]
		k := j
		for k > 0 && bytes.Compare(key, s.key(items[k-1].i)[depth:]) < 0 {
			items[k] = items[k-1]
			k--
		}
		items[k] = it
	}
	for j := 1; j < len(items); j++ {
		if bytes.Equal(s.key(items[j-1].i)[depth:], s.key(items[j].i)[depth:]) {
			items[j-1].shadowed = true
		}
	}
}

// keyWord returns the eight bytes of key from depth, big-endian and
// zero-padded, and how many of them key has (9: more than eight).
func keyWord(key []byte, depth int) (uint64, uint8) {
	rest := key[depth:]
	if len(rest) >= 8 {
		w := uint64(rest[0])<<56 | uint64(rest[1])<<48 | uint64(rest[2])<<40 | uint64(rest[3])<<32 |
			uint64(rest[4])<<24 | uint64(rest[5])<<16 | uint64(rest[6])<<8 | uint64(rest[7])
		if len(rest) == 8 {
			return w, 8
		}
		return w, 9
	}
	var w uint64
	for j, c := range rest {
		w |= uint64(c) << (56 - 8*j)
	}
	return w, uint8(len(rest))
}
