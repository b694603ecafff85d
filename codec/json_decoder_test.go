package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// This file holds a hand-written decoder for a test struct, written the way
// generated UnmarshalJSON methods use JSONReader, and a checker that runs a
// document through it and through encoding/json (the oracle) and compares
// the results.

type jtInner struct {
	A int    `json:"a"`
	S string `json:"s"`
	L []int  `json:"l"`
}

type jtEvent struct {
	Name  string          `json:"name"`
	I     int             `json:"i"`
	I8    int8            `json:"i8"`
	I16   int16           `json:"i16"`
	I32   int32           `json:"i32"`
	I64   int64           `json:"i64"`
	U     uint            `json:"u"`
	U8    uint8           `json:"u8"`
	U16   uint16          `json:"u16"`
	U32   uint32          `json:"u32"`
	U64   uint64          `json:"u64"`
	F32   float32         `json:"f32"`
	F64   float64         `json:"f64"`
	B     bool            `json:"b"`
	Data  []byte          `json:"data"`
	At    time.Time       `json:"at"`
	Tags  []string        `json:"tags"`
	Inner jtInner         `json:"inner"`
	Ptr   *jtInner        `json:"ptr"`
	Items []jtInner       `json:"items"`
	Raw   json.RawMessage `json:"raw"`
	M     map[string]int  `json:"m"`
	MI    map[int8]string `json:"mi"`
	Arr   [2]int          `json:"arr"`
	Lower int             `json:"k"` // also matched by U+212A KELVIN SIGN
	Upper int             `json:"K"`
	SX    string          `json:"sx"` // matched by "ſX" (U+017F)
	Omega string          `json:"ω"`  // matched by "Ω" and U+2126 OHM SIGN
	Esz   string          `json:"straße"`
	Plain int             // no tag: key "Plain"
}

// jtEventPlain is jtEvent without methods: the oracle's type.
type jtEventPlain jtEvent

// UnmarshalJSON is what the generator will emit for jtEvent.
func (e *jtEvent) UnmarshalJSON(data []byte) error {
	var r JSONReader
	r.Reset(data)
	jtDecodeEvent(&r, e, "Go value of type codec.jtEventPlain")
	return r.Finish()
}

// jtEventNames are the JSON names of jtEvent's fields in field order, and
// jtEventFolded their folded forms, for the case-insensitive fallback.
var (
	jtEventNames  = []string{"name", "i", "i8", "i16", "i32", "i64", "u", "u8", "u16", "u32", "u64", "f32", "f64", "b", "data", "at", "tags", "inner", "ptr", "items", "raw", "m", "mi", "arr", "k", "K", "sx", "ω", "straße", "Plain"}
	jtEventFolded = jtFoldAll(jtEventNames)
	jtInnerNames  = []string{"a", "s", "l"}
	jtInnerFolded = jtFoldAll(jtInnerNames)
)

func jtFoldAll(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(FoldJSONName(nil, []byte(n)))
	}
	return out
}

// jtLookup finds the field for key as encoding/json does: an exact match,
// else the first field whose folded name matches the folded key.
func jtLookup(key []byte, names, folded []string) int {
	for i, n := range names {
		if string(key) == n {
			return i
		}
	}
	var buf [32]byte
	f := FoldJSONName(buf[:0], key)
	for i, n := range folded {
		if string(f) == n {
			return i
		}
	}
	return -1
}

// jtGrowAt gives s an element at index i the way encoding/json grows a
// slice it decodes into (reusing elements within the capacity).
func jtGrowAt[T any](s []T, i int) []T {
	if i < len(s) {
		return s
	}
	if i < cap(s) {
		return s[:i+1]
	}
	var zero T
	return append(s, zero)
}

func jtField(name, typ string) string {
	return "Go struct field jtEventPlain." + name + " of type " + typ
}

