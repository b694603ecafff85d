package runtime_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/streamgen/streamgen/runtime"
)

func letters(n int, tag string) []runtime.DeadLetter {
	var l []runtime.DeadLetter
	for i := range n {
		l = append(l, runtime.DeadLetter{
			Source:   "files:in",
			Position: tag + ".json:" + string(rune('1'+i)),
			Error:    "streamgen: bad <json> & more",
			Raw:      `{"x":` + tag + "\n",
		})
	}
	return l
}

// readLetterFile is the test's own reading of a dead-letter file.
func readLetterFile(t *testing.T, path string) []runtime.DeadLetter {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(string(data), "\n") {
		t.Errorf("%s does not end in a newline", path)
	}
	var got []runtime.DeadLetter
	for _, line := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
		var l runtime.DeadLetter
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("%s: line %q: %v", path, line, err)
		}
		got = append(got, l)
	}
	return got
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n []string
	for _, e := range entries {
		n = append(n, e.Name())
	}
	return n
}

func TestDeadLetterDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "dead") // created on first write
	sink := runtime.DeadLetterDir(dir)

	if err := sink.WriteDeadLetters(ctx, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("a batch without letters created %s (%v)", dir, err)
	}
	if err := sink.WriteDeadLetters(ctx, 7, letters(2, "a")); err != nil {
		t.Fatal(err)
	}
	if err := sink.WriteDeadLetters(ctx, 12, letters(1, "b")); err != nil {
		t.Fatal(err)
	}
	// Batch 7 again, as after a failure: its file is replaced.
	if err := sink.WriteDeadLetters(ctx, 7, letters(3, "c")); err != nil {
		t.Fatal(err)
	}
	want := []string{"dead-letters-0000000007.jsonl", "dead-letters-0000000012.jsonl"}
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("files %q, want %q (no temporary files left)", got, want)
	}
	if got := readLetterFile(t, filepath.Join(dir, want[0])); !slices.Equal(got, letters(3, "c")) {
		t.Errorf("batch 7: %+v", got)
	}
	if got := readLetterFile(t, filepath.Join(dir, want[1])); !slices.Equal(got, letters(1, "b")) {
		t.Errorf("batch 12: %+v", got)
	}
	// HTML characters are written as they are.
	data, _ := os.ReadFile(filepath.Join(dir, want[1]))
	if !strings.Contains(string(data), "bad <json> & more") {
		t.Errorf("escaped HTML: %s", data)
	}
	// Batch 12 again with no letters: its old file goes.
	if err := sink.WriteDeadLetters(ctx, 12, nil); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, dir); !slices.Equal(got, want[:1]) {
		t.Errorf("after an empty rewrite: %q", got)
	}
	if err := sink.WriteDeadLetters(ctx, -1, letters(1, "d")); err == nil || !strings.HasPrefix(err.Error(), "streamgen: ") {
		t.Errorf("negative batch id: %v", err)
	}
}

// TestDeadLetterDirReadByFiles reads dead letters back with a Files source,
// which must not see the sink's temporary files.
func TestDeadLetterDirReadByFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sink := runtime.DeadLetterDir(dir)
	writeFile(t, dir, ".dead-letters-0000000009.jsonl-123", "partial")
	for id := int64(10); id >= 8; id-- {
		if err := sink.WriteDeadLetters(ctx, id, letters(int(id-7), "x")); err != nil {
			t.Fatal(err)
		}
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	var got []runtime.DeadLetter
	for _, r := range readAll(t, src, nil, available(t, src)) {
		var l runtime.DeadLetter
		if err := json.Unmarshal(r.Data, &l); err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	want := slices.Concat(letters(1, "x"), letters(2, "x"), letters(3, "x"))
	if !slices.Equal(got, want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}
}

func TestDeadLetterMemory(t *testing.T) {
	ctx := context.Background()
	m := runtime.DeadLetterMemory()
	var sink runtime.DeadLetterSink = m
	var wg sync.WaitGroup
	wg.Go(func() {
		for range 100 {
			_ = m.Letters()
		}
	})
	for _, w := range []struct {
		id      int64
		letters []runtime.DeadLetter
	}{{5, letters(2, "a")}, {2, letters(1, "b")}, {9, letters(1, "c")}, {5, letters(1, "d")}, {9, nil}} {
		if err := sink.WriteDeadLetters(ctx, w.id, w.letters); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	want := slices.Concat(letters(1, "b"), letters(1, "d"))
	if got := m.Letters(); !slices.Equal(got, want) {
		t.Errorf("Letters = %+v, want %+v", got, want)
	}
	// The sink kept a copy: changing what was written changes nothing.
	in := letters(1, "e")
	_ = sink.WriteDeadLetters(ctx, 1, in)
	in[0].Error = "changed"
	if got := m.Letters(); got[0].Error == "changed" {
		t.Error("Letters shares the caller's slice")
	}
}

// TestBatchFilesRemovesStaleTemporaries: temporary files that a crashed
// writer left in the directory are removed at the first write; other
// hidden files stay.
func TestBatchFilesRemovesStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, ".streamgen-tmp-part-0000000003.jsonl-0123456789abcdef")
	other := filepath.Join(dir, ".keep")
	for _, p := range []string{stale, other} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f := runtime.NewBatchFiles(dir, "part-")
	if err := f.Write(context.Background(), 4, false, func(w io.Writer) error { _, err := io.WriteString(w, "row\n"); return err }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("stale temporary file: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("another hidden file was removed: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "part-0000000004.jsonl")); err != nil || string(b) != "row\n" {
		t.Fatalf("batch file: %q, %v", b, err)
	}
}

