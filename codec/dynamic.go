package codec

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"time"
)

// AppendDynamicJSON appends the record encoded in data as a JSON object,
// reading it with schema s alone: no Go type is needed, so a tool can show
// what a checkpoint or a topic holds. Members are named by the Go field
// names and come in schema order; fields the schema does not know are
// skipped, nil pointers are left out, []byte is base64, times are RFC 3339
// strings (with "Z" for UTC only: a time of another zone at offset zero
// has "+00:00", as the encoding keeps them apart), durations are
// nanoseconds, and NaN and infinities are written as the strings "NaN",
// "+Inf" and "-Inf".
func AppendDynamicJSON(b []byte, s *Schema, data []byte) ([]byte, error) {
	var d Decoder
	d.Reset(data)
	st := &dynamicState{scope: s, pkg: packageOf(s.Name), refs: refScope{}}
	if s.Recursive {
		st.depth = 1
	}
	b = appendDynamicStruct(b, &d, s, len(data), st)
	if err := d.Err(); err != nil {
		return b, fmt.Errorf("streamgen: decode %s: %w", s.Name, err)
	}
	return b, nil
}

func appendDynamicStruct(b []byte, d *Decoder, s *Schema, end int, st *dynamicState) []byte {
	// Fields may come in any order and repeat; collect the last value of
	// each, then write them in schema order.
	type span struct{ start, end int }
	values := make([]span, len(s.Fields))
	for d.More(end) {
		tag := d.Tag()
		id := uint32(tag >> 4)
		idx := -1
		for i, f := range s.Fields {
			if f.ID == id {
				idx = i
				break
			}
		}
		start := d.pos
		d.skipKind(Kind(tag & 0xf))
		if idx >= 0 && d.err == nil {
			if want := s.Fields[idx].Type.Kind; Kind(tag&0xf) != want {
				d.KindChanged(s.Name, s.Fields[idx].Name, tag, want)
				return b
			}
			values[idx] = span{start, d.pos}
		}
	}
	b = append(b, '{')
	first := true
	for i, f := range s.Fields {
		v := values[i]
		if v.end == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = AppendJSONString(b, f.Name)
		b = append(b, ':')
		sub := Decoder{buf: d.buf[:v.end], pos: v.start}
		b = appendDynamicField(b, &sub, f.Type, st)
		if sub.err != nil {
			// Already placed: passed up as it is, not wrapped at every
			// level of a deeply nested value.
			if d.err == nil {
				d.err = sub.err
			}
			d.pos = len(d.buf)
			return b
		}
	}
	return append(b, '}')
}

// appendDynamicField writes a field's value: lists and maps carry a byte
// length at field level.
func appendDynamicField(b []byte, d *Decoder, t *Type, st *dynamicState) []byte {
	if t.Kind == KindList || t.Kind == KindMap {
		end := d.Begin()
		b = appendDynamicValue(b, d, t, false, st)
		d.Finish(end)
		return b
	}
	return appendDynamicValue(b, d, t, false, st)
}