func jtDecodeEvent(r *JSONReader, e *jtEvent, target string) {
	if !r.BeginObject(target) {
		return
	}
	for {
		key, ok := r.NextKey()
		if !ok {
			return
		}
		switch jtLookup(key, jtEventNames, jtEventFolded) {
		case 0:
			if v, ok := r.String(jtField("name", "string")); ok {
				e.Name = v
			}
		case 1:
			if v, ok := r.Int(jtField("i", "int"), strconv.IntSize); ok {
				e.I = int(v)
			}
		case 2:
			if v, ok := r.Int(jtField("i8", "int8"), 8); ok {
				e.I8 = int8(v)
			}
		case 3:
			if v, ok := r.Int(jtField("i16", "int16"), 16); ok {
				e.I16 = int16(v)
			}
		case 4:
			if v, ok := r.Int(jtField("i32", "int32"), 32); ok {
				e.I32 = int32(v)
			}
		case 5:
			if v, ok := r.Int(jtField("i64", "int64"), 64); ok {
				e.I64 = v
			}
		case 6:
			if v, ok := r.Uint(jtField("u", "uint"), strconv.IntSize); ok {
				e.U = uint(v)
			}
		case 7:
			if v, ok := r.Uint(jtField("u8", "uint8"), 8); ok {
				e.U8 = uint8(v)
			}
		case 8:
			if v, ok := r.Uint(jtField("u16", "uint16"), 16); ok {
				e.U16 = uint16(v)
			}
		case 9:
			if v, ok := r.Uint(jtField("u32", "uint32"), 32); ok {
				e.U32 = uint32(v)
			}
		case 10:
			if v, ok := r.Uint(jtField("u64", "uint64"), 64); ok {
				e.U64 = v
			}
		case 11:
			if v, ok := r.Float(jtField("f32", "float32"), 32); ok {
				e.F32 = float32(v)
			}
		case 12:
			if v, ok := r.Float(jtField("f64", "float64"), 64); ok {
				e.F64 = v
			}
		case 13:
			if v, ok := r.Bool(jtField("b", "bool")); ok {
				e.B = v
			}
		case 14:
			if r.Null() {
				e.Data = nil
			} else if v, ok := r.Bytes(jtField("data", "[]uint8")); ok {
				e.Data = v
			}
		case 15:
			if v, ok := r.Time(jtField("at", "time.Time")); ok {
				e.At = v
			}
		case 16:
			if r.Null() {
				e.Tags = nil
			} else if r.BeginArray(jtField("tags", "[]string")) {
				i := 0
				for r.NextElement() {
					e.Tags = jtGrowAt(e.Tags, i)
					if v, ok := r.String(jtField("tags", "string")); ok {
						e.Tags[i] = v
					}
					i++
				}
				e.Tags = e.Tags[:i]
				if i == 0 {
					e.Tags = []string{}
				}
			}
		case 17:
			jtDecodeInner(r, &e.Inner, "inner", jtField("inner", "codec.jtInner"))
		case 18:
			if r.Null() {
				e.Ptr = nil
			} else {
				// encoding/json allocates the pointer before it looks at
				// the value, even when the value turns out to be a type
				// error.
				if e.Ptr == nil {
					e.Ptr = new(jtInner)
				}
				jtDecodeInner(r, e.Ptr, "ptr", jtField("ptr", "codec.jtInner"))
			}
		case 19:
			if r.Null() {
				e.Items = nil
			} else if r.BeginArray(jtField("items", "[]codec.jtInner")) {
				i := 0
				for r.NextElement() {
					e.Items = jtGrowAt(e.Items, i)
					jtDecodeInner(r, &e.Items[i], "items", jtField("items", "codec.jtInner"))
					i++
				}
				e.Items = e.Items[:i]
				if i == 0 {
					e.Items = []jtInner{}
				}
			}
		case 20:
			if v, ok := r.RawValue(); ok {
				e.Raw = append(e.Raw[:0], v...)
			}
		case 21:
			if r.Null() {
				e.M = nil
			} else if r.BeginObject(jtField("m", "map[string]int")) {
				if e.M == nil {
					e.M = map[string]int{}
				}
				for {
					k, ok := r.NextKey()
					if !ok {
						break
					}
					ks := string(k)
					// The element is stored even after a type error or
					// null, as encoding/json does (it decodes into a zero
					// element).
					v, _ := r.Int(jtField("m", "int"), strconv.IntSize)
					e.M[ks] = int(v)
				}
			}
		case 22:
			if r.Null() {
				e.MI = nil
			} else if r.BeginObject(jtField("mi", "map[int8]string")) {
				if e.MI == nil {
					e.MI = map[int8]string{}
				}
				for {
					k, ok := r.NextKey()
					if !ok {
						break
					}
					n, keyErr := ParseJSONIntKey(r, k, 8, jtField("mi", "int8"))
					v, _ := r.String(jtField("mi", "string"))
					if keyErr != nil {
						r.KeyError(keyErr)
					} else {
						e.MI[int8(n)] = v
					}
				}
			}
		case 23:
			if r.BeginArray(jtField("arr", "[2]int")) {
				i := 0
				for r.NextElement() {
					if i < len(e.Arr) {
						if v, ok := r.Int(jtField("arr", "int"), strconv.IntSize); ok {
							e.Arr[i] = int(v)
						}
					} else {
						r.Skip()
					}
					i++
				}
				for ; i < len(e.Arr); i++ {
					e.Arr[i] = 0
				}
			}
		case 24:
			if v, ok := r.Int(jtField("k", "int"), strconv.IntSize); ok {
				e.Lower = int(v)
			}
		case 25:
			if v, ok := r.Int(jtField("K", "int"), strconv.IntSize); ok {
				e.Upper = int(v)
			}
		case 26:
			if v, ok := r.String(jtField("sx", "string")); ok {
				e.SX = v
			}
		case 27:
			if v, ok := r.String(jtField("ω", "string")); ok {
				e.Omega = v
			}
		case 28:
			if v, ok := r.String(jtField("straße", "string")); ok {
				e.Esz = v
			}
		case 29:
			if v, ok := r.Int(jtField("Plain", "int"), strconv.IntSize); ok {
				e.Plain = int(v)
			}
		default:
			r.Skip()
		}
	}
}

