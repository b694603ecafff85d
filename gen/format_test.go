package gen

import (
	"bytes"
	"crypto/sha256"
	"go/format"
	"os"
	"path/filepath"
	"testing"
)

// TestFormatOutput: the output is gofmt's whether or not a note from an
// earlier run exists, matches, or is stale, and a note is only trusted
// together with the file on disk it describes.
func TestFormatOutput(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	path := filepath.Join(t.TempDir(), OutputFile)
	src := []byte("package p\nfunc  f( ) {\nreturn }\n")
	want, err := format.Source(src)
	if err != nil {
		t.Fatal(err)
	}
	check := func(stage string, src, want []byte) {
		t.Helper()
		got, err := formatOutput(path, src)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: got %q, %v; want %q", stage, got, err, want)
		}
	}
	check("no note, no file", src, want)
	os.WriteFile(path, want, 0o644)
	check("note and file", src, want)
	os.WriteFile(path, append(append([]byte{}, want...), "// edited\n"...), 0o644)
	check("file edited since", src, want)
	other := []byte("package p\nvar  x=1\n")
	wantOther, _ := format.Source(other)
	check("other source", other, wantOther)
	os.Remove(path)
	check("file removed", src, want)

	// The note is what saves the formatting: one that names other content
	// for this source is believed when the file holds that content.
	forged := []byte("package p // not gofmt's output\n")
	key, sum := sourceKey(src), sha256.Sum256(forged)
	writeNote(formatNotePath(path), append(key[:], sum[:]...))
	os.WriteFile(path, forged, 0o644)
	check("forged note", src, forged)

	if _, err := formatOutput(path, []byte("package p\nfunc {")); err == nil {
		t.Fatal("source that does not parse: no error")
	}
}
