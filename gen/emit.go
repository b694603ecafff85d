package gen

import (
	"fmt"
	"go/types"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dave/jennifer/jen"
)

// Import paths of the packages generated code refers to.
const (
	codecPath = "github.com/streamgen/streamgen/codec"
	timePath  = "time"
)

// emitter writes the code of one package's output file.
type emitter struct {
	pkg   *Package
	types *types.Package
	// fn names the parameters and locals of the function being emitted.
	fn naming
	// allLocals holds every name a parameter or local of the output has,
	// and imports the name of each package the output refers to, by
	// path: no import is named like a local, which would hide it.
	allLocals map[string]bool
	imports   map[string]string
	// jsonOK and jsonKey name the flag and the current key of the JSON
	// reader function being emitted: ok and key, unless the package has
	// types of those names.
	jsonOK, jsonKey string
	// depth is set while the helper being emitted takes a depth: the
	// nesting of the recursive type it writes (codec.MaxDepth bounds it).
	depth bool
	// While the schema of a recursive struct is written: its group of
	// structs that contain each other (SCC), whose schemas are written
	// inline once each, and those already written, which later ones
	// refer to by name.
	schemaSCC  int
	schemaDone map[*Struct]bool
	// usedSchemas are the structs whose schema variable another schema
	// names.
	usedSchemas map[*Struct]bool
}

// depthArgs are the arguments after b and v of a call to the append
// helper of s: for a struct that holds a recursive one, the number of
// recursive structs the value is inside, itself included (as
// Decoder.Enter counts them).
func (e *emitter) depthArgs(s *Struct) []jen.Code {
	switch {
	case !s.Deep:
		return nil
	case !e.depth && s.Recursive:
		return []jen.Code{jen.Lit(1)}
	case !e.depth:
		return []jen.Code{jen.Lit(0)}
	case s.Recursive:
		return []jen.Code{e.id("depth").Op("+").Lit(1)}
	}
	return []jen.Code{e.id("depth")}
}

// depthParams are the parameters of an append helper after b and v, and
// the check that starts its body: the nesting is bounded for a recursive
// struct, so that a cycle of pointers is an error, not a stack overflow.
func (e *emitter) depthParams(s *Struct, tooDeep string) ([]jen.Code, []jen.Code) {
	e.depth = s.Deep
	if !s.Deep {
		return nil, nil
	}
	params := []jen.Code{e.id("depth").Int()}
	if !s.Recursive {
		return params, nil
	}
	return params, []jen.Code{
		jen.If(e.id("depth").Op(">").Qual(codecPath, "MaxDepth")).Block(
			jen.Return(e.id("b"), jen.Qual(codecPath, tooDeep).Call(jen.Lit(e.goName(s.Type)))),
		),
	}
}

// naming is what names the parameters and locals of one generated
// function.
type naming struct {
	// names counts the locals by base name, so that nested loops read
	// i, i1, i2 instead of colliding; used holds every name given.
	names map[string]int
	used  map[string]bool
	// locals maps the fixed names of the function's parameters and
	// variables (b, v, err, ...) to the names they have: see function.
	locals map[string]string
}

// fresh returns a local name based on base, unique in the current
// function, and not the name of a type the package declares, which the
// local would hide from the function's code (a type p, converted to).
// Other package-level names may be hidden: generated code does not refer
// to them.
func (e *emitter) fresh(base string) string {
	for {
		n := e.fn.names[base]
		e.fn.names[base] = n + 1
		name := base
		if n > 0 {
			name += strconv.Itoa(n)
		}
		if e.fn.used[name] || e.isType(name) {
			continue
		}
		e.use(name)
		return name
	}
}

// isType reports whether the package declares a type named name.
func (e *emitter) isType(name string) bool {
	if e.types == nil {
		return false
	}
	_, isType := e.types.Scope().Lookup(name).(*types.TypeName)
	return isType
}