// jtDecodeInner decodes a jtInner reached through the field path (a JSON
// name): encoding/json names the innermost struct type and the path of
// JSON names from the top in its messages.
func jtDecodeInner(r *JSONReader, v *jtInner, path, target string) {
	if !r.BeginObject(target) {
		return
	}
	field := func(name, typ string) string {
		return "Go struct field jtInner." + path + "." + name + " of type " + typ
	}
	for {
		key, ok := r.NextKey()
		if !ok {
			return
		}
		switch jtLookup(key, jtInnerNames, jtInnerFolded) {
		case 0:
			if n, ok := r.Int(field("a", "int"), strconv.IntSize); ok {
				v.A = int(n)
			}
		case 1:
			if s, ok := r.String(field("s", "string")); ok {
				v.S = s
			}
		case 2:
			if r.Null() {
				v.L = nil
			} else if r.BeginArray(field("l", "[]int")) {
				i := 0
				for r.NextElement() {
					v.L = jtGrowAt(v.L, i)
					if n, ok := r.Int(field("l", "int"), strconv.IntSize); ok {
						v.L[i] = int(n)
					}
					i++
				}
				v.L = v.L[:i]
				if i == 0 {
					v.L = []int{}
				}
			}
		default:
			r.Skip()
		}
	}
}

// jtStripOffset removes the " (offset N)" suffix of a JSONError message.
func jtStripOffset(s string) string {
	if i := strings.LastIndex(s, " (offset "); i >= 0 && strings.HasSuffix(s, ")") {
		return s[:i]
	}
	return s
}

