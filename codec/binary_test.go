package codec_test

import (
	"encoding/binary"
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/codec"
)

func TestVarintsMatchEncodingBinary(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	values := []uint64{0, 1, 127, 128, 255, 16383, 16384, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for range 1000 {
		values = append(values, r.Uint64()>>r.IntN(64))
	}
	for k := range 64 {
		values = append(values, 1<<k, 1<<k-1, 1<<k|r.Uint64()>>(64-k))
	}
	for _, u := range values {
		got := codec.AppendUvarint(nil, u)
		if want := binary.AppendUvarint(nil, u); string(got) != string(want) {
			t.Fatalf("AppendUvarint(%d) = %x, want %x", u, got, want)
		}
		i := int64(u)
		gotI := codec.AppendInt(nil, i)
		if want := binary.AppendVarint(nil, i); string(gotI) != string(want) {
			t.Fatalf("AppendInt(%d) = %x, want %x", i, gotI, want)
		}
		var d codec.Decoder
		d.Reset(append(append(got, gotI...), 0xAA))
		if v := d.Uvarint(); v != u {
			t.Fatalf("Uvarint read %d, want %d", v, u)
		}
		if v := d.Int64(); v != i || d.Err() != nil {
			t.Fatalf("Int64 read %d, want %d (%v)", v, i, d.Err())
		}
		// Followed by 0 to 11 bytes: the reader takes eight bytes at a
		// time when ten remain.
		for pad := range 12 {
			d.Reset(append(append([]byte(nil), got...), make([]byte, pad)...))
			if v := d.Uvarint(); v != u || d.Offset() != len(got) || d.Err() != nil {
				t.Fatalf("Uvarint with %d bytes after it read %d at offset %d (%v), want %d at %d", pad, v, d.Offset(), d.Err(), u, len(got))
			}
		}
	}
}

func TestVarintMalformed(t *testing.T) {
	for _, tc := range []struct {
		in   []byte
		want error
	}{
		{nil, codec.ErrTruncated},
		{[]byte{0x80}, codec.ErrTruncated},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, codec.ErrTruncated},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02}, codec.ErrMalformed},
		{[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, codec.ErrMalformed},
	} {
		var d codec.Decoder
		d.Reset(tc.in)
		d.Uvarint()
		if !errors.Is(d.Err(), tc.want) {
			t.Errorf("Uvarint(%x): err = %v, want %v", tc.in, d.Err(), tc.want)
		}
	}
}

func TestIntWidths(t *testing.T) {
	for _, bits := range []int{8, 16, 32} {
		lo, hi := -int64(1)<<(bits-1), int64(1)<<(bits-1)-1
		for _, v := range []int64{lo, hi, 0, -1} {
			var d codec.Decoder
			d.Reset(codec.AppendInt(nil, v))
			if got := d.Int(bits); got != v || d.Err() != nil {
				t.Errorf("Int(%d) of %d = %d, %v", bits, v, got, d.Err())
			}
		}
		for _, v := range []int64{lo - 1, hi + 1} {
			var d codec.Decoder
			d.Reset(codec.AppendInt(nil, v))
			if d.Int(bits); !errors.Is(d.Err(), codec.ErrMalformed) {
				t.Errorf("Int(%d) of %d: err = %v, want overflow", bits, v, d.Err())
			}
		}
		var d codec.Decoder
		d.Reset(codec.AppendUint(nil, 1<<bits))
		if d.Uint(bits); !errors.Is(d.Err(), codec.ErrMalformed) {
			t.Errorf("Uint(%d) of %d: err = %v, want overflow", bits, uint64(1)<<bits, d.Err())
		}
	}
}

func TestFloatsExact(t *testing.T) {
	for _, bits := range []uint64{0, 1 << 63, 0x7ff8000000000001, 0x7ff0000000000000, 0xfff0000000000000, 1, math.Float64bits(0.1)} {
		f := math.Float64frombits(bits)
		var d codec.Decoder
		d.Reset(codec.AppendFloat32(codec.AppendFloat64(nil, f), math.Float32frombits(uint32(bits>>32))))
		if got := math.Float64bits(d.Float64()); got != bits {
			t.Errorf("float64 bits %x read as %x", bits, got)
		}
		if got := math.Float32bits(d.Float32()); got != uint32(bits>>32) {
			t.Errorf("float32 bits %x read as %x", uint32(bits>>32), got)
		}
	}
}

