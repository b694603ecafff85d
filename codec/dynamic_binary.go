package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// AppendDynamicBinary appends the binary encoding of the record that text
// gives as JSON in the form AppendDynamicJSON writes (members named by the
// Go field names, or by the names of their members in the record's JSON
// where the schema has them (Field.JSON), []byte as base64, times as RFC 3339 strings, durations
// as nanoseconds, NaN and infinities as the strings "NaN", "+Inf" and
// "-Inf"), reading it with schema s alone: how a tool names a record key
// it has only seen rendered. A member the schema does not name, a value
// of the wrong kind or out of its type's range is an error; a member left
// out, or null, stands for the field's zero value (a nil pointer, slice
// or map), which is written as the record's own encoder writes it. The
// bytes are the record's own encoding of the value, but that a map's
// entries come in the order of their JSON text.
func AppendDynamicBinary(b []byte, s *Schema, text []byte) ([]byte, error) {
	st := &dynamicState{scope: s, pkg: packageOf(s.Name), refs: refScope{}}
	out, err := appendDynamicFields(b, s, text, st, 0)
	if err != nil {
		return b, fmt.Errorf("streamgen: encode %s from JSON: %w", s.Name, err)
	}
	return out, nil
}

// appendDynamicFields appends the fields of the JSON object text, each
// under its tag, in the schema's order.
func appendDynamicFields(b []byte, s *Schema, text []byte, st *dynamicState, depth int) ([]byte, error) {
	if depth > MaxDepth {
		return b, fmt.Errorf("%s values nested deeper than %d", s.Name, MaxDepth)
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(text, &members); err != nil || members == nil {
		return b, fmt.Errorf("%s is a JSON object, not %s", s.Name, clip(text))
	}
	values, err := fieldValues(s, members)
	if err != nil {
		return b, err
	}
	for i, f := range s.Fields {
		if f.Type == nil {
			return b, fmt.Errorf("%w: field %s of %s has no type", ErrMalformed, f.Name, s.Name)
		}
		v, ok := values[i], values[i] != nil
		if !ok || isNull(v) {
			if f.Type.Pointer {
				continue // a nil pointer field is left out
			}
			// A zero value is written, as the record's own encoder
			// writes every field but a nil pointer.
			v = zeroJSON(f.Type)
		}
		b = AppendTag(b, f.ID, f.Type.Kind)
		var err error
		if f.Type.Kind == KindList || f.Type.Kind == KindMap {
			start := len(b)
			b = BeginLength(b)
			if b, err = appendDynamicBinaryValue(b, f.Type, v, false, st, depth); err == nil {
				b = EndLength(b, start)
			}
		} else {
			b, err = appendDynamicBinaryValue(b, f.Type, v, false, st, depth)
		}
		if err != nil {
			return b, fmt.Errorf("%s.%s: %w", s.Name, f.Name, err)
		}
	}
	return b, nil
}

// fieldValues gives each field of s its member of members, found by the
// field's Go name, else by the name of its member in the record's JSON
// (Field.JSON), matched as encoding/json matches it: exactly, else
// without regard to case. A member that names no field, and a field
// named twice, are errors.
func fieldValues(s *Schema, members map[string]json.RawMessage) ([]json.RawMessage, error) {
	values := make([]json.RawMessage, len(s.Fields))
	// Go names first, then JSON names exactly, then folded, each name
	// taken by the first rule that finds it.
	rules := []func(f Field, name string) bool{
		func(f Field, name string) bool { return f.Name == name },
		func(f Field, name string) bool { j := jsonName(f); return j != "" && j == name },
		func(f Field, name string) bool {
			j := jsonName(f)
			return j != "" && string(FoldJSONName(nil, []byte(j))) == string(FoldJSONName(nil, []byte(name)))
		},
	}
	taken := make(map[string]bool, len(members))
	for _, match := range rules {
		for _, name := range slices.Sorted(maps.Keys(members)) {
			if taken[name] {
				continue
			}
			i := slices.IndexFunc(s.Fields, func(f Field) bool { return match(f, name) })
			if i < 0 {
				continue
			}
			if values[i] != nil {
				return nil, fmt.Errorf("%s's field %s is given twice, the second time as %q", s.Name, s.Fields[i].Name, name)
			}
			values[i], taken[name] = members[name], true
		}
	}
	for _, name := range slices.Sorted(maps.Keys(members)) {
		if !taken[name] {
			return nil, fmt.Errorf("%s has no field %q", s.Name, name)
		}
	}
	return values, nil
}

// jsonName is the name of f's member in its record's JSON, or "" if it
// has none.
func jsonName(f Field) string {
	switch f.JSON {
	case "":
		return f.Name
	case "-":
		return ""
	case "-,":
		return "-"
	}
	return f.JSON
}

// appendDynamicBinaryValue appends one value of type t given as JSON;
// element says it is a list or map element, where a pointer has a
// presence byte.
func appendDynamicBinaryValue(b []byte, t *Type, v json.RawMessage, element bool, st *dynamicState, depth int) ([]byte, error) {
	if element && t.Pointer {
		if isNull(v) {
			return append(b, 0), nil
		}
		b = append(b, 1)
	}
	switch t.Kind {
	case KindBool:
		var x bool
		if err := json.Unmarshal(v, &x); err != nil {
			return b, wrongJSON(t, v)
		}
		return AppendBool(b, x), nil
	case KindInt, KindDuration:
		bits := max(t.Bits, 8)
		if t.Kind == KindDuration {
			bits = 64
		}
		x, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, bits)
		if err != nil {
			return b, wrongJSON(t, v)
		}
		return AppendInt(b, x), nil
	case KindUint:
		x, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, max(t.Bits, 8))
		if err != nil {
			return b, wrongJSON(t, v)
		}
		return AppendUint(b, x), nil
	case KindFloat32, KindFloat64:
		bits := 64
		if t.Kind == KindFloat32 {
			bits = 32
		}
		var x float64
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			switch s {
			case "NaN":
				x = math.NaN()
			case "+Inf":
				x = math.Inf(1)
			case "-Inf":
				x = math.Inf(-1)
			default:
				return b, wrongJSON(t, v)
			}
		} else {
			// A JSON number, rounded to the float's width (so that
			// float32's shortest form reads back), refused out of range.
			var n json.Number
			if err := json.Unmarshal(v, &n); err != nil {
				return b, wrongJSON(t, v)
			}
			if x, err = strconv.ParseFloat(string(n), bits); err != nil {
				return b, wrongJSON(t, v)
			}
		}
		if bits == 32 {
			return AppendFloat32(b, float32(x)), nil
		}
		return AppendFloat64(b, x), nil
	case KindString:
		var x string
		if err := json.Unmarshal(v, &x); err != nil {
			return b, wrongJSON(t, v)
		}
		return AppendString(b, x), nil
	case KindBytes:
		if isNull(v) {
			return AppendBytes(b, nil), nil
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return b, wrongJSON(t, v)
		}
		p, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return b, wrongJSON(t, v)
		}
		return AppendBytes(b, p), nil // never nil: "" is empty, not nil
	case KindTime:
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return b, wrongJSON(t, v)
		}
		x, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return b, wrongJSON(t, v)
		}
		return AppendTime(b, x), nil
	case KindStruct:
		s := t.Struct
		if t.Ref != "" {
			s = st.refs.resolve(st.scope, t.Ref)
		}
		if s == nil {
			return b, fmt.Errorf("%w: schema refers to %q, which it does not describe", ErrMalformed, t.Ref)
		}
		saved := st.scope
		if s.sealed {
			st.scope = s
		}
		start := len(b)
		b = BeginLength(b)
		b, err := appendDynamicFields(b, s, v, st, depth+1)
		st.scope = saved
		if err != nil {
			return b, err
		}
		return EndLength(b, start), nil
	case KindList:
		if t.Elem == nil {
			return b, fmt.Errorf("%w: the list %s has no element type", ErrMalformed, t.Go)
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(v, &elems); err != nil {
			return b, wrongJSON(t, v)
		}
		if t.Len > 0 && len(elems) != t.Len {
			return b, fmt.Errorf("%s is not a %s: it has %d elements", clip(v), t.Go, len(elems))
		}
		if isNull(v) {
			return AppendList(b, elemKindOf(t.Elem), 0, true), nil
		}
		b = AppendList(b, elemKindOf(t.Elem), len(elems), false)
		for i, e := range elems {
			var err error
			if b, err = appendDynamicBinaryValue(b, t.Elem, e, true, st, depth+1); err != nil {
				return b, fmt.Errorf("[%d]: %w", i, err)
			}
		}
		return b, nil
	case KindMap:
		if t.Elem == nil || t.Key == nil {
			return b, fmt.Errorf("%w: the map %s has no key or value type", ErrMalformed, t.Go)
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(v, &m); err != nil {
			return b, wrongJSON(t, v)
		}
		if m == nil {
			return AppendMap(b, t.Key.Kind, elemKindOf(t.Elem), 0, true), nil
		}
		b = AppendMap(b, t.Key.Kind, elemKindOf(t.Elem), len(m), false)
		// In the order of their text: a record's own encoder may order
		// them otherwise (numbers by value), which decodes to the same map.
		for _, k := range slices.Sorted(maps.Keys(m)) {
			// A key is its value as a JSON string (AppendDynamicJSON): a
			// string, bytes or a time as it is, anything else as its
			// JSON text.
			key := json.RawMessage(k)
			if t.Key.Kind == KindString || t.Key.Kind == KindBytes || t.Key.Kind == KindTime {
				key, _ = json.Marshal(k)
			}
			var err error
			if b, err = appendDynamicBinaryValue(b, t.Key, key, true, st, depth+1); err != nil {
				return b, fmt.Errorf("key %s: %w", clip([]byte(k)), err)
			}
			if b, err = appendDynamicBinaryValue(b, t.Elem, m[k], true, st, depth+1); err != nil {
				return b, fmt.Errorf("[%s]: %w", clip([]byte(k)), err)
			}
		}
		return b, nil
	}
	return b, fmt.Errorf("%w: unknown kind %d in schema", ErrMalformed, t.Kind)
}