// jtCheckErr compares an error from the reader with encoding/json's error
// for the same document and returns a description of the difference, or
// "". Beyond accept/reject it checks the kind of error, the message and
// the offset.
func jtCheckErr(got, want error) string {
	if (got == nil) != (want == nil) {
		return fmt.Sprintf("error mismatch:\n got %v\nwant %v", got, want)
	}
	if got == nil {
		return ""
	}
	var je *JSONError
	if !errors.As(got, &je) || je != got {
		return fmt.Sprintf("reader error %T is not a *JSONError: %v", got, got)
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(want, &se):
		if !je.Syntax || je.Msg != se.Error() || je.Offset != se.Offset {
			return fmt.Sprintf("syntax error mismatch:\n got %v (syntax=%v)\nwant %v (offset %d)", got, je.Syntax, want, se.Offset)
		}
		if got.Error() != "json: "+se.Error()+" (offset "+strconv.FormatInt(se.Offset, 10)+")" {
			return fmt.Sprintf("bad syntax error text %q", got.Error())
		}
	case errors.As(want, &te):
		if je.Syntax || je.Err != nil || jtStripOffset(got.Error()) != te.Error() || je.Offset != te.Offset {
			return fmt.Sprintf("type error mismatch:\n got %v\nwant %v (offset %d)", got, want, te.Offset)
		}
	default:
		// An error from an Unmarshaler (time) or from base64: the reader
		// wraps it.
		if je.Syntax || je.Err == nil || je.Err.Error() != want.Error() {
			return fmt.Sprintf("wrapped error mismatch:\n got %v\nwant %v (%T)", got, want, want)
		}
	}
	return ""
}

// jtAbort reports whether err (from encoding/json) stopped decoding part
// way (a syntax error found before decoding, or an error from an
// Unmarshaler), so that the decoded values are not comparable.
func jtAbort(err error) bool {
	if err == nil {
		return false
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return false
	}
	var ce base64.CorruptInputError
	return !errors.As(err, &ce)
}

// jtCompare decodes doc with both decoders and returns a description of
// any difference, or "".
func jtCompare(doc []byte) string {
	var got jtEvent
	gerr := got.UnmarshalJSON(doc)
	var want jtEventPlain
	werr := json.Unmarshal(doc, &want)
	if d := jtCheckErr(gerr, werr); d != "" {
		// A bad int map key and a bad value in the same member are
		// reported in the other order: the reader's caller checks the key
		// first (see TypeError). Both are type errors.
		var je *JSONError
		if errors.As(gerr, &je) && !je.Syntax && je.Err == nil && !jtAbort(werr) &&
			(strings.Contains(gerr.Error(), ".mi of type") || strings.Contains(werr.Error(), ".mi of type")) {
			return ""
		}
		return d
	}
	if jtAbort(werr) {
		return ""
	}
	w := jtEvent(want)
	if !reflect.DeepEqual(&got, &w) {
		// encoding/json decodes an array into the []byte already there,
		// so a null or bad element keeps the old byte; Bytes returns a
		// new slice. Only the lengths can be compared then.
		if len(got.Data) == len(w.Data) && bytes.Contains(doc, []byte("[")) {
			got.Data, w.Data = nil, nil
			if reflect.DeepEqual(&got, &w) {
				return ""
			}
		}
		return fmt.Sprintf("value mismatch:\n got %+v\nwant %+v", got, w)
	}
	if gerr == nil && !jtSameFloatBits(got, w) {
		return fmt.Sprintf("float bits differ: got %v %v want %v %v", got.F32, got.F64, w.F32, w.F64)
	}
	return ""
}

// jtSameFloatBits catches -0 versus 0, which DeepEqual does not.
func jtSameFloatBits(a, b jtEvent) bool {
	return fmt.Sprint(a.F32, a.F64) == fmt.Sprint(b.F32, b.F64)
}

func jtMustMatch(t *testing.T, doc []byte) {
	t.Helper()
	if d := jtCompare(doc); d != "" {
		t.Errorf("document %q:\n%s", doc, d)
	}
}
