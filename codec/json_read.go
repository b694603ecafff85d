package codec

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// JSONReader reads one JSON document on behalf of generated UnmarshalJSON
// methods. It accepts exactly the documents encoding/json accepts and
// reports errors the way encoding/json does:
//
//   - A syntax error (bad token, unterminated value, trailing garbage,
//     control character in a string, invalid number, nesting deeper than
//     10000) is sticky: it is recorded with its byte offset and every later
//     call returns at once (false, zero values). Err returns it. Its
//     message and offset are those of encoding/json's *SyntaxError.
//   - A type error (a JSON value that does not fit the Go target: a string
//     for an int, 1.5 for an int, 300 for an int8, -1 for a uint, an object
//     for a string, ...) is recorded only if it is the first, the offending
//     value is skipped (and validated), and reading goes on, exactly as
//     encoding/json "skips that field and completes the unmarshaling as best
//     it can". Err returns the first type error when there is no syntax
//     error. Its value description and offset are those of encoding/json's
//     *UnmarshalTypeError.
//   - An error from Time or Fail (encoding/json's error from an Unmarshaler)
//     stops reading like a syntax error. Because encoding/json checks the
//     whole document before decoding, a syntax error anywhere in the
//     document still takes precedence: when such an error is recorded, the
//     reader checks the rest of the input and reports the syntax error
//     instead if there is one.
//   - With DisallowUnknownFields, a member that names no field of the
//     struct being read is recorded as a type error is.
//   - A required field (see RequiredSet) missing or null is recorded only
//     if it is the first, and reading goes on. Err returns it, a
//     *RequiredFieldError, only when there is no other error: the
//     document is one encoding/json would accept.
//
// The target arguments describe the Go destination for error messages, as
// encoding/json words it ("Go struct field Event.Index of type int64");
// they are only read when there is an error, so generated code should pass
// constants rather than build them.
//
// The zero value is not ready for use; call Reset first. A JSONReader is not
// safe for concurrent use. Byte offsets in errors are offsets into the slice
// given to Reset.
type JSONReader struct {
	data []byte
	pos  int // next byte to read

	// depth is the number of objects and arrays begun and not yet ended,
	// for encoding/json's nesting limit.
	depth int
	// first is set by BeginObject and BeginArray, and cleared by the
	// NextKey or NextElement call that follows: the first member or
	// element has no ',' before it and the container may be empty.
	first bool
	// start is the offset of the first byte of the last key or value
	// begun, for the offsets of type errors.
	start int

	stop     *JSONError          // syntax error or error from an Unmarshaler
	typeErr  *JSONError          // first type error
	required *RequiredFieldError // first required field missing or null

	// ctxErr is the type error that InField is placing in its structs,
	// and ctxDepth the depth below which the next field to end encloses
	// it (0: none).
	ctxErr   *JSONError
	ctxDepth int
	ctxInner bool // no struct has named ctxErr yet

	scratch []byte   // unescaped strings and keys
	stack   []uint64 // container kinds for Skip beyond its first 64 levels

	// strict is set by DisallowUnknownFields; unlike the state above,
	// Reset keeps it.
	strict bool
}

// jsonMaxDepth is encoding/json's limit on nested objects and arrays.
const jsonMaxDepth = 10000

// Reset makes r read data from its start and clears any error. It keeps
// the setting of DisallowUnknownFields.
func (r *JSONReader) Reset(data []byte) {
	r.data = data
	r.pos = 0
	r.depth = 0
	r.first = false
	r.start = 0
	r.stop = nil
	r.typeErr = nil
	r.required = nil
	r.ctxErr = nil
	r.ctxDepth = 0
}

// InField is called by generated code when the value of a struct field has
// been read, with the struct's name and the field's path (its JSON name,
// behind the Go names of the embedded structs it is promoted from). If a
// type error was found inside that value, it records where, as
// encoding/json does: "Go struct field Outer.inner.x of type int". It is
// one comparison when there is nothing to record.
func (r *JSONReader) InField(strct, path string) {
	if r.ctxDepth > r.depth {
		r.inField(strct, path)
	}
}

func (r *JSONReader) inField(strct, path string) {
	e := r.ctxErr
	if r.ctxInner {
		// The innermost struct names the error, as in encoding/json.
		e.Struct, r.ctxInner = strct, false
	}
	if e.Field == "" {
		e.Field = path
	} else {
		e.Field = path + "." + e.Field
	}
	if e != r.stop {
		r.ctxDepth = r.depth
	}
	// After an error that stops reading, containers are left without
	// their depth going down, and every field that still ends encloses
	// the error: ctxDepth stays above any depth.
}

// Finish checks that only whitespace follows the value read so far and
// returns Err. Generated code calls it once, at the end of UnmarshalJSON.
func (r *JSONReader) Finish() error {
	if r.stop == nil {
		if i := r.skipSpace(r.pos); i < len(r.data) {
			r.syntaxErr(i, "after top-level value")
		}
	}
	return r.Err()
}

// Err returns the syntax error if there was one, else the error from Time
// or Fail, else the first type error (all *JSONError), else the first
// required field missing or null (*RequiredFieldError), else nil.
func (r *JSONReader) Err() error {
	if r.stop != nil {
		return r.stop
	}
	if r.typeErr != nil {
		return r.typeErr
	}
	if r.required != nil {
		return r.required
	}
	return nil
}

// Failed reports whether reading has stopped: a syntax error, or an error
// from Time or Fail, has been recorded.
func (r *JSONReader) Failed() bool { return r.stop != nil }

// Null consumes the next value and reports true if it is the literal null;
// otherwise it consumes nothing (except white space) and reports false.
func (r *JSONReader) Null() bool {
	if r.stop != nil {
		return false
	}
	i := r.skipSpace(r.pos)
	r.pos = i
	if i >= len(r.data) || r.data[i] != 'n' {
		return false
	}
	r.start = i
	if !r.literal(i, "null") {
		return false
	}
	r.pos = i + 4
	return true
}

