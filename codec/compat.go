package codec

import (
	"errors"
	"fmt"
	"strings"
)

// ErrIncompatible is wrapped by the error Compatible returns.
var ErrIncompatible = errors.New("streamgen: incompatible schema")

// Compatible reports whether bytes written with schema written can be read
// by a type with schema current. Fields added or removed are compatible
// (added fields read as zero, removed ones are skipped), and so are changes
// that keep a field's layout: integer widths, a pointer and its element, a
// slice and an array. Any other change of a field's type is not; the error
// lists every such field with both types, as in
//
//	streamgen: incompatible schema: sessions.Session: field Count (id 4242) was int64, is now string
func Compatible(written, current *Schema) error {
	var diffs []string
	compareSchemas(&diffs, current.Name, written, current)
	if len(diffs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %s", ErrIncompatible, strings.Join(diffs, "; "))
}

func compareSchemas(diffs *[]string, path string, written, current *Schema) {
	for _, f := range current.Fields {
		old, ok := written.Field(f.ID)
		if !ok {
			continue
		}
		if why := compareTypes(diffs, path+"."+f.Name, old.Type, f.Type); why != "" {
			*diffs = append(*diffs, fmt.Sprintf("%s: field %s (id %d) was %s, is now %s", path, f.Name, f.ID, old.Type.Go, f.Type.Go))
		}
	}
}

// compareTypes returns a non-empty string when written cannot be read as
// current; differences inside nested structs are appended to diffs with
// their own path instead.
func compareTypes(diffs *[]string, path string, written, current *Type) string {
	if written.Kind != current.Kind {
		return "kind"
	}
	switch current.Kind {
	case KindList:
		return compareTypes(diffs, path+"[]", written.Elem, current.Elem)
	case KindMap:
		if why := compareTypes(diffs, path+"[key]", written.Key, current.Key); why != "" {
			return why
		}
		return compareTypes(diffs, path+"[]", written.Elem, current.Elem)
	case KindStruct:
		if written.Ref != "" || current.Ref != "" {
			return "" // a recursive type's struct, compared where it is described
		}
		compareSchemas(diffs, path, written.Struct, current.Struct)
	}
	return ""
}
