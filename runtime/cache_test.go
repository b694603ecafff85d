package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// TestStateCache checks the cache against a plain model of what it has
// been told: a cached key always has its last value; what is cached is the
// most recently used keys (if a key is cached, so is every key used after
// it); the cache stays within its arena; and a complete cache answers
// "absent" for keys it was never told of, until its first eviction.
// Updates come with the slot a read of the key gave, a slot another key
// took since, or none, as a batch's commit passes them; values shrink
// and grow, and some keys are deleted. Besides the usual hashes, it runs
// with hashes forced to collide (in their top bits, which pick the index
// slot, or whole), and with more keys than the index's first table holds.
// Reads ahead (warm) come in between, and change nothing of it. A cache
// on a shared budget runs the same steps while two other caches join the
// budget (its share falls to a third) and leave it again, and stays
// within its share at every step.
func TestStateCache(t *testing.T) {
	cases := []struct {
		name     string
		budget   int64
		keys     int
		hashMask uint64
		shared   bool
	}{
		{"small", 16 << 10, 300, ^uint64(0), false},
		{"equal top bits", 16 << 10, 300, 1<<32 - 1, false},
		{"few top bits", 16 << 10, 300, 0xc000_0000_0000_ffff, false},
		{"equal hashes", 16 << 10, 300, 0xc000_0000_0000_0003, false},
		{"growing index", 512 << 10, 4000, ^uint64(0), false},
		{"shared", 48 << 10, 300, ^uint64(0), true},
		{"shared, growing index", 1536 << 10, 4000, ^uint64(0), true},
	}
	for _, tc := range cases {
		for _, complete := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/complete=%v", tc.name, complete), func(t *testing.T) {
				testStateCache(t, tc.budget, tc.keys, tc.hashMask, complete, tc.shared)
			})
		}
	}
}

