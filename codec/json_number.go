package codec

import "strconv"

// encoding/json.Number is a string holding a number literal, which
// encoding/json writes and reads as a number.

// AppendJSONNumber appends the number literal s as encoding/json writes a
// json.Number: "" as 0, anything that is not a JSON number an error
// ("json: invalid number literal \"x\"").
func AppendJSONNumber(b []byte, s string) ([]byte, error) {
	if s == "" {
		s = "0"
	}
	if !jsonValidNumber([]byte(s)) {
		return b, &JSONError{Offset: -1, Msg: "invalid number literal " + strconv.Quote(s)}
	}
	return append(b, s...), nil
}

// Number reads a json.Number as encoding/json does: a number literal as
// it is written, or a string that holds one (any other string stops
// reading with encoding/json's error); null is ok=false with no error, and
// other values are type errors for target.
func (r *JSONReader) Number(target string) (string, bool) {
	c, ok := r.begin()
	if !ok {
		return "", false
	}
	switch {
	case c == '-' || '0' <= c && c <= '9':
		i := r.pos
		end, _ := r.scanNumber(i)
		if end < 0 {
			return "", false
		}
		r.pos = end
		return string(r.data[i:end]), true
	case c == '"':
		i := r.pos
		s, ok := r.StringBytes(target)
		if !ok {
			return "", false
		}
		if !jsonValidNumber(s) {
			r.setStop(&JSONError{Offset: int64(r.pos), Msg: "invalid number literal, trying to unmarshal " + strconv.Quote(string(r.data[i:r.pos])) + " into Number"})
			return "", false
		}
		return string(s), true
	}
	r.other(c, target)
	return "", false
}

// jsonValidNumber reports whether s is exactly one JSON number, by the
// reader's own scanner.
func jsonValidNumber(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	var q JSONReader
	q.Reset(s)
	end, _ := q.scanNumber(0)
	return end == len(s)
}
