package codec

import (
	"encoding/json"
	"errors"
	"math"
	"math/rand"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// jtStringCases are strings for AppendJSONString, with every control
// character, the HTML characters, U+2028/U+2029 and invalid UTF-8.
func jtStringCases() []string {
	cases := []string{
		"", "a", "hello, world", `"`, `\`, `"\"`, "<", ">", "&", "<script>&amp;</script>", "\u2028", "\u2029",
		"a\u2028b\u2029c", "\u2027\u202a", "é", "日本語", "😀", "\U0010FFFF", "\ufffd", "\xef\xbf\xbd", "\xff",
		"\xfe\xff", "a\xffb", "\xc0\x80", "\xed\xa0\x80", "\xed\xbf\xbf", "\xf4\x90\x80\x80", "\xe2\x82", "\xe2",
		"\xe2\x80", "\xe2\x80\xa8", "abc\xe2\x80\xa9", "\x7f", "\u0080", "\u00ff", "/", "'", "\u0000", "\x00a\x00",
		strings.Repeat("x", 100), strings.Repeat("ab<", 30), strings.Repeat("é", 50), "1234567\n", "12345678\n",
		"1234567\"", "123456789abcdef<", "abcdefgh\xff", "abcdefg\xe2\x80\xa8",
	}
	for c := 0; c < 0x80; c++ {
		cases = append(cases, string(rune(c)), "ab"+string(rune(c))+"cdefghijklmn")
	}
	for c := 0x80; c < 0x100; c++ {
		cases = append(cases, string([]byte{byte(c)}), "abcdefgh"+string([]byte{byte(c)})+"ijk")
	}
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 5000; i++ {
		b := make([]byte, rng.Intn(40))
		switch i % 3 {
		case 0:
			rng.Read(b)
		case 1:
			for j := range b {
				b[j] = byte(rng.Intn(128))
			}
		default:
			b = b[:0]
			for n := rng.Intn(20); n > 0; n-- {
				rs := []rune("aé日😀<>&\"\\\n\u2028\u2029\x01\x7f")
				b = utf8.AppendRune(b, rs[rng.Intn(len(rs))])
				if rng.Intn(10) == 0 {
					b = append(b, 0x80|byte(rng.Intn(64)))
				}
			}
		}
		cases = append(cases, string(b))
	}
	return cases
}

func TestAppendJSONString(t *testing.T) {
	for _, s := range jtStringCases() {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
		if got := AppendJSONStringBytes([]byte("prefix"), []byte(s)); string(got) != "prefix"+string(want) {
			t.Errorf("AppendJSONStringBytes(%q) = %s, want %s", s, got, want)
		}
	}
}

// TestAppendJSONShortString puts every byte value, and runes that take 2
// to 4 bytes (U+2028 among them), at every position of strings of 1 to 17
// bytes, where AppendJSONString checks and writes words read from
// overlapping parts of the string, and of lengths up to just past
// jsonWordsMax, where it checks and copies them 8 bytes at a time, and
// compares with encoding/json, when appending to a buffer with and
// without room.
func TestAppendJSONShortString(t *testing.T) {
	var inserts []string
	for c := range 256 {
		inserts = append(inserts, string([]byte{byte(c)}))
	}
	inserts = append(inserts, "é", " ", " ", "日", "😀", "â", "ð")
	lengths := []int{}
	for n := 1; n <= 26; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 31, 32, 33, 40, jsonWordsMax-1, jsonWordsMax, jsonWordsMax+1)
	for _, n := range lengths {
		for _, ins := range inserts {
			for at := 0; at+len(ins) <= n; at++ {
				s := strings.Repeat("a", at) + ins + strings.Repeat("z", n-at-len(ins))
				want, err := json.Marshal(s)
				if err != nil {
					t.Fatal(err)
				}
				for _, room := range []int{0, 1, 64} {
					prefix := make([]byte, 3, 3+room)
					copy(prefix, "ab,")
					if got := AppendJSONString(prefix, s); string(got) != "ab,"+string(want) {
						t.Fatalf("AppendJSONString(%q) with %d bytes of room = %s, want ab,%s", s, room, got, want)
					}
				}
			}
		}
	}
}

func TestAppendJSONBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	cases := [][]byte{nil, {}, {0}, {1, 2}, {1, 2, 3}, {0xff, 0xfe, 0xfd, 0xfc}}
	for i := 0; i < 200; i++ {
		b := make([]byte, rng.Intn(70))
		rng.Read(b)
		cases = append(cases, b)
	}
	for _, p := range cases {
		want, _ := json.Marshal(p)
		if got := AppendJSONBytes([]byte("x"), p); string(got) != "x"+string(want) {
			t.Errorf("AppendJSONBytes(%v) = %s, want x%s", p, got, want)
		}
	}
}

func TestAppendJSONIntsAndBool(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 9, -9, 10, -10, 127, -128, math.MaxInt64, math.MinInt64, 1234567890} {
		want, _ := json.Marshal(v)
		if got := AppendJSONInt(nil, v); string(got) != string(want) {
			t.Errorf("AppendJSONInt(%d) = %s", v, got)
		}
	}
	rng := rand.New(rand.NewSource(9))
	for i := 0; i < 100000; i++ {
		v := int64(rng.Uint64()) >> rng.Intn(64)
		if got, want := AppendJSONInt([]byte("x"), v), "x"+strconv.FormatInt(v, 10); string(got) != want {
			t.Fatalf("AppendJSONInt(%d) = %s", v, got)
		}
		u := rng.Uint64() >> rng.Intn(64)
		if got, want := AppendJSONUint([]byte("x"), u), "x"+strconv.FormatUint(u, 10); string(got) != want {
			t.Fatalf("AppendJSONUint(%d) = %s", u, got)
		}
	}
	for p := uint64(1); p < 1e19; p *= 10 {
		for _, u := range []uint64{p - 1, p, p + 1} {
			if got := AppendJSONUint(nil, u); string(got) != strconv.FormatUint(u, 10) {
				t.Errorf("AppendJSONUint(%d) = %s", u, got)
			}
		}
	}
	for _, v := range []uint64{0, 1, 9, 10, 99, 100, math.MaxUint64, 1 << 63, 1e19, 1e19 - 1} {
		want, _ := json.Marshal(v)
		if got := AppendJSONUint(nil, v); string(got) != string(want) {
			t.Errorf("AppendJSONUint(%d) = %s", v, got)
		}
	}
	if string(AppendJSONBool(nil, true)) != "true" || string(AppendJSONBool(nil, false)) != "false" {
		t.Error("AppendJSONBool")
	}
}

