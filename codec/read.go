package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
)

// ErrTruncated is wrapped by decoding errors for input that ends in the
// middle of a value or claims a length beyond its end.
var ErrTruncated = errors.New("streamgen: truncated input")

// ErrMalformed is wrapped by decoding errors for input that is not in the
// binary format (a bad varint, a bool other than 0 or 1, a nested value that
// overruns its length).
var ErrMalformed = errors.New("streamgen: malformed input")

// ErrKindChanged is wrapped by the error for a field whose kind in the
// input differs from the kind the reading type has for the same field id:
// the field's type changed in a way the bytes cannot follow.
var ErrKindChanged = errors.New("streamgen: field type changed")

// sharedStringMax is the largest input for which a Decoder copies the whole
// input into one string the first time a string is read, and hands out
// substrings of it: one allocation for all of a record's strings instead of
// one each. Above it, strings are allocated one by one, so a large record
// with a short string does not keep a copy of all of its bytes alive.
const sharedStringMax = 1024

// Decoder reads the binary format for generated UnmarshalBinary methods. It
// is a cursor over one input with a sticky error: after the first error every
// read returns a zero value and More reports false, so generated code checks
// Err once at the end. Reads never go past the input and never panic.
//
// The zero value is ready after Reset. A Decoder is not safe for concurrent
// use.
type Decoder struct {
	buf    []byte
	pos    int
	shared string // a copy of buf, made on the first string read
	err    error
}

// Reset makes d read b from its start.
func (d *Decoder) Reset(b []byte) {
	d.buf, d.pos, d.shared, d.err = b, 0, "", nil
}

// Err returns the first error met, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns the number of bytes read so far.
func (d *Decoder) Offset() int { return d.pos }

// Fail records err (wrapped with the current offset) unless an error is
// already recorded, and stops reading.
func (d *Decoder) Fail(err error) {
	if d.err == nil {
		d.err = fmt.Errorf("at byte %d: %w", d.pos, err)
	}
	d.pos = len(d.buf)
}

func (d *Decoder) truncated() { d.Fail(ErrTruncated) }

// End returns the offset where the input ends: the bound of a top-level
// record's fields.
func (d *Decoder) End() int { return len(d.buf) }

// More reports whether another field starts before end and no error has
// occurred.
func (d *Decoder) More(end int) bool { return d.pos < end && d.err == nil }

// Uvarint reads an unsigned varint.
func (d *Decoder) Uvarint() uint64 {
	// Fast path for the one-byte varints that dominate lengths and counts.
	if d.pos < len(d.buf) && d.buf[d.pos] < 0x80 {
		v := d.buf[d.pos]
		d.pos++
		return uint64(v)
	}
	v, n := binary.Uvarint(d.buf[d.pos:])
	if n <= 0 {
		if n == 0 {
			d.truncated()
		} else {
			d.Fail(fmt.Errorf("%w: varint overflows 64 bits", ErrMalformed))
		}
		return 0
	}
	d.pos += n
	return v
}

// Tag reads a field's tag.
func (d *Decoder) Tag() uint64 { return d.Uvarint() }

// Int reads a zigzag varint into a signed integer of the given bit size; a
// value that does not fit (written by a wider type) is an error.
func (d *Decoder) Int(bits int) int64 {
	u := d.Uvarint()
	v := int64(u>>1) ^ -int64(u&1)
	if bits < 64 {
		if lim := int64(1) << (bits - 1); v < -lim || v >= lim {
			d.Fail(fmt.Errorf("%w: %d overflows int%d", ErrMalformed, v, bits))
			return 0
		}
	}
	return v
}

// Uint reads a uvarint into an unsigned integer of the given bit size; a
// value that does not fit is an error.
func (d *Decoder) Uint(bits int) uint64 {
	v := d.Uvarint()
	if bits < 64 && v>>bits != 0 {
		d.Fail(fmt.Errorf("%w: %d overflows uint%d", ErrMalformed, v, bits))
		return 0
	}
	return v
}

// Bool reads a byte that must be 0 or 1.
func (d *Decoder) Bool() bool {
	if d.pos >= len(d.buf) {
		d.truncated()
		return false
	}
	c := d.buf[d.pos]
	if c > 1 {
		d.Fail(fmt.Errorf("%w: bool byte %#x", ErrMalformed, c))
		return false
	}
	d.pos++
	return c == 1
}

// Float32 reads 4 bytes of IEEE 754 bits.
func (d *Decoder) Float32() float32 {
	if len(d.buf)-d.pos < 4 {
		d.truncated()
		return 0
	}
	v := binary.LittleEndian.Uint32(d.buf[d.pos:])
	d.pos += 4
	return math.Float32frombits(v)
}

// Float64 reads 8 bytes of IEEE 754 bits.
func (d *Decoder) Float64() float64 {
	if len(d.buf)-d.pos < 8 {
		d.truncated()
		return 0
	}
	v := binary.LittleEndian.Uint64(d.buf[d.pos:])
	d.pos += 8
	return math.Float64frombits(v)
}

// length reads a byte length and checks that the input holds that many
// bytes, so nothing is ever allocated for a length the input cannot back.
func (d *Decoder) length() int {
	n := d.Uvarint()
	if n > uint64(len(d.buf)-d.pos) {
		d.truncated()
		return 0
	}
	return int(n)
}

// String reads a length-prefixed string. Strings of a small input share one
// allocation (see sharedStringMax).
func (d *Decoder) String() string {
	n := d.length()
	if n == 0 {
		return ""
	}
	start := d.pos
	d.pos += n
	if len(d.buf) <= sharedStringMax {
		if d.shared == "" {
			d.shared = string(d.buf)
		}
		return d.shared[start:d.pos]
	}
	return string(d.buf[start:d.pos])
}

