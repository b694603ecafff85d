package gen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/streamgen/streamgen/codec"
)

// builder turns the go/types view of a package into the model.
type builder struct {
	rep   *reporter
	pkg   *types.Package
	model *Package
	// local records, by type name
	records map[*types.TypeName]bool
	// structs already modelled: named types by *types.TypeName, anonymous
	// struct types by identity of the *types.Struct
	named   map[*types.TypeName]*Struct
	anon    map[*types.Struct]*Struct
	helpers map[string]bool
	// generated holds the package-level names the output declares.
	generated map[string]bool
	// plain is the type whose next shape is modelled without its
	// encoding methods: the Under of a Custom.
	plain types.Type
	// foreign records, by type name, found by reading the declaring file
	foreign     map[*types.TypeName]bool
	parsedFiles map[string]*astFile
}

// streamTag is the parsed `stream:"..."` struct tag.
type streamTag struct {
	skip, key, eventTime bool
	// required is the option "required": the field must be present and
	// not null in JSON input. key and eventtime imply it.
	required bool
	id       uint32
	// unit is the option unit=ns|us|ms|s: what an integer event time
	// counts since the Unix epoch. An integer eventtime field must have
	// one (millisecond data read as nanoseconds would land in 1970); a
	// time.Time has none.
	unit string
}

// timeUnits are the values of the stream tag's unit= option.
var timeUnits = []string{"ns", "us", "ms", "s"}

// role is why a field with this tag is required in JSON, as the
// generated decoder's errors say it ("the record's key"), or "" when it
// is required because it is tagged so.
func (st streamTag) role() string {
	switch {
	case st.key:
		return "the record's key"
	case st.eventTime:
		return "the record's event time"
	}
	return ""
}

func parseStreamTag(tag string) (streamTag, error) {
	var st streamTag
	v, ok := reflect.StructTag(tag).Lookup("stream")
	if !ok {
		return st, nil
	}
	for _, opt := range strings.Split(v, ",") {
		switch k, val, _ := strings.Cut(strings.TrimSpace(opt), "="); k {
		case "-":
			st.skip = true
		case "key":
			st.key = true
		case "eventtime":
			st.eventTime = true
		case "required":
			st.required = true
		case "id":
			n, err := strconv.ParseUint(val, 10, 32)
			if err != nil || n == 0 || n > codec.MaxFieldID {
				return st, fmt.Errorf("stream tag id=%s: want a number from 1 to %d", val, codec.MaxFieldID)
			}
			st.id = uint32(n)
		case "unit":
			if !contains(timeUnits, val) {
				return st, fmt.Errorf("stream tag unit=%s: want ns, us, ms or s (the integer's count since the Unix epoch)", val)
			}
			st.unit = val
		case "":
		default:
			return st, fmt.Errorf("unknown stream tag option %q (known: -, key, eventtime, required, id=N, unit=ns|us|ms|s)", k)
		}
	}
	return st, nil
}

// structOf returns the model of the struct type t (a named struct or an
// anonymous one), building it on first use.
func (b *builder) structOf(t types.Type, pos token.Pos) (*Struct, bool) {
	var s *Struct
	switch t := t.(type) {
	case *types.Named:
		tn := t.Obj()
		if s, ok := b.named[tn]; ok {
			return s, true // met again: maybe a recursive type, which markRecursive finds
		}
		if t.TypeParams().Len() > 0 || t.TypeArgs().Len() > 0 {
			b.rep.errorf(pos, "%s is a generic type: records and the structs in them cannot be generic", t.Obj().Name())
			return nil, false
		}
		if pkg := foreignFieldsOnly(t, b.pkg); pkg != "" {
			// type Stamp time.Time: the fields are time's, the methods
			// are not Stamp's; nothing would be encoded.
			b.rep.errorf(pos, "%s cannot be encoded: its fields are all unexported fields of package %s, which the generated code cannot reach, and a type defined on another does not take its methods; use the type it is defined on, or give %s MarshalBinary and UnmarshalBinary (or MarshalText and UnmarshalText) methods",
				typeString(b.pkg, t), pkg, tn.Name())
			return nil, false
		}
		s = &Struct{
			Name:      typeString(b.pkg, t),
			Qualified: tn.Pkg().Path() + "." + tn.Name(),
			Type:      t,
			Local:     tn.Pkg() == b.pkg,
			Pos:       tn.Pos(),
		}
		s.Record = b.records[tn] || (!s.Local && b.isForeignRecord(tn))
		b.named[tn] = s
	case *types.Struct:
		if s, ok := b.anon[t]; ok {
			return s, true // met again: maybe a recursive type, which markRecursive finds
		}
		for i := 0; i < t.NumFields(); i++ {
			if f := t.Field(i); !f.Exported() && f.Pkg() != nil && f.Pkg() != b.pkg {
				b.rep.errorf(pos, "struct type with the unexported field %s of package %s: the generated code cannot name it; give the struct a name there", f.Name(), f.Pkg().Path())
				return nil, false
			}
		}
		s = &Struct{Name: "struct{...}", Qualified: b.pkg.Path() + ".struct", Type: t, Local: true, Pos: pos}
		b.anon[t] = s
	default:
		panic("structOf: not a struct type")
	}
	if s.Record && !s.Local {
		// Reached through its own generated methods: nothing to model.
		return s, true
	}
	s.Helper = b.helperName(s)
	if _, anonymous := s.Type.(*types.Struct); anonymous {
		// Unique, so that a schema can refer to it by name.
		s.Qualified = b.pkg.Path() + ".struct{" + s.Helper + "}"
	}
	b.model.Structs = append(b.model.Structs, s)
	return s, b.fields(s)
}

