package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/streamgen/streamgen/examples/internal/clitest"
)

// plainCounts counts the events of the JSON-lines files of dir per action
// with a plain loop and encoding/json, skipping what the query refuses: a
// line that does not decode, or has no action.
func plainCounts(t *testing.T, dir string) finalCounts {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	counts := finalCounts{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var e struct {
				Action *string `json:"action"`
			}
			if json.Unmarshal(sc.Bytes(), &e) != nil || e.Action == nil {
				continue
			}
			counts[*e.Action]++
		}
	}
	return counts
}

// TestCountsMatchAPlainLoop runs the example on the first 20 files of the
// sample, adds the other 30 and runs it again on the same checkpoint, one
// or ten files per batch, with one or four concurrent handlers. The
// highest count written per action, and the table printed at the end, are
// the plain loop's counts over the 50 files; the output, batch by batch,
// is the same for any concurrency.
func TestCountsMatchAPlainLoop(t *testing.T) {
	all := t.TempDir()
	if err := writeSample(all); err != nil {
		t.Fatal(err)
	}
	want := plainCounts(t, all)
	if len(want) != 2 || want["Open"]+want["Close"] != sampleFiles*sampleRowsPerFile {
		t.Fatalf("the plain loop counts %v, want %d events of Open and Close", want, sampleFiles*sampleRowsPerFile)
	}
	var wantTable bytes.Buffer
	if err := want.print(&wantTable); err != nil {
		t.Fatal(err)
	}
	for _, maxFiles := range []string{"1", "10"} {
		var outputs [][]byte
		for _, concurrency := range []string{"1", "4"} {
			t.Run("max-files-per-trigger="+maxFiles+"/concurrency="+concurrency, func(t *testing.T) {
				input, out, checkpoint, dead := t.TempDir(), t.TempDir(), t.TempDir(), t.TempDir()
				args := []string{"-input", input, "-output", out, "-checkpoint", checkpoint, "-dead-letter", dead,
					"-max-files-per-trigger", maxFiles, "-concurrency", concurrency}
				if err := writeSampleFiles(input, 0, 20); err != nil {
					t.Fatal(err)
				}
				if err := run(args, io.Discard); err != nil {
					t.Fatal(err)
				}
				if err := writeSampleFiles(input, 20, sampleFiles); err != nil {
					t.Fatal(err)
				}
				var stdout bytes.Buffer
				if err := run(args, &stdout); err != nil {
					t.Fatal(err)
				}

				got := finalCounts{}
				got.add(0, clitest.ReadOutput[ActionCount](t, out))
				if !maps.Equal(got, want) {
					t.Errorf("highest count written per action: %v, want %v", got, want)
				}
				// The second run's batches hold both actions, so its table
				// has the totals.
				if stdout.String() != wantTable.String() {
					t.Errorf("the second run printed\n%s\nwant\n%s", &stdout, &wantTable)
				}
				letters, _ := filepath.Glob(filepath.Join(dead, "*.jsonl"))
				if len(letters) != 1 {
					t.Fatalf("dead-letter files: %v, want one", letters)
				}
				if data, _ := os.ReadFile(letters[0]); !bytes.Contains(data, []byte("part-00007.json:42")) {
					t.Errorf("dead letter: %s, want the row without an action, part-00007.json:42", data)
				}
				outputs = append(outputs, readAll(t, out))
			})
		}
		if len(outputs) == 2 && !bytes.Equal(outputs[0], outputs[1]) {
			t.Errorf("max-files-per-trigger %s: the output with four concurrent handlers differs from the one with one", maxFiles)
		}
	}
}

// readAll returns the output files of dir, in name order, end to end.
func readAll(t *testing.T, dir string) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	slices.Sort(files)
	var all []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}
