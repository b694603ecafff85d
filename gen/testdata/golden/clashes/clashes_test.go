package clashes

import (
	"encoding/json"
	"reflect"
	"testing"
	stdtime "time"

	place "github.com/streamgen/streamgen/generated/fixtures/geo"
)

// TestRoundTrip: a record whose fields have types named like the locals
// of generated code, in a package with values named like its imports,
// round-trips through binary and JSON, and its JSON is encoding/json's.
func TestRoundTrip(test *testing.T) {
	in := Event{
		B: b{S: "b"}, T: t{N: 1}, V: 2, D: 3, R: 4.5, Err: "err", End: 5, Tag: tag{Name: "tag"},
		Tags: []tag{{Name: "x"}}, Opt: &tag{Name: "opt"}, Field: 6, Folded: "folded", Start: start{"s"},
		Data: data("data"), Buf: buf{1, 2}, Ends: map[string]end{"e": 7}, Starts: map[string]start{"s": {"t"}},
		Errs: map[string]err{"e": "err"}, ByTag: map[folded]field{"f": 8},
		At: stdtime.Unix(1_700_000_000, 0).UTC(), Where: place.Place{Name: "here", Lat: 1, Lon: 2},
		Root: &Node{Depth: 1, Depths: map[string]depth{"d": 2}, Kids: []Node{{Depth: 2, Tag: tag{Name: "kid"}}}},
		V2:   9, D2: 10, R2: 11, End2: 12, Field2: 13, Last: "last",
	}
	bin, e := in.MarshalBinary()
	if e != nil {
		test.Fatal(e)
	}
	var out Event
	if e := out.UnmarshalBinary(bin); e != nil || !reflect.DeepEqual(in, out) {
		test.Fatalf("binary: %v\n%+v\n%+v", e, out, in)
	}
	type plain Event
	j, e := in.MarshalJSON()
	if e != nil {
		test.Fatal(e)
	}
	want, _ := json.Marshal((*plain)(&in))
	if string(j) != string(want) {
		test.Fatalf("json %s, want %s", j, want)
	}
	var back Event
	if e := back.UnmarshalJSON(j); e != nil || !reflect.DeepEqual(in, back) {
		test.Fatalf("json back: %v\n%+v", e, back)
	}
	for _, rec := range []interface {
		MarshalBinary() ([]byte, error)
		UnmarshalBinary([]byte) error
	}{&t{N: 1}, &b{S: "b"}} {
		enc, e := rec.MarshalBinary()
		if e != nil || rec.UnmarshalBinary(enc) != nil {
			test.Fatalf("%T: %v", rec, e)
		}
	}
	_, _ = codec, geo
}
