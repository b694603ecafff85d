package codec

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Benchmarks run each input through the codec primitives (as generated
// code uses them) and through encoding/json side by side, as
// sub-benchmarks "streamgen" and "encoding_json", so that the ratio shows.

type jbPoint struct {
	Lat  float64 `json:"lat"`
	Lon  float64 `json:"lon"`
	Name string  `json:"name"`
}

type jbEvent struct {
	ID       int64     `json:"id"`
	Kind     string    `json:"kind"`
	Source   string    `json:"source"`
	Count    uint32    `json:"count"`
	Score    float64   `json:"score"`
	Ratio    float32   `json:"ratio"`
	Active   bool      `json:"active"`
	At       time.Time `json:"at"`
	Tags     []string  `json:"tags"`
	Where    jbPoint   `json:"where"`
	Path     []jbPoint `json:"path"`
	Payload  []byte    `json:"payload"`
	Comment  string    `json:"comment"`
	Sequence []int64   `json:"sequence"`
}

// jbEventPlain is the twin without methods, for encoding/json.
type jbEventPlain jbEvent

func jbSample() jbEvent {
	return jbEvent{
		ID: 1234567890123, Kind: "page_view", Source: "web-frontend-eu-west-1", Count: 42, Score: 0.87123,
		Ratio: 0.25, Active: true, At: time.Date(2024, 5, 17, 13, 45, 12, 123456789, time.UTC),
		Tags:     []string{"alpha", "beta", "gamma", "delta"},
		Where:    jbPoint{Lat: 52.520008, Lon: 13.404954, Name: "Berlin"},
		Path:     []jbPoint{{1.5, -2.25, "a"}, {3.125, 4, "b"}, {-5.5, 6.75, "c"}},
		Payload:  []byte("some binary payload bytes"),
		Comment:  "A comment with \"quotes\", a newline\nand <html> & unicode: é日本",
		Sequence: []int64{1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987},
	}
}

// appendJSON is what the generator will emit for MarshalJSON.
func (e *jbEvent) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"id":`...)
	b = AppendJSONInt(b, e.ID)
	b = append(b, `,"kind":`...)
	b = AppendJSONString(b, e.Kind)
	b = append(b, `,"source":`...)
	b = AppendJSONString(b, e.Source)
	b = append(b, `,"count":`...)
	b = AppendJSONUint(b, uint64(e.Count))
	b = append(b, `,"score":`...)
	if b, err = AppendJSONFloat(b, e.Score, 64); err != nil {
		return nil, err
	}
	b = append(b, `,"ratio":`...)
	if b, err = AppendJSONFloat(b, float64(e.Ratio), 32); err != nil {
		return nil, err
	}
	b = append(b, `,"active":`...)
	b = AppendJSONBool(b, e.Active)
	b = append(b, `,"at":`...)
	if b, err = AppendJSONTime(b, e.At); err != nil {
		return nil, err
	}
	b = append(b, `,"tags":`...)
	if e.Tags == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, s := range e.Tags {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, s)
		}
		b = append(b, ']')
	}
	b = append(b, `,"where":`...)
	if b, err = e.Where.appendJSON(b); err != nil {
		return nil, err
	}
	b = append(b, `,"path":`...)
	if e.Path == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i := range e.Path {
			if i > 0 {
				b = append(b, ',')
			}
			if b, err = e.Path[i].appendJSON(b); err != nil {
				return nil, err
			}
		}
		b = append(b, ']')
	}
	b = append(b, `,"payload":`...)
	b = AppendJSONBytes(b, e.Payload)
	b = append(b, `,"comment":`...)
	b = AppendJSONString(b, e.Comment)
	b = append(b, `,"sequence":`...)
	if e.Sequence == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, v := range e.Sequence {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONInt(b, v)
		}
		b = append(b, ']')
	}
	return append(b, '}'), nil
}

func (p *jbPoint) appendJSON(b []byte) ([]byte, error) {
	var err error
	b = append(b, `{"lat":`...)
	if b, err = AppendJSONFloat(b, p.Lat, 64); err != nil {
		return nil, err
	}
	b = append(b, `,"lon":`...)
	if b, err = AppendJSONFloat(b, p.Lon, 64); err != nil {
		return nil, err
	}
	b = append(b, `,"name":`...)
	b = AppendJSONString(b, p.Name)
	return append(b, '}'), nil
}

// jbEventSize is the running size of jbEvent's encodings.
var jbEventSize JSONSize

// MarshalJSON is the generated entry point, as the generator emits it:
// a buffer on the stack and a copy while the encodings are small, then
// one buffer sized by the running estimate, no copy.
func (e *jbEvent) MarshalJSON() ([]byte, error) {
	if jbEventSize.Small() {
		var buf [JSONStackSize]byte
		b, err := e.appendJSON(buf[:0])
		if err != nil {
			return nil, err
		}
		jbEventSize.Observe(len(b))
		return append([]byte(nil), b...), nil
	}
	b, err := e.appendJSON(jbEventSize.Buffer())
	if err != nil {
		return nil, err
	}
	jbEventSize.Observe(len(b))
	return b, nil
}

// AppendJSON makes jbEvent a JSONAppender.
func (e *jbEvent) AppendJSON(b []byte) ([]byte, error) { return e.appendJSON(b) }

// UnmarshalJSON is what the generator will emit.
func (e *jbEvent) UnmarshalJSON(data []byte) error {
	var r JSONReader
	r.Reset(data)
	e.decode(&r, "Go value of type codec.jbEvent")
	return r.Finish()
}

func (e *jbEvent) decode(r *JSONReader, target string) {
	if !r.BeginObject(target) {
		return
	}
	for {
		key, ok := r.NextKey()
		if !ok {
			return
		}
		switch string(key) {
		case "id":
			e.decodeField(r, 0)
		case "kind":
			e.decodeField(r, 1)
		case "source":
			e.decodeField(r, 2)
		case "count":
			e.decodeField(r, 3)
		case "score":
			e.decodeField(r, 4)
		case "ratio":
			e.decodeField(r, 5)
		case "active":
			e.decodeField(r, 6)
		case "at":
			e.decodeField(r, 7)
		case "tags":
			e.decodeField(r, 8)
		case "where":
			e.decodeField(r, 9)
		case "path":
			e.decodeField(r, 10)
		case "payload":
			e.decodeField(r, 11)
		case "comment":
			e.decodeField(r, 12)
		case "sequence":
			e.decodeField(r, 13)
		default:
			var buf [32]byte
			switch string(FoldJSONName(buf[:0], key)) {
			case "ID":
				e.decodeField(r, 0)
			case "KIND":
				e.decodeField(r, 1)
			case "SOURCE":
				e.decodeField(r, 2)
			case "COUNT":
				e.decodeField(r, 3)
			case "SCORE":
				e.decodeField(r, 4)
			case "RATIO":
				e.decodeField(r, 5)
			case "ACTIVE":
				e.decodeField(r, 6)
			case "AT":
				e.decodeField(r, 7)
			case "TAGS":
				e.decodeField(r, 8)
			case "WHERE":
				e.decodeField(r, 9)
			case "PATH":
				e.decodeField(r, 10)
			case "PAYLOAD":
				e.decodeField(r, 11)
			case "COMMENT":
				e.decodeField(r, 12)
			case "SEQUENCE":
				e.decodeField(r, 13)
			default:
				r.Skip()
			}
		}
	}
}

func (e *jbEvent) decodeField(r *JSONReader, f int) {
	switch f {
	case 0:
		if v, ok := r.Int("Go struct field jbEvent.id of type int64", 64); ok {
			e.ID = v
		}
	case 1:
		if v, ok := r.String("Go struct field jbEvent.kind of type string"); ok {
			e.Kind = v
		}
	case 2:
		if v, ok := r.String("Go struct field jbEvent.source of type string"); ok {
			e.Source = v
		}
	case 3:
		if v, ok := r.Uint("Go struct field jbEvent.count of type uint32", 32); ok {
			e.Count = uint32(v)
		}
	case 4:
		if v, ok := r.Float("Go struct field jbEvent.score of type float64", 64); ok {
			e.Score = v
		}
	case 5:
		if v, ok := r.Float("Go struct field jbEvent.ratio of type float32", 32); ok {
			e.Ratio = float32(v)
		}
	case 6:
		if v, ok := r.Bool("Go struct field jbEvent.active of type bool"); ok {
			e.Active = v
		}
	case 7:
		if v, ok := r.Time("Go struct field jbEvent.at of type time.Time"); ok {
			e.At = v
		}
	case 8:
		if r.Null() {
			e.Tags = nil
		} else if r.BeginArray("Go struct field jbEvent.tags of type []string") {
			i := 0
			for r.NextElement() {
				e.Tags = jtGrowAt(e.Tags, i)
				if v, ok := r.String("Go struct field jbEvent.tags of type string"); ok {
					e.Tags[i] = v
				}
				i++
			}
			e.Tags = e.Tags[:i]
			if i == 0 {
				e.Tags = []string{}
			}
		}
	case 9:
		e.Where.decode(r, jbWhereTargets, "Go struct field jbEvent.where of type codec.jbPoint")
	case 10:
		if r.Null() {
			e.Path = nil
		} else if r.BeginArray("Go struct field jbEvent.path of type []codec.jbPoint") {
			i := 0
			for r.NextElement() {
				e.Path = jtGrowAt(e.Path, i)
				e.Path[i].decode(r, jbPathTargets, "Go struct field jbEvent.path of type codec.jbPoint")
				i++
			}
			e.Path = e.Path[:i]
			if i == 0 {
				e.Path = []jbPoint{}
			}
		}
	case 11:
		if r.Null() {
			e.Payload = nil
		} else if v, ok := r.Bytes("Go struct field jbEvent.payload of type []uint8"); ok {
			e.Payload = v
		}
	case 12:
		if v, ok := r.String("Go struct field jbEvent.comment of type string"); ok {
			e.Comment = v
		}
	case 13:
		if r.Null() {
			e.Sequence = nil
		} else if r.BeginArray("Go struct field jbEvent.sequence of type []int64") {
			i := 0
			for r.NextElement() {
				e.Sequence = jtGrowAt(e.Sequence, i)
				if v, ok := r.Int("Go struct field jbEvent.sequence of type int64", 64); ok {
					e.Sequence[i] = v
				}
				i++
			}
			e.Sequence = e.Sequence[:i]
			if i == 0 {
				e.Sequence = []int64{}
			}
		}
	}
}

// jbPointTargets are the targets for jbPoint's fields by the path that
// leads to it, built once: targets are passed on every call, so generated
// code must not build them as it goes.
var jbPointTargets = map[string]*[3]string{}

func jbPointTargetsFor(path string) *[3]string {
	t := &[3]string{
		"Go struct field jbPoint." + path + ".lat of type float64",
		"Go struct field jbPoint." + path + ".lon of type float64",
		"Go struct field jbPoint." + path + ".name of type string",
	}
	jbPointTargets[path] = t
	return t
}

var (
	jbWhereTargets = jbPointTargetsFor("where")
	jbPathTargets  = jbPointTargetsFor("path")
)

func (p *jbPoint) decode(r *JSONReader, targets *[3]string, target string) {
	if !r.BeginObject(target) {
		return
	}
	for {
		key, ok := r.NextKey()
		if !ok {
			return
		}
		switch string(key) {
		case "lat":
			if v, ok := r.Float(targets[0], 64); ok {
				p.Lat = v
			}
		case "lon":
			if v, ok := r.Float(targets[1], 64); ok {
				p.Lon = v
			}
		case "name":
			if v, ok := r.String(targets[2]); ok {
				p.Name = v
			}
		default:
			var buf [32]byte
			switch string(FoldJSONName(buf[:0], key)) {
			case "LAT", "LON", "NAME":
				// Not expected in the benchmark input.
				r.Skip()
			default:
				r.Skip()
			}
		}
	}
}

// TestJSONBenchCodecMatches checks that the benchmark codec agrees with
// encoding/json, so that the benchmarks compare like with like.
func TestJSONBenchCodecMatches(t *testing.T) {
	e := jbSample()
	plain := jbEventPlain(e)
	want, err := json.Marshal(&plain)
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.MarshalJSON()
	if err != nil || string(got) != string(want) {
		t.Fatalf("MarshalJSON:\n got %s\nwant %s", got, want)
	}
	var back jbEvent
	if err := back.UnmarshalJSON(want); err != nil {
		t.Fatal(err)
	}
	var wback jbEventPlain
	if err := json.Unmarshal(want, &wback); err != nil {
		t.Fatal(err)
	}
	pooled, err := MarshalJSONOf(&e)
	if err != nil || string(pooled) != string(want) || len(pooled) != cap(pooled) && cap(pooled) > len(pooled)+64 {
		t.Fatalf("MarshalJSONOf: %s, %v", pooled, err)
	}
	again, _ := back.MarshalJSON()
	wagain, _ := json.Marshal(&wback)
	if string(again) != string(wagain) {
		t.Fatalf("round trip:\n got %s\nwant %s", again, wagain)
	}
}

func BenchmarkJSONWriterEvent(b *testing.B) {
	e := jbSample()
	plain := jbEventPlain(e)
	size, _ := json.Marshal(&plain)
	// AppendJSON into a reused buffer, as a stream writer does.
	b.Run("streamgen_append", func(b *testing.B) {
		b.SetBytes(int64(len(size)))
		b.ReportAllocs()
		buf := make([]byte, 0, 1024)
		for b.Loop() {
			var err error
			if buf, err = e.appendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	// MarshalJSON: a new buffer sized by the running estimate.
	b.Run("streamgen", func(b *testing.B) {
		b.SetBytes(int64(len(size)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Appending to nil, which grows the buffer as it goes.
	b.Run("streamgen_nil", func(b *testing.B) {
		b.SetBytes(int64(len(size)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.appendJSON(nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	// MarshalJSONOf: a pooled buffer and one copy, as encoding/json does.
	b.Run("streamgen_pooled", func(b *testing.B) {
		b.SetBytes(int64(len(size)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := MarshalJSONOf(&e); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(size)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&plain); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkJSONReaderEvent(b *testing.B) {
	e := jbSample()
	plain := jbEventPlain(e)
	doc, _ := json.Marshal(&plain)
	b.Run("streamgen", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			var v jbEvent
			if err := v.UnmarshalJSON(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			var v jbEventPlain
			if err := json.Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkJSONReaderSkip compares checking and skipping a document of any
// shape with json.Valid.
func BenchmarkJSONReaderSkip(b *testing.B) {
	e := jbSample()
	plain := jbEventPlain(e)
	one, _ := json.Marshal(&plain)
	doc := []byte("[" + strings.Repeat(string(one)+",", 20) + string(one) + "]")
	b.Run("streamgen", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		var r JSONReader
		for b.Loop() {
			r.Reset(doc)
			r.Skip()
			if r.Finish() != nil {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		for b.Loop() {
			if !json.Valid(doc) {
				b.Fatal("invalid")
			}
		}
	})
}

var jbStrings = map[string]string{
	"ascii":   "The quick brown fox jumps over the lazy dog, again and again, 0123456789 times.",
	"escaped": "line one\nline \"two\"\t<b>bold</b> & more\\stuff\r\n",
	"unicode": "Größenwahn café naïve 日本語のテキスト emoji 😀 and \u2028 separators",
	"long":    strings.Repeat("abcdefghijklmnopqrstuvwxyz ", 40),
}

func BenchmarkAppendJSONString(b *testing.B) {
	for _, name := range []string{"ascii", "escaped", "unicode", "long"} {
		s := jbStrings[name]
		b.Run(name+"/streamgen", func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			buf := make([]byte, 0, 2*len(s)+16)
			for b.Loop() {
				buf = AppendJSONString(buf[:0], s)
			}
		})
		b.Run(name+"/encoding_json", func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := json.Marshal(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkJSONReaderString(b *testing.B) {
	for _, name := range []string{"ascii", "escaped", "unicode", "long"} {
		doc, _ := json.Marshal(jbStrings[name])
		b.Run(name+"/streamgen", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			var r JSONReader
			for b.Loop() {
				r.Reset(doc)
				if _, ok := r.String("T"); !ok {
					b.Fatal("not ok")
				}
			}
		})
		b.Run(name+"/encoding_json", func(b *testing.B) {
			b.SetBytes(int64(len(doc)))
			b.ReportAllocs()
			for b.Loop() {
				var s string
				if err := json.Unmarshal(doc, &s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkJSONReaderNumbers(b *testing.B) {
	doc := []byte(`[1,-22,333,4444,-55555,666666,7777777,88888888,999999999,1234567890123,0.5,-1.25,3.14159265358979,1e-7,6.02214076e23,-0.0001]`)
	b.Run("streamgen", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		var r JSONReader
		var sink float64
		for b.Loop() {
			r.Reset(doc)
			r.BeginArray("T")
			for r.NextElement() {
				v, _ := r.Float("T", 64)
				sink += v
			}
			if r.Finish() != nil {
				b.Fatal("bad")
			}
		}
		_ = sink
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.SetBytes(int64(len(doc)))
		b.ReportAllocs()
		v := make([]float64, 0, 32)
		for b.Loop() {
			v = v[:0]
			if err := json.Unmarshal(doc, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}