func testStateCache(t *testing.T, budget int64, keys int, hashMask uint64, complete, shared bool) {
	// The index starts at its smallest size, so that it grows.
	first := cacheIndexFirstSlots
	cacheIndexFirstSlots = cacheIndexMinSlots
	defer func() { cacheIndexFirstSlots = first }()
	var c *stateCache
	var pool *sharedBudget
	var others []*stateCache
	share := budget
	if shared {
		pool = &sharedBudget{total: budget}
		c = pool.newCache(complete)
	} else {
		c = newStateCache(budget, complete)
	}
	c.hashMask = hashMask
	defer c.close()
	r := rand.New(rand.NewPCG(5, 5))
	values := map[string]string{}
	deleted := map[string]bool{}
	slots := map[string]int32{} // the slot of each key's last read
	var order []string          // most recent first
	use := func(k string) {
		order = slices.DeleteFunc(order, func(o string) bool { return o == k })
		order = append([]string{k}, order...)
	}
	evicted := false
	// The checks below take time in the keys and the index's slots: the
	// index is checked every indexCheck steps, the use order every
	// orderCheck steps.
	steps, orderCheck, indexCheck := 20000, 1, 37
	if hashMask != ^uint64(0) {
		orderCheck = 7 // finding each key walks a long run of slots
	}
	if keys > 1000 {
		steps, orderCheck, indexCheck = 5*keys, 97, 97
	}
	cleared := false
	for i := range steps {
		k := fmt.Sprintf("key-%d", r.IntN(keys))
		if r.IntN(4) == 0 {
			// Reading ahead (warm) changes nothing the checks see.
			c.warm([][]byte{[]byte(k), fmt.Appendf(nil, "key-%d", r.IntN(keys)), []byte("never told")})
		}
		switch {
		case shared && (i == steps/8 || i == steps/4):
			// Another store opens with a cache on the budget: this one's
			// share shrinks, and what is over it is evicted at once.
			others = append(others, pool.newCache(false))
			share = budget / int64(len(others)+1)
			evicted = evicted || !c.complete || c.filter != nil
			// The memory of the slots and index past the share is
			// given back too.
			if len(c.entries) > c.entryLimit || len(c.index.slots) > cacheIndexSlotsFor(c.entryLimit) {
				t.Fatalf("step %d: %d slots and an index of %d for a share of %d entries", i, len(c.entries), len(c.index.slots), c.entryLimit)
			}
			checkCacheIndex(t, c)
		case shared && (i == steps*5/8 || i == steps*7/8):
			others[0].close()
			others = others[1:]
			share = budget / int64(len(others)+1)
		}
		if i == steps/2 {
			// As after a range deletion: nothing is cached any more.
			c.reset()
			order, cleared = order[:0], true
			evicted = evicted || !c.complete || c.filter != nil
			if c.find(hashOf(c, k), []byte(k)) >= 0 {
				t.Fatalf("step %d: %s is cached after clear", i, k)
			}
		}
		if r.IntN(3) == 0 {
			v := fmt.Sprintf("value-%d-%s", i, string(make([]byte, r.IntN(40))))
			absent := r.IntN(8) == 0
			hint := int32(-1)
			switch r.IntN(3) {
			case 0:
				if s, ok := slots[k]; ok {
					hint = s
				}
			case 1:
				hint = int32(r.IntN(len(c.entries) + 1))
			}
			c.mu.Lock()
			if absent {
				c.set([]byte(k), nil, true, hint)
				delete(values, k)
				deleted[k] = true
			} else {
				c.set([]byte(k), []byte(v), false, hint)
				values[k] = v
				delete(deleted, k)
			}
			c.mu.Unlock()
			if absent && c.complete {
				// Not held: a complete cache says absent by not holding it.
				order = slices.DeleteFunc(order, func(o string) bool { return o == k })
			} else {
				use(k)
			}
		} else {
			got, ok, cached, slot := c.get([]byte(k), nil)
			slots[k] = slot
			want, told := values[k]
			switch {
			case cached && deleted[k] && ok:
				t.Fatalf("step %d: deleted %s cached as %q", i, k, got)
			case cached && told && (!ok || string(got) != want):
				t.Fatalf("step %d: %s = %q %v, want %q", i, k, got, ok, want)
			case cached && !told && !deleted[k] && ok:
				t.Fatalf("step %d: %s cached as %q, never told", i, k, got)
			case complete && !evicted && !cached:
				t.Fatalf("step %d: a complete cache does not know %s", i, k)
			}
			if cached && (told || deleted[k]) && slot >= 0 {
				use(k)
			}
		}
		evicted = evicted || !c.complete || c.filter != nil
		if c.used > len(c.arena) || c.live > int64(c.used) {
			t.Fatalf("step %d: used %d, live %d, arena %d", i, c.used, c.live, len(c.arena))
		}
		if inUse := int64(len(c.entries) - len(c.free)); int64(c.used)+inUse*cacheEntrySize+c.filter.size() > share {
			t.Fatalf("step %d: %d bytes of arena, %d entries and a filter of %d bytes, over the share of %d bytes", i, c.used, inUse, c.filter.size(), share)
		}
		if len(c.entries) > c.entryLimit || len(c.index.slots) > max(c.index.limit, cacheIndexMinSlots) {
			t.Fatalf("step %d: %d slots and an index of %d, over the limits of %d and %d", i, len(c.entries), len(c.index.slots), c.entryLimit, c.index.limit)
		}
		if i%indexCheck == 0 {
			checkCacheIndex(t, c)
		}
		if i%orderCheck != 0 {
			continue
		}
		// The cached keys are a prefix of the use order.
		gap := false
		for _, k := range order {
			cached := c.find(hashOf(c, k), []byte(k)) >= 0
			if cached && gap {
				t.Fatalf("step %d: %s is cached but a key used after it is not", i, k)
			}
			gap = gap || !cached
		}
	}
	if !evicted || !cleared {
		t.Fatalf("evicted %v, cleared %v: the test does not reach both", evicted, cleared)
	}
	if keys > 1000 && len(c.index.slots) <= cacheIndexFirstSlots {
		t.Fatalf("the index has %d slots: the test does not reach its growth", len(c.index.slots))
	}
	if len(c.index.tables[0])*7 < c.maxEntries*10 {
		t.Fatalf("the index's tables have %d slots for up to %d entries: over 70%% full", len(c.index.tables[0]), c.maxEntries)
	}
}

func hashOf(c *stateCache, k string) uint64 {
	return hashKey(c, []byte(k))
}

