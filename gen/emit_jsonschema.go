package gen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// jsonSchemaDraft is the JSON Schema dialect of the schemas the generator
// writes: draft-07, the one schema registries take by default.
const jsonSchemaDraft = "http://json-schema.org/draft-07/schema#"

// jsonSchemaVar emits the JSON Schema of record s's JSON, as
// StreamJSONSchema returns it: a constant, or, when s holds records of
// other packages, a variable that merges their schemas' definitions in
// (codec.JoinJSONSchemas), since only their own generated methods know
// their JSON.
func (e *emitter) jsonSchemaVar(s *Struct) jen.Code {
	text, foreign := jsonSchemaOf(s)
	name := "jsonSchema" + s.Helper
	lit := jen.Lit(text)
	if !strings.ContainsAny(text, "`\r") {
		lit = jen.Op("`" + text + "`") // easier to read than a quoted string
	}
	if len(foreign) == 0 {
		return jen.Const().Id(name).Op("=").Add(lit)
	}
	others := jen.Dict{}
	for _, f := range foreign {
		others[jen.Lit(definitionName(f))] = jen.Parens(jen.Op("*").Add(e.typeCode(f.Type))).Parens(jen.Nil()).Dot("StreamJSONSchema").Call()
	}
	return jen.Var().Id(name).Op("=").Qual(codecPath, "JoinJSONSchemas").Call(lit, jen.Map(jen.String()).String().Values(others))
}

// jsonSchemaOf returns the JSON Schema of record s's JSON object, as
// encoding/json writes it and the generated UnmarshalJSON reads it, and
// the records of other packages it refers to. Every struct type s holds
// is described once, under "definitions" keyed by its qualified name,
// and referred to from where it is held; s itself is described at the
// top and, when a struct it holds holds s again, among the definitions
// too. Objects are closed (additionalProperties false): MarshalJSON
// writes no member the schema does not name, and a registry checking
// backward compatibility (Confluent's default) then takes a field added
// to the record, which it refuses for an open object. UnmarshalJSON
// still skips members it does not know. A member is required where the
// decoder requires it (the record's key, event time and fields tagged
// `stream:"required"`).
func jsonSchemaOf(s *Struct) (string, []*Struct) {
	w := &jsonSchemaWriter{root: s, defined: map[*Struct]bool{}, foreignSeen: map[*Struct]bool{}}
	top := w.object(s)
	doc := jsonObject{}
	doc.add("$schema", jsonSchemaDraft)
	doc.add("title", s.Name)
	doc = append(doc, top...)
	if len(w.definitions) > 0 {
		doc.add("definitions", w.definitions)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		panic("jsonSchemaOf: " + err.Error()) // only strings, numbers and objects of them
	}
	return strings.TrimSuffix(b.String(), "\n"), w.foreign
}

type jsonSchemaWriter struct {
	root        *Struct
	definitions jsonObject
	defined     map[*Struct]bool
	foreign     []*Struct
	foreignSeen map[*Struct]bool
}

// object describes the JSON object of struct s.
func (w *jsonSchemaWriter) object(s *Struct) jsonObject {
	props := jsonObject{}
	var required []string
	for _, f := range s.JSON {
		member := w.value(f.Shape, f.Quoted)
		if f.Required {
			required = append(required, f.Name)
			if admitsNull(f.Shape) {
				// The decoder refuses null for a required member.
				member = jsonObject{{"allOf", []any{member, jsonObject{{"not", jsonObject{{"type", "null"}}}}}}}
			}
		}
		props.add(f.Name, member)
	}
	o := jsonObject{{"type", "object"}, {"properties", props}}
	if len(required) > 0 {
		o.add("required", required)
	}
	// Closed: MarshalJSON writes no other member, and a schema registry
	// then takes a new optional field as a backward compatible change
	// (adding one to an open object is not).
	o.add("additionalProperties", false)
	return o
}

// ref refers to the description of struct s, writing it among the
// definitions on first use; a record of another package is described by
// its own StreamJSONSchema, merged in by codec.JoinJSONSchemas.
func (w *jsonSchemaWriter) ref(s *Struct) jsonObject {
	switch {
	case s.Record && !s.Local:
		if !w.foreignSeen[s] {
			w.foreignSeen[s] = true
			w.foreign = append(w.foreign, s)
		}
	case !w.defined[s]:
		w.defined[s] = true
		i := len(w.definitions)
		w.definitions.add(definitionName(s), nil)
		w.definitions[i].value = w.object(s)
	}
	return jsonObject{{"$ref", "#/definitions/" + url.PathEscape(jsonPointerEscape(definitionName(s)))}}
}

// definitionName names struct s among the definitions: its qualified
// name, an anonymous struct's without the braces (a URI's fragment
// cannot hold them).
func definitionName(s *Struct) string {
	return strings.NewReplacer("{", ".", "}", "").Replace(s.Qualified)
}

