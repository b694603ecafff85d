package queries

import (
	"iter"
	"slices"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/typed"
)

// The queries over event-time windows: q5 (hopping), q7 and q8
// (tumbling), q11 (sessions). Each writes a window's rows once, when the
// watermark reaches its last millisecond, as Flink does (flinkShift); q7
// writes, after, the late bids that join a window's highest price.

// flinkShift moves the windows of q5, q7, q8 and q11 1 ms earlier, and
// their rows' times with them: each row falls in the window it falls in
// of the SQL's TUMBLE, HOP or SESSION [s, e), which ends, here, at its
// last millisecond, e-1 ms. Flink fires a window, and drops the rows
// that arrive for it after, once the watermark reaches that last
// millisecond (window_end - 1 <= watermark), where a windowed
// aggregation closes a window, and drops its late rows, once the
// watermark reaches the window's end. A row at or before the watermark
// whose window is still open is not late, in both; a row late for some
// of its hopping windows counts in the others, in both.
// q11's sessions also join a row whose own session [t, t+gap) has fired
// to the bidder's sessions still open that it touches, as Flink merges
// before it judges a row late (JoiningOpenSessions; by batch, where Flink
// goes row by row: a late row may join a session that a row after it in
// its batch made).
const flinkShift = time.Millisecond

// Q5Row is q5's row.
//
//streamgen:record
type Q5Row struct {
	Auction int64 `json:"auction"`
	Num     int64 `json:"num"`
}

// Q5Count is the bids of an auction in a window of q5.
//
//streamgen:record
type Q5Count struct {
	Auction int64 `json:"auction"`
	Start   int64 `json:"start"` // the window's start, Unix ms
	Num     int64 `json:"num"`
}

// Q5State is q5's state per window: the most bids of an auction in it
// so far, and the auctions with that many. A window's counts may come
// in several batches (runtime.WindowClosesPerBatch): the auctions at its
// most are written once the watermark has passed its end, which the
// operator sees only once the counts are all in.
//
//streamgen:record
type Q5State struct {
	Most     int64   `json:"most"`
	Auctions []int64 `json:"auctions"`
}

var _ = register(&Query{
	Name:  "q5",
	Title: "hot items: the auctions with the most bids in each 10-second window, every 2 seconds",
	build: func(events typed.Stream[model.Event], out Output) starter {
		const size = 10 * time.Second
		counts := typed.AggregateWindows(
			typed.GroupByWindow(bids(events), func(b *model.Bid) time.Time { return b.DateTime.Add(-flinkShift) },
				typed.Sliding(size, 2*time.Second).StartingAt(-flinkShift), func(b *model.Bid) int64 { return b.Auction }),
			typed.Count[model.Bid](),
			func(w typed.Window, auction int64, n int64) Q5Count {
				return Q5Count{Auction: auction, Start: w.Start.Add(flinkShift).UnixMilli(), Num: n}
			})
		// The counts of a window keep those at its most. The window's
		// counts are written as the watermark passes its last instant,
		// which this operator's watermark passes once they are all in:
		// its auctions at the most are written then, at once if it has,
		// or at a timeout there.
		hot := typed.FlatMapGroupsWithState(typed.GroupByKey(counts, func(c *Q5Count) int64 { return c.Start }), typed.Append, typed.EventTimeTimeout,
			func(start int64, rows iter.Seq[Q5Count], state *typed.GroupState[Q5State], emit func(Q5Row)) error {
				s, _ := state.Get()
				for c := range rows {
					switch {
					case c.Num > s.Most:
						s.Most, s.Auctions = c.Num, append(s.Auctions[:0], c.Auction)
					case c.Num == s.Most:
						s.Auctions = append(s.Auctions, c.Auction)
					}
				}
				last := time.UnixMilli(start).Add(size - flinkShift - time.Nanosecond)
				if state.HasTimedOut() || state.CurrentWatermark().After(last) {
					for _, a := range s.Auctions {
						emit(Q5Row{Auction: a, Num: s.Most})
					}
					state.Remove()
					return nil
				}
				state.Update(s)
				return state.SetTimeoutTimestamp(last)
			})
		return typed.WriteTo(hot, sinkOf[Q5Row](out)).OutputMode(typed.Append)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		// Each window [s, s+10 s) with s a multiple of 2 s: the bids'
		// counts per auction, then those at the window's most.
		counts := map[int64]map[int64]int64{}
		for i := range events {
			b := events[i].Bid
			if b == nil {
				continue
			}
			ms := b.DateTime.UnixMilli()
			for s := floorTo(ms, 2000); s > ms-10_000; s -= 2000 {
				if counts[s] == nil {
					counts[s] = map[int64]int64{}
				}
				counts[s][b.Auction]++
			}
		}
		var rows []Q5Row
		for _, byAuction := range counts {
			most := int64(0)
			for _, n := range byAuction {
				most = max(most, n)
			}
			for a, n := range byAuction {
				if n >= most {
					rows = append(rows, Q5Row{Auction: a, Num: n})
				}
			}
		}
		return lines(rows)
	},
})