// markRecursive sets Recursive on every struct that can reach itself
// through its fields (binary or JSON), with Tarjan's algorithm for
// strongly connected components.
func markRecursive(structs []*Struct) {
	index := map[*Struct]int{}
	low := map[*Struct]int{}
	onStack := map[*Struct]bool{}
	var stack []*Struct
	sccs := 0
	var visit func(s *Struct)
	visit = func(s *Struct) {
		index[s], low[s] = len(index), len(index)
		stack = append(stack, s)
		onStack[s] = true
		for _, t := range structEdges(s) {
			if _, seen := index[t]; !seen {
				visit(t)
				low[s] = min(low[s], low[t])
			} else if onStack[t] {
				low[s] = min(low[s], index[t])
			}
		}
		if low[s] != index[s] {
			return
		}
		var scc []*Struct
		for {
			t := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[t] = false
			scc = append(scc, t)
			if t == s {
				break
			}
		}
		if len(scc) > 1 || slices.Contains(structEdges(s), s) {
			sccs++
			for _, t := range scc {
				t.Recursive, t.SCC = true, sccs
			}
		}
	}
	for _, s := range structs {
		if _, seen := index[s]; !seen {
			visit(s)
		}
	}
	// Deep: holds a recursive struct, at any distance.
	var deep func(s *Struct, seen map[*Struct]bool) bool
	deep = func(s *Struct, seen map[*Struct]bool) bool {
		if s.Recursive {
			return true
		}
		if seen[s] {
			return false
		}
		seen[s] = true
		return slices.ContainsFunc(structEdges(s), func(t *Struct) bool { return deep(t, seen) })
	}
	for _, s := range structs {
		s.Deep = deep(s, map[*Struct]bool{})
	}
}

// structEdges lists the modelled structs that s's fields hold, at any
// depth of pointers, slices, arrays and maps.
func structEdges(s *Struct) []*Struct {
	var out []*Struct
	var walk func(sh *Shape)
	walk = func(sh *Shape) {
		if sh == nil {
			return
		}
		if c := sh.Custom; c != nil {
			walk(c.Under)
		}
		switch sh.Kind {
		case StructShape:
			if !foreignRecord(sh.Struct) {
				out = append(out, sh.Struct)
			}
		case Pointer, Slice, Array:
			walk(sh.Elem)
		case Map:
			walk(sh.Key)
			walk(sh.Elem)
		}
	}
	for _, f := range s.Fields {
		walk(f.Shape)
	}
	for _, f := range s.JSON {
		walk(f.Shape)
	}
	return out
}

// helperName picks a unique, readable suffix for a struct's helpers.
func (b *builder) helperName(s *Struct) string {
	base := "Anon"
	if n, ok := s.Type.(*types.Named); ok {
		base = n.Obj().Name()
		if !s.Local {
			p := n.Obj().Pkg().Name()
			base = strings.ToUpper(p[:1]) + p[1:] + strings.ToUpper(base[:1]) + base[1:]
		}
	}
	name := base
	for i := 1; b.helpers[name] || b.declaresAny(helperNames(name, s.Type)); i++ {
		name = base + strconv.Itoa(i)
	}
	b.helpers[name] = true
	for _, n := range helperNames(name, s.Type) {
		b.generated[n] = true
	}
	return name
}

