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
		owners, standbyOwners, _ := assign(members, claims, n, standbys, warmups{})
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

// TestAssignWarmups: with warm-ups, a partition the balance moves from a
// live owner to a member whose copy is not caught up stays with its owner
// and that member keeps a warm-up copy (a standby), at most max at once;
// given to their warm-up members the partitions would be balanced; a
// partition goes at once to a member whose copy is caught up.
func TestAssignWarmups(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const acceptable = 10
	for iter := range 2000 {
		n := int32(1 + r.IntN(12))
		members := make([]balanceMember, 1+r.IntN(5))
		for i := range members {
			members[i].info.Positions = map[int32]int64{}
			members[i].info.Lags = map[int32]int64{}
		}
		claims := map[int32]claim{}
		for p := range n {
			if r.IntN(4) > 0 {
				claims[p] = claim{member: r.IntN(len(members))}
			}
			if r.IntN(3) == 0 {
				m := r.IntN(len(members))
				members[m].info.Positions[p] = int64(r.IntN(100))
				members[m].info.Lags[p] = int64(r.IntN(2 * acceptable))
			}
		}
		warm := warmups{lag: acceptable, max: r.IntN(4)}
		standbys := r.IntN(2)
		owners, standbyOwners, warmupOwners := assign(members, claims, n, standbys, warm)
		load := make([]int, len(members))
		warming := 0
		for p, m := range owners {
			if m < 0 || m >= len(members) {
				t.Fatalf("%d: partition %d has no owner: %v", iter, p, owners)
			}
			w := warmupOwners[p]
			if w < 0 {
				load[m]++
				continue
			}
			warming++
			load[w]++ // where it goes once warm
			c, claimed := claims[int32(p)]
			switch {
			case !claimed || c.member != m:
				t.Fatalf("%d: partition %d waits for a warm-up on %d with %d, not its owner (claims %v)", iter, p, w, m, claims)
			case w == m:
				t.Fatalf("%d: partition %d: its owner %d is its warm-up", iter, p, m)
			case members[w].info.Lags[int32(p)] <= acceptable && hasLag(members[w], int32(p)):
				t.Fatalf("%d: partition %d waits for %d, whose copy is caught up (lag %d)", iter, p, w, members[w].info.Lags[int32(p)])
			case standbyOwners == nil || !slices.Contains(standbyOwners[p], w):
				t.Fatalf("%d: partition %d: its warm-up %d keeps no standby (%v)", iter, p, w, standbyOwners)
			}
		}
		if warming > max(0, warm.max) {
			t.Fatalf("%d: %d warm-ups, at most %d", iter, warming, warm.max)
		}
		if slices.Max(load)-slices.Min(load) > 1 {
			t.Fatalf("%d: loads once warm %v", iter, load)
		}
	}
}

func hasLag(m balanceMember, p int32) bool {
	_, ok := m.info.Lags[p]
	return ok
}
