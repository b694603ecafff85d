// Package clitest helps the examples' tests: it runs an example's main
// with several batch splits and restarts, and reads its output files.
package clitest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/examples/internal/cli"
)

// Mode is one way of running an example over the same input.
type Mode struct {
	Name string
	Args []string
	// Runs is how many times the example is started on the same
	// checkpoint (the last run goes to the end of the input).
	Runs int
	// FileByRun adds the sample's files to the input one per run, the
	// first before the first run: a Once trigger reads all it finds, as
	// Spark's, so this is how each run gets one batch of its own.
	FileByRun bool
}

// Modes are the batch splits and restarts every example is checked under.
var Modes = []Mode{
	{"all at once", nil, 1, false},
	{"one file per batch", []string{"-max-files-per-trigger", "1"}, 1, false},
	{"three files per batch", []string{"-max-files-per-trigger", "3"}, 1, false},
	{"a restart after every batch", []string{"-trigger", "once"}, 8, true},
}

// Run runs the example's run function in every mode over the built-in
// sample and calls check with each mode's output directory and a
// dead-letter directory. last are flags for the last run only.
func Run(t *testing.T, run func(args []string, stdout io.Writer) error, last []string, check func(t *testing.T, out, deadLetters string)) {
	sample := t.TempDir()
	if err := cli.WriteSample(sample); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(sample, "*"))
	slices.Sort(files)
	for _, m := range Modes {
		t.Run(m.Name, func(t *testing.T) {
			input := sample
			if m.FileByRun {
				input = t.TempDir()
				if len(files) != m.Runs {
					t.Fatalf("%d sample files for %d runs", len(files), m.Runs)
				}
			}
			out, ckpt, dead := t.TempDir(), t.TempDir(), t.TempDir()
			for i := range m.Runs {
				if m.FileByRun {
					data, err := os.ReadFile(files[i])
					if err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(input, filepath.Base(files[i])), data, 0o644); err != nil {
						t.Fatal(err)
					}
				}
				args := append([]string{"-input", input, "-output", out, "-checkpoint", ckpt, "-dead-letter", dead}, m.Args...)
				if i == m.Runs-1 {
					args = slices.DeleteFunc(args, func(a string) bool { return a == "-trigger" || a == "once" })
					args = append(args, last...)
				}
				if err := run(args, io.Discard); err != nil {
					t.Fatal(err)
				}
			}
			check(t, out, dead)
			// The sample's line cut short is a dead letter of the input,
			// once; a table read from the sample (devicestats') reports
			// its own copy once in each run.
			letters, _ := filepath.Glob(filepath.Join(dead, "*.jsonl"))
			var ofInput []string
			for _, f := range letters {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for line := range bytes.Lines(data) {
					var l struct{ Source, Position string }
					if err := json.Unmarshal(line, &l); err != nil {
						t.Fatalf("dead letter %s: %v", line, err)
					}
					if l.Source == "files:"+input {
						ofInput = append(ofInput, l.Position)
					}
				}
			}
			if !slices.Equal(ofInput, []string{"part-00003.jsonl:501"}) {
				t.Fatalf("dead letters of the input at %q (in %v), want the line cut short, part-00003.jsonl:501, once", ofInput, letters)
			}
		})
	}
}

// ReadOutput reads the JSON-lines files of dir, in name order.
func ReadOutput[T any, P codec.RecordPtr[T]](t *testing.T, dir string) []T {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	slices.Sort(files)
	var out []T
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var v T
			if err := P(&v).UnmarshalJSON(sc.Bytes()); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, v)
		}
	}
	return out
}
