package kafka

import (
	"cmp"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An App's group balancer: cooperative (a partition that stays with its
// instance is never stopped by a rebalance, as with Kafka's
// cooperative-sticky assignor), and aware of where state is, as Kafka
// Streams' assignor: each member tells, in its join metadata, the address
// it answers state reads on and how far its local copy of each partition's
// state has read the changelog; the leader gives a partition to its owner
// when it can, else to the member with the freshest copy (the standby),
// and chooses each partition's standbys; each member's assignment carries
// its standbys and the owner of every partition with its address, which
// routes state reads.

// balancerProtocol is the App's group protocol name.
const balancerProtocol = "streamgen-app"

// memberInfo is what a member tells the leader (ConsumerMemberMetadata's
// UserData).
type memberInfo struct {
	// Addr is the address the member answers state reads on ("" for
	// none).
	Addr string `json:"addr,omitempty"`
	// Positions are, per partition, the changelog offset the member's
	// local copy of the partition's state has read to.
	Positions map[int32]int64 `json:"positions,omitempty"`
	// Lags are, per partition, how many changelog records the member's
	// copy is behind the changelog's end, where it knows: 0 for the
	// partitions it owns, the last lag of its standbys.
	Lags map[int32]int64 `json:"lags,omitempty"`
	// Tags say where the member runs (AppOptions.Tags), and StandbyTags
	// are the keys it would spread standbys over: the leader's decide,
	// and it warns of members whose differ.
	Tags        map[string]string `json:"tags,omitempty"`
	StandbyTags []string          `json:"standbyTags,omitempty"`
}

// assignmentInfo is what the leader tells a member with its partitions
// (ConsumerMemberAssignment's UserData).
type assignmentInfo struct {
	// Standbys are the partitions the member keeps standbys of, its
	// warm-ups among them; Warmups are its warm-ups: partitions that
	// stay with their owner until the member's copy is caught up.
	Standbys []int32 `json:"standbys,omitempty"`
	Warmups  []int32 `json:"warmups,omitempty"`
	// AcceptableLag is the leader's AcceptableRecoveryLag, which its
	// warm-ups are measured against before they ask for a rebalance.
	AcceptableLag int64 `json:"acceptableLag,omitempty"`
	// Owners are the member (by index in Members) each partition is
	// given to; -1 for a partition given to none this round (moving, in
	// a cooperative rebalance). StandbyOwners are each partition's
	// standbys.
	Owners        []int          `json:"owners"`
	StandbyOwners [][]int        `json:"standbyOwners,omitempty"`
	Members       []assignMember `json:"members"`
}

// assignMember is a member of the group as assignments name it.
type assignMember struct {
	ID   string `json:"id"`
	Addr string `json:"addr,omitempty"`
}

// appBalancer is the App's kgo.GroupBalancer.
type appBalancer struct {
	standbys int
	// standbyTags are the tag keys standbys are spread over
	// (AppOptions.StandbyTags).
	standbyTags []string
	warm        warmups
	// info returns this member's metadata at each join.
	info func() memberInfo
	// assigned receives each assignment's info, from the group's
	// goroutine.
	assigned func(assignmentInfo)
}

func (b *appBalancer) ProtocolName() string { return balancerProtocol }
func (b *appBalancer) IsCooperative() bool  { return true }

func (b *appBalancer) JoinGroupMetadata(interests []string, current map[string][]int32, generation int32) []byte {
	meta := kmsg.NewConsumerMemberMetadata()
	meta.Version = 3
	meta.Topics = interests
	meta.Generation = generation
	for _, topic := range slices.Sorted(mapKeys(current)) {
		owned := kmsg.NewConsumerMemberMetadataOwnedPartition()
		owned.Topic, owned.Partitions = topic, current[topic]
		meta.OwnedPartitions = append(meta.OwnedPartitions, owned)
	}
	info := b.info()
	meta.UserData, _ = json.Marshal(info) // a map of numbers and a string: it encodes
	return meta.AppendTo(nil)
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func (b *appBalancer) ParseSyncAssignment(assignment []byte) (map[string][]int32, error) {
	var a kmsg.ConsumerMemberAssignment
	if err := a.ReadFrom(assignment); err != nil {
		return nil, fmt.Errorf("streamgen: kafka app: the group's assignment does not decode: %w", err)
	}
	out := make(map[string][]int32, len(a.Topics))
	for _, t := range a.Topics {
		out[t.Topic] = t.Partitions
	}
	if len(a.UserData) > 0 && b.assigned != nil {
		var info assignmentInfo
		if err := json.Unmarshal(a.UserData, &info); err != nil {
			// The partitions still run; standbys and routing wait for
			// an assignment they can read.
			slog.Warn("streamgen: kafka app: the group's assignment data does not decode (a leader of another version?)", "error", err)
		} else {
			b.assigned(info)
		}
	}
	return out, nil
}

func (b *appBalancer) MemberBalancer(members []kmsg.JoinGroupResponseMember) (kgo.GroupMemberBalancer, map[string]struct{}, error) {
	cb, err := kgo.NewConsumerBalancer(b, members)
	if err != nil {
		return nil, nil, err
	}
	return cb, cb.MemberTopics(), nil
}

// Balance assigns the partitions of the topic (the App balances one) and
// their standbys.
func (b *appBalancer) Balance(cb *kgo.ConsumerBalancer, topics map[string]int32) kgo.IntoSyncAssignment {
	var topic string
	for t := range topics {
		topic = t
	}
	var members []balanceMember
	claims := map[int32]claim{}
	cb.EachMember(func(m *kmsg.JoinGroupResponseMember, meta *kmsg.ConsumerMemberMetadata) {
		bm := balanceMember{id: m.MemberID}
		if len(meta.UserData) > 0 {
			if err := json.Unmarshal(meta.UserData, &bm.info); err != nil {
				// Balanced as a member with no copies and no address,
				// rather than failing the whole group.
				slog.Warn("streamgen: kafka app: a member's metadata does not decode (a member of another version?)", "member", m.MemberID, "error", err)
				bm.info = memberInfo{}
			}
		}
		i := len(members)
		members = append(members, bm)
		for _, owned := range meta.OwnedPartitions {
			if owned.Topic != topic {
				continue
			}
			for _, p := range owned.Partitions {
				if c, ok := claims[p]; !ok || meta.Generation > c.generation {
					claims[p] = claim{member: i, generation: meta.Generation}
				}
			}
		}
	})
	if others := otherStandbyTags(members, b.standbyTags); len(others) > 0 {
		slog.Warn("streamgen: kafka app: members of the group have other StandbyTags than this instance, the group's leader, whose spread the standbys: give every instance the same",
			"standbyTags", b.standbyTags, "members", others)
	}
	owners, standbys, warmupOwners := assign(members, claims, topics[topic], b.standbys, b.standbyTags, b.warm)
	plan := cb.NewPlan()
	for p, m := range owners {
		plan.AddPartition(&cb.Members()[m], topic, int32(p))
	}
	// A partition that moves is first taken from its owner: it is
	// given to its new owner at the rebalance that owner's revoke makes.
	plan.AdjustCooperative(cb)
	assigned := plan.AsMemberIDMap()
	index := map[string]int{}
	for i, m := range members {
		index[m.id] = i
	}
	info := assignmentInfo{Owners: make([]int, len(owners)), StandbyOwners: standbys, AcceptableLag: b.warm.lag}
	for i := range info.Owners {
		info.Owners[i] = -1
	}
	for id, byTopic := range assigned {
		for _, p := range byTopic[topic] {
			info.Owners[p] = index[id]
		}
	}
	for _, m := range members {
		info.Members = append(info.Members, assignMember{ID: m.id, Addr: m.info.Addr})
	}
	return &appPlan{topic: topic, assigned: assigned, info: info, index: index, warmups: warmupOwners}
}

// otherStandbyTags returns the members whose StandbyTags are not tags,
// in any order: "id: [keys]" each.
func otherStandbyTags(members []balanceMember, tags []string) []string {
	want := slices.Sorted(slices.Values(tags))
	var out []string
	for _, m := range members {
		if got := slices.Sorted(slices.Values(m.info.StandbyTags)); !slices.Equal(got, want) {
			out = append(out, fmt.Sprintf("%s: %v", m.id, m.info.StandbyTags))
		}
	}
	return out
}

// balanceMember is a member as the leader balances it.
type balanceMember struct {
	id   string
	info memberInfo
}

// warmups says when a partition waits for a warm-up copy before it
// moves: when the member the balance gives it to is more than lag
// records behind, its live owner keeps it and that member warms a copy
// up, at most max partitions at once (none when max <= 0).
type warmups struct {
	lag int64
	max int
}

// claim is a member's claim to own a partition, at a generation.
type claim struct {
	member     int
	generation int32
}

// assign gives each of n partitions an owner among members and up to
// standbys standbys (never its owner). Each member owns n/len(members)
// partitions, or one more (as many members as the division leaves over).
// An owner keeps its partitions up to that share; the others go, those
// with a warm copy somewhere first, each to the member with the freshest
// copy of its state (the highest changelog position) among those with
// room, then the least loaded; standbys the same way among the rest, the
// least loaded in standbys first among equals, but first of all those
// that spread the partition's copies over tags, as Kafka Streams'
// client-tag-aware standby assignor filters its clients: for each tag
// key, a member's value is none of the partition's owner's and standbys'
// so far, unless those have used every value the members have (a member
// without the key is not held back by it). Where no member left
// spreads, the standby goes where the rest of the rule says, and the
// balance logs a warning, as Kafka Streams does. (Kafka Streams then
// takes the least loaded, and moves standbys to caught-up copies later;
// here the freshest copy comes first. A warm-up copy counts as a standby
// on top of those asked for, and does not take part in the spreading.) A partition whose owner is
// a member and whose new owner's copy is not caught up stays with its
// owner, past its share, and the new owner keeps a warm-up copy of it (a
// standby, and in warmupOwners), as Kafka Streams' high-availability
// assignor does: the partition moves at a later balance, once that copy
// is caught up.
func assign(members []balanceMember, claims map[int32]claim, n int32, standbys int, tags []string, warm warmups) (owners []int, standbyOwners [][]int, warmupOwners []int) {
	owners = make([]int, n)
	warmupOwners = make([]int, n)
	for i := range owners {
		owners[i], warmupOwners[i] = -1, -1
	}
	if len(members) == 0 {
		return owners, nil, warmupOwners
	}
	caughtUp := func(m int, p int32) bool {
		lag, ok := members[m].info.Lags[p]
		return ok && lag <= warm.lag
	}
	warming := 0
	floor, extra := int(n)/len(members), int(n)%len(members)
	load := make([]int, len(members))
	position := func(m int, p int32) int64 {
		if at, ok := members[m].info.Positions[p]; ok {
			return at
		}
		return -1
	}
	// Owners keep their partitions: up to the floor, then one more each
	// while the division leaves some over.
	for pass := range 2 {
		for p := range n {
			c, ok := claims[p]
			if !ok || owners[p] >= 0 || c.member >= len(members) {
				continue
			}
			switch {
			case load[c.member] < floor:
			case pass == 1 && load[c.member] == floor && extra > 0:
				extra--
			default:
				continue
			}
			owners[p] = c.member
			load[c.member]++
		}
	}
	// The rest, those with the freshest copies first.
	var rest []int32
	best := func(p int32) int64 {
		b := int64(-1)
		for m := range members {
			b = max(b, position(m, p))
		}
		return b
	}
	for p := range n {
		if owners[p] < 0 {
			rest = append(rest, p)
		}
	}
	slices.SortStableFunc(rest, func(a, b int32) int { return cmp.Compare(best(b), best(a)) })
	for _, p := range rest {
		pick := -1
		for m := range members {
			if load[m] > floor || load[m] == floor && extra == 0 {
				continue // no room
			}
			if pick < 0 || cmp.Or(cmp.Compare(position(m, p), position(pick, p)), cmp.Compare(load[pick], load[m])) > 0 {
				pick = m
			}
		}
		// A partition no live member owns goes to a member whose copy
		// is caught up, above its share if need be, rather than to a
		// cold one, as Kafka Streams' high-availability assignor gives a
		// task to a caught-up client: the balanced pick warms up a copy
		// to take it later, or, with no warm-up left, the caught-up
		// member keeps it.
		c, claimed := claims[p]
		claimed = claimed && c.member < len(members) // a live owner
		ready := -1
		if !claimed && !caughtUp(pick, p) {
			for m := range members {
				if caughtUp(m, p) && (ready < 0 || cmp.Or(cmp.Compare(load[ready], load[m]), cmp.Compare(position(m, p), position(ready, p))) > 0) {
					ready = m
				}
			}
		}
		switch {
		case ready >= 0 && warming >= warm.max:
			owners[p] = ready
			load[ready]++
			continue
		case ready >= 0:
			owners[p], warmupOwners[p] = ready, pick
			warming++
		case claimed && c.member != pick && warming < warm.max && !caughtUp(pick, p):
			owners[p], warmupOwners[p] = c.member, pick
			warming++
		default:
			owners[p] = pick
		}
		if load[pick] == floor {
			extra--
		}
		load[pick]++ // its place there is kept while it warms up
	}
	if warming > 0 {
		standbyOwners = make([][]int, n)
		defer func() {
			for p, m := range warmupOwners {
				if m >= 0 && !slices.Contains(standbyOwners[p], m) {
					standbyOwners[p] = append(standbyOwners[p], m)
				}
			}
		}()
	}
	if standbys <= 0 || len(members) < 2 {
		return owners, standbyOwners, warmupOwners
	}
	standbys = min(standbys, len(members)-1)
	standbyLoad := make([]int, len(members))
	if standbyOwners == nil {
		standbyOwners = make([][]int, n)
	}
	// Each tag key's values among the members: a key whose every value
	// a partition's copies have used constrains its next standby no more.
	values := make(map[string]map[string]bool, len(tags))
	for _, key := range tags {
		values[key] = map[string]bool{}
		for _, m := range members {
			if v, ok := m.info.Tags[key]; ok {
				values[key][v] = true
			}
		}
	}
	// spreads says whether member m may be p's next standby: for each
	// key that still constrains, m's value is none of p's owner's and
	// standbys'; a member without the key is not held back by it.
	spreads := func(m int, p int32) bool {
		for _, key := range tags {
			v, ok := members[m].info.Tags[key]
			if !ok {
				continue
			}
			used := map[string]bool{}
			for _, c := range append([]int{owners[p]}, standbyOwners[p]...) {
				if u, ok := members[c].info.Tags[key]; ok {
					used[u] = true
				}
			}
			if len(used) < len(values[key]) && used[v] {
				return false
			}
		}
		return true
	}
	// After the spread over tags, a member under an even share of the
	// standbys comes first (Kafka Streams places them by load), then the
	// freshest copy, then the least load.
	share := (int(n)*standbys + len(members) - 1) / len(members)
	unspread := 0
	for p := range n {
		for range standbys {
			pick, pickSpreads := -1, false
			for m := range members {
				if m == owners[p] || slices.Contains(standbyOwners[p], m) {
					continue
				}
				s := len(tags) == 0 || spreads(m, p)
				if pick < 0 || cmp.Or(cmp.Compare(b2i(s), b2i(pickSpreads)), cmp.Compare(b2i(standbyLoad[m] < share), b2i(standbyLoad[pick] < share)),
					cmp.Compare(position(m, p), position(pick, p)), cmp.Compare(standbyLoad[pick], standbyLoad[m])) > 0 {
					pick, pickSpreads = m, s
				}
			}
			if !pickSpreads {
				unspread++
			}
			standbyOwners[p] = append(standbyOwners[p], pick)
			standbyLoad[pick]++
		}
	}
	if unspread > 0 {
		slog.Warn("streamgen: kafka app: some standbys could not be spread over StandbyTags: too few instances with other values; they go where the tags allow none",
			"standbys", unspread, "tags", tags)
	}
	return owners, standbyOwners, warmupOwners
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// appPlan is a balance's result: each member's partitions, with the
// assignment's info.
type appPlan struct {
	topic    string
	assigned map[string]map[string][]int32
	info     assignmentInfo
	index    map[string]int
	// warmups are each partition's warm-up member, -1 for none.
	warmups []int
}

func (p *appPlan) IntoSyncAssignment() []kmsg.SyncGroupRequestGroupAssignment {
	var out []kmsg.SyncGroupRequestGroupAssignment
	for id, byTopic := range p.assigned {
		var a kmsg.ConsumerMemberAssignment
		parts := slices.Clone(byTopic[p.topic])
		slices.Sort(parts)
		t := kmsg.NewConsumerMemberAssignmentTopic()
		t.Topic, t.Partitions = p.topic, parts
		a.Topics = append(a.Topics, t)
		info := p.info
		me := p.index[id]
		info.Standbys, info.Warmups = nil, nil
		for part, s := range p.info.StandbyOwners {
			if slices.Contains(s, me) {
				info.Standbys = append(info.Standbys, int32(part))
			}
		}
		for part, m := range p.warmups {
			if m == me {
				info.Warmups = append(info.Warmups, int32(part))
			}
		}
		a.UserData, _ = json.Marshal(info)
		sa := kmsg.NewSyncGroupRequestGroupAssignment()
		sa.MemberID = id
		sa.MemberAssignment = a.AppendTo(nil)
		out = append(out, sa)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MemberID < out[j].MemberID })
	return out
}

// owner returns the address of partition p's owner, and whether it has
// one; self is the member id of this instance.
func (a *assignmentInfo) owner(p int32) (m assignMember, ok bool) {
	if a == nil || p < 0 || int(p) >= len(a.Owners) || a.Owners[p] < 0 || a.Owners[p] >= len(a.Members) {
		return assignMember{}, false
	}
	return a.Members[a.Owners[p]], true
}

// standbysOf returns partition p's standbys.
func (a *assignmentInfo) standbysOf(p int32) []assignMember {
	if a == nil || p < 0 || int(p) >= len(a.StandbyOwners) {
		return nil
	}
	var out []assignMember
	for _, m := range a.StandbyOwners[p] {
		if m >= 0 && m < len(a.Members) {
			out = append(out, a.Members[m])
		}
	}
	return out
}

// describe renders a partition list for a log line.
func describePartitions(parts []int32) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = strconv.Itoa(int(p))
	}
	return fmt.Sprint(s)
}
