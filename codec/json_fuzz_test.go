package codec

import (
	"encoding/json"
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
