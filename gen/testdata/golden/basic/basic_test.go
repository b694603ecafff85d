package basic

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

func TestRoundTrip(t *testing.T) {
	unit := "C"
	in := Reading{Sensor: "s1", At: time.Unix(10, 5).UTC(), Value: 21.5, Unit: &unit, Labels: map[string]string{"room": "k"}, Window: [2]int32{1, -1}}
	b, _ := in.MarshalBinary()
	var out Reading
	if err := out.UnmarshalBinary(b); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("binary: %v %+v", err, out)
	}
	type plain Reading
	j, _ := in.MarshalJSON()
	want, _ := json.Marshal((*plain)(&in))
	if string(j) != string(want) {
		t.Fatalf("json %s, want %s", j, want)
	}
}
