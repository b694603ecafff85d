package embedded

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	d := Doc{Base: Base{ID: 1, Name: "n"}, Audit: Audit{Name: "hidden", Version: 2}, Body: "b"}
	d.Extra.Note = "x"
	in := Batch{Docs: []Doc{d, {}}, ByID: map[int64]*Doc{1: &d, 2: nil}}
	b, _ := in.MarshalBinary()
	var out Batch
	if err := out.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("binary: %v %+v", err, out)
	}
	type plain Doc
	j, _ := d.MarshalJSON()
	want, _ := json.Marshal((*plain)(&d))
	if string(j) != string(want) {
		t.Fatalf("json %s, want %s", j, want)
	}
}
