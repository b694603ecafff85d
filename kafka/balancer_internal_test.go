package kafka

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestAssign checks the App's assignment over random groups: every
// partition has one owner; owners' loads differ by one at most; an owner
// keeps its partitions up to its share (no partition moves that need
// not); a partition without an owner goes to a member with a copy of its
// state when one has room; standbys are other members, distinct, and as
// many as asked (at most the members less one).
func TestAssign(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for iter := range 2000 {
		n := int32(1 + r.IntN(12))
		members := make([]balanceMember, 1+r.IntN(5))
		for i := range members {
			members[i].info.Positions = map[int32]int64{}
		}
		claims := map[int32]claim{}
		for p := range n {
			if r.IntN(3) > 0 {
				claims[p] = claim{member: r.IntN(len(members))}
			}
			if r.IntN(3) == 0 {
				members[r.IntN(len(members))].info.Positions[p] = int64(r.IntN(100))
			}
		}
		standbys := r.IntN(3)
		owners, standbyOwners := assign(members, claims, n, standbys)
		load := make([]int, len(members))
		for p, m := range owners {
			if m < 0 || m >= len(members) {
				t.Fatalf("%d: partition %d has no owner: %v", iter, p, owners)
			}
			load[m]++
		}
		if slices.Max(load)-slices.Min(load) > 1 {
			t.Fatalf("%d: loads %v", iter, load)
		}
		share := (int(n) + len(members) - 1) / len(members)
		floor := int(n) / len(members)
		kept := make([]int, len(members))
		claimed := make([]int, len(members))
		for p, c := range claims {
			claimed[c.member]++
			if owners[p] == c.member {
				kept[c.member]++
			}
		}
		for m := range members {
			if want := min(claimed[m], floor); kept[m] < want {
				t.Fatalf("%d: member %d kept %d of its %d partitions, want at least %d (share %d)", iter, m, kept[m], claimed[m], want, share)
			}
		}
		for p := range n {
			if _, ok := claims[p]; ok {
				continue
			}
			for m := range members {
				if _, warm := members[m].info.Positions[p]; warm && owners[p] != m && load[m] < floor {
					t.Fatalf("%d: partition %d went to %d, not to %d, which has its state and room", iter, p, owners[p], m)
				}
			}
		}
		want := min(standbys, len(members)-1)
		for p := range n {
			var s []int
			if standbyOwners != nil {
				s = standbyOwners[p]
			}
			if len(s) != want || slices.Contains(s, owners[p]) || len(slices.Compact(slices.Sorted(slices.Values(s)))) != len(s) {
				t.Fatalf("%d: partition %d (owner %d): standbys %v, want %d others", iter, p, owners[p], s, want)
			}
		}
	}
}