// use records name as a local of the current function.
func (e *emitter) use(name string) {
	e.fn.used[name] = true
	if e.allLocals == nil {
		e.allLocals = map[string]bool{}
	}
	e.allLocals[name] = true
}

// function starts a new function for naming purposes. locals are the
// fixed names of its parameters and variables (b, v, err, ...), which
// e.id writes: each keeps its name unless refers says that the function
// may refer to a declaration of the package by that name, which the
// local would hide (a type, converted to); then it is the first of
// name1, name2, ... that the package does not declare.
func (e *emitter) function(refers func(name string) bool, locals ...string) {
	e.fn = naming{names: map[string]int{}, used: map[string]bool{}, locals: map[string]string{}}
	for _, l := range locals {
		name := l
		for i := 1; refers(name) || e.fn.used[name] || name != l && e.declared(name); i++ {
			name = l + strconv.Itoa(i)
		}
		e.fn.names[l] = 1
		e.fn.locals[l] = name
		e.use(name)
	}
}

// declared reports whether the package declares name.
func (e *emitter) declared(name string) bool {
	return e.types != nil && e.types.Scope().Lookup(name) != nil
}

// local is the name the fixed local l has in the current function.
func (e *emitter) local(l string) string {
	if name, ok := e.fn.locals[l]; ok {
		return name
	}
	return l
}

// id is the fixed local l of the current function (see function).
func (e *emitter) id(l string) *jen.Statement { return jen.Id(e.local(l)) }

// err is the current function's error variable.
func (e *emitter) err() *jen.Statement { return e.id("err") }

// file renders the whole output file.
func (e *emitter) file() *jen.File {
	f := jen.NewFilePathName(e.pkg.Path, e.pkg.Name)
	f.HeaderComment("Code generated by streamgen. DO NOT EDIT.")
	f.ImportName(codecPath, "codec")
	e.imports = map[string]string{codecPath: "codec", timePath: "time", typedPath: "typed"}
	f.Comment("This file and the codec package must agree on the encoding.")
	f.Var().Id("_").Op("=").Qual(codecPath, "SupportPackageIsVersion1")
	for _, s := range e.pkg.Records {
		f.Line()
		for _, c := range e.recordMethods(s) {
			f.Add(c)
		}
	}
	for _, b := range e.pkg.Bindings {
		f.Line()
		f.Add(e.binding(b))
	}
	for _, p := range e.pkg.Processors {
		f.Line()
		f.Add(e.processor(p))
	}
	// A schema variable is written for each record and each struct whose
	// schema another refers to by its variable: the other members of a
	// recursive group are described inside their group's schemas.
	schemas := map[*Struct]jen.Code{}
	e.usedSchemas = map[*Struct]bool{}
	for _, s := range e.pkg.Structs {
		schemas[s] = e.schemaVar(s)
	}
	for _, s := range e.pkg.Structs {
		if s.Record || !s.Recursive || e.usedSchemas[s] {
			f.Line()
			f.Add(schemas[s])
		}
		f.Line()
		f.Add(e.appendBinary(s))
		f.Line()
		f.Add(e.readBinary(s))
		f.Line()
		f.Add(e.appendJSON(s))
		f.Line()
		f.Add(e.readJSON(s))
		if req := e.requiredFields(s); req != nil {
			f.Line()
			f.Add(req)
		}
	}
	e.nameImports(f)
	return f
}

