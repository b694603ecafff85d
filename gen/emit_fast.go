package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/streamgen/streamgen/codec"
)

// fastChunk is the most fields one function of a fast path reads. The
// compiler inlines nothing but the smallest calls into a large function,
// and the fast path's helpers must be inlined to be fast, so a struct with
// more fields reads them in several functions, one after the other.
const fastChunk = 24

// fastPath emits the start of a struct's decoder: its fields in the order
// this version writes them, read from local variables (see the codec
// package's fast.go). A field that is absent is passed over; a value the
// inline code cannot read ends the fast path at the field's tag, and the
// Decoder reads the rest. Fields of kinds that are not read inline are
// read with the Decoder, which the fast path moves to them and back.
//
// A struct's own string fields are located, not copied, and at the end
// copied into one allocation that each is sliced from, when there are at
// least two and they are short together (codec.MaxJoined).
//
// It returns the code for the decoder, and for a struct of more than
// fastChunk fields, the functions that read them.
func (e *emitter) fastPath(s *Struct) (code, funcs []jen.Code) {
	b, p := e.fresh("b"), e.fresh("p")
	code = []jen.Code{
		jen.Comment("Fast path: the fields in the order this version writes them."),
		jen.List(jen.Id(b), jen.Id(p)).Op(":=").Id(e.local("d")).Dot("Window").Call(e.id("end")),
	}
	if len(s.Fields) <= fastChunk {
		f := e.newFast(s, s.Fields, b, p, "slow", "")
		code = append(code, f.fields()...)
		seek := e.id("d").Dot("Seek").Call(jen.Id(p))
		if f.jumps {
			code = append(code, jen.Id(f.label).Op(":"), seek)
		} else {
			code = append(code, seek)
		}
		return append(code, f.join()...), nil
	}
	ok, d, v := e.fresh("ok"), e.local("d"), e.local("v")
	outer := e.fn
	for i := 0; i < len(s.Fields); i += fastChunk {
		part := s.Fields[i:min(i+fastChunk, len(s.Fields))]
		name := fmt.Sprintf("readFast%sPart%d", s.Helper, i/fastChunk)
		call := jen.Id(name).Call(jen.Id(d), jen.Id(v), jen.Id(b), jen.Id(p))
		last := i+fastChunk >= len(s.Fields)
		switch {
		case i == 0:
			code = append(code, jen.List(jen.Id(p), jen.Id(ok)).Op(":=").Add(call))
		case last:
			code = append(code, jen.If(jen.Id(ok)).Block(jen.List(jen.Id(p), jen.Id("_")).Op("=").Add(call)))
		default:
			code = append(code, jen.If(jen.Id(ok)).Block(jen.List(jen.Id(p), jen.Id(ok)).Op("=").Add(call)))
		}
		e.function(e.isType, "d", "v")
		funcs = append(funcs, e.fastFunc(s, part, name))
	}
	e.fn = outer
	return append(code, e.id("d").Dot("Seek").Call(jen.Id(p))), funcs
}

// fastFunc emits one function of a long fast path: it reads fields from
// b at p, and returns where it stopped and whether the fast path goes on.
func (e *emitter) fastFunc(s *Struct, fields []*Field, name string) jen.Code {
	b, p, ok := e.fresh("b"), e.fresh("p"), e.fresh("ok")
	f := e.newFast(s, fields, b, p, "stop", ok)
	body := f.fields()
	var tail []jen.Code
	if f.jumps {
		body = append([]jen.Code{jen.Id(ok).Op(":=").True()}, body...)
		tail = append([]jen.Code{jen.Id(f.label).Op(":")}, f.join()...)
		tail = append(tail, jen.Return(jen.Id(p), jen.Id(ok)))
	} else {
		tail = append(f.join(), jen.Return(jen.Id(p), jen.True()))
	}
	what := "the field " + fields[0].Name
	if len(fields) > 1 {
		what = fmt.Sprintf("the fields %s to %s", fields[0].Name, fields[len(fields)-1].Name)
	}
	return jen.Comment(fmt.Sprintf("%s reads %s, for the fast path of readBinary%s.", name, what, s.Helper)).Line().
		Func().Id(name).Params(
		e.id("d").Op("*").Qual(codecPath, "Decoder"), e.id("v").Op("*").Add(e.typeCode(s.Type)),
		jen.Id(b).Index().Byte(), jen.Id(p).Int(),
	).Params(jen.Int(), jen.Bool()).Block(append(body, tail...)...)
}

