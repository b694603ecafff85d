package codec

import (
	"encoding"
	"encoding/json"
)

// Record is the method set streamgen generates for a //streamgen:record
// type, on its pointer type: the standard library's binary and JSON
// interfaces, an append-style JSON encoder, and the type's schemas.
type Record interface {
	encoding.BinaryAppender
	encoding.BinaryMarshaler
	encoding.BinaryUnmarshaler
	json.Marshaler
	json.Unmarshaler
	// AppendJSON appends the record as encoding/json would marshal it.
	AppendJSON(b []byte) ([]byte, error)
	// ReadJSON reads one JSON value from r into the record as
	// UnmarshalJSON reads a whole document, for records of other packages
	// that hold this one.
	ReadJSON(r *JSONReader)
	// StreamSchema returns the record's registered schema.
	StreamSchema() *Schema
	// StreamJSONSchema returns a JSON Schema (draft-07) of the record's
	// JSON, what MarshalJSON writes and UnmarshalJSON reads, as a schema
	// registry takes it.
	StreamJSONSchema() string
}

// RecordPtr is the constraint generic code uses to reach a record's
// generated methods from its value type, with no codec values passed around
// and no reflection:
//
//	func Encode[T any, P RecordPtr[T]](b []byte, v *T) ([]byte, error) {
//		return P(v).AppendBinary(b)
//	}
//
// A type the compiler says does not satisfy it ("*T does not satisfy
// codec.RecordPtr[T] (missing method AppendBinary)"), such as the state
// of typed.MapGroupsWithState or the row of typed.FilesSink, is not a
// record yet: add //streamgen:record to its doc comment and run go
// generate.
type RecordPtr[T any] interface {
	*T
	Record
}

// SupportPackageIsVersion1 is referenced by generated code. A generated file
// and a codec package that do not speak the same format fail to compile
// together instead of misreading each other's bytes at run time: a new
// format version adds SupportPackageIsVersion2 and, once no supported
// generator emits it, removes this one.
const SupportPackageIsVersion1 = true
