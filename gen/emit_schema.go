package gen

import (
	"github.com/dave/jennifer/jen"

	"github.com/streamgen/streamgen/codec"
)

// kindOf is the binary kind of a value of shape s. A pointer has its
// element's kind: the pointer itself shows only as a presence byte in lists.
func kindOf(s *Shape) codec.Kind {
	switch s.Kind {
	case Bool:
		return codec.KindBool
	case Int:
		return codec.KindInt
	case Uint:
		return codec.KindUint
	case Float:
		if s.Bits == 32 {
			return codec.KindFloat32
		}
		return codec.KindFloat64
	case String:
		return codec.KindString
	case Bytes:
		return codec.KindBytes
	case Time:
		return codec.KindTime
	case Duration:
		return codec.KindDuration
	case Pointer:
		return kindOf(s.Elem)
	case Slice, Array:
		return codec.KindList
	case Map:
		return codec.KindMap
	case StructShape:
		return codec.KindStruct
	}
	panic("kindOf: unknown shape")
}

// elemKind is the kind written in a list or map header for elements of
// shape s: pointers are flagged, since each carries a presence byte.
func elemKind(s *Shape) codec.Kind {
	if s.Kind == Pointer {
		return kindOf(s.Elem) | codec.PointerFlag
	}
	return kindOf(s)
}

// kindCode names a kind constant of the codec package.
func kindCode(k codec.Kind) jen.Code {
	var c *jen.Statement
	switch k &^ codec.PointerFlag {
	case codec.KindBool:
		c = jen.Qual(codecPath, "KindBool")
	case codec.KindInt:
		c = jen.Qual(codecPath, "KindInt")
	case codec.KindUint:
		c = jen.Qual(codecPath, "KindUint")
	case codec.KindFloat32:
		c = jen.Qual(codecPath, "KindFloat32")
	case codec.KindFloat64:
		c = jen.Qual(codecPath, "KindFloat64")
	case codec.KindString:
		c = jen.Qual(codecPath, "KindString")
	case codec.KindBytes:
		c = jen.Qual(codecPath, "KindBytes")
	case codec.KindTime:
		c = jen.Qual(codecPath, "KindTime")
	case codec.KindDuration:
		c = jen.Qual(codecPath, "KindDuration")
	case codec.KindStruct:
		c = jen.Qual(codecPath, "KindStruct")
	case codec.KindList:
		c = jen.Qual(codecPath, "KindList")
	case codec.KindMap:
		c = jen.Qual(codecPath, "KindMap")
	}
	if k&codec.PointerFlag != 0 {
		c = c.Op("|").Qual(codecPath, "PointerFlag")
	}
	return c
}

// minSize is the fewest bytes a value of shape s takes as a list element,
// which bounds how many elements a decoder lets a length claim.
func minSize(s *Shape) int {
	switch s.Kind {
	case Float:
		return s.Bits / 8
	case Time:
		return 2
	case Slice, Array:
		return 2
	case Map:
		return 3
	}
	return 1
}

// schemaVar emits the schema of s: registered for a record, sealed for a
// struct reached from one.
func (e *emitter) schemaVar(s *Struct) jen.Code {
	e.schemaSCC, e.schemaDone = s.SCC, map[*Struct]bool{s: true}
	schema := e.schemaLiteral(s)
	if s.Record {
		return jen.Var().Id("schema"+s.Helper).Op("=").Qual(codecPath, "Register").Call(schema)
	}
	return jen.Var().Id("schema" + s.Helper).Op("=").Parens(schema).Dot("Seal").Call()
}

// schemaLiteral is the schema of s as a composite literal. A recursive
// struct's schema holds the schemas of the structs it reaches inline,
// each struct that encloses them written as a Ref to its name (a
// variable cannot hold itself).
func (e *emitter) schemaLiteral(s *Struct) jen.Code {
	fields := make([]jen.Code, len(s.Fields))
	for i, f := range s.Fields {
		d := jen.Dict{
			jen.Id("Name"): jen.Lit(f.Name),
			jen.Id("ID"):   jen.Lit(int(f.ID)),
			jen.Id("Type"): e.schemaType(f.Shape),
		}
		if name := jsonMemberName(s, f); name != f.Name {
			d[jen.Id("JSON")] = jen.Lit(name)
		}
		fields[i] = jen.Values(d)
	}
	d := jen.Dict{
		jen.Id("Name"):   jen.Lit(s.Qualified),
		jen.Id("Fields"): jen.Index().Qual(codecPath, "Field").Values(fields...),
	}
	if s.Recursive {
		d[jen.Id("Recursive")] = jen.True()
	}
	return jen.Op("&").Qual(codecPath, "Schema").Values(d)
}

func (e *emitter) schemaType(s *Shape) jen.Code {
	d := jen.Dict{jen.Id("Go"): jen.Lit(e.goName(s.Type))}
	if s.Kind == Pointer {
		d[jen.Id("Pointer")] = jen.True()
		s = s.Elem
	}
	d[jen.Id("Kind")] = kindCode(kindOf(s))
	switch s.Kind {
	case Int, Uint, Float:
		d[jen.Id("Bits")] = jen.Lit(s.Bits)
	case Slice:
		d[jen.Id("Elem")] = e.schemaType(s.Elem)
	case Array:
		d[jen.Id("Elem")] = e.schemaType(s.Elem)
		d[jen.Id("Len")] = jen.Lit(int(s.Len))
	case Map:
		d[jen.Id("Key")] = e.schemaType(s.Key)
		d[jen.Id("Elem")] = e.schemaType(s.Elem)
	case StructShape:
		switch st := s.Struct; {
		case st.Record && !st.Local:
			d[jen.Id("Struct")] = jen.Parens(jen.Op("*").Add(e.typeCode(st.Type))).Parens(jen.Nil()).Dot("StreamSchema").Call()
		case st.Recursive && st.SCC == e.schemaSCC && e.schemaDone[st]:
			d[jen.Id("Ref")] = jen.Lit(st.Qualified)
		case st.Recursive && st.SCC == e.schemaSCC:
			// Of the recursive group being written: a variable for st
			// would need this one to be initialized first.
			e.schemaDone[st] = true
			d[jen.Id("Struct")] = e.schemaLiteral(st)
		default:
			e.usedSchemas[st] = true
			d[jen.Id("Struct")] = jen.Id("schema" + st.Helper)
		}
	}
	return jen.Op("&").Qual(codecPath, "Type").Values(d)
}

// jsonMemberName is the name of field f's own member in s's JSON object
// as codec.Field.JSON writes it: "-" when it has none (a json:"-" field,
// an embedded struct whose fields are promoted, a field its namesakes
// hide), and "-," for a member named "-", as a json tag writes them.
func jsonMemberName(s *Struct, f *Field) string {
	for _, jf := range s.JSON {
		if len(jf.Path) == 1 && jf.Path[0] == f.Name {
			if jf.Name == "-" {
				return "-,"
			}
			return jf.Name
		}
	}
	return "-"
}
