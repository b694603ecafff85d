package codec

import (
	"encoding/binary"
	"math"
	"time"
)

// The append-style writers of the binary format. Each appends one value to b
// and returns the extended slice; none allocates when b has room. See the
// package doc for the layouts.

// AppendUvarint appends v as an unsigned LEB128 varint.
func AppendUvarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendInt appends v as a zigzag varint, so small negative numbers stay short.
func AppendInt(b []byte, v int64) []byte {
	return AppendUvarint(b, uint64(v<<1)^uint64(v>>63))
}

// AppendUint appends v as a uvarint.
func AppendUint(b []byte, v uint64) []byte { return AppendUvarint(b, v) }

// AppendBool appends 1 for true and 0 for false.
func AppendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// AppendFloat32 appends the IEEE 754 bits of v, little endian: exact for
// every value, -0 and NaN payloads included.
func AppendFloat32(b []byte, v float32) []byte {
	return binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
}

// AppendFloat64 appends the IEEE 754 bits of v, little endian.
func AppendFloat64(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// AppendString appends the length of s and its bytes.
func AppendString(b []byte, s string) []byte {
	b = AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// AppendBytes appends p, keeping nil apart from empty: uvarint(0) for nil,
// else uvarint(len+1) and the bytes.
func AppendBytes(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, 0)
	}
	b = AppendUvarint(b, uint64(len(p))+1)
	return append(b, p...)
}

// AppendDuration appends d as a zigzag varint of nanoseconds.
func AppendDuration(b []byte, d time.Duration) []byte { return AppendInt(b, int64(d)) }

// AppendTime appends the instant t to the nanosecond with its zone offset:
// varint(unix seconds), uvarint(nanoseconds<<1 | hasOffset), and, for a time
// not in UTC, varint(offset in seconds). The zone's name is not kept (as in
// time.Time.MarshalBinary); the monotonic clock reading is dropped.
func AppendTime(b []byte, t time.Time) []byte {
	b = AppendInt(b, t.Unix())
	nanos := uint64(t.Nanosecond()) << 1
	if t.Location() == time.UTC {
		return AppendUvarint(b, nanos)
	}
	_, offset := t.Zone()
	b = AppendUvarint(b, nanos|1)
	return AppendInt(b, int64(offset))
}

// AppendList appends the header of a slice or array whose elements have
// kind elem (with PointerFlag for pointer elements): the kind as one byte,
// then uvarint(0) when isNil, else
// uvarint(n+1). The elements follow.
func AppendList(b []byte, elem Kind, n int, isNil bool) []byte {
	b = append(b, byte(elem))
	if isNil {
		return append(b, 0)
	}
	return AppendUvarint(b, uint64(n)+1)
}

// AppendMap appends the header of a map: the key kind and the value kind,
// one byte each, then
// uvarint(0) when isNil, else uvarint(n+1). Keys and values follow,
// alternating.
func AppendMap(b []byte, key, value Kind, n int, isNil bool) []byte {
	b = append(b, byte(key), byte(value))
	if isNil {
		return append(b, 0)
	}
	return AppendUvarint(b, uint64(n)+1)
}

// BeginLength reserves room for the byte length of a value that follows.
// The caller notes start := len(b) before the call and passes it to
// EndLength. It is used for nested structs and for list and map fields,
// whose length is not known until they are written.
func BeginLength(b []byte) []byte { return append(b, 0) }

// EndLength writes the length of everything appended since the BeginLength
// call at start. Lengths under 128 fit the reserved byte; longer ones move
// the value up to make room for a longer varint.
func EndLength(b []byte, start int) []byte { return endLength(b, start, 0) }

// endLength writes the length of what follows the reserved byte at start,
// plus extra.
func endLength(b []byte, start, extra int) []byte {
	n := len(b) - start - 1
	if n+extra < 0x80 {
		b[start] = byte(n + extra)
		return b
	}
	var head [binary.MaxVarintLen64]byte
	h := binary.PutUvarint(head[:], uint64(n+extra))
	b = append(b, head[:h-1]...) // grow by the extra bytes
	copy(b[start+h:], b[start+1:start+1+n])
	copy(b[start:], head[:h])
	return b
}
