package bench

import (
	"bytes"
	"encoding/gob"
	"encoding/json"
	"testing"

	"github.com/streamgen/streamgen/bench/msgpevent"
	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/generated/sensor"
)

// A reading from the sensor data set, as the codecs see it.
var event = sensor.Event{
	ArrivalTime:  1424686735175,
	CreationTime: 1424686733176178965,
	Device:       "nexus4_1",
	Index:        35,
	Model:        "nexus4",
	User:         "g",
	Activity:     "stand",
	X:            -0.00054931640625,
	Y:            0.0016021728515625,
	Z:            -0.00030517578125,
}

var msgpEvent = msgpevent.Event(event)

// plainEvent is sensor.Event without its generated methods, for
// encoding/json and encoding/gob to handle by reflection.
type plainEvent sensor.Event

var plain = plainEvent(event)

// The binary codecs: streamgen's generated code, msgp's generated code,
// encoding/gob (a stream: type information is sent once, as a producer
// would), encoding/json. Each encodes into a reused buffer.

func BenchmarkBinaryEncode(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = event.AppendBinary(buf[:0])
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("codec=msgp", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = msgpEvent.MarshalMsg(buf[:0])
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("codec=gob", func(b *testing.B) {
		var buf bytes.Buffer
		enc := gob.NewEncoder(&buf)
		enc.Encode(&plain) // type information, once
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			enc.Encode(&plain)
		}
		b.SetBytes(int64(buf.Len()))
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			enc.Encode(&plain)
		}
		b.SetBytes(int64(buf.Len()))
	})
}

func BenchmarkBinaryDecode(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		data, _ := event.MarshalBinary()
		var out sensor.Event
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := out.UnmarshalBinary(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=msgp", func(b *testing.B) {
		data, _ := msgpEvent.MarshalMsg(nil)
		var out msgpevent.Event
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := out.UnmarshalMsg(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=gob", func(b *testing.B) {
		// A stream of b.N records after the type information.
		var buf bytes.Buffer
		enc := gob.NewEncoder(&buf)
		n := b.N + 1
		for range n {
			enc.Encode(&plain)
		}
		dec := gob.NewDecoder(&buf)
		var out plainEvent
		dec.Decode(&out)
		b.ReportAllocs()
		b.ResetTimer()
		for range b.N {
			if err := dec.Decode(&out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		data, _ := json.Marshal(&plain)
		var out plainEvent
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := json.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkBinaryRoundTrip is encode then decode, the figure the binary
// codec's target is set on.
func BenchmarkBinaryRoundTrip(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		var out sensor.Event
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = event.AppendBinary(buf[:0])
			if err := out.UnmarshalBinary(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=msgp", func(b *testing.B) {
		buf := make([]byte, 0, 256)
		var out msgpevent.Event
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = msgpEvent.MarshalMsg(buf[:0])
			if _, err := out.UnmarshalMsg(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// The JSON codecs: streamgen's generated methods against encoding/json on
// the same struct without them. Output is byte for byte the same.

func BenchmarkJSONEncode(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = event.AppendJSON(buf[:0])
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, _ := json.Marshal(&plain)
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
}

// BenchmarkJSONMarshal is what json.Marshal and most users call: the
// generated MarshalJSON, which returns a new slice, against json.Marshal.
func BenchmarkJSONMarshal(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, _ := event.MarshalJSON()
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
	// The generated MarshalJSON as it was: a pooled buffer and a copy.
	b.Run("codec=streamgen_pooled", func(b *testing.B) {
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, _ := codec.MarshalJSONOf(&event)
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, _ := json.Marshal(&plain)
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
}

// BenchmarkJSONEncodeDecimals encodes the same record with readings that
// are not binary fractions (9.80665, a third, ...), whose shortest form
// takes a general float formatter, as encoding/json's does.
func BenchmarkJSONEncodeDecimals(b *testing.B) {
	decimals := event
	decimals.X, decimals.Y, decimals.Z = -0.01209, 9.80665, 1.0/3
	plainDecimals := plainEvent(decimals)
	b.Run("codec=streamgen", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		b.ReportAllocs()
		for b.Loop() {
			buf, _ = decimals.AppendJSON(buf[:0])
		}
		b.SetBytes(int64(len(buf)))
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		var n int
		b.ReportAllocs()
		for b.Loop() {
			out, _ := json.Marshal(&plainDecimals)
			n = len(out)
		}
		b.SetBytes(int64(n))
	})
}

func BenchmarkJSONDecode(b *testing.B) {
	data, _ := json.Marshal(&plain)
	b.Run("codec=streamgen", func(b *testing.B) {
		var out sensor.Event
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := out.UnmarshalJSON(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		var out plainEvent
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if err := json.Unmarshal(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestBenchmarkInputsAgree checks that the peers encode the same record,
// so the benchmarks compare like with like.
func TestBenchmarkInputsAgree(t *testing.T) {
	ours, _ := event.MarshalJSON()
	theirs, _ := json.Marshal(&plain)
	if !bytes.Equal(ours, theirs) {
		t.Fatalf("JSON differs:\n%s\n%s", ours, theirs)
	}
	data, _ := msgpEvent.MarshalMsg(nil)
	var back msgpevent.Event
	if _, err := back.UnmarshalMsg(data); err != nil || sensor.Event(back) != event {
		t.Fatalf("msgp round trip: %v %+v", err, back)
	}
	bin, _ := event.MarshalBinary()
	var out sensor.Event
	if err := out.UnmarshalBinary(bin); err != nil || out != event {
		t.Fatalf("binary round trip: %v %+v", err, out)
	}
}