// floorTo rounds ms down to a multiple of d.
func floorTo(ms, d int64) int64 {
	r := ms % d
	if r < 0 {
		r += d
	}
	return ms - r
}

// Q7Row is q7's row, its columns named as the query's SELECT names them
// (auction, price, bidder: the nexmark/nexmark sink table lists bidder
// before price, and so receives each in the other's column).
//
//streamgen:record
type Q7Row struct {
	Auction  int64     `json:"auction"`
	Price    int64     `json:"price"`
	Bidder   int64     `json:"bidder"`
	DateTime time.Time `json:"dateTime"`
	Extra    string    `json:"extra"`
}

// Q7Acc is q7's accumulator of a window: its highest price, the window's
// bids at that price, and the bids at the window's end (the next window's
// start), which `B.dateTime BETWEEN window_end - 10 s AND window_end`
// counts with it without their price counting in its highest.
//
//streamgen:record
type Q7Acc struct {
	Max     int64   `json:"max"`
	Top     []Q7Row `json:"top"`
	AtEnd   []Q7Row `json:"atEnd"`
	HasRows bool    `json:"hasRows"`
}

// q7Side is a row of q7's join, by the end of the window it is for
// (Unix ms): the window's bids at its highest price, once it has fired,
// or a bid.
type q7Side struct {
	End   int64
	Fired bool
	Rows  []Q7Row
	Bid   Q7Row
}

// Q7Fired is q7's state of a window that has fired: its highest price,
// which the bids that come after it join.
//
//streamgen:record
type Q7Fired struct {
	Max int64 `json:"max"`
}

func q7RowOf(b *model.Bid) Q7Row {
	return Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra}
}

// q7Bid is a bid for q7's windows: at its own time, or, for a bid at a
// window's start, also as a bid at the end of the window before.
type q7Bid struct {
	row   Q7Row
	at    time.Time
	atEnd bool
}

type q7Max struct{}

func (q7Max) Zero() Q7Acc { return Q7Acc{} }

func (q7Max) Add(acc Q7Acc, b *q7Bid) Q7Acc {
	if b.atEnd {
		acc.AtEnd = append(acc.AtEnd, b.row)
		return acc
	}
	switch {
	case !acc.HasRows || b.row.Price > acc.Max:
		acc.HasRows, acc.Max, acc.Top = true, b.row.Price, append(acc.Top[:0], b.row)
	case b.row.Price == acc.Max:
		acc.Top = append(acc.Top, b.row)
	}
	return acc
}

func (q7Max) Merge(a, b Q7Acc) Q7Acc {
	a.AtEnd = append(a.AtEnd, b.AtEnd...)
	switch {
	case !b.HasRows:
	case !a.HasRows || b.Max > a.Max:
		a.HasRows, a.Max, a.Top = true, b.Max, b.Top
	case b.Max == a.Max:
		a.Top = append(a.Top, b.Top...)
	}
	return a
}

func (q7Max) Result(acc Q7Acc) []Q7Row {
	if !acc.HasRows {
		return nil
	}
	rows := slices.Clone(acc.Top)
	for _, r := range acc.AtEnd {
		if r.Price == acc.Max {
			rows = append(rows, r)
		}
	}
	return rows
}

