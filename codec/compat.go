package codec

import (
	"errors"
	"fmt"
	"strings"
)

// ErrIncompatible is wrapped by the error Compatible returns.
var ErrIncompatible = errors.New("streamgen: incompatible schema")

// Compatible reports whether bytes written with schema written can be read
// by a type with schema current, every value whole. Fields added or
// removed are compatible (added fields read as zero, removed ones are
// skipped), and so are changes that keep a field's layout and lose no
// value: a wider integer of the same signedness, a pointer and its
// element, an array and a slice, an array and a longer one (but not a
// narrower integer, whose stored values may not fit, a slice or array
// read as a shorter array, which would drop elements, nor the elements
// of a list or the values of a map becoming pointers or ceasing to be:
// the encoding says which). Any other change of a field's type is not;
// the error lists every such field with both types, as in
//
//	streamgen: incompatible schema: sessions.Session: field Count (id 4242) was int64, is now string
func Compatible(written, current *Schema) error {
	var diffs []string
	c := &comparison{diffs: &diffs, refs: refScope{}, seen: map[[2]*Schema]bool{}, wScope: written, cScope: current}
	c.schemas(current.Name, written, current)
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrIncompatible, strings.Join(diffs, "; "))
}

// comparison is the state of Compatible: the differences found, and, for
// recursive types, how Refs resolve on each side and which pairs of
// structs have been compared (each is compared once).
type comparison struct {
	diffs          *[]string
	refs           refScope
	seen           map[[2]*Schema]bool
	wScope, cScope *Schema
}

func (c *comparison) schemas(path string, written, current *Schema) {
	if c.seen[[2]*Schema{written, current}] {
		return
	}
	c.seen[[2]*Schema{written, current}] = true
	saved := *c
	if written.sealed {
		c.wScope = written
	}
	if current.sealed {
		c.cScope = current
	}
	defer func() { c.wScope, c.cScope = saved.wScope, saved.cScope }()
	for _, f := range current.Fields {
		old, ok := written.Field(f.ID)
		if !ok {
			continue
		}
		if why := c.types(path+"."+f.Name, old.Type, f.Type); why != "" {
			*c.diffs = append(*c.diffs, fmt.Sprintf("%s: field %s (id %d) was %s, is now %s", path, f.Name, f.ID, old.Type.Go, f.Type.Go))
		}
	}
}

// types returns a non-empty string when written cannot be read as
// current; differences inside nested structs are appended to diffs with
// their own path instead.
func (c *comparison) types(path string, written, current *Type) string {
	if written.Kind != current.Kind {
		return "kind"
	}
	switch current.Kind {
	case KindInt, KindUint:
		if written.Bits > 0 && current.Bits > 0 && current.Bits < written.Bits {
			return "narrower" // a stored value may not fit
		}
	case KindList:
		if current.Len > 0 && (written.Len == 0 || written.Len > current.Len) {
			return "shorter" // the elements past current's length would be dropped
		}
		if written.Elem.Pointer != current.Elem.Pointer {
			return "element pointer" // a list's header says which it holds
		}
		return c.types(path+"[]", written.Elem, current.Elem)
	case KindMap:
		if why := c.types(path+"[key]", written.Key, current.Key); why != "" {
			return why
		}
		if written.Elem.Pointer != current.Elem.Pointer {
			return "value pointer" // a map's header says which it holds
		}
		return c.types(path+"[]", written.Elem, current.Elem)
	case KindStruct:
		w, cur := written.Struct, current.Struct
		if written.Ref != "" {
			w = c.refs.resolve(c.wScope, written.Ref)
		}
		if current.Ref != "" {
			cur = c.refs.resolve(c.cScope, current.Ref)
		}
		if w != nil && cur != nil {
			c.schemas(path, w, cur)
		}
	}
	return ""
}