// TestDeadLetterDirKeepsBinaryBytes: a record whose bytes are not UTF-8
// (a Confluent value: magic byte, schema id 200, then a body with a byte
// 0xFF) is kept byte for byte in the dead-letter file, base64-encoded as
// rawBase64; a text record stays a readable raw string, its <, > and &
// as they are; a tombstone (no value) stays one, apart from a value of no
// bytes.
func TestDeadLetterDirKeepsBinaryBytes(t *testing.T) {
	dir := t.TempDir()
	binary := string([]byte{0x00, 0x00, 0x00, 0x00, 0xC8, '{', '"', 'a', '"', ':', 0xFF, '}'})
	text := `{"a": "<b> & c"}`
	in := []runtime.DeadLetter{
		{Source: "kafka:t", Position: "t/0@5", Error: "bad", Raw: binary},
		{Source: "kafka:t", Position: "t/0@6", Error: "bad", Raw: text},
		{Source: "kafka:t", Position: "t/0@7", Error: "bad", NoValue: true},
		{Source: "kafka:t", Position: "t/0@8", Error: "bad"},
	}
	if err := runtime.DeadLetterDir(dir).WriteDeadLetters(context.Background(), 0, in); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "dead-letters-0000000000.jsonl")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), data)
	}
	var first map[string]string
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	got, err := base64.StdEncoding.DecodeString(first["rawBase64"])
	if _, hasRaw := first["raw"]; err != nil || hasRaw || string(got) != binary {
		t.Errorf("the binary letter's line %s: rawBase64 decodes to % x (%v), want % x and no raw", lines[0], got, err, binary)
	}
	if want := `"raw":"{\"a\": \"<b> & c\"}"`; !strings.Contains(lines[1], want) {
		t.Errorf("the text letter's line %s, want it to hold %s", lines[1], want)
	}
	if !strings.Contains(lines[2], `"noValue":true`) || strings.Contains(lines[3], "noValue") {
		t.Errorf("a tombstone's letter %s and an empty value's %s: want noValue in the first only", lines[2], lines[3])
	}
	if back := readLetterFile(t, path); !slices.Equal(back, in) {
		t.Errorf("read back %+v, want %+v", back, in)
	}
}

// FuzzDeadLetterJSON: any letter written as JSON reads back as it was.
func FuzzDeadLetterJSON(f *testing.F) {
	f.Add("kafka:t", "t/0@5", "bad", "{\"a\": \"<b> & c\"}", false)
	f.Add("files:in", "a.json:3", "line too long", "\x00\x00\x00\x00\xc8{\xff}", false)
	f.Add("kafka:t", "t/1@0", "unexpected end", "", true)
	f.Fuzz(func(t *testing.T, source, position, why, raw string, noValue bool) {
		l := runtime.DeadLetter{Source: source, Position: position, Error: why, Raw: raw, NoValue: noValue && raw == ""}
		data, err := l.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON(%+v): %v", l, err)
		}
		var back runtime.DeadLetter
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatalf("%s does not read back: %v", data, err)
		}
		// JSON strings hold valid UTF-8: the other fields' invalid
		// bytes become U+FFFD each, as encoding/json writes them; Raw's
		// are kept, base64-encoded.
		want := l
		want.Source, want.Position, want.Error = string([]rune(source)), string([]rune(position)), string([]rune(why))
		if back != want {
			t.Fatalf("%s read back as %+v, want %+v", data, back, want)
		}
	})
}
