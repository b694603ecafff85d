package typed

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// TestStringGroupsMatchMap: a stringGroups answers as a map[string]int32
// through sets, finds and clears, with keys of every length up to and
// past 16 bytes (the empty key, keys differing only in a middle byte,
// and the same bytes at another length), as the table grows.
func TestStringGroupsMatchMap(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		r := rand.New(rand.NewPCG(seed, seed))
		var keys []string
		for n := range 40 {
			keys = append(keys, strings.Repeat("a", n))
			if n > 2 {
				keys = append(keys, strings.Repeat("a", n/2)+"b"+strings.Repeat("a", n-n/2-1))
			}
		}
		for i := range 3000 {
			keys = append(keys, fmt.Sprintf("user-%d", i), fmt.Sprintf("%016x", r.Uint64())[:1+r.IntN(16)])
		}
		g := newStringGroups()
		want := map[string]int32{}
		for step := range 50_000 {
			k := keys[r.IntN(len(keys))]
			switch op := r.IntN(100); {
			case op < 45:
				v := int32(r.IntN(1 << 20))
				g.set(k, v)
				want[k] = v
			case op < 99:
				got, ok := g.find(k)
				w, wok := want[k]
				if ok != wok || got != w {
					t.Fatalf("seed %d, step %d: find(%q) = %d, %v; want %d, %v", seed, step, k, got, ok, w, wok)
				}
			case step%7 == 0:
				g.clear()
				clear(want)
			}
		}
		for k, w := range want {
			if got, ok := g.find(k); !ok || got != w {
				t.Fatalf("seed %d: at the end, find(%q) = %d, %v; want %d", seed, k, got, ok, w)
			}
		}
	}
}
