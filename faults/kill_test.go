package faults_test

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// killStats is what the kill runs of one program did.
type killStats struct {
	program string
	// batches is the number of batches of an undisturbed run.
	batches int
	// trials counts the lines of runs, each on a fresh checkpoint and
	// output, from the first start to the run that exits 0; starts
	// counts the processes started in them.
	trials, starts int
	// kills counts the SIGKILLs that ended a running program;
	// inStartup those that came before the start had committed a batch
	// (opening or creating the checkpoint, planning, the first batch).
	kills, inStartup int
	// torn counts the output and dead-letter files that a kill left
	// visible but incomplete (each must appear whole or not at all).
	torn int
	comparison
}

// killProgram runs p on input once undisturbed, for the reference, then
// again and again on fresh directories, each time killed with SIGKILL at
// random points and restarted on the same checkpoint and output until a
// run exits 0, until it has survived kills kills. Every line of runs must
// end with the reference's output and dead letters: nothing lost, nothing
// doubled.
func killProgram(t *testing.T, r *rand.Rand, p program, input string, wantCounts map[string]int64, kills int) killStats {
	st := killStats{program: p.name}
	args := func(d dirs) []string { return p.argsFor(input, d, "-max-files-per-trigger", "1") }

	// The reference, which also times the program: how long a start
	// takes to commit its first batch, and then each batch.
	ref := newDirs(t)
	proc := run(t, p.name, args(ref)...)
	proc.awaitCommitted(t, 1)
	startup := time.Since(proc.started)
	status, stderr := proc.exit(t)
	total := time.Since(proc.started)
	if status != 0 {
		t.Fatalf("%s, undisturbed: exit status %d; stderr:\n%s", p.name, status, stderr)
	}
	st.batches = len(proc.committed())
	want := readResult(t, ref)
	if wantCounts != nil {
		checkCounts(t, want, wantCounts)
	}
	perBatch := (total - startup) / time.Duration(max(st.batches-1, 1))
	// A kill after a committed line comes within the next two batches or
	// so: anywhere in planning, reading, writing the sinks, committing.
	pause := max(2*perBatch, time.Millisecond)
	t.Logf("%s: %d batches, %v to the first commit, then %v per batch", p.name, st.batches, startup.Round(time.Millisecond), perBatch.Round(100*time.Microsecond))

	for st.kills < kills {
		st.trials++
		d := newDirs(t)
		// Up to three kills in this line of runs: a restart may be
		// killed too, in its own startup or after it resumed.
		killsLeft := 1 + r.IntN(3)
		committed := 0 // batches committed by the earlier starts
		for {
			proc := run(t, p.name, args(d)...)
			st.starts++
			if killsLeft == 0 {
				if status, stderr := proc.exit(t); status != 0 {
					t.Fatalf("%s, trial %d, after %d kills: exit status %d; stderr:\n%s", p.name, st.trials, st.kills, status, stderr)
				}
				break
			}
			if r.IntN(4) == 0 {
				// Anywhere in the startup, from exec to the first commit.
				time.Sleep(time.Duration(r.Int64N(int64(startup))))
			} else {
				remaining := max(st.batches-committed, 1)
				if ended := proc.awaitCommitted(t, 1+r.IntN(remaining)); ended {
					if status, stderr := proc.exit(t); status != 0 {
						t.Fatalf("%s, trial %d: exit status %d; stderr:\n%s", p.name, st.trials, status, stderr)
					}
					break
				}
				time.Sleep(time.Duration(r.Int64N(int64(pause))))
			}
			if !proc.kill(t) {
				// It finished in the meantime.
				if status, stderr := proc.exit(t); status != 0 {
					t.Fatalf("%s, trial %d: exit status %d; stderr:\n%s", p.name, st.trials, status, stderr)
				}
				break
			}
			st.kills++
			killsLeft--
			st.torn += tornFiles(t, d)
			n := len(proc.committed())
			if n == 0 {
				st.inStartup++
			}
			committed += n
		}
		got := readResult(t, d)
		c := p.compare(t, want, got)
		st.add(c)
		if !c.ok() {
			t.Errorf("%s, trial %d (checkpoint %s): the output differs from the undisturbed run's: %v", p.name, st.trials, filepath.Dir(d.checkpoint), c)
		}
		if wantCounts != nil {
			checkCounts(t, got, wantCounts)
		}
	}
	return st
}

// add adds c's counts to the totals.
func (c *comparison) add(o comparison) {
	c.lost += o.lost
	c.doubled += o.doubled
	c.lostLetters += o.lostLetters
	c.doubledLetters += o.doubledLetters
	c.finalDiffers += o.finalDiffers
}

// tornFiles counts the visible files of d's output and dead letters that
// are not whole: empty, without a final newline, or with a line that is
// not a JSON object. Each is reported.
func tornFiles(t *testing.T, d dirs) int {
	t.Helper()
	torn := 0
	for _, dir := range []string{d.output, d.deadLetters} {
		names, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			data, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			whole := len(data) > 0 && data[len(data)-1] == '\n'
			for line := range bytes.Lines(data) {
				whole = whole && json.Valid(line) && bytes.HasPrefix(line, []byte("{"))
			}
			if !whole {
				t.Errorf("after a kill, %s is visible but not whole: %q", name, data)
				torn++
			}
		}
	}
	return torn
}
