package gen

import (
	"encoding/json"
	"fmt"
	"go/types"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/streamgen/streamgen/codec"
)

// appendJSON emits appendJSON<Helper>(b, v) ([]byte, error), writing v as
// encoding/json does. Each member is written with a leading comma; the
// first comma is then turned into the opening brace.
func (e *emitter) appendJSON(s *Struct) jen.Code {
	e.function(e.isType, "b", "v", "err", "start", "depth")
	params, check := e.depthParams(s, "JSONNestedTooDeep")
	defer func() { e.depth = false }()
	sig := jen.Func().Id("appendJSON"+s.Helper).
		Params(append([]jen.Code{e.id("b").Index().Byte(), e.id("v").Op("*").Add(e.typeCode(s.Type))}, params...)...).
		Params(jen.Index().Byte(), jen.Error())
	if len(s.JSON) == 0 {
		return sig.Block(jen.Return(jen.Append(e.id("b"), jen.Lit("{}").Op("...")), jen.Nil()))
	}
	body := append(check,
		jen.Var().Id(e.local("err")).Error(),
		e.id("start").Op(":=").Len(e.id("b")),
	)
	allOptional := true
	for _, f := range s.JSON {
		x := e.id("v")
		for _, p := range f.Path {
			x = x.Dot(p)
		}
		key, _ := json.Marshal(f.Name) // HTML-escaped, as encoding/json writes keys
		write := []jen.Code{e.id("b").Op("=").Append(e.id("b"), jen.Lit(","+string(key)+":").Op("..."))}
		if f.Quoted {
			write = append(write, e.appendQuotedJSON(f.Shape, x)...)
		} else {
			write = append(write, e.appendJSONValue(f.Shape, x)...)
		}
		cond := e.jsonPresent(f, x)
		if via := e.embeddedNotNil(f); via != nil {
			if cond != nil {
				via = jen.Add(via).Op("&&").Add(cond)
			}
			cond = via
		}
		if cond == nil {
			allOptional = false
			body = append(body, write...)
		} else {
			body = append(body, jen.If(cond).Block(write...))
		}
	}
	closing := []jen.Code{
		e.id("b").Index(e.id("start")).Op("=").LitRune('{'),
		e.id("b").Op("=").Append(e.id("b"), jen.LitRune('}')),
	}
	if allOptional {
		body = append(body, jen.If(jen.Len(e.id("b")).Op("==").Id(e.local("start"))).Block(
			jen.Return(jen.Append(e.id("b"), jen.Lit("{}").Op("...")), e.err()),
		))
	}
	body = append(body, closing...)
	body = append(body, jen.Return(e.id("b"), e.err()))
	return sig.Block(body...)
}

// embeddedNotNil is the condition that every pointer to an embedded
// struct on the way to the promoted field f is set, or nil if there is none.
func (e *emitter) embeddedNotNil(f *JSONField) jen.Code {
	var cond *jen.Statement
	x := e.id("v")
	for k, t := range f.Ptrs {
		x = x.Clone().Dot(f.Path[k])
		if t == nil {
			continue
		}
		if cond == nil {
			cond = x.Clone().Op("!=").Nil()
		} else {
			cond = cond.Op("&&").Add(x.Clone()).Op("!=").Nil()
		}
	}
	if cond == nil {
		return nil
	}
	return cond
}

// allocEmbedded allocates every nil pointer to an embedded struct on the
// way to the promoted field f, as encoding/json does before it reads the
// field's value.
func (e *emitter) allocEmbedded(f *JSONField) []jen.Code {
	var out []jen.Code
	x := e.id("v")
	for k, t := range f.Ptrs {
		x = x.Clone().Dot(f.Path[k])
		if t != nil {
			out = append(out, jen.If(x.Clone().Op("==").Nil()).Block(x.Clone().Op("=").New(e.typeCode(t))))
		}
	}
	return out
}

// jsonPresent is the condition under which an omitempty or omitzero member
// is written, or nil when it always is.
func (e *emitter) jsonPresent(f *JSONField, x *jen.Statement) jen.Code {
	var conds []jen.Code
	if f.OmitEmpty {
		if c := notEmpty(f.Shape, x); c != nil {
			conds = append(conds, c)
		}
	}
	if f.OmitZero {
		conds = append(conds, e.notZero(f.Shape, x))
	}
	switch len(conds) {
	case 0:
		return nil
	case 1:
		return conds[0]
	}
	return jen.Add(conds[0]).Op("&&").Add(conds[1])
}

// omittingOption returns the option ("omitempty" or "omitzero") under
// which MarshalJSON may leave member f out, or "" when it always writes
// it: omitempty never leaves out a struct, as in encoding/json.
func omittingOption(f *JSONField) string {
	switch {
	case f.OmitZero:
		return "omitzero"
	case f.OmitEmpty && notEmpty(f.Shape, jen.Id("x")) != nil:
		return "omitempty"
	}
	return ""
}

