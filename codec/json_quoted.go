package codec

import (
	"bytes"
	"strconv"
)

// The json option "string" ("json:\",string\"") puts a bool, number or
// string field's JSON inside a JSON string: 12 is written "12", "a" is
// written "\"a\"". These functions write and read such fields as
// encoding/json does, with its errors.

// AppendJSONQuotedString appends s as a JSON string holding its own JSON
// encoding, as encoding/json writes a string field with the option.
func AppendJSONQuotedString(b []byte, s string) []byte {
	var buf [64]byte
	// The inner encoding escapes <, > and & itself, so escaping the outer
	// one for HTML, or not, gives the same bytes.
	return AppendJSONStringBytes(b, AppendJSONString(buf[:0], s))
}

// Quoted reads the value of a field with the option: a string whose
// contents (the literal, returned) are read by one of the Quoted
// functions, or null, which sets a pointer field to nil and leaves others
// as they are (null is then true). Any other value is encoding/json's
// error: "json: invalid use of ,string struct tag, trying to unmarshal
// unquoted value into T", recorded, with ok false; so is an empty string.
// typ names the field's type (*int for a pointer), elem the type under the
// pointer (the same if none), as reflect does.
func (r *JSONReader) Quoted(typ, elem string) (lit []byte, null, ok bool) {
	c, ok := r.begin()
	if !ok {
		return nil, false, false
	}
	switch c {
	case 'n':
		if r.Null() {
			return nil, true, false
		}
	case '"':
		s, ok := r.StringBytes("")
		if !ok {
			return nil, false, false
		}
		switch {
		case len(s) == 0:
			r.quotedErr(false, `""`, typ)
			return nil, false, false
		case s[0] == 'n':
			if string(s) == "null" {
				return nil, true, false
			}
			r.quotedErr(false, strconv.Quote(string(s)), typ) // encoding/json stops at the pointer
			return nil, false, false
		}
		return s, false, true
	}
	start := r.pos
	r.Skip()
	if r.stop != nil {
		return nil, false, false
	}
	if c == '-' || '0' <= c && c <= '9' {
		// encoding/json reads an unquoted number as a float64 first: one
		// out of its range is that error, not the option's.
		if num := r.data[start:r.pos]; !jsonFitsFloat64(num) {
			r.saveTypeErr(&JSONError{Offset: int64(r.pos), Value: "number " + string(num), Target: "Go value of type float64"})
		}
	}
	r.saveTypeErr(&JSONError{Offset: int64(r.pos), Msg: "invalid use of ,string struct tag, trying to unmarshal unquoted value into " + typ})
	return nil, false, false
}

// jsonFitsFloat64 reports whether the number literal num reads as a
// float64 (strconv refuses one out of range).
func jsonFitsFloat64(num []byte) bool {
	_, err := strconv.ParseFloat(string(num), 64)
	return err == nil
}

// quotedErr records encoding/json's error for a literal that does not fit
// the option: saved like a type error, or (stop) ending the decoding, as
// encoding/json returns it.
func (r *JSONReader) quotedErr(stop bool, quotedLit, typ string) {
	e := &JSONError{Offset: int64(r.pos), Msg: "invalid use of ,string struct tag, trying to unmarshal " + quotedLit + " into " + typ}
	if stop {
		r.setStop(e)
	} else {
		r.saveTypeErr(e)
	}
}

// quotedKind classifies a literal read by Quoted as encoding/json's
// literalStore does: 'b' for true or false, 's' for a string literal, 'n'
// for a number; 0 when it has recorded an error.
func (r *JSONReader) quotedKind(lit []byte, elem string) byte {
	switch c := lit[0]; {
	case c == 't' || c == 'f':
		if string(lit) == "true" || string(lit) == "false" {
			return 'b'
		}
		r.quotedErr(false, strconv.Quote(string(lit)), elem)
		return 0
	case c == '"':
		var q JSONReader
		q.Reset(apostrophes(lit))
		if _, ok := q.StringBytes(""); ok && q.pos == len(q.data) {
			return 's'
		}
	case c == '-' || '0' <= c && c <= '9':
		// Not checked further: strconv decides, as in encoding/json.
		return 'n'
	}
	r.quotedErr(true, strconv.Quote(string(lit)), elem)
	return 0
}

