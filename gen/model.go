package gen

import (
	"go/token"
	"go/types"
)

// The model is what the generator knows about a package once it has read
// it: the records to emit and, for each, a closed description of every
// field's type (a Shape). Emitters visit shapes with one switch on Shape.Kind.
//
// A worked example. For
//
//	//streamgen:record
//	type Event struct {
//		User  string            `json:"user"`
//		Tags  []Tag             `json:"tags,omitempty"`
//		Where *geo.Point        // geo.Point is a record of another package
//		Meta  map[string]int64
//		At    time.Time         `stream:"eventtime,id=7"`
//	}
//	type Tag struct{ K, V string } // not a record: reached through Event
//
// the model is
//
//	Package{Records: [Event], Structs: [Event, Tag]}
//	Struct Event (Record, Local)
//	  Fields (binary, declaration order)
//	    User  id=FieldID("User")  Shape{String}
//	    Tags  id=FieldID("Tags")  Shape{Slice, Elem: Shape{Struct: Tag}}
//	    Where id=FieldID("Where") Shape{Pointer, Elem: Shape{Struct: geo.Point (Record, not Local)}}
//	    Meta  id=FieldID("Meta")  Shape{Map, Key: Shape{String}, Elem: Shape{Int, Bits: 64}}
//	    At    id=7                Shape{Time}  EventTime
//	  JSON (encoding/json's field list, embedded fields promoted)
//	    "user" → User, "tags" omitempty → Tags, "Where" → Where, "Meta" → Meta,
//	    "At" → At Required (Role "the record's event time")
//	Struct Tag (not Record, Local): Fields K, V; JSON "K", "V"
//
// Struct types that are not records get generated helper functions, not
// methods, so the generator never adds methods to a type the user did not
// annotate. Records of other packages are reached through their generated
// exported methods.

// Package is the model of one Go package to generate for.
type Package struct {
	Name    string // package name
	Path    string // import path
	Dir     string // directory of its files
	Records []*Struct
	// Structs lists every struct type that needs generated helpers: the
	// package's records and every struct type reached from their fields,
	// in the order first met, except records of other packages.
	Structs []*Struct
	// Bindings are the annotated stateful processor functions.
	Bindings []*Binding
	// Processors are the annotated stateful processor types.
	Processors []*Processor
}

// Struct is a struct type that is a record or is reached from one.
type Struct struct {
	// Name is the type's name as it reads in messages ("Event",
	// "geo.Point", or "struct{...}" for an anonymous struct).
	Name string
	// Qualified is the import path and name ("example.com/s.Event").
	Qualified string
	// Type is the struct's Go type (a *types.Named or a *types.Struct).
	Type types.Type
	// Record is true for a //streamgen:record type.
	Record bool
	// Local is true when the type is declared in the package being
	// generated (only local records get methods).
	Local bool
	// Helper is the suffix of this struct's generated helper functions
	// ("Event" gives appendBinaryEvent, readBinaryEvent, ...).
	Helper string
	// Fields are the encoded fields, in declaration order. An embedded
	// struct is one field of kind Struct, named after its type.
	Fields []*Field
	// JSON is encoding/json's view of the struct: its fields, promoted
	// from embedded structs by encoding/json's rules, in its order.
	JSON []*JSONField
	Pos  token.Pos
	// Recursive is true for a struct that contains itself, through
	// pointers, slices or maps, maybe by way of other structs: its
	// helpers bound the nesting they write and read (codec.MaxDepth).
	// SCC numbers the group of structs that contain each other (0 if
	// none); Deep is true for a struct that holds a recursive one (or is
	// one), whose append helpers pass the nesting depth on.
	Recursive bool
	SCC       int
	Deep      bool
}

// Field is one field of the binary encoding.
type Field struct {
	Name  string // Go name
	ID    uint32
	Shape *Shape
	Pos   token.Pos
	// Key and EventTime mark the fields tagged `stream:"key"` and
	// `stream:"eventtime"`, for typed bindings.
	Key, EventTime bool
	// Required marks a field tagged `stream:"required"`. It, Key and
	// EventTime make the field's JSON member required (JSONField.Required);
	// the binary decoder does not check them (see the codec package doc).
	Required bool
}

// JSONField is one member of a struct's JSON object.
type JSONField struct {
	Name string // the JSON key
	// Path is the chain of Go field names from the struct to the field;
	// longer than one for a field promoted from an embedded struct.
	Path []string
	// Ptrs has, for each embedded struct on Path (all of it but the last
	// element), the struct type if it is embedded by pointer, else nil: a
	// nil pointer hides the field when writing and is allocated when
	// reading, as in encoding/json.
	Ptrs      []types.Type
	Shape     *Shape
	OmitEmpty bool
	OmitZero  bool
	// Quoted is the json option "string" on a bool, number or string
	// field: its JSON is put inside a JSON string.
	Quoted bool
	// Tagged is true when the name came from a json tag (it then wins
	// over untagged fields of the same name at the same depth).
	Tagged bool
	// Required is set when the field is tagged `stream:"key"`,
	// `stream:"eventtime"` or `stream:"required"`: decoding an object
	// without the member, or with null for it, is an error. Role says
	// why, for that error's message ("the record's key"; "" for
	// "required").
	Required bool
	Role     string
	index    []int // field indexes from the outer struct, for ordering
}

// ShapeKind is what a Shape is.
type ShapeKind int

// The shapes.
const (
	Bool ShapeKind = iota
	Int
	Uint
	Float
	String
	Bytes
	Time
	Duration
	Pointer
	Slice
	Array
	Map
	StructShape
)

// Shape is the closed description of a Go type that the emitters visit.
type Shape struct {
	Kind ShapeKind
	// Type is the Go type this shape describes. When it is a named type
	// (an enum over int, a named slice), Named is set and values are
	// converted to and from the underlying shape.
	Type  types.Type
	Named bool
	Bits  int    // for Int, Uint, Float: 8…64 (int and uint count as 64)
	Len   int64  // for Array
	Elem  *Shape // for Pointer, Slice, Array, Map (the value)
	Key   *Shape // for Map
	// Struct is set for StructShape.
	Struct *Struct
	// ByteElem is set for Bytes over a named byte type ([]Level with
	// type Level uint8): the element type, which encoding/json also
	// writes as base64.
	ByteElem types.Type
	// JSONKey and JSONKeyRead, for a map's key, are how encoding/json
	// writes and reads it: "string", "int", "uint" or "text" (MarshalText,
	// UnmarshalText).
	JSONKey, JSONKeyRead string
	// Number is set for encoding/json.Number (a String shape), which
	// JSON writes and reads as a number.
	Number bool
	// Custom is set for a named type that encodes itself with methods.
	// Kind is then that of Custom.Under, or Bytes or String when the
	// binary encoding is the methods' output.
	Custom *Custom
}