// typeCode turns a Go type into code that names it in the output package.
func (e *emitter) typeCode(t types.Type) jen.Code {
	switch t := t.(type) {
	case *types.Alias:
		// An alias is written by its name where it can be (it may stand
		// for a type of another package that cannot be named here), else
		// by what it stands for.
		if obj := t.Obj(); obj.Pkg() != nil && t.TypeArgs().Len() == 0 && (obj.Exported() || obj.Pkg().Path() == e.pkg.Path) {
			return e.qual(obj)
		}
		return e.typeCode(types.Unalias(t))
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() == nil {
			return jen.Id(obj.Name()) // error
		}
		return e.qual(obj)
	case *types.Basic:
		return jen.Id(t.Name())
	case *types.Pointer:
		return jen.Op("*").Add(e.typeCode(t.Elem()))
	case *types.Slice:
		return jen.Index().Add(e.typeCode(t.Elem()))
	case *types.Array:
		return jen.Index(jen.Lit(int(t.Len()))).Add(e.typeCode(t.Elem()))
	case *types.Map:
		return jen.Map(e.typeCode(t.Key())).Add(e.typeCode(t.Elem()))
	case *types.Struct:
		fields := make([]jen.Code, t.NumFields())
		for i := range fields {
			v := t.Field(i)
			var field *jen.Statement
			if v.Embedded() {
				field = jen.Add(e.typeCode(v.Type()))
			} else {
				field = jen.Id(v.Name()).Add(e.typeCode(v.Type()))
			}
			if tag := t.Tag(i); tag != "" {
				field.Op(strconv.Quote(tag))
			}
			fields[i] = field
		}
		return jen.Struct(fields...)
	}
	panic(fmt.Sprintf("typeCode: unexpected %T", t))
}

// qual names obj, a type declared in a package, noting the package's
// import.
func (e *emitter) qual(obj types.Object) jen.Code {
	if path := obj.Pkg().Path(); path != e.pkg.Path && e.imports != nil {
		e.imports[path] = obj.Pkg().Name()
	}
	return jen.Qual(obj.Pkg().Path(), obj.Name())
}

// nameImports names the packages the output imports, once the file f is
// built, so that none is named like a declaration of the package (a
// variable codec), a declaration of the output, a local of a generated
// function or a predeclared identifier, which the import would clash
// with or hide. Each keeps the name jennifer gives it, its own, unless
// one is taken or two packages have one name (which jennifer numbers, in
// the order it meets them); then each gets its own name, or failing that
// its name and the first number that makes it free, written as jennifer
// writes it (an alias, except for the codec package and the standard
// library's).
func (e *emitter) nameImports(f *jen.File) {
	taken := map[string]bool{}
	for _, name := range e.declares() {
		taken[name] = true
	}
	for name := range e.allLocals {
		taken[name] = true
	}
	free := func(name string) bool {
		return !taken[name] && !e.declared(name) && types.Universe.Lookup(name) == nil
	}
	paths := slices.Sorted(maps.Keys(e.imports))
	seen := map[string]bool{}
	clash := false
	for _, path := range paths {
		name := e.imports[path]
		clash = clash || seen[name] || !free(name)
		seen[name] = true
	}
	if !clash {
		return
	}
	for _, path := range paths {
		name := e.imports[path]
		alias := name
		for i := 1; !free(alias); i++ {
			alias = numbered(name, i)
		}
		taken[alias] = true
		if first, _, _ := strings.Cut(path, "/"); alias == name && (path == codecPath || !strings.Contains(first, ".")) {
			f.ImportName(path, name)
		} else {
			f.ImportAlias(path, alias)
		}
	}
}

// numbered is name followed by i, or name for 0.
func numbered(name string, i int) string {
	if i == 0 {
		return name
	}
	return name + strconv.Itoa(i)
}

// declares lists the names the output declares at package level.
func (e *emitter) declares() []string {
	var names []string
	for _, s := range e.pkg.Structs {
		names = append(names, helperNames(s.Helper, s.Type)...)
	}
	for _, b := range e.pkg.Bindings {
		names = append(names, bindingNames(b.Name, b.HasDelay)...)
	}
	for _, p := range e.pkg.Processors {
		names = append(names, bindingNames(p.Name, p.HasDelay)...)
	}
	return names
}

// sizeHint is the capacity MarshalBinary starts with: a guess at a
// typical encoding of s (a tag and a short value per field), so that most
// records take one allocation.
func sizeHint(s *Struct) int {
	n := 0
	for _, f := range s.Fields {
		switch f.Shape.Kind {
		case Bool, Int, Uint, Duration:
			n += 3 + 4
		case Float:
			n += 3 + f.Shape.Bits/8
		case Time:
			n += 3 + 12
		default:
			n += 3 + 16
		}
	}
	return max(n, 8)
}

