package gen

import (
	"go/token"
	"go/types"
)

// Custom describes a named type that encodes itself with methods
// (MarshalJSON, MarshalText, MarshalBinary and their Unmarshal and Append
// forms), as encoding/json and encoding/gob use them.
type Custom struct {
	// Marshal is the method that writes the type's JSON, "MarshalJSON" or
	// "MarshalText", or "" when the JSON is written from Under, as
	// encoding/json does. MarshalPtr says it has a pointer receiver.
	Marshal    string
	MarshalPtr bool
	// Unmarshal is the method that reads the type's JSON,
	// "UnmarshalJSON" or "UnmarshalText", or "" when it is read into Under.
	Unmarshal string
	// Binary is how the binary encoding is made: "AppendBinary",
	// "MarshalBinary", "AppendText", "MarshalText" or "MarshalJSON", read
	// back with the matching Unmarshal method; "" when it is Under's own.
	Binary string
	// Under is the shape of the type's value without its methods: its
	// underlying type, or for a struct its exported fields. It is nil
	// for an opaque type (a struct with unexported fields) whose methods
	// do all the encoding.
	Under *Shape
}

// BinaryUnmarshal is the method that reads back what c.Binary writes.
func (c *Custom) BinaryUnmarshal() string {
	switch c.Binary {
	case "AppendBinary", "MarshalBinary":
		return "UnmarshalBinary"
	case "AppendText", "MarshalText":
		return "UnmarshalText"
	case "MarshalJSON":
		return "UnmarshalJSON"
	}
	return ""
}

// encodingMethods are the method shapes a type can encode itself with.
var encodingMethods = func() map[string]*types.Interface {
	bytes := types.NewSlice(types.Typ[types.Byte])
	errT := types.Universe.Lookup("error").Type()
	v := func(t types.Type) *types.Var { return types.NewParam(token.NoPos, nil, "", t) }
	marshal := types.NewSignatureType(nil, nil, nil, nil, types.NewTuple(v(bytes), v(errT)), false)
	unmarshal := types.NewSignatureType(nil, nil, nil, types.NewTuple(v(bytes)), types.NewTuple(v(errT)), false)
	appendSig := types.NewSignatureType(nil, nil, nil, types.NewTuple(v(bytes)), types.NewTuple(v(bytes), v(errT)), false)
	m := map[string]*types.Interface{}
	for name, sig := range map[string]*types.Signature{
		"MarshalJSON": marshal, "MarshalText": marshal, "MarshalBinary": marshal,
		"UnmarshalJSON": unmarshal, "UnmarshalText": unmarshal, "UnmarshalBinary": unmarshal,
		"AppendText": appendSig, "AppendBinary": appendSig,
	} {
		m[name] = types.NewInterfaceType([]*types.Func{types.NewFunc(token.NoPos, nil, name, sig)}, nil).Complete()
	}
	return m
}()

// hasMethod reports whether t (or, failing that, *t) has the encoding
// method name with its standard signature, and whether only *t has it.
func hasMethod(t types.Type, name string) (ok, ptrOnly bool) {
	iface := encodingMethods[name]
	if types.Implements(t, iface) {
		return true, false
	}
	return types.Implements(types.NewPointer(t), iface), true
}

func has(t types.Type, name string) bool { ok, _ := hasMethod(t, name); return ok }

// isCustom reports whether the named type t has any method by which it
// encodes itself.
func isCustom(t types.Type) bool {
	for _, m := range []string{"MarshalJSON", "UnmarshalJSON", "MarshalText", "UnmarshalText", "MarshalBinary", "UnmarshalBinary"} {
		if has(t, m) {
			return true
		}
	}
	return false
}

// promotedEncoding returns the name of the field that t, a struct type,
// embeds and takes an encoding method from (promoted, not its own), when
// t has fields besides it, which that method would leave out: encoding/json
// would write the embedded value alone, and a binary encoding by the
// method would drop the rest. "" otherwise.
func promotedEncoding(t types.Type) string {
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return ""
	}
	mset := types.NewMethodSet(types.NewPointer(t))
	for name := range encodingMethods {
		if !has(t, name) {
			continue
		}
		sel := mset.Lookup(nil, name)
		if sel == nil || len(sel.Index()) < 2 {
			continue // declared on t itself
		}
		if from := sel.Index()[0]; hasOtherFields(st, from) {
			return st.Field(from).Name()
		}
	}
	return ""
}