// checkCacheIndex checks the cache's index against its entries: it holds
// each entry in use once and nothing else, and each slot is reachable from
// its hash's home slot without passing an empty one (so find finds it).
func checkCacheIndex(t *testing.T, c *stateCache) {
	t.Helper()
	x := &c.index
	held := map[int32]bool{}
	for p, s := range x.slots {
		if s == 0 {
			continue
		}
		i := int32(uint32(s)) - 1
		if i < 0 || int(i) >= len(c.entries) || !c.entries[i].used || held[i] {
			t.Fatalf("index slot %d holds %#x: not an entry in use, or one held twice", p, s)
		}
		held[i] = true
		h := c.entries[i].hash
		if s>>32 != h>>32 {
			t.Fatalf("index slot %d holds %#x for entry %d of hash %#x", p, s, i, h)
		}
		for q := h >> x.shift; q != uint64(p); q = (q + 1) & x.mask {
			if x.slots[q] == 0 {
				t.Fatalf("index slot %d (entry %d) is past an empty slot %d from its home", p, i, q)
			}
		}
	}
	used := 0
	for i := range c.entries {
		if c.entries[i].used {
			used++
			if !held[int32(i)] {
				t.Fatalf("entry %d is in use but not in the index", i)
			}
		}
	}
	if x.count != used || len(held) != used {
		t.Fatalf("index count %d, %d slots held, %d entries in use", x.count, len(held), used)
	}
}

// TestEvictedFilter checks the filter of evicted keys: no key added tests
// negative, and about 1% of the others test positive at the load it is
// sized for.
func TestEvictedFilter(t *testing.T) {
	f := newEvictedFilter(64 << 10)
	defer f.close()
	n := f.max / filterMaxLoad
	r := rand.New(rand.NewPCG(1, 2))
	added := make([]uint64, n)
	for i := range added {
		added[i] = r.Uint64()
		if !f.add(added[i]) {
			t.Fatalf("the filter is full after %d of the %d keys it is sized for", i+1, n)
		}
	}
	for _, h := range added {
		if !f.has(h) {
			t.Fatalf("%#x was added but tests negative", h)
		}
	}
	positive := 0
	for range 100000 {
		if f.has(r.Uint64()) {
			positive++
		}
	}
	if rate := float64(positive) / 100000; rate > 0.02 {
		t.Fatalf("%.2f%% of keys never added test positive, want about 1%%", rate*100)
	}
}

// TestCompleteCacheAfterEviction runs a complete cache over many more
// keys than it holds: a key it has evicted is never answered as absent
// (its read goes to the store), and most keys it was never told of are
// answered as absent without the store, until the filter is past the keys
// it is of use for; then the cache is no longer complete and the arena
// takes the filter's memory back.
func TestCompleteCacheAfterEviction(t *testing.T) {
	c := newStateCache(256<<10, true)
	defer c.close()
	arena := c.arenaLimit
	value := make([]byte, 40)
	told := 0
	tell := func(n int) {
		c.mu.Lock()
		defer c.mu.Unlock()
		for range n {
			c.set(fmt.Appendf(nil, "told-%d", told), value, false, -1)
			told++
		}
	}
	tell(20000)
	if !c.complete || c.filter == nil {
		t.Fatalf("complete %v, filter %v after 20,000 keys: want complete with a filter", c.complete, c.filter != nil)
	}
	if got, want := int64(c.arenaLimit), int64(arena)-c.filter.size(); got != want {
		t.Fatalf("arena limit %d with a filter of %d bytes, want %d", got, c.filter.size(), want)
	}
	held := 0
	for i := range told {
		_, ok, cached, _ := c.get(fmt.Appendf(nil, "told-%d", i), nil)
		switch {
		case cached && !ok:
			t.Fatalf("told-%d, evicted, is answered as absent", i)
		case cached:
			held++
		}
	}
	if held == 0 || held == told {
		t.Fatalf("%d of %d keys held: the test does not reach eviction", held, told)
	}
	absent := 0
	for i := range 10000 {
		if _, ok, cached, _ := c.get(fmt.Appendf(nil, "new-%d", i), nil); cached && !ok {
			absent++
		}
	}
	if absent < 9500 {
		t.Fatalf("%d of 10,000 keys never told answered as absent, want at least 95%%", absent)
	}
	// The filter grows, in filters of twice the size, to 7/16 of the
	// budget, the arena giving up what they take.
	tell(60000)
	if !c.complete || len(c.filter.gens) != 3 || c.filter.size() != 256<<10*7/16 || int64(c.arenaLimit) != int64(arena)-c.filter.size() {
		t.Fatalf("after 80,000 keys: complete %v, %d filters of %d bytes, arena limit %d: want 3 filters of 7/16 of the budget, taken from the arena", c.complete, len(c.filter.gens), c.filter.size(), c.arenaLimit)
	}
	for i := range 1000 {
		if _, ok, cached, _ := c.get(fmt.Appendf(nil, "told-%d", i), nil); cached && !ok {
			t.Fatalf("told-%d, evicted into the first filter, is answered as absent", i)
		}
	}
	tell(c.filter.gens[2].max)
	if c.complete || c.filter != nil || c.arenaLimit != arena {
		t.Fatalf("past the filter's use: complete %v, filter %v, arena limit %d (was %d)", c.complete, c.filter != nil, c.arenaLimit, arena)
	}
	if _, _, cached, _ := c.get([]byte("new-0"), nil); cached {
		t.Fatal("a cache no longer complete answers for a key never told")
	}
}