// BeginObject consumes the '{' of an object and reports true. If the next
// value is null it is consumed and BeginObject reports false with no error.
// Any other value is a type error for target, is skipped, and BeginObject
// reports false. target describes the Go destination for messages, as in
// "Go struct field Event.Where of type geo.Point" or "Go value of type
// main.Event".
func (r *JSONReader) BeginObject(target string) bool {
	c, ok := r.begin()
	if !ok {
		return false
	}
	if c == '{' {
		return r.open()
	}
	r.other(c, target)
	return false
}

// NextKey reads the next member name of the object begun by BeginObject,
// and the ':' after it. It reports false when it reaches (and consumes) the
// closing '}', or on a syntax error. The key is unescaped (escapes decoded,
// invalid UTF-8 and lone surrogates replaced with U+FFFD as encoding/json
// does); it is valid only until the next call on r. When the key has no
// escapes and is valid UTF-8 it is a subslice of the input and nothing is
// copied. After NextKey returns true the caller reads or skips exactly one
// value.
func (r *JSONReader) NextKey() (key []byte, ok bool) {
	if r.stop != nil {
		return nil, false
	}
	data := r.data
	i := r.skipSpace(r.pos)
	if r.first {
		r.first = false
		if i < len(data) && data[i] == '}' {
			r.pos = i + 1
			r.depth--
			return nil, false
		}
	} else {
		if i >= len(data) {
			r.eofErr()
			return nil, false
		}
		switch data[i] {
		case '}':
			r.pos = i + 1
			r.depth--
			return nil, false
		case ',':
			i = r.skipSpace(i + 1)
		default:
			r.syntaxErr(i, "after object key:value pair")
			return nil, false
		}
	}
	if i >= len(data) {
		r.eofErr()
		return nil, false
	}
	if data[i] != '"' {
		r.syntaxErr(i, "looking for beginning of object key string")
		return nil, false
	}
	r.start = i
	end, flags := r.scanString(i)
	if flags&jsonStrBad != 0 {
		return nil, false
	}
	j := r.skipSpace(end)
	if j >= len(data) {
		r.eofErr()
		return nil, false
	}
	if data[j] != ':' {
		r.syntaxErr(j, "after object key")
		return nil, false
	}
	r.pos = j + 1
	return r.unquote(i, end, flags), true
}

// BeginArray consumes the '[' of an array and reports true. null is consumed
// and reported as false with no error; any other value is a type error for
// target, is skipped, and reports false.
func (r *JSONReader) BeginArray(target string) bool {
	c, ok := r.begin()
	if !ok {
		return false
	}
	if c == '[' {
		return r.open()
	}
	r.other(c, target)
	return false
}

// NextElement reports whether another element follows in the array begun by
// BeginArray (consuming the ',' before it), or consumes the closing ']' and
// reports false. After true the caller reads or skips exactly one value.
func (r *JSONReader) NextElement() bool {
	if r.stop != nil {
		return false
	}
	data := r.data
	i := r.skipSpace(r.pos)
	if i >= len(data) {
		r.eofErr()
		return false
	}
	if r.first {
		r.first = false
		if data[i] == ']' {
			r.pos = i + 1
			r.depth--
			return false
		}
		// Whatever is here must begin a value; the read that follows
		// checks it.
		r.pos = i
		return true
	}
	switch data[i] {
	case ']':
		r.pos = i + 1
		r.depth--
		return false
	case ',':
		r.pos = i + 1
		return true
	}
	r.syntaxErr(i, "after array element")
	return false
}

// DisallowUnknownFields makes an object member that names no field of
// the struct being read an error, as encoding/json's
// Decoder.DisallowUnknownFields does: "json: unknown field \"usr\"",
// recorded like a type error (the first error found is kept, and reading
// goes on). It holds for the structs of every record read through r,
// nested ones and those of other packages, as generated by this version
// (earlier generated code skips such members whatever the setting); a
// map's keys are not fields.
// Without it, such a member is skipped, as encoding/json skips it.
func (r *JSONReader) DisallowUnknownFields() { r.strict = true }

// Unknown is called by generated code after NextKey returned key, a
// member that names no field of the struct being read: it skips the
// member's value, and records an error first when DisallowUnknownFields
// was called.
func (r *JSONReader) Unknown(key []byte) {
	if r.strict && r.stop == nil {
		r.saveTypeErr(&JSONError{Offset: int64(r.start), Msg: "unknown field " + strconv.Quote(string(key))})
	}
	r.Skip()
}

// Skip reads and discards one value of any type, checking its syntax.
func (r *JSONReader) Skip() {
	if _, ok := r.begin(); ok {
		r.skipValue()
	}
}

// RawValue reads one value of any type and returns its bytes exactly as
// they appear in the input (no surrounding whitespace); valid until the
// next call on r. ok is false only on a syntax error.
func (r *JSONReader) RawValue() (raw []byte, ok bool) {
	if _, ok := r.begin(); !ok {
		return nil, false
	}
	start := r.pos
	if !r.skipValue() {
		return nil, false
	}
	return r.data[start:r.pos], true
}

// String reads a JSON string. ok is false, and nothing should be stored, if
// the value is null (no error: encoding/json leaves the destination alone)
// or not a string (a type error for target, value skipped). The result is
// the only allocation (none for the empty string).
func (r *JSONReader) String(target string) (s string, ok bool) {
	c, ok := r.begin()
	if !ok {
		return "", false
	}
	if c == '"' {
		i := r.pos
		end, flags := r.scanString(i)
		if flags&jsonStrBad != 0 {
			return "", false
		}
		r.pos = end
		return r.unquoteString(i, end, flags), true
	}
	r.other(c, target)
	return "", false
}

// StringBytes is String without the allocation: the bytes are valid only
// until the next call on r. When the string has no escapes and is valid
// UTF-8 they are a subslice of the input.
func (r *JSONReader) StringBytes(target string) (s []byte, ok bool) {
	c, ok := r.begin()
	if !ok {
		return nil, false
	}
	if c == '"' {
		i := r.pos
		end, flags := r.scanString(i)
		if flags&jsonStrBad != 0 {
			return nil, false
		}
		r.pos = end
		return r.unquote(i, end, flags), true
	}
	r.other(c, target)
	return nil, false
}

