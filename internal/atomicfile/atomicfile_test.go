package atomicfile_test

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/internal/atomicfile"
)

// crashDirEnv, when set in a test process's environment, makes
// TestRemoveStale a process that dies in the middle of a Replace in that
// directory.
const crashDirEnv = "ATOMICFILE_TEST_CRASH_DIR"

// crashExit is the exit code of the process that dies within Replace.
const crashExit = 3

func list(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func writeFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o666); err != nil {
			t.Fatal(err)
		}
	}
}

func TestReplace(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new")
	write := func(s string) func(io.Writer) error {
		return func(w io.Writer) error { _, err := io.WriteString(w, s); return err }
	}
	if err := atomicfile.Replace(dir, "a.json", write("one")); err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Replace(dir, "a.json", write("two")); err != nil {
		t.Fatal(err)
	}
	// A failed write leaves the file as it was, and no temporary file.
	fail := errors.New("fail")
	if err := atomicfile.Replace(dir, "a.json", func(w io.Writer) error { io.WriteString(w, "three"); return fail }); err != fail {
		t.Errorf("Replace with a failing write: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "a.json")); err != nil || string(got) != "two" {
		t.Errorf("a.json = %q, %v; want %q", got, err, "two")
	}
	if got := list(t, dir); !slices.Equal(got, []string{"a.json"}) {
		t.Errorf("dir holds %q, want only a.json", got)
	}
}

// TestRemoveStale runs a process that dies while Replace writes, and
// removes the temporary file it leaves, among hidden files that look like
// one but are not.
func TestRemoveStale(t *testing.T) {
	if dir := os.Getenv(crashDirEnv); dir != "" {
		atomicfile.Replace(dir, "dead-letters-0000000001.jsonl", func(w io.Writer) error {
			io.WriteString(w, "half")
			os.Exit(crashExit)
			return nil
		})
		t.Fatal("Replace returned")
	}

	dir := t.TempDir()
	others := []string{
		".hidden",
		".dead-letters-0000000001.jsonl-1234567890", // the old temporary names, indistinguishable from a user's
		".streamgen-tmp-",                             // no name, no suffix
		".streamgen-tmp--0123456789abcdef",            // no name
		".streamgen-tmp-a.json",                       // no suffix
		".streamgen-tmp-a.json-0123456789abcde",       // suffix one short
		".streamgen-tmp-a.json-0123456789abcdef0",     // one long
		".streamgen-tmp-a.json-0123456789ABCDEF",      // not lowercase
		".streamgen-tmp-a.json-0123456789abcdeg",      // not hexadecimal
		".streamgen-tmp-a.json_0123456789abcdef",      // no "-"
		"streamgen-tmp-a.json-0123456789abcdef",       // not hidden
		"x.streamgen-tmp-a.json-0123456789abcdef",     // prefix not at the start
		".streamgen-tmp-a.json-0123456789abcdef.json", // more after the suffix
		"dead-letters-0000000001.jsonl",               // the file replaced
	}
	writeFiles(t, dir, others...)
	// A directory and a link named like temporary files are not.
	if err := os.Mkdir(filepath.Join(dir, ".streamgen-tmp-dir-0123456789abcdef"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".hidden", filepath.Join(dir, ".streamgen-tmp-link-0123456789abcdef")); err != nil {
		t.Fatal(err)
	}
	keep := list(t, dir)

	cmd := exec.Command(os.Args[0], "-test.run=^TestRemoveStale$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != crashExit {
		t.Fatalf("crashing process: %v\n%s", err, out)
	}
	var stale []string
	for _, name := range list(t, dir) {
		if !slices.Contains(keep, name) {
			stale = append(stale, name)
		}
	}
	if len(stale) != 1 || !strings.HasPrefix(stale[0], ".streamgen-tmp-dead-letters-0000000001.jsonl-") {
		t.Fatalf("the crash left %q, want one temporary file", stale)
	}

	if err := atomicfile.RemoveStale(dir); err != nil {
		t.Fatal(err)
	}
	if got := list(t, dir); !slices.Equal(got, keep) {
		t.Errorf("after RemoveStale dir holds\n%q\nwant\n%q", got, keep)
	}
	// Nothing more to remove, and the file replaced is as it was.
	if err := atomicfile.RemoveStale(dir); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "dead-letters-0000000001.jsonl")); err != nil || string(got) != "dead-letters-0000000001.jsonl" {
		t.Errorf("the file replaced = %q, %v", got, err)
	}
	if err := atomicfile.RemoveStale(filepath.Join(dir, "missing")); err != nil {
		t.Errorf("RemoveStale of a missing dir: %v", err)
	}
}
