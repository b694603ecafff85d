package queries

import (
	"context"
	"iter"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/typed"
)

// The queries over the winning bid of each auction (q4, q9): the bids
// joined with their auction where `B.dateTime BETWEEN A.dateTime AND
// A.expires`, the highest of them per auction. A processor keyed by the
// auction keeps the auction and its best bid so far, and writes the
// winner once the watermark passes the auction's expiry, when no bid
// that is not late can still be in time: the result Flink's regular join
// and aggregation reach when no event comes late, written once instead
// of updated.
//
// With late events, q4 and q9 differ from Flink's. The processor needs
// the watermark (its timers are of event time), so it drops every
// auction and bid at or before the watermark (the latest event time
// less 4 s, as of the batches before), and with them every bid in
// time that comes after its auction's winner was written (its time is at
// or before the expiry, which the watermark has passed), and it forgets
// the auction at its expiry. Flink's regular join keeps every auction
// and bid for ever (its state grows without end) and joins them whenever
// they come: a late auction with bids in time adds a winner, and a late
// bid that wins replaces one, which Flink's aggregation writes as an
// update (a retraction of the auction's row, q9, or of its category's
// average, q4, then the new row). An append-only result cannot be
// updated, so the queries do not do that: they write Flink's result over
// the events that are not late (the same when no event is).

// auctionRow is an auction or a bid, by the auction's id.
type auctionRow struct {
	auction *model.Auction
	bid     *model.Bid
}

// winner is an auction and its winning bid.
type winner struct {
	auction model.Auction
	bid     model.Bid
}

// winning is the processor of q4 and q9.
type winning struct {
	h       *typed.Handle
	auction *typed.ValueState[model.Auction]
	best    *typed.ValueState[model.Bid]
	// early holds the bids that came before their auction, until the
	// watermark passes them (an auction that comes later, not late, is
	// after them then).
	early *typed.ListState[model.Bid]
}

func (p *winning) Init(h *typed.Handle) error {
	p.h = h
	p.auction = typed.NewValueState[model.Auction](h, "auction")
	p.best = typed.NewValueState[model.Bid](h, "best")
	p.early = typed.NewListState[model.Bid](h, "early")
	return nil
}

// better reports whether b wins over the best bid so far: a higher price,
// or the same price earlier (q9's ORDER BY price DESC, dateTime ASC; for
// equal prices and times, the first).
func better(b *model.Bid, best *model.Bid, has bool) bool {
	return !has || b.Price > best.Price || b.Price == best.Price && b.DateTime.Before(best.DateTime)
}

// inTime is the join's condition.
func inTime(b *model.Bid, a *model.Auction) bool {
	return !b.DateTime.Before(a.DateTime) && !b.DateTime.After(a.Expires)
}

func (p *winning) HandleInputRows(ctx context.Context, _ int64, rows iter.Seq[auctionRow], _ typed.TimerValues, _ func(winner)) error {
	a, hasAuction, err := p.auction.Get(ctx)
	if err != nil {
		return err
	}
	best, hasBest, err := p.best.Get(ctx)
	if err != nil {
		return err
	}
	auctionNew, bestNew := false, false
	earlyKnown, hasEarly := false, false
	consider := func(b *model.Bid) {
		if inTime(b, &a) && better(b, &best, hasBest) {
			best, hasBest, bestNew = *b, true, true
		}
	}
	for r := range rows {
		switch {
		case r.auction != nil && !hasAuction:
			a, hasAuction, auctionNew = *r.auction, true, true
			if err := p.h.RegisterTimer(ctx, a.Expires); err != nil {
				return err
			}
			early, err := p.early.Get(ctx)
			if err != nil {
				return err
			}
			for b := range early {
				consider(&b)
			}
			if err := p.early.Clear(ctx); err != nil {
				return err
			}
			earlyKnown, hasEarly = true, false
		case r.bid != nil && hasAuction:
			consider(r.bid)
		case r.bid != nil:
			// One timer for the early bids: at the first's time, then,
			// when it fires, at the first left's.
			if !earlyKnown {
				if hasEarly, err = p.early.Exists(ctx); err != nil {
					return err
				}
				earlyKnown = true
			}
			if !hasEarly {
				if err := p.h.RegisterTimer(ctx, r.bid.DateTime); err != nil {
					return err
				}
				hasEarly = true
			}
			if err := p.early.AppendValue(ctx, *r.bid); err != nil {
				return err
			}
		}
	}
	if auctionNew {
		if err := p.auction.Update(ctx, a); err != nil {
			return err
		}
	}
	if bestNew {
		return p.best.Update(ctx, best)
	}
	return nil
}

func (p *winning) HandleExpiredTimer(ctx context.Context, _ int64, timers typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(winner)) error {
	a, hasAuction, err := p.auction.Get(ctx)
	if err != nil {
		return err
	}
	if hasAuction && !expired.ExpiryTime().Before(a.Expires) {
		// No bid in time can come now: the winner, if any, is final.
		best, hasBest, err := p.best.Get(ctx)
		if err != nil {
			return err
		}
		if hasBest {
			emit(winner{auction: a, bid: best})
		}
		if err := p.auction.Clear(ctx); err != nil {
			return err
		}
		return p.best.Clear(ctx)
	}
	// An early bid's timer: the bids the watermark has passed go.
	early, err := p.early.Get(ctx)
	if err != nil {
		return err
	}
	var keep []model.Bid
	var first time.Time
	for b := range early {
		if b.DateTime.After(timers.CurrentWatermark()) {
			if len(keep) == 0 || b.DateTime.Before(first) {
				first = b.DateTime
			}
			keep = append(keep, b)
		}
	}
	if len(keep) == 0 {
		return p.early.Clear(ctx)
	}
	if err := p.h.RegisterTimer(ctx, first); err != nil {
		return err
	}
	return p.early.Put(ctx, keep)
}

