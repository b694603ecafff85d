package generator

import (
	"bufio"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/streamgen/streamgen/bench/nexmark/model"
)

// TestMerged checks that the merged stream is the splits' events taken
// round-robin, the last split's remainder at the end.
func TestMerged(t *testing.T) {
	cfg := Config{Events: 1003, Generators: 4}
	var splits [][]byte // JSON lines of each split's events, in order
	for s := range 4 {
		splits = append(splits, jsonStream(t, cfg, s, 1<<30))
	}
	var want []byte
	lines := make([][][]byte, 4)
	for s := range splits {
		lines[s] = splitLines(splits[s])
	}
	for k := 0; ; k++ {
		more := false
		for s := range lines {
			if k < len(lines[s]) {
				want = append(want, lines[s][k]...)
				more = true
			}
		}
		if !more {
			break
		}
	}
	m := NewMerged(cfg)
	var e model.Event
	var got []byte
	var err error
	n := 0
	for m.Next(&e) {
		if got, err = AppendJSONLine(got, &e); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != 1003 || string(got) != string(want) {
		t.Errorf("merged stream of %d events differs from the round-robin of the splits", n)
	}
	if m.Next(&e) {
		t.Error("Next after the end returned true")
	}
}

// splitLines cuts b into lines, each with its newline.
func splitLines(b []byte) [][]byte {
	var lines [][]byte
	for len(b) > 0 {
		i := slices.Index(b, '\n') + 1
		lines = append(lines, b[:i])
		b = b[i:]
	}
	return lines
}

// TestWriteFiles writes a stream of 2 generators to files and reads them
// back: names in order, eventsPerFile events per file, lines that decode
// to the merged stream, with non-decreasing dateTime, and no temporary
// file left.
func TestWriteFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	cfg := Config{Events: 2_500, Generators: 2}
	if err := WriteFiles(cfg, dir, 1_000); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"events-000000.json", "events-000001.json", "events-000002.json"}; !slices.Equal(names, want) {
		t.Fatalf("files %q, want %q", names, want)
	}

	m := NewMerged(cfg)
	var want, got model.Event
	var prev model.Event
	n := 0
	for i, name := range names {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		lines := 0
		for sc.Scan() {
			got = model.Event{}
			if err := got.UnmarshalJSON(sc.Bytes()); err != nil {
				t.Fatalf("%s line %d: %v", name, lines+1, err)
			}
			if !m.Next(&want) {
				t.Fatalf("%s: more events than the stream", name)
			}
			if d := diffEvents(&got, &want); len(d) > 0 {
				t.Fatalf("%s line %d: %v", name, lines+1, d)
			}
			if n > 0 && got.Time().Before(prev.Time()) {
				t.Fatalf("%s line %d: dateTime %v before %v", name, lines+1, got.Time(), prev.Time())
			}
			prev, got = got, prev
			lines++
			n++
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		if wantLines := min(1_000, 2_500-1_000*i); lines != wantLines {
			t.Errorf("%s: %d events, want %d", name, lines, wantLines)
		}
	}
	if n != 2_500 {
		t.Errorf("%d events, want 2500", n)
	}

	if err := WriteFiles(Config{}, dir, 10); err == nil {
		t.Error("WriteFiles of an unbounded stream did not fail")
	}
	if err := WriteFiles(cfg, dir, 0); err == nil {
		t.Error("WriteFiles of 0 events per file did not fail")
	}
}
