package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStateCache checks the cache against a plain model of what it has
// been told: a cached key always has its last value; what is cached is the
// most recently used keys (if a key is cached, so is every key used after
// it); the cache stays within its arena; and a complete cache answers
// "absent" for keys it was never told of, until its first eviction.
// Updates come with the slot a read of the key gave, a slot another key
// took since, or none, as a batch's commit passes them; values shrink
// and grow, and some keys are deleted.
func TestStateCache(t *testing.T) {
	for _, complete := range []bool{false, true} {
		c := newStateCache(16<<10, complete)
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
		for i := range 20000 {
			k := fmt.Sprintf("key-%d", r.IntN(300))
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
			evicted = evicted || !c.complete
			if c.used > len(c.arena) || c.live > int64(c.used) {
				t.Fatalf("step %d: used %d, live %d, arena %d", i, c.used, c.live, len(c.arena))
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
		if !evicted {
			t.Fatal("the cache never evicted: the test does not reach eviction")
		}
	}
}

func hashOf(c *stateCache, k string) uint64 {
	return hashKey(c, []byte(k))
}
