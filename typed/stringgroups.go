package typed

import (
	"encoding/binary"
	"hash/maphash"
	"math/bits"
	"unsafe"
)

// stringGroups maps string keys to groups, as a map[string]int32 does,
// for the few keys of one window in one batch (windowFront): an
// open-addressed table whose hash of a key of up to 16 bytes is one
// multiplication of two words read from it, seeded per table so that
// keys chosen to collide in one process do not in another (a longer key
// is hashed by maphash). Not safe for concurrent use.
type stringGroups struct {
	seed  [2]uint64
	long  maphash.Seed
	slots []stringSlot // a power of two of them, at most half in use
	n     int
}

// stringSlot is a key and its group, or an empty slot (group -1).
type stringSlot struct {
	key   string
	hash  uint64
	group int32
}

func newStringGroups() *stringGroups {
	g := &stringGroups{long: maphash.MakeSeed()}
	g.seed[0] = maphash.Comparable(g.long, uint64(0x9e3779b97f4a7c15))
	g.seed[1] = maphash.Comparable(g.long, uint64(0xbf58476d1ce4e5b9))
	g.slots = make([]stringSlot, 16)
	g.clear()
	return g
}

// hash hashes k: its first and last 8 bytes (or 4, or three of its
// bytes) multiplied, as wyhash hashes short keys.
func (g *stringGroups) hash(k string) uint64 {
	n := len(k)
	if n > 16 {
		return maphash.String(g.long, k)
	}
	p := unsafe.Slice(unsafe.StringData(k), n) // read only
	var a, b uint64
	switch {
	case n >= 8:
		a, b = binary.LittleEndian.Uint64(p), binary.LittleEndian.Uint64(p[n-8:])
	case n >= 4:
		a, b = uint64(binary.LittleEndian.Uint32(p)), uint64(binary.LittleEndian.Uint32(p[n-4:]))
	case n > 0:
		a = uint64(p[0])<<16 | uint64(p[n/2])<<8 | uint64(p[n-1])
	}
	hi, lo := bits.Mul64(a^g.seed[0], b^g.seed[1]^uint64(n))
	return hi ^ lo
}

// find returns k's group.
func (g *stringGroups) find(k string) (int32, bool) {
	h := g.hash(k)
	mask := uint64(len(g.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &g.slots[i]
		if s.group < 0 {
			return 0, false
		}
		if s.hash == h && s.key == k {
			return s.group, true
		}
	}
}

// set makes group k's group.
func (g *stringGroups) set(k string, group int32) {
	if 2*(g.n+1) > len(g.slots) {
		g.grow()
	}
	h := g.hash(k)
	mask := uint64(len(g.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &g.slots[i]
		if s.group < 0 {
			*s = stringSlot{key: k, hash: h, group: group}
			g.n++
			return
		}
		if s.hash == h && s.key == k {
			s.group = group
			return
		}
	}
}

func (g *stringGroups) grow() {
	old := g.slots
	g.slots = make([]stringSlot, 2*len(old))
	n := g.n
	g.clear()
	mask := uint64(len(g.slots) - 1)
	for _, s := range old {
		if s.group < 0 {
			continue
		}
		i := s.hash & mask
		for g.slots[i].group >= 0 {
			i = (i + 1) & mask
		}
		g.slots[i] = s
	}
	g.n = n
}

// clear empties the table, keeping its slots.
func (g *stringGroups) clear() {
	for i := range g.slots {
		g.slots[i] = stringSlot{group: -1}
	}
	g.n = 0
}