// notEmpty is encoding/json's !isEmptyValue for omitempty. Structs (and
// time.Time) are never empty; nil means "always written". A type with
// encoding methods is empty by its value's kind, as in encoding/json.
func notEmpty(s *Shape, x *jen.Statement) jen.Code {
	if c := s.Custom; c != nil {
		if c.Under == nil {
			return opaqueNotEmpty(s.Type, x)
		}
		s = c.Under
	}
	switch s.Kind {
	case Bool:
		return jen.Bool().Parens(x.Clone())
	case Int, Uint, Float, Duration:
		return x.Clone().Op("!=").Lit(0)
	case String, Bytes, Slice, Map:
		return jen.Len(x.Clone()).Op("!=").Lit(0)
	case Array:
		if s.Len == 0 {
			return jen.False()
		}
		return nil
	case Pointer:
		return x.Clone().Op("!=").Nil()
	}
	return nil
}

// notZero is encoding/json's test for omitzero: the type's IsZero method if
// it has one, else the zero value (nil for slices and maps, not empty).
func (e *emitter) notZero(s *Shape, x *jen.Statement) jen.Code {
	if hasIsZero(s.Type) {
		if s.Kind == Pointer {
			return x.Clone().Op("!=").Nil().Op("&&").Op("!").Add(x.Clone()).Dot("IsZero").Call()
		}
		return jen.Op("!").Add(x.Clone()).Dot("IsZero").Call()
	}
	if zeroByLiteral(s) {
		// Comparable, or jsonFields refuses omitzero.
		return x.Clone().Op("!=").Parens(jen.Add(e.typeCode(s.Type)).Values())
	}
	if c := s.Custom; c != nil {
		if c.Under == nil {
			if u, ok := s.Type.Underlying().(*types.Basic); ok && u.Kind() == types.Uintptr {
				return x.Clone().Op("!=").Lit(0)
			}
			return x.Clone().Op("!=").Nil() // a chan, func, interface or unsafe.Pointer
		}
		s = c.Under
	}
	switch s.Kind {
	case Bool:
		return jen.Bool().Parens(x.Clone())
	case Int, Uint, Float, Duration:
		return x.Clone().Op("!=").Lit(0)
	case String:
		return jen.Len(x.Clone()).Op("!=").Lit(0)
	}
	return x.Clone().Op("!=").Nil() // pointers, slices, maps, []byte
}

// opaqueNotEmpty is encoding/json's !isEmptyValue for a type that encodes
// itself and whose value the generator does not model: a struct, chan or
// func is never empty, an interface is empty when nil, a uintptr when 0.
func opaqueNotEmpty(t types.Type, x *jen.Statement) jen.Code {
	switch u := t.Underlying().(type) {
	case *types.Interface:
		return x.Clone().Op("!=").Nil()
	case *types.Basic:
		if u.Kind() == types.Uintptr {
			return x.Clone().Op("!=").Lit(0)
		}
	}
	return nil
}

// zeroByLiteral reports whether omitzero compares a value of shape s with
// its zero composite literal: a struct or an array, or an opaque type.
func zeroByLiteral(s *Shape) bool {
	if c := s.Custom; c != nil {
		if c.Under == nil {
			switch s.Type.Underlying().(type) {
			case *types.Struct, *types.Array:
				return true
			}
			return false
		}
		s = c.Under
	}
	return s.Kind == StructShape || s.Kind == Array
}

// hasIsZero reports whether t (or *t) has an IsZero() bool method, which
// encoding/json's omitzero calls.
func hasIsZero(t types.Type) bool {
	for _, recv := range []types.Type{t, types.NewPointer(t)} {
		if sel := types.NewMethodSet(recv).Lookup(nil, "IsZero"); sel != nil {
			if sig, ok := sel.Type().(*types.Signature); ok && sig.Params().Len() == 0 &&
				sig.Results().Len() == 1 && types.Identical(sig.Results().At(0).Type(), types.Typ[types.Bool]) {
				return true
			}
		}
	}
	return false
}

// jsonCall is b = codec.fn(b, args...).
func (e *emitter) jsonCall(fn string, args ...jen.Code) jen.Code {
	return e.id("b").Op("=").Qual(codecPath, fn).Call(append([]jen.Code{e.id("b")}, args...)...)
}

// jsonCallErr is b, err = codec.fn(b, args...) with an early return.
func (e *emitter) jsonCallErr(call jen.Code) jen.Code {
	return jen.If(jen.List(e.id("b"), e.err()).Op("=").Add(call), e.err().Op("!=").Nil()).Block(
		jen.Return(e.id("b"), e.err()),
	)
}

