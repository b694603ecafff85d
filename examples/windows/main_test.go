package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/generated/sensor"
)

// The example runs on the sample with duplicates and late readings
// (cli.SampleWithDuplicates: 8 files) under several batch splits, and the
// rows it writes are compared with a plain loop over the same files, in the
// same batches, that models the watermark: a batch's watermark is the newest
// event time of the batches before it less the delay (none in the first
// batch), and a reading at or before it is dropped.

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

// runSplit runs the example on the files of all as s cuts them, with
// args, on a new checkpoint and output directory, and returns the rows of
// each batch written, in batch order. last are flags for the last run
// only.
func runSplit(t *testing.T, all string, s split, args, last []string) [][]WindowCount {
	t.Helper()
	input, out, ckpt, dead := all, t.TempDir(), t.TempDir(), t.TempDir()
	if s.restarts {
		input = t.TempDir()
	}
	common := []string{"-input", input, "-output", out, "-checkpoint", ckpt, "-dead-letter", dead}
	common = append(append(common, s.args...), args...)
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
			if err := run(common, io.Discard); err != nil {
				t.Fatal(err)
			}
		}
		common = slices.DeleteFunc(common, func(a string) bool { return a == "-trigger" || a == "once" })
	}
	if err := run(append(slices.Clip(common), last...), io.Discard); err != nil {
		t.Fatal(err)
	}
	return readBatches(t, out)
}

// readBatches reads the output files of dir, one per batch that wrote
// rows, in batch order; it checks the JSON shape of every line.
func readBatches(t *testing.T, dir string) [][]WindowCount {
	t.Helper()
	shape := regexp.MustCompile(`^\{"window":\{"start":"[^"]+","end":"[^"]+"\},("User":"[a-z]",)?"count":[1-9][0-9]*\}$`)
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	slices.Sort(files)
	var batches [][]WindowCount
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var rows []WindowCount
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			if !shape.Match(sc.Bytes()) {
				t.Fatalf("%s: a row not shaped as Spark's: %s", f, sc.Bytes())
			}
			var r WindowCount
			if err := r.UnmarshalJSON(sc.Bytes()); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			rows = append(rows, r)
		}
		batches = append(batches, rows)
	}
	return batches
}

// group is an output row's identity: its window and, per user, the user.
type group struct {
	start, end time.Time
	user       string
}

func (g group) String() string {
	return fmt.Sprintf("[%s, %s) %q", g.start.Format(time.RFC3339), g.end.Format(time.RFC3339), g.user)
}

func groupOf(r WindowCount) group {
	g := group{start: r.Window.Start.UTC(), end: r.Window.End.UTC()}
	if r.User != nil {
		g.user = *r.User
	}
	return g
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

// expected counts the readings per window (and user) with a plain loop over
// the batches, and returns the counts and how many (reading, window) pairs
// were late, by Spark's rule: in Update and Append mode a reading is left
// out of each of its windows whose end is at or before the watermark the
// batch before ran with, across restarts too (a batch's watermark is the
// newest reading of the batches before less the delay);
// in Complete mode nothing is left out. A reading's windows are those
// whose start is a multiple of the slide (time.Truncate counts from year
// 1, which is a multiple of the slides used here from the Unix epoch) and
// whose span covers it.
func expected(files [][]sensor.Event, perBatch int, q Query, complete bool) (counts map[group]int64, late int) {
	counts = map[group]int64{}
	var newest time.Time // of the batches so far; zero before the first
	var watermark time.Time
	next := func() {
		if !q.NoWatermark && !newest.IsZero() {
			watermark = newest.Add(-q.Watermark)
		}
	}
	for _, batch := range batchesOf(files, perBatch) {
		lateBy := watermark
		next()
		for _, e := range batch {
			t := time.Unix(0, e.CreationTime).UTC()
			var windows []group
			if q.Cumulate != 0 {
				// The period's windows that end after the reading.
				period := t.Truncate(q.Window)
				for end := period.Add(q.Cumulate); !end.After(period.Add(q.Window)); end = end.Add(q.Cumulate) {
					if end.After(t) {
						windows = append(windows, group{start: period, end: end})
					}
				}
			} else {
				for start := t.Truncate(q.Slide); start.After(t.Add(-q.Window)); start = start.Add(-q.Slide) {
					windows = append(windows, group{start: start, end: start.Add(q.Window)})
				}
			}
			for _, g := range windows {
				if !complete && !lateBy.IsZero() && !g.end.After(lateBy) {
					late++
					continue
				}
				if q.ByUser {
					g.user = e.User
				}
				counts[g]++
			}
		}
		for _, e := range batch {
			if t := time.Unix(0, e.CreationTime).UTC(); t.After(newest) {
				newest = t
			}
		}
	}
	return counts, late
}

// TestWindowsMatchAPlainLoop runs the example with several windows,
// watermarks and groupings, in each output mode, under each split, and
// checks its output against the plain loop's counts: in Complete mode the
// last batch is the whole table; in Update mode the latest row of each
// window is its count; in Append mode, with -flush, each window is written
// once, with its count.
func TestWindowsMatchAPlainLoop(t *testing.T) {
	files := cli.SampleWithDuplicates()
	input := t.TempDir()
	if err := cli.WriteSampleWithDuplicates(input); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		q    Query
	}{
		{"tumbling 10m, watermark 5h", nil, Query{Window: 10 * time.Minute, Slide: 10 * time.Minute, Watermark: 5 * time.Hour}},
		{"sliding 10m every 5m by user, watermark 5h", []string{"-slide", "5m", "-by-user"},
			Query{Window: 10 * time.Minute, Slide: 5 * time.Minute, Watermark: 5 * time.Hour, ByUser: true}},
		{"sliding 30s every 10s by user, watermark 5s", []string{"-window", "30s", "-slide", "10s", "-watermark", "5s", "-by-user"},
			Query{Window: 30 * time.Second, Slide: 10 * time.Second, Watermark: 5 * time.Second, ByUser: true}},
		{"tumbling 1m, no watermark", []string{"-window", "1m", "-watermark", "none"},
			Query{Window: time.Minute, Slide: time.Minute, NoWatermark: true}},
		{"cumulative 10m every 2m by user, watermark 5h", []string{"-cumulate", "2m", "-by-user"},
			Query{Window: 10 * time.Minute, Slide: 10 * time.Minute, Cumulate: 2 * time.Minute, Watermark: 5 * time.Hour, ByUser: true}},
		{"cumulative 1m every 10s, watermark 5s", []string{"-window", "1m", "-cumulate", "10s", "-watermark", "5s"},
			Query{Window: time.Minute, Slide: time.Minute, Cumulate: 10 * time.Second, Watermark: 5 * time.Second}},
	} {
		for _, s := range splits {
			t.Run(c.name+"/"+s.name, func(t *testing.T) {
				want, late := expected(files, s.filesPerBatch, c.q, false)
				if s.filesPerBatch > 0 && !c.q.NoWatermark && late == 0 {
					t.Fatal("no reading is late: the input does not test the watermark")
				}
				wantComplete, _ := expected(files, s.filesPerBatch, c.q, true)

				batches := runSplit(t, input, s, c.args, nil)
				if len(batches) == 0 {
					t.Fatal("complete: no output")
				}
				sameCounts(t, "complete, the last batch", table(t, "complete", batches[len(batches)-1]), wantComplete)

				batches = runSplit(t, input, s, append([]string{"-mode", "update"}, c.args...), nil)
				latest := map[group]int64{}
				for _, rows := range batches {
					for g, n := range table(t, "update", rows) {
						latest[g] = n
					}
				}
				sameCounts(t, "update, the latest row of each window", latest, want)

				if c.q.NoWatermark {
					return // Append needs a watermark
				}
				batches = runSplit(t, input, s, append([]string{"-mode", "append"}, c.args...), []string{"-flush"})
				once := map[group]int64{}
				for _, rows := range batches {
					for g, n := range table(t, "append", rows) {
						if _, twice := once[g]; twice {
							t.Fatalf("append: %v written twice", g)
						}
						once[g] = n
					}
				}
				sameCounts(t, "append, every window once", once, want)
			})
		}
	}
}