// Bool reads true or false. null gives ok=false with no error; any other
// value is a type error.
func (r *JSONReader) Bool(target string) (v bool, ok bool) {
	c, ok := r.begin()
	if !ok {
		return false, false
	}
	switch c {
	case 't':
		if r.literal(r.pos, "true") {
			r.pos += 4
			return true, true
		}
		return false, false
	case 'f':
		if r.literal(r.pos, "false") {
			r.pos += 5
			return false, true
		}
		return false, false
	}
	r.other(c, target)
	return false, false
}

// Int reads a JSON number into a signed integer of the given bit size (8,
// 16, 32 or 64). A number with a fraction or exponent, or out of range, is a
// type error ("number 1.5"), as in encoding/json. null gives ok=false with
// no error.
func (r *JSONReader) Int(target string, bits int) (v int64, ok bool) {
	c, ok := r.begin()
	if !ok {
		return 0, false
	}
	if c != '-' && (c < '0' || c > '9') {
		r.other(c, target)
		return 0, false
	}
	i := r.pos
	if bits <= 0 || bits > 64 {
		bits = 64
	}
	if u, frac, neg, end, ok := r.scanDecimal(i); ok && frac == 0 {
		limit := uint64(1) << (bits - 1) // |min|; max is limit-1
		if neg && u <= limit || !neg && u < limit {
			r.pos = end
			return int64(u) * jsonSign(neg), true // -int64(limit) wraps to min
		}
	}
	end, isInt := r.scanNumber(i)
	if end < 0 {
		return 0, false
	}
	r.pos = end
	if isInt {
		neg := c == '-'
		digits := r.data[i:end]
		if neg {
			digits = digits[1:]
		}
		if u, ok := jsonParseDigits(digits); ok {
			limit := uint64(1) << (bits - 1) // |min|; max is limit-1
			if neg && u <= limit {
				return -int64(u), true // -int64(limit) wraps to min
			}
			if !neg && u < limit {
				return int64(u), true
			}
		}
	}
	r.numberTypeErr(i, end, target)
	return 0, false
}

// Uint is Int for unsigned integers; a negative number is a type error
// (even -0, which strconv.ParseUint refuses).
func (r *JSONReader) Uint(target string, bits int) (v uint64, ok bool) {
	c, ok := r.begin()
	if !ok {
		return 0, false
	}
	if c != '-' && (c < '0' || c > '9') {
		r.other(c, target)
		return 0, false
	}
	i := r.pos
	if u, frac, neg, end, ok := r.scanDecimal(i); ok && frac == 0 && !neg {
		if bits <= 0 || bits >= 64 || u>>bits == 0 {
			r.pos = end
			return u, true
		}
	}
	end, isInt := r.scanNumber(i)
	if end < 0 {
		return 0, false
	}
	r.pos = end
	if isInt && c != '-' {
		if u, ok := jsonParseDigits(r.data[i:end]); ok {
			if bits <= 0 || bits >= 64 || u>>bits == 0 {
				return u, true
			}
		}
	}
	r.numberTypeErr(i, end, target)
	return 0, false
}

// jsonParseDigits parses a run of decimal digits, reporting false if the
// value does not fit in a uint64.
func jsonParseDigits(b []byte) (uint64, bool) {
	if len(b) <= 19 { // 19 digits always fit
		var u uint64
		for _, c := range b {
			u = u*10 + uint64(c-'0')
		}
		return u, true
	}
	var u uint64
	for _, c := range b {
		if u > (1<<64-1)/10 {
			return 0, false
		}
		u *= 10
		d := uint64(c - '0')
		if u+d < u {
			return 0, false
		}
		u += d
	}
	return u, true
}

// Float reads a JSON number into a float of the given bit size (32 or 64);
// a number out of range for it (such as 1e400) is a type error. For bits 32
// the result is already rounded to float32 precision. null gives ok=false.
func (r *JSONReader) Float(target string, bits int) (v float64, ok bool) {
	c, ok := r.begin()
	if !ok {
		return 0, false
	}
	if c != '-' && (c < '0' || c > '9') {
		r.other(c, target)
		return 0, false
	}
	i := r.pos
	if mant, frac, neg, end, ok := r.scanDecimal(i); ok {
		if f, ok := jsonClinger(mant, -frac, neg, bits); ok {
			r.pos = end
			return f, true
		}
	}
	end, isInt := r.scanNumber(i)
	if end < 0 {
		return 0, false
	}
	r.pos = end
	num := r.data[i:end]
	if f, ok := jsonParseFloatFast(num, isInt, bits); ok {
		return f, true
	}
	if bits != 32 {
		bits = 64
	}
	// The conversion does not allocate for numbers of up to 32 bytes:
	// ParseFloat does not keep its argument, so the compiler uses a stack
	// buffer.
	f, err := strconv.ParseFloat(string(num), bits)
	if err != nil {
		r.numberTypeErr(i, end, target)
		return 0, false
	}
	return f, true
}

// Powers of ten that float64 and float32 represent exactly.
var (
	jsonPow10f64 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}
	jsonPow10f32 = [...]float32{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10}
)