// opaque reports whether t's value cannot be reached field by field:
// a struct with unexported fields, or a kind that cannot be encoded.
func opaque(t types.Type) bool {
	switch u := t.Underlying().(type) {
	case *types.Struct:
		for i := 0; i < u.NumFields(); i++ {
			if f := u.Field(i); !f.Exported() && f.Name() != "_" {
				return true
			}
		}
	case *types.Chan, *types.Signature, *types.Interface:
		return true
	case *types.Basic:
		return u.Kind() == types.UnsafePointer || u.Kind() == types.Uintptr
	}
	return false
}

// customShape models the named type t that encodes itself with methods.
func (b *builder) customShape(t types.Type, pos token.Pos, where string) (*Shape, bool) {
	c := &Custom{}
	if ok, ptr := hasMethod(t, "MarshalJSON"); ok {
		c.Marshal, c.MarshalPtr = "MarshalJSON", ptr
	} else if ok, ptr := hasMethod(t, "MarshalText"); ok {
		c.Marshal, c.MarshalPtr = "MarshalText", ptr
	}
	if has(t, "UnmarshalJSON") {
		c.Unmarshal = "UnmarshalJSON"
	} else if has(t, "UnmarshalText") {
		c.Unmarshal = "UnmarshalText"
	}
	switch {
	case has(t, "UnmarshalBinary") && has(t, "AppendBinary"):
		c.Binary = "AppendBinary"
	case has(t, "UnmarshalBinary") && has(t, "MarshalBinary"):
		c.Binary = "MarshalBinary"
	case !opaque(t):
		c.Binary = ""
	case has(t, "UnmarshalText") && has(t, "AppendText"):
		c.Binary = "AppendText"
	case has(t, "UnmarshalText") && has(t, "MarshalText"):
		c.Binary = "MarshalText"
	case has(t, "UnmarshalJSON") && has(t, "MarshalJSON"):
		c.Binary = "MarshalJSON"
	default:
		b.rep.errorf(pos, "%s: %s cannot be encoded: it has unexported fields and no pair of MarshalBinary and UnmarshalBinary, MarshalText and UnmarshalText, or MarshalJSON and UnmarshalJSON methods", where, typeString(b.pkg, t))
		return nil, false
	}
	if c.Binary == "" || c.Marshal == "" || c.Unmarshal == "" || !opaque(t) {
		b.plain = t
		under, ok := b.shape(t, pos, where)
		if !ok {
			return nil, false
		}
		c.Under = under
	}
	if c.Binary == "" {
		s := *c.Under
		s.Custom = c
		return &s, true
	}
	kind := Bytes
	if c.Binary == "AppendText" || c.Binary == "MarshalText" {
		kind = String
	}
	return &Shape{Kind: kind, Type: t, Custom: c}, true
}

// embedsRecord reports whether t, the type of an embedded field, is a
// record or a pointer to one.
func embedsRecord(t types.Type, isRecord func(*types.Named) bool) bool {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := types.Unalias(t).(*types.Named)
	return ok && isRecord(n)
}

// foreignFieldsOnly returns the path of the package whose unexported
// fields are all that t, a struct type of package pkg, has (a type
// defined on another package's struct, such as type Stamp time.Time),
// or "": nothing of such a value would be encoded.
func foreignFieldsOnly(t types.Type, pkg *types.Package) string {
	st, ok := t.Underlying().(*types.Struct)
	if !ok || st.NumFields() == 0 {
		return ""
	}
	for i := 0; i < st.NumFields(); i++ {
		if f := st.Field(i); f.Exported() || f.Pkg() == pkg || f.Pkg() == nil {
			return ""
		}
	}
	return st.Field(0).Pkg().Path()
}

// hasOtherFields reports whether st has a field besides its field i
// (blank fields aside).
func hasOtherFields(st *types.Struct, i int) bool {
	for j := 0; j < st.NumFields(); j++ {
		if j != i && st.Field(j).Name() != "_" {
			return true
		}
	}
	return false
}