// TestLengths checks that a length longer than the byte BeginLength
// reserves moves the value up without damaging it.
func TestLengths(t *testing.T) {
	for _, n := range []int{0, 1, 127, 128, 300, 16383, 16384, 1 << 21} {
		b := []byte("head")
		start := len(b)
		b = codec.BeginLength(b)
		payload := make([]byte, n)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		b = append(b, payload...)
		b = codec.EndLength(b, start)
		want := append(binary.AppendUvarint([]byte("head"), uint64(n)), payload...)
		if string(b) != string(want) {
			t.Fatalf("length %d: encoding differs from uvarint(len) + payload", n)
		}
		var d codec.Decoder
		d.Reset(b[4:])
		if end := d.Begin(); end != len(b)-4 || d.Err() != nil {
			t.Fatalf("length %d: Begin = %d, %v", n, end, d.Err())
		}
	}
}

func TestTimes(t *testing.T) {
	instants := []time.Time{
		{},
		time.Unix(0, 0),
		time.Unix(1424686733, 176178965),
		time.Unix(-62135596800, 0),
		time.Unix(253402300799, 999999999),
		time.Unix(1<<40, 1),
		time.Unix(-1<<40, 7),
	}
	zones := []*time.Location{time.UTC, time.Local, time.FixedZone("CET", 3600), time.FixedZone("", -12345)}
	for _, t0 := range instants {
		for _, z := range zones {
			in := t0.In(z)
			if t0.IsZero() {
				in = t0
			}
			var d codec.Decoder
			d.Reset(codec.AppendTime(nil, in))
			out := d.Time()
			if d.Err() != nil {
				t.Fatalf("%v: %v", in, d.Err())
			}
			// The standard library's own binary form is the oracle for
			// which location a decoded time gets; the offset must be the
			// input's to the second (the standard form keeps minutes).
			std, _ := in.MarshalBinary()
			var want time.Time
			want.UnmarshalBinary(std)
			_, wantOff := in.Zone()
			_, gotOff := out.Zone()
			if !out.Equal(in) || gotOff != wantOff || (out.Location() == time.UTC) != (want.Location() == time.UTC) ||
				(out.Location() == time.Local) != (want.Location() == time.Local) || out.IsZero() != in.IsZero() {
				t.Errorf("%v read as %v, want %v", in, out, want)
			}
		}
	}
}

func TestFieldIDIsFNV1a(t *testing.T) {
	for _, name := range []string{"", "User", "Creation_Time", "ünï", strings.Repeat("x", 100)} {
		h := fnv.New32a()
		h.Write([]byte(name))
		sum := h.Sum32()
		want := (sum ^ sum>>17) & codec.MaxFieldID
		if want == 0 {
			want = 1
		}
		if got := codec.FieldID(name); got != want {
			t.Errorf("FieldID(%q) = %d, want %d", name, got, want)
		}
	}
	// The ids of existing fields are part of the format.
	if got := codec.FieldID("User"); got != 20033 {
		t.Errorf("FieldID(\"User\") = %d: the format changed", got)
	}
}

