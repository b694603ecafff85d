package faults_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/internal/testenv"
)

// TestCampaign repeats the operations team's fault campaign against the
// built programs: kill -9 at random points, every checkpoint file
// damaged in turn, bad input beside good files. Each part is a subtest
// (-run Campaign/kill, Campaign/checkpoint, Campaign/input); the summary
// at the end gives the figures of those that ran.
func TestCampaign(t *testing.T) {
	r := newRand(t)
	sz := size()
	var summary strings.Builder
	// The totals over the parts that ran.
	var kills, lost, doubled int
	var detected, recovered, failed int
	var badHandled, badFailed int
	switch {
	case long():
		fmt.Fprintln(&summary, "long campaign (STREAMGEN_FAULTS_LONG=1)")
	case testenv.Full():
		fmt.Fprintln(&summary, "full campaign (STREAMGEN_FAULTS_LONG=1 runs the long one)")
	default:
		fmt.Fprintln(&summary, "short campaign (STREAMGEN_TEST_FULL=1 runs the full one, STREAMGEN_FAULTS_LONG=1 the long one)")
	}

	t.Run("kill", func(t *testing.T) {
		input := filepath.Join(t.TempDir(), "input")
		files := sample(r, sz.files, sz.rowsPerFile)
		writeSample(t, input, files, 0, len(files))
		var all []killStats
		for _, p := range programs {
			t.Run(p.name, func(t *testing.T) {
				var counts map[string]int64
				if p.name == "countkeys" {
					counts = countRows(files)
				}
				all = append(all, killProgram(t, r, p, input, counts, sz.killsPerProgram))
			})
		}
		var total killStats
		fmt.Fprintf(&summary, "kill -9 (%d input files of %d readings, one file per batch):\n", sz.files, sz.rowsPerFile)
		for _, st := range all {
			fmt.Fprintf(&summary, "  %-13s %3d kills survived (%d before the start's first commit) in %d runs to the end (%d starts, %d batches each); rows lost %d, doubled %d; dead letters lost %d, doubled %d; final rows wrong %d; torn files %d\n",
				st.program, st.kills, st.inStartup, st.trials, st.starts, st.batches, st.lost, st.doubled, st.lostLetters, st.doubledLetters, st.finalDiffers, st.torn)
			total.kills += st.kills
			total.add(st.comparison)
		}
		kills += total.kills
		lost += total.lost + total.lostLetters
		doubled += total.doubled + total.doubledLetters
		fmt.Fprintf(&summary, "  total: %d kills survived; rows lost %d, doubled %d; dead letters lost %d, doubled %d\n",
			total.kills, total.lost, total.doubled, total.lostLetters, total.doubledLetters)
	})

	t.Run("checkpoint", func(t *testing.T) {
		var all []outcome
		for _, p := range programs {
			t.Run(p.name, func(t *testing.T) {
				all = append(all, corruptProgram(t, r, p, 15, damages(r, sz.flips))...)
			})
		}
		for _, o := range all {
			switch {
			case o.recovered:
				recovered++
			case o.detected:
				detected++
			default:
				failed++
			}
		}
		fmt.Fprintf(&summary, "checkpoint files damaged (each file of each program's finished checkpoint, which holds a table and a log, in turn; then the run resumed with more input):\n")
		fmt.Fprintf(&summary, "  %d damaged checkpoints: %d detected (refused, exit status 1, with an error naming the checkpoint), %d recovered (ran, the right output), %d failed\n",
			len(all), detected, recovered, failed)
		summary.WriteString(corruptionTable(all))
	})

	t.Run("input", func(t *testing.T) {
		goodDir, badDir := filepath.Join(t.TempDir(), "good"), filepath.Join(t.TempDir(), "input")
		cases, counts := prepareBadInputs(t, r, goodDir, badDir)
		var all []badInputStats
		for _, p := range programs {
			t.Run(p.name, func(t *testing.T) {
				var want map[string]int64
				if p.name == "countkeys" {
					want = counts
				}
				all = append(all, badInputProgram(t, p, goodDir, badDir, cases, want))
			})
		}
		bad := 0
		for _, c := range cases {
			if c.expect != read {
				bad++
			}
		}
		fmt.Fprintf(&summary, "bad input beside good files (%d bad entries, %d odd but valid files, in one directory):\n", bad, len(cases)-bad)
		for _, st := range all {
			fmt.Fprintf(&summary, "  %-13s exit 0, the good rows' output as without the bad inputs (%d rows; lost %d, doubled %d); %d dead letters with their reason, %d entries skipped with a warning, %d odd files read; %d failed\n",
				st.program, st.goodRows, st.lost, st.doubled, st.deadLetters, st.skipped, st.read, st.failed)
			badHandled += st.deadLetters + st.skipped
			badFailed += st.failed
			lost += st.lost
			doubled += st.doubled
		}
		for _, c := range cases {
			fmt.Fprintf(&summary, "    %-17s %-58s %s", c.name, c.what, c.expect)
			if c.reason != "" {
				fmt.Fprintf(&summary, " (%q)", c.reason)
			}
			summary.WriteByte('\n')
		}
	})

	fmt.Fprintf(&summary, "in all: %d kills survived; %d damaged checkpoints detected, %d recovered, %d failed; %d bad inputs handled, %d failed; rows and dead letters lost %d, doubled %d\n",
		kills, detected, recovered, failed, badHandled, badFailed, lost, doubled)
	fmt.Fprintln(&summary, "not repeated here: a full disk, a failing sync and a hanging disk (runtime/faults_test.go, typed/faults_test.go); SIGINT and SIGTERM (examples/signals_test.go)")
	t.Log("\n" + summary.String())
}
