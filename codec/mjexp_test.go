package codec

import "testing"

var mjSink []byte

func BenchmarkMJParts(b *testing.B) {
	buf := make([]byte, 0, 512)
	b.Run("ints", func(b *testing.B) {
		for b.Loop() {
			o := AppendJSONInt(buf[:0], 1424686735175)
			o = AppendJSONInt(o, 1424686733176178965)
			o = AppendJSONInt(o, 35)
			mjSink = o
		}
	})
	b.Run("strings", func(b *testing.B) {
		for b.Loop() {
			o := AppendJSONString(buf[:0], "nexus4_1")
			o = AppendJSONString(o, "nexus4")
			o = AppendJSONString(o, "g")
			o = AppendJSONString(o, "stand")
			mjSink = o
		}
	})
	b.Run("floats", func(b *testing.B) {
		for b.Loop() {
			o, _ := AppendJSONFloat(buf[:0], -0.00054931640625, 64)
			o, _ = AppendJSONFloat(o, 0.0016021728515625, 64)
			o, _ = AppendJSONFloat(o, -0.00030517578125, 64)
			mjSink = o
		}
	})
	b.Run("keys", func(b *testing.B) {
		for b.Loop() {
			o := append(buf[:0], ",\"Arrival_Time\":"...)
			o = append(o, ",\"Creation_Time\":"...)
			o = append(o, ",\"Device\":"...)
			o = append(o, ",\"Index\":"...)
			o = append(o, ",\"Model\":"...)
			o = append(o, ",\"User\":"...)
			o = append(o, ",\"gt\":"...)
			o = append(o, ",\"x\":"...)
			o = append(o, ",\"y\":"...)
			o = append(o, ",\"z\":"...)
			mjSink = o
		}
	})
}

var mjSrc = make([]byte, 205)

func BenchmarkMJAlloc(b *testing.B) {
	b.Run("make240", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mjSink = make([]byte, 0, 240)
		}
	})
	b.Run("make208", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mjSink = make([]byte, 0, 208)
		}
	})
	b.Run("copy205", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			o := make([]byte, len(mjSrc))
			copy(o, mjSrc)
			mjSink = o
		}
	})
	b.Run("make64", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			mjSink = make([]byte, 0, 64)
		}
	})
}