var _ = register(&Query{
	Name:  "q7",
	Title: "highest bid: the bids at the highest price of each 10-second window",
	build: func(events typed.Stream[model.Event], out Output) starter {
		const size = 10 * time.Second
		all := bids(events)
		// B1, the windows' highest prices, with the bids of each window
		// at its price, and those at its end, which the BETWEEN counts
		// with it: a bid at a window's start is also one at the end of
		// the window before.
		windowed := typed.FlatMap(all, func(b *model.Bid) []q7Bid {
			r := q7RowOf(b)
			at := b.DateTime.Add(-flinkShift)
			if b.DateTime.Truncate(size).Equal(b.DateTime) {
				return []q7Bid{{row: r, at: at}, {row: r, at: at.Add(-time.Nanosecond), atEnd: true}}
			}
			return []q7Bid{{row: r, at: at}}
		})
		highest := typed.AggregateWindows(
			typed.GroupByWindow(windowed, func(b *q7Bid) time.Time { return b.at }, typed.Tumbling(size).StartingAt(-flinkShift),
				func(*q7Bid) struct{} { return struct{}{} }),
			typed.Aggregator[q7Bid, Q7Acc, []Q7Row](q7Max{}),
			func(w typed.Window, _ struct{}, rows []Q7Row) q7Side {
				return q7Side{End: w.End.Add(flinkShift).UnixMilli(), Fired: true, Rows: rows}
			})
		// The join of B with B1 is a regular join, which keeps every bid:
		// a bid that comes after its window has fired, late for B1, still
		// joins its row. Each bid goes to the window it is in, and a bid
		// at a window's start also to the window before.
		everyBid := typed.FlatMap(all, func(b *model.Bid) []q7Side {
			start := b.DateTime.Truncate(size)
			end := start.Add(size).UnixMilli()
			if start.Equal(b.DateTime) {
				return []q7Side{{End: end, Bid: q7RowOf(b)}, {End: start.UnixMilli(), Bid: q7RowOf(b)}}
			}
			return []q7Side{{End: end, Bid: q7RowOf(b)}}
		})
		joined := typed.FlatMapGroupsWithState(typed.GroupByKey(typed.Union(highest, everyBid), func(r *q7Side) int64 { return r.End }),
			typed.Append, typed.NoTimeout,
			func(_ int64, rows iter.Seq[q7Side], state *typed.GroupState[Q7Fired], emit func(Q7Row)) error {
				for r := range rows {
					if r.Fired {
						// The batch where the window fires: its bids, this
						// batch's too, are in its rows. Its price is kept
						// for the bids that come after.
						for _, top := range r.Rows {
							emit(top)
						}
						if len(r.Rows) > 0 {
							state.Update(Q7Fired{Max: r.Rows[0].Price})
						}
						return nil
					}
				}
				fired, ok := state.Get()
				if !ok {
					return nil // the window is open: its bids are in its rows when it fires
				}
				for r := range rows {
					if r.Bid.Price == fired.Max {
						emit(r.Bid)
					}
				}
				return nil
			})
		return typed.WriteTo(joined, sinkOf[Q7Row](out)).OutputMode(typed.Append)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		// The SQL: each window's highest price; then every bid at that
		// price whose time is in [end - 10 s, end].
		most := map[int64]int64{} // by window end, Unix ms
		for i := range events {
			if b := events[i].Bid; b != nil {
				end := floorTo(b.DateTime.UnixMilli(), 10_000) + 10_000
				if p, ok := most[end]; !ok || b.Price > p {
					most[end] = b.Price
				}
			}
		}
		var rows []Q7Row
		for end, price := range most {
			for i := range events {
				b := events[i].Bid
				if b == nil || b.Price != price {
					continue
				}
				if ms := b.DateTime.UnixMilli(); ms >= end-10_000 && ms <= end {
					rows = append(rows, Q7Row{Auction: b.Auction, Price: b.Price, Bidder: b.Bidder, DateTime: b.DateTime, Extra: b.Extra})
				}
			}
		}
		return lines(rows)
	},
})

// Q8Row is q8's row.
//
//streamgen:record
type Q8Row struct {
	ID    int64     `json:"id"`
	Name  string    `json:"name"`
	Stime time.Time `json:"stime"`
}

// q8Row is a person who entered, or a seller who opened an auction, at a
// time.
type q8Row struct {
	id     int64
	at     time.Time
	person bool
	name   string
}

// Q8Seen is q8's accumulator of a person and window: the person's entry
// and whether they opened an auction.
//
//streamgen:record
type Q8Seen struct {
	Person bool   `json:"person"`
	Name   string `json:"name"`
	Seller bool   `json:"seller"`
}

// q8Join joins, in a window, the person's entry and the auctions they
// opened, as the SQL's two windowed GROUP BYs joined on id and window.
type q8Join struct{}

func (q8Join) Zero() Q8Seen { return Q8Seen{} }

func (q8Join) Add(s Q8Seen, r *q8Row) Q8Seen {
	if r.person {
		s.Person, s.Name = true, r.name
	} else {
		s.Seller = true
	}
	return s
}

