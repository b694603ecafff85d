package main

import (
	"testing"
	"time"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/examples/internal/clitest"
)

// TestActivityMatchesAPlainLoop: the last row written per user (Update
// mode) is what a plain fold over the readings, in input order, gives.
func TestActivityMatchesAPlainLoop(t *testing.T) {
	want := map[string]Activity{}
	for _, file := range cli.Sample() {
		for _, e := range file {
			t := time.Unix(0, e.CreationTime).UTC()
			a, ok := want[e.User]
			switch {
			case !ok || (e.Activity != a.Activity && t.After(a.End)):
				a = Activity{User: e.User, Activity: e.Activity, Start: t, End: t}
			case e.Activity == a.Activity:
				a.Start = minTime(a.Start, t)
				a.End = maxTime(a.End, t)
			}
			want[e.User] = a
		}
	}
	clitest.Run(t, run, nil, func(t *testing.T, out, _ string) {
		got := map[string]Activity{}
		for _, a := range clitest.ReadOutput[Activity](t, out) {
			got[a.User] = a
		}
		if len(got) != len(want) {
			t.Fatalf("%d users, want %d", len(got), len(want))
		}
		for u, w := range want {
			g := got[u]
			if g.Activity != w.Activity || !g.Start.Equal(w.Start) || !g.End.Equal(w.End) {
				t.Fatalf("user %s: got %+v, want %+v", u, g, w)
			}
		}
	})
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