func TestAppendJSONFloat(t *testing.T) {
	specials := []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 1e-6, 9.999999e-7, 1e-7, 1e20, 1e21, 9.99999e20,
		1e21 - 65536, 123456789, 1.5e300, math.MaxFloat64, math.SmallestNonzeroFloat64, math.MaxFloat32,
		math.SmallestNonzeroFloat32, 1e-10, 5e-324, 1.0000001e-6, 0.000001, 100, 1e9, 1e-9, 2.5e-9,
		float64(float32(1e21)), float64(float32(1e-6)), float64(math.Nextafter32(1e21, 0)), float64(math.Nextafter32(1e-6, 1)),
		16777216, 16777217, 3.4028235e38, 1e38, 1e-38, 1e-45}
	check := func(f float64, bits int) {
		t.Helper()
		var want []byte
		var err error
		if bits == 32 {
			want, err = json.Marshal(float32(f))
			f = float64(float32(f))
		} else {
			want, err = json.Marshal(f)
		}
		got, gerr := AppendJSONFloat([]byte("x"), f, bits)
		if (err == nil) != (gerr == nil) {
			t.Fatalf("AppendJSONFloat(%v, %d) error %v, encoding/json %v", f, bits, gerr, err)
		}
		if err != nil {
			if gerr.Error() != err.Error() || string(got) != "x" {
				t.Errorf("AppendJSONFloat(%v, %d) error %q (out %q), want %q", f, bits, gerr, got, err)
			}
			var je *JSONError
			if !errors.As(gerr, &je) {
				t.Errorf("error %T is not a *JSONError", gerr)
			}
			return
		}
		if string(got) != "x"+string(want) {
			t.Errorf("AppendJSONFloat(%v, %d) = %s, want x%s", f, bits, got, want)
		}
	}
	for _, f := range append(specials, math.NaN(), math.Inf(1), math.Inf(-1)) {
		for _, sign := range []float64{1, -1} {
			check(sign*f, 64)
			check(sign*f, 32)
		}
	}
	rng := rand.New(rand.NewSource(5))
	for i := 0; i < 100000; i++ {
		check(math.Float64frombits(rng.Uint64()), 64)
		check(float64(math.Float32frombits(rng.Uint32())), 32)
	}
	for i := 0; i < 100000; i++ {
		// Integers, which take a fast path, around its limits too.
		n := rng.Int63n(1 << (1 + rng.Intn(62)))
		check(float64(n), 64)
		check(float64(n), 32)
		check(-float64(n), 64)
		check(float64(1<<53+rng.Intn(5)-2), 64)
		check(float64(1<<24+rng.Intn(5)-2), 32)
		check(float64(n)+0.5, 64)
	}
	for i := 0; i < 300000; i++ {
		// Short decimals, which take a fast path, and long ones at its
		// limits.
		digits := strconv.FormatUint(rng.Uint64()>>rng.Intn(64), 10)
		num := digits + "e" + strconv.Itoa(rng.Intn(40)-25)
		f64, _ := strconv.ParseFloat(num, 64)
		check(f64, 64)
		f32, _ := strconv.ParseFloat(num, 32)
		check(f32, 32)
	}
	for i := 0; i < 300000; i++ {
		// Binary fractions and integers, which take the exact fast path
		// while their digits stay under its limits, and just past them.
		m := rng.Uint64() >> (11 + rng.Intn(53))
		f := math.Ldexp(float64(m), rng.Intn(120)-80)
		check(f, 64)
		check(-f, 32)
		limit, k := uint64(1e15), rng.Intn(22)
		if i%2 == 1 {
			limit, k = 1e7, rng.Intn(11)
		}
		// Odd multipliers of 2^-k whose digits m·5^k are at the limit.
		pow5 := uint64(1)
		for j := 0; j < k; j++ {
			pow5 *= 5
		}
		m = (limit/pow5 + uint64(rng.Intn(5)) - 2) | 1
		f = math.Ldexp(float64(m), -k)
		check(f, 64)
		check(f, 32)
	}
	for i := 0; i < 200000; i++ {
		// Amounts with at most two decimals, which take a fast path
		// (jsonAppendCents), up to its limits, and their neighbours.
		cents := rng.Int63n(1 << (1 + rng.Intn(51)))
		f := float64(cents) / 100
		if i%3 == 0 {
			f = 1e13 - float64(rng.Intn(1000))/100
		}
		check(f, 64)
		check(-f, 64)
		check(math.Nextafter(f, 0), 64)
		check(math.Nextafter(f, math.Inf(1)), 64)
	}
	// Ties at a hundredth (f·100 exactly n + 0.5: 0.125 and the three
	// with .125 or .875), where rounding half to even and half away from
	// zero differ (below 2^49 the tolerance refuses them, above it the
	// division does), and decimals that print as such ties.
	for _, f := range []float64{0.005, 0.125, 2.675, 1234.565, 5e11 + 0.125, 8796093022208.125, 9999999999999.875} {
		check(f, 64)
		check(-f, 64)
	}
	for i := 0; i < 20000; i++ {
		// Around the format switch points.
		e := []float64{1e-6, 1e21}[i%2]
		f := e * (1 + (rng.Float64()-0.5)*1e-6)
		check(f, 64)
		check(f, 32)
	}
}