// apostrophes returns the string literal lit with an apostrophe in place
// of each escaped one (\'): encoding/json reads the literal inside a
// quoted field with a decoder that takes \' for ', an escape JSON does
// not have (its scanner of whole documents refuses it). It returns lit
// itself when there is none.
func apostrophes(lit []byte) []byte {
	if !bytes.Contains(lit, []byte(`\'`)) {
		return lit
	}
	out := make([]byte, 0, len(lit))
	for i := 0; i < len(lit); i++ {
		c := lit[i]
		if c == '\\' && i+1 < len(lit) {
			if lit[i+1] == '\'' {
				out = append(out, '\'')
			} else {
				out = append(out, c, lit[i+1])
			}
			i++
			continue
		}
		out = append(out, c)
	}
	return out
}

// quotedMismatch records the error for a literal of the wrong kind for
// the field, as encoding/json does: a string is a type error, a bool is
// recorded too, a number stops decoding.
func (r *JSONReader) quotedMismatch(kind byte, lit []byte, elem, target string) {
	switch kind {
	case 's':
		r.saveTypeErr(&JSONError{Offset: int64(r.pos), Value: "string", Target: target})
	case 'b':
		r.quotedErr(false, strconv.Quote(string(lit)), elem)
	default:
		r.quotedErr(true, strconv.Quote(string(lit)), elem)
	}
}

// QuotedBool reads a literal from Quoted into a bool field.
func (r *JSONReader) QuotedBool(lit []byte, elem, target string) (bool, bool) {
	switch k := r.quotedKind(lit, elem); k {
	case 'b':
		return lit[0] == 't', true
	case 0:
	default:
		r.quotedMismatch(k, lit, elem, target)
	}
	return false, false
}

// QuotedInt reads a literal from Quoted into an integer field of the given
// bit size.
func (r *JSONReader) QuotedInt(lit []byte, elem, target string, bits int) (int64, bool) {
	return quotedNumber(r, lit, elem, target, func(s string) (int64, error) { return strconv.ParseInt(s, 10, bits) })
}

// QuotedUint reads a literal from Quoted into an unsigned integer field.
func (r *JSONReader) QuotedUint(lit []byte, elem, target string, bits int) (uint64, bool) {
	return quotedNumber(r, lit, elem, target, func(s string) (uint64, error) { return strconv.ParseUint(s, 10, bits) })
}

// QuotedFloat reads a literal from Quoted into a float field.
func (r *JSONReader) QuotedFloat(lit []byte, elem, target string, bits int) (float64, bool) {
	return quotedNumber(r, lit, elem, target, func(s string) (float64, error) { return strconv.ParseFloat(s, bits) })
}

// quotedNumber reads a number literal with parse, which strconv's
// functions do as encoding/json calls them: a literal they refuse is a
// type error.
func quotedNumber[T any](r *JSONReader, lit []byte, elem, target string, parse func(string) (T, error)) (T, bool) {
	var zero T
	switch k := r.quotedKind(lit, elem); k {
	case 'n':
		v, err := parse(string(lit))
		if err != nil {
			r.saveTypeErr(&JSONError{Offset: int64(r.pos), Value: "number " + string(lit), Target: target})
			return zero, false
		}
		return v, true
	case 0:
	default:
		r.quotedMismatch(k, lit, elem, target)
	}
	return zero, false
}

// QuotedString reads a literal from Quoted into a string field: it must
// be a JSON string itself.
func (r *JSONReader) QuotedString(lit []byte, elem, target string) (string, bool) {
	switch k := r.quotedKind(lit, elem); k {
	case 's':
		var q JSONReader
		q.Reset(apostrophes(lit))
		return q.String("")
	case 0:
	default:
		r.quotedMismatch(k, lit, elem, target)
	}
	return "", false
}
