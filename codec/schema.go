package codec

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Schema describes a record: its fields with their ids and types. Generated
// code builds one per record and registers it; the runtime stores it beside
// state so that a checkpoint says what it holds, refuses a pipeline whose
// types changed incompatibly (Compatible), and lets tools render state
// without the Go types (AppendDynamicJSON).
//
// A Schema is immutable once registered and safe for concurrent use.
type Schema struct {
	// Name is the record's Go type, qualified by its package path
	// ("example.com/sessions.Event").
	Name string `json:"name"`
	// Fields in declaration order.
	Fields []Field `json:"fields"`
	// Fingerprint is a hash of the fields' names, ids and types (not of
	// Name), filled in by Register or Seal.
	Fingerprint uint64 `json:"fingerprint"`
	// Recursive marks the struct of a recursive type: readers count how
	// deep such structs nest (MaxDepth).
	Recursive bool `json:"recursive,omitempty"`

	// sealed is set by Seal: the schema is the whole description of a
	// type, and the Refs inside it name structs described inside it.
	// record is set by Register.
	sealed, record bool
}

// Field is one encoded field of a record.
type Field struct {
	Name string `json:"name"` // Go field name
	ID   uint32 `json:"id"`   // field id in tags
	Type *Type  `json:"type"`
	// JSON is the name of the field's member in the record's JSON (its
	// json tag's) where it is not Name, written as a json tag writes it:
	// "-" where the field has no member of its own (json:"-", an
	// embedded struct whose fields are promoted, a field its namesakes
	// hide), and "-," for a member named "-". It is not part of the
	// fingerprint: schemas written before it was kept read as if every
	// name were Name.
	JSON string `json:"json,omitempty"`
}

// Type describes the type of a field or of an element.
type Type struct {
	Kind Kind `json:"kind"`
	// Go is the Go type as reflect names it ("int32", "[]string",
	// "fixtures.Level"), for messages.
	Go string `json:"go"`
	// Bits is the width of an integer or float kind (8…64).
	Bits int `json:"bits,omitempty"`
	// Pointer says the value is a pointer to a value of this type.
	Pointer bool `json:"pointer,omitempty"`
	// Len is the length of an array, or 0 for a slice (Kind list).
	Len int `json:"len,omitempty"`
	// Elem is the element type of a list, or the value type of a map.
	Elem *Type `json:"elem,omitempty"`
	// Key is the key type of a map.
	Key *Type `json:"key,omitempty"`
	// Struct describes the fields of a nested struct.
	Struct *Schema `json:"struct,omitempty"`
	// Ref, for a struct of a recursive type, names (by its schema's
	// Name) a struct described elsewhere in the same record's schema,
	// instead of Struct: each is described once.
	Ref string `json:"ref,omitempty"`
}

// MaxDepth bounds the nesting of values (structs, lists and maps within
// each other) that decoders and encoders of recursive types accept, as
// encoding/json bounds the nesting of JSON it reads. Deeper values, or
// cycles of pointers, are errors, never a stack overflow.
const MaxDepth = 10000

// MarshalText lets a Kind appear by name in JSON schemas.
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a Kind by name.
func (k *Kind) UnmarshalText(b []byte) error {
	v, ok := ParseKind(string(b))
	if !ok {
		return fmt.Errorf("streamgen: unknown kind %q", b)
	}
	*k = v
	return nil
}

// CheckStored reports what is missing from a schema read back from
// storage (a checkpoint's metadata), that a schema made by the generator
// always has: a type for every field, the element type of a list, the key
// and value types of a map, the fields (or a reference) of a struct. A
// schema that passes can be compared (Compatible) without a nil type.
func (s *Schema) CheckStored() error {
	return s.checkStored(s.Name, map[*Schema]bool{})
}

func (s *Schema) checkStored(path string, seen map[*Schema]bool) error {
	if seen[s] {
		return nil
	}
	seen[s] = true
	for _, f := range s.Fields {
		if err := f.Type.checkStored(path+"."+f.Name, seen); err != nil {
			return err
		}
	}
	return nil
}

func (t *Type) checkStored(path string, seen map[*Schema]bool) error {
	if t == nil {
		return fmt.Errorf("%s: no type", path)
	}
	switch t.Kind {
	case KindList:
		return t.Elem.checkStored(path+"[]", seen)
	case KindMap:
		if err := t.Key.checkStored(path+"[key]", seen); err != nil {
			return err
		}
		return t.Elem.checkStored(path+"[value]", seen)
	case KindStruct:
		if t.Ref != "" {
			return nil
		}
		if t.Struct == nil {
			return fmt.Errorf("%s: a struct without fields", path)
		}
		return t.Struct.checkStored(path, seen)
	}
	return nil
}

