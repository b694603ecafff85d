package codec

import (
	"encoding"
	"encoding/json"
	"fmt"
)

// Types that encode themselves with methods (MarshalBinary, MarshalText,
// MarshalJSON and their Append and Unmarshal forms) go through these. In
// the binary format their output is a bytes value (binary and JSON forms)
// or a string (text forms). what names the value in errors: its type when
// writing ("netip.Addr"), its field when reading ("Event.Addr").

// AppendBinaryMarshaler appends m.MarshalBinary() as a bytes value.
func AppendBinaryMarshaler(b []byte, m encoding.BinaryMarshaler, what string) ([]byte, error) {
	p, err := m.MarshalBinary()
	if err != nil {
		return b, methodError(what, "MarshalBinary", err)
	}
	return appendNonNilBytes(b, p), nil
}

// AppendBinaryAppender appends what m.AppendBinary adds as a bytes value.
func AppendBinaryAppender(b []byte, m encoding.BinaryAppender, what string) ([]byte, error) {
	start := len(b)
	out, err := m.AppendBinary(append(b, 0))
	if err != nil {
		return b[:start], methodError(what, "AppendBinary", err)
	}
	// A bytes value's length is written plus one (0 is nil).
	return endLength(out, start, 1), nil
}

// AppendTextMarshaler appends m.MarshalText() as a string value.
func AppendTextMarshaler(b []byte, m encoding.TextMarshaler, what string) ([]byte, error) {
	p, err := m.MarshalText()
	if err != nil {
		return b, methodError(what, "MarshalText", err)
	}
	b = AppendUvarint(b, uint64(len(p)))
	return append(b, p...), nil
}

// AppendTextAppender appends what m.AppendText adds as a string value.
func AppendTextAppender(b []byte, m encoding.TextAppender, what string) ([]byte, error) {
	start := len(b)
	out, err := m.AppendText(append(b, 0))
	if err != nil {
		return b[:start], methodError(what, "AppendText", err)
	}
	return endLength(out, start, 0), nil
}

// AppendJSONMarshalerBinary appends m.MarshalJSON() as a bytes value.
func AppendJSONMarshalerBinary(b []byte, m json.Marshaler, what string) ([]byte, error) {
	p, err := m.MarshalJSON()
	if err != nil {
		return b, methodError(what, "MarshalJSON", err)
	}
	return appendNonNilBytes(b, p), nil
}

func appendNonNilBytes(b, p []byte) []byte {
	if p == nil {
		p = []byte{}
	}
	return AppendBytes(b, p)
}

// BinaryUnmarshaler reads a bytes value into u.UnmarshalBinary. The bytes
// are not copied: UnmarshalBinary copies what it keeps, by its contract.
func (d *Decoder) BinaryUnmarshaler(u encoding.BinaryUnmarshaler, what string) {
	if p, ok := d.bytesView(); ok {
		if err := u.UnmarshalBinary(p); err != nil {
			d.Fail(methodError(what, "UnmarshalBinary", err))
		}
	}
}

// TextUnmarshaler reads a string value into u.UnmarshalText.
func (d *Decoder) TextUnmarshaler(u encoding.TextUnmarshaler, what string) {
	n := d.length()
	if d.err != nil {
		return
	}
	d.pos += n
	if err := u.UnmarshalText(d.buf[d.pos-n : d.pos : d.pos]); err != nil {
		d.Fail(methodError(what, "UnmarshalText", err))
	}
}

// JSONUnmarshalerBinary reads a bytes value into u.UnmarshalJSON.
func (d *Decoder) JSONUnmarshalerBinary(u json.Unmarshaler, what string) {
	if p, ok := d.bytesView(); ok {
		if err := u.UnmarshalJSON(p); err != nil {
			d.Fail(methodError(what, "UnmarshalJSON", err))
		}
	}
}

// bytesView reads a bytes value as a view of the input (nil for nil).
func (d *Decoder) bytesView() ([]byte, bool) {
	n := d.Uvarint()
	if d.err != nil {
		return nil, false
	}
	if n == 0 {
		return nil, true
	}
	n--
	if n > uint64(len(d.buf)-d.pos) {
		d.truncated()
		return nil, false
	}
	d.pos += int(n)
	return d.buf[d.pos-int(n) : d.pos : d.pos], true
}

func methodError(what, method string, err error) error {
	return fmt.Errorf("%s: %s: %w", what, method, err)
}

// AppendJSONMarshaler appends what m.MarshalJSON returns, checked and
// compacted with HTML escaping as encoding/json does. An error from the
// method, or output that is not valid JSON, is reported as encoding/json
// reports it: "json: error calling MarshalJSON for type pkg.T: ...", typ
// naming the type as reflect does. On error b is returned unchanged.
func AppendJSONMarshaler(b []byte, m json.Marshaler, typ string) ([]byte, error) {
	raw, err := m.MarshalJSON()
	if err == nil {
		var out []byte
		if out, err = AppendJSONCompact(b, raw); err == nil {
			return out, nil
		}
		if je, ok := err.(*JSONError); ok && je.Syntax {
			err = jsonSyntaxMsg(je.Msg)
		}
	}
	return b, &JSONError{Offset: -1, Msg: "error calling MarshalJSON for type " + typ, Err: err}
}

// jsonSyntaxMsg is a syntax error in a Marshaler's output, worded as
// encoding/json's SyntaxError (without "json: " or an offset).
type jsonSyntaxMsg string

func (e jsonSyntaxMsg) Error() string { return string(e) }

// AppendJSONText appends what m.MarshalText returns as a JSON string, as
// encoding/json does; an error is "json: error calling MarshalText for
// type pkg.T: ...".
func AppendJSONText(b []byte, m encoding.TextMarshaler, typ string) ([]byte, error) {
	text, err := m.MarshalText()
	if err != nil {
		return b, &JSONError{Offset: -1, Msg: "error calling MarshalText for type " + typ, Err: err}
	}
	return AppendJSONStringBytes(b, text), nil
}

// Unmarshaler reads one JSON value (null included) and passes its bytes to
// u.UnmarshalJSON, as encoding/json does; an error from the method stops
// reading, as in encoding/json, and is what Err reports unless the
// document has a syntax error.
func (r *JSONReader) Unmarshaler(u json.Unmarshaler) {
	if raw, ok := r.RawValue(); ok {
		if err := u.UnmarshalJSON(raw); err != nil {
			r.Fail(err)
		}
	}
}

// TextUnmarshaler reads a JSON string and passes it, unquoted, to
// u.UnmarshalText, as encoding/json does: null leaves u as it is, and any
// other value is a type error for target. An error from the method stops
// reading.
func (r *JSONReader) TextUnmarshaler(u encoding.TextUnmarshaler, target string) {
	if s, ok := r.StringBytes(target); ok {
		if err := u.UnmarshalText(s); err != nil {
			r.Fail(err)
		}
	}
}
