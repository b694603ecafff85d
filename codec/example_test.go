package codec_test

import (
	"encoding/json"
	"fmt"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/generated/sensor"
)

// A generated record is an encoding.BinaryMarshaler and a json.Marshaler:
// the standard library, and anything else that takes those interfaces,
// uses the generated code.
func Example() {
	ev := sensor.Event{Device: "nexus4_1", User: "g", Activity: "stand", Index: 35, X: -0.00054931640625}

	bin, _ := ev.MarshalBinary()
	var back sensor.Event
	if err := back.UnmarshalBinary(bin); err != nil {
		panic(err)
	}
	fmt.Println(back == ev)

	out, _ := json.Marshal(&ev) // calls the generated MarshalJSON
	fmt.Println(string(out))
	// Output:
	// true
	// {"Arrival_Time":0,"Creation_Time":0,"Device":"nexus4_1","Index":35,"Model":"","User":"g","gt":"stand","x":-0.00054931640625,"y":0,"z":0}
}

// AppendDynamicJSON shows what binary bytes hold, from the registered
// schema alone: a tool can read a checkpoint's state without the Go type.
func ExampleAppendDynamicJSON() {
	bin, _ := (&sensor.Event{Device: "nexus4_1", Index: 35}).MarshalBinary()

	schema, _ := codec.Lookup("github.com/streamgen/streamgen/generated/sensor.Event")
	out, err := codec.AppendDynamicJSON(nil, schema, bin)
	fmt.Println(string(out), err)
	// Output:
	// {"ArrivalTime":0,"CreationTime":0,"Device":"nexus4_1","Index":35,"Model":"","User":"","Activity":"","X":0,"Y":0,"Z":0} <nil>
}

// Compatible tells whether bytes written with one version of a record can
// be read by another, and names every field that stops them.
func ExampleCompatible() {
	v1 := (&fixtures.StateV1{}).StreamSchema()
	v2 := (&fixtures.StateV2{}).StreamSchema() // fields added, removed, reordered, renamed
	v3 := (&fixtures.StateV3{}).StreamSchema() // Count changed type

	fmt.Println(codec.Compatible(v1, v2))
	fmt.Println(codec.Compatible(v1, v3))
	// Output:
	// <nil>
	// streamgen: incompatible schema: github.com/streamgen/streamgen/generated/fixtures.StateV3: field Count (id 116839) was int32, is now string
}

// DisallowUnknownFields refuses a member that names none of a record's
// fields, as encoding/json's Decoder.DisallowUnknownFields does; a
// source's decoder built on it (typed.FromFunc) sends such records to
// the dead letters.
func ExampleJSONReader_DisallowUnknownFields() {
	var ev sensor.Event
	var r codec.JSONReader
	r.DisallowUnknownFields()
	for _, line := range []string{`{"User":"g","Creation_Time":1,"Index":35}`, `{"User":"g","Creation_Time":1,"Indx":35}`} {
		r.Reset([]byte(line))
		ev.ReadJSON(&r)
		fmt.Println(r.Finish())
	}
	// Output:
	// <nil>
	// json: unknown field "Indx" (offset 30)
}