// canonical appends a canonical description of t for fingerprints. Pointer
// and Go spelling are left out: they do not change what the bytes mean.
func (t *Type) canonical(b []byte) []byte {
	b = append(b, t.Kind.String()...)
	switch t.Kind {
	case KindInt, KindUint:
		b = strconv.AppendInt(b, int64(t.Bits), 10)
	case KindList:
		b = append(b, '<')
		b = t.Elem.canonical(b)
		b = append(b, '>')
	case KindMap:
		b = append(b, '<')
		b = t.Key.canonical(b)
		b = append(b, ',')
		b = t.Elem.canonical(b)
		b = append(b, '>')
	case KindStruct:
		if t.Ref != "" {
			return append(append(b, "ref:"...), t.Ref...)
		}
		b = t.Struct.canonical(b)
	}
	return b
}

func (s *Schema) canonical(b []byte) []byte {
	b = append(b, '{')
	for i, f := range s.Fields {
		if i > 0 {
			b = append(b, ';')
		}
		b = append(b, f.Name...)
		b = append(b, '#')
		b = strconv.AppendUint(b, uint64(f.ID), 10)
		b = append(b, ':')
		b = f.Type.canonical(b)
	}
	return append(b, '}')
}

// Seal computes the fingerprint of s and of its nested structs.
func (s *Schema) Seal() *Schema {
	sum := sha256.Sum256(s.canonical(nil))
	s.Fingerprint = binary.BigEndian.Uint64(sum[:8])
	s.sealed = true
	return s
}

// Field returns the field with the given id.
func (s *Schema) Field(id uint32) (Field, bool) {
	for _, f := range s.Fields {
		if f.ID == id {
			return f, true
		}
	}
	return Field{}, false
}

// String describes the schema on one line, as in
// "sessions.Event{User string #1234, Time time #99}".
func (s *Schema) String() string {
	var sb strings.Builder
	sb.WriteString(s.Name)
	sb.WriteByte('{')
	for i, f := range s.Fields {
		if i > 0 {
			sb.WriteString(", ")
		}
		fmt.Fprintf(&sb, "%s %s #%d", f.Name, f.Type.Go, f.ID)
	}
	sb.WriteByte('}')
	return sb.String()
}

var registry struct {
	sync.RWMutex
	byName map[string]*Schema
}

// Register seals s and makes it findable by Lookup. Generated code calls it
// from init for every record; registering a second schema under a name that
// is taken panics, since two types cannot share a qualified name.
func Register(s *Schema) *Schema {
	s.Seal()
	s.record = true
	registry.Lock()
	defer registry.Unlock()
	if registry.byName == nil {
		registry.byName = make(map[string]*Schema)
	}
	if _, dup := registry.byName[s.Name]; dup {
		panic("streamgen: schema registered twice: " + s.Name)
	}
	registry.byName[s.Name] = s
	return s
}

// Lookup returns the registered schema of the record with the qualified
// name, as in Schema.Name.
func Lookup(name string) (*Schema, bool) {
	registry.RLock()
	defer registry.RUnlock()
	s, ok := registry.byName[name]
	return s, ok
}

// Schemas returns every registered schema, sorted by name.
func Schemas() []*Schema {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]*Schema, 0, len(registry.byName))
	for _, s := range registry.byName {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// ErrNestedTooDeep is the error of a binary encoder of a recursive type
// that met values nested deeper than MaxDepth (typ names the type): a
// cycle of pointers, most likely.
func ErrNestedTooDeep(typ string) error {
	return fmt.Errorf("streamgen: encode %s: values nested deeper than %d (a cycle of pointers?)", typ, MaxDepth)
}

// JSONNestedTooDeep is ErrNestedTooDeep for JSON, worded as
// encoding/json's error for a cycle: "json: unsupported value: ...".
func JSONNestedTooDeep(typ string) error {
	return &JSONError{Offset: -1, Msg: fmt.Sprintf("unsupported value: values nested deeper than %d in %s (a cycle of pointers?)", MaxDepth, typ)}
}

// refScope resolves the Refs of recursive types: by name, within the
// schema that holds them (the sealed schema around them, or the outermost
// one for a schema read from JSON). It caches one index per such schema.
type refScope map[*Schema]map[string]*Schema

func (rs refScope) resolve(scope *Schema, name string) *Schema {
	index, ok := rs[scope]
	if !ok {
		index = map[string]*Schema{}
		var walk func(s *Schema)
		walk = func(s *Schema) {
			if _, seen := index[s.Name]; seen || s != scope && s.sealed {
				return // another type's own description
			}
			index[s.Name] = s
			for _, f := range s.Fields {
				walkTypeStructs(f.Type, walk)
			}
		}
		walk(scope)
		rs[scope] = index
	}
	return index[name]
}

// walkTypeStructs calls f for each struct schema that t holds directly:
// itself, its elements, its map keys and values.
func walkTypeStructs(t *Type, f func(*Schema)) {
	for ; t != nil; t = t.Elem {
		if t.Struct != nil {
			f(t.Struct)
		}
		if t.Key != nil {
			walkTypeStructs(t.Key, f)
		}
	}
}

// packageOf is the import path in a qualified name ("example.com/s.Event").
func packageOf(name string) string {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return ""
}