// newFast starts the fast path for fields, reading from the variables b
// and p. A value it cannot read jumps to label, after setting ok to false
// when ok is named.
func (e *emitter) newFast(s *Struct, fields []*Field, b, p, label, ok string) *fastEmitter {
	f := &fastEmitter{emitter: e, s: s, list: fields, b: b, p: p, label: label, ok: ok, spans: map[*Field][2]string{}}
	for _, fd := range fields {
		if inlineKind(fd.Shape) && fd.Shape.Kind == String {
			f.strs = append(f.strs, fd)
		}
	}
	if len(f.strs) < 2 {
		f.strs = nil
	}
	for _, fd := range f.strs {
		f.spans[fd] = [2]string{e.fresh("s"), e.fresh("e")}
	}
	return f
}

// fields emits the declarations of the string spans and the reading of
// each field.
func (f *fastEmitter) fields() []jen.Code {
	var code, spanVars []jen.Code
	for _, fd := range f.strs {
		sp := f.spans[fd]
		spanVars = append(spanVars, jen.Id(sp[0]), jen.Id(sp[1]))
	}
	if len(spanVars) > 0 {
		code = append(code, jen.Var().List(spanVars...).Int())
	}
	for _, fd := range f.list {
		code = append(code, f.field(fd))
	}
	return code
}

// fastEmitter holds the names of one fast path.
type fastEmitter struct {
	*emitter
	s         *Struct
	list      []*Field             // the fields it reads
	b, p      string               // the input and offset variables
	label, ok string               // where a value it cannot read jumps, and the flag it clears
	strs      []*Field             // string fields copied together
	spans     map[*Field][2]string // their start and end variables
	jumps     bool                 // whether any code jumps to label
}

// inlineKind reports whether a value of shape s is read by inline code.
func inlineKind(s *Shape) bool {
	if s.Custom != nil && s.Custom.Binary != "" {
		return false
	}
	switch s.Kind {
	case Bool, Int, Uint, Float, String, Duration:
		return true
	}
	return false
}

// toSlow is a jump out of the fast path.
func (f *fastEmitter) toSlow() []jen.Code {
	f.jumps = true
	if f.ok != "" {
		return []jen.Code{jen.Id(f.ok).Op("=").False(), jen.Goto().Id(f.label)}
	}
	return []jen.Code{jen.Goto().Id(f.label)}
}

// field emits the fast path's step for one field.
func (f *fastEmitter) field(fd *Field) jen.Code {
	tb := codec.AppendTag(nil, fd.ID, kindOf(fd.Shape))
	var packed uint32
	for i, c := range tb {
		packed |= uint32(c) << (8 * i)
	}
	mask := uint32(1)<<(8*len(tb)) - 1
	has := jen.Qual(codecPath, "HasTag").Call(jen.Id(f.b), jen.Id(f.p), jen.Id(fmt.Sprintf("%#x", packed)), jen.Id(fmt.Sprintf("%#x", mask)))
	at := jen.Id(f.p).Op("+").Lit(len(tb)) // where the value starts
	var body []jen.Code
	if inlineKind(fd.Shape) {
		body = f.value(fd, at)
	} else {
		// Read by the Decoder, from the value's start.
		body = append(body, f.id("d").Dot("Seek").Call(at))
		body = append(body, f.readField(f.s, fd)...)
		body = append(body, jen.Id(f.p).Op("=").Id(f.local("d")).Dot("Offset").Call())
	}
	return jen.Comment(fd.Name).Line().If(has).Block(body...)
}

