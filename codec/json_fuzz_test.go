package codec

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"
)

// FuzzJSONReader runs arbitrary bytes through the test decoder and through
// encoding/json: the reader must never panic, must accept exactly the
// documents encoding/json accepts, with the same error (kind, message and
// offset), and must decode the same values. It also compares the
// syntax-only path (RawValue) and AppendJSONCompact.
func FuzzJSONReader(f *testing.F) {
	for _, doc := range jtDocs {
		f.Add([]byte(doc))
	}
	for _, doc := range jtSyntaxDocs {
		f.Add([]byte(doc))
	}
	for _, s := range jtStrings[:20] {
		f.Add([]byte(`{"name":` + s + `,` + s + `:1}`))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		if d := jtCompare(doc); d != "" {
			t.Fatalf("document %q:\n%s", doc, d)
		}
		_, gerr := jtSyntaxOnly(doc)
		if d := jtCheckErr(gerr, jtStdSyntax(doc)); d != "" {
			t.Fatalf("syntax only, document %q:\n%s", doc, d)
		}
		want, werr := json.Marshal(jtRawMarshaler(doc))
		got, cerr := AppendJSONCompact(nil, doc)
		if (werr == nil) != (cerr == nil) || werr == nil && string(got) != string(want) {
			t.Fatalf("AppendJSONCompact(%q) = %q, %v; encoding/json %q, %v", doc, got, cerr, want, werr)
		}
	})
}

// FuzzJSONString checks AppendJSONString and AppendJSONStringBytes against
// json.Marshal, and that the reader reads the result back as encoding/json
// does.
func FuzzJSONString(f *testing.F) {
	for _, s := range jtStringCases()[:300] {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := AppendJSONString(nil, s)
		if string(got) != string(want) {
			t.Fatalf("AppendJSONString(%q) = %s, want %s", s, got, want)
		}
		if got := AppendJSONStringBytes(nil, []byte(s)); string(got) != string(want) {
			t.Fatalf("AppendJSONStringBytes(%q) = %s, want %s", s, got, want)
		}
		// The raw string as a JSON string literal body, as a value and a
		// key.
		doc := []byte(`{"name":"` + s + `","` + s + `":1}`)
		if d := jtCompare(doc); d != "" {
			t.Fatalf("document %q:\n%s", doc, d)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		var r JSONReader
		r.Reset(got)
		v, ok := r.String("T")
		if err := r.Finish(); err != nil || !ok || v != back {
			t.Fatalf("reading %s back: %q, %v, %v; encoding/json %q", got, v, ok, err, back)
		}
	})
}

// FuzzJSONFloat checks AppendJSONFloat against json.Marshal for float64
// and float32 values from arbitrary bits and from arbitrary decimal
// mantissas and exponents, where the fast paths' limits are.
func FuzzJSONFloat(f *testing.F) {
	f.Add(uint64(0x3f41ffffffffffff), int64(9), int8(-4))
	f.Add(uint64(0xbf42000000000000), int64(54931640625), int8(-15))
	f.Add(uint64(0x4023000000000000), int64(980665), int8(-5))
	f.Add(uint64(0x3fd5555555555555), int64(999999999999999), int8(-16))
	// Zero and minus zero, subnormals, the largest float64, and the
	// edges of the plain-decimal range [1e-6, 1e21) that encoding/json
	// writes without an exponent, and powers of ten on both sides.
	for _, v := range []float64{0, math.Copysign(0, -1), 5e-324, 2.2250738585072009e-308, math.MaxFloat64,
		1e21, math.Nextafter(1e21, 0), 1e-6, math.Nextafter(1e-6, 0), 1e-7, 1e15, 1e16, 1e-5, 0.5, 1} {
		f.Add(math.Float64bits(v), int64(1), int8(-6))
		f.Add(math.Float64bits(-v), int64(-1), int8(21))
	}
	for e := -25; e <= 25; e += 5 {
		f.Add(math.Float64bits(math.Pow(10, float64(e))), int64(9), int8(e))
	}
	f.Fuzz(func(t *testing.T, raw uint64, mant int64, exp int8) {
		check := func(v float64, bits int) {
			var want []byte
			var err error
			if bits == 32 {
				want, err = json.Marshal(float32(v))
				v = float64(float32(v))
			} else {
				want, err = json.Marshal(v)
			}
			got, gerr := AppendJSONFloat(nil, v, bits)
			if (err == nil) != (gerr == nil) || err == nil && string(got) != string(want) {
				t.Fatalf("AppendJSONFloat(%v, %d) = %s, %v; encoding/json %s, %v", v, bits, got, gerr, want, err)
			}
		}
		check(math.Float64frombits(raw), 64)
		check(float64(math.Float32frombits(uint32(raw))), 32)
		v, _ := strconv.ParseFloat(strconv.FormatInt(mant, 10)+"e"+strconv.Itoa(int(exp)), 64)
		check(v, 64)
		check(v, 32)
		check(math.Ldexp(float64(mant), int(exp)), 64)
	})
}

// FuzzJSONInt checks AppendJSONInt and AppendJSONUint against
// encoding/json, appending to a buffer with and without spare room (the
// writers store whole words past what they append).
func FuzzJSONInt(f *testing.F) {
	for _, v := range []uint64{0, 9, 10, 99999999, 100000000, 1e16 - 1, 1e16, math.MaxInt64, 1 << 63, math.MaxUint64} {
		f.Add(v, uint8(0))
	}
	f.Fuzz(func(t *testing.T, v uint64, room uint8) {
		prefix := make([]byte, 3, 3+int(room)%32)
		copy(prefix, "ab,")
		want, _ := json.Marshal(v)
		if got := AppendJSONUint(prefix, v); string(got) != "ab,"+string(want) {
			t.Fatalf("AppendJSONUint(%d) = %s, want ab,%s", v, got, want)
		}
		want, _ = json.Marshal(int64(v))
		if got := AppendJSONInt(prefix, int64(v)); string(got) != "ab,"+string(want) {
			t.Fatalf("AppendJSONInt(%d) = %s, want ab,%s", int64(v), got, want)
		}
	})
}
