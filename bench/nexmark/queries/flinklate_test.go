package queries_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/bench/nexmark/queries"
)

// The windowed queries q5 and q7 over bids out of order, against plain
// loops that apply Flink's rules with the watermark at each row the
// largest event time of the rows before it, less lag of them, less 4 s:
// a row is dropped from each of its windows whose last millisecond
// (window_end - 1) is at or before the watermark, and counts in the
// others (Flink's window aggregation); q7's join of each bid with its
// window's highest price is a regular join, which keeps every bid, late
// ones too.
//
// The query drops a row by the watermark its batch's batch before ran
// with, a lag of one to three batches of rows. Each split below has at
// most lateBatch rows a batch, and the moved bids are those whose fate in
// every window is the same at each lag up to three batches (sureBids);
// the test checks that the loops give the same at both ends.

// lateBatch is the most rows a batch of the runs below has.
const lateBatch = 400

// lateSplits are the runs: batches of at most lateBatch rows, across
// restarts.
var lateSplits = []split{{250, 1, 0}, {250, 2, 0}, {lateBatch, 3, 0}, {lateBatch, 3, 2}}

// flinkWatermarks is the watermark at each of events, lag rows behind:
// zero (none) before the first.
func flinkWatermarks(events []model.Event, lag int) []time.Time {
	wms := make([]time.Time, len(events))
	var latest time.Time
	for i := range events {
		if j := i - lag - 1; j >= 0 && events[j].Time().After(latest) {
			latest = events[j].Time()
		}
		if !latest.IsZero() {
			wms[i] = latest.Add(-queries.WatermarkDelay)
		}
	}
	return wms
}

// fired says the window of end is closed at watermark wm.
func fired(end int64, wm time.Time) bool {
	return !wm.IsZero() && end-1 <= wm.UnixMilli()
}

// windowEnds are the ends (Unix ms) of the windows of size, sliding by
// slide, that hold a row at ms.
func windowEnds(ms, size, slide int64) []int64 {
	var ends []int64
	for s := ms - ms%slide; s > ms-size; s -= slide {
		ends = append(ends, s+size)
	}
	return ends
}

// movedBids is n events at 1,000 a second from base with every 41st bid,
// and the first bids after each multiple of 10 s, set at it, moved 8
// seconds later in the stream, their times kept: when it arrives, a
// moved bid's windows of size sliding by slide are all closed, all open
// or some of each. A bid whose windows' fate would differ at lags of 0
// and 3 lateBatch rows is left out. It returns the events and the
// positions of the bids moved.
func movedBids(t *testing.T, base time.Time, n int64, size, slide int64) ([]model.Event, []int) {
	t.Helper()
	events := testEventsFrom(t, base, n, 1_000)
	atEnd := map[int]bool{}
	bids := 0
	for i, e := range events {
		if b := e.Bid; b != nil {
			bids++
			if b.DateTime.UnixMilli()%10_000 < 5 {
				bid := *b
				bid.DateTime = b.DateTime.Truncate(10 * time.Second)
				events[i].Bid = &bid
				atEnd[bids] = true
			}
		}
	}
	out := delayBids(events, func(bid int) int {
		if bid%41 == 0 || atEnd[bid] {
			return 8_000
		}
		return 0
	})
	// Leave out the moved bids whose fate depends on the lag, until none
	// does (leaving one out moves the rows after it).
	for {
		now, before := flinkWatermarks(out, 0), flinkWatermarks(out, 3*lateBatch)
		var kept []model.Event
		var moved []int
		var latest time.Time
		for i, e := range out {
			if e.Bid == nil || !e.Time().Before(latest) {
				kept = append(kept, e)
				if e.Time().After(latest) {
					latest = e.Time()
				}
				continue
			}
			sure := true
			for _, end := range windowEnds(e.Bid.DateTime.UnixMilli(), size, slide) {
				sure = sure && fired(end, now[i]) == fired(end, before[i])
			}
			if sure {
				moved = append(moved, len(kept))
				kept = append(kept, e)
			}
		}
		if len(kept) == len(out) {
			return out, moved
		}
		out = kept
	}
}