// Bytes reads a byte slice written by AppendBytes into a new slice (nil
// stays nil, empty stays empty).
func (d *Decoder) Bytes() []byte {
	n := d.Uvarint()
	if n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.buf)-d.pos) {
		d.truncated()
		return nil
	}
	p := make([]byte, n)
	copy(p, d.buf[d.pos:])
	d.pos += int(n)
	return p
}

// Duration reads a time.Duration.
func (d *Decoder) Duration() time.Duration { return time.Duration(d.Int(64)) }

// Time reads a time written by AppendTime.
func (d *Decoder) Time() time.Time {
	sec := d.Int(64)
	nanos := d.Uvarint()
	if d.err != nil {
		return time.Time{}
	}
	if nanos>>1 >= 1e9 {
		d.Fail(fmt.Errorf("%w: nanoseconds %d out of range", ErrMalformed, nanos>>1))
		return time.Time{}
	}
	t := time.Unix(sec, int64(nanos>>1))
	if nanos&1 == 0 {
		return t.UTC()
	}
	offset := d.Int(32)
	if d.err != nil {
		return time.Time{}
	}
	if _, local := t.Zone(); local == int(offset) {
		return t
	}
	return t.In(time.FixedZone("", int(offset)))
}

// List reads the header of a slice or array written by AppendList and
// returns its length, or -1 for nil. elem is the element kind the reading
// type expects (a different one in the input is ErrKindChanged, reported for
// field, as "Event.Tags"); minSize is the fewest bytes one element can take.
// A count the rest of the input cannot hold is an error, so callers may
// allocate n elements safely.
func (d *Decoder) List(field string, elem Kind, minSize int) int {
	if d.pos >= len(d.buf) {
		d.truncated()
		return -1
	}
	if got := Kind(d.buf[d.pos]); got != elem {
		d.Fail(fmt.Errorf("%w: elements of %s were written as %s, are now %s", ErrKindChanged, field, got, elem))
		return -1
	}
	d.pos++
	return d.count(minSize)
}

// Map reads the header of a map written by AppendMap, as List does; minSize
// is the fewest bytes a key and its value can take.
func (d *Decoder) Map(field string, key, value Kind, minSize int) int {
	if len(d.buf)-d.pos < 2 {
		d.truncated()
		return -1
	}
	if k, v := Kind(d.buf[d.pos]), Kind(d.buf[d.pos+1]); k != key || v != value {
		d.Fail(fmt.Errorf("%w: %s was written as map[%s]%s, is now map[%s]%s", ErrKindChanged, field, k, v, key, value))
		return -1
	}
	d.pos += 2
	return d.count(minSize)
}

func (d *Decoder) count(minSize int) int {
	c := d.Uvarint()
	if c == 0 || d.err != nil {
		return -1
	}
	c--
	if c > uint64(len(d.buf)-d.pos)/uint64(max(minSize, 1)) {
		d.truncated()
		return -1
	}
	return int(c)
}

// Present reads the presence byte of a pointer element: false for nil.
func (d *Decoder) Present() bool { return d.Bool() }

// Begin reads the byte length of a nested value (a struct, or a list or map
// field) and returns the offset where it ends, for More and Finish.
func (d *Decoder) Begin() int {
	n := d.length()
	return d.pos + n
}

// Finish checks that reading a nested value begun with Begin stopped exactly
// at its end.
func (d *Decoder) Finish(end int) {
	if d.err == nil && d.pos != end {
		d.Fail(fmt.Errorf("%w: nested value overruns its length", ErrMalformed))
	}
}

// Skip skips the value of a field with the given tag, whose id the reading
// type does not know (a field removed since, or added by a newer writer).
func (d *Decoder) Skip(tag uint64) {
	d.skipKind(Kind(tag & 0xf))
}

func (d *Decoder) skipKind(k Kind) {
	switch k {
	case KindBool:
		d.Bool()
	case KindInt, KindUint, KindDuration:
		d.Uvarint()
	case KindFloat32:
		d.skipBytes(4)
	case KindFloat64:
		d.skipBytes(8)
	case KindString, KindStruct, KindList, KindMap:
		d.pos += d.length()
	case KindBytes:
		if n := d.Uvarint(); n > 0 {
			d.skipBytes(n - 1)
		}
	case KindTime:
		d.Uvarint()
		if d.Uvarint()&1 == 1 {
			d.Uvarint()
		}
	default:
		d.Fail(fmt.Errorf("%w: unknown kind %d", ErrMalformed, k))
	}
}

func (d *Decoder) skipBytes(n uint64) {
	if n > uint64(len(d.buf)-d.pos) {
		d.truncated()
		return
	}
	d.pos += int(n)
}

// KindChanged records that the field of the given record and name, which
// the reading type has with kind want, was written with the kind in tag.
func (d *Decoder) KindChanged(record, field string, tag uint64, want Kind) {
	d.Fail(fmt.Errorf("%w: %s.%s was written as %s, is now %s", ErrKindChanged, record, field, Kind(tag&0xf), want))
}

// Wrap returns Err wrapped with the name of the record being decoded, for
// generated UnmarshalBinary methods.
func (d *Decoder) Wrap(record string) error {
	if d.err == nil {
		return nil
	}
	return fmt.Errorf("streamgen: decode %s: %w", record, d.err)
}

// Sub returns the bytes from the current offset to end and moves past
// them, for a nested record of another package that decodes itself.
func (d *Decoder) Sub(end int) []byte {
	if d.err != nil || end > len(d.buf) || end < d.pos {
		d.truncated()
		return nil
	}
	b := d.buf[d.pos:end]
	d.pos = end
	return b
}