// jsonParseFloatFast converts the checked JSON number num when it can do
// so exactly without strconv: when the decimal mantissa and the power of
// ten are both exact in the float type, one multiplication or division
// rounds once, correctly (Clinger's fast path, which strconv also takes
// for such numbers). ok is false for numbers it leaves to
// strconv.ParseFloat.
func jsonParseFloatFast(num []byte, isInt bool, bitSize int) (f float64, ok bool) {
	k := 0
	neg := num[0] == '-'
	if neg {
		k = 1
	}
	var mant uint64
	digits := 0
	for ; k < len(num) && '0' <= num[k] && num[k] <= '9'; k++ {
		mant = mant*10 + uint64(num[k]-'0')
		digits++
	}
	exp := 0
	if !isInt {
		if k < len(num) && num[k] == '.' {
			k++
			for ; k < len(num) && '0' <= num[k] && num[k] <= '9'; k++ {
				mant = mant*10 + uint64(num[k]-'0')
				digits++
				exp--
			}
		}
		if k < len(num) { // 'e' or 'E'
			k++
			eneg := false
			if num[k] == '+' || num[k] == '-' {
				eneg = num[k] == '-'
				k++
			}
			if len(num)-k > 3 {
				return 0, false
			}
			e := 0
			for ; k < len(num); k++ {
				e = e*10 + int(num[k]-'0')
			}
			if eneg {
				e = -e
			}
			exp += e
		}
	}
	if digits > 19 { // mant may have overflowed
		return 0, false
	}
	return jsonClinger(mant, exp, neg, bitSize)
}

// jsonClinger returns ±mant*10^exp when the float type represents mant and
// 10^|exp| exactly, so that one multiplication or division rounds
// correctly; ok is false otherwise.
func jsonClinger(mant uint64, exp int, neg bool, bitSize int) (f float64, ok bool) {
	if mant == 0 {
		if neg {
			return math.Copysign(0, -1), true
		}
		return 0, true
	}
	if bitSize == 32 {
		if mant > 1<<24 || exp < -10 || exp > 10 {
			return 0, false
		}
		f32 := float32(mant)
		if exp < 0 {
			f32 /= jsonPow10f32[-exp]
		} else {
			f32 *= jsonPow10f32[exp]
		}
		if neg {
			f32 = -f32
		}
		return float64(f32), true
	}
	if mant > 1<<53 || exp < -22 || exp > 22 {
		return 0, false
	}
	f = float64(mant)
	if exp < 0 {
		f /= jsonPow10f64[-exp]
	} else {
		f *= jsonPow10f64[exp]
	}
	if neg {
		f = -f
	}
	return f, true
}

// jsonSign returns -1 if neg, else 1.
func jsonSign(neg bool) int64 {
	if neg {
		return -1
	}
	return 1
}

// scanDecimal is the fast path for the most common numbers: an optional
// '-', an integer part and an optional fraction, at most 19 digits in
// all, no exponent. It returns the digits as one integer and the number of
// fraction digits. ok is false for anything else (including a syntax
// error), which the caller then hands to the general path. Like
// scanNumber, it does not check the byte after the number.
func (r *JSONReader) scanDecimal(i int) (mant uint64, frac int, neg bool, end int, ok bool) {
	data := r.data
	j := i
	if data[j] == '-' {
		neg = true
		j++
	}
	start := j
	if j < len(data) && data[j] == '0' {
		j++
	} else {
		for j < len(data) {
			c := data[j] - '0'
			if c > 9 {
				break
			}
			mant = mant*10 + uint64(c)
			j++
		}
		if j == start {
			return 0, 0, false, 0, false
		}
	}
	digits := j - start
	if j < len(data) && data[j] == '.' {
		j++
		k := j
		for j < len(data) {
			c := data[j] - '0'
			if c > 9 {
				break
			}
			mant = mant*10 + uint64(c)
			j++
		}
		frac = j - k
		if frac == 0 {
			return 0, 0, false, 0, false
		}
		digits += frac
	}
	if digits > 19 || j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		return 0, 0, false, 0, false
	}
	return mant, frac, neg, j, true
}

// Bytes reads a base64 (standard encoding, padded) string as encoding/json
// does for []byte. The caller handles null first (it sets the slice to nil;
// if Bytes meets null it reports ok=false with no error). Bad base64 is
// recorded as a type-level error wrapping base64's error (reading goes
// on), as encoding/json does. Like encoding/json, Bytes also accepts an
// array of numbers, each a uint8 (an element that does not fit is a type
// error for "uint8" and reads as 0). The result is a new slice the caller
// may keep; it is empty but not nil for "" and [].
func (r *JSONReader) Bytes(target string) (v []byte, ok bool) {
	return r.BytesOf(target, "uint8")
}

// BytesOf is Bytes for a slice of a named byte type (elem names it, as in
// "pkg.Level"), which encoding/json also reads from base64 or an array of
// numbers; an array element that does not fit is a type error for elem.
func (r *JSONReader) BytesOf(target, elem string) (v []byte, ok bool) {
	c, ok := r.begin()
	if !ok {
		return nil, false
	}
	switch c {
	case '"':
		i := r.pos
		end, flags := r.scanString(i)
		if flags&jsonStrBad != 0 {
			return nil, false
		}
		r.pos = end
		s := r.unquote(i, end, flags)
		v = make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(v, s)
		if err != nil {
			r.saveTypeErr(&JSONError{Offset: int64(end), Value: "string", Target: target, Err: err})
			return nil, false
		}
		return v[:n], true
	case '[':
		if !r.open() {
			return nil, false
		}
		elemTarget := target
		if k := strings.LastIndex(target, " of type "); k >= 0 {
			elemTarget = target[:k] + " of type " + elem
		}
		v = []byte{}
		for r.NextElement() {
			if r.Null() {
				v = append(v, 0)
				continue
			}
			u, _ := r.Uint(elemTarget, 8)
			v = append(v, byte(u))
		}
		if r.stop != nil {
			return nil, false
		}
		return v, true
	}
	r.other(c, target)
	return nil, false
}

// Time reads a string in RFC 3339 format exactly as time.Time.UnmarshalJSON
// accepts it (it is that method that parses; like it, escapes in the
// string are not decoded). null gives ok=false with no error. A non-string
// value, or a string that does not parse, is an error that stops reading
// (encoding/json aborts on an error from an Unmarshaler); it wraps time's
// error.
func (r *JSONReader) Time(target string) (t time.Time, ok bool) {
	c, ok := r.begin()
	if !ok {
		return time.Time{}, false
	}
	start := r.pos
	if c == 'n' {
		if r.literal(start, "null") {
			r.pos += 4
		}
		return time.Time{}, false
	}
	if !r.skipValue() {
		return time.Time{}, false
	}
	if err := t.UnmarshalJSON(r.data[start:r.pos]); err != nil {
		r.setStop(&JSONError{Offset: int64(start), Value: jsonDescribe(c), Target: target, Err: err})
		return time.Time{}, false
	}
	return t, true
}

