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
		owners, standbyOwners, _ := assign(members, claims, n, standbys, nil, warmups{})
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
// partition goes at once to a member whose copy is caught up. A
// partition no live member owns (its owner died) goes to a member whose
// copy is caught up, if one has, while a warm-up is made on the balanced
// member, or for good once warm-ups run out (Kafka Streams'
// high-availability assignor), not to a member without a copy.
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
		owners, standbyOwners, warmupOwners := assign(members, claims, n, standbys, nil, warm)
		load := make([]int, len(members))
		warming, kept := 0, 0
		caughtUp := func(m, p int) bool {
			return hasLag(members[m], int32(p)) && members[m].info.Lags[int32(p)] <= acceptable
		}
		for p, m := range owners {
			if m < 0 || m >= len(members) {
				t.Fatalf("%d: partition %d has no owner: %v", iter, p, owners)
			}
			c, claimed := claims[int32(p)]
			if !claimed && !caughtUp(m, p) {
				for other := range members {
					if caughtUp(other, p) {
						t.Fatalf("%d: partition %d, owned by no live member, went to %d, whose copy is not caught up, where %d's is", iter, p, m, other)
					}
				}
			}
			w := warmupOwners[p]
			if w < 0 {
				load[m]++
				if !claimed && caughtUp(m, p) {
					kept++ // a caught-up copy took it: balanced or not
				}
				continue
			}
			warming++
			load[w]++ // where it goes once warm
			switch {
			case !claimed && !caughtUp(m, p):
				t.Fatalf("%d: partition %d, owned by no live member, waits for a warm-up on %d with %d, whose copy is not caught up", iter, p, w, m)
			case claimed && c.member != m:
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
		if slices.Max(load)-slices.Min(load) > 1 && (kept == 0 || warming < max(0, warm.max)) {
			t.Fatalf("%d: loads once warm %v", iter, load)
		}
	}
}

func hasLag(m balanceMember, p int32) bool {
	_, ok := m.info.Lags[p]
	return ok
}

// TestAssignSpreadsStandbysOverTags: with StandbyTags, each standby of a
// partition goes, whenever a member left can take it so, to a member
// whose zone is neither the owner's nor an earlier standby's, or that
// has no zone (as Kafka Streams' client-tag-aware assignor filters;
// once the copies are in every zone the members have, any member), over
// random groups; six members in three zones with two standbys put every
// partition's three copies in three zones.
func TestAssignSpreadsStandbysOverTags(t *testing.T) {
	zone := func(m balanceMember) (string, bool) {
		z, ok := m.info.Tags["zone"]
		return z, ok
	}
	r := rand.New(rand.NewPCG(5, 6))
	for iter := range 2000 {
		n := int32(1 + r.IntN(12))
		members := make([]balanceMember, 2+r.IntN(6))
		for i := range members {
			members[i].info.Positions = map[int32]int64{}
			if r.IntN(6) > 0 {
				members[i].info.Tags = map[string]string{"zone": string(rune('a' + r.IntN(3)))}
			}
		}
		claims := map[int32]claim{}
		for p := range n {
			if r.IntN(3) > 0 {
				claims[p] = claim{member: r.IntN(len(members))}
			}
			if r.IntN(2) == 0 {
				members[r.IntN(len(members))].info.Positions[p] = int64(r.IntN(100))
			}
		}
		standbys := 1 + r.IntN(3)
		owners, standbyOwners, _ := assign(members, claims, n, standbys, []string{"zone"}, warmups{})
		zones := map[string]bool{}
		for _, m := range members {
			if z, ok := zone(m); ok {
				zones[z] = true
			}
		}
		for p := range n {
			if len(standbyOwners[p]) != min(standbys, len(members)-1) {
				t.Fatalf("%d: partition %d has standbys %v, want %d", iter, p, standbyOwners[p], min(standbys, len(members)-1))
			}
			chosen := []int{owners[p]}
			for j, s := range standbyOwners[p] {
				used := map[string]bool{}
				for _, c := range chosen {
					if z, ok := zone(members[c]); ok {
						used[z] = true
					}
				}
				spreads := func(m int) bool {
					z, ok := zone(members[m])
					return !ok || !used[z] || len(used) == len(zones)
				}
				if !spreads(s) {
					for m := range members {
						if spreads(m) && !slices.Contains(chosen, m) {
							t.Fatalf("%d: partition %d's standby %d is member %d (zone %q), while member %d (zone %q) was left: owner %d, standbys %v, members %v",
								iter, p, j, s, members[s].info.Tags["zone"], m, members[m].info.Tags["zone"], owners[p], standbyOwners[p], members)
						}
					}
				}
				chosen = append(chosen, s)
			}
		}
	}

	members := make([]balanceMember, 6)
	for i := range members {
		members[i].info.Tags = map[string]string{"zone": string(rune('a' + i/2))}
	}
	owners, standbyOwners, _ := assign(members, nil, 6, 2, []string{"zone"}, warmups{})
	for p := range 6 {
		zones := map[string]bool{}
		for _, m := range append([]int{owners[p]}, standbyOwners[p]...) {
			zones[members[m].info.Tags["zone"]] = true
		}
		if len(zones) != 3 {
			t.Errorf("partition %d: owner %d and standbys %v are in zones %v, want three", p, owners[p], standbyOwners[p], zones)
		}
	}
	// A member without a zone is not held back by the tags (as in Kafka
	// Streams): with the freshest copy, it is the standby of a partition
	// owned in zone a, rather than the member in zone b.
	mixed := []balanceMember{
		{info: memberInfo{Tags: map[string]string{"zone": "a"}}},
		{info: memberInfo{Tags: map[string]string{"zone": "a"}, Positions: map[int32]int64{0: 5}}},
		{info: memberInfo{Positions: map[int32]int64{0: 9}}},
		{info: memberInfo{Tags: map[string]string{"zone": "b"}}},
	}
	owners, standbyOwners, _ = assign(mixed, map[int32]claim{0: {member: 0}}, 1, 1, []string{"zone"}, warmups{})
	if owners[0] != 0 || !slices.Equal(standbyOwners[0], []int{2}) {
		t.Errorf("owner %d and standbys %v, want member 0 and [2] (no zone, the freshest copy)", owners[0], standbyOwners[0])
	}
	// Without StandbyTags the zones do not count: with the same members
	// some partition keeps two copies in one zone.
	owners, standbyOwners, _ = assign(members, nil, 6, 2, nil, warmups{})
	twice := false
	for p := range 6 {
		zones := map[string]bool{}
		for _, m := range append([]int{owners[p]}, standbyOwners[p]...) {
			zones[members[m].info.Tags["zone"]] = true
		}
		twice = twice || len(zones) < 3
	}
	if !twice {
		t.Error("without StandbyTags every partition's copies were in three zones too: the test does not show the tags at work")
	}
}