// TestAppendJSONExactFloat checks that binary fractions with few digits,
// as sensors report them, take the exact path (TestAppendJSONFloat checks
// its output against encoding/json) and that long ones do not.
func TestAppendJSONExactFloat(t *testing.T) {
	for _, c := range []struct {
		f    float64
		bits int
		want string
	}{
		{-0.00054931640625, 64, "-0.00054931640625"},
		{0.0016021728515625, 64, "0.0016021728515625"},
		{2.5, 64, "2.5"},
		{1 << 40, 64, "1099511627776"},
		{float64(float32(0.15625)), 32, "0.15625"},
	} {
		got, ok := jsonAppendExactFloat(nil, c.f, math.Abs(c.f), c.bits)
		if !ok || string(got) != c.want {
			t.Errorf("jsonAppendExactFloat(%v, %d) = %q, %v; want %q", c.f, c.bits, got, ok, c.want)
		}
	}
	for _, c := range []struct {
		f    float64
		bits int
	}{{0.1, 64}, {1 << 60, 64}, {math.Ldexp(1e15+1, -1), 64}, {float64(float32(0.1)), 32}, {16777217, 32}, {math.Ldexp(3, -30), 64}} {
		if got, ok := jsonAppendExactFloat(nil, c.f, math.Abs(c.f), c.bits); ok {
			t.Errorf("jsonAppendExactFloat(%v, %d) = %q, want no fast path", c.f, c.bits, got)
		}
	}
}

func TestAppendJSONTime(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		ny = time.FixedZone("EST", -5*3600)
	}
	base := time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)
	cases := []time.Time{
		{}, base, base.Add(123456789), base.Add(100 * time.Millisecond), base.Add(1), base.In(ny),
		base.In(time.FixedZone("", 5*3600+30*60)), base.In(time.FixedZone("", -(3*3600 + 15*60))),
		base.In(time.FixedZone("", 30)), base.In(time.FixedZone("", 23*3600+59*60)),
		base.In(time.FixedZone("", 24*3600)), base.In(time.FixedZone("", -24*3600)),
		base.In(time.FixedZone("", 100*3600)), time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -3600)),
		time.Date(0, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600)), time.Unix(0, 0), time.Unix(1<<40, 5).UTC(),
		time.Now(), time.Now().Round(0),
	}
	rng := rand.New(rand.NewSource(6))
	for i := 0; i < 2000; i++ {
		cases = append(cases, time.Unix(rng.Int63n(1<<38)-1<<37, rng.Int63n(1e9)).In(time.FixedZone("", rng.Intn(200000)-100000)))
	}
	for _, tm := range cases {
		want, werr := json.Marshal(tm)
		got, gerr := AppendJSONTime([]byte("x"), tm)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("AppendJSONTime(%v): error %v, encoding/json %v", tm, gerr, werr)
		}
		if werr != nil {
			var je *JSONError
			_, terr := tm.MarshalJSON()
			if string(got) != "x" || gerr.Error() != werr.Error() || !errors.As(gerr, &je) || errors.Unwrap(gerr).Error() != terr.Error() {
				t.Errorf("AppendJSONTime(%v) = %q, %v; want error %v", tm, got, gerr, werr)
			}
			continue
		}
		if string(got) != "x"+string(want) {
			t.Errorf("AppendJSONTime(%v) = %s, want x%s", tm, got, want)
		}
	}
}

// jtRawMarshaler returns its bytes from MarshalJSON, so that json.Marshal
// shows how encoding/json embeds a Marshaler's output.
type jtRawMarshaler []byte

func (m jtRawMarshaler) MarshalJSON() ([]byte, error) { return m, nil }

func TestAppendJSONCompact(t *testing.T) {
	docs := append([]string{}, jtSyntaxDocs...)
	docs = append(docs,
		` { "a" : [ 1 , 2 , { "b" : "<x> & \u2028" } ] } `, "\"\u2028\u2029<>&\"", "\"\xe2\x80\xa8\"",
		"\"a\xffb\"", `"\u003c"`, " \t\n 1 \t\n ", `[ "a b" , "c\td" ]`, "{\"a\":\"\\\"<\\\\\"}", `"\\<"`,
		"[\"\xe2\x80\"]", "\"\xe2\x80\xa9x\xe2\x80\"", strings.Repeat("[", 10001)+strings.Repeat("]", 10001))
	rng := rand.New(rand.NewSource(7))
	g := &jtGen{rng: rng}
	for i := 0; i < 3000; i++ {
		docs = append(docs, string(g.event()))
	}
	for _, doc := range docs {
		want, werr := json.Marshal(jtRawMarshaler(doc))
		got, gerr := AppendJSONCompact([]byte("x"), []byte(doc))
		if (werr == nil) != (gerr == nil) {
			t.Errorf("AppendJSONCompact(%q): error %v, encoding/json %v", doc, gerr, werr)
			continue
		}
		if werr != nil {
			var se *json.SyntaxError
			var je *JSONError
			if !errors.As(werr, &se) || !errors.As(gerr, &je) || !je.Syntax || je.Msg != se.Error() || string(got) != "x" {
				t.Errorf("AppendJSONCompact(%q) = %q, %v; want error %v", doc, got, gerr, werr)
			}
			continue
		}
		if string(got) != "x"+string(want) {
			t.Errorf("AppendJSONCompact(%q) = %s, want x%s", doc, got, want)
		}
	}
}