// helperNames are the package-level names the output may declare for the
// struct type t whose helpers have the suffix h: its helpers, its
// schemas, and the like (see the emitters).
func helperNames(h string, t types.Type) []string {
	names := []string{"appendBinary" + h, "readBinary" + h, "appendJSON" + h, "readJSON" + h,
		"schema" + h, "jsonSize" + h, "jsonSchema" + h, "required" + h}
	if st, ok := t.Underlying().(*types.Struct); ok && st.NumFields() > fastChunk {
		for i := 0; i*fastChunk < st.NumFields(); i++ {
			names = append(names, fmt.Sprintf("readFast%sPart%d", h, i))
		}
	}
	return names
}

// generatedMethods are the methods the output declares on every record
// (see recordMethods).
var generatedMethods = []string{
	"AppendBinary", "MarshalBinary", "UnmarshalBinary",
	"AppendJSON", "MarshalJSON", "UnmarshalJSON", "ReadJSON",
	"StreamSchema", "StreamJSONSchema",
}

// checkMethodNames reports each method that the record obj declares, and
// each field of it, named like a method the output declares on it, which
// would be declared twice.
func (b *builder) checkMethodNames(obj *types.TypeName) {
	n, ok := types.Unalias(obj.Type()).(*types.Named)
	if !ok {
		return
	}
	for i := range n.NumMethods() {
		if m := n.Method(i); slices.Contains(generatedMethods, m.Name()) {
			b.rep.errorf(m.Pos(), "%s.%s: the generator writes the method %s for every record, from the record's fields; remove or rename this one, or drop //streamgen:record from %s", obj.Name(), m.Name(), m.Name(), obj.Name())
		}
	}
	st := n.Underlying().(*types.Struct)
	for i := range st.NumFields() {
		f := st.Field(i)
		if !slices.Contains(generatedMethods, f.Name()) {
			continue
		}
		fix := "rename the field (a json tag can keep its JSON name)"
		if f.Embedded() {
			fix = "embed another type, or name the field"
		}
		b.rep.errorf(f.Pos(), "%s.%s: a record cannot have a field named %s, a method the generator writes for every record; %s", obj.Name(), f.Name(), f.Name(), fix)
	}
}

// declaresAny reports whether the package declares any of names.
func (b *builder) declaresAny(names []string) bool {
	return slices.ContainsFunc(names, func(n string) bool { return b.pkg.Scope().Lookup(n) != nil })
}

