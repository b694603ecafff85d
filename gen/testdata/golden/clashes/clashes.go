// Package clashes declares names that generated code uses too: types
// named like the parameters and locals of generated functions, records
// named like their receiver and parameters, values named like the
// packages the output imports, and functions named like its helpers.
// The output must avoid them all.
package clashes

import (
	stdtime "time"

	place "github.com/streamgen/streamgen/generated/fixtures/geo"
)

// Values named like the packages the output imports.
var (
	codec = "not the codec package"
	time  = stdtime.Second
	geo   = "not the geo package"
)

// Types named like the fixed parameters and locals of generated code.
type (
	v      int
	d      uint8
	r      float32
	err    string
	end    int
	tag    struct{ Name string }
	field  int
	folded string
	start  []string
	depth  int16
	data   []byte
	buf    [2]byte
)

// Event is a record whose fields have those types. It has more than 24
// fields, so that its decoder's fast path is split into functions, which
// take d and v too.
//
//streamgen:record
type Event struct {
	B      b
	T      t
	V      v
	D      d
	R      r
	Err    err
	End    end
	Tag    tag
	Tags   []tag
	Opt    *tag
	Field  field
	Folded folded
	Start  start
	Data   data
	Buf    buf
	Ends   map[string]end
	Starts map[string]start
	Errs   map[string]err
	ByTag  map[folded]field
	At     stdtime.Time
	Where  place.Place
	Root   *Node
	V2     v
	D2     d
	R2     r
	End2   end
	Field2 field
	Last   string
}

// Node is recursive, so that its helpers take a depth.
type Node struct {
	Depth  depth
	Depths map[string]depth
	Kids   []Node
	Tag    tag
}

// t is a record named like the receiver of the generated methods.
//
//streamgen:record
type t struct{ N int }

// b is a record named like UnmarshalBinary's parameter.
//
//streamgen:record
type b struct{ S string }

// Declarations named like the helpers the output would write for Event.
func appendBinaryEvent() {}

var schemaEvent = "not Event's schema"