// appendJSONValue appends the value x of shape s (x is addressable).
func (e *emitter) appendJSONValue(s *Shape, x *jen.Statement) []jen.Code {
	null := e.id("b").Op("=").Append(e.id("b"), jen.Lit("null").Op("..."))
	if c := s.Custom; c != nil {
		if c.Marshal != "" {
			return []jen.Code{e.marshalJSON(c, addr(x), s.Type)}
		}
		s = c.Under
	}
	switch s.Kind {
	case Bool:
		return []jen.Code{e.jsonCall("AppendJSONBool", e.to(s, "bool", x))}
	case Int, Duration:
		return []jen.Code{e.jsonCall("AppendJSONInt", e.to(s, "int64", x))}
	case Uint:
		return []jen.Code{e.jsonCall("AppendJSONUint", e.to(s, "uint64", x))}
	case Float:
		return []jen.Code{e.jsonCallErr(jen.Qual(codecPath, "AppendJSONFloat").Call(e.id("b"), e.to(s, "float64", x), jen.Lit(s.Bits)))}
	case String:
		if s.Number {
			return []jen.Code{e.jsonCallErr(jen.Qual(codecPath, "AppendJSONNumber").Call(e.id("b"), e.to(s, "string", x)))}
		}
		return []jen.Code{e.jsonCall("AppendJSONString", e.to(s, "string", x))}
	case Bytes:
		return []jen.Code{e.jsonCall("AppendJSONBytes", e.byteView(s, x))}
	case Time:
		return []jen.Code{e.jsonCallErr(jen.Qual(codecPath, "AppendJSONTime").Call(e.id("b"), x))}
	case Pointer:
		if c := s.Elem.Custom; c != nil && c.Marshal != "" {
			// The pointer has the method too, and encoding/json calls it
			// on the pointer: errors name the pointer type.
			return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(null).Else().Block(e.marshalJSON(c, x, s.Type))}
		}
		return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(null).Else().Block(
			e.appendJSONValue(s.Elem, deref(x))...,
		)}
	case Slice, Array:
		i := e.fresh("i")
		loop := []jen.Code{
			e.id("b").Op("=").Append(e.id("b"), jen.LitRune('[')),
			jen.For(jen.Id(i).Op(":=").Range().Add(x.Clone())).Block(append([]jen.Code{
				jen.If(jen.Id(i).Op(">").Lit(0)).Block(e.id("b").Op("=").Append(e.id("b"), jen.LitRune(','))),
			}, e.appendJSONValue(s.Elem, x.Clone().Index(jen.Id(i)))...)...),
			e.id("b").Op("=").Append(e.id("b"), jen.LitRune(']')),
		}
		if s.Kind == Array {
			return loop
		}
		return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(null).Else().Block(loop...)}
	case Map:
		i, k, val := e.fresh("i"), e.fresh("k"), e.fresh("val")
		sorted := "SortedKeys"
		var key []jen.Code
		switch s.Key.JSONKey {
		case "text":
			return e.appendJSONTextKeyMap(s, x)
		case "string":
			key = []jen.Code{e.jsonCall("AppendJSONString", e.to(s.Key, "string", jen.Id(k)))}
		case "int":
			sorted = "SortedIntKeys"
			key = []jen.Code{
				e.id("b").Op("=").Append(e.id("b"), jen.LitRune('"')),
				e.jsonCall("AppendJSONInt", e.to(s.Key, "int64", jen.Id(k))),
				e.id("b").Op("=").Append(e.id("b"), jen.LitRune('"')),
			}
		case "uint":
			sorted = "SortedIntKeys"
			key = []jen.Code{
				e.id("b").Op("=").Append(e.id("b"), jen.LitRune('"')),
				e.jsonCall("AppendJSONUint", e.to(s.Key, "uint64", jen.Id(k))),
				e.id("b").Op("=").Append(e.id("b"), jen.LitRune('"')),
			}
		}
		body := []jen.Code{jen.If(jen.Id(i).Op(">").Lit(0)).Block(e.id("b").Op("=").Append(e.id("b"), jen.LitRune(',')))}
		if sorted == "SortedKeys" {
			// String keys: the entries sorted by key, which is the order
			// of encoding/json's (byte-wise), with no lookups.
			entry := e.fresh("entry")
			body = append(body, jen.List(jen.Id(k), jen.Id(val)).Op(":=").Id(entry).Dot("Key").Op(",").Id(entry).Dot("Value"))
			body = append(body, key...)
			body = append(body, e.id("b").Op("=").Append(e.id("b"), jen.LitRune(':')))
			body = append(body, e.appendJSONValue(s.Elem, jen.Id(val))...)
			decl, entries := e.orderedEntries(s, x)
			return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(null).Else().Block(append(append([]jen.Code{
				e.id("b").Op("=").Append(e.id("b"), jen.LitRune('{')),
			}, decl...),
				jen.For(jen.List(jen.Id(i), jen.Id(entry)).Op(":=").Range().Add(entries)).Block(body...),
				e.id("b").Op("=").Append(e.id("b"), jen.LitRune('}')),
			)...)}
		}
		body = append(body, key...)
		body = append(body,
			e.id("b").Op("=").Append(e.id("b"), jen.LitRune(':')),
			jen.Id(val).Op(":=").Add(x.Clone()).Index(jen.Id(k)),
		)
		body = append(body, e.appendJSONValue(s.Elem, jen.Id(val))...)
		return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(null).Else().Block(
			e.id("b").Op("=").Append(e.id("b"), jen.LitRune('{')),
			jen.For(jen.List(jen.Id(i), jen.Id(k)).Op(":=").Range().Qual(codecPath, sorted).Call(x.Clone())).Block(body...),
			e.id("b").Op("=").Append(e.id("b"), jen.LitRune('}')),
		)}
	case StructShape:
		if foreignRecord(s.Struct) {
			return []jen.Code{e.jsonCallErr(x.Clone().Dot("AppendJSON").Call(e.id("b")))}
		}
		return []jen.Code{e.jsonCallErr(jen.Id("appendJSON" + s.Struct.Helper).Call(append([]jen.Code{e.id("b"), addr(x)}, e.depthArgs(s.Struct)...)...))}
	}
	panic("appendJSONValue: unknown shape")
}