// fields models the binary fields and the JSON members of s.
func (b *builder) fields(s *Struct) bool {
	st := s.Type.Underlying().(*types.Struct)
	ok := true
	ids := map[uint32]string{}
	for i := 0; i < st.NumFields(); i++ {
		v := st.Field(i)
		tag, err := parseStreamTag(st.Tag(i))
		if err != nil {
			b.rep.errorf(v.Pos(), "%s.%s: %v", s.Name, v.Name(), err)
			ok = false
			continue
		}
		if tag.skip || !v.Exported() && !v.Embedded() {
			continue
		}
		if v.Embedded() {
			if !v.Exported() {
				if jsonIgnored(st.Tag(i)) {
					continue
				}
				b.rep.errorf(v.Pos(), "%s.%s: embedded unexported types are not supported; export the type or tag the field `stream:\"-\" json:\"-\"`", s.Name, v.Name())
				ok = false
				continue
			}
		}
		shape, sok := b.shape(v.Type(), v.Pos(), s.Name+"."+v.Name())
		if !sok {
			ok = false
			continue
		}
		if v.Embedded() && (shape.Kind == Time || shape.Kind == Pointer && shape.Elem.Kind == Time) {
			b.rep.errorf(v.Pos(), "%s: embedded time.Time is not supported (its methods would take over the struct's JSON); name the field", s.Name)
			ok = false
			continue
		}
		if v.Embedded() && !s.Record && embedsRecord(v.Type(), b.isRecord) && hasOtherFields(st, i) {
			// A record of this package, whose generated methods the
			// struct will take once they are written, encoding it alone.
			b.rep.errorf(v.Pos(), "%s: embedded record %s is not supported in a struct that is not a record (its generated encoding methods would take over the struct's, leaving out its other fields); name the field, or make %s a record (//streamgen:record)", s.Name, typeString(b.pkg, v.Type()), s.Name)
			ok = false
			continue
		}
		if v.Embedded() && (shape.Custom != nil || shape.Kind == Pointer && shape.Elem.Custom != nil) {
			b.rep.errorf(v.Pos(), "%s: embedded %s is not supported (its encoding methods would take over the struct's); name the field", s.Name, typeString(b.pkg, v.Type()))
			ok = false
			continue
		}
		id := tag.id
		if id == 0 {
			id = codec.FieldID(v.Name())
		}
		if other, dup := ids[id]; dup {
			b.rep.errorf(v.Pos(), "%s.%s: field id %d is also the id of %s; give one of them another with `stream:\"id=N\"`", s.Name, v.Name(), id, other)
			ok = false
			continue
		}
		ids[id] = v.Name()
		switch {
		case tag.eventTime && shape.Kind != Time && shape.Kind != Int:
			b.rep.errorf(v.Pos(), "%s.%s: an eventtime field must be a time.Time or an integer, not %s", s.Name, v.Name(), typeString(b.pkg, v.Type()))
			ok = false
		case tag.eventTime && shape.Kind == Int && tag.unit == "":
			b.rep.errorf(v.Pos(), "%s.%s: an integer eventtime field needs its unit: tag it `stream:\"eventtime,unit=ms\"` (ns, us, ms or s since the Unix epoch)", s.Name, v.Name())
			ok = false
		case tag.unit != "" && shape.Kind != Int:
			b.rep.errorf(v.Pos(), "%s.%s: unit=%s is for integer event times; a %s has no unit", s.Name, v.Name(), tag.unit, typeString(b.pkg, v.Type()))
			ok = false
		}
		s.Fields = append(s.Fields, &Field{Name: v.Name(), ID: id, Shape: shape, Pos: v.Pos(), Key: tag.key, EventTime: tag.eventTime, Required: tag.required})
	}
	if !ok {
		return false
	}
	return b.jsonFields(s) && b.checkRequired(s)
}

// checkRequired reports the fields of s tagged `stream:"required"` that
// are not members of its JSON object, whose requirement could never be
// met; required members that MarshalJSON may leave out (omitempty,
// omitzero), whose objects UnmarshalJSON would refuse; and a struct with
// more required members than codec.RequiredSet counts. (A key or event-time field that is not in the JSON is simply
// not required there: the record is not meant to be read from JSON.)
func (b *builder) checkRequired(s *Struct) bool {
	st := s.Type.Underlying().(*types.Struct)
	ok := true
	for i := 0; i < st.NumFields(); i++ {
		v := st.Field(i)
		tag, err := parseStreamTag(st.Tag(i))
		if err != nil || !tag.required {
			continue
		}
		if slices.ContainsFunc(s.JSON, func(f *JSONField) bool { return len(f.Path) == 1 && f.Path[0] == v.Name() }) {
			continue
		}
		why := "encoding/json drops it, for another field has its JSON name"
		switch {
		case jsonIgnored(st.Tag(i)):
			why = "it is tagged json:\"-\""
		case v.Embedded():
			why = "it is an embedded struct, whose fields are promoted; tag those instead"
		case !v.Exported():
			why = "it is unexported"
		}
		b.rep.errorf(v.Pos(), "%s.%s: a field tagged `stream:\"required\"` must be a member of the JSON object, and %s", s.Name, v.Name(), why)
		ok = false
	}
	n := 0
	for _, f := range s.JSON {
		if !f.Required {
			continue
		}
		n++
		if option := omittingOption(f); option != "" {
			pos := s.Pos
			if len(f.Path) == 1 {
				for i := 0; i < st.NumFields(); i++ {
					if st.Field(i).Name() == f.Path[0] {
						pos = st.Field(i).Pos()
					}
				}
			}
			why := "tagged `stream:\"required\"`"
			if f.Role != "" {
				why = f.Role
			}
			b.rep.errorf(pos, "%s.%s: json option %q would leave out member %q, which UnmarshalJSON requires (%s): MarshalJSON would write objects UnmarshalJSON refuses; drop the option", s.Name, strings.Join(f.Path, "."), option, f.Name, why)
			ok = false
		}
	}
	if n > maxRequired {
		b.rep.errorf(s.Pos, "%s has %d required JSON members (fields tagged key, eventtime or required, its own or promoted); at most %d are supported", s.Name, n, maxRequired)
		ok = false
	}
	return ok
}

