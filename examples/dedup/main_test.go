package main

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/generated/sensor"
)

// The example runs on its built-in sample, with readings delivered twice
// and late ones (cli.SampleWithDuplicates: 8 files), under several batch
// splits, and the last table it writes is compared with a plain loop over
// the same files, in the same batches, that models the watermark: a
// batch's watermark is the newest event time of the batches before it less
// Delay (none in the first batch), a reading at or before it is dropped,
// and of the others the first of each User and Creation_Time is counted.

// split is one way of cutting the input into batches.
type split struct {
	name string
	args []string
	// filesPerBatch is -max-files-per-trigger (0: every file in one
	// batch).
	filesPerBatch int
	// restarts runs the example once per input file, on the same
	// checkpoint, with the files so far in its input directory (a file
	// arrives between two runs), and a last run with no new file. (-trigger
	// once alone would not do: like Spark's Trigger.Once it takes all the
	// input in one batch, whatever -max-files-per-trigger says.)
	restarts bool
}

var splits = []split{
	{name: "all at once"},
	{name: "one file per batch", args: []string{"-max-files-per-trigger", "1"}, filesPerBatch: 1},
	{name: "three files per batch", args: []string{"-max-files-per-trigger", "3"}, filesPerBatch: 3},
	{name: "a restart after every batch", args: []string{"-trigger", "once"}, filesPerBatch: 1, restarts: true},
}

// runSplit runs the example on the files of all as s cuts them, on a new
// checkpoint and output directory, and returns the rows of each batch
// written, in batch order.
func runSplit(t *testing.T, all string, s split) [][]UserCount {
	t.Helper()
	input, out, ckpt, dead := all, t.TempDir(), t.TempDir(), t.TempDir()
	if s.restarts {
		input = t.TempDir()
	}
	args := append([]string{"-input", input, "-output", out, "-checkpoint", ckpt, "-dead-letter", dead}, s.args...)
	if s.restarts {
		files, _ := filepath.Glob(filepath.Join(all, "*.jsonl"))
		slices.Sort(files)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(input, filepath.Base(f)), data, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := run(args, io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		args = slices.DeleteFunc(args, func(a string) bool { return a == "-trigger" || a == "once" })
	}
	if err := run(args, io.Discard); err != nil {
		t.Fatal(err)
	}
	return readBatches(t, out)
}

// readBatches reads the output files of dir, one per batch that wrote
// rows, in batch order; it checks the JSON shape of every line.
func readBatches(t *testing.T, dir string) [][]UserCount {
	t.Helper()
	shape := regexp.MustCompile(`^\{"User":"[a-z]","count":[1-9][0-9]*\}$`)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	slices.Sort(files)
	var batches [][]UserCount
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rows []UserCount
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if !shape.Match(sc.Bytes()) {
				t.Fatalf("%s: a row not shaped as Spark's: %s", f, sc.Bytes())
			}
			var r UserCount
			if err := r.UnmarshalJSON(sc.Bytes()); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			rows = append(rows, r)
		}
		batches = append(batches, rows)
	}
	return batches
}

// batchesOf cuts files into batches of perBatch files (0: one batch),
// as -max-files-per-trigger does.
func batchesOf(files [][]sensor.Event, perBatch int) [][]sensor.Event {
	if perBatch == 0 {
		perBatch = len(files)
	}
	var batches [][]sensor.Event
	for chunk := range slices.Chunk(files, perBatch) {
		batches = append(batches, slices.Concat(chunk...))
	}
	return batches
}

// expected counts each user's distinct readings that are not late with a
// plain loop over the batches; it also returns how many readings were late
// and how many were copies. A batch's watermark is the newest reading of
// the batches before less Delay; a reading is late at or before the
// watermark of the batch before, across restarts too (a run of one
// batch, Trigger.Once, runs no batch without data).
func expected(files [][]sensor.Event, perBatch int) (counts map[string]int64, late, copies int) {
	counts = map[string]int64{}
	seen := map[Reading]bool{}
	var newest time.Time // of the batches so far; zero before the first
	var watermark time.Time
	for _, batch := range batchesOf(files, perBatch) {
		lateBy := watermark
		if !newest.IsZero() {
			watermark = newest.Add(-Delay)
		}
		for _, e := range batch {
			t := time.Unix(0, e.CreationTime).UTC()
			if !lateBy.IsZero() && !t.After(lateBy) {
				late++
				continue
			}
			if r := (Reading{User: e.User, CreationTime: e.CreationTime}); seen[r] {
				copies++
				continue
			} else {
				seen[r] = true
			}
			counts[e.User]++
		}
		for _, e := range batch {
			if t := time.Unix(0, e.CreationTime).UTC(); t.After(newest) {
				newest = t
			}
		}
	}
	return counts, late, copies
}

// TestDedupMatchesAPlainLoop: under each split, the last batch written is
// the whole table (Complete mode), one row per user, with the plain loop's
// counts; every batch is a whole table, so no user appears twice in one.
func TestDedupMatchesAPlainLoop(t *testing.T) {
	files := cli.SampleWithDuplicates()
	input := t.TempDir()
	if err := cli.WriteSampleWithDuplicates(input); err != nil {
		t.Fatal(err)
	}
	for _, s := range splits {
		t.Run(s.name, func(t *testing.T) {
			want, late, copies := expected(files, s.filesPerBatch)
			if copies == 0 || (s.filesPerBatch > 0 && late == 0) {
				t.Fatalf("%d copies and %d late readings: the input does not test what it should", copies, late)
			}
			batches := runSplit(t, input, s)
			if len(batches) == 0 {
				t.Fatal("no output")
			}
			for i, rows := range batches {
				got := map[string]int64{}
				for _, r := range rows {
					if _, twice := got[r.User]; twice {
						t.Fatalf("batch %d: user %s twice", i, r.User)
					}
					got[r.User] = r.Count
				}
				if i < len(batches)-1 {
					continue
				}
				if len(got) != len(want) {
					t.Errorf("the last batch has %d users, want %d", len(got), len(want))
				}
				for u, n := range want {
					if got[u] != n {
						t.Errorf("user %s: %d distinct readings, want %d", u, got[u], n)
					}
				}
			}
		})
	}
}