// appendDynamicValue writes one value of type t; element says it is a list
// or map element, where a pointer has a presence byte.
func appendDynamicValue(b []byte, d *Decoder, t *Type, element bool, st *dynamicState) []byte {
	if element && t.Pointer {
		if !d.Present() {
			return append(b, "null"...)
		}
	}
	switch t.Kind {
	case KindBool:
		return strconv.AppendBool(b, d.Bool())
	case KindInt:
		return strconv.AppendInt(b, d.Int(max(t.Bits, 8)), 10)
	case KindUint:
		return strconv.AppendUint(b, d.Uint(max(t.Bits, 8)), 10)
	case KindFloat32:
		return appendDynamicFloat(b, float64(d.Float32()), 32)
	case KindFloat64:
		return appendDynamicFloat(b, d.Float64(), 64)
	case KindString:
		n := d.length()
		d.pos += n
		return AppendJSONStringBytes(b, d.buf[d.pos-n:d.pos])
	case KindBytes:
		p := d.Bytes()
		if p == nil {
			return append(b, "null"...)
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, p)
		return append(b, '"')
	case KindTime:
		b = append(b, '"')
		x := d.Time()
		layout := time.RFC3339Nano
		if _, offset := x.Zone(); offset == 0 && x.Location() != time.UTC {
			// Not "Z", which reads back as UTC: a time of another zone at
			// UTC's offset (time.Unix's and time.Now's on a host in UTC)
			// is encoded apart from UTC's, and a key holding it is found
			// by its row only if its row says so.
			layout = "2006-01-02T15:04:05.999999999-07:00"
		}
		b = x.AppendFormat(b, layout)
		return append(b, '"')
	case KindDuration:
		return strconv.AppendInt(b, int64(d.Duration()), 10)
	case KindStruct:
		s := t.Struct
		if t.Ref != "" {
			s = st.refs.resolve(st.scope, t.Ref)
		}
		if s == nil {
			d.Fail(fmt.Errorf("%w: schema refers to %q, which it does not describe", ErrMalformed, t.Ref))
			return b
		}
		// Counted as the generated code counts: the structs of recursive
		// types (and any reached through a Ref) a value is inside, anew in
		// a record of another package, which decodes itself.
		saved := *st
		if s.sealed {
			st.scope = s
		}
		if s.record && packageOf(s.Name) != st.pkg {
			st.pkg, st.depth = packageOf(s.Name), 0
		}
		if s.Recursive || t.Ref != "" {
			if st.depth++; st.depth > MaxDepth {
				d.Fail(fmt.Errorf("%w: %s values nested deeper than %d", ErrMalformed, s.Name, MaxDepth))
				return b
			}
		}
		end := d.Begin()
		b = appendDynamicStruct(b, d, s, end, st)
		d.Finish(end)
		st.scope, st.pkg, st.depth = saved.scope, saved.pkg, saved.depth
		return b
	case KindList:
		n := d.List(t.Go, elemKindOf(t.Elem), 1)
		if n < 0 {
			return append(b, "null"...)
		}
		b = append(b, '[')
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendDynamicValue(b, d, t.Elem, true, st)
		}
		return append(b, ']')
	case KindMap:
		n := d.Map(t.Go, t.Key.Kind, elemKindOf(t.Elem), 1)
		if n < 0 {
			return append(b, "null"...)
		}
		b = append(b, '{')
		for i := range n {
			if i > 0 {
				b = append(b, ',')
			}
			// A key is its value as a JSON string: a string (or base64
			// bytes) as it is, anything else as its JSON text.
			key := appendDynamicValue(nil, d, t.Key, true, st)
			if len(key) > 0 && key[0] == '"' {
				b = append(b, key...)
			} else {
				b = AppendJSONStringBytes(b, key)
			}
			b = append(b, ':')
			b = appendDynamicValue(b, d, t.Elem, true, st)
		}
		return append(b, '}')
	}
	d.Fail(fmt.Errorf("%w: unknown kind %d in schema", ErrMalformed, t.Kind))
	return b
}

func elemKindOf(t *Type) Kind {
	if t.Pointer {
		return t.Kind | PointerFlag
	}
	return t.Kind
}

func appendDynamicFloat(b []byte, f float64, bits int) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, `"NaN"`...)
	case math.IsInf(f, 1):
		return append(b, `"+Inf"`...)
	case math.IsInf(f, -1):
		return append(b, `"-Inf"`...)
	}
	out, _ := AppendJSONFloat(b, f, bits)
	return out
}

// dynamicState is what rendering a record's bytes keeps: the schema whose
// Refs are being resolved, the package of the record being read, and how
// many structs of recursive types the value is inside (as Decoder.Enter
// counts them).
type dynamicState struct {
	scope *Schema
	pkg   string
	depth int
	refs  refScope
}