// maxRequired is the most required members a struct may have: the bits
// of a codec.RequiredSet.
const maxRequired = 64

func jsonIgnored(tag string) bool { return reflect.StructTag(tag).Get("json") == "-" }

// shape describes t, or reports why it cannot be encoded. where names the
// field for messages ("Event.Tags").
func (b *builder) shape(t types.Type, pos token.Pos, where string) (*Shape, bool) {
	if isNamed(t, "time", "Time") {
		return &Shape{Kind: Time, Type: t}, true
	}
	if isNamed(t, "time", "Duration") {
		return &Shape{Kind: Duration, Type: t, Bits: 64}, true
	}
	if isNamed(t, "encoding/json", "Number") {
		return &Shape{Kind: String, Type: t, Named: true, Number: true}, true
	}
	named, isNamedType := t.(*types.Named)
	if isNamedType && named.TypeArgs().Len() > 0 {
		b.rep.errorf(pos, "%s: generic type %s is not supported", where, typeString(b.pkg, t))
		return nil, false
	}
	if isNamedType && !named.Obj().Exported() && named.Obj().Pkg() != nil && named.Obj().Pkg() != b.pkg {
		b.rep.errorf(pos, "%s: %s is not exported by package %s, so the generated code cannot name it", where, named.Obj().Name(), named.Obj().Pkg().Path())
		return nil, false
	}
	if isNamedType {
		if plain := b.plain == t; plain {
			b.plain = nil
		} else if !b.isRecord(named) && isCustom(t) {
			if from := promotedEncoding(t); from != "" {
				b.rep.errorf(pos, "%s: %s takes its encoding methods from the %s it embeds, which would encode it alone and leave out its other fields (as encoding/json would); name the embedded field, or make %s a record (//streamgen:record)", where, typeString(b.pkg, t), from, typeString(b.pkg, t))
				return nil, false
			}
			return b.customShape(t, pos, where)
		}
	}
	if alias, ok := t.(*types.Alias); ok {
		return b.shape(types.Unalias(alias), pos, where)
	}
	s := &Shape{Type: t, Named: isNamedType}
	switch u := t.Underlying().(type) {
	case *types.Basic:
		switch {
		case u.Kind() == types.Bool:
			s.Kind = Bool
		case u.Kind() == types.String:
			s.Kind = String
		case u.Info()&types.IsInteger != 0 && u.Kind() != types.Uintptr:
			s.Kind, s.Bits = Int, intBits(u.Kind())
			if u.Info()&types.IsUnsigned != 0 {
				s.Kind = Uint
			}
		case u.Kind() == types.Float32:
			s.Kind, s.Bits = Float, 32
		case u.Kind() == types.Float64:
			s.Kind, s.Bits = Float, 64
		default:
			b.rep.errorf(pos, "%s: unsupported type %s", where, typeString(b.pkg, t))
			return nil, false
		}
	case *types.Pointer:
		elem, ok := b.shape(u.Elem(), pos, where)
		if !ok {
			return nil, false
		}
		if elem.Kind == Pointer {
			b.rep.errorf(pos, "%s: pointers to pointers are not supported", where)
			return nil, false
		}
		s.Kind, s.Elem = Pointer, elem
	case *types.Slice:
		if types.Identical(u.Elem(), types.Typ[types.Uint8]) && !isNamedElem(u.Elem()) {
			s.Kind = Bytes
			break
		}
		if isByteLike(u.Elem()) {
			// A named byte type: base64 in JSON too, unless it has its
			// own encoding, which shape refuses.
			elem, ok := b.shape(u.Elem(), pos, where+"[]")
			if !ok {
				return nil, false
			}
			if elem.Custom != nil {
				b.rep.errorf(pos, "%s: slices of %s, a byte type with encoding methods, are not supported (encoding/json writes them as a list but reads base64); use a slice of another type", where, typeString(b.pkg, u.Elem()))
				return nil, false
			}
			s.Kind, s.ByteElem = Bytes, u.Elem()
			break
		}
		elem, ok := b.shape(u.Elem(), pos, where+"[]")
		if !ok {
			return nil, false
		}
		s.Kind, s.Elem = Slice, elem
	case *types.Array:
		elem, ok := b.shape(u.Elem(), pos, where+"[]")
		if !ok {
			return nil, false
		}
		s.Kind, s.Elem, s.Len = Array, elem, u.Len()
	case *types.Map:
		key, ok := b.shape(u.Key(), pos, where+"[key]")
		if !ok {
			return nil, false
		}
		if !b.jsonKey(key, u.Key(), pos, where) {
			return nil, false
		}
		elem, ok := b.shape(u.Elem(), pos, where+"[]")
		if !ok {
			return nil, false
		}
		if t, method := ptrMarshalIn(elem, map[*Struct]bool{}, b.isRecord); t != nil {
			b.rep.errorf(pos, "%s: %s has %s with a pointer receiver, which encoding/json does not call in map values (they are not addressable); give the method a value receiver, or store pointers in the map", where, typeString(b.pkg, t), method)
			return nil, false
		}
		s.Kind, s.Key, s.Elem = Map, key, elem
	case *types.Struct:
		st, ok := b.structOf(t, pos)
		if !ok {
			return nil, false
		}
		if !isNamedType && isCustom(t) {
			b.rep.errorf(pos, "%s: the anonymous struct takes encoding methods from a struct it embeds; name the embedded field or the struct type", where)
			return nil, false
		}
		s.Kind, s.Struct, s.Named = StructShape, st, false
	case *types.Chan:
		b.rep.errorf(pos, "%s: channels cannot be encoded (type %s); tag the field `stream:\"-\" json:\"-\"` to leave it out", where, typeString(b.pkg, t))
		return nil, false
	case *types.Signature:
		b.rep.errorf(pos, "%s: funcs cannot be encoded (type %s); tag the field `stream:\"-\" json:\"-\"` to leave it out", where, typeString(b.pkg, t))
		return nil, false
	case *types.Interface:
		b.rep.errorf(pos, "%s: interfaces cannot be encoded (type %s): the generator needs a concrete type", where, typeString(b.pkg, t))
		return nil, false
	default:
		b.rep.errorf(pos, "%s: unsupported type %s", where, typeString(b.pkg, t))
		return nil, false
	}
	return s, true
}