// to converts x, a value of shape s, to the basic type named basic, unless
// it already is one.
func (e *emitter) to(s *Shape, basic string, x jen.Code) jen.Code {
	if !s.Named && types.Unalias(s.Type).String() == basic {
		return x
	}
	return jen.Id(basic).Parens(x)
}

// goName is how a type reads in schemas and messages: as reflect and so
// encoding/json's errors name it, qualified by its package's name
// ("fixtures.Level", "[]time.Time", "[]uint8", "struct { A int }").
func (e *emitter) goName(t types.Type) string { return reflectName(t) }

// reflectName writes t as reflect's Type.String does.
func reflectName(t types.Type) string {
	switch t := t.(type) {
	case *types.Alias:
		return reflectName(types.Unalias(t))
	case *types.Basic:
		return types.Typ[t.Kind()].Name() // byte and rune as uint8 and int32
	case *types.Named:
		if pkg := t.Obj().Pkg(); pkg != nil {
			return pkg.Name() + "." + t.Obj().Name()
		}
		return t.Obj().Name()
	case *types.Pointer:
		return "*" + reflectName(t.Elem())
	case *types.Slice:
		return "[]" + reflectName(t.Elem())
	case *types.Array:
		return "[" + strconv.FormatInt(t.Len(), 10) + "]" + reflectName(t.Elem())
	case *types.Map:
		return "map[" + reflectName(t.Key()) + "]" + reflectName(t.Elem())
	case *types.Struct:
		if t.NumFields() == 0 {
			return "struct {}"
		}
		fields := make([]string, t.NumFields())
		for i := range fields {
			f := t.Field(i)
			fields[i] = reflectName(f.Type())
			if !f.Embedded() {
				fields[i] = f.Name() + " " + fields[i]
			}
			if tag := t.Tag(i); tag != "" {
				fields[i] += " " + strconv.Quote(tag)
			}
		}
		return "struct { " + strings.Join(fields, "; ") + " }"
	}
	return types.TypeString(t, func(p *types.Package) string { return p.Name() })
}

// recordMarshalJSON emits MarshalJSON. A struct that holds no recursive one
// is encoded into a buffer on the stack and copied out while its
// encodings are small or medium (see codec.JSONSize; the medium buffer
// is cleared only when it is used): its helpers let their buffer
// escape only to their result, so the buffer stays on the stack (were it
// moved to the heap, the output would be the same at the cost of a
// second allocation; generated/fixtures' TestMarshalJSONAllocatesItsResultOnly
// counts them). The helpers of recursive structs call each other, which
// the compiler cannot see through, so those write once into a buffer
// sized by the running size of their encodings.
func (e *emitter) recordMarshalJSON(s *Struct) jen.Code {
	recv := e.id("t").Op("*").Id(s.Name)
	h := s.Helper
	size := jen.Id("jsonSize" + h)
	appendTo := func(buf jen.Code) jen.Code {
		return jen.List(e.id("b"), e.err()).Op(":=").Id("appendJSON" + h).Call(append([]jen.Code{buf, e.id("t")}, e.depthArgs(s)...)...)
	}
	failed := jen.If(e.err().Op("!=").Nil()).Block(jen.Return(jen.Nil(), e.err()))
	heap := []jen.Code{
		appendTo(size.Clone().Dot("Buffer").Call()),
		failed,
		size.Clone().Dot("Observe").Call(jen.Len(e.id("b"))),
		jen.Return(e.id("b"), jen.Nil()),
	}
	if s.Deep {
		return jen.Comment("MarshalJSON returns "+e.local("t")+" as encoding/json would marshal it. The encoding").Line().
			Comment("is written once, into a new buffer sized by the running size of").Line().
			Comment(s.Name+"'s encodings.").Line().
			Func().Params(recv).Id("MarshalJSON").Params().Params(jen.Index().Byte(), jen.Error()).Block(heap...)
	}
	onStack := func(tier, bufSize string) jen.Code {
		return jen.If(size.Clone().Dot(tier).Call()).Block(
			jen.Var().Id(e.local("buf")).Index(jen.Qual(codecPath, bufSize)).Byte(),
			appendTo(e.id("buf").Index(jen.Empty(), jen.Lit(0))),
			failed,
			size.Clone().Dot("Observe").Call(jen.Len(e.id("b"))),
			jen.Return(jen.Append(jen.Index().Byte().Parens(jen.Nil()), e.id("b").Op("...")), jen.Nil()),
		)
	}
	return jen.Comment("MarshalJSON returns "+e.local("t")+" as encoding/json would marshal it, in a new slice").Line().
		Comment("of its length. While "+s.Name+"'s encodings are small or medium, "+e.local("t")+" is").Line().
		Comment("encoded into a buffer on the stack and copied out; larger ones are").Line().
		Comment("written once into a new buffer sized by the running size of the").Line().
		Comment("encodings.").Line().
		Func().Params(recv).Id("MarshalJSON").Params().Params(jen.Index().Byte(), jen.Error()).Block(
		append([]jen.Code{
			onStack("Small", "JSONStackSize"),
			onStack("Medium", "JSONMediumStackSize"),
		}, heap...)...,
	)
}

