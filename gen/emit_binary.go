package gen

import (
	"fmt"
	"go/types"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/streamgen/streamgen/codec"
)

// deref is *x, parenthesized so that it can be indexed or selected.
func deref(x *jen.Statement) *jen.Statement { return jen.Parens(jen.Op("*").Add(x.Clone())) }

// addr is &x, written as p when x is deref(p): &(*p) reads as a copy and
// is not one.
func addr(x *jen.Statement) *jen.Statement {
	if s := fmt.Sprintf("%#v", x); strings.HasPrefix(s, "(*") && strings.HasSuffix(s, ")") && !strings.ContainsAny(s[2:len(s)-1], "()") {
		return jen.Op(s[2 : len(s)-1])
	}
	return jen.Op("&").Add(x.Clone())
}

// foreignRecord reports whether s is a record of another package, reached
// only through its exported methods.
func foreignRecord(s *Struct) bool { return s.Record && !s.Local }

// tagBytes is the encoded tag of a field, as byte literals.
func tagBytes(f *Field) []jen.Code {
	b := codec.AppendTag(nil, f.ID, kindOf(f.Shape))
	out := make([]jen.Code, len(b))
	for i, c := range b {
		out[i] = jen.Id(fmt.Sprintf("0x%02x", c))
	}
	return out
}

// appendBinary emits appendBinary<Helper>(b, v) ([]byte, error): every
// field of v as a tag and a value, in declaration order. It fails only
// when a type's own MarshalBinary (or MarshalText, MarshalJSON) does.
func (e *emitter) appendBinary(s *Struct) jen.Code {
	e.function(e.isType, "b", "v", "err", "depth")
	params, check := e.depthParams(s, "ErrNestedTooDeep")
	defer func() { e.depth = false }()
	body := append(check, jen.Var().Id(e.local("err")).Error())
	for _, f := range s.Fields {
		x := e.id("v").Dot(f.Name)
		kind := kindOf(f.Shape)
		comment := fmt.Sprintf("%s: id %d, %s", f.Name, f.ID, kind)
		appendTag := e.id("b").Op("=").Append(append([]jen.Code{e.id("b")}, tagBytes(f)...)...).Comment(comment)
		if f.Shape.Kind == Pointer {
			// A nil pointer field is left out; a reader leaves it nil.
			inner := append([]jen.Code{appendTag}, e.appendFieldValue(f.Shape.Elem, deref(x))...)
			body = append(body, jen.If(x.Clone().Op("!=").Nil()).Block(inner...))
			continue
		}
		if inlineKind(f.Shape) && f.Shape.Kind == String {
			// The tag and a one-byte length in one append.
			short := append(append([]jen.Code{e.id("b")}, tagBytes(f)...), jen.Byte().Call(jen.Len(x.Clone())))
			body = append(body, jen.If(jen.Len(x.Clone()).Op("<").Id("0x80")).Block(
				e.id("b").Op("=").Append(jen.Append(short...), x.Clone().Op("...")).Comment(comment),
			).Else().Block(
				appendTag,
				e.appendCall("AppendString", e.to(f.Shape, "string", x)),
			))
			continue
		}
		body = append(body, appendTag)
		body = append(body, e.appendFieldValue(f.Shape, x)...)
	}
	body = append(body, jen.Return(e.id("b"), e.id("err")))
	return jen.Func().Id("appendBinary"+s.Helper).
		Params(append([]jen.Code{e.id("b").Index().Byte(), e.id("v").Op("*").Add(e.typeCode(s.Type))}, params...)...).
		Params(jen.Index().Byte(), jen.Error()).Block(body...)
}

// appendFieldValue appends a field's value: lists and maps get the byte
// length that lets a reader skip them.
func (e *emitter) appendFieldValue(s *Shape, x *jen.Statement) []jen.Code {
	if s.Kind != Slice && s.Kind != Array && s.Kind != Map {
		return e.appendValue(s, x)
	}
	start := e.fresh("start")
	code := []jen.Code{
		jen.Id(start).Op(":=").Len(e.id("b")),
		e.id("b").Op("=").Qual(codecPath, "BeginLength").Call(e.id("b")),
	}
	code = append(code, e.appendValue(s, x)...)
	return append(code, e.id("b").Op("=").Qual(codecPath, "EndLength").Call(e.id("b"), jen.Id(start)))
}

func (e *emitter) appendCall(fn string, args ...jen.Code) jen.Code {
	return e.id("b").Op("=").Qual(codecPath, fn).Call(append([]jen.Code{e.id("b")}, args...)...)
}

