package queries_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/bench/nexmark/queries"
)

// TestQueriesAtTheirBoundaries runs queries over events made by hand to
// sit on the edges of their SQL that generated events never reach (at
// 1,000 events a second every event has its own millisecond): a bid at
// exactly a session's end, at exactly a window's end, at exactly an
// auction's expiry, and ties of price and of time. Each answer is worked
// out from the SQL in the comments, and both the query (in one batch, in
// batches of one, across a restart) and the plain loop must give it.
func TestQueriesAtTheirBoundaries(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	bid := func(ms int, auction, bidder, price int64, extra string) model.Event {
		return model.Event{Bid: &model.Bid{Auction: auction, Bidder: bidder, Price: price, Channel: "Google", URL: "u", DateTime: at(ms), Extra: extra}}
	}
	auction := func(id int64, fromMs, toMs int) model.Event {
		return model.Event{Auction: &model.Auction{ID: id, ItemName: fmt.Sprint("item", id), Description: "d", InitialBid: 1, Reserve: 2,
			DateTime: at(fromMs), Expires: at(toMs), Seller: 3, Category: 10, Extra: "e"}}
	}
	q9 := func(a, b model.Event) queries.Q9Row {
		x, y := a.Auction, b.Bid
		return queries.Q9Row{ID: x.ID, ItemName: x.ItemName, Description: x.Description, InitialBid: x.InitialBid, Reserve: x.Reserve,
			DateTime: x.DateTime, Expires: x.Expires, Seller: x.Seller, Category: x.Category, Extra: x.Extra,
			Auction: y.Auction, Bidder: y.Bidder, Price: y.Price, BidDateTime: y.DateTime, BidExtra: y.Extra}
	}
	q7 := func(e model.Event) queries.Q7Row {
		b := e.Bid
		return queries.Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
	}
	q18 := func(e model.Event) queries.Q18Row {
		b := e.Bid
		return queries.Q18Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL, DateTime: b.DateTime, Extra: b.Extra}
	}
	q19 := func(e model.Event, rank int64) queries.Q19Row {
		b := e.Bid
		return queries.Q19Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL, DateTime: b.DateTime, Extra: b.Extra, RankNumber: rank}
	}

	// q7: windows of 10 s; a bid joins a window's highest price when its
	// price equals it and its time is BETWEEN the window's end - 10 s and
	// the end, both included. Highest: 500 in [0, 10 s), 900 in [10, 20)
	// and in [20, 30). The bid at 10 s (500) joins the first window; the
	// one at 20 s (900) joins the second and the third.
	q7In := []model.Event{bid(1000, 1, 1, 500, ""), bid(10_000, 1, 2, 500, ""), bid(12_000, 1, 3, 900, ""), bid(20_000, 1, 4, 900, ""), bid(25_000, 1, 5, 100, "")}

	// q9: auction 1 runs from 0 to 100 s: two bids of 10, the one at 3 s
	// arriving after the one at 5 s, win on the earlier time; the 99 at
	// 101 s is after it expires, the 1000 at -1 s before it starts.
	// Auction 2 runs from 0 to 50 s: the 30 at exactly 50 s is in it
	// (BETWEEN) and wins over the 20 at 10 s. Auction 3 has two bids of
	// 40 at the same time: the first to arrive wins.
	a1, a2, a3 := auction(1, 0, 100_000), auction(2, 0, 50_000), auction(3, 0, 60_000)
	win1, win2, win3 := bid(3000, 1, 12, 10, "earlier"), bid(50_000, 2, 22, 30, "at expiry"), bid(7000, 3, 31, 40, "first")
	q9In := []model.Event{a1, a2, a3, bid(-1000, 1, 10, 1000, ""), bid(5000, 1, 11, 10, "later"), win1, bid(10_000, 2, 21, 20, ""),
		win3, bid(7000, 3, 32, 40, "second"), win2, bid(101_000, 1, 13, 99, "")}

	// q11: sessions of 10 s per bidder, which merge when they overlap or
	// touch. Bidder 7's bids 10 s apart are one session [0, 20 s);
	// bidder 8's, 10.001 s apart, are two; bidder 9's, each 10 s after
	// the one before, one session [5 s, 35 s).
	q11In := []model.Event{bid(0, 1, 7, 1, ""), bid(0, 1, 8, 1, ""), bid(5000, 1, 9, 1, ""), bid(10_000, 1, 7, 1, ""),
		bid(10_001, 1, 8, 1, ""), bid(15_000, 1, 9, 1, ""), bid(25_000, 1, 9, 1, "")}
	q11 := func(bidder, n int64, from, to int) queries.Q11Row {
		return queries.Q11Row{Bidder: bidder, BidCount: n, Starttime: at(from), Endtime: at(to)}
	}

	// q18: each bidder's latest bid on each auction. Two bids at the same
	// time: the later to arrive is the latest. A bid older than one seen
	// before it is not.
	q18In := []model.Event{bid(0, 1, 1, 50, "a"), bid(0, 1, 1, 60, "b"), bid(5000, 2, 2, 70, "x"), bid(3000, 2, 2, 80, "y")}

	// q19: each auction's ten highest bids. Eleven bids of 70 on auction
	// 2: of equal prices, the first to arrive ranks first, and the
	// eleventh is not among the ten; then a bid of 80 ranks first and
	// moves the others down, which leaves out the tenth bid of 70.
	q19In := []model.Event{bid(0, 1, 1, 5, "")}
	for i := range 11 {
		q19In = append(q19In, bid(1+i, 2, int64(100+i), 70, ""))
	}
	q19In = append(q19In, bid(20, 2, 999, 80, ""))
	q19Want := []any{q19(q19In[0], 1), q19(q19In[12], 1)}
	for i := range 9 {
		q19Want = append(q19Want, q19(q19In[1+i], int64(2+i)))
	}

	for _, c := range []struct {
		query  string
		events []model.Event
		want   []any
	}{
		{"q7", q7In, []any{q7(q7In[0]), q7(q7In[1]), q7(q7In[2]), q7(q7In[3]), q7(q7In[3])}},
		{"q9", q9In, []any{q9(a1, win1), q9(a2, win2), q9(a3, win3)}},
		{"q11", q11In, []any{q11(7, 2, 0, 20_000), q11(8, 1, 0, 10_000), q11(8, 1, 10_001, 20_001), q11(9, 3, 5000, 35_000)}},
		{"q18", q18In, []any{q18(q18In[1]), q18(q18In[2])}},
		{"q19", q19In, q19Want},
	} {
		t.Run(c.query, func(t *testing.T) {
			q, err := queries.ByName(c.query)
			if err != nil {
				t.Fatal(err)
			}
			var lines [][]byte
			for _, r := range c.want {
				l, err := json.Marshal(r)
				if err != nil {
					t.Fatal(err)
				}
				lines = append(lines, l)
			}
			want, err := queries.Final(q, lines)
			if err != nil {
				t.Fatal(err)
			}
			loop, err := q.Loop(c.events)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := queries.Final(q, loop); err != nil || !slices.Equal(got, want) {
				t.Errorf("the loop gives\n%s\nwant\n%s (%v)", joinLines(got), joinLines(want), err)
			}
			for _, run := range []split{{0, 1, 0}, {1, 1, 0}, {1, 2, 0}, {1, 2, 1}} {
				got, err := queries.Final(q, runQuery(t, q, c.events, run))
				if err != nil || !slices.Equal(got, want) {
					t.Errorf("%d a batch, %d runs: the query gives\n%s\nwant\n%s (%v)", run.perBatch, run.parts, joinLines(got), joinLines(want), err)
				}
			}
		})
	}
}

func joinLines(lines []string) string {
	var b []byte
	for _, l := range lines {
		b = append(append(b, "  "...), l...)
		b = append(b, '\n')
	}
	return string(b)
}

// TestPriceRanksAtTheirBounds runs the queries that count bids by price
// rank (q15, q16, q17) over bids on each side of the ranks' bounds,
// 10,000 and 1,000,000, which generated prices never hit exactly, and
// compares them with their loops.
func TestPriceRanksAtTheirBounds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var events []model.Event
	for i, price := range []int64{9_999, 10_000, 10_001, 999_999, 1_000_000, 1_000_001} {
		events = append(events, model.Event{Bid: &model.Bid{Auction: int64(i), Bidder: int64(10 + i), Price: price, Channel: "Google", URL: "u",
			DateTime: t0.Add(time.Duration(i) * time.Second)}})
	}
	for _, name := range []string{"q15", "q16", "q17"} {
		t.Run(name, func(t *testing.T) {
			q, err := queries.ByName(name)
			if err != nil {
				t.Fatal(err)
			}
			compareRuns(t, q, events, loopResult(t, q, events), []split{{0, 1, 0}, {1, 2, 0}})
		})
	}
}
