package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/generated/sensor"
)

// expected computes the sessions with a plain loop: each user's readings
// sorted by event time, split where the gap exceeds Gap.
func expected(files [][]sensor.Event) []SessionOut {
	byUser := map[string][]sensor.Event{}
	for _, f := range files {
		for _, e := range f {
			byUser[e.User] = append(byUser[e.User], e)
		}
	}
	var out []SessionOut
	for user, evs := range byUser {
		slices.SortStableFunc(evs, func(a, b sensor.Event) int { return int(a.CreationTime - b.CreationTime) })
		var cur *SessionOut
		var xsum float64
		flush := func() {
			if cur != nil {
				cur.XAvg = xsum / float64(cur.Count)
				out = append(out, *cur)
			}
		}
		for _, e := range evs {
			t := time.Unix(0, e.CreationTime).UTC()
			if cur == nil || t.Sub(cur.End) > Gap {
				flush()
				cur, xsum = &SessionOut{UID: user, Start: t, End: t}, 0
			}
			cur.End = t
			cur.Count++
			xsum += e.X
			if !slices.Contains(cur.Activities, e.Activity) {
				cur.Activities = append(cur.Activities, e.Activity)
			}
		}
		flush()
	}
	sortSessions(out)
	return out
}

func sortSessions(s []SessionOut) {
	slices.SortFunc(s, func(a, b SessionOut) int {
		if c := strings.Compare(a.UID, b.UID); c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
}

func readOutput(t *testing.T, dir string) []SessionOut {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var out []SessionOut
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			var s SessionOut
			if err := s.UnmarshalJSON(sc.Bytes()); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, s)
		}
	}
	sortSessions(out)
	return out
}

// TestSessionsMatchAPlainLoop runs the example on the sample with several
// batch splits, and with restarts on the same checkpoint after every
// batch, and compares the sessions with the plain loop's.
func TestSessionsMatchAPlainLoop(t *testing.T) {
	want := expected(cli.Sample())
	input := t.TempDir()
	if err := cli.WriteSample(input); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		runs int
	}{
		{"all at once", nil, 1},
		{"one file per batch", []string{"-max-files-per-trigger", "1"}, 1},
		{"three files per batch", []string{"-max-files-per-trigger", "3"}, 1},
		{"a restart after every batch", []string{"-max-files-per-trigger", "1", "-trigger", "once"}, 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ckpt, dead := t.TempDir(), t.TempDir(), t.TempDir()
			for i := range tc.runs {
				args := append([]string{"-input", input, "-output", out, "-checkpoint", ckpt, "-dead-letter", dead}, tc.args...)
				if i == tc.runs-1 {
					// The last run ends the input: every open session is emitted.
					args = append(slices.DeleteFunc(args, func(a string) bool { return a == "-trigger" || a == "once" }), "-flush")
				}
				if err := run(args, os.Stdout); err != nil {
					t.Fatal(err)
				}
			}
			got := readOutput(t, out)
			if len(got) != len(want) {
				t.Fatalf("%d sessions, want %d", len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.UID != w.UID || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) || g.Count != w.Count ||
					!slices.Equal(g.Activities, w.Activities) || fmt.Sprintf("%.12g", g.XAvg) != fmt.Sprintf("%.12g", w.XAvg) {
					t.Fatalf("session %d:\n got %+v\nwant %+v", i, g, w)
				}
			}
			letters, _ := filepath.Glob(filepath.Join(dead, "*.jsonl"))
			if len(letters) != 1 {
				t.Fatalf("dead-letter files: %v, want one", letters)
			}
			data, _ := os.ReadFile(letters[0])
			if !strings.Contains(string(data), "part-00003.jsonl:251") {
				t.Fatalf("dead letter: %s", data)
			}
		})
	}
}
