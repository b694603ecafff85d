package codec

import (
	"bytes"
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// keyFields is a record of every kind an ordered key holds, written by
// hand as generated code would write it.
type keyFields struct {
	I   int64
	S   string
	U   uint64
	B   bool
	F   float64
	F32 float32
	T   time.Time
	D   time.Duration
}

var keySchema = &Schema{Name: "codec.keyFields", Fields: []Field{
	{Name: "I", ID: 11, Type: &Type{Kind: KindInt, Bits: 64}},
	{Name: "S", ID: 12, Type: &Type{Kind: KindString}},
	{Name: "U", ID: 13, Type: &Type{Kind: KindUint, Bits: 64}},
	{Name: "B", ID: 14, Type: &Type{Kind: KindBool}},
	{Name: "F", ID: 15, Type: &Type{Kind: KindFloat64, Bits: 64}},
	{Name: "F32", ID: 16, Type: &Type{Kind: KindFloat32, Bits: 32}},
	{Name: "T", ID: 17, Type: &Type{Kind: KindTime}},
	{Name: "D", ID: 18, Type: &Type{Kind: KindDuration}},
}}

func (k *keyFields) appendBinary(b []byte) []byte {
	tag := func(b []byte, id int, kind Kind) []byte { return AppendUvarint(b, uint64(id)<<4|uint64(kind)) }
	b = AppendInt(tag(b, 11, KindInt), k.I)
	b = AppendString(tag(b, 12, KindString), k.S)
	b = AppendUint(tag(b, 13, KindUint), k.U)
	b = AppendBool(tag(b, 14, KindBool), k.B)
	b = AppendFloat64(tag(b, 15, KindFloat64), k.F)
	b = AppendFloat32(tag(b, 16, KindFloat32), k.F32)
	b = AppendTime(tag(b, 17, KindTime), k.T)
	return AppendDuration(tag(b, 18, KindDuration), k.D)
}

// compareKeys is the order of keyFields as a tuple: each field in turn,
// times by instant then offset (UTC before any offset).
func compareKeys(a, b *keyFields) int {
	offset := func(t time.Time) (bool, int) {
		if t.Location() == time.UTC {
			return false, 0
		}
		_, o := t.Zone()
		return true, o
	}
	ha, oa := offset(a.T)
	hb, ob := offset(b.T)
	return cmp.Or(
		cmp.Compare(a.I, b.I),
		strings.Compare(a.S, b.S),
		cmp.Compare(a.U, b.U),
		cmp.Compare(boolInt(a.B), boolInt(b.B)),
		compareFloat(a.F, b.F),
		compareFloat(float64(a.F32), float64(b.F32)),
		a.T.Compare(b.T),
		cmp.Compare(boolInt(ha), boolInt(hb)),
		cmp.Compare(oa, ob),
		cmp.Compare(a.D, b.D),
	)
}

// compareFloat is the order of floats as keys: -0 is +0, and every NaN
// one NaN, after +Inf.
func compareFloat(a, b float64) int {
	if an, bn := math.IsNaN(a), math.IsNaN(b); an || bn {
		return cmp.Compare(boolInt(an), boolInt(bn))
	}
	return cmp.Compare(a, b)
}

func boolInt(v bool) int {
	if v {
		return 1
	}
	return 0
}

func randomKey(r *rand.Rand) keyFields {
	// Few distinct values per field, so that later fields decide often.
	ints := []int64{math.MinInt64, -1 << 40, -300, -1, 0, 1, 127, 128, 300, 1 << 40, math.MaxInt64}
	strs := []string{"", "\x00", "\x00\x00", "\x00\x01", "\x00\xff", "a", "a\x00", "a\x00b", "ab", "b", "\xff", "\xff\x00"}
	uints := []uint64{0, 1, 127, 128, 1 << 40, math.MaxUint64}
	floats := []float64{math.Inf(-1), -1e300, -1.5, -math.SmallestNonzeroFloat64, math.Copysign(0, -1), 0, math.SmallestNonzeroFloat64, 1.5, 1e300, math.Inf(1),
		math.NaN(), math.Float64frombits(0xfff8000000000000)} // the NaN of 0/0 on amd64, of the sign bit
	times := []time.Time{
		time.Unix(-1<<40, 5).UTC(), time.Unix(0, 0).UTC(), time.Unix(0, 1).UTC(), time.Unix(1, 0).UTC(),
		time.Unix(0, 0).In(time.FixedZone("", -3600)), time.Unix(0, 0).In(time.FixedZone("", 7200)), time.Unix(1<<40, 999999999).UTC(),
	}
	return keyFields{
		I: ints[r.IntN(len(ints))], S: strs[r.IntN(len(strs))], U: uints[r.IntN(len(uints))], B: r.IntN(2) == 1,
		F: floats[r.IntN(len(floats))], F32: float32(floats[r.IntN(len(floats))]), T: times[r.IntN(len(times))],
		D: time.Duration(ints[r.IntN(len(ints))]),
	}
}

// TestOrderedKeyOrder: keys' bytes sort as their fields do, and decode
// to the binary encoding they came from, their floats as keys (-0 as +0,
// every NaN one NaN: KeyFloat64).
func TestOrderedKeyOrder(t *testing.T) {
	ok, has := NewOrderedKey(keySchema)
	if !has {
		t.Fatal("NewOrderedKey refused a record of basic fields")
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		a, b := randomKey(r), randomKey(r)
		ka, err := ok.Append(nil, a.appendBinary(nil))
		if err != nil {
			t.Fatal(err)
		}
		kb, err := ok.Append([]byte("prefix"), b.appendBinary(nil))
		if err != nil {
			t.Fatal(err)
		}
		kb = kb[len("prefix"):]
		if got, want := bytes.Compare(ka, kb), compareKeys(&a, &b); got != want {
			t.Fatalf("keys %+v and %+v: bytes compare %d, fields %d\n%x\n%x", a, b, got, want, ka, kb)
		}
		back, err := ok.AppendBinary(nil, ka)
		if err != nil {
			t.Fatalf("%+v: %v", a, err)
		}
		asKey := a
		asKey.F, asKey.F32 = KeyFloat64(a.F), float32(KeyFloat64(float64(a.F32)))
		if want := asKey.appendBinary(nil); !bytes.Equal(back, want) {
			t.Fatalf("%+v: decoded to %x, not %x", a, back, want)
		}
	}
}

func TestOrderedKeyRefuses(t *testing.T) {
	for _, typ := range []*Type{
		{Kind: KindStruct, Struct: &Schema{}},
		{Kind: KindInt, Bits: 64, Pointer: true},
		{Kind: KindList, Len: 4, Elem: &Type{Kind: KindInt, Bits: 8}},
		{Kind: KindBytes},
	} {
		if _, ok := NewOrderedKey(&Schema{Fields: []Field{{Name: "A", ID: 1, Type: &Type{Kind: KindInt, Bits: 64}}, {Name: "X", ID: 2, Type: typ}}}); ok {
			t.Errorf("a field of kind %s has an ordered encoding", typ.Kind)
		}
	}
	ok, _ := NewOrderedKey(keySchema)
	k := keyFields{S: "x"}
	bin := k.appendBinary(nil)
	key, err := ok.Append(nil, bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		what string
		key  []byte
	}{
		{"cut short", key[:len(key)-1]},
		{"a byte after", append(bytes.Clone(key), 0)},
		{"an unterminated string", key[:9]},
		{"a bad escape", append(append(bytes.Clone(key[:8]), 0, 7), key[8:]...)},
	} {
		if _, err := ok.AppendBinary(nil, c.key); !errors.Is(err, ErrOrderedKey) {
			t.Errorf("%s: %v, not ErrOrderedKey", c.what, err)
		}
	}
	if _, err := ok.Append(nil, bin[:len(bin)-1]); !errors.Is(err, ErrOrderedKey) {
		t.Errorf("a binary encoding cut short: %v, not ErrOrderedKey", err)
	}
	other := append(AppendUvarint(nil, 99<<4|uint64(KindInt)), bin[1:]...)
	if _, err := ok.Append(nil, other); !errors.Is(err, ErrOrderedKey) {
		t.Errorf("another field first: %v, not ErrOrderedKey", err)
	}
}

// FuzzOrderedKey: any bytes either fail to decode or decode to a binary
// encoding whose ordered key is those bytes (one key per record), but
// for floats that are not a key's (a NaN other than the one NaN, -0: see
// KeyFloat64), whose key is then a fixed point: it decodes to a record
// whose key it is.
func FuzzOrderedKey(f *testing.F) {
	ok, _ := NewOrderedKey(keySchema)
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		k := randomKey(r)
		key, _ := ok.Append(nil, k.appendBinary(nil))
		f.Add(key)
	}
	f.Fuzz(func(t *testing.T, key []byte) {
		bin, err := ok.AppendBinary(nil, key)
		if err != nil {
			return
		}
		again, err := ok.Append(nil, bin)
		if err != nil {
			t.Fatalf("%x decoded to %x, which does not encode: %v", key, bin, err)
		}
		if bytes.Equal(again, key) {
			return
		}
		bin2, err := ok.AppendBinary(nil, again)
		if err != nil {
			t.Fatalf("%x decoded to %x, which encodes as %x, which does not decode: %v", key, bin, again, err)
		}
		if third, err := ok.Append(nil, bin2); err != nil || !bytes.Equal(third, again) || !nonKeyFloats(t, bin) {
			t.Fatalf("%x decoded to %x, which encodes as %x, then %x (%v)", key, bin, again, third, err)
		}
	})
}

// nonKeyFloats reports whether the record bin, of keySchema, holds a
// float that is not a key's: a NaN other than KeyFloat64's, or -0.
func nonKeyFloats(t *testing.T, bin []byte) bool {
	t.Helper()
	var d Decoder
	d.Reset(bin)
	found := false
	for _, f := range keySchema.Fields {
		tag := d.Tag()
		switch f.Type.Kind {
		case KindFloat64:
			v := d.Float64()
			found = found || math.Float64bits(v) != math.Float64bits(KeyFloat64(v))
		case KindFloat32:
			v := d.Float32()
			found = found || math.Float32bits(v) != math.Float32bits(float32(KeyFloat64(float64(v))))
		default:
			d.Skip(tag)
		}
	}
	return found
}
