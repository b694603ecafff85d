package faults_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// program is one of the programs under test, and what "the same output"
// means for it.
type program struct {
	name string
	// args are added to every run that may reach the end of the input
	// (the checkpoint part's staging runs leave them out): -flush for
	// sessions, whose Append output holds a session only once the
	// watermark passes its end.
	args []string
	// keyField is, for a program in Update mode, the JSON field that
	// keys its output rows: the last row per key is its final result.
	// Append-mode programs have none: every row is final.
	keyField string
}

// programs are read from the examples' code: activity is
// mapGroupsWithState (Update, keyed by "user"), devicewindows and
// sessions are flatMapGroupsWithState in Append mode, countkeys is
// mapGroupsWithState (Update, keyed by "key").
var programs = []program{
	{name: "activity", keyField: "user"},
	{name: "devicewindows"},
	{name: "sessions", args: []string{"-flush"}},
	{name: "countkeys", keyField: "key"},
}

func programNamed(t *testing.T, name string) program {
	t.Helper()
	for _, p := range programs {
		if p.name == name {
			return p
		}
	}
	t.Fatalf("no program %q", name)
	return program{}
}

// dirs are the directories of one line of runs: a checkpoint, the output
// and the dead letters, which every restart shares.
type dirs struct{ checkpoint, output, deadLetters string }

func newDirs(t *testing.T) dirs {
	base := t.TempDir()
	return dirs{filepath.Join(base, "checkpoint"), filepath.Join(base, "output"), filepath.Join(base, "dead-letters")}
}

// argsFor returns the flags of a run of p on input into d, to the end of
// the input, followed by extra.
func (p program) argsFor(input string, d dirs, extra ...string) []string {
	args := []string{"-input", input, "-output", d.output, "-checkpoint", d.checkpoint, "-dead-letter", d.deadLetters,
		"-trigger", "availableNow"}
	return append(append(args, p.args...), extra...)
}

// result is what a line of runs left: every row of every batch file of
// the output and of the dead letters, and the files in batch order.
type result struct {
	rows, deadLetters []string
	// batches holds each output file's rows, in batch order.
	batches [][]string
}

// readResult reads d's output and dead letters.
func readResult(t *testing.T, d dirs) result {
	t.Helper()
	var r result
	r.batches = readBatchFiles(t, d.output, "part-")
	for _, b := range r.batches {
		r.rows = append(r.rows, b...)
	}
	for _, b := range readBatchFiles(t, d.deadLetters, "dead-letters-") {
		r.deadLetters = append(r.deadLetters, b...)
	}
	return r
}

// readBatchFiles returns the lines of each file dir/prefix*.jsonl, in
// name order, which is batch order. Hidden files (a write in progress)
// are not output. A missing dir has none.
func readBatchFiles(t *testing.T, dir, prefix string) [][]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, prefix+"*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	var out [][]string
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var lines []string
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		if err := sc.Err(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, lines)
	}
	return out
}

// final returns, for an Update-mode program, the last row per key in
// batch order: the program's final result.
func (p program) final(t *testing.T, r result) map[string]string {
	t.Helper()
	last := map[string]string{}
	for _, b := range r.batches {
		for _, row := range b {
			var fields map[string]json.RawMessage
			if err := json.Unmarshal([]byte(row), &fields); err != nil {
				t.Fatalf("%s output row %s: %v", p.name, row, err)
			}
			key, ok := fields[p.keyField]
			if !ok {
				t.Fatalf("%s output row %s has no %q", p.name, row, p.keyField)
			}
			last[string(key)] = row
		}
	}
	return last
}

// difference compares got with want as multisets of rows: lost counts
// the rows of want that got lacks, doubled those got has more of than
// want. examples shows a few of each.
func difference(want, got []string) (lost, doubled int, examples []string) {
	count := map[string]int{}
	for _, r := range want {
		count[r]++
	}
	for _, r := range got {
		count[r]--
	}
	for _, r := range slices.Sorted(maps.Keys(count)) {
		switch n := count[r]; {
		case n > 0:
			lost += n
			if len(examples) < 6 {
				examples = append(examples, fmt.Sprintf("lost %d× %s", n, r))
			}
		case n < 0:
			doubled += -n
			if len(examples) < 6 {
				examples = append(examples, fmt.Sprintf("extra %d× %s", -n, r))
			}
		}
	}
	return lost, doubled, examples
}

// comparison is how a result differs from the reference.
type comparison struct {
	lost, doubled               int // output rows
	lostLetters, doubledLetters int // dead letters
	finalDiffers                int // keys whose final row differs (Update mode)
	examples                    []string
}

func (c comparison) ok() bool {
	return c.lost == 0 && c.doubled == 0 && c.lostLetters == 0 && c.doubledLetters == 0 && c.finalDiffers == 0
}

func (c comparison) String() string {
	return fmt.Sprintf("%d rows lost, %d doubled; %d dead letters lost, %d doubled; %d keys with another final row\n%s",
		c.lost, c.doubled, c.lostLetters, c.doubledLetters, c.finalDiffers, strings.Join(c.examples, "\n"))
}

// compare compares got with the reference want: the same rows overall
// (each batch's file is replaced when the batch runs again, so the union
// of the files is a multiset that must not change), the same dead
// letters, and for an Update-mode program the same final row per key.
func (p program) compare(t *testing.T, want, got result) comparison {
	t.Helper()
	var c comparison
	var ex []string
	c.lost, c.doubled, c.examples = difference(want.rows, got.rows)
	c.lostLetters, c.doubledLetters, ex = difference(want.deadLetters, got.deadLetters)
	c.examples = append(c.examples, ex...)
	if p.keyField != "" {
		w, g := p.final(t, want), p.final(t, got)
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if g[k] != w[k] {
				c.finalDiffers++
				c.examples = append(c.examples, fmt.Sprintf("key %s: final row %s, want %s", k, g[k], w[k]))
			}
		}
		for k := range g {
			if _, ok := w[k]; !ok {
				c.finalDiffers++
				c.examples = append(c.examples, fmt.Sprintf("key %s: final row %s, want none", k, g[k]))
			}
		}
	}
	return c
}

// checkCounts checks countkeys' final counts against the input itself:
// each user's last count is the number of their readings.
func checkCounts(t *testing.T, r result, want map[string]int64) {
	t.Helper()
	got := map[string]int64{}
	for _, row := range r.rows {
		var c struct {
			Key   string `json:"key"`
			Count int64  `json:"count"`
		}
		if err := json.Unmarshal([]byte(row), &c); err != nil {
			t.Fatalf("countkeys output row %s: %v", row, err)
		}
		got[c.Key] = c.Count // rows are in batch order: the last is final
	}
	if !maps.Equal(got, want) {
		t.Errorf("countkeys counted %v, the input has %v", got, want)
	}
}
