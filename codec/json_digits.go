package codec

import (
	"encoding/binary"
	mathbits "math/bits"
	"slices"
)

// Decimal digits for the JSON writer, eight at a time: a number's digits
// are computed in a register (SWAR, as in jsonPlainRun) and stored with
// one 8-byte write straight into the output, which needs no lookup table
// and no copy from a scratch buffer. The writers store whole words, so
// they may write a few bytes past the end of what they append (never past
// cap): they first make room with jsonRoom.

// Room the writers need after len(b): an integer is at most a sign and
// 20 digits, with its last store ending at its end; a fixed-point float
// (jsonAppendFixed) is at most a sign, "0.", 21 decimals, and a store of
// up to 8 bytes spilling past them.
const (
	jsonIntRoom   = 24
	jsonFixedRoom = 40
)

// jsonRoom returns b with at least n bytes of capacity after its length.
func jsonRoom(b []byte, n int) []byte {
	if cap(b)-len(b) < n {
		b = slices.Grow(b, n)
	}
	return b
}

// jsonASCIIZeros turns eight digit values 0-9 into their ASCII digits.
const jsonASCIIZeros = 0x3030303030303030

// jsonDigits8 returns the eight decimal digits of v < 1e8, leading zeros
// included, as byte values 0 to 9 in memory order (the first digit in the
// low byte). It splits v into two halves of four digits, each half into
// two pairs, each pair into two digits, all lanes at once:
// x·10486>>20 is x/100 for x < 10^4, and x·103>>10 is x/10 for x < 100.
// No lane overflows into the next (9999·10486 < 2^32, 99·103 < 2^16).
func jsonDigits8(v uint32) uint64 {
	hi, lo := v/10000, v%10000
	x := uint64(hi) | uint64(lo)<<32
	q := (x * 10486 >> 20) & (0x7F<<32 | 0x7F)
	// Four pairs in 16-bit lanes: hi/100, hi%100, lo/100, lo%100.
	x = (x-100*q)<<16 | q
	q = (x * 103 >> 10) & (0xF<<48 | 0xF<<32 | 0xF<<16 | 0xF)
	return (x-10*q)<<8 | q
}

// jsonAppendUint appends v in decimal, after a minus sign if neg. The
// leading group of up to 8 digits is written first, then the groups of
// exactly 8 that follow it, all in one function body (AppendJSONInt and
// AppendJSONUint are inlined around it, so an integer costs one call).
func jsonAppendUint(b []byte, neg bool, v uint64) []byte {
	b = jsonRoom(b, jsonIntRoom)
	out := b[:cap(b)]
	p := len(b)
	if neg {
		out[p] = '-'
		p++
	}
	head, groups := v, 0
	var rest uint64
	switch {
	case v >= 1e16:
		head, rest, groups = v/1e16, v%1e16, 2 // head at most 1844
	case v >= 1e8:
		head, rest, groups = v/1e8, v%1e8, 1
	}
	switch h := uint32(head); {
	case h < 10:
		out[p] = byte('0' + h)
		p++
	case h < 100:
		out[p], out[p+1] = jsonDigitPairs[2*h], jsonDigitPairs[2*h+1]
		p += 2
	default:
		x := jsonDigits8(h)
		z := mathbits.TrailingZeros64(x) >> 3 // leading zero digits; x != 0
		binary.LittleEndian.PutUint64(out[p:], x>>(8*z)+jsonASCIIZeros)
		p += 8 - z
	}
	switch groups {
	case 1:
		binary.LittleEndian.PutUint64(out[p:], jsonDigits8(uint32(rest))+jsonASCIIZeros)
		p += 8
	case 2:
		binary.LittleEndian.PutUint64(out[p:], jsonDigits8(uint32(rest/1e8))+jsonASCIIZeros)
		binary.LittleEndian.PutUint64(out[p+8:], jsonDigits8(uint32(rest%1e8))+jsonASCIIZeros)
		p += 16
	}
	return out[:p]
}

// jsonPutDigits writes digits s to 15 of a 16-digit stream, given as its
// two words of jsonDigits8 values (w0 holds digits 0 to 7), at out[p:] and
// returns the index after them. It may store up to 8 bytes past that.
func jsonPutDigits(out []byte, p int, w0, w1 uint64, s int) int {
	if s < 8 {
		binary.LittleEndian.PutUint64(out[p:], w0>>(8*s)+jsonASCIIZeros)
		p += 8 - s
		s = 8
	}
	binary.LittleEndian.PutUint64(out[p:], w1>>(8*(s-8))+jsonASCIIZeros)
	return p + 16 - s
}

// jsonAppendFixed appends n / 10^d in plain decimal, negated if neg, with
// n < 10^16 and d <= 21: a leading "0." and zeros as needed, no trailing
// point, and no trailing zeros dropped (the callers pass n without them).
func jsonAppendFixed(b []byte, neg bool, n uint64, d int) []byte {
	b = jsonRoom(b, jsonFixedRoom)
	out := b[:cap(b)]
	p := len(b)
	if neg {
		out[p] = '-'
		p++
	}
	// n as 16 digits with leading zeros; s is where its digits start.
	hi, lo := uint32(n/1e8), uint32(n%1e8)
	w0, w1 := jsonDigits8(hi), jsonDigits8(lo)
	s := 16
	switch {
	case hi != 0:
		s = mathbits.TrailingZeros64(w0) >> 3
	case lo != 0:
		s = 8 + mathbits.TrailingZeros64(w1)>>3
	}
	if d == 0 && s == 16 {
		out[p] = '0'
		return out[:p+1]
	}
	if d < 16-s {
		// An integer part: digits s to 15-d, then the point.
		p += 16 - d - s
		jsonPutDigits(out, p-(16-d-s), w0, w1, s)
		if d == 0 {
			return out[:p]
		}
		out[p] = '.'
		return out[:jsonPutDigits(out, p+1, w0, w1, 16-d)]
	}
	out[p], out[p+1] = '0', '.'
	p += 2
	for ; d > 16; d-- {
		out[p] = '0'
		p++
	}
	return out[:jsonPutDigits(out, p, w0, w1, 16-d)]
}

// jsonDigitPairs holds "00" to "99", for numbers under 100.
const jsonDigitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"
