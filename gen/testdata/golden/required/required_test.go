package required

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/streamgen/streamgen/codec"
)

func TestRequired(t *testing.T) {
	full := `{"source":"s","device":"d","at":"2024-01-01T00:00:00Z","sensor":"x","seq":1}`
	cases := []struct {
		doc, err string
	}{
		{full, ""},
		{`{"SOURCE":"s","Device":"d","AT":"2024-01-01T00:00:00Z","sensor":"x","seq":0,"where":null,"spots":[]}`, ""},
		{`null`, `streamgen: required.Reading: required field "source" is missing: the value is null (offset 4)`},
		{`{}`, `streamgen: required.Reading: required field "source" is missing (offset 2)`},
		{`{"source":"s","at":"2024-01-01T00:00:00Z","sensor":"x","seq":1}`, `streamgen: required.Reading: required field "device" (the record's key) is missing (offset 63)`},
		{`{"source":"s","device":"d","at":null,"sensor":"x","seq":1}`, `streamgen: required.Reading: required field "at" (the record's event time) is null (offset 58)`},
		{`{"source":"s","device":"d","at":"2024-01-01T00:00:00Z","sensor":null,"seq":1}`, `streamgen: required.Reading: required field "sensor" is null (offset 77)`},
		{`{"source":"s","device":"d","at":"2024-01-01T00:00:00Z","sensor":"x"}`, `streamgen: required.Reading: required field "seq" is missing (offset 68)`},
		// The last member of a name wins, as in encoding/json.
		{`{"source":"s","device":null,"device":"d","at":"2024-01-01T00:00:00Z","sensor":"x","seq":1}`, ""},
		{`{"source":"s","device":"d","device":null,"at":"2024-01-01T00:00:00Z","sensor":"x","seq":1}`, `streamgen: required.Reading: required field "device" (the record's key) is null (offset 90)`},
		// Nested structs check their own required fields when present.
		{`{"source":"s","device":"d","at":"2024-01-01T00:00:00Z","sensor":"x","seq":1,"where":{"Lat":1,"Lon":2}}`, ""},
		{`{"source":"s","device":"d","at":"2024-01-01T00:00:00Z","sensor":"x","seq":1,"where":{"Lat":1}}`, `streamgen: required.Spot: required field "Lon" is missing (offset 93)`},
		{`{"source":"s","device":"d","at":"2024-01-01T00:00:00Z","sensor":"x","seq":1,"spots":[null]}`, `streamgen: required.Spot: required field "Lat" is missing: the value is null (offset 89)`},
		// Any other error comes first, as encoding/json reports it.
		{`{"seq":"one"}`, `json: cannot unmarshal string into Go struct field Reading.seq of type int64 (offset 12)`},
		{`{`, `json: unexpected end of JSON input (offset 1)`},
	}
	for _, c := range cases {
		var r Reading
		err := r.UnmarshalJSON([]byte(c.doc))
		if got := errString(err); got != c.err {
			t.Errorf("%s:\n got %s\nwant %s", c.doc, got, c.err)
		}
		var req *codec.RequiredFieldError
		if errors.As(err, &req) != errors.Is(err, codec.ErrRequired) || (req != nil) != (c.err != "" && c.err[:10] == "streamgen:") {
			t.Errorf("%s: %v is not told apart as a required field's error", c.doc, err)
		}
	}
	// A record without required fields of its own checks those of the
	// records it holds, and takes null as encoding/json does.
	var b Batch
	if err := b.UnmarshalJSON([]byte(`null`)); err != nil {
		t.Errorf("null Batch: %v", err)
	}
	if err := b.UnmarshalJSON([]byte(`{"Rows":[` + full + `,{}]}`)); !errors.Is(err, codec.ErrRequired) {
		t.Errorf("Batch with a row without its fields: %v", err)
	}
}

func TestRoundTrip(t *testing.T) {
	sensor := "x"
	in := Reading{Origin: Origin{Source: "s"}, Device: "d", At: time.Unix(10, 0).UTC(), Sensor: &sensor, Seq: 3, Where: &Spot{Lat: 1}, Spots: []Spot{{Lon: 2}}}
	j, err := in.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var out Reading
	if err := out.UnmarshalJSON(j); err != nil || !reflect.DeepEqual(in, out) {
		t.Fatalf("json: %v %+v", err, out)
	}
	type plain Reading
	if want, _ := json.Marshal((*plain)(&in)); string(j) != string(want) {
		t.Fatalf("json %s, want %s", j, want)
	}
	// Binary does not check: state written before a field was required
	// still reads.
	b, _ := (&Batch{Rows: []Reading{{}}}).MarshalBinary()
	var back Batch
	if err := back.UnmarshalBinary(b); err != nil || len(back.Rows) != 1 {
		t.Fatalf("binary: %v %+v", err, back)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
