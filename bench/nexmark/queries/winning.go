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
// auction keeps the auction and its best bid so far (what its query
// reads of them: see kept), and writes the
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

// winner is an auction and its winning bid, as its query keeps them.
type winner[A, B any] struct {
	auction A
	bid     B
}

// kept is what a query keeps in state of an auction (A) and of a bid
// (B), and how the processor reads it back: q9 keeps them whole; q4 the
// columns its SQL reads (an auction's category and times, a bid's price
// and time), as Flink's plan projects them before its join.
type kept[A, B any] struct {
	auction func(*model.Auction) A
	bid     func(*model.Bid) B
	// span is the auction's [dateTime, expires].
	span func(*A) (from, to time.Time)
	// offer is the bid's price and time.
	offer func(*B) (price int64, at time.Time)
}

// whole keeps auctions and bids whole (q9).
var whole = kept[model.Auction, model.Bid]{
	auction: func(a *model.Auction) model.Auction { return *a },
	bid:     func(b *model.Bid) model.Bid { return *b },
	span:    func(a *model.Auction) (time.Time, time.Time) { return a.DateTime, a.Expires },
	offer:   func(b *model.Bid) (int64, time.Time) { return b.Price, b.DateTime },
}

// winning is the processor of q4 and q9.
type winning[A, B any] struct {
	kept    kept[A, B]
	h       *typed.Handle
	auction *typed.ValueState[A]
	best    *typed.ValueState[B]
	// early holds the bids that came before their auction, until the
	// watermark passes them (an auction that comes later, not late, is
	// after them then).
	early *typed.ListState[B]
}

func (p *winning[A, B]) Init(h *typed.Handle) error {
	p.h = h
	p.auction = typed.NewValueState[A](h, "auction")
	p.best = typed.NewValueState[B](h, "best")
	p.early = typed.NewListState[B](h, "early")
	return nil
}

// offer is a bid's price and time.
type offer struct {
	price int64
	at    time.Time
}

// beats reports whether o wins over the best bid so far: a higher price,
// or the same price earlier (q9's ORDER BY price DESC, dateTime ASC; for
// equal prices and times, the first).
func (o offer) beats(best offer, has bool) bool {
	return !has || o.price > best.price || o.price == best.price && o.at.Before(best.at)
}

// within is the join's condition: at in [from, to].
func within(at, from, to time.Time) bool {
	return !at.Before(from) && !at.After(to)
}