func TestSkipEveryKind(t *testing.T) {
	var b []byte
	add := func(k codec.Kind, value []byte) {
		b = codec.AppendTag(b, 4242, k)
		b = append(b, value...)
	}
	add(codec.KindBool, []byte{1})
	add(codec.KindInt, codec.AppendInt(nil, -300))
	add(codec.KindUint, codec.AppendUint(nil, 300))
	add(codec.KindFloat32, codec.AppendFloat32(nil, 1))
	add(codec.KindFloat64, codec.AppendFloat64(nil, 1))
	add(codec.KindString, codec.AppendString(nil, "skip me"))
	add(codec.KindBytes, codec.AppendBytes(nil, []byte("xyz")))
	add(codec.KindBytes, codec.AppendBytes(nil, nil))
	add(codec.KindTime, codec.AppendTime(nil, time.Unix(5, 5).In(time.FixedZone("", 60))))
	add(codec.KindTime, codec.AppendTime(nil, time.Unix(5, 5).UTC()))
	add(codec.KindDuration, codec.AppendDuration(nil, -time.Hour))
	add(codec.KindStruct, codec.AppendString(nil, "\x01\x02\x03"))
	add(codec.KindList, codec.AppendString(nil, "\x05\x02\x01a"))
	add(codec.KindMap, codec.AppendString(nil, "\x05\x05\x02\x01a\x01b"))
	var d codec.Decoder
	d.Reset(b)
	fields := 0
	for d.More(d.End()) {
		d.Skip(d.Tag())
		fields++
	}
	if d.Err() != nil || fields != 14 {
		t.Fatalf("skipped %d fields, err %v; want 14 and no error", fields, d.Err())
	}
	// Every truncation is an error, never a panic.
	for i := range b {
		d.Reset(b[:i])
		for d.More(d.End()) {
			d.Skip(d.Tag())
		}
	}
}

func TestKindNames(t *testing.T) {
	for k := codec.KindBool; k <= codec.KindMap; k++ {
		if back, ok := codec.ParseKind(k.String()); !ok || back != k {
			t.Errorf("ParseKind(%q) = %v, %v", k.String(), back, ok)
		}
	}
	if s := (codec.KindInt | codec.PointerFlag).String(); s != "*int" {
		t.Errorf("pointer kind prints as %q", s)
	}
}

func FuzzDecoderSkip(f *testing.F) {
	f.Add([]byte{0x15, 0x03, 'a', 'b', 'c'})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d codec.Decoder
		d.Reset(b)
		for d.More(d.End()) {
			d.Skip(d.Tag())
		}
		if d.Err() == nil && d.Offset() != len(b) {
			t.Fatalf("stopped at %d of %d with no error", d.Offset(), len(b))
		}
	})
}

// TestUvarintAt: the fast path's varint reader agrees with
// encoding/binary on every length, at the end of the input and before
// more bytes, and refuses what binary.Uvarint refuses.
func TestUvarintAt(t *testing.T) {
	values := []uint64{0, 1, 127, 128, 300, 1<<14 - 1, 1 << 14, 1<<21 + 5, 1<<28 - 1, 1<<35 + 3, 1<<49 - 1, 1 << 49, 1<<56 - 1, 1 << 56, 1<<62 + 7, 1<<63 - 1, 1 << 63, math.MaxUint64}
	for _, v := range values {
		enc := binary.AppendUvarint(nil, v)
		for _, tail := range [][]byte{nil, {0x80, 0x80, 0x80}, make([]byte, 12)} {
			b := append(append([]byte{0xaa}, enc...), tail...)
			got, n := codec.UvarintAt(b, 1)
			if got != v || n != len(enc) {
				t.Errorf("UvarintAt(%x, 1) = %d, %d; want %d, %d", b, got, n, v, len(enc))
			}
			x, n := codec.PeekUvarint(b, 1)
			if n != 0 && (codec.PackUvarint(x) != v || n != len(enc)) {
				t.Errorf("PeekUvarint(%x, 1) = %d, %d; want %d, %d", b, codec.PackUvarint(x), n, v, len(enc))
			}
			if n == 0 && len(b) >= 9 && len(enc) <= 8 {
				t.Errorf("PeekUvarint(%x, 1) found no varint", b)
			}
		}
		if _, n := codec.UvarintAt(enc[:len(enc)-1], 0); n != 0 {
			t.Errorf("UvarintAt of %x cut short: length %d, want 0", enc, n)
		}
	}
	for _, bad := range [][]byte{
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80, 0x01},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
	} {
		if v, n := codec.UvarintAt(bad, 0); n != 0 {
			t.Errorf("UvarintAt(%x) = %d, %d; want a length of 0", bad, v, n)
		}
	}
}
