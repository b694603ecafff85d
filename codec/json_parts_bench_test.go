package codec

import "testing"

// jsonPartsSink keeps the writers' output alive in the benchmarks below.
var jsonPartsSink []byte

// BenchmarkJSONWriterParts times the writers that the sensor record's
// generated AppendJSON calls, by kind, on the sensor benchmark's values
// (bench/codec_test.go), each appending into a reused buffer: its three
// integers, its four strings, its three floats, and the ten constant
// member names.
func BenchmarkJSONWriterParts(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.Run("ints", func(b *testing.B) {
		for b.Loop() {
			o := AppendJSONInt(buf[:0], 1424686735175)
			o = AppendJSONInt(o, 1424686733176178965)
			jsonPartsSink = AppendJSONInt(o, 35)
		}
	})
	b.Run("strings", func(b *testing.B) {
		for b.Loop() {
			o := AppendJSONString(buf[:0], "nexus4_1")
			o = AppendJSONString(o, "nexus4")
			o = AppendJSONString(o, "g")
			jsonPartsSink = AppendJSONString(o, "stand")
		}
	})
	b.Run("floats", func(b *testing.B) {
		for b.Loop() {
			o, _ := AppendJSONFloat(buf[:0], -0.00054931640625, 64)
			o, _ = AppendJSONFloat(o, 0.0016021728515625, 64)
			jsonPartsSink, _ = AppendJSONFloat(o, -0.00030517578125, 64)
		}
	})
	b.Run("names", func(b *testing.B) {
		for b.Loop() {
			o := append(buf[:0], `,"Arrival_Time":`...)
			o = append(o, `,"Creation_Time":`...)
			o = append(o, `,"Device":`...)
			o = append(o, `,"Index":`...)
			o = append(o, `,"Model":`...)
			o = append(o, `,"User":`...)
			o = append(o, `,"gt":`...)
			o = append(o, `,"x":`...)
			o = append(o, `,"y":`...)
			jsonPartsSink = append(o, `,"z":`...)
		}
	})
}

// BenchmarkJSONResultAlloc times what a MarshalJSON pays on top of its
// writing: the allocation of its result, alone in the loop, at the size
// classes of the sensor record's encoding (205 bytes: 208) and of the
// running estimate it used to allocate (240), and the copy from a buffer
// that the generated MarshalJSON does now. The time is mostly the
// garbage collector's, and grows with the bytes allocated.
func BenchmarkJSONResultAlloc(b *testing.B) {
	src := make([]byte, 205)
	b.Run("size=240", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonPartsSink = make([]byte, 0, 240)
		}
	})
	b.Run("size=208", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonPartsSink = make([]byte, 0, 208)
		}
	})
	b.Run("copy=205", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			jsonPartsSink = append([]byte(nil), src...)
		}
	})
}