// value describes a JSON value of shape sh; quoted is the json option
// "string", which puts a bool, number or string inside a JSON string.
func (w *jsonSchemaWriter) value(sh *Shape, quoted bool) any {
	if c := sh.Custom; c != nil {
		switch {
		case c.Marshal == "MarshalText":
			return jsonObject{{"type", "string"}}
		case c.Marshal != "" || c.Under == nil:
			return jsonObject{} // whatever its MarshalJSON writes
		}
		sh = c.Under
	}
	switch sh.Kind {
	case Bool:
		if quoted {
			return jsonObject{{"type", "string"}, {"enum", []string{"true", "false"}}}
		}
		return jsonObject{{"type", "boolean"}}
	case Int, Uint, Duration:
		// time.Duration is an int64 of nanoseconds to encoding/json.
		if quoted {
			return jsonObject{{"type", "string"}, {"pattern", "^" + integerPattern(sh) + "$"}}
		}
		o := jsonObject{{"type", "integer"}}
		if sh.Kind == Uint {
			o.add("minimum", 0)
			o.add("maximum", uint64(math.MaxUint64)>>(64-sh.Bits))
		} else {
			o.add("minimum", int64(math.MinInt64)>>(64-sh.Bits))
			o.add("maximum", int64(math.MaxInt64)>>(64-sh.Bits))
		}
		return o
	case Float:
		if quoted {
			return jsonObject{{"type", "string"}, {"pattern", `^-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$`}}
		}
		// The largest magnitude encoding/json writes, in its shortest
		// form; a larger number overflows and is refused.
		largest := json.Number("1.7976931348623157e308")
		if sh.Bits == 32 {
			largest = "3.4028235e38"
		}
		return jsonObject{{"type", "number"}, {"minimum", "-" + largest}, {"maximum", largest}}
	case String:
		switch {
		case sh.Number:
			return jsonObject{{"type", "number"}}
		case quoted:
			// A JSON string inside the string.
			return jsonObject{{"type", "string"}, {"pattern", `^"([^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"$`}}
		}
		return jsonObject{{"type", "string"}}
	case Bytes:
		// Padded standard base64, which validators need not check
		// from contentEncoding alone.
		return jsonObject{{"type", []string{"string", "null"}}, {"contentEncoding", "base64"},
			{"pattern", `^([A-Za-z0-9+/]{4})*([A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$`}}
	case Time:
		// RFC 3339 as time.Time reads it: an upper-case T and Z, no
		// leap second, an offset of less than a day.
		return jsonObject{{"type", "string"}, {"format", "date-time"},
			{"pattern", `^[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])$`}}
	case Pointer:
		return jsonObject{{"anyOf", []any{jsonObject{{"type", "null"}}, w.value(sh.Elem, quoted)}}}
	case Slice:
		return jsonObject{{"type", []string{"array", "null"}}, {"items", w.value(sh.Elem, false)}}
	case Array:
		return jsonObject{{"type", "array"}, {"items", w.value(sh.Elem, false)}, {"minItems", sh.Len}, {"maxItems", sh.Len}}
	case Map:
		o := jsonObject{{"type", []string{"object", "null"}}}
		if k := sh.Key.JSONKey; k == "int" || k == "uint" {
			o.add("propertyNames", jsonObject{{"pattern", "^" + integerPattern(sh.Key) + "$"}})
		}
		o.add("additionalProperties", w.value(sh.Elem, false))
		return o
	case StructShape:
		return w.ref(sh.Struct)
	}
	panic("jsonSchemaWriter.value: unknown shape")
}

// integerPattern is a regular expression of the decimal integers a
// value of integer shape sh holds, written as encoding/json writes them
// (no sign for 0 and positive numbers, no leading zero).
func integerPattern(sh *Shape) string {
	bits := sh.Bits // 64 for int, uint and time.Duration
	if sh.Kind == Uint {
		return decimalUpTo(strconv.FormatUint(math.MaxUint64>>(64-bits), 10))
	}
	most := strconv.FormatInt(math.MaxInt64>>(64-bits), 10)
	least := strconv.FormatInt(math.MinInt64>>(64-bits), 10)
	return "(-?" + decimalUpTo(most) + "|" + least + ")"
}

// decimalUpTo is a regular expression of the decimal numbers from 0 to
// most (digits, no leading zero): the numbers of fewer digits, then
// those of as many that are below most from some digit on, and most.
func decimalUpTo(most string) string {
	alts := []string{"0"}
	if len(most) > 1 {
		alts = append(alts, fmt.Sprintf("[1-9][0-9]{0,%d}", len(most)-2))
	}
	for i := range len(most) {
		lo := byte('0')
		if i == 0 {
			lo = '1'
		}
		if hi := most[i] - 1; hi >= lo {
			alt := most[:i] + "[" + string(lo) + "-" + string(hi) + "]"
			if rest := len(most) - i - 1; rest > 0 {
				alt += fmt.Sprintf("[0-9]{%d}", rest)
			}
			alts = append(alts, alt)
		}
	}
	return "(" + strings.Join(append(alts, most), "|") + ")"
}

// admitsNull says whether encoding/json may write null for a value of
// shape sh.
func admitsNull(sh *Shape) bool {
	if c := sh.Custom; c != nil {
		if c.Marshal != "" || c.Under == nil {
			return true
		}
		sh = c.Under
	}
	switch sh.Kind {
	case Pointer, Slice, Map, Bytes:
		return true
	}
	return false
}

// jsonPointerEscape escapes a name for a JSON Pointer (RFC 6901).
func jsonPointerEscape(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// jsonObject is a JSON object whose members keep their order.
type jsonObject []jsonMember

type jsonMember struct {
	key   string
	value any
}

func (o *jsonObject) add(key string, value any) { *o = append(*o, jsonMember{key, value}) }

// MarshalJSON writes the members in their order.
func (o jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(m.key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := json.Marshal(m.value)
		if err != nil {
			return nil, err
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
