package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// OrderedKey is the order-preserving encoding of a record that serves as
// a grouping key: its fields in declaration order, each in bytes whose
// order is the field's order, so that keys sort as their fields do, the
// first field first. Integers (and durations) are 8 big-endian bytes with
// the sign bit flipped, unsigned integers 8 big-endian bytes, floats their
// IEEE 754 bits big-endian with the sign bit flipped (every bit, for a
// negative number; every NaN one NaN and -0 as +0, as KeyFloat64 makes
// them), bools one byte, strings their bytes with each 0x00
// written as 0x00 0xFF and 0x00 0x01 after the last, times 8 bytes of Unix
// seconds (sign flipped), 4 of nanoseconds and a byte that says whether an
// offset (4 bytes, sign flipped) follows. Tags are left out: the schema
// says which field comes next.
//
// A store whose keys are in this order keeps keys that are near in value
// near on disk: where keys grow with time (ids handed out in sequence,
// days, windows), a batch's new keys sit together after the older ones
// instead of all over the key space. (The runtime's state entries put a
// key's length before it: keys of one length sort together, and records
// of fixed-width fields, whose keys are all of one length, wholly by their
// fields.)
//
// Only records whose every field is a bool, an integer, a float, a string,
// a time or a duration have this encoding (NewOrderedKey). An OrderedKey
// is immutable and safe for concurrent use.
type OrderedKey struct {
	fields []orderedField
}

type orderedField struct {
	tag  uint64
	kind Kind
	bits int
	name string
}

// Ordered key encodings of strings: 0x00 in a string is escaped as 0x00
// 0xFF, and the string ends with 0x00 0x01, which sorts before any byte
// of a longer string.
const (
	orderedEscape     = 0x00
	orderedEscaped00  = 0xFF
	orderedTerminator = 0x01
)

// NewOrderedKey returns the ordered encoding of records described by s,
// and false when a field's type has none (a nested struct, a pointer, an
// array, bytes).
func NewOrderedKey(s *Schema) (*OrderedKey, bool) {
	o := &OrderedKey{}
	for _, f := range s.Fields {
		t := f.Type
		if t == nil || t.Pointer {
			return nil, false
		}
		switch t.Kind {
		case KindBool, KindInt, KindUint, KindFloat32, KindFloat64, KindString, KindTime, KindDuration:
		default:
			return nil, false
		}
		o.fields = append(o.fields, orderedField{tag: uint64(f.ID)<<4 | uint64(t.Kind), kind: t.Kind, bits: t.Bits, name: f.Name})
	}
	return o, true
}

// ErrOrderedKey reports bytes that are not a key OrderedKey encodes.
var ErrOrderedKey = errors.New("not an ordered key of this record")

// Append appends the ordered encoding of the record whose binary encoding
// (as this version of the record writes it: every field, in declaration
// order) is bin.
func (o *OrderedKey) Append(dst, bin []byte) ([]byte, error) {
	var d Decoder
	d.Reset(bin)
	for i := range o.fields {
		f := &o.fields[i]
		if tag := d.Tag(); tag != f.tag {
			if d.err != nil {
				break
			}
			return dst, fmt.Errorf("%w: field %d is tagged %#x, not %s's %#x", ErrOrderedKey, i, tag, f.name, f.tag)
		}
		switch f.kind {
		case KindBool:
			if d.Bool() {
				dst = append(dst, 1)
			} else {
				dst = append(dst, 0)
			}
		case KindInt, KindDuration:
			dst = binary.BigEndian.AppendUint64(dst, uint64(d.Int(64))^1<<63)
		case KindUint:
			dst = binary.BigEndian.AppendUint64(dst, d.Uint64())
		case KindFloat32:
			dst = binary.BigEndian.AppendUint32(dst, orderedBits32(math.Float32bits(float32(KeyFloat64(float64(d.Float32()))))))
		case KindFloat64:
			dst = binary.BigEndian.AppendUint64(dst, OrderedFloat64(KeyFloat64(d.Float64())))
		case KindString:
			n := d.length()
			if d.err != nil {
				break
			}
			s := d.buf[d.pos : d.pos+n]
			d.pos += n
			for {
				j := bytes.IndexByte(s, 0)
				if j < 0 {
					break
				}
				dst = append(dst, s[:j]...)
				dst = append(dst, orderedEscape, orderedEscaped00)
				s = s[j+1:]
			}
			dst = append(dst, s...)
			dst = append(dst, orderedEscape, orderedTerminator)
		case KindTime:
			sec := d.Int(64)
			nanos := d.Uvarint()
			dst = binary.BigEndian.AppendUint64(dst, uint64(sec)^1<<63)
			dst = binary.BigEndian.AppendUint32(dst, uint32(nanos>>1))
			if nanos&1 == 0 {
				dst = append(dst, 0)
			} else {
				dst = append(dst, 1)
				dst = binary.BigEndian.AppendUint32(dst, uint32(int32(d.Int(32)))^1<<31)
			}
		}
	}
	if d.err != nil {
		return dst, fmt.Errorf("%w: %v", ErrOrderedKey, d.err)
	}
	if d.pos != len(bin) {
		return dst, fmt.Errorf("%w: %d bytes after the last field", ErrOrderedKey, len(bin)-d.pos)
	}
	return dst, nil
}