// value emits the inline read of fd's value, which starts at at, and the
// move of p past it.
func (f *fastEmitter) value(fd *Field, at *jen.Statement) []jen.Code {
	s := fd.Shape
	dst := f.id("v").Dot(fd.Name)
	b, p := jen.Id(f.b), jen.Id(f.p)
	q := f.fresh("q")
	code := []jen.Code{jen.Id(q).Op(":=").Add(at)}
	switch s.Kind {
	case Bool:
		c := f.fresh("c")
		return append(code,
			jen.Id(c).Op(":=").Add(b).Index(jen.Id(q)),
			jen.If(jen.Id(c).Op(">").Lit(1)).Block(f.toSlow()...),
			dst.Clone().Op("=").Add(f.convert(s, jen.Id(c).Op("==").Lit(1), nil)),
			p.Clone().Op("=").Id(q).Op("+").Lit(1),
		)
	case Float:
		size, read := 8, "Float64At"
		if s.Bits == 32 {
			size, read = 4, "Float32At"
		}
		return append(code,
			jen.If(jen.Id(q).Op("+").Lit(size).Op(">").Len(b)).Block(f.toSlow()...),
			dst.Clone().Op("=").Add(f.convert(s, jen.Qual(codecPath, read).Call(b, jen.Id(q)), nil)),
			p.Clone().Op("=").Id(q).Op("+").Lit(size),
		)
	case String:
		var start, end string
		if sp, ok := f.spans[fd]; ok {
			start, end = sp[0], sp[1]
			code = append(code, jen.List(jen.Id(start), jen.Id(end)).Op("=").Qual(codecPath, "StringAt").Call(b, jen.Id(q)))
		} else {
			start, end = f.fresh("s"), f.fresh("e")
			code = append(code, jen.List(jen.Id(start), jen.Id(end)).Op(":=").Qual(codecPath, "StringAt").Call(b, jen.Id(q)))
		}
		code = append(code, jen.If(jen.Id(end).Op("==").Lit(0)).Block(
			jen.If(
				jen.List(jen.Id(start), jen.Id(end)).Op("=").Qual(codecPath, "LongStringAt").Call(b, jen.Id(q)),
				jen.Id(end).Op("==").Lit(0),
			).Block(f.toSlow()...),
		))
		if _, ok := f.spans[fd]; !ok {
			code = append(code, dst.Clone().Op("=").Add(f.stringOf(s, b.Clone().Index(jen.Id(start).Op(":").Id(end)))))
		}
		return append(code, p.Clone().Op("=").Id(end))
	}
	// Int, Uint, Duration: a varint, of one byte, of up to eight read at
	// once, or longer (or near the end of the input) read out of line.
	x, n, c := f.fresh("x"), f.fresh("n"), f.fresh("c")
	code = append(code,
		jen.Var().Id(x).Uint64(),
		jen.Var().Id(n).Int(),
		jen.If(jen.Id(c).Op(":=").Add(b).Index(jen.Id(q)), jen.Id(c).Op("<").Id("0x80")).Block(
			jen.List(jen.Id(x), jen.Id(n)).Op("=").List(jen.Uint64().Call(jen.Id(c)), jen.Lit(1)),
		).Else().If(
			jen.List(jen.Id(x), jen.Id(n)).Op("=").Qual(codecPath, "PeekUvarint").Call(b, jen.Id(q)),
			jen.Id(n).Op("!=").Lit(0),
		).Block(
			jen.Id(x).Op("=").Qual(codecPath, "PackUvarint").Call(jen.Id(x)),
		).Else().If(
			jen.List(jen.Id(x), jen.Id(n)).Op("=").Qual(codecPath, "UvarintAt").Call(b, jen.Id(q)),
			jen.Id(n).Op("==").Lit(0),
		).Block(f.toSlow()...),
	)
	switch s.Kind {
	case Uint:
		if s.Bits < 64 {
			code = append(code, jen.If(jen.Id(x).Op(">>").Lit(s.Bits).Op("!=").Lit(0)).Block(f.toSlow()...))
		}
		code = append(code, dst.Clone().Op("=").Add(f.convert(s, jen.Id(x), f.plainConversion(s, "uint64"))))
	case Int:
		val := jen.Qual(codecPath, "Zigzag").Call(jen.Id(x))
		if s.Bits < 64 {
			i := f.fresh("i")
			narrow := jen.Id(fmt.Sprintf("int%d", s.Bits)).Call(jen.Id(i))
			code = append(code,
				jen.Id(i).Op(":=").Add(val),
				jen.If(jen.Int64().Call(narrow).Op("!=").Id(i)).Block(f.toSlow()...),
			)
			val = jen.Id(i)
		}
		code = append(code, dst.Clone().Op("=").Add(f.convert(s, val, f.plainConversion(s, "int64"))))
	case Duration:
		code = append(code, dst.Clone().Op("=").Add(f.convert(s, jen.Qual("time", "Duration").Call(jen.Qual(codecPath, "Zigzag").Call(jen.Id(x))), nil)))
	}
	return append(code, p.Clone().Op("=").Id(q).Op("+").Id(n))
}