func intBits(k types.BasicKind) int {
	switch k {
	case types.Int8, types.Uint8:
		return 8
	case types.Int16, types.Uint16:
		return 16
	case types.Int32, types.Uint32:
		return 32
	}
	return 64
}

func isNamed(t types.Type, pkg, name string) bool {
	n, ok := types.Unalias(t).(*types.Named)
	return ok && n.Obj().Pkg() != nil && n.Obj().Pkg().Path() == pkg && n.Obj().Name() == name
}

func isNamedElem(t types.Type) bool {
	_, ok := types.Unalias(t).(*types.Named)
	return ok
}

func isByteLike(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Kind() == types.Uint8
}

// jsonKey decides how encoding/json writes and reads map keys of type t
// (shape key), or reports why it cannot: a key of string kind is its
// string, else a key with a MarshalText value method is its text, else an
// integer is its decimal text; reading, UnmarshalText comes first.
func (b *builder) jsonKey(key *Shape, t types.Type, pos token.Pos, where string) bool {
	switch t.Underlying().(type) {
	case *types.Pointer, *types.Interface:
		b.rep.errorf(pos, "%s: map keys must be strings, integers or types with MarshalText (value receiver) and UnmarshalText, not %s (encoding/json cannot read pointer keys)", where, typeString(b.pkg, t))
		return false
	}
	kind := ""
	if basic, ok := t.Underlying().(*types.Basic); ok {
		switch {
		case basic.Info()&types.IsString != 0:
			kind = "string"
		case basic.Info()&types.IsUnsigned != 0 && basic.Kind() != types.Uintptr:
			kind = "uint"
		case basic.Info()&types.IsInteger != 0:
			kind = "int"
		}
	}
	key.JSONKey, key.JSONKeyRead = kind, kind
	if ok, ptr := hasMethod(t, "MarshalText"); ok && !ptr && kind != "string" {
		key.JSONKey = "text"
	}
	if has(t, "UnmarshalText") {
		key.JSONKeyRead = "text"
		if has(t, "UnmarshalJSON") {
			b.rep.errorf(pos, "%s: map keys of %s, which has UnmarshalJSON, are not supported (encoding/json reads them with it)", where, typeString(b.pkg, t))
			return false
		}
	}
	if key.JSONKey == "" || key.JSONKeyRead == "" {
		b.rep.errorf(pos, "%s: map keys must be strings, integers or types with MarshalText (value receiver) and UnmarshalText, not %s", where, typeString(b.pkg, t))
		return false
	}
	return true
}

