package codec

import (
	"testing"
	"time"
)

func BenchmarkZZMicro(b *testing.B) {
	buf := make([]byte, 0, 1024)
	e := jbSample()
	b.Run("time", func(b *testing.B) {
		for b.Loop() {
			buf, _ = AppendJSONTime(buf[:0], e.At)
		}
	})
	b.Run("timefmt", func(b *testing.B) {
		for b.Loop() {
			buf = e.At.AppendFormat(buf[:0], time.RFC3339Nano)
		}
	})
	b.Run("float", func(b *testing.B) {
		for b.Loop() {
			buf, _ = AppendJSONFloat(buf[:0], 0.87123, 64)
		}
	})
	b.Run("float32", func(b *testing.B) {
		for b.Loop() {
			buf, _ = AppendJSONFloat(buf[:0], 0.25, 32)
		}
	})
	b.Run("int", func(b *testing.B) {
		for b.Loop() {
			buf = AppendJSONInt(buf[:0], 1234567890123)
		}
	})
	b.Run("comment", func(b *testing.B) {
		for b.Loop() {
			buf = AppendJSONString(buf[:0], e.Comment)
		}
	})
	b.Run("kind", func(b *testing.B) {
		for b.Loop() {
			buf = AppendJSONString(buf[:0], e.Kind)
		}
	})
	b.Run("bytes", func(b *testing.B) {
		for b.Loop() {
			buf = AppendJSONBytes(buf[:0], e.Payload)
		}
	})
	b.Run("all", func(b *testing.B) {
		for b.Loop() {
			buf, _ = e.appendJSON(buf[:0])
		}
	})
}
