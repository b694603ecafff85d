package codec_test

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/codec"
)

// group builds the schema of a recursive group S -> {P *Q, R *Rr},
// Q -> {S *S, R *Rr}, Rr -> {S *S, N}: describing Rr under S's field R
// (sFirst) or under Q (not sFirst), as two versions of the generator may.
func group(sFirst bool, n codec.Kind) *codec.Schema {
	ref := func(name string) *codec.Type { return &codec.Type{Kind: codec.KindStruct, Pointer: true, Ref: name} }
	rr := &codec.Schema{Name: "p.Rr", Recursive: true, Fields: []codec.Field{
		{Name: "S", ID: 1, Type: ref("p.S")},
		{Name: "N", ID: 2, Type: &codec.Type{Kind: n, Bits: 64}},
	}}
	rrHere := &codec.Type{Kind: codec.KindStruct, Pointer: true, Struct: rr}
	q := &codec.Schema{Name: "p.Q", Recursive: true, Fields: []codec.Field{{Name: "S", ID: 1, Type: ref("p.S")}}}
	s := &codec.Schema{Name: "p.S", Recursive: true}
	if sFirst {
		q.Fields = append(q.Fields, codec.Field{Name: "R", ID: 2, Type: ref("p.Rr")})
		s.Fields = []codec.Field{{Name: "R", ID: 2, Type: rrHere}, {Name: "P", ID: 1, Type: &codec.Type{Kind: codec.KindStruct, Pointer: true, Struct: q}}}
	} else {
		q.Fields = append(q.Fields, codec.Field{Name: "R", ID: 2, Type: rrHere})
		s.Fields = []codec.Field{{Name: "P", ID: 1, Type: &codec.Type{Kind: codec.KindStruct, Pointer: true, Struct: q}}, {Name: "R", ID: 2, Type: ref("p.Rr")}}
	}
	return s.Seal()
}

// TestCompatibleRecursive: a change inside a recursive group is found
// whichever field describes each struct and whichever refers to it.
func TestCompatibleRecursive(t *testing.T) {
	for _, c := range []struct{ a, b bool }{{true, true}, {true, false}, {false, true}, {false, false}} {
		if err := codec.Compatible(group(c.a, codec.KindInt), group(c.b, codec.KindInt)); err != nil {
			t.Errorf("same group (%v, %v): %v", c.a, c.b, err)
		}
		err := codec.Compatible(group(c.a, codec.KindInt), group(c.b, codec.KindString))
		if err == nil || !strings.Contains(err.Error(), "field N (id 2) was") {
			t.Errorf("N changed (%v, %v): %v", c.a, c.b, err)
		}
	}
}

// TestDynamicRecursiveBounded: AppendDynamicJSON stops at MaxDepth on a
// schema with Refs even when it does not say Recursive (one read from
// elsewhere), rather than recurse until the stack overflows.
func TestDynamicRecursiveBounded(t *testing.T) {
	list := (&codec.Schema{Name: "p.List", Fields: []codec.Field{
		{Name: "Next", ID: 1, Type: &codec.Type{Kind: codec.KindStruct, Pointer: true, Ref: "p.List"}},
	}}).Seal()
	tag := codec.AppendTag(nil, 1, codec.KindStruct)
	headers := make([][]byte, 3*codec.MaxDepth)
	inner := 0
	for i := range headers {
		headers[i] = binary.AppendUvarint(append([]byte(nil), tag...), uint64(inner))
		inner += len(headers[i])
	}
	var data []byte
	for i := len(headers) - 1; i >= 0; i-- {
		data = append(data, headers[i]...)
	}
	if _, err := codec.AppendDynamicJSON(nil, list, data); err == nil || !strings.Contains(err.Error(), "nested deeper than") {
		t.Fatalf("AppendDynamicJSON of %d levels: %v", len(headers), err)
	}
}
