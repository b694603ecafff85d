package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestQuickstart runs the program on its sample and checks the sessions
// it wrote against sessions computed here with a plain loop over the
// sample; the line that is not JSON must be a dead letter. A second run
// on the same directory finds no new input and writes nothing more.
func TestQuickstart(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	if err := run([]string{"-dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, &stderr)
	}
	got := readSessions(t, filepath.Join(dir, "out"))
	want := expectedSessions(t, sample)
	if len(want) != 5 {
		t.Fatalf("the plain loop found %d sessions in the sample, want 5: the sample changed?", len(want))
	}
	if !slices.EqualFunc(got, want, sameSession) {
		t.Errorf("sessions written:\n%v\nwant:\n%v", got, want)
	}
	letters, err := os.ReadFile(filepath.Join(dir, "deadletters", "dead-letters-0000000000.jsonl"))
	if err != nil || bytes.Count(letters, []byte("\n")) != 1 || !bytes.Contains(letters, []byte("this line is not JSON")) {
		t.Errorf("dead letters: %q, %v; want the one line that is not JSON", letters, err)
	}
	if !strings.Contains(stderr.String(), "batch 0: 10 rows in") {
		t.Errorf("the progress listener printed:\n%s", &stderr)
	}
	if !strings.Contains(stdout.String(), `"user":"ana"`) {
		t.Errorf("stdout does not show the sessions:\n%s", &stdout)
	}

	// A second run with a new file: the first run's flush moved the
	// watermark past every event time, so its clicks are late.
	more := `{"user":"ana","time":"2026-03-02T12:00:00Z","page":"/"}` + "\n" + `{"user":"dee","time":"2026-03-02T12:01:00Z","page":"/docs"}` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "in", "more.jsonl"), []byte(more), 0o644); err != nil {
		t.Fatal(err)
	}
	before, _ := filepath.Glob(filepath.Join(dir, "out", "*"))
	if err := run([]string{"-dir", dir}, &stdout, &stderr); err != nil {
		t.Fatalf("second run: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(dir, "out", "*"))
	if !slices.Equal(before, after) || !slices.EqualFunc(readSessions(t, filepath.Join(dir, "out")), want, sameSession) {
		t.Errorf("a second run with only late input changed the output: %v, then %v", before, after)
	}
	var late []string
	files, _ := filepath.Glob(filepath.Join(dir, "late", "part-*.jsonl"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		late = append(late, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	wantLate := strings.Split(strings.TrimSpace(more), "\n")
	if !slices.Equal(late, wantLate) {
		t.Errorf("late rows %q, want the new file's %q", late, wantLate)
	}
}

// readSessions reads every session the sink wrote, sorted by user and
// start.
func readSessions(t *testing.T, dir string) []SessionOut {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "part-*.jsonl"))
	var all []SessionOut
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			var s SessionOut
			if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			all = append(all, s)
		}
	}
	sortSessions(all)
	return all
}

// expectedSessions sessionizes the input with encoding/json and a loop:
// each user's clicks in time order, a new session after a pause of more
// than Gap.
func expectedSessions(t *testing.T, input string) []SessionOut {
	byUser := map[string][]Click{}
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		var c struct {
			User, Page string
			Time       time.Time
		}
		if json.Unmarshal([]byte(line), &c) != nil {
			continue
		}
		byUser[c.User] = append(byUser[c.User], Click{User: c.User, Time: c.Time, Page: c.Page})
	}
	var out []SessionOut
	for user, clicks := range byUser {
		slices.SortFunc(clicks, func(a, b Click) int { return a.Time.Compare(b.Time) })
		var cur *SessionOut
		for _, c := range clicks {
			if cur != nil && c.Time.Sub(cur.End) > Gap {
				out = append(out, *cur)
				cur = nil
			}
			if cur == nil {
				cur = &SessionOut{User: user, Start: c.Time}
			}
			cur.End = c.Time
			cur.Clicks++
			if !slices.Contains(cur.Pages, c.Page) {
				cur.Pages = append(cur.Pages, c.Page)
			}
		}
		out = append(out, *cur)
	}
	sortSessions(out)
	return out
}

func sortSessions(s []SessionOut) {
	slices.SortFunc(s, func(a, b SessionOut) int {
		if c := strings.Compare(a.User, b.User); c != 0 {
			return c
		}
		return a.Start.Compare(b.Start)
	})
}

func sameSession(a, b SessionOut) bool {
	return a.User == b.User && a.Start.Equal(b.Start) && a.End.Equal(b.End) && a.Clicks == b.Clicks && slices.Equal(a.Pages, b.Pages)
}