// recordMethods emits the exported methods of a local record: the
// interfaces of codec.Record, each a thin wrapper over the helpers.
func (e *emitter) recordMethods(s *Struct) []jen.Code {
	// The methods refer to no type but the record's, in UnmarshalBinary.
	e.function(func(n string) bool { return n == s.Name }, "t", "b", "d", "data", "r", "buf", "err")
	recv := func() *jen.Statement { return e.id("t").Op("*").Id(s.Name) }
	t, b := e.local("t"), e.local("b")
	name := s.Name
	h := s.Helper
	return []jen.Code{
		jen.Comment("AppendBinary appends the binary encoding of " + t + " to " + b + ". It fails only when"),
		jen.Comment("a field's type has its own MarshalBinary (or MarshalText, MarshalJSON)"),
		jen.Comment("and that fails."),
		jen.Func().Params(recv()).Id("AppendBinary").Params(e.id("b").Index().Byte()).Params(jen.Index().Byte(), jen.Error()).Block(
			jen.Return(jen.Id("appendBinary" + h).Call(append([]jen.Code{e.id("b"), e.id("t")}, e.depthArgs(s)...)...)),
		),
		jen.Line(),
		jen.Comment("MarshalBinary returns the binary encoding of " + t + "; see AppendBinary."),
		jen.Func().Params(recv()).Id("MarshalBinary").Params().Params(jen.Index().Byte(), jen.Error()).Block(
			jen.Return(jen.Id("appendBinary" + h).Call(append([]jen.Code{jen.Make(jen.Index().Byte(), jen.Lit(0), jen.Lit(sizeHint(s))), e.id("t")}, e.depthArgs(s)...)...)),
		),
		jen.Line(),
		jen.Comment("UnmarshalBinary sets " + t + " to the record encoded in " + b + ", which may have been"),
		jen.Comment("written by an earlier or later version of " + name + ": fields it does not"),
		jen.Comment("know are skipped, fields it lacks are left zero."),
		jen.Func().Params(recv()).Id("UnmarshalBinary").Params(e.id("b").Index().Byte()).Error().Block(
			jen.Op("*").Id(e.local("t")).Op("=").Id(name).Values(),
			jen.Var().Id(e.local("d")).Qual(codecPath, "Decoder"),
			e.id("d").Dot("Reset").Call(e.id("b")),
			jen.Id("readBinary"+h).Call(jen.Op("&").Id(e.local("d")), e.id("t"), e.id("d").Dot("End").Call()),
			jen.Return(e.id("d").Dot("Wrap").Call(jen.Lit(name))),
		),
		jen.Line(),
		jen.Comment("AppendJSON appends " + t + " as encoding/json would marshal it."),
		jen.Func().Params(recv()).Id("AppendJSON").Params(e.id("b").Index().Byte()).Params(jen.Index().Byte(), jen.Error()).Block(
			jen.Return(jen.Id("appendJSON" + h).Call(append([]jen.Code{e.id("b"), e.id("t")}, e.depthArgs(s)...)...)),
		),
		jen.Line(),
		e.recordMarshalJSON(s),
		jen.Line(),
		jen.Var().Id("jsonSize"+h).Qual(codecPath, "JSONSize"),
		jen.Line(),
		e.unmarshalJSONDoc(s),
		jen.Func().Params(recv()).Id("UnmarshalJSON").Params(e.id("data").Index().Byte()).Error().Block(
			jen.Var().Id(e.local("r")).Qual(codecPath, "JSONReader"),
			e.id("r").Dot("Reset").Call(e.id("data")),
			jen.Id("readJSON"+h).Call(jen.Op("&").Id(e.local("r")), e.id("t")),
			jen.Return(e.id("r").Dot("Finish").Call()),
		),
		jen.Line(),
		jen.Comment("ReadJSON reads one JSON value from " + e.local("r") + " into " + t + " as UnmarshalJSON does; it"),
		jen.Comment("is how records of other packages that hold " + name + " decode it."),
		jen.Func().Params(recv()).Id("ReadJSON").Params(e.id("r").Op("*").Qual(codecPath, "JSONReader")).Block(
			jen.Id("readJSON"+h).Call(e.id("r"), e.id("t")),
		),
		jen.Line(),
		jen.Comment("StreamSchema returns the registered schema of " + name + "."),
		jen.Func().Params(recv()).Id("StreamSchema").Params().Op("*").Qual(codecPath, "Schema").Block(
			jen.Return(jen.Id("schema" + h)),
		),
		jen.Line(),
		jen.Comment("StreamJSONSchema returns a JSON Schema (draft-07) of " + name + "'s JSON: what"),
		jen.Comment("MarshalJSON writes and UnmarshalJSON reads."),
		jen.Func().Params(recv()).Id("StreamJSONSchema").Params().String().Block(
			jen.Return(jen.Id("jsonSchema" + h)),
		),
		jen.Line(),
		e.jsonSchemaVar(s),
		jen.Line(),
		jen.Var().Id("_").Qual(codecPath, "Record").Op("=").Parens(jen.Op("*").Id(name)).Parens(jen.Nil()),
	}
}