// winners is the auctions' winning bids, each written once the watermark
// passes its auction's expiry; the auctions and bids at or before the
// watermark are dropped (see the top of this file).
func winners(events typed.Stream[model.Event]) typed.Stream[winner] {
	rows := typed.Map(typed.Filter(events, func(e *model.Event) bool { return e.Auction != nil || e.Bid != nil }),
		func(e *model.Event) auctionRow { return auctionRow{auction: e.Auction, bid: e.Bid} })
	byAuction := typed.GroupByKey(rows, func(r *auctionRow) int64 {
		if r.auction != nil {
			return r.auction.ID
		}
		return r.bid.Auction
	})
	return typed.TransformWithState(byAuction, &winning{}, typed.TimeModeEventTime, typed.Append)
}

// loopWinners is the winning bid of each auction with one, by a plain
// loop: every bid in time, the highest price, then the earliest, then the
// first.
func loopWinners(events []model.Event) []winner {
	byID := map[int64]*model.Auction{}
	for i := range events {
		if a := events[i].Auction; a != nil {
			byID[a.ID] = a
		}
	}
	best := map[int64]*model.Bid{}
	for i := range events {
		b := events[i].Bid
		if b == nil {
			continue
		}
		a := byID[b.Auction]
		if a == nil || b.DateTime.Before(a.DateTime) || b.DateTime.After(a.Expires) {
			continue
		}
		if w := best[a.ID]; w == nil || b.Price > w.Price || b.Price == w.Price && b.DateTime.Before(w.DateTime) {
			best[a.ID] = b
		}
	}
	var out []winner
	for id, b := range best {
		out = append(out, winner{auction: *byID[id], bid: *b})
	}
	return out
}

// Q4Row is q4's row, named as its sink table: the category (id) and the
// average winning price (final), an integer as Flink's AVG of BIGINT.
//
//streamgen:record
type Q4Row struct {
	ID    int64 `json:"id"`
	Final int64 `json:"final"`
}

// Q4Avg is q4's state of a category: the winning prices' sum and count.
//
//streamgen:record
type Q4Avg struct {
	Sum   int64 `json:"sum"`
	Count int64 `json:"count"`
}

// q4 differs from Flink's with late events (see winners above): it
// leaves out of a category's average the auctions and bids that come at
// or before the watermark, where Flink's retracts the average and writes
// it again with them.
var _ = register(&Query{
	Name:  "q4",
	Title: "average price for a category: the average of the winning bids' prices of each category's auctions",
	Keys:  []string{"id"},
	build: func(events typed.Stream[model.Event], out Output) starter {
		byCategory := typed.GroupByKey(winners(events), func(w *winner) int64 { return w.auction.Category })
		avg := typed.FlatMapGroupsWithState(byCategory, typed.Append, typed.NoTimeout,
			func(category int64, rows iter.Seq[winner], state *typed.GroupState[Q4Avg], emit func(Q4Row)) error {
				acc, _ := state.Get()
				for w := range rows {
					acc.Sum += w.bid.Price
					acc.Count++
				}
				state.Update(acc)
				emit(Q4Row{ID: category, Final: acc.Sum / acc.Count})
				return nil
			})
		return typed.WriteTo(avg, sinkOf[Q4Row](out)).OutputMode(typed.Append)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		sums, counts := map[int64]int64{}, map[int64]int64{}
		for _, w := range loopWinners(events) {
			sums[w.auction.Category] += w.bid.Price
			counts[w.auction.Category]++
		}
		var rows []Q4Row
		for c, s := range sums {
			rows = append(rows, Q4Row{ID: c, Final: s / counts[c]})
		}
		return lines(rows)
	},
})

// Q9Row is q9's row: the auction and its winning bid.
//
//streamgen:record
type Q9Row struct {
	ID          int64     `json:"id"`
	ItemName    string    `json:"itemName"`
	Description string    `json:"description"`
	InitialBid  int64     `json:"initialBid"`
	Reserve     int64     `json:"reserve"`
	DateTime    time.Time `json:"dateTime"`
	Expires     time.Time `json:"expires"`
	Seller      int64     `json:"seller"`
	Category    int64     `json:"category"`
	Extra       string    `json:"extra"`
	Auction     int64     `json:"auction"`
	Bidder      int64     `json:"bidder"`
	Price       int64     `json:"price"`
	BidDateTime time.Time `json:"bid_dateTime"`
	BidExtra    string    `json:"bid_extra"`
}

func q9Row(w *winner) Q9Row {
	a, b := &w.auction, &w.bid
	return Q9Row{ID: a.ID, ItemName: a.ItemName, Description: a.Description, InitialBid: a.InitialBid, Reserve: a.Reserve,
		DateTime: a.DateTime, Expires: a.Expires, Seller: a.Seller, Category: a.Category, Extra: a.Extra,
		Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, BidDateTime: b.DateTime, BidExtra: b.Extra}
}

// q9 differs from Flink's with late events (see winners above): an
// auction or a bid that comes at or before the watermark is left out,
// where Flink's retracts the auction's row and writes it again with its
// new winner.
var _ = register(&Query{
	Name:  "q9",
	Title: "winning bids: each auction with its highest bid in time (the earliest of equal ones)",
	Keys:  []string{"id"},
	build: func(events typed.Stream[model.Event], out Output) starter {
		return typed.WriteTo(typed.Map(winners(events), q9Row), sinkOf[Q9Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q9Row
		for _, w := range loopWinners(events) {
			rows = append(rows, q9Row(&w))
		}
		return lines(rows)
	},
})
