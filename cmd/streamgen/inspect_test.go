package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"github.com/streamgen/streamgen/internal/testenv"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// buildExample builds the example's program into dir.
func buildExample(t *testing.T, name, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", bin, "../../examples/"+name)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// inspect runs streamgen inspect with args and returns its output.
func inspect(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(append([]string{"inspect"}, args...), &out, &errOut)
	return out.String(), errOut.String(), code
}

// summary reads the summary of the checkpoint cp.
func summary(t *testing.T, cp string) runtime.CheckpointSummary {
	t.Helper()
	c, err := runtime.OpenCheckpoint(cp)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sum, err := c.Summary()
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

// TestInspectExamples runs each example over its built-in sample into a
// checkpoint, then inspects it: the listing names every operator, and the
// rows of each, decoded through the stored schemas, are as many as the
// query counted, one per key, and agree with what the example printed.
func TestInspectExamples(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the examples")
	}
	testenv.SkipUnlessFull(t, "builds and runs seven examples")
	bins := t.TempDir()
	for _, name := range []string{"actioncounts", "activity", "dedup", "devicewindows", "scores", "sessions", "windows"} {
		t.Run(name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "checkpoint")
			out, err := exec.Command(buildExample(t, name, bins), "-checkpoint", cp).CombinedOutput()
			if err != nil {
				t.Fatalf("%s: %v\n%s", name, err, out)
			}
			before := dirContents(t, cp)
			listing, stderr, code := inspect(t, cp)
			if code != 0 {
				t.Fatalf("inspect exited %d: %s", code, stderr)
			}
			sum := summary(t, cp)
			if len(sum.Operators) == 0 || !strings.Contains(listing, "query id  ") || !strings.Contains(listing, "last batch  ") {
				t.Fatalf("listing:\n%s", listing)
			}
			// The reports of the run's batches, the last one the
			// checkpoint's last batch, are listed.
			if n := len(sum.Recent); n == 0 || sum.Recent[n-1].BatchID != sum.Progress.BatchID || !strings.Contains(listing, "recent batches") {
				t.Errorf("recent progress: %d reports, last batch %d:\n%s", n, sum.Progress.BatchID, listing)
			}
			rowsByOp := map[int][]runtime.StateRow{}
			for _, op := range sum.Operators {
				if !strings.Contains(listing, "operator "+strconv.Itoa(op.Index)+": "+op.Meta.Kind) {
					t.Errorf("the listing lacks operator %d (%s):\n%s", op.Index, op.Meta.Kind, listing)
				}
				if strings.HasPrefix(op.Meta.KeyType, "window+") && op.Meta.Kind != "sessionAggregate" &&
					(op.Meta.Windows == nil || !strings.Contains(listing, "windows  ") || !strings.Contains(listing, op.Meta.Windows.String())) {
					t.Errorf("operator %d (%s): windows %v, not in the listing:\n%s", op.Index, op.Meta.Kind, op.Meta.Windows, listing)
				}
				text, stderr, code := inspect(t, cp, "state", strconv.Itoa(op.Index), "--json")
				if code != 0 {
					t.Fatalf("inspect state %d exited %d: %s", op.Index, code, stderr)
				}
				var rows []runtime.StateRow
				keys := map[string]bool{}
				for line := range strings.Lines(text) {
					var r runtime.StateRow
					if err := json.Unmarshal([]byte(line), &r); err != nil {
						t.Fatalf("row %q: %v", line, err)
					}
					// A row is its key's, in its variable; a variable
					// ordered by event time holds a key once per time.
					id := string(r.Key) + r.Variable
					if r.ExpiresAt != nil {
						id += r.ExpiresAt.String()
					}
					if keys[id] {
						t.Errorf("operator %d: key %s twice", op.Index, r.Key)
					}
					keys[id] = true
					rows = append(rows, r)
				}
				if int64(len(rows)) != op.StateRows || op.StateRows == 0 {
					t.Errorf("operator %d (%s): %d rows decoded, the query counted %d", op.Index, op.Meta.Kind, len(rows), op.StateRows)
				}
				rowsByOp[op.Index] = rows
				checkTimers(t, cp, op, rows)
				checkKeyReads(t, cp, op, rows)
				// As a table: a header, then a line per row.
				table, _, code := inspect(t, cp, "state", strconv.Itoa(op.Index))
				if lines := strings.Count(table, "\n"); code != 0 || lines != len(rows)+1 || !strings.HasPrefix(table, "KEY ") {
					t.Errorf("inspect state %d as a table: exit %d, %d lines for %d rows:\n%s", op.Index, code, lines, len(rows), table)
				}
			}
			checkExampleState(t, name, string(out), rowsByOp)
			// Inspecting wrote nothing.
			if after := dirContents(t, cp); !maps.Equal(before, after) {
				t.Errorf("the checkpoint changed while inspected:\nbefore %v\nafter  %v", before, after)
			}
			// The listing shows each state variable's schema.
			for _, op := range sum.Operators {
				for name, schema := range op.Meta.States {
					if schema != nil && !strings.Contains(listing, schema.String()) {
						t.Errorf("the listing lacks the schema of %q: %s\n%s", name, schema, listing)
					}
				}
			}
		})
	}
}

