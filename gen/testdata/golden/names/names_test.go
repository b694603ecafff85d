package names

import (
	"encoding/json"
	"reflect"
	"testing"
)

// TestRoundTrip: a record whose fields have types named like the locals
// of generated code round-trips through binary and JSON, and its JSON is
// encoding/json's.
func TestRoundTrip(t *testing.T) {
	opt := e("opt")
	in := Wide{
		B: "b", P: &p{X: 1}, Ps: []p{{X: 2}}, Q: -3, X: 4, N: -5, C: true, S: "s", E: "e", E2: "e2",
		I: 1 << 40, K: 1.5, All: "all", Buf: buf("buf"), Ok: true, M: m{"a": 1}, Val: 2.5, Key: "key",
		Sl: sl{"x"}, U: 7, W: 8, Keys: map[key]val{"k": 9}, Opt: &opt, Text: "text", More: "more", Last: -1,
	}
	bin, err := in.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out Wide
	if err := out.UnmarshalBinary(bin); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("binary: %v\n%+v\n%+v", err, out, in)
	}
	type plain Wide
	j, _ := in.MarshalJSON()
	want, _ := json.Marshal((*plain)(&in))
	if string(j) != string(want) {
		t.Fatalf("json %s, want %s", j, want)
	}
	var back Wide
	if err := back.UnmarshalJSON(j); err != nil || !reflect.DeepEqual(in, back) {
		t.Fatalf("json back: %v\n%+v", err, back)
	}
}