// binaryMethodAppenders are the codec functions that append the output of
// a type's own encoding method, by method.
var binaryMethodAppenders = map[string]string{
	"AppendBinary":  "AppendBinaryAppender",
	"MarshalBinary": "AppendBinaryMarshaler",
	"AppendText":    "AppendTextAppender",
	"MarshalText":   "AppendTextMarshaler",
	"MarshalJSON":   "AppendJSONMarshalerBinary",
}

// binaryMethodReaders are the Decoder methods that read it back, by method.
var binaryMethodReaders = map[string]string{
	"UnmarshalBinary": "BinaryUnmarshaler",
	"UnmarshalText":   "TextUnmarshaler",
	"UnmarshalJSON":   "JSONUnmarshalerBinary",
}

// orFail is b, err = call with an early return on error.
func (e *emitter) orFail(call jen.Code) jen.Code {
	return jen.If(jen.List(e.id("b"), e.err()).Op("=").Add(call), e.err().Op("!=").Nil()).Block(
		jen.Return(e.id("b"), e.err()),
	)
}

// appendValue appends the value x of shape s (x is addressable).
func (e *emitter) appendValue(s *Shape, x *jen.Statement) []jen.Code {
	if c := s.Custom; c != nil && c.Binary != "" {
		return []jen.Code{e.orFail(jen.Qual(codecPath, binaryMethodAppenders[c.Binary]).Call(e.id("b"), addr(x), jen.Lit(e.goName(s.Type))))}
	}
	switch s.Kind {
	case Bool:
		return []jen.Code{e.appendCall("AppendBool", e.to(s, "bool", x))}
	case Int:
		return []jen.Code{e.appendCall("AppendInt", e.to(s, "int64", x))}
	case Uint:
		return []jen.Code{e.appendCall("AppendUint", e.to(s, "uint64", x))}
	case Float:
		if s.Bits == 32 {
			return []jen.Code{e.appendCall("AppendFloat32", e.to(s, "float32", x))}
		}
		return []jen.Code{e.appendCall("AppendFloat64", e.to(s, "float64", x))}
	case String:
		return []jen.Code{e.appendCall("AppendString", e.to(s, "string", x))}
	case Bytes:
		return []jen.Code{e.appendCall("AppendBytes", e.byteView(s, x))}
	case Time:
		return []jen.Code{e.appendCall("AppendTime", x)}
	case Duration:
		return []jen.Code{e.appendCall("AppendDuration", x)}
	case Pointer:
		return []jen.Code{jen.If(x.Clone().Op("==").Nil()).Block(
			e.id("b").Op("=").Append(e.id("b"), jen.Lit(0)),
		).Else().Block(append([]jen.Code{
			e.id("b").Op("=").Append(e.id("b"), jen.Lit(1)),
		}, e.appendValue(s.Elem, deref(x))...)...)}
	case Slice, Array:
		i := e.fresh("i")
		isNil := jen.False()
		if s.Kind == Slice {
			isNil = x.Clone().Op("==").Nil()
		}
		return []jen.Code{
			e.appendCall("AppendList", kindCode(elemKind(s.Elem)), jen.Len(x.Clone()), isNil),
			jen.For(jen.Id(i).Op(":=").Range().Add(x.Clone())).Block(
				e.appendValue(s.Elem, x.Clone().Index(jen.Id(i)))...,
			),
		}
	case Map:
		// Entries are written in key order (by text for keys that are
		// neither numbers nor strings), so that equal maps are equal bytes.
		k, val := e.fresh("k"), e.fresh("val")
		body := append(e.appendValue(s.Key, jen.Id(k)), e.appendValue(s.Elem, jen.Id(val))...)
		header := e.appendCall("AppendMap", kindCode(kindOf(s.Key)), kindCode(elemKind(s.Elem)), jen.Len(x.Clone()), x.Clone().Op("==").Nil())
		if basic, ok := s.Key.Type.Underlying().(*types.Basic); ok && basic.Info()&types.IsOrdered != 0 {
			entry := e.fresh("entry")
			body = append([]jen.Code{jen.List(jen.Id(k), jen.Id(val)).Op(":=").Id(entry).Dot("Key").Op(",").Id(entry).Dot("Value")}, body...)
			decl, entries := e.orderedEntries(s, x)
			return append(append([]jen.Code{header}, decl...),
				jen.For(jen.List(jen.Id("_"), jen.Id(entry)).Op(":=").Range().Add(entries)).Block(body...),
			)
		}
		// Other keys write themselves as text; ordered by it.
		keys, kt := e.fresh("keys"), e.fresh("kt")
		body = append([]jen.Code{jen.List(jen.Id(k), jen.Id(val)).Op(":=").Id(kt).Dot("Key").Op(",").Add(x.Clone()).Index(jen.Id(kt).Dot("Key"))}, body...)
		return []jen.Code{
			header,
			jen.List(jen.Id(keys), e.err()).Op(":=").Qual(codecPath, "TextKeys").Call(x.Clone(), jen.Lit(e.goName(s.Type))),
			jen.If(e.err().Op("!=").Nil()).Block(jen.Return(e.id("b"), e.err())),
			jen.For(jen.List(jen.Id("_"), jen.Id(kt)).Op(":=").Range().Id(keys)).Block(body...),
		}
	case StructShape:
		start := e.fresh("start")
		var inner jen.Code
		if foreignRecord(s.Struct) {
			inner = e.orFail(x.Clone().Dot("AppendBinary").Call(e.id("b")))
		} else {
			inner = e.orFail(jen.Id("appendBinary" + s.Struct.Helper).Call(append([]jen.Code{e.id("b"), addr(x)}, e.depthArgs(s.Struct)...)...))
		}
		return []jen.Code{
			jen.Id(start).Op(":=").Len(e.id("b")),
			e.id("b").Op("=").Qual(codecPath, "BeginLength").Call(e.id("b")),
			inner,
			e.id("b").Op("=").Qual(codecPath, "EndLength").Call(e.id("b"), jen.Id(start)),
		}
	}
	panic("appendValue: unknown shape")
}