// KeepKey returns key, just returned by NextKey, in memory that reading
// further does not change: key itself when it is a view of the input, else
// a copy (an escaped key is unescaped into a buffer that the next string
// reuses).
func (r *JSONReader) KeepKey(key []byte) []byte {
	if len(key) > 0 && cap(r.scratch) > 0 && &key[0] == &r.scratch[:1][0] {
		return append([]byte(nil), key...)
	}
	return key
}

// keyError is the type error for a map key that does not parse, at the
// offset encoding/json gives it: just after the key's opening quote.
func (r *JSONReader) keyError(key []byte, target string) *JSONError {
	return &JSONError{Offset: int64(r.start) + 1, Value: "number " + string(key), Target: target}
}

// KeyError records e, from ParseJSONIntKey or ParseJSONUintKey, if it is
// the first type error.
func (r *JSONReader) KeyError(e *JSONError) { r.saveTypeErr(e) }

// Fail records err as a sticky error at the current offset, for generated
// code calling an UnmarshalJSON or UnmarshalText method that failed. As
// with encoding/json, a syntax error later in the document takes its place,
// and a *json.UnmarshalTypeError (from a method that decodes with
// encoding/json) is placed in the fields that enclose the value.
func (r *JSONReader) Fail(err error) {
	if te, ok := err.(*json.UnmarshalTypeError); ok && te.Type != nil {
		r.setStop(&JSONError{Offset: int64(r.pos), Value: te.Value, Target: "Go value of type " + te.Type.String(), Struct: te.Struct, Field: te.Field})
		return
	}
	r.setStop(&JSONError{Offset: int64(r.pos), Err: err})
}

// JSONError is the error a JSONReader reports: a syntax error or a type
// error, with the byte offset where it was found. The JSON writers use it
// too, with Offset -1 when there is no input to point into.
type JSONError struct {
	Offset int64  // byte offset into the input; negative if not applicable
	Syntax bool   // a syntax error; false for a type error
	Value  string // for type errors: the JSON value, as "string" or "number -5"
	Target string // for type errors: the Go destination, as "Go value of type int64"
	Msg    string // for syntax errors: what was wrong, as encoding/json words it
	Err    error  // an underlying error, if any (from Fail, base64, time)
	// For a type error inside a struct, as in encoding/json: the innermost
	// struct's name and the path to the value from the outermost struct
	// read ("Event" and "Arrival_Time", "Point" and "Where.X").
	Struct, Field string
}

// Error describes the error and gives its offset, as in "json: invalid
// character 'x' looking for beginning of value (offset 12)" or "json:
// cannot unmarshal string into Go struct field Event.Index of type int64
// (offset 30)". An underlying error follows a colon.
func (e *JSONError) Error() string {
	var s string
	switch {
	case e.Field != "" || e.Struct != "":
		s = "json: cannot unmarshal " + e.Value + " into Go struct field " + e.Struct + "." + e.Field + " of type " + strings.TrimPrefix(e.Target, "Go value of type ")
	case e.Value != "" || e.Target != "":
		s = "json: cannot unmarshal " + e.Value + " into " + e.Target
	case e.Msg != "":
		s = "json: " + e.Msg
	case e.Err != nil:
		s = e.Err.Error()
		if !strings.HasPrefix(s, "json: ") {
			s = "json: " + s
		}
	default:
		s = "json: error"
	}
	if e.Err != nil && (e.Value != "" || e.Target != "" || e.Msg != "") {
		s += ": " + e.Err.Error()
	}
	if e.Offset >= 0 {
		s += " (offset " + strconv.FormatInt(e.Offset, 10) + ")"
	}
	return s
}

// Unwrap returns the underlying error, if any.
func (e *JSONError) Unwrap() error { return e.Err }

