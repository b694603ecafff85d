package codec

import "fmt"

// Kind is the layout of a value in the binary format. It is the low four
// bits of a field's tag, so that a reader can skip a field it does not know
// and can tell a field whose type changed from one it can read.
type Kind uint8

// The kinds. Their numbers are part of the format: never renumber them.
const (
	KindBool     Kind = 0  // one byte
	KindInt      Kind = 1  // zigzag varint
	KindUint     Kind = 2  // uvarint
	KindFloat32  Kind = 3  // 4 bytes
	KindFloat64  Kind = 4  // 8 bytes
	KindString   Kind = 5  // uvarint length, bytes
	KindBytes    Kind = 6  // uvarint(0) nil, or uvarint(length+1), bytes
	KindTime     Kind = 7  // varint seconds, uvarint(nanos<<1|hasOffset), [varint offset]
	KindDuration Kind = 8  // zigzag varint nanoseconds
	KindStruct   Kind = 9  // uvarint length, tagged fields
	KindList     Kind = 10 // as a field: uvarint length, then uvarint(0) nil or uvarint(n+1), elements
	KindMap      Kind = 11 // as a field: uvarint length, then uvarint(0) nil or uvarint(n+1), key/value pairs
	maxKind      Kind = 11

	// PointerFlag marks, in the header of a list or map, elements that are
	// pointers: each is preceded by a presence byte (0 for nil).
	PointerFlag Kind = 0x10
)

var kindNames = [...]string{
	KindBool:     "bool",
	KindInt:      "int",
	KindUint:     "uint",
	KindFloat32:  "float32",
	KindFloat64:  "float64",
	KindString:   "string",
	KindBytes:    "bytes",
	KindTime:     "time",
	KindDuration: "duration",
	KindStruct:   "struct",
	KindList:     "list",
	KindMap:      "map",
}

// String returns the kind's name, as used in schemas and error messages.
func (k Kind) String() string {
	if k&PointerFlag != 0 && k&^PointerFlag <= maxKind {
		return "*" + kindNames[k&^PointerFlag]
	}
	if k <= maxKind {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// ParseKind returns the kind named s, the inverse of Kind.String.
func ParseKind(s string) (Kind, bool) {
	for k, name := range kindNames {
		if name == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// MaxFieldID is the largest field id a tag can carry.
const MaxFieldID = 1<<17 - 1

// FieldID returns the default id of a field named name: FNV-1a (32 bit) of
// the name, folded into 17 bits, with 0 mapped to 1 (0 is never a field id).
// The generator calls it at generation time and emits the resulting tags as
// constants; the schema records the ids, so changing this function would
// change the format and must never happen.
func FieldID(name string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(name); i++ {
		h ^= uint32(name[i])
		h *= 16777619
	}
	id := (h ^ h>>17) & MaxFieldID
	if id == 0 {
		id = 1
	}
	return id
}

// Tag returns the tag of a field with the given id and kind.
func Tag(id uint32, kind Kind) uint64 { return uint64(id)<<4 | uint64(kind) }

// AppendTag appends the encoded tag of a field. Generated code appends
// precomputed tag bytes instead; this is for hand-written and dynamic code.
func AppendTag(b []byte, id uint32, kind Kind) []byte {
	return AppendUvarint(b, Tag(id, kind))
}