// readJSON emits readJSON<Helper>(r, v): the members of an object matched
// to fields as encoding/json matches them (exact name first, then
// case-insensitively), unknown members skipped.
//
// For a struct with required members it also counts, in a
// codec.RequiredSet, the members of required fields it reads (a bit each,
// in the order of requiredMembers) and checks them when the object ends,
// and it refuses null in place of the object (codec.BeginRequired).
func (e *emitter) readJSON(s *Struct) jen.Code {
	e.function(e.isType, "r", "v", "field", "folded")
	e.jsonOK, e.jsonKey = e.fresh("ok"), e.fresh("key")
	required := requiredMembers(s)
	var seen string
	var fields jen.Code
	if len(required) > 0 {
		seen = e.fresh("required")
		fields = jen.Op("&").Id(requiredVar(s))
	}
	target := "Go value of type " + e.goName(s.Type)
	structName := ""
	if n, ok := s.Type.(*types.Named); ok {
		structName = n.Obj().Name()
	}
	var exact, fold, read []jen.Code
	seenFold := map[string]bool{}
	for i, f := range s.JSON {
		exact = append(exact, jen.Case(jen.Lit(f.Name)).Block(e.id("field").Op("=").Lit(i)))
		folded := string(codec.FoldJSONName(nil, []byte(f.Name)))
		if !seenFold[folded] {
			seenFold[folded] = true
			fold = append(fold, jen.Case(jen.Lit(folded)).Block(e.id("field").Op("=").Lit(i)))
		}
		x := e.id("v")
		for _, p := range f.Path {
			x = x.Dot(p)
		}
		// Type errors name the field as encoding/json does: the struct's
		// name (empty for an anonymous struct), then the Go names of the
		// embedded structs the field is promoted from and its JSON name.
		fieldTarget := "Go value of type " + e.goName(f.Shape.Type)
		path := strings.Join(append(slices.Clone(f.Path[:len(f.Path)-1]), f.Name), ".")
		inField := e.id("r").Dot("InField").Call(jen.Lit(structName), jen.Lit(path))
		var body []jen.Code
		if bit, ok := required[f]; ok {
			body = append(body, jen.Id(seen).Dot("Mark").Call(e.id("r"), jen.Lit(1).Op("<<").Lit(bit)))
		}
		body = append(body, e.allocEmbedded(f)...)
		if f.Quoted {
			body = append(body, e.readQuotedJSON(f.Shape, x)...)
		} else {
			body = append(body, e.readJSONValue(f.Shape, x, fieldTarget)...)
		}
		read = append(read, jen.Case(jen.Lit(i)).Block(append(body, inField)...))
	}
	read = append(read, jen.Default().Block(e.id("r").Dot("Unknown").Call(jen.Id(e.jsonKey))))
	sig := jen.Func().Id("readJSON"+s.Helper).
		Params(e.id("r").Op("*").Qual(codecPath, "JSONReader"), e.id("v").Op("*").Add(e.typeCode(s.Type)))
	begin := jen.If(jen.Op("!").Id(e.local("r")).Dot("BeginObject").Call(jen.Lit(target))).Block(jen.Return())
	end := jen.Return()
	if len(required) > 0 {
		begin = jen.If(jen.Op("!").Id(e.local("r")).Dot("BeginRequired").Call(jen.Lit(target), fields)).Block(jen.Return()).
			Line().Var().Id(seen).Qual(codecPath, "RequiredSet")
		end = jen.Id(seen).Dot("End").Call(e.id("r"), fields).Line().Return()
	}
	if len(s.JSON) == 0 {
		return sig.Block(begin, jen.For(jen.List(jen.Id(e.jsonKey), jen.Id(e.jsonOK)).Op(":=").Id(e.local("r")).Dot("NextKey").Call(), jen.Id(e.jsonOK), jen.List(jen.Id(e.jsonKey), jen.Id(e.jsonOK)).Op("=").Id(e.local("r")).Dot("NextKey").Call()).Block(
			e.id("r").Dot("Unknown").Call(jen.Id(e.jsonKey)),
		))
	}
	loop := []jen.Code{
		jen.List(jen.Id(e.jsonKey), jen.Id(e.jsonOK)).Op(":=").Id(e.local("r")).Dot("NextKey").Call(),
		jen.If(jen.Op("!").Id(e.jsonOK)).Block(end),
		e.id("field").Op(":=").Lit(-1),
	}
	loop = append(loop,
		jen.Switch(jen.String().Parens(jen.Id(e.jsonKey))).Block(exact...),
		jen.If(e.id("field").Op("<").Lit(0)).Block(
			jen.Var().Id(e.local("folded")).Index(jen.Lit(64)).Byte(),
			jen.Switch(jen.String().Parens(jen.Qual(codecPath, "FoldJSONName").Call(e.id("folded").Index(jen.Op(":").Lit(0)), jen.Id(e.jsonKey)))).Block(fold...),
		),
		jen.Switch(e.id("field")).Block(read...),
	)
	return sig.Block(begin, jen.For().Block(loop...))
}