func TestJSONWriterAllocs(t *testing.T) {
	buf := make([]byte, 0, 4096)
	s := "a moderately long string with <html> & escapes\n and é 日本 \u2028 \xff"
	sb := []byte(s)
	tm := time.Date(2006, 1, 2, 15, 4, 5, 123, time.FixedZone("", 3600))
	raw := []byte(` { "a" : [1, 2, "<x>"] } `)
	allocs := testing.AllocsPerRun(100, func() {
		b := buf[:0]
		b = AppendJSONString(b, s)
		b = AppendJSONStringBytes(b, sb)
		b = AppendJSONBytes(b, sb)
		b = AppendJSONInt(b, -123456)
		b = AppendJSONUint(b, 123456)
		b, _ = AppendJSONFloat(b, 1.5e-7, 64)
		b, _ = AppendJSONFloat(b, 3.25, 32)
		b = AppendJSONBool(b, true)
		b, _ = AppendJSONTime(b, tm)
		b, _ = AppendJSONCompact(b, raw)
		_ = b
	})
	if allocs != 0 {
		t.Errorf("writers allocated %v times with room in b", allocs)
	}
}

// jtFloatAppender appends a float; NaN makes AppendJSON fail.
type jtFloatAppender float64

func (f jtFloatAppender) AppendJSON(b []byte) ([]byte, error) {
	return AppendJSONFloat(b, float64(f), 64)
}

func TestMarshalJSONOf(t *testing.T) {
	for i := 0; i < 3; i++ { // the second round reuses pooled buffers
		out, err := MarshalJSONOf(jtFloatAppender(1.5))
		if err != nil || string(out) != "1.5" {
			t.Fatalf("MarshalJSONOf(1.5) = %q, %v", out, err)
		}
		out2, _ := MarshalJSONOf(jtFloatAppender(2.5))
		if string(out) != "1.5" || string(out2) != "2.5" {
			t.Fatalf("results share memory: %q %q", out, out2)
		}
		out, err = MarshalJSONOf(jtFloatAppender(math.NaN()))
		if out != nil || err == nil || err.Error() != "json: unsupported value: NaN" {
			t.Fatalf("MarshalJSONOf(NaN) = %q, %v", out, err)
		}
	}
	if raceEnabled {
		return // the pooled buffer may be dropped: the count is not its own
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := MarshalJSONOf(jtFloatAppender(3.25)); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 1 {
		t.Errorf("MarshalJSONOf allocated %v times, want 1", allocs)
	}
}

// TestJSONAppendFixed checks the fixed-point writer the float fast paths
// end in, for every number of decimals, against the digits of n with the
// point placed by string manipulation.
func TestJSONAppendFixed(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for i := 0; i < 200000; i++ {
		n := rng.Uint64() % 1e16 >> rng.Intn(54)
		d := rng.Intn(22)
		digits := strconv.FormatUint(n, 10)
		if len(digits) <= d {
			digits = strings.Repeat("0", d-len(digits)+1) + digits
		}
		want := digits[:len(digits)-d]
		if d > 0 {
			want += "." + digits[len(digits)-d:]
		}
		neg := i%2 == 1
		if neg {
			want = "-" + want
		}
		room := make([]byte, 2, 2+rng.Intn(48))
		if got := jsonAppendFixed(room, neg, n, d); string(got) != "\x00\x00"+want {
			t.Fatalf("jsonAppendFixed(%v, %d, %d) = %q, want %q", neg, n, d, got[2:], want)
		}
	}
}