// KeyFloat64 is f as a grouping key: every NaN is one NaN and -0 is +0,
// as Spark's NormalizeFloatingNumbers makes grouping and join keys, so
// that values equal as numbers, or NaN, are one key.
func KeyFloat64(f float64) float64 {
	switch {
	case f != f:
		return math.NaN()
	case f == 0:
		return 0
	}
	return f
}

// OrderedFloat64 maps f to 8 bytes (big-endian) whose order is f's: the
// sign bit flipped for a positive number, every bit for a negative one.
// -0 comes just before +0, and NaNs after +Inf or before -Inf by sign.
// It has no branch, which values of either sign would mispredict.
func OrderedFloat64(f float64) uint64 {
	u := math.Float64bits(f)
	return u ^ (uint64(int64(u)>>63) | 1<<63)
}

// UnorderedFloat64 is the float whose OrderedFloat64 is u.
func UnorderedFloat64(u uint64) float64 {
	if u&(1<<63) != 0 {
		return math.Float64frombits(u &^ (1 << 63))
	}
	return math.Float64frombits(^u)
}

// orderedBits32 and unorderedBits32 are OrderedFloat64 and its inverse
// for the bits of a float32.
func orderedBits32(u uint32) uint32 {
	if u&(1<<31) != 0 {
		return ^u
	}
	return u | 1<<31
}

func unorderedBits32(u uint32) uint32 {
	if u&(1<<31) != 0 {
		return u &^ (1 << 31)
	}
	return ^u
}

// AppendBinary appends the binary encoding of the record whose ordered
// encoding is key: what the record's UnmarshalBinary reads.
func (o *OrderedKey) AppendBinary(dst, key []byte) ([]byte, error) {
	p := 0
	need := func(n int) bool { return len(key)-p >= n }
	for i := range o.fields {
		f := &o.fields[i]
		dst = AppendUvarint(dst, f.tag)
		switch f.kind {
		case KindBool:
			if !need(1) || key[p] > 1 {
				return dst, o.malformed(f)
			}
			dst = append(dst, key[p])
			p++
		case KindInt, KindDuration:
			if !need(8) {
				return dst, o.malformed(f)
			}
			dst = AppendInt(dst, int64(binary.BigEndian.Uint64(key[p:])^1<<63))
			p += 8
		case KindUint:
			if !need(8) {
				return dst, o.malformed(f)
			}
			dst = AppendUvarint(dst, binary.BigEndian.Uint64(key[p:]))
			p += 8
		case KindFloat32:
			if !need(4) {
				return dst, o.malformed(f)
			}
			dst = binary.LittleEndian.AppendUint32(dst, unorderedBits32(binary.BigEndian.Uint32(key[p:])))
			p += 4
		case KindFloat64:
			if !need(8) {
				return dst, o.malformed(f)
			}
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(UnorderedFloat64(binary.BigEndian.Uint64(key[p:]))))
			p += 8
		case KindString:
			// The length comes first in the binary encoding: find the
			// end, counting escapes, then copy.
			n, end := 0, -1
			for j := p; j+1 < len(key); j++ {
				if key[j] != orderedEscape {
					n++
					continue
				}
				if key[j+1] == orderedTerminator {
					end = j
					break
				}
				if key[j+1] != orderedEscaped00 {
					return dst, o.malformed(f)
				}
				n++
				j++
			}
			if end < 0 {
				return dst, o.malformed(f)
			}
			dst = AppendUvarint(dst, uint64(n))
			for j := p; j < end; j++ {
				dst = append(dst, key[j])
				if key[j] == orderedEscape {
					j++
				}
			}
			p = end + 2
		case KindTime:
			if !need(13) {
				return dst, o.malformed(f)
			}
			sec := int64(binary.BigEndian.Uint64(key[p:]) ^ 1<<63)
			nanos := binary.BigEndian.Uint32(key[p+8:])
			if nanos >= 1e9 {
				return dst, o.malformed(f)
			}
			dst = AppendInt(dst, sec)
			switch key[p+12] {
			case 0:
				dst = AppendUvarint(dst, uint64(nanos)<<1)
				p += 13
			case 1:
				if !need(17) {
					return dst, o.malformed(f)
				}
				dst = AppendUvarint(dst, uint64(nanos)<<1|1)
				dst = AppendInt(dst, int64(int32(binary.BigEndian.Uint32(key[p+13:])^1<<31)))
				p += 17
			default:
				return dst, o.malformed(f)
			}
		}
	}
	if p != len(key) {
		return dst, fmt.Errorf("%w: %d bytes after the last field", ErrOrderedKey, len(key)-p)
	}
	return dst, nil
}

func (o *OrderedKey) malformed(f *orderedField) error {
	return fmt.Errorf("%w: field %s is cut short or malformed", ErrOrderedKey, f.name)
}