func (q8Join) Merge(a, b Q8Seen) Q8Seen {
	if b.Person {
		a.Person, a.Name = true, b.Name
	}
	a.Seller = a.Seller || b.Seller
	return a
}

func (q8Join) Result(s Q8Seen) Q8Seen { return s }

var _ = register(&Query{
	Name:  "q8",
	Title: "monitor new users: the people who entered and opened an auction in the same 10-second window",
	build: func(events typed.Stream[model.Event], out Output) starter {
		rows := typed.Map(typed.Filter(events, func(e *model.Event) bool { return e.Person != nil || e.Auction != nil }),
			func(e *model.Event) q8Row {
				if p := e.Person; p != nil {
					return q8Row{id: p.ID, at: p.DateTime, person: true, name: p.Name}
				}
				return q8Row{id: e.Auction.Seller, at: e.Auction.DateTime}
			})
		windows := typed.GroupByWindow(rows, func(r *q8Row) time.Time { return r.at.Add(-flinkShift) },
			typed.Tumbling(10*time.Second).StartingAt(-flinkShift), func(r *q8Row) int64 { return r.id })
		joined := typed.AggregateWindows(windows, typed.Aggregator[q8Row, Q8Seen, Q8Seen](q8Join{}),
			func(w typed.Window, id int64, s Q8Seen) []Q8Row {
				if !s.Person || !s.Seller {
					return nil
				}
				return []Q8Row{{ID: id, Name: s.Name, Stime: w.Start.Add(flinkShift)}}
			})
		return typed.WriteTo(typed.FlatMap(joined, func(rows *[]Q8Row) []Q8Row { return *rows }), sinkOf[Q8Row](out)).OutputMode(typed.Append)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		type key struct{ id, start int64 }
		names := map[key]string{}
		sellers := map[key]bool{}
		for i := range events {
			e := &events[i]
			if p := e.Person; p != nil {
				names[key{p.ID, floorTo(p.DateTime.UnixMilli(), 10_000)}] = p.Name
			}
			if a := e.Auction; a != nil {
				sellers[key{a.Seller, floorTo(a.DateTime.UnixMilli(), 10_000)}] = true
			}
		}
		var rows []Q8Row
		for k, name := range names {
			if sellers[k] {
				rows = append(rows, Q8Row{ID: k.id, Name: name, Stime: time.UnixMilli(k.start).UTC()})
			}
		}
		return lines(rows)
	},
})

// Q11Row is q11's row.
//
//streamgen:record
type Q11Row struct {
	Bidder    int64     `json:"bidder"`
	BidCount  int64     `json:"bid_count"`
	Starttime time.Time `json:"starttime"`
	Endtime   time.Time `json:"endtime"`
}

var _ = register(&Query{
	Name:  "q11",
	Title: "user sessions: the bids of each bidder's sessions, 10 seconds of gap",
	build: func(events typed.Stream[model.Event], out Output) starter {
		sessions := typed.AggregateWindows(
			typed.GroupByWindow(bids(events), func(b *model.Bid) time.Time { return b.DateTime.Add(-flinkShift) }, typed.Session(10*time.Second).JoiningOpenSessions(),
				func(b *model.Bid) int64 { return b.Bidder }),
			typed.Count[model.Bid](),
			func(w typed.Window, bidder int64, n int64) Q11Row {
				return Q11Row{Bidder: bidder, BidCount: n, Starttime: w.Start.Add(flinkShift), Endtime: w.End.Add(flinkShift)}
			})
		return typed.WriteTo(sessions, sinkOf[Q11Row](out)).OutputMode(typed.Append)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		times := map[int64][]time.Time{}
		for i := range events {
			if b := events[i].Bid; b != nil {
				times[b.Bidder] = append(times[b.Bidder], b.DateTime)
			}
		}
		var rows []Q11Row
		for bidder, ts := range times {
			slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
			// A session is [first, last + gap); a bid before or at its
			// end joins it (Flink merges session windows that touch).
			start, end, n := ts[0], ts[0].Add(10*time.Second), int64(1)
			for _, t := range ts[1:] {
				if !t.After(end) {
					n++
					if e := t.Add(10 * time.Second); e.After(end) {
						end = e
					}
					continue
				}
				rows = append(rows, Q11Row{Bidder: bidder, BidCount: n, Starttime: start, Endtime: end})
				start, end, n = t, t.Add(10*time.Second), 1
			}
			rows = append(rows, Q11Row{Bidder: bidder, BidCount: n, Starttime: start, Endtime: end})
		}
		return lines(rows)
	},
})