// unmarshalJSONDoc is the doc comment of a record's UnmarshalJSON, which
// names the record's required members, if it has any.
func (e *emitter) unmarshalJSONDoc(s *Struct) jen.Code {
	var members []string
	for _, f := range s.JSON {
		if f.Required {
			m := strconv.Quote(f.Name)
			if f.Role != "" {
				m += " (" + f.Role + ")"
			}
			members = append(members, m)
		}
	}
	if members == nil {
		return jen.Comment("UnmarshalJSON decodes " + e.local("data") + " into " + e.local("t") + " as encoding/json would.")
	}
	list := "its required member, " + members[0] + ","
	if n := len(members); n > 1 {
		list = "its required members, " + strings.Join(members[:n-1], ", ") + " and " + members[n-1] + ","
	}
	text := "UnmarshalJSON decodes " + e.local("data") + " into " + e.local("t") + " as encoding/json would, except that " + list +
		" must be present and not null, and " + e.local("data") + " must not be null: a document that encoding/json accepts but that breaks this is refused with a *codec.RequiredFieldError."
	return comment(text)
}

// comment is text as a comment wrapped at 72 columns.
func comment(text string) jen.Code {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > 72 {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	lines = append(lines, line)
	code := jen.Comment(lines[0])
	for _, l := range lines[1:] {
		code = code.Line().Comment(l)
	}
	return code
}
