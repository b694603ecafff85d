package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestMkdirAllSyncsParents: the directories MkdirAll creates are each
// named in a synced parent, so that a crash after a file in the deepest
// was synced does not lose the path to it; a directory that was there is
// not synced again.
func TestMkdirAllSyncsParents(t *testing.T) {
	root := t.TempDir()
	var synced []string
	syncDir = func(dir string) error {
		synced = append(synced, dir)
		return SyncDir(dir)
	}
	defer func() { syncDir = SyncDir }()
	dir := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		t.Fatalf("%s: %v", dir, err)
	}
	want := []string{filepath.Join(root, "a", "b"), filepath.Join(root, "a"), root}
	if !slices.Equal(synced, want) {
		t.Fatalf("synced %q, want %q", synced, want)
	}
	// Replace makes its directory so too, then syncs it for the file.
	synced = nil
	other := filepath.Join(root, "x", "y")
	if err := Replace(other, "f", func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join(root, "x"), root, other}; !slices.Equal(synced, want) {
		t.Fatalf("a write into a new directory synced %q, want %q", synced, want)
	}
	synced = nil
	if err := Replace(other, "g", func(w io.Writer) error { _, err := io.WriteString(w, "x"); return err }); err != nil {
		t.Fatal(err)
	}
	if want := []string{other}; !slices.Equal(synced, want) {
		t.Fatalf("a write into a directory that was there synced %q, want %q", synced, want)
	}
}