// delayBids moves bids later in the stream, their times kept: the nth
// bid (from 1) by delay(n) rows, or not at all for 0. A bid whose delay
// would take it past the end is not moved.
func delayBids(events []model.Event, delay func(n int) int) []model.Event {
	type held struct {
		at int
		e  model.Event
	}
	var out []model.Event
	var wait []held
	bids := 0
	for i, e := range events {
		for len(wait) > 0 && wait[0].at <= i {
			out, wait = append(out, wait[0].e), wait[1:]
		}
		if e.Bid != nil {
			bids++
			if d := delay(bids); d > 0 && i+d < len(events) {
				wait = append(wait, held{at: i + d, e: e})
				slices.SortStableFunc(wait, func(a, b held) int { return a.at - b.at })
				continue
			}
		}
		out = append(out, e)
	}
	for _, h := range wait {
		out = append(out, h.e)
	}
	return out
}

// flinkQ5 is q5 as Flink computes it: each window's counts of the bids
// not dropped from it, and the auctions at its most.
func flinkQ5(events []model.Event, lag int) []queries.Q5Row {
	wms := flinkWatermarks(events, lag)
	counts := map[int64]map[int64]int64{} // by window end, auction
	for i, e := range events {
		b := e.Bid
		if b == nil {
			continue
		}
		for _, end := range windowEnds(b.DateTime.UnixMilli(), 10_000, 2_000) {
			if fired(end, wms[i]) {
				continue
			}
			if counts[end] == nil {
				counts[end] = map[int64]int64{}
			}
			counts[end][b.Auction]++
		}
	}
	var rows []queries.Q5Row
	for _, byAuction := range counts {
		most := int64(0)
		for _, n := range byAuction {
			most = max(most, n)
		}
		for a, n := range byAuction {
			if n == most {
				rows = append(rows, queries.Q5Row{Auction: a, Num: n})
			}
		}
	}
	return rows
}

// flinkQ7Max is the highest price of each 10-second window (by its end,
// Unix ms) over the bids not dropped from it.
func flinkQ7Max(events []model.Event, lag int) map[int64]int64 {
	wms := flinkWatermarks(events, lag)
	most := map[int64]int64{}
	for i, e := range events {
		b := e.Bid
		if b == nil {
			continue
		}
		end := windowEnds(b.DateTime.UnixMilli(), 10_000, 10_000)[0]
		if fired(end, wms[i]) {
			continue
		}
		if p, ok := most[end]; !ok || b.Price > p {
			most[end] = b.Price
		}
	}
	return most
}

// flinkQ7 is q7 as Flink computes it: every bid, late or not, at the
// highest price of a window whose [end - 10 s, end] holds its time.
func flinkQ7(events []model.Event, lag int) []queries.Q7Row {
	var rows []queries.Q7Row
	for end, price := range flinkQ7Max(events, lag) {
		for _, e := range events {
			if b := e.Bid; b != nil && b.Price == price {
				if ms := b.DateTime.UnixMilli(); ms >= end-10_000 && ms <= end {
					rows = append(rows, queries.Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra})
				}
			}
		}
	}
	return rows
}

