package gen

import (
	"go/token"
	"go/types"
	"reflect"
	"sort"
	"strings"
	"unicode"
)

// jsonFields computes s.JSON: the members encoding/json gives the struct,
// by its own rules (typeFields in encoding/json/encode.go): exported fields
// and the fields of embedded structs, promoted breadth first; a json tag
// renames a field or, with "-", drops it; among fields of one name the
// shallowest wins, then the tagged one, and a tie drops them all.
func (b *builder) jsonFields(s *Struct) bool {
	type candidate struct {
		JSONField
		typ types.Type
		pos token.Pos
	}
	type level struct {
		typ   types.Type
		index []int
		path  []string
		ptrs  []types.Type
	}
	var fields []candidate
	current, next := []level{}, []level{{typ: s.Type}}
	var count map[types.Type]int
	nextCount := map[types.Type]int{}
	visited := map[types.Type]bool{}
	ok := true
	for len(next) > 0 {
		current, next = next, current[:0]
		count, nextCount = nextCount, map[types.Type]int{}
		for _, f := range current {
			if visited[f.typ] {
				continue
			}
			visited[f.typ] = true
			st := f.typ.Underlying().(*types.Struct)
			for i := 0; i < st.NumFields(); i++ {
				sf := st.Field(i)
				if sf.Embedded() {
					t := sf.Type()
					if p, isPtr := t.Underlying().(*types.Pointer); isPtr {
						t = p.Elem()
					}
					if _, isStruct := t.Underlying().(*types.Struct); !sf.Exported() && !isStruct {
						continue
					}
				} else if !sf.Exported() {
					continue
				}
				tag := reflect.StructTag(st.Tag(i)).Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validJSONTag(name) {
					name = ""
				}
				index := append(append([]int{}, f.index...), i)
				path := append(append([]string{}, f.path...), sf.Name())
				ft := sf.Type()
				var viaPtr types.Type
				if _, isNamed := ft.(*types.Named); !isNamed {
					if p, isPtr := ft.(*types.Pointer); isPtr {
						ft, viaPtr = p.Elem(), p.Elem()
					}
				}
				_, isStruct := ft.Underlying().(*types.Struct)
				if name != "" || !sf.Embedded() || !isStruct || isNamed(ft, "time", "Time") {
					tagged := name != ""
					if name == "" {
						name = sf.Name()
					}
					c := candidate{JSONField: JSONField{
						Name:      name,
						Path:      path,
						Ptrs:      f.ptrs,
						Tagged:    tagged,
						OmitEmpty: hasOption(opts, "omitempty"),
						OmitZero:  hasOption(opts, "omitzero"),
						index:     index,
					}, typ: sf.Type(), pos: sf.Pos()}
					c.Quoted = hasOption(opts, "string") && quotable(sf.Type())
					// A bad stream tag is reported by fields, on the
					// struct that declares the field.
					if stream, err := parseStreamTag(st.Tag(i)); err == nil {
						c.Required = stream.required || stream.key || stream.eventTime
						c.Role = stream.role()
					}
					fields = append(fields, c)
					if count[f.typ] > 1 {
						// Two embeddings of one type at this depth: a
						// duplicate makes the tie-break below drop the
						// name, as encoding/json does.
						fields = append(fields, fields[len(fields)-1])
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					ptrs := append(append([]types.Type{}, f.ptrs...), viaPtr)
					next = append(next, level{typ: ft, index: index, path: path, ptrs: ptrs})
				}
			}
		}
	}
	sort.SliceStable(fields, func(i, j int) bool {
		x, y := fields[i], fields[j]
		if x.Name != y.Name {
			return x.Name < y.Name
		}
		if len(x.index) != len(y.index) {
			return len(x.index) < len(y.index)
		}
		if x.Tagged != y.Tagged {
			return x.Tagged
		}
		return indexLess(x.index, y.index)
	})
	out := fields[:0]
	for advance, i := 0, 0; i < len(fields); i += advance {
		name := fields[i].Name
		for advance = 1; i+advance < len(fields); advance++ {
			if fields[i+advance].Name != name {
				break
			}
		}
		if advance == 1 {
			out = append(out, fields[i])
			continue
		}
		group := fields[i : i+advance]
		if len(group[0].index) == len(group[1].index) && group[0].Tagged == group[1].Tagged {
			continue // ambiguous: encoding/json drops every field of this name
		}
		out = append(out, group[0])
	}
	sort.SliceStable(out, func(i, j int) bool { return indexLess(out[i].index, out[j].index) })
	for _, c := range out {
		where := s.Name + "." + strings.Join(c.Path, ".")
		shape, sok := b.shape(c.typ, c.pos, where)
		if !sok {
			ok = false
			continue
		}
		f := c.JSONField
		f.Shape = shape
		if f.Quoted && (shape.Number || shape.Kind == Pointer && shape.Elem.Number) {
			b.rep.errorf(c.pos, "%s: the json option \"string\" on json.Number is not supported", where)
			ok = false
		}
		if f.Quoted && (shape.Custom != nil || shape.Kind == Pointer && shape.Elem.Custom != nil) {
			b.rep.errorf(c.pos, "%s: the json option \"string\" on %s, a type with its own encoding methods, is not supported", where, typeString(b.pkg, c.typ))
			ok = false
		}
		if f.OmitZero && !hasIsZero(shape.Type) && zeroByLiteral(shape) && !types.Comparable(shape.Type) {
			b.rep.errorf(c.pos, "%s: the json option \"omitzero\" needs %s to be comparable or to have an IsZero method", where, typeString(b.pkg, c.typ))
			ok = false
		}
		s.JSON = append(s.JSON, &f)
	}
	return ok
}

// quotable reports whether the json option "string" applies to a field of
// type t, as encoding/json decides: a bool, number or string kind, or an
// unnamed pointer to one. For other types the option is ignored.
func quotable(t types.Type) bool {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		t = p.Elem()
	}
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&(types.IsBoolean|types.IsInteger|types.IsFloat|types.IsString) != 0 && b.Kind() != types.Uintptr
}

func indexLess(a, b []int) bool {
	for k, x := range a {
		if k >= len(b) {
			return false
		}
		if x != b[k] {
			return x < b[k]
		}
	}
	return len(a) < len(b)
}

func hasOption(opts, name string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == name {
			return true
		}
	}
	return false
}

// validJSONTag is encoding/json's isValidTag.
func validJSONTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
