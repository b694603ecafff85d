package codec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	mathbits "math/bits"
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

// Decoder reads the binary format for generated UnmarshalBinary methods. It
// is a cursor over one input with a sticky error: after the first error every
// read returns a zero value and More reports false, so generated code checks
// Err once at the end. Reads never go past the input and never panic.
//
// The zero value is ready after Reset. A Decoder is not safe for concurrent
// use.
type Decoder struct {
	buf []byte
	pos int
	err error
	// depth counts the values of recursive types being read (Enter), as
	// their encoders count them.
	depth int
}

// Reset makes d read b from its start.
func (d *Decoder) Reset(b []byte) {
	d.buf, d.pos, d.err, d.depth = b, 0, nil, 0
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
	// One-byte varints (lengths, counts, small numbers) stay inline.
	if p := d.pos; p < len(d.buf) {
		if c := d.buf[p]; c < 0x80 {
			d.pos = p + 1
			return uint64(c)
		}
	}
	return d.uvarintSlow()
}

// uvarintSlow reads a varint of two or more bytes.
func (d *Decoder) uvarintSlow() uint64 {
	b := d.buf[d.pos:]
	if len(b) >= binary.MaxVarintLen64 {
		// Eight bytes at once: the first byte without a continuation bit
		// ends the varint; the 7-bit groups before it are packed
		// together in three steps, without a loop.
		x := binary.LittleEndian.Uint64(b)
		if stop := ^x & 0x8080808080808080; stop != 0 {
			n := mathbits.TrailingZeros64(stop) + 1 // bits up to the last byte's top bit
			x &= 1<<n - 1                           // n is 64 for 8 bytes: all of x
			d.pos += n >> 3
			return packVarint(x)
		}
		v := packVarint(x)
		if c := b[8]; c < 0x80 {
			d.pos += 9
			return v | uint64(c)<<56
		}
		if c := b[9]; c <= 1 {
			d.pos += 10
			return v | uint64(b[8]&0x7f)<<56 | uint64(c)<<63
		}
		d.Fail(fmt.Errorf("%w: varint overflows 64 bits", ErrMalformed))
		return 0
	}
	v, n := binary.Uvarint(b)
	if n > 0 {
		d.pos += n
		return v
	}
	if n == 0 {
		d.truncated()
	} else {
		d.Fail(fmt.Errorf("%w: varint overflows 64 bits", ErrMalformed))
	}
	return 0
}

// packVarint packs the low 7 bits of each byte of x (little endian), the
// continuation bits ignored, into one number.
func packVarint(x uint64) uint64 {
	x = x&0x007f007f007f007f | x&0x7f007f007f007f00>>1
	x = x&0x00003fff00003fff | x&0x3fff00003fff0000>>2
	return x&0x000000000fffffff | x&0x0fffffff00000000>>4
}

// Tag reads a field's tag.
func (d *Decoder) Tag() uint64 { return d.Uvarint() }

// Int64 reads a zigzag varint.
func (d *Decoder) Int64() int64 {
	u := d.Uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// Int reads a zigzag varint into a signed integer of the given bit size; a
// value that does not fit (written by a wider type) is an error.
func (d *Decoder) Int(bits int) int64 {
	v := d.Int64()
	if lim := int64(1) << (bits - 1); bits < 64 && (v < -lim || v >= lim) {
		return d.overflow(v, "int", bits)
	}
	return v
}

// Uint64 reads a uvarint.
func (d *Decoder) Uint64() uint64 { return d.Uvarint() }

// Uint reads a uvarint into an unsigned integer of the given bit size; a
// value that does not fit is an error.
func (d *Decoder) Uint(bits int) uint64 {
	v := d.Uvarint()
	if bits < 64 && v>>bits != 0 {
		d.overflow(int64(v), "uint", bits)
		return 0
	}
	return v
}

func (d *Decoder) overflow(v int64, kind string, bits int) int64 {
	if kind == "uint" {
		d.Fail(fmt.Errorf("%w: %d overflows uint%d", ErrMalformed, uint64(v), bits))
	} else {
		d.Fail(fmt.Errorf("%w: %d overflows int%d", ErrMalformed, v, bits))
	}
	return 0
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
	p := d.pos
	if b := d.buf[p:]; len(b) >= 4 {
		d.pos = p + 4
		return math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	}
	return float32(d.short())
}

// Float64 reads 8 bytes of IEEE 754 bits.
func (d *Decoder) Float64() float64 {
	p := d.pos
	if b := d.buf[p:]; len(b) >= 8 {
		d.pos = p + 8
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
	return d.short()
}

// short records a truncated input and returns 0, out of line so that the
// readers that call it stay small enough to inline.
func (d *Decoder) short() float64 {
	d.truncated()
	return 0
}

// length reads a byte length and checks that the input holds that many
// bytes, so nothing is ever allocated for a length the input cannot back.
func (d *Decoder) length() int {
	if n := d.Uvarint(); n <= uint64(len(d.buf)-d.pos) {
		return int(n)
	}
	return int(d.short())
}

// String reads a length-prefixed string into a new string. The fast paths
// of generated decoders read a struct's own string fields themselves (and
// copy short ones together, see StringOf); String reads strings in lists,
// maps and pointers, and string fields that come out of order.
func (d *Decoder) String() string {
	n := d.length()
	d.pos += n
	return string(d.buf[d.pos-n : d.pos])
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
// field) and returns the offset where it ends, for More and Finish. The end
// is never past the input's end.
func (d *Decoder) Begin() int {
	n := d.length()
	return d.pos + n
}

// Enter is called by the reader of a recursive type's struct before it
// reads one, and Leave after: deeper than MaxDepth such structs inside
// each other, the input is refused (what names the type), and Enter
// reports false. Encoders count the same way.
func (d *Decoder) Enter(what string) bool {
	if d.depth++; d.depth > MaxDepth {
		d.depth--
		d.Fail(fmt.Errorf("%w: %s values nested deeper than %d", ErrMalformed, what, MaxDepth))
		return false
	}
	return true
}

// Leave ends what Enter began.
func (d *Decoder) Leave() { d.depth-- }

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