// checkExampleState compares the decoded state with what the example
// printed, where its output says what the state must be.
func checkExampleState(t *testing.T, name, out string, rows map[int][]runtime.StateRow) {
	t.Helper()
	switch name {
	case "actioncounts":
		// The final count of each action, in the printed table, is the
		// count its state holds.
		table := regexp.MustCompile(`\|\s*(Open|Close)\|\s*(\d+)\|`).FindAllStringSubmatch(out, -1)
		if len(table) < 2 {
			t.Fatalf("no final counts in the output:\n%s", out)
		}
		table = table[len(table)-2:] // the final table's
		state := map[string]string{}
		for _, r := range rows[0] {
			var action string
			json.Unmarshal(r.Key, &action)
			state[action] = string(r.Value)
		}
		for _, m := range table {
			if state[m[1]] != m[2] {
				t.Errorf("%s: state %s, printed %s", m[1], state[m[1]], m[2])
			}
		}
	case "windows":
		// Every row read and decoded is counted in one window (Complete
		// mode over tumbling windows).
		in := regexp.MustCompile(`(\d+) rows in, \d+ rows out, (\d+) dead letter`).FindStringSubmatch(out)
		if in == nil {
			t.Fatalf("no summary line in the output:\n%s", out)
		}
		rowsIn, _ := strconv.Atoi(in[1])
		dead, _ := strconv.Atoi(in[2])
		total := 0
		for _, r := range rows[0] {
			var acc struct{ N int }
			if err := json.Unmarshal(r.Value, &acc); err != nil {
				t.Fatal(err)
			}
			total += acc.N
		}
		if total != rowsIn-dead {
			t.Errorf("the windows' counts add up to %d, want %d rows in less %d dead letters", total, rowsIn, dead)
		}
	case "activity", "sessions", "devicewindows":
		// One row per user or device that the sample has: keys are
		// strings, as the input's are.
		for _, r := range rows[0] {
			var key string
			if err := json.Unmarshal(r.Key, &key); err != nil || key == "" {
				t.Errorf("key %s is not a user", r.Key)
			}
		}
	}
}

// dirContents maps each file of dir but the lock file to a hash of its
// content.
func dirContents(t *testing.T, dir string) map[string][32]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][32]byte{}
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = sha256.Sum256(b)
	}
	return files
}

// checkTimers lists an operator's timers: as many as the listing counts,
// and, where a group state row holds its timeout, the key's timer is at it.
func checkTimers(t *testing.T, cp string, op runtime.OperatorSummary, rows []runtime.StateRow) {
	t.Helper()
	text, stderr, code := inspect(t, cp, "timers", strconv.Itoa(op.Index), "--json")
	if code != 0 {
		t.Fatalf("inspect timers %d exited %d: %s", op.Index, code, stderr)
	}
	timers := map[string]time.Time{}
	n := int64(0)
	for line := range strings.Lines(text) {
		var timer struct {
			Key json.RawMessage
			At  time.Time
		}
		if err := json.Unmarshal([]byte(line), &timer); err != nil {
			t.Fatalf("timer %q: %v", line, err)
		}
		timers[string(timer.Key)] = timer.At
		n++
	}
	if n != op.Timers {
		t.Errorf("operator %d: %d timers printed, %d counted", op.Index, n, op.Timers)
	}
	for _, r := range rows {
		if r.Timeout != nil && !timers[string(r.Key)].Equal(*r.Timeout) {
			t.Errorf("operator %d, key %s: timeout %v in its row, timer at %v", op.Index, r.Key, *r.Timeout, timers[string(r.Key)])
		}
	}
}

