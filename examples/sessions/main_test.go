package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/examples/internal/clitest"
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

// TestSessionsMatchAPlainLoop runs the example on the sample with several
// batch splits, and with restarts on the same checkpoint after every
// batch, ending with -flush, and compares the sessions with the plain
// loop's.
func TestSessionsMatchAPlainLoop(t *testing.T) {
	want := expected(cli.Sample())
	clitest.Run(t, run, []string{"-flush"}, func(t *testing.T, out, _ string) {
		got := clitest.ReadOutput[SessionOut](t, out)
		sortSessions(got)
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
	})
}
