package atomicfile

import (
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// syncRecorder notes the directories synced through it.
type syncRecorder struct {
	vfs.FS
	synced *[]string
}

func (r syncRecorder) OpenDir(name string) (vfs.File, error) {
	f, err := r.FS.OpenDir(name)
	return syncedDir{File: f, name: name, synced: r.synced}, err
}

type syncedDir struct {
	vfs.File
	name   string
	synced *[]string
}

func (d syncedDir) Sync() error {
	*d.synced = append(*d.synced, d.name)
	return d.File.Sync()
}

// TestMkdirAllSyncsParents: the directories MkdirAll creates are each
// named in a synced parent, so that a crash after a file in the deepest
// was synced does not lose the path to it; a directory that was there is
// not synced again.
func TestMkdirAllSyncsParents(t *testing.T) {
	root := t.TempDir()
	var synced []string
	dirFS = syncRecorder{FS: vfs.Default, synced: &synced}
	defer func() { dirFS = vfs.Default }()
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