// smallEntriesMax is the largest entry (key and value) that a map's
// encoder sorts in an array of codec.SmallMap entries on its stack; maps
// with larger entries are sorted in a slice on the heap.
const smallEntriesMax = 64

// orderedEntries returns the code that sorts the entries of the map x of
// shape s (whose keys are ordered) by key, and the expression of the
// sorted entries: an array of codec.SmallMap entries on the stack, which a
// larger map grows onto the heap, when the entries are small.
func (e *emitter) orderedEntries(s *Shape, x *jen.Statement) (decl []jen.Code, entries jen.Code) {
	entry := jen.Qual(codecPath, "Entry").Types(e.typeCode(s.Key.Type), e.typeCode(s.Elem.Type))
	sizes := types.SizesFor("gc", "amd64")
	if sizes.Sizeof(s.Key.Type)+sizes.Sizeof(s.Elem.Type) > smallEntriesMax {
		return nil, jen.Qual(codecPath, "OrderedEntries").Call(x.Clone())
	}
	small := e.fresh("small")
	decl = []jen.Code{jen.Var().Id(small).Index(jen.Qual(codecPath, "SmallMap")).Add(entry)}
	return decl, jen.Qual(codecPath, "AppendOrderedEntries").Call(jen.Id(small).Index(jen.Op(":").Lit(0)), x.Clone())
}

// readBinary emits readBinary<Helper>(d, v, end): fields until end, by tag;
// unknown ids skipped, known ids of another kind reported.
func (e *emitter) readBinary(s *Struct) jen.Code {
	e.function(e.isType, "d", "v", "end", "tag", "err")
	var fast, fastFuncs []jen.Code
	if len(s.Fields) > 0 {
		fast, fastFuncs = e.fastPath(s)
	}
	var cases, changed []jen.Code
	for _, f := range s.Fields {
		tag := codec.Tag(f.ID, kindOf(f.Shape))
		cases = append(cases, jen.Case(jen.Id(fmt.Sprintf("%#x", tag))).Block(append([]jen.Code{jen.Comment(f.Name)}, e.readField(s, f)...)...))
		changed = append(changed, jen.Case(jen.Lit(int(f.ID))).Block(
			e.id("d").Dot("KindChanged").Call(jen.Lit(s.Name), jen.Lit(f.Name), e.id("tag"), kindCode(kindOf(f.Shape))),
		))
	}
	changed = append(changed, jen.Default().Block(e.id("d").Dot("Skip").Call(e.id("tag"))))
	cases = append(cases, jen.Default().Block(jen.Switch(e.id("tag").Op(">>").Lit(4)).Block(changed...)))
	var body []jen.Code
	if s.Recursive {
		// Bounded nesting: input that nests deeper is refused.
		body = append(body, jen.If(jen.Op("!").Id(e.local("d")).Dot("Enter").Call(jen.Lit(e.goName(s.Type)))).Block(jen.Return()))
	}
	if len(fast) > 0 {
		body = append(body, fast...)
		body = append(body, jen.Comment("Whatever remains (older or newer versions, fields in another order)."))
	}
	body = append(body, jen.For(e.id("d").Dot("More").Call(e.id("end"))).Block(
		jen.Switch(e.id("tag").Op(":=").Id(e.local("d")).Dot("Tag").Call(), e.id("tag")).Block(cases...),
	))
	if s.Recursive {
		body = append(body, e.id("d").Dot("Leave").Call())
	}
	code := jen.Func().Id("readBinary"+s.Helper).
		Params(e.id("d").Op("*").Qual(codecPath, "Decoder"), e.id("v").Op("*").Add(e.typeCode(s.Type)), e.id("end").Int()).
		Block(body...)
	for _, fn := range fastFuncs {
		code = code.Line().Line().Add(fn)
	}
	return code
}

