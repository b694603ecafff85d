package codec

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	mathbits "math/bits"
	"strconv"
	"unicode/utf8"
)

// AppendJSONString appends s as a JSON string exactly as encoding/json
// writes it with its default HTML escaping: '<', '>' and '&' as \u003c,
// \u003e, \u0026; U+2028 and U+2029 escaped; control characters escaped with
// the short forms encoding/json uses (\b \f \n \r \t) or \u00XX; invalid
// UTF-8 replaced by \ufffd.
func AppendJSONString(b []byte, s string) []byte {
	n := len(s)
	if n > 16 {
		if n <= jsonWordsMax {
			if out, ok := jsonAppendPlainWords(b, s); ok {
				return out
			}
		}
		return appendJSONStr(b, s)
	}
	// Up to 16 bytes: checked with one or two words read from s,
	// overlapping when s is not a multiple of 8 long (4 to 8 bytes: two
	// 4-byte halves; 1 to 3: its first, middle and last bytes, padded with
	// spaces), and when s needs no escaping, the common case, the same
	// words are written back between the quotes.
	b = jsonRoom(b, 16+2)
	out := b[:cap(b)]
	p := len(b)
	out[p] = '"'
	switch {
	case n > 8:
		w0, w1 := jsonLoad64(s, 0), jsonLoad64(s, n-8)
		if !jsonPlainWord(w0) || !jsonPlainWord(w1) {
			return appendJSONStr(b, s)
		}
		binary.LittleEndian.PutUint64(out[p+1:], w0)
		binary.LittleEndian.PutUint64(out[p+1+n-8:], w1)
	case n >= 4:
		w0, w1 := jsonLoad32(s, 0), jsonLoad32(s, n-4)
		if !jsonPlainWord(uint64(w0) | uint64(w1)<<32) {
			return appendJSONStr(b, s)
		}
		binary.LittleEndian.PutUint32(out[p+1:], w0)
		binary.LittleEndian.PutUint32(out[p+1+n-4:], w1)
	case n > 0:
		c0, c1, c2 := s[0], s[n>>1], s[n-1]
		if !jsonPlainWord(uint64(c0) | uint64(c1)<<8 | uint64(c2)<<16 | 0x2020202020<<24) {
			return appendJSONStr(b, s)
		}
		out[p+1], out[p+1+n>>1], out[p+n] = c0, c1, c2
	}
	out[p+1+n] = '"'
	return out[:p+2+n]
}

// jsonWordsMax is the longest string that AppendJSONString first tries
// to write a word at a time (jsonAppendPlainWords), as names, addresses
// and e-mail addresses are.
const jsonWordsMax = 64

// jsonAppendPlainWords appends s, of more than 8 bytes, when it needs no
// escaping, checking and copying it 8 bytes at a time (the last word
// overlapping the one before), and reports whether it did. On false it
// has written into b's spare capacity only where the escaped string will
// be written.
func jsonAppendPlainWords(b []byte, s string) ([]byte, bool) {
	n := len(s)
	b = jsonRoom(b, n+2)
	out := b[:cap(b)]
	p := len(b)
	out[p] = '"'
	for i := 0; i+8 < n; i += 8 {
		w := jsonLoad64(s, i)
		if !jsonPlainWord(w) {
			return b, false
		}
		binary.LittleEndian.PutUint64(out[p+1+i:], w)
	}
	w := jsonLoad64(s, n-8)
	if !jsonPlainWord(w) {
		return b, false
	}
	binary.LittleEndian.PutUint64(out[p+1+n-8:], w)
	out[p+1+n] = '"'
	return out[:p+2+n], true
}

// AppendJSONStringBytes is AppendJSONString for a byte slice.
func AppendJSONStringBytes(b []byte, s []byte) []byte {
	return AppendJSONString(b, StringOf(s))
}

// jsonHex is encoding/json's hex alphabet: lower case, as it writes \u00XX.
const jsonHex = "0123456789abcdef"