// isNull reports whether v is JSON's null.
func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// wrongJSON says that v is not a value of type t.
func wrongJSON(t *Type, v json.RawMessage) error {
	return fmt.Errorf("%s is not a %s", clip(v), t.Go)
}

// clip quotes JSON text for an error, cut to 60 bytes.
func clip(v []byte) string {
	if len(v) > 60 {
		return strconv.Quote(string(v[:60])) + "..."
	}
	return strconv.Quote(string(v))
}

// zeroJSON is the JSON of the zero value of t, not a pointer: what a
// member left out or null stands for.
func zeroJSON(t *Type) json.RawMessage {
	switch t.Kind {
	case KindBool:
		return json.RawMessage("false")
	case KindInt, KindUint, KindFloat32, KindFloat64, KindDuration:
		return json.RawMessage("0")
	case KindString:
		return json.RawMessage(`""`)
	case KindTime:
		return json.RawMessage(`"0001-01-01T00:00:00Z"`)
	case KindStruct:
		return json.RawMessage("{}")
	case KindList:
		if t.Len > 0 && t.Elem != nil {
			elem := zeroJSON(t.Elem)
			if t.Elem.Pointer {
				elem = json.RawMessage("null")
			}
			b := []byte{'['}
			for i := range t.Len {
				if i > 0 {
					b = append(b, ',')
				}
				b = append(b, elem...)
			}
			return append(b, ']')
		}
	}
	if t.Kind == KindList && strings.HasPrefix(t.Go, "[0]") {
		return json.RawMessage("[]") // an array of no elements, never nil
	}
	return json.RawMessage("null") // a nil slice, map or []byte
}