// FoldJSONName appends to dst the case-folded form of name that
// encoding/json uses to match object keys to struct fields when no field
// matches exactly (ASCII letters upper-cased, other runes folded with the
// same rule as encoding/json's foldName: the smallest rune of the rune's
// case-folding orbit, so that U+212A KELVIN SIGN folds to 'K' and U+017F
// LATIN SMALL LETTER LONG S to 'S'; invalid UTF-8 becomes U+FFFD). The
// generator folds field names with it at generation time and generated
// code folds keys with it at run time, so both sides agree. It does not
// allocate when dst has room.
func FoldJSONName(dst, name []byte) []byte {
	for i := 0; i < len(name); {
		if c := name[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			dst = append(dst, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(name[i:])
		dst = utf8.AppendRune(dst, jsonFoldRune(r))
		i += n
	}
	return dst
}

// jsonFoldRune returns the smallest rune in r's case-folding orbit.
func jsonFoldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// ---- errors ----

// setStop records a sticky error. encoding/json reports a syntax error
// anywhere in the document in preference to any decoding error, so a
// non-syntax error is only kept if the whole input is well-formed.
func (r *JSONReader) setStop(e *JSONError) {
	if r.stop != nil {
		return
	}
	if !e.Syntax {
		var v JSONReader
		v.Reset(r.data)
		v.Skip()
		v.Finish()
		if v.stop != nil {
			e = v.stop
		}
	}
	r.stop = e
	if e.Target != "" {
		r.placeInFields(e)
	}
}

// saveTypeErr records e if it is the first type error.
func (r *JSONReader) saveTypeErr(e *JSONError) {
	if r.typeErr == nil {
		r.typeErr = e
		if e.Target != "" && r.stop == nil {
			r.placeInFields(e)
		}
	}
}

// placeInFields has InField name the fields that enclose the value being
// read, which e is about.
func (r *JSONReader) placeInFields(e *JSONError) {
	r.ctxErr, r.ctxDepth, r.ctxInner = e, r.depth+1, true
	if e == r.stop {
		r.ctxDepth = math.MaxInt
	}
}

// syntaxErr records encoding/json's error for the byte at i, or, at the
// end of the input, its "unexpected end of JSON input". It is for the
// places where encoding/json's scanner skips the space it feeds itself at
// the end of the input (between tokens and inside strings).
func (r *JSONReader) syntaxErr(i int, context string) {
	if i >= len(r.data) {
		r.eofErr()
		return
	}
	r.stop = &JSONError{Offset: int64(i) + 1, Syntax: true, Msg: "invalid character " + jsonQuoteChar(r.data[i]) + " " + context}
}

// literalErr is syntaxErr for the places inside a token where
// encoding/json's scanner, fed its end-of-input space, reports that space
// as an invalid character.
func (r *JSONReader) literalErr(i int, context string) {
	if i >= len(r.data) {
		r.stop = &JSONError{Offset: int64(len(r.data)), Syntax: true, Msg: "invalid character ' ' " + context}
		return
	}
	r.syntaxErr(i, context)
}

func (r *JSONReader) eofErr() {
	r.stop = &JSONError{Offset: int64(len(r.data)), Syntax: true, Msg: "unexpected end of JSON input"}
}

// jsonQuoteChar formats c as encoding/json's scanner does in messages.
func jsonQuoteChar(c byte) string {
	if c == '\'' {
		return `'\''`
	}
	if c == '"' {
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

// jsonDescribe gives encoding/json's description of a JSON value by its first
// byte, for type errors that do not quote the number.
func jsonDescribe(c byte) string {
	switch c {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	}
	return "number"
}

// numberTypeErr records a type error for the number data[i:end], quoted
// in the message as encoding/json does for numeric targets.
func (r *JSONReader) numberTypeErr(i, end int, target string) {
	if r.typeErr == nil {
		r.saveTypeErr(&JSONError{Offset: int64(end), Value: "number " + string(r.data[i:end]), Target: target})
	}
}

// other handles a value of the wrong kind for target, whose first byte c
// is at r.pos: null is consumed with no error; anything else is skipped
// and recorded as a type error. Like encoding/json, the offset is just
// after the '{' or '[' of an object or array, and just after the end of a
// literal.
func (r *JSONReader) other(c byte, target string) {
	start := r.pos
	if c == 'n' {
		if r.literal(start, "null") {
			r.pos += 4
		}
		return
	}
	if !r.skipValue() {
		return
	}
	off := r.pos
	if c == '{' || c == '[' {
		off = start + 1
	}
	r.saveTypeErr(&JSONError{Offset: int64(off), Value: jsonDescribe(c), Target: target})
}

// ---- scanning ----

// skipSpace returns the index of the first non-space byte at or after i.
func (r *JSONReader) skipSpace(i int) int {
	data := r.data
	for i < len(data) {
		c := data[i]
		if c > ' ' || (c != ' ' && c != '\n' && c != '\r' && c != '\t') {
			break
		}
		i++
	}
	return i
}

// begin skips white space to the next value, which must begin with a byte
// that can begin a value. It leaves r.pos and r.start at that byte and
// returns it; on error (or when reading has stopped) ok is false.
func (r *JSONReader) begin() (c byte, ok bool) {
	if r.stop != nil {
		return 0, false
	}
	i := r.skipSpace(r.pos)
	r.pos = i
	r.start = i
	if i >= len(r.data) {
		r.eofErr()
		return 0, false
	}
	c = r.data[i]
	if !jsonValueStart[c] {
		r.syntaxErr(i, "looking for beginning of value")
		return 0, false
	}
	return c, true
}

// jsonValueStart[c] reports whether c can begin a JSON value.
var jsonValueStart = [256]bool{
	'{': true, '[': true, '"': true, '-': true, 't': true, 'f': true, 'n': true,
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
}

// open consumes the '{' or '[' at r.pos.
func (r *JSONReader) open() bool {
	if r.depth >= jsonMaxDepth {
		r.syntaxErr(r.pos, "exceeded max depth")
		return false
	}
	r.depth++
	r.pos++
	r.first = true
	return true
}

// literal checks that the literal word (true, false or null) is at
// data[i:]; data[i] is known to be its first byte.
func (r *JSONReader) literal(i int, word string) bool {
	data := r.data
	if i+len(word) <= len(data) && string(data[i:i+len(word)]) == word {
		return true
	}
	for k := 1; k < len(word); k++ {
		if i+k >= len(data) || data[i+k] != word[k] {
			r.literalErr(i+k, "in literal "+word+" (expecting "+jsonQuoteChar(word[k])+")")
			return false
		}
	}
	return true
}

// scanNumber checks the number starting at data[i] (a '-' or a digit) and
// returns the index just after it, and whether it is an integer (no
// fraction, no exponent). end is -1 after a syntax error. The byte after
// the number is not checked: the caller's next step does, with the message
// encoding/json gives for it in that place.
func (r *JSONReader) scanNumber(i int) (end int, isInt bool) {
	data := r.data
	j := i
	if data[j] == '-' {
		j++
	}
	switch {
	case j < len(data) && data[j] == '0':
		j++
	case j < len(data) && '1' <= data[j] && data[j] <= '9':
		j++
		for j < len(data) && '0' <= data[j] && data[j] <= '9' {
			j++
		}
	default:
		r.literalErr(j, "in numeric literal")
		return -1, false
	}
	isInt = true
	if j < len(data) && data[j] == '.' {
		isInt = false
		j++
		if j >= len(data) || data[j] < '0' || data[j] > '9' {
			r.literalErr(j, "after decimal point in numeric literal")
			return -1, false
		}
		for j < len(data) && '0' <= data[j] && data[j] <= '9' {
			j++
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		isInt = false
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		if j >= len(data) || data[j] < '0' || data[j] > '9' {
			r.literalErr(j, "in exponent of numeric literal")
			return -1, false
		}
		for j < len(data) && '0' <= data[j] && data[j] <= '9' {
			j++
		}
	}
	return j, isInt
}

// String scan result flags.
const (
	jsonStrEscaped = 1 << iota // contains a backslash escape
	jsonStrHigh                // contains bytes from 0x80 up (maybe invalid UTF-8)
	jsonStrBad                 // syntax error (recorded)
)

// scanString checks the string whose opening quote is data[i] and returns
// the index just after its closing quote.
func (r *JSONReader) scanString(i int) (end int, flags int) {
	data := r.data
	j := i + 1
	var high uint64 // OR of the string's bytes, for the top bit
	for {
	scan:
		for {
			if j+8 <= len(data) {
				// In m, the top bit of the first byte that is a quote, a
				// backslash or a control character is set (later bytes
				// may be flagged falsely; the first one is exact). Bytes
				// from 0x80 up pass: UTF-8 is checked only if needed, by
				// unquote.
				x := jsonLoad64(data, j)
				m := ((x-jsonLSB*0x20)&^x | jsonHasByte(x, '"') | jsonHasByte(x, '\\')) & jsonMSB
				if m != 0 {
					k := bits.TrailingZeros64(m) >> 3
					high |= x & (1<<(8*k) - 1)
					j += k
					break scan
				}
				high |= x
				j += 8
				continue
			}
			// Fewer than 8 bytes of input left.
			for j < len(data) {
				c := data[j]
				if c == '"' || c == '\\' || c < 0x20 {
					break scan
				}
				high |= uint64(c)
				j++
			}
			r.eofErr()
			return j, jsonStrBad
		}
		switch c := data[j]; {
		case c == '"':
			if high&jsonMSB != 0 {
				flags |= jsonStrHigh
			}
			return j + 1, flags
		case c == '\\':
			flags |= jsonStrEscaped
			j++
			if j >= len(data) {
				r.literalErr(j, "in string escape code")
				return j, jsonStrBad
			}
			switch data[j] {
			case 'b', 'f', 'n', 'r', 't', '\\', '/', '"':
				j++
			case 'u':
				j++
				for k := 0; k < 4; k++ {
					if j >= len(data) || !jsonIsHex(data[j]) {
						r.literalErr(j, `in \u hexadecimal character escape`)
						return j, jsonStrBad
					}
					j++
				}
			default:
				r.syntaxErr(j, "in string escape code")
				return j, jsonStrBad
			}
		default: // c < 0x20
			r.syntaxErr(j, "in string literal")
			return j, jsonStrBad
		}
	}
}

func jsonIsHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unquote returns the contents of the checked string data[i:end] with
// escapes decoded and invalid UTF-8 replaced, as encoding/json's
// unquoteBytes does: a subslice of the input when nothing changes, else
// r.scratch.
func (r *JSONReader) unquote(i, end, flags int) []byte {
	s := r.data[i+1 : end-1]
	if flags&jsonStrEscaped == 0 && (flags&jsonStrHigh == 0 || utf8.Valid(s)) {
		return s
	}
	if cap(r.scratch) < len(s) {
		// One allocation that is usually enough: unescaping only
		// shrinks, except for invalid UTF-8 (1 byte becomes 3).
		r.scratch = make([]byte, 0, max(len(s)+len(s)/4, 64))
	}
	r.scratch = jsonUnescape(r.scratch[:0], s, flags&jsonStrHigh != 0)
	return r.scratch
}

// unquoteString is unquote for String, which must allocate only its
// result: it unescapes into a strings.Builder sized beforehand, whose
// String method hands over the builder's buffer without a copy.
func (r *JSONReader) unquoteString(i, end, flags int) string {
	s := r.data[i+1 : end-1]
	high := flags&jsonStrHigh != 0
	if flags&jsonStrEscaped == 0 && (!high || utf8.Valid(s)) {
		return string(s)
	}
	// Unescaping only shrinks, except that each byte of invalid UTF-8
	// becomes 3.
	n := len(s)
	if high && !utf8.Valid(s) {
		for k := 0; k < len(s); {
			rr, size := utf8.DecodeRune(s[k:])
			if rr == utf8.RuneError && size == 1 {
				n += 2
			}
			k += size
		}
	}
	var sb strings.Builder
	sb.Grow(n)
	for len(s) > 0 {
		k := bytes.IndexByte(s, '\\')
		if k < 0 {
			k = len(s)
		}
		if seg := s[:k]; high && !utf8.Valid(seg) {
			for _, rr := range string(seg) { // a range over a conversion does not allocate
				sb.WriteRune(rr) // invalid bytes come out as U+FFFD
			}
		} else {
			sb.Write(seg)
		}
		s = s[k:]
		if len(s) == 0 {
			break
		}
		var rr rune
		rr, s = jsonUnescapeOne(s)
		if rr < utf8.RuneSelf {
			sb.WriteByte(byte(rr))
		} else {
			sb.WriteRune(rr)
		}
	}
	return sb.String()
}

// jsonUnescapeOne decodes the escape at the start of s (checked by
// scanString) and returns the rune and the rest of s: a valid surrogate
// pair is consumed whole, and any other surrogate gives U+FFFD, leaving a
// second escape to be decoded on its own.
func jsonUnescapeOne(s []byte) (rune, []byte) {
	if c := s[1]; c != 'u' {
		return rune(jsonUnescapeByte[c]), s[2:]
	}
	rr := jsonHex4(s[2:])
	s = s[6:]
	if utf16.IsSurrogate(rr) {
		if len(s) >= 6 && s[0] == '\\' && s[1] == 'u' {
			if dec := utf16.DecodeRune(rr, jsonHex4(s[2:])); dec != unicode.ReplacementChar {
				return dec, s[6:]
			}
		}
		return unicode.ReplacementChar, s
	}
	return rr, s
}

// jsonUnescapeByte maps the byte after a backslash to the byte it stands
// for (all but 'u', which scanString has checked is followed by 4 hex
// digits).
var jsonUnescapeByte = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// jsonUnescape appends the checked string body s to b with escapes
// decoded and, if high (s has bytes from 0x80 up), invalid UTF-8 replaced
// by U+FFFD, with the results of encoding/json's unquoteBytes.
func jsonUnescape(b, s []byte, high bool) []byte {
	for len(s) > 0 {
		n := bytes.IndexByte(s, '\\')
		if n < 0 {
			n = len(s)
		}
		// A backslash cannot be part of a UTF-8 sequence, so the runs
		// between escapes can be checked on their own.
		if seg := s[:n]; high && !utf8.Valid(seg) {
			b = jsonAppendValidUTF8(b, seg)
		} else {
			b = append(b, seg...)
		}
		s = s[n:]
		if len(s) == 0 {
			break
		}
		var rr rune
		rr, s = jsonUnescapeOne(s)
		if rr < utf8.RuneSelf {
			b = append(b, byte(rr))
		} else {
			b = utf8.AppendRune(b, rr)
		}
	}
	return b
}

// jsonAppendValidUTF8 appends s to b with each byte that does not start a
// valid UTF-8 sequence replaced by U+FFFD.
func jsonAppendValidUTF8(b, s []byte) []byte {
	for k := 0; k < len(s); {
		if s[k] < utf8.RuneSelf {
			b = append(b, s[k])
			k++
			continue
		}
		rr, size := utf8.DecodeRune(s[k:])
		if rr == utf8.RuneError && size == 1 {
			b = append(b, "\uFFFD"...)
		} else {
			b = append(b, s[k:k+size]...)
		}
		k += size
	}
	return b
}

// jsonHex4 decodes 4 hex digits already checked by scanString.
func jsonHex4(s []byte) rune {
	var v rune
	for _, c := range s[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		v = v<<4 | rune(c)
	}
	return v
}

// Container kinds on the Skip stack.
const (
	jsonKindArray  = 0
	jsonKindObject = 1
)

// skipValue checks and consumes the value at r.pos, whose first byte has
// been checked by begin. It keeps a stack of open containers (a bit each)
// to check that brackets match and to word errors as encoding/json does.
func (r *JSONReader) skipValue() bool {
	data := r.data
	i := r.pos
	var kinds uint64 // kinds of the first 64 levels; deeper ones in r.stack
	r.stack = r.stack[:0]
	depth := 0 // containers open within this value

	push := func(kind uint64) bool {
		if r.depth+depth >= jsonMaxDepth {
			r.syntaxErr(i, "exceeded max depth")
			return false
		}
		if depth < 64 {
			kinds = kinds&^(1<<depth) | kind<<depth
		} else {
			w := (depth - 64) / 64
			for len(r.stack) <= w {
				r.stack = append(r.stack, 0)
			}
			b := uint((depth - 64) % 64)
			r.stack[w] = r.stack[w]&^(1<<b) | kind<<b
		}
		depth++
		i++
		return true
	}
	top := func() uint64 {
		d := depth - 1
		if d < 64 {
			return kinds >> d & 1
		}
		return r.stack[(d-64)/64] >> uint((d-64)%64) & 1
	}

	// Each iteration starts at a value (whose first byte may still be
	// unchecked) and ends after the value and everything that closes
	// after it.
	for {
		if i >= len(data) {
			r.eofErr()
			return false
		}
		switch c := data[i]; c {
		case '{':
			if !push(jsonKindObject) {
				return false
			}
			i = r.skipSpace(i)
			if i < len(data) && data[i] == '}' {
				i++
				depth--
				break
			}
			if i = r.skipKey(i); i < 0 {
				return false
			}
			i = r.skipSpace(i)
			continue
		case '[':
			if !push(jsonKindArray) {
				return false
			}
			i = r.skipSpace(i)
			if i < len(data) && data[i] == ']' {
				i++
				depth--
				break
			}
			continue
		case '"':
			end, flags := r.scanString(i)
			if flags&jsonStrBad != 0 {
				return false
			}
			i = end
		case 't':
			if !r.literal(i, "true") {
				return false
			}
			i += 4
		case 'f':
			if !r.literal(i, "false") {
				return false
			}
			i += 5
		case 'n':
			if !r.literal(i, "null") {
				return false
			}
			i += 4
		default:
			if c != '-' && (c < '0' || c > '9') {
				r.syntaxErr(i, "looking for beginning of value")
				return false
			}
			if i, _ = r.scanNumber(i); i < 0 {
				return false
			}
		}
		// After a value: close containers until one continues with ','.
		for {
			if depth == 0 {
				r.pos = i
				return true
			}
			i = r.skipSpace(i)
			if i >= len(data) {
				r.eofErr()
				return false
			}
			c := data[i]
			if top() == jsonKindObject {
				if c == ',' {
					if i = r.skipKey(r.skipSpace(i + 1)); i < 0 {
						return false
					}
					i = r.skipSpace(i)
					break
				}
				if c != '}' {
					r.syntaxErr(i, "after object key:value pair")
					return false
				}
			} else {
				if c == ',' {
					i = r.skipSpace(i + 1)
					break
				}
				if c != ']' {
					r.syntaxErr(i, "after array element")
					return false
				}
			}
			i++
			depth--
		}
	}
}

// skipKey checks the object key at data[i] and the ':' after it, and
// returns the index after the ':', or -1 after a syntax error.
func (r *JSONReader) skipKey(i int) int {
	data := r.data
	if i >= len(data) {
		r.eofErr()
		return -1
	}
	if data[i] != '"' {
		r.syntaxErr(i, "looking for beginning of object key string")
		return -1
	}
	end, flags := r.scanString(i)
	if flags&jsonStrBad != 0 {
		return -1
	}
	i = r.skipSpace(end)
	if i >= len(data) {
		r.eofErr()
		return -1
	}
	if data[i] != ':' {
		r.syntaxErr(i, "after object key")
		return -1
	}
	return i + 1
}