// checkKeyReads reads some of an operator's keys with --key, each given
// as a user retypes a key its rows show (members in another order, with
// spaces and newlines; a string without its quotes): each read prints
// exactly the rows, and the timers, of the full listing that have that
// key. A key with a member that names nothing is refused, not read as no
// rows.
func checkKeyReads(t *testing.T, cp string, op runtime.OperatorSummary, rows []runtime.StateRow) {
	t.Helper()
	index := strconv.Itoa(op.Index)
	canonical := func(key json.RawMessage) string {
		var v any
		if err := json.Unmarshal(key, &v); err != nil {
			t.Fatalf("key %s: %v", key, err)
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	lines := func(args ...string) []string {
		t.Helper()
		text, stderr, code := inspect(t, append([]string{cp}, args...)...)
		if code != 0 {
			t.Fatalf("inspect %s exited %d: %s", strings.Join(args, " "), code, stderr)
		}
		out := slices.Collect(strings.Lines(text))
		slices.Sort(out)
		return out
	}
	allRows := lines("state", index, "--json")
	allTimers := lines("timers", index, "--json")
	keyOf := func(line string) string {
		var v struct{ Key json.RawMessage }
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		return canonical(v.Key)
	}
	seen := map[string]bool{}
	for _, r := range rows {
		id := canonical(r.Key)
		if seen[id] || len(seen) == 4 {
			continue
		}
		seen[id] = true
		var arg string
		if json.Unmarshal(r.Key, &arg) != nil {
			var v any
			json.Unmarshal(r.Key, &v)
			b, _ := json.MarshalIndent(v, "", "  ") // members sorted, spaced
			arg = string(b)
		}
		for what, all := range map[string][]string{"state": allRows, "timers": allTimers} {
			var want []string
			for _, line := range all {
				if keyOf(line) == id {
					want = append(want, line)
				}
			}
			if got := lines(what, index, "--key", arg, "--json"); !slices.Equal(got, want) {
				t.Errorf("operator %d: %s --key %s printed %d lines, the full listing has %d of the key:\n%s", op.Index, what, arg, len(got), len(want), got)
			}
		}
		if strings.HasPrefix(id, "{") {
			var obj map[string]any
			json.Unmarshal(r.Key, &obj)
			obj["Zz"] = 1
			badJSON, _ := json.Marshal(obj)
			bad := string(badJSON)
			_, stderr, code := inspect(t, cp, "state", index, "--key", bad)
			if code == 0 || !strings.Contains(stderr, "--key") || !strings.Contains(stderr, `"Zz"`) {
				t.Errorf("operator %d: --key %s: exit %d, %s", op.Index, bad, code, stderr)
			}
		}
	}
	if len(seen) == 0 {
		t.Errorf("operator %d: no key read", op.Index)
	}
}

// TestInspectRunningQuery runs an example on an interval trigger in
// another process, which holds its checkpoint, and inspects it: the
// query makes a snapshot, which inspect reads and then removes, and the
// query runs on; a second query on the checkpoint is still refused.
func TestInspectRunningQuery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs an example")
	}
	dir := t.TempDir()
	cp := filepath.Join(dir, "checkpoint")
	cmd := exec.Command(buildExample(t, "actioncounts", dir), "-checkpoint", cp, "-trigger", "1h")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	// The first batch's line says the query is running.
	lines := bufio.NewScanner(stderr)
	for lines.Scan() && !strings.Contains(lines.Text(), "batch 0 committed") {
	}
	out, errText, code := inspect(t, cp)
	if code != 0 || !strings.Contains(out, "a query runs on it: this is a snapshot of it") || !strings.Contains(out, "last batch") {
		t.Fatalf("inspect of a running query's checkpoint exited %d: %s\n%s", code, errText, out)
	}
	if !regexp.MustCompile(`last batch\s+0\n`).MatchString(out) {
		t.Errorf("inspect of the running query does not show batch 0:\n%s", out)
	}
	c, err := runtime.OpenCheckpoint(cp)
	if err != nil || !c.Live() || c.Dir() != cp {
		t.Fatalf("OpenCheckpoint of a running query's checkpoint: %v", err)
	}
	if p, ok, err := c.Progress(); err != nil || !ok || p.BatchID != 0 {
		t.Errorf("its progress: %+v %v %v", p, ok, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(filepath.Join(cp, "INSPECT", "*")); len(left) != 0 {
		t.Errorf("the snapshots were left behind: %q", left)
	}
	// A second query on it is refused, whatever the lock's errno.
	want := "streamgen: checkpoint " + cp + " is in use by another query (lock held)"
	second, err := exec.Command(cmd.Path, "-checkpoint", cp).CombinedOutput()
	if err == nil || !strings.Contains(string(second), want+"; stop that query first") || strings.Contains(string(second), "temporarily unavailable") {
		t.Errorf("a second query on a held checkpoint: %v\n%s", err, second)
	}
	if cmd.ProcessState != nil {
		t.Fatal("the query stopped")
	}
}

// TestInspectNotACheckpoint: a directory without a checkpoint is refused,
// and nothing is written into it.
func TestInspectNotACheckpoint(t *testing.T) {
	dir := t.TempDir()
	_, errText, code := inspect(t, dir)
	if code != 1 || !strings.Contains(errText, "holds no checkpoint") {
		t.Errorf("inspect of an empty directory exited %d: %s", code, errText)
	}
	if entries, _ := filepath.Glob(filepath.Join(dir, "*")); len(entries) != 0 {
		t.Errorf("inspect wrote %q", entries)
	}
	if _, _, code := inspect(t); code != 2 {
		t.Errorf("inspect without a directory exited %d, want 2", code)
	}
}
