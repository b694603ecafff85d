package queries_test

import (
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/bench/nexmark/queries"
)

// keepLateRows names the queries whose SQL's stateful operators (if any)
// are ones the watermark does not affect in Flink: regular joins (q3,
// q20, q23), group aggregations without windows (q15–q17), the deduplication
// and top-N by ROW_NUMBER (q18, q19), a processing-time window (q12), a
// lookup join (q13), and the stateless queries. Flink keeps their late
// rows. The others decide by event time: the windows of q5, q7, q8 and
// q11 drop a row once its window has fired (TestQ8LateRows,
// TestWindowsCloseAtTheirLastMillisecond; q7's join keeps every bid,
// TestQ7LateBids; q11 joins a late bid to an open session it touches,
// TestQ11LateBids), and q4 and q9 write an auction's winner once, at its
// expiry, leaving out the auctions and bids at or before the watermark
// (see winners).
var keepLateRows = []string{"q0", "q1", "q2", "q3", "q10", "q12", "q13", "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22", "q23"}

// lateEvents is n events at 1,000 a second from base, each 97th moved
// 6 seconds later in the stream (6,000 events on) with its time kept: in
// the stream, 2 seconds behind a watermark 4 seconds behind the latest
// time, and in a later batch than the events around its time.
func lateEvents(t *testing.T, base time.Time, n int64) []model.Event {
	t.Helper()
	events := testEventsFrom(t, base, n, 1_000)
	type moved struct {
		at int
		e  model.Event
	}
	var out []model.Event
	var held []moved
	for i, e := range events {
		for len(held) > 0 && held[0].at <= i {
			out, held = append(out, held[0].e), held[1:]
		}
		if i%97 == 96 && i+6_000 < len(events) {
			held = append(held, moved{at: i + 6_000, e: e})
			continue
		}
		out = append(out, e)
	}
	for _, h := range held {
		out = append(out, h.e)
	}
	return out
}

// lateCount is how many of events are at or before the watermark of the
// events before them less lag: the SQL's, the latest time less 4 s.
func lateCount(events []model.Event, lag int) int {
	var latest time.Time
	n := 0
	for i, e := range events {
		if j := i - lag - 1; j >= 0 && events[j].Time().After(latest) {
			latest = events[j].Time()
		}
		if !latest.IsZero() && !e.Time().After(latest.Add(-queries.WatermarkDelay)) {
			n++
		}
	}
	return n
}

// TestLateRowsKept runs the queries that keep late rows as Flink does
// over events out of order, some behind the watermark (lateEvents), from
// 15 seconds before midnight (the daily queries' late rows of one day
// come after the next has begun), in batches across restarts, and
// compares each with its loop, which takes every event as Flink's
// regular operators do.
func TestLateRowsKept(t *testing.T) {
	events := lateEvents(t, time.Date(2025, 12, 31, 23, 59, 45, 0, time.UTC), 30_000)
	// The watermark of a batch of 997 events trails the events by up to
	// two batches: a row late by that is late by any of the splits'.
	if n := lateCount(events, 2*997); n < 200 {
		t.Fatalf("%d events behind the watermark, want 200 or more", n)
	}
	// q23 joins a bid with a person some 50,000 events later (see
	// TestQueriesAgainstALoop).
	longer := lateEvents(t, time.Date(2025, 12, 31, 23, 59, 45, 0, time.UTC), 60_000)
	for _, name := range keepLateRows {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			q, err := queries.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			events := events
			if name == "q23" {
				events = longer
			}
			compareRuns(t, q, events, loopResult(t, q, events), []split{{997, 1, 0}, {997, 2, 0}, {4_000, 3, 0}})
		})
	}
}