// TestOtherStandbyTags: the leader names the members whose StandbyTags
// are not its own, in any order of keys; a member of a version that
// sends none differs from a leader with some.
func TestOtherStandbyTags(t *testing.T) {
	members := []balanceMember{
		{id: "same", info: memberInfo{StandbyTags: []string{"zone", "rack"}}},
		{id: "reordered", info: memberInfo{StandbyTags: []string{"rack", "zone"}}},
		{id: "fewer", info: memberInfo{StandbyTags: []string{"zone"}}},
		{id: "none"},
	}
	if got, want := otherStandbyTags(members, []string{"zone", "rack"}), []string{"fewer: [zone]", "none: []"}; !slices.Equal(got, want) {
		t.Errorf("other StandbyTags %q, want %q", got, want)
	}
	if got, want := otherStandbyTags(members, nil), []string{"same: [zone rack]", "reordered: [rack zone]", "fewer: [zone]"}; !slices.Equal(got, want) {
		t.Errorf("with none of its own: other StandbyTags %q, want %q", got, want)
	}
}

// TestAssignStandbysByLoad: scaled out from one instance, which holds a
// copy of every partition, to three, with a standby each, the standbys
// go to each instance up to an even share, as Kafka Streams places them
// by load, not all of the first instance's copies to it.
func TestAssignStandbysByLoad(t *testing.T) {
	const n = 6
	members := make([]balanceMember, 3)
	members[0].info.Positions = map[int32]int64{}
	claims := map[int32]claim{}
	for p := range int32(n) {
		members[0].info.Positions[p] = 100
		claims[p] = claim{member: 0}
	}
	owners, standbyOwners, _ := assign(members, claims, n, 1, nil, warmups{})
	load := make([]int, len(members))
	for p := range n {
		if len(standbyOwners[p]) != 1 || standbyOwners[p][0] == owners[p] {
			t.Fatalf("partition %d: owner %d, standbys %v", p, owners[p], standbyOwners[p])
		}
		load[standbyOwners[p][0]]++
	}
	if slices.Max(load) > 2 {
		t.Fatalf("standbys by member %v, want 2 each (owners %v)", load, owners)
	}
}