// requiredMembers numbers the required members of s, in JSON order: the
// bits of its codec.RequiredSet and the indexes of its
// codec.RequiredFields.
func requiredMembers(s *Struct) map[*JSONField]int {
	out := map[*JSONField]int{}
	for _, f := range s.JSON {
		if f.Required {
			out[f] = len(out)
		}
	}
	return out
}

// requiredVar names the codec.RequiredFields of s.
func requiredVar(s *Struct) string { return "required" + s.Helper }

// requiredFields emits the codec.RequiredFields of s, or nil when it has
// no required members.
func (e *emitter) requiredFields(s *Struct) jen.Code {
	var list []jen.Code
	for _, f := range s.JSON {
		if f.Required {
			d := jen.Dict{jen.Id("Name"): jen.Lit(f.Name)}
			if f.Role != "" {
				d[jen.Id("Role")] = jen.Lit(f.Role)
			}
			list = append(list, jen.Values(d))
		}
	}
	if list == nil {
		return nil
	}
	return jen.Add(comment(fmt.Sprintf("%s lists the members a JSON object must have, not null, to decode into %s.", requiredVar(s), e.goName(s.Type)))).Line().
		Var().Id(requiredVar(s)).Op("=").Qual(codecPath, "RequiredFields").Values(jen.Dict{
		jen.Id("Type"):   jen.Lit(e.goName(s.Type)),
		jen.Id("Fields"): jen.Index().Qual(codecPath, "RequiredField").Values(list...),
	})
}

// appendJSONTextKeyMap appends the map x, whose keys write themselves with
// MarshalText, ordered by their texts.
func (e *emitter) appendJSONTextKeyMap(s *Shape, x *jen.Statement) []jen.Code {
	keys, i, k, val := e.fresh("keys"), e.fresh("i"), e.fresh("k"), e.fresh("val")
	body := []jen.Code{
		jen.If(jen.Id(i).Op(">").Lit(0)).Block(e.id("b").Op("=").Append(e.id("b"), jen.LitRune(','))),
		e.jsonCall("AppendJSONString", jen.Id(k).Dot("Text")),
		e.id("b").Op("=").Append(e.id("b"), jen.LitRune(':')),
		jen.Id(val).Op(":=").Add(x.Clone()).Index(jen.Id(k).Dot("Key")),
	}
	body = append(body, e.appendJSONValue(s.Elem, jen.Id(val))...)
	return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(
		e.id("b").Op("=").Append(e.id("b"), jen.Lit("null").Op("...")),
	).Else().Block(
		jen.List(jen.Id(keys), e.err()).Op(":=").Qual(codecPath, "TextKeys").Call(x.Clone(), jen.Lit(e.goName(s.Type))),
		jen.If(e.err().Op("!=").Nil()).Block(jen.Return(e.id("b"), e.err())),
		e.id("b").Op("=").Append(e.id("b"), jen.LitRune('{')),
		jen.For(jen.List(jen.Id(i), jen.Id(k)).Op(":=").Range().Id(keys)).Block(body...),
		e.id("b").Op("=").Append(e.id("b"), jen.LitRune('}')),
	)}
}