func (p *winning[A, B]) HandleInputRows(ctx context.Context, _ int64, rows iter.Seq[auctionRow], _ typed.TimerValues, _ func(winner[A, B])) error {
	a, hasAuction, err := p.auction.Get(ctx)
	if err != nil {
		return err
	}
	best, hasBest, err := p.best.Get(ctx)
	if err != nil {
		return err
	}
	var from, to time.Time
	if hasAuction {
		from, to = p.kept.span(&a)
	}
	var top offer
	if hasBest {
		top.price, top.at = p.kept.offer(&best)
	}
	auctionNew, bestNew := false, false
	earlyKnown, hasEarly := false, false
	for r := range rows {
		switch {
		case r.auction != nil && !hasAuction:
			a, hasAuction, auctionNew = p.kept.auction(r.auction), true, true
			from, to = p.kept.span(&a)
			if err := p.h.RegisterTimer(ctx, to); err != nil {
				return err
			}
			early, err := p.early.Get(ctx)
			if err != nil {
				return err
			}
			for b := range early {
				var o offer
				o.price, o.at = p.kept.offer(&b)
				if within(o.at, from, to) && o.beats(top, hasBest) {
					best, top, hasBest, bestNew = b, o, true, true
				}
			}
			if err := p.early.Clear(ctx); err != nil {
				return err
			}
			earlyKnown, hasEarly = true, false
		case r.bid != nil && hasAuction:
			o := offer{r.bid.Price, r.bid.DateTime}
			if within(o.at, from, to) && o.beats(top, hasBest) {
				best, top, hasBest, bestNew = p.kept.bid(r.bid), o, true, true
			}
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
			if err := p.early.AppendValue(ctx, p.kept.bid(r.bid)); err != nil {
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

func (p *winning[A, B]) HandleExpiredTimer(ctx context.Context, _ int64, timers typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(winner[A, B])) error {
	a, hasAuction, err := p.auction.Get(ctx)
	if err != nil {
		return err
	}
	if hasAuction {
		if _, to := p.kept.span(&a); !expired.ExpiryTime().Before(to) {
			// No bid in time can come now: the winner, if any, is final.
			best, hasBest, err := p.best.Get(ctx)
			if err != nil {
				return err
			}
			if hasBest {
				emit(winner[A, B]{auction: a, bid: best})
			}
			if err := p.auction.Clear(ctx); err != nil {
				return err
			}
			return p.best.Clear(ctx)
		}
	}
	// An early bid's timer: the bids the watermark has passed go.
	early, err := p.early.Get(ctx)
	if err != nil {
		return err
	}
	var keep []B
	var first time.Time
	for b := range early {
		if _, at := p.kept.offer(&b); at.After(timers.CurrentWatermark()) {
			if len(keep) == 0 || at.Before(first) {
				first = at
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

// winners is the auctions' winning bids, as kept, each written once the
// watermark passes its auction's expiry; the auctions and bids at or
// before the watermark are dropped (see the top of this file).
func winners[A, B any](events typed.Stream[model.Event], kept kept[A, B]) typed.Stream[winner[A, B]] {
	rows := typed.Map(typed.Filter(events, func(e *model.Event) bool { return e.Auction != nil || e.Bid != nil }),
		func(e *model.Event) auctionRow { return auctionRow{auction: e.Auction, bid: e.Bid} })
	byAuction := typed.GroupByKey(rows, func(r *auctionRow) int64 {
		if r.auction != nil {
			return r.auction.ID
		}
		return r.bid.Auction
	})
	return typed.TransformWithState(byAuction, &winning[A, B]{kept: kept}, typed.TimeModeEventTime, typed.Append)
}

// loopWinners is the winning bid of each auction with one, by a plain
// loop: every bid in time, the highest price, then the earliest, then the
// first.
func loopWinners(events []model.Event) []winner[model.Auction, model.Bid] {
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
	var out []winner[model.Auction, model.Bid]
	for id, b := range best {
		out = append(out, winner[model.Auction, model.Bid]{auction: *byID[id], bid: *b})
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

// Q4Auction is what q4 keeps of an auction: its category and times.
//
//streamgen:record
type Q4Auction struct {
	Category int64     `json:"category"`
	DateTime time.Time `json:"dateTime"`
	Expires  time.Time `json:"expires"`
}

// Q4Bid is what q4 keeps of a bid: its price and time.
//
//streamgen:record
type Q4Bid struct {
	Price    int64     `json:"price"`
	DateTime time.Time `json:"dateTime"`
}

// q4Kept keeps what q4 reads of auctions and bids.
var q4Kept = kept[Q4Auction, Q4Bid]{
	auction: func(a *model.Auction) Q4Auction {
		return Q4Auction{Category: a.Category, DateTime: a.DateTime, Expires: a.Expires}
	},
	bid:   func(b *model.Bid) Q4Bid { return Q4Bid{Price: b.Price, DateTime: b.DateTime} },
	span:  func(a *Q4Auction) (time.Time, time.Time) { return a.DateTime, a.Expires },
	offer: func(b *Q4Bid) (int64, time.Time) { return b.Price, b.DateTime },
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
		byCategory := typed.GroupByKey(winners(events, q4Kept), func(w *winner[Q4Auction, Q4Bid]) int64 { return w.auction.Category })
		avg := typed.FlatMapGroupsWithState(byCategory, typed.Append, typed.NoTimeout,
			func(category int64, rows iter.Seq[winner[Q4Auction, Q4Bid]], state *typed.GroupState[Q4Avg], emit func(Q4Row)) error {
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

func q9Row(w *winner[model.Auction, model.Bid]) Q9Row {
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
		return typed.WriteTo(typed.Map(winners(events, whole), q9Row), sinkOf[Q9Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q9Row
		for _, w := range loopWinners(events) {
			rows = append(rows, q9Row(&w))
		}
		return lines(rows)
	},
})
