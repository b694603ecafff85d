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
func TestStateCache(t *testing.T) {
	for _, complete := range []bool{false, true} {
		c := newStateCache(16<<10, complete)
		defer c.close()
		r := rand.New(rand.NewPCG(5, 5))
		values := map[string]string{}
		var order []string // most recent first
		use := func(k string) {
			order = slices.DeleteFunc(order, func(o string) bool { return o == k })
			order = append([]string{k}, order...)
		}
		evicted := false
		for i := range 20000 {
			k := fmt.Sprintf("key-%d", r.IntN(300))
			if r.IntN(3) == 0 {
				v := fmt.Sprintf("value-%d-%s", i, string(make([]byte, r.IntN(40))))
				c.put([]byte(k), []byte(v), false)
				values[k] = v
				use(k)
			} else {
				got, ok, cached := c.get([]byte(k), nil)
				want, told := values[k]
				switch {
				case cached && told && (!ok || string(got) != want):
					t.Fatalf("step %d: %s = %q %v, want %q", i, k, got, ok, want)
				case cached && !told && ok:
					t.Fatalf("step %d: %s cached as %q, never told", i, k, got)
				case complete && !evicted && !cached:
					t.Fatalf("step %d: a complete cache does not know %s", i, k)
				}
				if cached && told {
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