// table makes a batch's rows a table by group; a group twice in one batch
// is an error.
func table(t *testing.T, mode string, rows []WindowCount) map[group]int64 {
	t.Helper()
	out := make(map[group]int64, len(rows))
	for _, r := range rows {
		g := groupOf(r)
		if _, twice := out[g]; twice {
			t.Fatalf("%s: %v twice in one batch", mode, g)
		}
		out[g] = r.Count
	}
	return out
}

func sameCounts(t *testing.T, what string, got, want map[group]int64) {
	t.Helper()
	for g, n := range want {
		if got[g] != n {
			t.Errorf("%s: %v counts %d, want %d", what, g, got[g], n)
		}
	}
	for g, n := range got {
		if _, ok := want[g]; !ok {
			t.Errorf("%s: %v counts %d, want no such row", what, g, n)
		}
	}
}

// TestFlags: -slide longer than -window and Append without a watermark are
// errors (status 1) that say which flags; a bad duration or mode is a usage
// error (status 2).
func TestFlags(t *testing.T) {
	for _, c := range []struct {
		args   []string
		status int
		says   string
	}{
		{[]string{"-slide", "20m"}, 1, "-slide 20m0s is longer than -window 10m0s"},
		{[]string{"-slide", "5m", "-cumulate", "1m"}, 1, "-cumulate and -slide make windows of two kinds"},
		{[]string{"-slide", "10m", "-cumulate", "1m"}, 1, "-cumulate and -slide make windows of two kinds"},
		{[]string{"-cumulate", "3m"}, 1, "-window 10m0s is not a whole multiple of -cumulate 3m0s"},
		{[]string{"-mode", "append", "-watermark", "none"}, 1, "the Append output mode needs event-time windows and a watermark"},
		{[]string{"-window", "0"}, 2, `invalid value "0" for flag -window`},
		{[]string{"-watermark", "-1s"}, 2, `invalid value "-1s" for flag -watermark`},
		{[]string{"-mode", "sometimes"}, 2, `invalid value "sometimes" for flag -mode`},
	} {
		err, stderr := runCapturingStderr(t, c.args)
		if cli.ExitCode(err) != c.status {
			t.Errorf("%q: %v (status %d), want status %d", c.args, err, cli.ExitCode(err), c.status)
		}
		if said := stderr + fmt.Sprint(err); !strings.Contains(said, c.says) {
			t.Errorf("%q: %s, want it to say %q", c.args, said, c.says)
		}
	}
}

// runCapturingStderr runs the example and returns its result and what it
// wrote to the process's stderr (the flag package's messages).
func runCapturingStderr(t *testing.T, args []string) (error, string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	stderr := os.Stderr
	os.Stderr = f
	err = run(args, io.Discard)
	os.Stderr = stderr
	data, _ := os.ReadFile(f.Name())
	return err, string(data)
}
