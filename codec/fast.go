package codec

import (
	"encoding/binary"
	"math"
	mathbits "math/bits"
	"unsafe"

	"github.com/streamgen/streamgen/internal/fastpath"
)

// The fast path of generated decoders.
//
// A generated decoder first reads the fields in the order its own version
// writes them, from a local copy of the input and offset (Window), so that
// the offset stays in a register and each value is read by code inlined in
// the decoder; fields of kinds without inline code are read by the
// Decoder's methods, moved there and back (Seek, Offset). A value the
// inline code cannot read (cut short or invalid) ends the fast path: the
// Decoder takes over at that field's tag and reads the rest, in any
// order, reporting errors. So the functions here do not report errors:
// they report only whether they could read a value, and the Decoder reads
// it again to say what is wrong.

// Window returns the input up to end and the current offset, for a fast
// path to read from; after an error, the offset is end, so that nothing
// more is read.
func (d *Decoder) Window(end int) ([]byte, int) {
	end = min(end, len(d.buf))
	if d.err != nil || d.pos > end {
		return d.buf[:end], end
	}
	if fastpath.Off {
		return d.buf[:d.pos], d.pos
	}
	return d.buf[:end], d.pos
}

// Seek moves to offset p, where a fast path stopped.
func (d *Decoder) Seek(p int) {
	if p > len(d.buf) {
		p = len(d.buf)
	}
	d.pos = p
}

// HasTag reports whether the field at b[p:] has the tag whose encoded
// bytes are packed little endian in tag; mask keeps as many low bytes as
// the tag has. It needs four bytes (a tag has at most three, and its value
// at least one): with fewer left it reports false.
func HasTag(b []byte, p int, tag, mask uint32) bool {
	return p >= 0 && p+4 <= len(b) && binary.LittleEndian.Uint32(b[p:])&mask == tag
}

// PeekUvarint returns, when the input holds eight bytes from b[p] on, the
// varint at b[p] still in its 7-bit groups (PackUvarint finishes it) and
// its length; otherwise, or when the varint is longer than eight bytes, it
// returns a length of 0 and the caller reads with UvarintAt.
func PeekUvarint(b []byte, p int) (uint64, int) {
	if p >= 0 && p+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[p:])
		// The first byte without a continuation bit ends the varint.
		tz := mathbits.TrailingZeros64(^x & 0x8080808080808080)
		return x & (1<<(tz+1) - 1), (tz + 1) >> 3 &^ (tz >> 6 << 3) // 0 when tz is 64
	}
	return 0, 0
}

// PackUvarint packs the 7-bit groups of a varint PeekUvarint returned
// into its value.
func PackUvarint(x uint64) uint64 { return packVarint(x) }

// UvarintAt reads the varint at b[p] and returns it and its length, or a
// length of 0 when the input ends in it or it overflows 64 bits.
//
// It reads as Decoder.uvarintSlow does, in a copy of its code: sharing one
// function made Decoder.Int64 on six-byte varints 10% slower (one more
// call), and calling uvarintSlow on a Decoder made for it made the sensor
// record's decoding 5% slower.
func UvarintAt(b []byte, p int) (uint64, int) {
	if p >= 0 && p+9 <= len(b) {
		x := binary.LittleEndian.Uint64(b[p:])
		if ^x&0x8080808080808080 == 0 {
			// Nine or ten bytes: a 64-bit value of 56 bits or more.
			v := packVarint(x)
			if c := b[p+8]; c < 0x80 {
				return v | uint64(c)<<56, 9
			}
			if p+10 <= len(b) && b[p+9] <= 1 {
				return v | uint64(b[p+8]&0x7f)<<56 | uint64(b[p+9])<<63, 10
			}
			return 0, 0
		}
	}
	if p < 0 || p >= len(b) {
		return 0, 0
	}
	v, n := binary.Uvarint(b[p:])
	if n <= 0 {
		return 0, 0
	}
	return v, n
}

// Zigzag decodes a zigzag-encoded integer.
func Zigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// StringAt returns the bounds of the string at b[p] when its length takes
// one byte and the input holds it; otherwise an end of 0, and the caller
// reads with LongStringAt.
func StringAt(b []byte, p int) (start, end int) {
	if uint(p) < uint(len(b)) {
		if n := int(b[p]); n < 0x80 && n < len(b)-p {
			return p + 1, p + 1 + n
		}
	}
	return 0, 0
}

// LongStringAt returns the bounds of the length-prefixed string at b[p],
// or an end of 0 when the input does not hold it.
func LongStringAt(b []byte, p int) (start, end int) {
	n, k := UvarintAt(b, p)
	if k == 0 || n > uint64(len(b)-p-k) {
		return 0, 0
	}
	return p + k, p + k + int(n)
}

// Float64At returns the float64 whose bits are the eight bytes at b[p],
// which the caller has checked are there.
func Float64At(b []byte, p int) float64 {
	return math.Float64frombits(binary.LittleEndian.Uint64(b[p:]))
}

// Float32At returns the float32 whose bits are the four bytes at b[p],
// which the caller has checked are there.
func Float32At(b []byte, p int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[p:]))
}

// MaxJoined is the most bytes of strings that generated decoders copy into
// one allocation: a struct's strings that are longer together each get
// their own, so that keeping one short string does not keep long ones
// alive.
const MaxJoined = 128

// StringOf returns the bytes of b as a string without copying them. b must
// never be written again: generated decoders copy the string fields of a
// struct into one new slice and slice each field's string from it, so that
// they take one allocation instead of one each.
func StringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
