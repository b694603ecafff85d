package runtime

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestStateCacheIsLRU checks the cache against a plain model of an LRU
// list: after every operation the cached keys are the most recently used
// ones that fit the budget, with their last values.
func TestStateCacheIsLRU(t *testing.T) {
	const entryCost = 3 + 3 + cacheEntryOverhead // "kNN" keys, 3-byte values
	c := newStateCache(10 * entryCost)
	r := rand.New(rand.NewPCG(5, 5))
	var order []string // most recent first
	values := map[string]string{}
	use := func(k string) {
		order = slices.DeleteFunc(order, func(o string) bool { return o == k })
		order = append([]string{k}, order...)
		if len(order) > 10 {
			for _, gone := range order[10:] {
				delete(values, gone)
			}
			order = order[:10]
		}
	}
	for i := range 2000 {
		k := fmt.Sprintf("k%02d", r.IntN(20))
		if r.IntN(2) == 0 {
			v := fmt.Sprintf("%03d", i%1000)
			c.put([]byte(k), []byte(v), false)
			values[k] = v
			use(k)
			continue
		}
		got, ok, cached := c.get([]byte(k), nil)
		want, known := values[k]
		if cached != known || cached && (!ok || string(got) != want) {
			t.Fatalf("step %d: get %s = %q %v %v, want %q %v", i, k, got, ok, cached, want, known)
		}
		if known {
			use(k)
		}
	}
	if c.size > c.budget {
		t.Fatalf("size %d over budget %d", c.size, c.budget)
	}
}