// appendQuotedJSON appends x, a field with the json option "string": a
// bool or number in quotes, a string as the JSON string of its JSON
// string, a nil pointer as null.
func (e *emitter) appendQuotedJSON(s *Shape, x *jen.Statement) []jen.Code {
	quote := e.id("b").Op("=").Append(e.id("b"), jen.LitRune('"'))
	switch s.Kind {
	case String:
		return []jen.Code{e.jsonCall("AppendJSONQuotedString", e.to(s, "string", x))}
	case Pointer:
		return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(
			e.id("b").Op("=").Append(e.id("b"), jen.Lit("null").Op("...")),
		).Else().Block(e.appendQuotedJSON(s.Elem, deref(x))...)}
	}
	out := []jen.Code{quote}
	out = append(out, e.appendJSONValue(s, x)...)
	return append(out, quote.Clone())
}

// readQuotedJSON reads into dst a field with the json option "string".
func (e *emitter) readQuotedJSON(s *Shape, dst *jen.Statement) []jen.Code {
	r := func() *jen.Statement { return e.id("r") }
	elem, val := s, dst
	var alloc, onNull []jen.Code
	if s.Kind == Pointer {
		elem, val = s.Elem, deref(dst)
		alloc = []jen.Code{jen.If(dst.Clone().Op("==").Nil()).Block(dst.Clone().Op("=").New(e.typeCode(elem.Type)))}
		onNull = []jen.Code{dst.Clone().Op("=").Nil()}
	}
	elemName := e.goName(elem.Type)
	target := jen.Lit("Go value of type " + elemName)
	lit, null, x := e.fresh("lit"), e.fresh("null"), e.fresh("x")
	var call jen.Code
	want := "bool"
	switch elem.Kind {
	case Bool:
		call = r().Dot("QuotedBool").Call(jen.Id(lit), jen.Lit(elemName), target)
	case Int, Duration:
		call, want = r().Dot("QuotedInt").Call(jen.Id(lit), jen.Lit(elemName), target, jen.Lit(elem.Bits)), "int64"
	case Uint:
		call, want = r().Dot("QuotedUint").Call(jen.Id(lit), jen.Lit(elemName), target, jen.Lit(elem.Bits)), "uint64"
	case Float:
		call, want = r().Dot("QuotedFloat").Call(jen.Id(lit), jen.Lit(elemName), target, jen.Lit(elem.Bits)), "float64"
	case String:
		call, want = r().Dot("QuotedString").Call(jen.Id(lit), jen.Lit(elemName), target), "string"
	default:
		panic("readQuotedJSON: not a quotable shape")
	}
	var v jen.Code = jen.Id(x)
	if elem.Named || types.Unalias(elem.Type).String() != want {
		v = jen.Add(e.typeCode(elem.Type)).Parens(jen.Id(x))
	}
	read := append(alloc, jen.If(jen.List(jen.Id(x), jen.Id(e.jsonOK)).Op(":=").Add(call), jen.Id(e.jsonOK)).Block(val.Clone().Op("=").Add(v)))
	if onNull == nil {
		null = "_" // null leaves the value as it is
	}
	stmt := jen.If(jen.List(jen.Id(lit), jen.Id(null), jen.Id(e.jsonOK)).Op(":=").Add(r()).Dot("Quoted").Call(jen.Lit(e.goName(s.Type)), jen.Lit(elemName)), jen.Id(e.jsonOK)).Block(read...)
	if onNull != nil {
		stmt = stmt.Else().If(jen.Id(null)).Block(onNull...)
	}
	return []jen.Code{stmt}
}

// pointedTarget names, for type errors, the value a pointer of shape s
// points to: its type, as encoding/json names it after following the
// pointer, except for a type read by UnmarshalText, which encoding/json
// names by the pointer's type (target).
func (e *emitter) pointedTarget(s *Shape, target string) string {
	if c := s.Elem.Custom; c != nil && c.Unmarshal == "UnmarshalText" {
		return target
	}
	return "Go value of type " + e.goName(s.Elem.Type)
}

// marshalJSON appends the JSON written by the Marshal method of c through
// the pointer p, naming typ in errors.
func (e *emitter) marshalJSON(c *Custom, p jen.Code, typ types.Type) jen.Code {
	fn := "AppendJSONMarshaler"
	if c.Marshal == "MarshalText" {
		fn = "AppendJSONText"
	}
	return e.jsonCallErr(jen.Qual(codecPath, fn).Call(e.id("b"), p, jen.Lit(e.goName(typ))))
}

