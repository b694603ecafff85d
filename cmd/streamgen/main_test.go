package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHelpExplainsEveryFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-h"}, &out, &errOut); code != 0 {
		t.Fatalf("-h exited %d", code)
	}
	for _, want := range []string{"usage: streamgen", "-check", "-v", "//streamgen:record", "//streamgen:processor", "time=none|processing|event", "typed.TransformWithState", `stream:"id=N"`, `stream:"required"`, "go:generate"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("help does not mention %q:\n%s", want, errOut.String())
		}
	}
}

func TestCheckReportsStaleOutput(t *testing.T) {
	// The committed output of the repository's own packages is current.
	var out, errOut bytes.Buffer
	if code := run([]string{"-check", "../../generated/..."}, &out, &errOut); code != 0 {
		t.Fatalf("-check on the committed output exited %d: %s", code, errOut.String())
	}

	// A copy whose output was edited is stale.
	dir, err := os.MkdirTemp("../../gen/testdata", "scratch-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	for _, f := range []string{"basic.go", "streamgen_gen.go"} {
		b, err := os.ReadFile(filepath.Join("../../gen/testdata/golden/basic", f))
		if err != nil {
			t.Fatal(err)
		}
		if f == "streamgen_gen.go" {
			b = append(b, "\n// edited\n"...)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	errOut.Reset()
	if code := run([]string{"-check", dir}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "is stale") {
		t.Fatalf("-check on stale output exited %d: %s", code, errOut.String())
	}
	edited, _ := os.ReadFile(filepath.Join(dir, "streamgen_gen.go"))
	if !bytes.HasSuffix(edited, []byte("// edited\n")) {
		t.Fatal("-check wrote a file")
	}

	// Without -check it is rewritten, and a second run is quiet.
	out.Reset()
	if code := run([]string{"-v", dir}, &out, &errOut); code != 0 || !strings.Contains(out.String(), "wrote") {
		t.Fatalf("regenerating exited %d: %s %s", code, out.String(), errOut.String())
	}
	out.Reset()
	if code := run([]string{"-v", dir}, &out, &errOut); code != 0 || out.Len() != 0 {
		t.Fatalf("second run exited %d and printed %q", code, out.String())
	}
}

func TestErrorsExitNonZero(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"../../gen/testdata/errors/all"}, &out, &errOut); code != 1 || !strings.Contains(errOut.String(), "all.go:7:2: Chan.C: channels cannot be encoded") {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
}