// jsonHTMLSafe[c] is true for the ASCII bytes encoding/json writes as they
// are with HTML escaping on (its htmlSafeSet): everything from ' ' to '~'
// and DEL, except '"', '\\', '<', '>' and '&'. Bytes from 0x80 up are
// false: they start a UTF-8 sequence that must be checked.
var jsonHTMLSafe = func() (t [256]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// SWAR (SIMD within a register) constants: lsb has the low bit of every
// byte set, msb the high bit.
const (
	jsonLSB = 0x0101010101010101
	jsonMSB = 0x8080808080808080
)

// jsonHasByte reports (in the high bit of each byte) whether some byte of x
// equals c. It is exact as a boolean: a false positive can only appear in
// a byte above a true match, so a zero result means no match.
func jsonHasByte(x uint64, c byte) uint64 {
	y := x ^ (jsonLSB * uint64(c))
	return (y - jsonLSB) &^ y
}

// jsonLoad64 reads 8 bytes little-endian. It is written out so that the
// compiler turns it into a single load, without importing encoding/binary
// for a generic string/[]byte type.
func jsonLoad64[T string | []byte](s T, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// jsonSpecial returns, in the high bit of each byte, which bytes of x
// encoding/json would not copy unchanged into a string literal: below
// 0x20, from 0x80 up, or one of '"', '\\', '<', '>' and '&'. Bytes after
// the first flagged one may be flagged falsely (a borrow), but the first
// is exact, and a zero result means that no byte is flagged.
func jsonSpecial(x uint64) uint64 {
	// Setting bit 2 maps '"' (0x22) and only it onto '&' (0x26);
	// setting bit 1 maps '<' (0x3c) and only it onto '>' (0x3e).
	return ((x-jsonLSB*0x20)&^x | x | jsonHasByte(x|jsonLSB*0x04, '&') | jsonHasByte(x|jsonLSB*0x02, '>') |
		jsonHasByte(x, '\\')) & jsonMSB
}

// jsonPlainRun returns the index of the first byte at or after i in s
// that encoding/json would not copy unchanged into a string literal (that
// is not printable ASCII other than '"', '\\', '<', '>' and '&'), or
// len(s). It checks 8 bytes at a time.
func jsonPlainRun(s string, i int) int {
	for i+8 <= len(s) {
		if m := jsonSpecial(jsonLoad64(s, i)); m != 0 {
			return i + mathbits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for i < len(s) && jsonHTMLSafe[s[i]] {
		i++
	}
	return i
}

// jsonLoad32 reads 4 bytes of s at i little-endian, in one load.
func jsonLoad32(s string, i int) uint32 {
	s = s[i : i+4]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// jsonPlainWord reports whether encoding/json copies all 8 bytes of x
// unchanged into a string literal: each is printable ASCII (0x20 to 0x7f)
// other than '"', '\\', '<', '>' and '&'. Once every byte is below 0x80
// (the ^x term), adding 0x60 to a byte sets its high bit exactly when it
// is 0x20 or more, and adding 0x7f to y = x^c sets it exactly when the
// byte is not c, with no carry into the next byte; a byte of 0x80 or more
// may carry, but its own ^x bit already fails the test. Setting bit 2
// maps '"' (0x22) and only it onto '&' (0x26); setting bit 1 maps '<'
// (0x3c) and only it onto '>' (0x3e).
func jsonPlainWord(x uint64) bool {
	const l = jsonLSB
	ok := ^x & (x + l*0x60) & (((x | l*0x04) ^ l*0x26) + l*0x7f) & (((x | l*0x02) ^ l*0x3e) + l*0x7f) &
		((x ^ l*0x5c) + l*0x7f)
	return ok&jsonMSB == jsonMSB
}

// appendJSONStr is encoding/json's appendString with escapeHTML set,
// with a word-at-a-time scan over the runs that need no escaping. It
// takes only a string (AppendJSONStringBytes passes its bytes as one) so
// that the compiler sees that dst does not escape: a caller's buffer on
// its stack can stay there.
func appendJSONStr(dst []byte, src string) []byte {
	dst = append(dst, '"')
	start, i := 0, 0
	for {
		i = jsonPlainRun(src, i)
		if i >= len(src) {
			break
		}
		c := src[i]
		if c < utf8.RuneSelf {
			dst = append(dst, src[start:i]...)
			switch c {
			case '\\', '"':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				// Other control characters, and '<', '>' and '&' which
				// encoding/json escapes so that JSON embedded in HTML
				// cannot close a script element.
				dst = append(dst, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(src[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, src[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 are valid in JSON but end a line in
		// JavaScript; encoding/json escapes them unconditionally.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, src[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', jsonHex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, src[start:]...)
	return append(dst, '"')
}

// AppendJSONBytes appends p as encoding/json writes a []byte: a quoted
// standard base64 string, or null when p is nil.
func AppendJSONBytes(b []byte, p []byte) []byte {
	if p == nil {
		return append(b, "null"...)
	}
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, p)
	return append(b, '"')
}

// AppendJSONInt appends v in decimal.
func AppendJSONInt(b []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		u = -u // also right for math.MinInt64: 1<<63
	}
	return jsonAppendUint(b, v < 0, u)
}

// AppendJSONUint appends v in decimal.
func AppendJSONUint(b []byte, v uint64) []byte {
	return jsonAppendUint(b, false, v)
}

// AppendJSONFloat appends f as encoding/json formats a float of the given
// bit size (32 or 64): shortest representation, exponent form below 1e-6 and
// at or above 1e21 with encoding/json's exponent clean-up. NaN and ±Inf are
// an error, as in encoding/json (the message names the value, as in
// "json: unsupported value: NaN"); b is then returned unchanged.
func AppendJSONFloat(b []byte, f float64, bits int) ([]byte, error) {
	if bits != 32 {
		// The commonest case first, inline: a binary fraction m/2^d, d >= 0
		// (m odd), whose exact decimal m·5^d / 10^d has under 16 digits,
		// so that it is the shortest form (see jsonAppendExactFloat). For
		// zero, a subnormal, NaN or ±Inf, d is out of jsonPow5's range.
		fb := math.Float64bits(f)
		m := fb&(1<<52-1) | 1<<52
		tz := mathbits.TrailingZeros64(m)
		d := 1075 - int(fb>>52&0x7ff) - tz
		if uint(d) < uint(len(jsonPow5)) {
			hi, n := mathbits.Mul64(m>>uint(tz), jsonPow5[d])
			if hi == 0 && n < 1e15 && math.Abs(f) >= 1e-6 {
				return jsonAppendFixed(b, int64(fb) < 0, n, d), nil
			}
		}
		// Then the rest that encoding/json writes without an exponent
		// (false for NaN, and ±Inf is past 1e21).
		if abs := math.Abs(f); abs >= 1e-6 && abs < 1e21 {
			if out, ok := jsonAppendCents(b, f, abs); ok {
				return out, nil
			}
			// The exact form of integers that the inline case did not
			// take (d < 0); for d >= 0 it found the exact form too long.
			if d < 0 {
				if out, ok := jsonAppendExactFloat(b, f, abs, 64); ok {
					return out, nil
				}
			}
			if out, ok := jsonAppendShortest(b, f, abs, 64); ok {
				return out, nil
			}
			return strconv.AppendFloat(b, f, 'f', -1, 64), nil
		}
		bits = 64
	}
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, &JSONError{Offset: -1, Msg: "unsupported value: " + strconv.FormatFloat(f, 'g', -1, bits)}
	}
	// Like ES6 number-to-string: plain decimal for "human" magnitudes,
	// exponent form outside [1e-6, 1e21). The cut-offs must be compared in
	// the float's own precision, as encoding/json does.
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	if format == 'f' && abs != 0 {
		if out, ok := jsonAppendExactFloat(b, f, abs, bits); ok {
			return out, nil
		}
	}
	if format == 'f' && abs != 0 {
		if out, ok := jsonAppendShortest(b, f, abs, bits); ok {
			return out, nil
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		// Clean up e-09 to e-9.
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// jsonAppendCents appends f (with abs = |f|, in the range where
// encoding/json does not use an exponent) when it is the float nearest a
// decimal with at most two decimals, such as a price or a percentage, and
// reports whether it did. It is jsonAppendShortest's argument at a fixed
// scale of 10^2: n = round(abs·100) and n/100 == abs tested exactly (n <
// 2^53, so the division rounds once); for abs under 10^13 the decimals
// 0.01 apart are farther apart than the interval of reals that round to
// abs, so n/100 is the only one of them that does, and, without its
// trailing zeros, the shortest representation. A float that is not near
// such a decimal is let go before the division: abs·100 is then far from
// an integer, where the float nearest one is within a few ulps of it.
func jsonAppendCents(b []byte, f, abs float64) ([]byte, bool) {
	if abs < 1e-2 || abs >= 1e13 {
		return b, false
	}
	x := abs * 100
	// Rounding half to even (one instruction where the CPU has one) picks
	// the same n as rounding half away from zero but at an exact tie,
	// which the tests below refuse either way (the tolerance below 2^49,
	// the division above).
	r := math.RoundToEven(x)
	if math.Abs(x-r) > x*0x1p-50 || r/100 != abs {
		return b, false
	}
	n, d := uint64(r), 2
	if n%10 == 0 {
		n, d = n/10, 1
		if n%10 == 0 {
			n, d = n/10, 0
		}
	}
	if n >= 1e8 {
		return jsonAppendFixed(b, f < 0, n, d), true
	}
	// Up to eight digits: written as one word, with the point put in
	// before the decimals in a register when the digits are seven or
	// fewer, else by moving the decimals one place on in b.
	b = jsonRoom(b, 16)
	out := b[:cap(b)]
	p := len(b)
	if f < 0 {
		out[p] = '-'
		p++
	}
	if d == 1 && n < 10 || d == 2 && n < 100 {
		out[p], out[p+1] = '0', '.'
		if d == 1 {
			out[p+2] = byte('0' + n)
			return out[:p+3], true
		}
		out[p+2], out[p+3] = jsonDigitPairs[2*n], jsonDigitPairs[2*n+1]
		return out[:p+4], true
	}
	w := jsonDigits8(uint32(n))
	z := mathbits.TrailingZeros64(w) >> 3 // leading zero digits; w != 0
	k := 8 - z
	a := w>>(8*z) + jsonASCIIZeros // the k digits, then '0's
	if d != 0 && k < 8 {
		// The integer part's bytes stay; the decimals and the '0' after
		// them move up a byte (the last '0', past k+1 bytes, drops out).
		at := 8 * uint(k-d)
		low := uint64(1)<<at - 1
		binary.LittleEndian.PutUint64(out[p:], a&low|'.'<<at|(a&^low)<<8)
		return out[:p+k+1], true
	}
	binary.LittleEndian.PutUint64(out[p:], a)
	switch d {
	case 1:
		out[p+k], out[p+k-1] = out[p+k-1], '.'
		k++
	case 2:
		out[p+k], out[p+k-1], out[p+k-2] = out[p+k-1], out[p+k-2], '.'
		k++
	}
	return out[:p+k], true
}

// jsonAppendExactFloat appends f (with abs = |f|, not zero, in the range
// where encoding/json does not use an exponent) when its exact decimal
// value has few enough significant digits to be the shortest
// representation, and reports whether it did; the other paths handle the
// rest.
//
// A float is m·2^e. With m odd and e < 0 its exact value is m·5^-e / 10^-e,
// whose digits N = m·5^-e end in a non-zero digit; with e >= 0 it is the
// integer m·2^e. Any decimal with fewer significant digits is at least one
// unit of N's last place away, a relative distance over 1/N. While N <
// 10^15 (10^7 for float32) that is more than half an ulp (2^-53 of the
// value; 2^-24 for float32), so no shorter decimal rounds to f: N is the
// shortest representation and, being exact, the closest, which is what
// strconv prints. Floats of measurements that are binary fractions (a
// sensor's -0.00054931640625 is -9/2^14) take this path with a multiply.
func jsonAppendExactFloat(b []byte, f, abs float64, bits int) ([]byte, bool) {
	limit := uint64(1e15)
	if bits == 32 {
		abs = float64(float32(abs)) // in case f was not a float32 value
		limit = 1e7
	}
	fb := math.Float64bits(abs)
	biased := int(fb >> 52 & 0x7ff)
	if biased == 0 {
		return b, false // subnormal: far below 1e-6, never here
	}
	m := fb&(1<<52-1) | 1<<52
	e := biased - 1075
	tz := mathbits.TrailingZeros64(m)
	m >>= uint(tz)
	e += tz
	var n uint64
	d := 0
	switch {
	case e >= 0:
		if e >= 64 || mathbits.Len64(m)+e > 63 {
			return b, false
		}
		n = m << uint(e)
	case -e < len(jsonPow5):
		d = -e
		hi, lo := mathbits.Mul64(m, jsonPow5[d])
		if hi != 0 {
			return b, false
		}
		n = lo
	default:
		return b, false
	}
	if n >= limit {
		return b, false
	}
	return jsonAppendFixed(b, f < 0, n, d), true
}

// jsonPow5 holds 5^k for the k that can keep m·5^k under 10^15.
var jsonPow5 = [...]uint64{1, 5, 25, 125, 625, 3125, 15625, 78125, 390625,
	1953125, 9765625, 48828125, 244140625, 1220703125, 6103515625,
	30517578125, 152587890625, 762939453125, 3814697265625,
	19073486328125, 95367431640625, 476837158203125}

// jsonAppendShortest appends f (with abs = |f|, not zero, in the range
// where encoding/json does not use an exponent) when its shortest decimal
// form has at most about 15 significant digits (6 for float32), and
// reports whether it did; strconv handles the rest.
//
// With k = floor(e2·log10 2) for abs in [2^e2, 2^(e2+1)), p = 14-k scales
// abs to x = abs·10^p in [10^14, 2·10^15). The integers near x are decimals
// of abs one unit of 10^-p apart, a relative distance over 1/(2·10^15):
// more than the width of the interval of reals that round to abs (2^-52
// of it). So at most one of them rounds to abs, the one nearest x; if
// n = round(x) does, which n/10^p tests exactly (both operands are exact,
// so the division rounds once, as strconv.ParseFloat does: Clinger's fast
// path), then n without its trailing zeros is the shortest representation
// (any shorter decimal is at least as far away as a neighbour of n) and
// the only one of its length, which is what strconv prints. If it does
// not, the shortest form has more digits than this tries. For float32 the
// interval is 2^-23 wide and p = 5-k.
func jsonAppendShortest(b []byte, f, abs float64, bits int) ([]byte, bool) {
	fb := math.Float64bits(abs)
	e2 := int(fb>>52&0x7ff) - 1023
	k := (e2 * 315653) >> 20 // floor(e2·log10 2) for |e2| < 2600
	var n uint64
	var p int
	if bits == 32 {
		f32 := float32(abs) // in case f was not a float32 value
		p = 5 - k
		if p < 0 || p >= len(jsonPow10f32) {
			return b, false
		}
		n = uint64(math.Round(float64(f32) * jsonPow10f64[p]))
		if n >= 1<<24 || float32(n)/jsonPow10f32[p] != f32 {
			return b, false
		}
	} else {
		p = 14 - k
		if p < 0 || p >= len(jsonPow10f64) {
			return b, false
		}
		n = uint64(math.Round(abs * jsonPow10f64[p]))
		if n >= 1<<53 || float64(n)/jsonPow10f64[p] != abs {
			return b, false
		}
	}
	// Drop trailing zeros, largest steps first.
	if n%1e8 == 0 && p >= 8 {
		n /= 1e8
		p -= 8
	}
	if n%1e4 == 0 && p >= 4 {
		n /= 1e4
		p -= 4
	}
	if n%100 == 0 && p >= 2 {
		n /= 100
		p -= 2
	}
	if n%10 == 0 && p >= 1 {
		n /= 10
		p--
	}
	return jsonAppendFixed(b, f < 0, n, p), true
}

// AppendJSONBool appends true or false.
func AppendJSONBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

// AppendJSONCompact appends the JSON value raw (the output of a MarshalJSON
// method) the way encoding/json embeds it: validated, insignificant space
// removed, and HTML-escaped. Invalid JSON is an error (a *JSONError with
// Syntax set, worded as encoding/json words it, with the offset into raw),
// and b is then returned unchanged.
func AppendJSONCompact(b []byte, raw []byte) ([]byte, error) {
	var r JSONReader
	r.Reset(raw)
	r.Skip()
	if err := r.Finish(); err != nil {
		return b, err
	}
	// raw is valid JSON, so white space outside strings is insignificant
	// and '<', '>', '&' and U+2028/U+2029 can only occur inside strings.
	// Like encoding/json, escape them byte-wise and leave everything else
	// in strings (even invalid UTF-8) as it is.
	start := 0
	inString := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if inString {
			switch {
			case c == '\\':
				i++ // the escaped byte cannot end the string
			case c == '"':
				inString = false
			case c == '<' || c == '>' || c == '&':
				b = append(b, raw[start:i]...)
				b = append(b, '\\', 'u', '0', '0', jsonHex[c>>4], jsonHex[c&0xF])
				start = i + 1
			case c == 0xE2 && i+2 < len(raw) && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
				b = append(b, raw[start:i]...)
				b = append(b, '\\', 'u', '2', '0', '2', jsonHex[raw[i+2]&0xF])
				i += 2
				start = i + 1
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case ' ', '\t', '\n', '\r':
			b = append(b, raw[start:i]...)
			start = i + 1
		}
	}
	return append(b, raw[start:]...), nil
}
