package main

import (
	"testing"
	"time"

	"github.com/streamgen/streamgen/typed"
	"github.com/streamgen/streamgen/typed/typedtest"
)

// TestSessionize drives the sessionize binding with typedtest, a batch at
// a time: sessions stay open (in state, a timeout each) until the
// watermark, 10 minutes behind the latest click, passes their last click
// by the gap; then each is written once.
func TestSessionize(t *testing.T) {
	at := func(hm string) time.Time {
		ts, err := time.Parse("2006-01-02T15:04Z", "2026-03-02T"+hm+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	d := typedtest.NewPipeline(t, func(s typed.Stream[Click]) typed.Stream[SessionOut] { return sessionizeStream(s) })
	out := d.Run(Click{User: "ana", Time: at("09:00"), Page: "/"}, Click{User: "ana", Time: at("09:10"), Page: "/docs"},
		Click{User: "bo", Time: at("09:12"), Page: "/"})
	if len(out) != 0 {
		t.Fatalf("sessions written while open: %+v", out)
	}
	if s, ok := typedtest.Value[Session](t, d.State(0, "ana", "state")); !ok || s.Clicks != 2 || !s.End.Equal(at("09:10")) {
		t.Fatalf("ana's open session: %+v (%v)", s, ok)
	}
	// A click an hour later moves the watermark to 10:05: past ana's end
	// and bo's by the gap.
	out = d.Run(Click{User: "cy", Time: at("10:15"), Page: "/"})
	byUser := map[string]SessionOut{}
	for _, s := range out {
		byUser[s.User] = s
	}
	ana, bo := byUser["ana"], byUser["bo"]
	if len(out) != 2 || ana.Clicks != 2 || !ana.Start.Equal(at("09:00")) || !ana.End.Equal(at("09:10")) ||
		bo.Clicks != 1 || len(ana.Pages) != 2 {
		t.Fatalf("sessions after the watermark passed them: %+v", out)
	}
	if rows := d.State(0, "ana", ""); len(rows) != 0 {
		t.Fatalf("ana's state after her session was written: %+v", rows)
	}
	// A click before the watermark is late: dropped, and not a session.
	if out := d.Run(Click{User: "ana", Time: at("09:30"), Page: "/"}); len(out) != 0 {
		t.Fatalf("a late click made %+v", out)
	}
}