// ptrMarshalIn finds, in a value of shape s, a value reached without a
// pointer, slice or map (so addressable only if s is) whose type writes
// itself with a MarshalJSON or MarshalText method that has a pointer
// receiver; it returns that type and method, or nil.
func ptrMarshalIn(s *Shape, seen map[*Struct]bool, isRecord recordTest) (types.Type, string) {
	if c := s.Custom; c != nil {
		switch {
		case c.MarshalPtr:
			return s.Type, c.Marshal
		case c.Marshal != "" || c.Under == nil:
			return nil, ""
		}
		s = c.Under
	}
	switch s.Kind {
	case Array:
		return ptrMarshalIn(s.Elem, seen, isRecord)
	case StructShape:
		st := s.Struct
		if foreignRecord(st) {
			return isRecord.ptrMarshalInType(st.Type, map[types.Type]bool{})
		}
		if seen[st] {
			return nil, ""
		}
		seen[st] = true
		for _, f := range st.JSON {
			if slices.ContainsFunc(f.Ptrs, func(t types.Type) bool { return t != nil }) {
				continue // promoted through a pointer: addressable
			}
			if t, m := ptrMarshalIn(f.Shape, seen, isRecord); t != nil {
				return t, m
			}
		}
	}
	return nil, ""
}

// recordTest reports whether a named type is a record, whose own
// (generated) JSON methods write what encoding/json would without them.
type recordTest func(*types.Named) bool

// ptrMarshalInType is ptrMarshalIn for a struct of another package, which
// is not modelled: it walks the Go type's exported fields (and embedded
// ones) and array elements.
func (isRecord recordTest) ptrMarshalInType(t types.Type, seen map[types.Type]bool) (types.Type, string) {
	if seen[t] {
		return nil, ""
	}
	seen[t] = true
	if n, named := types.Unalias(t).(*types.Named); named && !isRecord(n) {
		for _, m := range []string{"MarshalJSON", "MarshalText"} {
			if ok, ptr := hasMethod(t, m); ok {
				if ptr {
					return t, m
				}
				return nil, ""
			}
		}
	}
	switch u := t.Underlying().(type) {
	case *types.Array:
		return isRecord.ptrMarshalInType(u.Elem(), seen)
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			f := u.Field(i)
			if (!f.Exported() && !f.Embedded()) || jsonIgnored(u.Tag(i)) {
				continue
			}
			if found, m := isRecord.ptrMarshalInType(f.Type(), seen); found != nil {
				return found, m
			}
		}
	}
	return nil, ""
}

// isRecord reports whether n is a record, of this package or another.
func (b *builder) isRecord(n *types.Named) bool {
	tn := n.Obj()
	return b.records[tn] || tn.Pkg() != b.pkg && tn.Pkg() != nil && b.isForeignRecord(tn)
}

// typeString writes t as it reads in pkg.
func typeString(pkg *types.Package, t types.Type) string {
	return types.TypeString(t, func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Name()
	})
}

// isForeignRecord reports whether the type tn of another package carries a
// //streamgen:record directive, by reading its declaration. It does not ask
// whether the type has generated methods, so the answer is the same whether
// or not that package's output exists yet.
func (b *builder) isForeignRecord(tn *types.TypeName) bool {
	if v, ok := b.foreign[tn]; ok {
		return v
	}
	pos := b.rep.fset.Position(tn.Pos())
	f, ok := b.parsedFiles[pos.Filename]
	if !ok {
		f, _ = parser.ParseFile(token.NewFileSet(), pos.Filename, nil, parser.ParseComments|parser.SkipObjectResolution)
		b.parsedFiles[pos.Filename] = f
	}
	found := false
	if f != nil {
		quiet := &reporter{fset: token.NewFileSet()}
		for ts, ds := range typeDirectives(quiet, f) {
			if ts.Name.Name == tn.Name() {
				for _, d := range ds {
					found = found || d.Name == "record"
				}
			}
		}
	}
	b.foreign[tn] = found
	return found
}

// astFile is a parsed file of another package, read to find directives.
type astFile = ast.File
