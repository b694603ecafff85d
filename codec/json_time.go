package codec

import (
	"encoding/binary"
	mathbits "math/bits"
	"time"
)

// AppendJSONTime appends t exactly as time.Time.MarshalJSON writes it (a
// quoted RFC 3339 string with nanoseconds as needed), with its error for a
// year outside [0,9999] (or a zone offset of 24 hours or more). On error b
// is returned unchanged and the error wraps time's own, worded as
// encoding/json reports it: "json: error calling MarshalJSON for type
// time.Time: Time.MarshalJSON: year outside of range [0,9999]".
func AppendJSONTime(b []byte, t time.Time) ([]byte, error) {
	if out, ok := jsonAppendTime(b, t); ok {
		return out, nil
	}
	n0 := len(b)
	b = append(b, '"')
	// AppendFormat has a dedicated fast path for RFC3339Nano, the same
	// routine MarshalJSON uses.
	b = t.AppendFormat(b, time.RFC3339Nano)
	// MarshalJSON refuses what is not valid RFC 3339: a year that is not
	// exactly 4 digits, and a zone hour of 24 or more. Detect both here
	// the way time does, and let time word the error.
	bad := b[n0+1+len("9999")] != '-'
	if !bad && b[len(b)-1] != 'Z' {
		c := b[len(b)-len("Z07:00")]
		h := 10*(b[len(b)-len("07:00")]-'0') + (b[len(b)-len("7:00")] - '0')
		bad = '0' <= c && c <= '9' || h >= 24
	}
	if bad {
		_, err := t.MarshalJSON()
		if err == nil { // cannot happen; keep the contract anyway
			return append(b, '"'), nil
		}
		return b[:n0], &JSONError{Offset: -1, Msg: "error calling MarshalJSON for type time.Time", Err: err}
	}
	return append(b, '"'), nil
}

// Seconds from 0000-01-01 to the Unix epoch, and from the epoch to
// 10000-01-01: the instants (in local time) whose year RFC 3339 can write.
const (
	jsonYear0     = 62167219200
	jsonYear10000 = 253402300800
)

// jsonAppendTime writes what AppendJSONTime does for a time whose year
// (in its zone) is 0 to 9999 and whose zone is less than 24 hours from
// UTC, the times MarshalJSON accepts, straight from its Unix seconds,
// nanoseconds and offset; for any other time it reports false. The date
// is computed on days counted from -0400-03-01, so that every number is
// positive and each year's leap day is at its end.
func jsonAppendTime(b []byte, t time.Time) ([]byte, bool) {
	_, offset := t.Zone()
	sec := t.Unix() + int64(offset)
	if offset <= -86400 || offset >= 86400 || sec < -jsonYear0 || sec >= jsonYear10000 {
		return b, false
	}
	const era = 146097 // days in 400 years
	u := uint64(sec + jsonYear0)
	days, clock := u/86400+era-60, u%86400 // 0000-01-01 is 60 days before 0000-03-01
	// Neri and Schneider's civil_from_days: centuries, then the year in
	// its century and the day in its year, then the month and day, each
	// step one multiplication and shift (the divisions by constants).
	n1 := 4*uint32(days) + 3
	century, dayOfCentury := n1/era, n1%era/4
	p2 := 2939745 * uint64(4*dayOfCentury+3)
	dayOfYear := uint32(p2) / (4 * 2939745)
	year := uint64(100*century+uint32(p2>>32)) - 400
	n3 := 2141*dayOfYear + 197913
	month, day := uint64(n3>>16), uint64(n3&0xffff/2141+1)
	if dayOfYear >= 306 { // January and February: the next year's
		month -= 12
		year++
	}
	b = jsonRoom(b, len(`"2006-01-02T15:04:05.999999999-07:00"`)+8)
	out := b[:cap(b)]
	p := len(b)
	pair := func(at int, v uint64) { out[at], out[at+1] = jsonDigitPairs[2*v], jsonDigitPairs[2*v+1] }
	out[p] = '"'
	pair(p+1, year/100)
	pair(p+3, year%100)
	out[p+5] = '-'
	pair(p+6, month)
	out[p+8] = '-'
	pair(p+9, day)
	out[p+11] = 'T'
	pair(p+12, clock/3600)
	out[p+14] = ':'
	pair(p+15, clock/60%60)
	out[p+17] = ':'
	pair(p+18, clock%60)
	p += 20
	if ns := uint32(t.Nanosecond()); ns != 0 {
		// Nine digits without their trailing zeros: the first, then
		// eight in one word, of which the zeros at the end are the
		// word's high zero bytes.
		out[p], out[p+1] = '.', byte('0'+ns/1e8)
		n := 2
		if lo := ns % 1e8; lo != 0 {
			w := jsonDigits8(lo)
			binary.LittleEndian.PutUint64(out[p+2:], w+jsonASCIIZeros)
			n += 8 - mathbits.LeadingZeros64(w)>>3
		}
		p += n
	}
	if offset == 0 {
		out[p], out[p+1] = 'Z', '"'
		return out[:p+2], true
	}
	// As time writes it: whole minutes toward zero, the sign of those.
	zone := offset / 60
	out[p] = '+'
	if zone < 0 {
		out[p] = '-'
		zone = -zone
	}
	pair(p+1, uint64(zone/60))
	out[p+3] = ':'
	pair(p+4, uint64(zone%60))
	out[p+6] = '"'
	return out[:p+7], true
}
