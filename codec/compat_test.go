package codec_test

import (
	"errors"
	"testing"

	"github.com/streamgen/streamgen/codec"
)

// TestCompatibleElementPointers: the elements of a list, and the values
// of a map, that become pointers or cease to be are refused, since the
// encoding of a list or map says which it holds and its decoder refuses
// the other (Compatible accepted it, and every read of the state failed
// after Start); a field that becomes a pointer to its type keeps its
// layout and is accepted.
func TestCompatibleElementPointers(t *testing.T) {
	i64 := func(pointer bool) *codec.Type {
		return &codec.Type{Kind: codec.KindInt, Bits: 64, Pointer: pointer, Go: map[bool]string{false: "int64", true: "*int64"}[pointer]}
	}
	list := func(pointer bool) *codec.Type {
		return &codec.Type{Kind: codec.KindList, Elem: i64(pointer), Go: "[]" + i64(pointer).Go}
	}
	dict := func(pointer bool) *codec.Type {
		return &codec.Type{Kind: codec.KindMap, Key: &codec.Type{Kind: codec.KindString, Go: "string"}, Elem: i64(pointer), Go: "map[string]" + i64(pointer).Go}
	}
	checkCompatible(t, []compatCase{
		{"[]int64 to []*int64", list(false), list(true), false},
		{"[]*int64 to []int64", list(true), list(false), false},
		{"map[string]int64 to map[string]*int64", dict(false), dict(true), false},
		{"map[string]*int64 to map[string]int64", dict(true), dict(false), false},
		{"int64 to *int64", i64(false), i64(true), true},
		{"[]int64 unchanged", list(false), list(false), true},
	})
}

// TestCompatibleLosesNoValue: a change that would lose stored values,
// silently or at the first read of one, is refused: an integer narrowed
// (a stored value may overflow it, and its read failed mid-run), a slice
// or an array read as a shorter array (the elements past its length were
// dropped); a wider integer, an array read as a slice or a longer array,
// are accepted.
func TestCompatibleLosesNoValue(t *testing.T) {
	integer := func(kind codec.Kind, bits int) *codec.Type {
		return &codec.Type{Kind: kind, Bits: bits, Go: "int"}
	}
	list := func(n int) *codec.Type {
		return &codec.Type{Kind: codec.KindList, Len: n, Elem: integer(codec.KindInt, 64), Go: "[n]int64"}
	}
	checkCompatible(t, []compatCase{
		{"int64 to int32", integer(codec.KindInt, 64), integer(codec.KindInt, 32), false},
		{"uint16 to uint8", integer(codec.KindUint, 16), integer(codec.KindUint, 8), false},
		{"int32 to int64", integer(codec.KindInt, 32), integer(codec.KindInt, 64), true},
		{"uint8 to uint64", integer(codec.KindUint, 8), integer(codec.KindUint, 64), true},
		{"[4]int64 to [2]int64", list(4), list(2), false},
		{"[]int64 to [2]int64", list(0), list(2), false},
		{"[2]int64 to [4]int64", list(2), list(4), true},
		{"[4]int64 to []int64", list(4), list(0), true},
		{"[]int64 to []int64", list(0), list(0), true},
	})
}

// compatCase is a field's type as written and as now, and whether the
// two are compatible.
type compatCase struct {
	name         string
	written, now *codec.Type
	ok           bool
}

// checkCompatible checks Compatible on a record of one field, of each
// case's types.
func checkCompatible(t *testing.T, cases []compatCase) {
	t.Helper()
	schema := func(typ *codec.Type) *codec.Schema {
		return (&codec.Schema{Name: "p.State", Fields: []codec.Field{{Name: "X", ID: 7, Type: typ}}}).Seal()
	}
	for _, tc := range cases {
		err := codec.Compatible(schema(tc.written), schema(tc.now))
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, codec.ErrIncompatible) {
			t.Errorf("%s: %v, want compatible %v", tc.name, err, tc.ok)
		}
	}
}
