package codec

import (
	"errors"
	"math/bits"
	"strconv"
)

// Required fields (see the package doc).
//
// A row without its key or event time would otherwise be processed with
// an empty key and a 1970 event time. The generated decoder of a struct
// with required fields counts the members it reads in a RequiredSet (two
// words on the stack, no allocation) and checks them once, when the
// object ends (RequiredSet.End); BeginRequired refuses null in place of
// the struct. A pointer to the struct is not concerned: null sets it to
// nil, as in encoding/json, unless its own field is required.
//
// A missing or null required field is the least of a document's errors:
// JSONReader.Err reports it only when encoding/json would have accepted
// the document, so that every other document is refused with exactly
// encoding/json's error.

// ErrRequired is what every *RequiredFieldError wraps, so that callers can
// tell a row refused for a missing or null required field with errors.Is.
var ErrRequired = errors.New("streamgen: required field missing or null")

// The reasons of a RequiredFieldError.
const (
	// ReasonMissing: the object has no member for the field.
	ReasonMissing = "missing"
	// ReasonNull: the member's value is the literal null.
	ReasonNull = "null"
	// ReasonNullValue: the value that should have been the object is
	// null, so the field is missing with the rest of it.
	ReasonNullValue = "null value"
)

// RequiredFieldError reports a required field that a JSON object lacks or
// holds null for. Its message is
//
//	streamgen: sensor.Event: required field "User" (the record's key) is missing (offset 120)
//	streamgen: sensor.Event: required field "User" (the record's key) is null (offset 130)
//	streamgen: sensor.Event: required field "Creation_Time" (the record's event time) is missing: the value is null (offset 4)
//
// naming the first such field in the struct's JSON order. It unwraps to
// ErrRequired.
type RequiredFieldError struct {
	// Type is the struct, as Go names it: "sensor.Event".
	Type string
	// Field is the field's JSON member name: "User".
	Field string
	// Role says why the field is required: "the record's key", "the
	// record's event time", or "" for a field tagged `stream:"required"`.
	Role string
	// Reason is ReasonMissing, ReasonNull or ReasonNullValue.
	Reason string
	// Offset is the byte offset just past the object that lacks the
	// field or holds null for it (its closing '}'), or past the null in
	// place of the object.
	Offset int64
}

// Error says which record's field is missing or null, and where.
func (e *RequiredFieldError) Error() string {
	s := "streamgen: " + e.Type + ": required field " + strconv.Quote(e.Field)
	if e.Role != "" {
		s += " (" + e.Role + ")"
	}
	switch e.Reason {
	case ReasonNull:
		s += " is null"
	case ReasonNullValue:
		s += " is missing: the value is null"
	default:
		s += " is missing"
	}
	return s + " (offset " + strconv.FormatInt(e.Offset, 10) + ")"
}

// Unwrap returns ErrRequired.
func (e *RequiredFieldError) Unwrap() error { return ErrRequired }

// RequiredFields describes the required fields of a struct, for its
// generated JSON decoder, which declares one as a package variable. Field
// i is bit 1<<i of a RequiredSet; there are at most 64.
type RequiredFields struct {
	Type   string // the struct, as Go names it
	Fields []RequiredField
}

// RequiredField is one required field: its JSON member name, and why it
// is required (RequiredFieldError.Role).
type RequiredField struct {
	Name, Role string
}

// RequiredSet records which required fields of a struct the object being
// read has had members for, and which of those were null. Generated
// decoders keep one on the stack for each object they read. The zero
// value is an object that has had no members.
type RequiredSet struct {
	seen, null uint64
}

// Mark records that the object has a member for the required field bit
// (1<<i for field i), whose value comes next in r and is read after Mark.
// A later member for the same field replaces this one, as encoding/json's
// last value wins.
func (s *RequiredSet) Mark(r *JSONReader, bit uint64) {
	s.seen |= bit
	if r.nextIsNull() {
		s.null |= bit
	} else {
		s.null &^= bit
	}
}

// End is called when the object has ended (NextKey reported false): it
// records a *RequiredFieldError for the first of fields that had no member
// or a null one, unless reading has stopped.
func (s *RequiredSet) End(r *JSONReader, fields *RequiredFields) {
	if s.seen != 1<<len(fields.Fields)-1 || s.null != 0 {
		s.missing(r, fields)
	}
}

func (s *RequiredSet) missing(r *JSONReader, fields *RequiredFields) {
	if r.stop != nil {
		return
	}
	bad := ^s.seen | s.null
	i := bits.TrailingZeros64(bad)
	if i >= len(fields.Fields) {
		return
	}
	reason := ReasonMissing
	if s.null&(1<<i) != 0 {
		reason = ReasonNull
	}
	r.requiredErr(fields, i, reason)
}

// BeginRequired is BeginObject for a struct with required fields: the
// literal null in place of the object is consumed and recorded as a
// *RequiredFieldError (ReasonNullValue, naming the first required field)
// where BeginObject would pass it over.
func (r *JSONReader) BeginRequired(target string, fields *RequiredFields) bool {
	c, ok := r.begin()
	if !ok {
		return false
	}
	switch c {
	case '{':
		return r.open()
	case 'n':
		if r.literal(r.pos, "null") {
			r.pos += 4
			r.requiredErr(fields, 0, ReasonNullValue)
		}
		return false
	}
	r.other(c, target)
	return false
}

// nextIsNull reports whether the next value begins with 'n': the literal
// null, or a syntax error that reading the value reports.
func (r *JSONReader) nextIsNull() bool {
	i := r.skipSpace(r.pos)
	return i < len(r.data) && r.data[i] == 'n'
}

// requiredErr records, if it is the first, the error for field i of
// fields, at the current offset.
func (r *JSONReader) requiredErr(fields *RequiredFields, i int, reason string) {
	if r.required != nil || i >= len(fields.Fields) {
		return
	}
	f := fields.Fields[i]
	r.required = &RequiredFieldError{Type: fields.Type, Field: f.Name, Role: f.Role, Reason: reason, Offset: int64(r.pos)}
}