// TestScannedKeys checks what a complete cache knows of the keys of a
// scanned variable (a join's buffer): every key that has had an entry
// written may have rows, most keys that have not have none, whatever the
// deletions; entries of other variables do not count; after a reset (a
// restore, a failed commit) every key may have rows.
func TestScannedKeys(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	c := newStateCache(1<<20, true)
	defer c.close()
	scanned := Var{Scope: Scope{Partition: 3, Operator: 2}, Variable: 1}
	other := Var{Scope: Scope{Partition: 3, Operator: 2}, Variable: 2}
	c.scan(scanned.Operator, scanned.Variable)
	c.skip(other.Operator, other.Variable)
	prefix := func(v Var, i int) []byte { return entryKey(nil, v, fmt.Appendf(nil, "key-%d", i)) }
	b := db.NewBatch()
	for i := range 1000 {
		if err := b.Set(append(prefix(scanned, i), "suffix"...), []byte("row"), nil); err != nil {
			t.Fatal(err)
		}
		if err := b.Set(append(prefix(other, 1000+i), "suffix"...), []byte("row"), nil); err != nil {
			t.Fatal(err)
		}
	}
	// Deletions, of rows and of a range of them, take nothing away.
	if err := b.Delete(append(prefix(scanned, 0), "suffix"...), nil); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteRange(prefix(scanned, 1), prefixEnd(prefix(scanned, 1)), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.applyCommitted(b, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		if !c.mayHaveRows(prefix(scanned, i)) {
			t.Fatalf("key-%d has had a row, but the cache says it has none", i)
		}
	}
	none := 0
	for i := 1000; i < 3000; i++ {
		if !c.mayHaveRows(prefix(scanned, i)) {
			none++
		}
	}
	if none < 1900 {
		t.Fatalf("%d of 2,000 keys never written are known to have no rows, want at least 95%%", none)
	}
	c.reset()
	for i := range 3000 {
		if !c.mayHaveRows(prefix(scanned, i)) {
			t.Fatalf("after a reset, key-%d is said to have no rows", i)
		}
	}
}

// TestZeroMemoryReadsZeros: the cache's index and slots, cleared with
// zeroMemory when they shrink or are reset, read as zeros after it on
// every system (where advising the pages away does not zero them, they
// are cleared), and the rest of the mapping keeps what was written.
func TestZeroMemoryReadsZeros(t *testing.T) {
	const n = 64 << 20
	b := mapMemory(n)
	defer unmapMemory(b)
	for i := 0; i < n; i += 512 {
		b[i] = byte(i>>9) | 1
	}
	zeroMemory(b[n/4 : n/2])
	for i := 0; i < n; i += 512 {
		want := byte(i>>9) | 1
		if i >= n/4 && i < n/2 {
			want = 0
		}
		if b[i] != want {
			t.Fatalf("byte %d: %d, want %d", i, b[i], want)
		}
	}
	releaseMemory(b[n/2:])
	b[n-1] = 7 // still usable
	if b[n-1] != 7 {
		t.Fatal("released memory is not writable")
	}
}