// readField reads the value of field f, whose tag has been read.
func (e *emitter) readField(s *Struct, f *Field) []jen.Code {
	x := e.id("v").Dot(f.Name)
	if f.Shape.Kind != Pointer {
		return e.readFieldValue(f.Shape, x, s.Name+"."+f.Name)
	}
	p := e.fresh("p")
	body := []jen.Code{jen.Id(p).Op(":=").New(e.typeCode(f.Shape.Elem.Type))}
	body = append(body, e.readFieldValue(f.Shape.Elem, deref(jen.Id(p)), s.Name+"."+f.Name)...)
	return append(body, x.Clone().Op("=").Id(p))
}

// readFieldValue reads a field's value into dst, bounded by its byte length
// for lists and maps.
func (e *emitter) readFieldValue(s *Shape, dst *jen.Statement, where string) []jen.Code {
	if s.Kind != Slice && s.Kind != Array && s.Kind != Map {
		return e.readValue(s, dst, where)
	}
	end := e.fresh("end")
	code := []jen.Code{jen.Id(end).Op(":=").Id(e.local("d")).Dot("Begin").Call()}
	code = append(code, e.readValue(s, dst, where)...)
	return append(code, e.id("d").Dot("Finish").Call(jen.Id(end)))
}

// convert wraps a decoded value in a conversion to the shape's named type
// when it has one.
func (e *emitter) convert(s *Shape, v jen.Code, plain jen.Code) jen.Code {
	if s.Named {
		return jen.Add(e.typeCode(s.Type)).Parens(v)
	}
	if plain != nil {
		return jen.Add(plain).Parens(v)
	}
	return v
}

// byteView is x, a Bytes value, as a []byte: itself, or for a slice of a
// named byte type the same memory seen as bytes.
func (e *emitter) byteView(s *Shape, x *jen.Statement) jen.Code {
	if s.ByteElem == nil {
		return x
	}
	return jen.Qual(codecPath, "AsBytes").Call(x)
}

// bytesAs is v, a decoded []byte, as the slice type of the Bytes shape s
// before any conversion to a named slice type.
func (e *emitter) bytesAs(s *Shape, v jen.Code) jen.Code {
	if s.ByteElem == nil {
		return v
	}
	return jen.Qual(codecPath, "BytesAs").Types(e.typeCode(s.ByteElem)).Call(v)
}

// plainConversion is the conversion a decoded integer (an int64 or
// uint64, as read) needs to become a value of the unnamed shape s, or nil.
func (e *emitter) plainConversion(s *Shape, have string) jen.Code {
	if types.Unalias(s.Type).String() == have {
		return nil
	}
	return e.typeCode(s.Type)
}