// join emits the copy of the located strings into one allocation, and the
// setting of each field that was read from it; or, when they are longer
// together than codec.MaxJoined, the copy of each into its own.
func (f *fastEmitter) join() []jen.Code {
	if f.strs == nil {
		return nil
	}
	n, buf, all := f.fresh("n"), f.fresh("buf"), f.fresh("all")
	length := func(fd *Field) *jen.Statement {
		sp := f.spans[fd]
		return jen.Id(sp[1]).Op("-").Id(sp[0])
	}
	var total *jen.Statement
	for i, fd := range f.strs {
		if i == 0 {
			total = jen.Parens(length(fd))
		} else {
			total = total.Op("+").Parens(length(fd))
		}
	}
	src := func(fd *Field) *jen.Statement {
		sp := f.spans[fd]
		return jen.Id(f.b).Index(jen.Id(sp[0]).Op(":").Id(sp[1]))
	}
	read := func(fd *Field) jen.Code { return jen.Id(f.spans[fd][1]).Op("!=").Lit(0) }
	// append, not copy: the encoders need append already, and a package
	// may declare its own copy.
	joined := []jen.Code{jen.Id(buf).Op(":=").Make(jen.Index().Byte(), jen.Lit(0), jen.Id(n))}
	for _, fd := range f.strs {
		joined = append(joined, jen.Id(buf).Op("=").Append(jen.Id(buf), src(fd).Op("...")))
	}
	joined = append(joined, jen.Id(all).Op(":=").Qual(codecPath, "StringOf").Call(jen.Id(buf)))
	var apart []jen.Code
	for i, fd := range f.strs {
		joined = append(joined, jen.If(read(fd)).Block(
			f.id("v").Dot(fd.Name).Op("=").Add(f.convert(fd.Shape, jen.Id(all).Index(jen.Op(":").Add(length(fd))), nil)),
		))
		if i < len(f.strs)-1 {
			joined = append(joined, jen.Id(all).Op("=").Id(all).Index(length(fd).Op(":")))
		}
		apart = append(apart, jen.If(read(fd)).Block(
			f.id("v").Dot(fd.Name).Op("=").Add(f.stringOf(fd.Shape, src(fd))),
		))
	}
	return []jen.Code{
		jen.Comment("The strings located above, copied in one allocation when they are short"),
		jen.Comment("together, else each in its own, so that none keeps long ones alive."),
		jen.If(jen.Id(n).Op(":=").Add(total), jen.Id(n).Op("<=").Qual(codecPath, "MaxJoined")).Block(joined...).
			Else().Block(apart...),
	}
}

// stringOf is the bytes x, a []byte, as a new value of the string shape s.
func (f *fastEmitter) stringOf(s *Shape, x jen.Code) jen.Code {
	if s.Named {
		return jen.Add(f.typeCode(s.Type)).Parens(x)
	}
	return jen.String().Parens(x)
}
