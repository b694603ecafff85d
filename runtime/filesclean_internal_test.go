package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestArchiveAcrossFileSystems: where a file cannot be linked into the
// archive (another file system), it is copied, whole, and the original
// removed; a copy a crash left (the same bytes) will do, and a file of
// other bytes is never replaced.
func TestArchiveAcrossFileSystems(t *testing.T) {
	linkFile = func(src, dst string) error {
		if strings.HasSuffix(src, ".archiving") {
			return os.Link(src, dst) // within the archive
		}
		return &os.LinkError{Op: "link", Old: src, New: dst, Err: syscall.EXDEV}
	}
	defer func() { linkFile = os.Link }()
	tmp := t.TempDir()
	in, archive := filepath.Join(tmp, "in"), filepath.Join(tmp, "archive")
	write := func(path, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o666); err != nil {
			t.Fatal(err)
		}
	}
	big := strings.Repeat(`{"x":"0123456789"}`+"\n", 20000) // several copy buffers
	write(filepath.Join(in, "a.json"), big)
	write(filepath.Join(in, "b.json"), "{}\n")
	write(filepath.Join(archive, "b.json"), "{}\n") // a crash's finished copy
	write(filepath.Join(in, "c.json"), `{"c":1}`+"\n")
	write(filepath.Join(archive, "c.json"), `{"c":2}`+"\n") // another file
	src := FilesSource(in, FilesOptions{CleanSource: CleanArchive, ArchiveDir: archive}).(*filesSource)
	src.archiveFiles([]string{"a.json", "b.json", "c.json"})
	for name, want := range map[string]string{"a.json": big, "b.json": "{}\n", "c.json": `{"c":2}` + "\n"} {
		got, err := os.ReadFile(filepath.Join(archive, name))
		if err != nil || string(got) != want {
			t.Errorf("archived %s: %d bytes, %v; want %d bytes", name, len(got), err, len(want))
		}
	}
	entries, err := os.ReadDir(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "c.json" {
		t.Errorf("the source directory holds %v, want c.json alone", entries)
	}
	entries, err = os.ReadDir(archive)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 3 {
		t.Errorf("the archive holds %v, want a.json, b.json and c.json (no copy left under a hidden name)", entries)
	}
}

// TestArchiveWithoutHardLinks: on an archive file system without hard
// links, a file is copied and renamed into place.
func TestArchiveWithoutHardLinks(t *testing.T) {
	linkFile = func(src, dst string) error {
		return &os.LinkError{Op: "link", Old: src, New: dst, Err: syscall.EPERM}
	}
	defer func() { linkFile = os.Link }()
	tmp := t.TempDir()
	in, archive := filepath.Join(tmp, "in"), filepath.Join(tmp, "archive")
	if err := os.MkdirAll(in, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(in, "a.json"), []byte("{}\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	src := FilesSource(in, FilesOptions{CleanSource: CleanArchive, ArchiveDir: archive}).(*filesSource)
	src.archiveFiles([]string{"a.json"})
	if got, err := os.ReadFile(filepath.Join(archive, "a.json")); err != nil || string(got) != "{}\n" {
		t.Fatalf("archived a.json: %q, %v", got, err)
	}
	if _, err := os.Stat(filepath.Join(in, "a.json")); !os.IsNotExist(err) {
		t.Fatalf("a.json is still in the source: %v", err)
	}
	if entries, _ := os.ReadDir(archive); len(entries) != 1 {
		t.Fatalf("the archive holds %v", entries)
	}
}