// finalOf is the result table of rows of q.
func finalOf[T any](t *testing.T, q *queries.Query, rows []T) []string {
	t.Helper()
	var lines [][]byte
	for _, r := range rows {
		l, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	out, err := queries.Final(q, lines)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// compareFlink checks that the loop gives the same at lags 0 and 3
// batches, and that the query, run each of lateSplits' ways, gives it.
func compareFlink[T any](t *testing.T, name string, events []model.Event, loop func([]model.Event, int) []T) {
	t.Helper()
	q, err := queries.ByName(name)
	if err != nil {
		t.Fatal(err)
	}
	want := finalOf(t, q, loop(events, 0))
	if got := finalOf(t, q, loop(events, 3*lateBatch)); !slices.Equal(got, want) {
		t.Fatalf("the loop gives %d rows at lag 0, %d at lag %d: the moved bids' fate depends on the lag", len(want), len(got), 3*lateBatch)
	}
	compareRuns(t, q, events, want, lateSplits)
}

// TestQ5LateBids: a bid late for some of its hopping windows counts in
// the others.
func TestQ5LateBids(t *testing.T) {
	t.Parallel()
	events, moved := movedBids(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 30_000, 10_000, 2_000)
	// The moved bids must test both fates: some dropped from a window,
	// and some of those counted in another.
	wms := flinkWatermarks(events, 0)
	var dropped, partly int
	for _, i := range moved {
		var n int
		ends := windowEnds(events[i].Bid.DateTime.UnixMilli(), 10_000, 2_000)
		for _, end := range ends {
			if fired(end, wms[i]) {
				n++
			}
		}
		if n > 0 {
			dropped++
		}
		if n > 0 && n < len(ends) {
			partly++
		}
	}
	if dropped < 20 || partly < 10 {
		t.Fatalf("%d moved bids, %d dropped from a window, %d of them counted in another: too few", len(moved), dropped, partly)
	}
	compareFlink(t, "q5", events, flinkQ5)
}

// TestQ7LateBids: a bid that comes after its window has fired is not in
// its highest price, and joins it when at that price (half the late
// bids are set at it), as does a bid at a window's end, which the SQL's
// BETWEEN counts with the window before its own.
func TestQ7LateBids(t *testing.T) {
	t.Parallel()
	events, moved := movedBids(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 30_000, 10_000, 10_000)
	most := flinkQ7Max(events, 0)
	wms := flinkWatermarks(events, 0)
	var tied, atEnd int
	for k, i := range moved {
		b := events[i].Bid
		ms := b.DateTime.UnixMilli()
		end := windowEnds(ms, 10_000, 10_000)[0]
		if ms%10_000 == 0 {
			// The window before, which has fired.
			if p, ok := most[ms]; ok && fired(ms, wms[i]) {
				bid := *b
				bid.Price = p
				events[i].Bid = &bid
				atEnd++
			}
			continue
		}
		if p, ok := most[end]; ok && k%2 == 0 && fired(end, wms[i]) {
			bid := *b
			bid.Price = p
			events[i].Bid = &bid
			tied++
		}
	}
	if tied < 10 || atEnd < 2 {
		t.Fatalf("%d late bids at their window's highest price, %d at the end of a window that has fired: too few", tied, atEnd)
	}
	compareFlink(t, "q7", events, flinkQ7)
}

// flinkQ11 is q11 over events with the watermark lag rows behind: each
// bidder's open sessions [first, last + 10 s), a bid joining those it
// touches; a session fires, and is forgotten, once the watermark reaches
// its last millisecond. A bid whose own session [t, t+10 s) has fired is
// late: Flink's rule merges it first with the open sessions it touches,
// and drops it only if there are none; Spark's (dropAll) drops it. It
// returns the sessions, and how many late bids were kept.
func flinkQ11(events []model.Event, lag int, dropAll bool) ([]queries.Q11Row, int) {
	const gap = 10_000
	type session struct{ start, end, n int64 }
	wms := flinkWatermarks(events, lag)
	open := map[int64][]session{}
	var rows []queries.Q11Row
	emit := func(bidder int64, s session) {
		rows = append(rows, queries.Q11Row{Bidder: bidder, BidCount: s.n, Starttime: time.UnixMilli(s.start).UTC(), Endtime: time.UnixMilli(s.end).UTC()})
	}
	kept := 0
	for i, e := range events {
		b := e.Bid
		if b == nil {
			continue
		}
		// Fire the bidder's sessions the watermark has reached.
		var still []session
		for _, s := range open[b.Bidder] {
			if fired(s.end, wms[i]) {
				emit(b.Bidder, s)
			} else {
				still = append(still, s)
			}
		}
		t := b.DateTime.UnixMilli()
		merged := session{t, t + gap, 1}
		var rest []session
		touched := false
		for _, s := range still {
			if s.start <= merged.end && merged.start <= s.end {
				merged = session{min(merged.start, s.start), max(merged.end, s.end), merged.n + s.n}
				touched = true
			} else {
				rest = append(rest, s)
			}
		}
		if fired(t+gap, wms[i]) {
			if dropAll || !touched {
				open[b.Bidder] = still
				continue
			}
			kept++
		}
		open[b.Bidder] = append(rest, merged)
	}
	for bidder, ss := range open {
		for _, s := range ss {
			emit(bidder, s)
		}
	}
	return rows, kept
}

// TestQ11LateBids: bids out of order within the watermark join the
// sessions they touch; bids whose own session has fired join the open
// sessions they touch, and are dropped only where there are none, as
// Flink's (Spark's rule would drop them all: the test tells the two
// apart).
func TestQ11LateBids(t *testing.T) {
	t.Parallel()
	events := testEventsFrom(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), 40_000, 1_000)
	// Every 37th bid moved 2 s later in the stream (out of order, not
	// late), every 41st 30 s later (late by any lag).
	out := delayBids(events, func(bid int) int {
		switch {
		case bid%37 == 0:
			return 2_000
		case bid%41 == 0:
			return 30_000
		}
		return 0
	})
	q, err := queries.ByName("q11")
	if err != nil {
		t.Fatal(err)
	}
	rows, kept := flinkQ11(out, 0, false)
	want := finalOf(t, q, rows)
	if other, _ := flinkQ11(out, 3*lateBatch, false); !slices.Equal(finalOf(t, q, other), want) {
		t.Fatalf("the loop's sessions depend on the lag")
	}
	// The bids moved 30 s are late, and some join an open session.
	spark, _ := flinkQ11(out, 0, true)
	if kept == 0 || slices.Equal(finalOf(t, q, spark), want) {
		t.Fatalf("Flink's rule keeps %d late bids: the test does not tell it from Spark's", kept)
	}
	compareRuns(t, q, out, want, lateSplits)
}

// TestWindowsCloseAtTheirLastMillisecond: q5, q7 and q11 drop a row for
// a window once the watermark has reached the window's last millisecond
// (window_end - 1), as Flink does, not its end. In batches of one row or
// two, each late row comes three rows (people, which count nowhere and
// are before the watermark) after the row that moved the watermark, so
// that the loops give the same at lags of one to three rows; the test
// checks that they do.
func TestWindowsCloseAtTheirLastMillisecond(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	bid := func(ms int, auction, bidder, price int64) model.Event {
		return model.Event{Bid: &model.Bid{Auction: auction, Bidder: bidder, Price: price, Channel: "c", URL: "u", DateTime: at(ms)}}
	}
	// mark moves the watermark to ms, and three people after it keep it
	// there.
	mark := func(ms int) []model.Event {
		person := func(id int64, ms int) model.Event {
			return model.Event{Person: &model.Person{ID: id, Name: "p", EmailAddress: "e", CreditCard: "c", City: "x", State: "s", DateTime: at(ms)}}
		}
		return []model.Event{person(1, ms+4_000), person(2, 0), person(3, 0), person(4, 0)}
	}
	check := func(sub, name string, events []model.Event, want []string, loop func(lag int) []string) {
		t.Run(sub, func(t *testing.T) {
			for lag := 1; lag <= 3; lag++ {
				if got := loop(lag); !slices.Equal(got, want) {
					t.Fatalf("the loop, the watermark %d rows behind, gives\n%s\nwant\n%s", lag, joinLines(got), joinLines(want))
				}
			}
			q, err := queries.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, run := range []split{{1, 1, 0}, {1, 2, 0}, {2, 1, 0}, {2, 3, 0}} {
				got, err := queries.Final(q, runQuery(t, q, events, run))
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("%d a batch, %d runs: the query gives\n%s\nwant\n%s (%v)", run.perBatch, run.parts, joinLines(got), joinLines(want), err)
				}
			}
		})
	}
	// q5: the hopping windows of 1.0–1.9 s end at 2, 4, 6, 8 and 10 s.
	// Auction 2's second bid comes with the watermark at 1.999 s: late
	// for the window that ends at 2 s, and counted in the four others.
	q5, err := queries.ByName("q5")
	if err != nil {
		t.Fatal(err)
	}
	events := slices.Concat([]model.Event{bid(1000, 1, 1, 5), bid(1500, 1, 1, 5), bid(1200, 2, 1, 5)}, mark(1999), []model.Event{bid(1900, 2, 1, 5)})
	want := finalOf(t, q5, []queries.Q5Row{{Auction: 1, Num: 2}, {Auction: 1, Num: 2}, {Auction: 2, Num: 2}, {Auction: 1, Num: 2}, {Auction: 2, Num: 2},
		{Auction: 1, Num: 2}, {Auction: 2, Num: 2}, {Auction: 1, Num: 2}, {Auction: 2, Num: 2}})
	check("q5", "q5", events, want, func(lag int) []string { return finalOf(t, q5, flinkQ5(events, lag)) })

	// q7: the bid of 9 at 9.5 s comes with the watermark at 9.999 s: late
	// for its window, whose highest price stays 7.
	q7, err := queries.ByName("q7")
	if err != nil {
		t.Fatal(err)
	}
	events = slices.Concat([]model.Event{bid(1000, 1, 1, 7), bid(2000, 2, 2, 3)}, mark(9999), []model.Event{bid(9500, 3, 3, 9)})
	want = finalOf(t, q7, []queries.Q7Row{{Auction: 1, Price: 7, Bidder: 1, DateTime: at(1000)}})
	check("q7", "q7", events, want, func(lag int) []string { return finalOf(t, q7, flinkQ7(events, lag)) })

	// q7 again: the window [0 s, 10 s) fires in the batch of its bid at
	// 9.5 s, which its highest price joins once; the bid at 10 s, at that
	// price, joins it too, and is its own window's highest.
	events = slices.Concat([]model.Event{bid(1000, 1, 1, 7)}, mark(9999)[:1], []model.Event{bid(9500, 2, 2, 7), bid(10_000, 3, 3, 7)})
	want = finalOf(t, q7, []queries.Q7Row{{Auction: 1, Price: 7, Bidder: 1, DateTime: at(1000)}, {Auction: 2, Price: 7, Bidder: 2, DateTime: at(9500)},
		{Auction: 3, Price: 7, Bidder: 3, DateTime: at(10_000)}, {Auction: 3, Price: 7, Bidder: 3, DateTime: at(10_000)}})
	check("q7 fires with its bids", "q7", events, want, func(lag int) []string { return finalOf(t, q7, flinkQ7(events, lag)) })

	// q11: bidder 1's session [1 s, 11 s) fires with the watermark at
	// 10.999 s; the bid at 0.9 s that comes then is late, and has no
	// open session to join.
	q11, err := queries.ByName("q11")
	if err != nil {
		t.Fatal(err)
	}
	events = slices.Concat([]model.Event{bid(1000, 1, 1, 7)}, mark(10_999), []model.Event{bid(900, 1, 1, 7)})
	want = finalOf(t, q11, []queries.Q11Row{{Bidder: 1, BidCount: 1, Starttime: at(1000), Endtime: at(11_000)}})
	check("q11", "q11", events, want, func(lag int) []string {
		rows, _ := flinkQ11(events, lag, false)
		return finalOf(t, q11, rows)
	})
}
