package queries_test

import (
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/bench/nexmark/queries"
)

// TestQ8LateRows feeds q8 people and auctions out of order: some behind
// the watermark but in a 10-second window still open, which join; some
// whose window has closed, which Flink drops (its window join, and the
// windowed GROUP BYs before it, drop a row once the watermark has reached
// its window's last millisecond, window_end - 1). The query must give
// what a plain loop simulating the watermark and applying Flink's rule
// gives.
//
// The query drops a row by the watermark of the batch before the one
// before it (Batch.LateWatermark): in batches of one row or two, the
// watermark of the rows up to one to three rows before the row. Each late
// or nearly late row below comes three rows after the last row that moved
// the watermark, so that the loop's answer is the same at each of those
// lags; the test checks that it is.
func TestQ8LateRows(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) // windows [0, 10 s), [10 s, 20 s), [20 s, 30 s)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	person := func(ms int, id int64, name string) model.Event {
		return model.Event{Person: &model.Person{ID: id, Name: name, EmailAddress: "e", CreditCard: "c", City: "x", State: "s", DateTime: at(ms)}}
	}
	auction := func(ms int, seller int64) model.Event {
		return model.Event{Auction: &model.Auction{ID: int64(ms), ItemName: "i", Description: "d", InitialBid: 1, Reserve: 2,
			DateTime: at(ms), Expires: at(ms + 60_000), Seller: seller, Category: 10}}
	}
	// filler moves the batches on without moving the watermark or
	// joining: an auction by a seller who is no person.
	filler := func(ms int) model.Event { return auction(ms, 100) }

	events := []model.Event{
		person(1000, 1, "alice"), person(2000, 2, "bob"),
		// The watermark: 13.998 s - 4 s = 9.998 s, past 5 s, but the
		// first window's last millisecond, 9.999 s, is after it: alice's
		// auction at 5 s is behind the watermark, in a window still open,
		// and joins.
		person(13_998, 10, "dave"), filler(11_000), filler(11_100), filler(11_200),
		auction(5000, 1),
		// The watermark: 9.999 s, the first window's last millisecond:
		// the window has closed, and bob's auction at 3 s is dropped.
		person(13_999, 11, "erin"), filler(11_300), filler(11_400), filler(11_500),
		auction(3000, 2),
		// The watermark: 21 s, past the second window's end: dave's
		// auction at 15 s, far behind, is dropped. In the third window,
		// frank and his auction, behind the watermark, join, and so do
		// grace and hers, which is not.
		person(25_000, 20, "grace"), filler(22_000), filler(22_100), filler(22_200),
		auction(15_000, 10), person(20_500, 21, "frank"), auction(20_800, 21), auction(21_500, 20),
	}
	q8 := func(id int64, name string, startMs int) queries.Q8Row {
		return queries.Q8Row{ID: id, Name: name, Stime: at(startMs)}
	}
	q, err := queries.ByName("q8")
	if err != nil {
		t.Fatal(err)
	}
	final := func(rows []queries.Q8Row) []string { return finalOf(t, q, rows) }

	want := final([]queries.Q8Row{q8(1, "alice", 0), q8(20, "grace", 20_000), q8(21, "frank", 20_000)})
	for lag := range 4 {
		if got := final(flinkQ8(events, lag)); !slices.Equal(got, want) {
			t.Fatalf("the loop, the watermark %d rows behind, gives\n%s\nwant\n%s", lag, joinLines(got), joinLines(want))
		}
	}
	for _, run := range []split{{1, 1, 0}, {1, 2, 0}, {2, 1, 0}, {2, 3, 0}, {2, 3, 1}} {
		got, err := queries.Final(q, runQuery(t, q, events, run))
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("%d a batch, %d runs: the query gives\n%s\nwant\n%s (%v)", run.perBatch, run.parts, joinLines(got), joinLines(want), err)
		}
	}
}

// flinkQ8 is q8 over events as Flink computes it with the watermark the
// largest event time of the rows before a row, less lag of them, less
// 4 s: a row whose 10-second window's last millisecond is at or before
// the watermark is dropped; the others join, per id and window, a
// person's entry and the auctions they opened.
func flinkQ8(events []model.Event, lag int) []queries.Q8Row {
	type key struct {
		id    int64
		start time.Time
	}
	names, sellers := map[key]string{}, map[key]bool{}
	var latest time.Time
	for i, e := range events {
		if j := i - lag - 1; j >= 0 && events[j].Time().After(latest) {
			latest = events[j].Time()
		}
		t := e.Time()
		start := t.Truncate(10 * time.Second)
		if !latest.IsZero() && !start.Add(10*time.Second-time.Millisecond).After(latest.Add(-4*time.Second)) {
			continue // late: its window has fired
		}
		if p := e.Person; p != nil {
			names[key{p.ID, start}] = p.Name
		}
		if a := e.Auction; a != nil {
			sellers[key{a.Seller, start}] = true
		}
	}
	var rows []queries.Q8Row
	for k, name := range names {
		if sellers[k] {
			rows = append(rows, queries.Q8Row{ID: k.id, Name: name, Stime: k.start})
		}
	}
	return rows
}