// readValue reads a value of shape s into the addressable dst.
func (e *emitter) readValue(s *Shape, dst *jen.Statement, where string) []jen.Code {
	d := func() *jen.Statement { return e.id("d") }
	if c := s.Custom; c != nil && c.Binary != "" {
		return []jen.Code{d().Dot(binaryMethodReaders[c.BinaryUnmarshal()]).Call(addr(dst), jen.Lit(where))}
	}
	set := func(v jen.Code) []jen.Code { return []jen.Code{dst.Clone().Op("=").Add(v)} }
	switch s.Kind {
	case Bool:
		return set(e.convert(s, d().Dot("Bool").Call(), nil))
	case Int:
		read := d().Dot("Int").Call(jen.Lit(s.Bits))
		if s.Bits == 64 {
			read = d().Dot("Int64").Call()
		}
		return set(e.convert(s, read, e.plainConversion(s, "int64")))
	case Uint:
		read := d().Dot("Uint").Call(jen.Lit(s.Bits))
		if s.Bits == 64 {
			read = d().Dot("Uint64").Call()
		}
		return set(e.convert(s, read, e.plainConversion(s, "uint64")))
	case Float:
		if s.Bits == 32 {
			return set(e.convert(s, d().Dot("Float32").Call(), nil))
		}
		return set(e.convert(s, d().Dot("Float64").Call(), nil))
	case String:
		return set(e.convert(s, d().Dot("String").Call(), nil))
	case Bytes:
		return set(e.convert(s, e.bytesAs(s, d().Dot("Bytes").Call()), nil))
	case Time:
		return set(d().Dot("Time").Call())
	case Duration:
		return set(e.convert(s, d().Dot("Duration").Call(), nil))
	case Pointer:
		p := e.fresh("p")
		inner := []jen.Code{jen.Id(p).Op(":=").New(e.typeCode(s.Elem.Type))}
		inner = append(inner, e.readValue(s.Elem, deref(jen.Id(p)), where)...)
		inner = append(inner, dst.Clone().Op("=").Id(p))
		return []jen.Code{jen.If(d().Dot("Present").Call()).Block(inner...)}
	case Slice:
		n, sl, i := e.fresh("n"), e.fresh("s"), e.fresh("i")
		return []jen.Code{jen.If(
			jen.Id(n).Op(":=").Add(d()).Dot("List").Call(jen.Lit(where), kindCode(elemKind(s.Elem)), jen.Lit(minSize(s.Elem))),
			jen.Id(n).Op(">=").Lit(0),
		).Block(
			jen.Id(sl).Op(":=").Make(e.typeCode(s.Type), jen.Id(n)),
			jen.For(jen.Id(i).Op(":=").Range().Id(sl)).Block(e.readValue(s.Elem, jen.Id(sl).Index(jen.Id(i)), where+"[]")...),
			dst.Clone().Op("=").Id(sl),
		)}
	case Array:
		n, i, skip := e.fresh("n"), e.fresh("i"), e.fresh("skip")
		return []jen.Code{jen.If(
			jen.Id(n).Op(":=").Add(d()).Dot("List").Call(jen.Lit(where), kindCode(elemKind(s.Elem)), jen.Lit(minSize(s.Elem))),
			jen.Id(n).Op(">").Lit(0),
		).Block(
			jen.For(jen.Id(i).Op(":=").Range().Id(n)).Block(
				jen.If(jen.Id(i).Op("<").Len(dst.Clone())).Block(
					e.readValue(s.Elem, dst.Clone().Index(jen.Id(i)), where+"[]")...,
				).Else().Block(append(append([]jen.Code{
					jen.Comment("more elements than the array holds: read and drop them"),
					jen.Var().Id(skip).Add(e.typeCode(s.Elem.Type)),
				}, e.readValue(s.Elem, jen.Id(skip), where+"[]")...), jen.Id("_").Op("=").Id(skip))...),
			),
		)}
	case Map:
		n, m, k, val := e.fresh("n"), e.fresh("m"), e.fresh("k"), e.fresh("val")
		body := []jen.Code{
			jen.Var().Id(k).Add(e.typeCode(s.Key.Type)),
			jen.Var().Id(val).Add(e.typeCode(s.Elem.Type)),
		}
		body = append(body, e.readValue(s.Key, jen.Id(k), where+"[key]")...)
		body = append(body, e.readValue(s.Elem, jen.Id(val), where+"[]")...)
		body = append(body, jen.Id(m).Index(jen.Id(k)).Op("=").Id(val))
		return []jen.Code{jen.If(
			jen.Id(n).Op(":=").Add(d()).Dot("Map").Call(jen.Lit(where), kindCode(kindOf(s.Key)), kindCode(elemKind(s.Elem)), jen.Lit(minSize(s.Key)+minSize(s.Elem))),
			jen.Id(n).Op(">=").Lit(0),
		).Block(
			jen.Id(m).Op(":=").Make(e.typeCode(s.Type), jen.Id(n)),
			jen.For(jen.Range().Id(n)).Block(body...),
			dst.Clone().Op("=").Id(m),
		)}
	case StructShape:
		end := e.fresh("end")
		var inner jen.Code
		if foreignRecord(s.Struct) {
			inner = jen.If(e.err().Op(":=").Add(dst.Clone()).Dot("UnmarshalBinary").Call(d().Dot("Sub").Call(jen.Id(end))), e.err().Op("!=").Nil()).Block(
				d().Dot("Fail").Call(e.err()),
			)
		} else {
			inner = jen.Id("readBinary"+s.Struct.Helper).Call(d(), addr(dst), jen.Id(end))
		}
		return []jen.Code{
			jen.Id(end).Op(":=").Add(d()).Dot("Begin").Call(),
			inner,
			d().Dot("Finish").Call(jen.Id(end)),
		}
	}
	panic("readValue: unknown shape")
}