// readJSONValue reads one JSON value into the addressable dst of shape s;
// target describes dst for type errors.
func (e *emitter) readJSONValue(s *Shape, dst *jen.Statement, target string) []jen.Code {
	r := func() *jen.Statement { return e.id("r") }
	if c := s.Custom; c != nil {
		switch c.Unmarshal {
		case "UnmarshalJSON":
			return []jen.Code{r().Dot("Unmarshaler").Call(addr(dst))}
		case "UnmarshalText":
			read := r().Dot("TextUnmarshaler").Call(addr(dst), jen.Lit(target))
			switch s.Type.Underlying().(type) {
			case *types.Slice, *types.Map:
				// encoding/json does not call UnmarshalText for null,
				// and null sets a slice or map to nil.
				return []jen.Code{jen.If(r().Dot("Null").Call()).Block(dst.Clone().Op("=").Nil()).Else().Block(read)}
			}
			return []jen.Code{read}
		}
		s = c.Under
	}
	scalar := func(call jen.Code, conv jen.Code) []jen.Code {
		x := e.fresh("x")
		var v jen.Code = jen.Id(x)
		if conv != nil {
			v = jen.Add(conv).Parens(jen.Id(x))
		}
		return []jen.Code{jen.If(jen.List(jen.Id(x), jen.Id(e.jsonOK)).Op(":=").Add(call), jen.Id(e.jsonOK)).Block(dst.Clone().Op("=").Add(v))}
	}
	var conv jen.Code
	if s.Named {
		conv = e.typeCode(s.Type)
	}
	lit := jen.Lit(target)
	switch s.Kind {
	case Bool:
		return scalar(r().Dot("Bool").Call(lit), conv)
	case Int, Duration:
		if conv == nil && types.Unalias(s.Type).String() != "int64" {
			conv = e.typeCode(s.Type)
		}
		return scalar(r().Dot("Int").Call(lit, jen.Lit(s.Bits)), conv)
	case Uint:
		if conv == nil && types.Unalias(s.Type).String() != "uint64" {
			conv = e.typeCode(s.Type)
		}
		return scalar(r().Dot("Uint").Call(lit, jen.Lit(s.Bits)), conv)
	case Float:
		if conv == nil && s.Bits == 32 {
			conv = jen.Float32()
		}
		return scalar(r().Dot("Float").Call(lit, jen.Lit(s.Bits)), conv)
	case String:
		if s.Number {
			return scalar(r().Dot("Number").Call(lit), conv)
		}
		return scalar(r().Dot("String").Call(lit), conv)
	case Time:
		return scalar(r().Dot("Time").Call(lit), nil)
	case Bytes:
		read := r().Dot("Bytes").Call(lit)
		if s.ByteElem != nil {
			read = r().Dot("BytesOf").Call(lit, jen.Lit(e.goName(s.ByteElem)))
		}
		x := e.fresh("x")
		set := dst.Clone().Op("=").Add(e.convert(s, e.bytesAs(s, jen.Id(x)), nil))
		return []jen.Code{jen.If(r().Dot("Null").Call()).Block(dst.Clone().Op("=").Nil()).Else().Block(
			jen.If(jen.List(jen.Id(x), jen.Id(e.jsonOK)).Op(":=").Add(read), jen.Id(e.jsonOK)).Block(set),
		)}
	case Pointer:
		return []jen.Code{jen.If(r().Dot("Null").Call()).Block(dst.Clone().Op("=").Nil()).Else().Block(append([]jen.Code{
			jen.If(dst.Clone().Op("==").Nil()).Block(dst.Clone().Op("=").New(e.typeCode(s.Elem.Type))),
		}, e.readJSONValue(s.Elem, deref(dst), e.pointedTarget(s, target))...)...)}
	case Slice:
		sl, i := e.fresh("s"), e.fresh("i")
		elemTarget := "Go value of type " + e.goName(s.Elem.Type)
		return []jen.Code{jen.If(r().Dot("Null").Call()).Block(dst.Clone().Op("=").Nil()).Else().If(r().Dot("BeginArray").Call(lit)).Block(
			jen.List(jen.Id(sl), jen.Id(i)).Op(":=").List(dst.Clone(), jen.Lit(0)),
			jen.For(r().Dot("NextElement").Call()).Block(append(append([]jen.Code{
				jen.Id(sl).Op("=").Qual(codecPath, "GrowAt").Call(jen.Id(sl), jen.Id(i)),
			}, e.readJSONValue(s.Elem, jen.Id(sl).Index(jen.Id(i)), elemTarget)...),
				jen.Id(i).Op("++"),
			)...),
			jen.If(jen.Id(sl).Op("==").Nil()).Block(
				jen.Id(sl).Op("=").Make(e.typeCode(s.Type), jen.Lit(0)),
			),
			dst.Clone().Op("=").Id(sl).Index(jen.Op(":").Id(i)),
		)}
	case Array:
		i := e.fresh("i")
		elemTarget := "Go value of type " + e.goName(s.Elem.Type)
		return []jen.Code{jen.If(r().Dot("BeginArray").Call(lit)).Block(
			jen.Id(i).Op(":=").Lit(0),
			jen.For(r().Dot("NextElement").Call()).Block(
				jen.If(jen.Id(i).Op("<").Len(dst.Clone())).Block(
					e.readJSONValue(s.Elem, dst.Clone().Index(jen.Id(i)), elemTarget)...,
				).Else().Block(r().Dot("Skip").Call()),
				jen.Id(i).Op("++"),
			),
			jen.If(jen.Id(i).Op("<").Len(dst.Clone())).Block(
				jen.Clear(dst.Clone().Index(jen.Id(i).Op(":"))),
			),
		)}
	case Map:
		k, keyOK, val := e.fresh("k"), e.fresh("keyErr"), e.fresh("val")
		elemTarget := "Go value of type " + e.goName(s.Elem.Type)
		keyTarget := "Go value of type " + e.goName(s.Key.Type)
		// An integer key is parsed before the value overwrites the
		// reader's buffer, and its error recorded after the value's, in
		// encoding/json's order.
		var parse []jen.Code
		// An entry whose value stopped the reading is not stored, as in
		// encoding/json.
		store := jen.If(jen.Op("!").Add(r()).Dot("Failed").Call()).Block(dst.Clone().Index(jen.Id(k)).Op("=").Id(val))
		switch s.Key.JSONKeyRead {
		case "text":
			// As in encoding/json, UnmarshalText reads the key after the
			// value has been read, and its error stops reading.
			kept := e.fresh("kept")
			parse = []jen.Code{jen.Id(kept).Op(":=").Add(r()).Dot("KeepKey").Call(jen.Id(e.jsonKey))}
			store = jen.If(jen.Op("!").Add(r()).Dot("Failed").Call()).Block(
				jen.If(
					jen.List(jen.Id(k), jen.Id(keyOK)).Op(":=").Qual(codecPath, "ParseJSONTextKey").Types(e.typeCode(s.Key.Type)).Call(jen.Id(kept)),
					jen.Id(keyOK).Op("!=").Nil(),
				).Block(r().Dot("Fail").Call(jen.Id(keyOK))).Else().Block(dst.Clone().Index(jen.Id(k)).Op("=").Id(val)),
			)
		case "string":
			parse = []jen.Code{jen.Id(k).Op(":=").Add(e.typeCode(s.Key.Type)).Parens(jen.Id(e.jsonKey))}
		case "int", "uint":
			fn := "ParseJSONIntKey"
			if s.Key.JSONKeyRead == "uint" {
				fn = "ParseJSONUintKey"
			}
			raw := e.fresh("raw")
			parse = []jen.Code{
				jen.List(jen.Id(raw), jen.Id(keyOK)).Op(":=").Qual(codecPath, fn).Call(e.id("r"), jen.Id(e.jsonKey), jen.Lit(s.Key.Bits), jen.Lit(keyTarget)),
				jen.Id(k).Op(":=").Add(e.typeCode(s.Key.Type)).Parens(jen.Id(raw)),
			}
			store = jen.If(jen.Id(keyOK).Op("!=").Nil()).Block(r().Dot("KeyError").Call(jen.Id(keyOK))).Else().Add(store)
		}
		body := []jen.Code{
			jen.List(jen.Id(e.jsonKey), jen.Id(e.jsonOK)).Op(":=").Id(e.local("r")).Dot("NextKey").Call(),
			jen.If(jen.Op("!").Id(e.jsonOK)).Block(jen.Break()),
		}
		body = append(body, parse...)
		body = append(body, jen.Var().Id(val).Add(e.typeCode(s.Elem.Type)))
		body = append(body, e.readJSONValue(s.Elem, jen.Id(val), elemTarget)...)
		body = append(body, store)
		return []jen.Code{jen.If(r().Dot("Null").Call()).Block(dst.Clone().Op("=").Nil()).Else().If(r().Dot("BeginObject").Call(lit)).Block(
			jen.If(dst.Clone().Op("==").Nil()).Block(dst.Clone().Op("=").Make(e.typeCode(s.Type))),
			jen.For().Block(body...),
		)}
	case StructShape:
		if foreignRecord(s.Struct) {
			return []jen.Code{dst.Clone().Dot("ReadJSON").Call(r())}
		}
		return []jen.Code{jen.Id("readJSON"+s.Struct.Helper).Call(r(), addr(dst))}
	}
	panic("readJSONValue: unknown shape")
}
