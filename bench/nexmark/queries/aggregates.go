package queries

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/typed"
)

// The queries whose result is a table that changes with every bid: the
// aggregations without windows (q15, q16, q17), the last bid per bidder
// and auction (q18) and the ten highest bids per auction (q19). Each
// writes, in each batch, the rows its bids changed (Update mode).

// rank is a bid's price rank of q15–q17: 1 under 10,000, 2 under
// 1,000,000, else 3.
func rank(price int64) int {
	switch {
	case price < 10_000:
		return 1
	case price < 1_000_000:
		return 2
	}
	return 3
}

// day is DATE_FORMAT(dateTime, 'yyyy-MM-dd').
func day(t time.Time) string { return t.UTC().Format("2006-01-02") }

// BidStats is the counts of q15 and q16: bids, distinct bidders and
// distinct auctions, in all and by price rank.
//
//streamgen:record
type BidStats struct {
	TotalBids     int64  `json:"total_bids"`
	Rank1Bids     int64  `json:"rank1_bids"`
	Rank2Bids     int64  `json:"rank2_bids"`
	Rank3Bids     int64  `json:"rank3_bids"`
	TotalBidders  int64  `json:"total_bidders"`
	Rank1Bidders  int64  `json:"rank1_bidders"`
	Rank2Bidders  int64  `json:"rank2_bidders"`
	Rank3Bidders  int64  `json:"rank3_bidders"`
	TotalAuctions int64  `json:"total_auctions"`
	Rank1Auctions int64  `json:"rank1_auctions"`
	Rank2Auctions int64  `json:"rank2_auctions"`
	Rank3Auctions int64  `json:"rank3_auctions"`
	MaxMinute     string `json:"maxMinute,omitempty"`
}

// Q15Row is q15's row.
//
//streamgen:record
type Q15Row struct {
	Day           string `json:"day"`
	TotalBids     int64  `json:"total_bids"`
	Rank1Bids     int64  `json:"rank1_bids"`
	Rank2Bids     int64  `json:"rank2_bids"`
	Rank3Bids     int64  `json:"rank3_bids"`
	TotalBidders  int64  `json:"total_bidders"`
	Rank1Bidders  int64  `json:"rank1_bidders"`
	Rank2Bidders  int64  `json:"rank2_bidders"`
	Rank3Bidders  int64  `json:"rank3_bidders"`
	TotalAuctions int64  `json:"total_auctions"`
	Rank1Auctions int64  `json:"rank1_auctions"`
	Rank2Auctions int64  `json:"rank2_auctions"`
	Rank3Auctions int64  `json:"rank3_auctions"`
}

// Q16Row is q16's row.
//
//streamgen:record
type Q16Row struct {
	Channel       string `json:"channel"`
	Day           string `json:"day"`
	Minute        string `json:"minute"`
	TotalBids     int64  `json:"total_bids"`
	Rank1Bids     int64  `json:"rank1_bids"`
	Rank2Bids     int64  `json:"rank2_bids"`
	Rank3Bids     int64  `json:"rank3_bids"`
	TotalBidders  int64  `json:"total_bidders"`
	Rank1Bidders  int64  `json:"rank1_bidders"`
	Rank2Bidders  int64  `json:"rank2_bidders"`
	Rank3Bidders  int64  `json:"rank3_bidders"`
	TotalAuctions int64  `json:"total_auctions"`
	Rank1Auctions int64  `json:"rank1_auctions"`
	Rank2Auctions int64  `json:"rank2_auctions"`
	Rank3Auctions int64  `json:"rank3_auctions"`
}

// bidStats is the processor of q15: per key, the counts, and the
// bidders and auctions seen, each with the ranks it was seen at (a bit
// each, and one for any), for the distinct counts.
type bidStats struct {
	stats    *typed.ValueState[BidStats]
	bidders  *typed.MapState[int64, uint8]
	auctions *typed.MapState[int64, uint8]
}

func (p *bidStats) Init(h *typed.Handle) error {
	p.stats = typed.NewValueState[BidStats](h, "stats")
	p.bidders = typed.NewMapState[int64, uint8](h, "bidders")
	p.auctions = typed.NewMapState[int64, uint8](h, "auctions")
	return nil
}

// see adds rank r (1 to 3) to what set holds of id, and counts a new id
// in total and a new rank of it in ranks.
func see(ctx context.Context, set *typed.MapState[int64, uint8], id int64, r int, total *int64, ranks [3]*int64) error {
	seen, _, err := set.GetValue(ctx, id)
	if err != nil {
		return err
	}
	bit := uint8(1) << r
	if seen&bit != 0 {
		return nil
	}
	if seen == 0 {
		*total++
	}
	*ranks[r-1]++
	return set.UpdateValue(ctx, id, seen|bit|1)
}

func (p *bidStats) update(ctx context.Context, rows iter.Seq[model.Bid]) (BidStats, error) {
	s, _, err := p.stats.Get(ctx)
	if err != nil {
		return s, err
	}
	for b := range rows {
		r := rank(b.Price)
		s.TotalBids++
		*[3]*int64{&s.Rank1Bids, &s.Rank2Bids, &s.Rank3Bids}[r-1]++
		if err := see(ctx, p.bidders, b.Bidder, r, &s.TotalBidders, [3]*int64{&s.Rank1Bidders, &s.Rank2Bidders, &s.Rank3Bidders}); err != nil {
			return s, err
		}
		if err := see(ctx, p.auctions, b.Auction, r, &s.TotalAuctions, [3]*int64{&s.Rank1Auctions, &s.Rank2Auctions, &s.Rank3Auctions}); err != nil {
			return s, err
		}
	}
	return s, p.stats.Update(ctx, s)
}

type q15 struct{ bidStats }

func (p *q15) HandleInputRows(ctx context.Context, key string, rows iter.Seq[model.Bid], _ typed.TimerValues, emit func(Q15Row)) error {
	s, err := p.update(ctx, rows)
	if err != nil {
		return err
	}
	emit(q15Row(key, &s))
	return nil
}

func q15Row(d string, s *BidStats) Q15Row {
	return Q15Row{Day: d, TotalBids: s.TotalBids, Rank1Bids: s.Rank1Bids, Rank2Bids: s.Rank2Bids, Rank3Bids: s.Rank3Bids,
		TotalBidders: s.TotalBidders, Rank1Bidders: s.Rank1Bidders, Rank2Bidders: s.Rank2Bidders, Rank3Bidders: s.Rank3Bidders,
		TotalAuctions: s.TotalAuctions, Rank1Auctions: s.Rank1Auctions, Rank2Auctions: s.Rank2Auctions, Rank3Auctions: s.Rank3Auctions}
}

// q16 counts distinct bidders and auctions per channel and day in two
// steps, as a streaming dropDuplicates followed by a count would: first,
// per bidder and day and per auction and day, the channels it has been
// seen on, each with the ranks it was seen at, and what each bid adds to
// the counts; then, per channel and day, the sums. Keyed by bidder or
// auction first, the first step's entries are written in the order the
// ids are handed out (bids go to recent auctions and people), so its
// store grows at its end instead of everywhere, as a map of bidders per
// channel and day would. An id's channels are one value (SeenChannels),
// not an entry each: a bidder is seen on 25 channels on average, an
// auction on 10 (the generator's at 10M events), and an id's bids come
// within a batch or two of each other (to the latest people and
// auctions), so that the value is written about once where the entries
// were written 10 to 25 times, and the store holds a tenth of the
// entries for its compactions to rewrite.

// SeenKey is a bidder or an auction on a day (days since 1970): the key
// of q16's first step.
//
//streamgen:record
type SeenKey struct {
	ID  int64 `json:"id"`
	Day int64 `json:"day"`
}

// SeenChannels is the state of q16's first step: the channels an id has
// been seen on in a day, in order, and the ranks it was seen at on each
// (bit r for rank r, bit 0 for any). Sorted lists rather than a map: a
// busy id's hundreds of channels are searched by bisection and merged
// with the batch's new ones, where a map would be built entry by entry
// when read and sorted when written.
//
//streamgen:record
type SeenChannels struct {
	Channels []string `json:"channels"`
	Ranks    []uint8  `json:"ranks"`
}

// find returns the index of channel in s.Channels, or -1.
func (s *SeenChannels) find(channel string) int {
	if i, ok := slices.BinarySearch(s.Channels, channel); ok {
		return i
	}
	return -1
}

// add merges channels, sorted and new to s, with their ranks, into s.
func (s *SeenChannels) add(channels []string, ranks []uint8) {
	n := len(s.Channels) + len(channels)
	cs, rs := make([]string, 0, n), make([]uint8, 0, n)
	i, j := 0, 0
	for i < len(s.Channels) || j < len(channels) {
		if j == len(channels) || i < len(s.Channels) && s.Channels[i] < channels[j] {
			cs, rs = append(cs, s.Channels[i]), append(rs, s.Ranks[i])
			i++
		} else {
			cs, rs = append(cs, channels[j]), append(rs, ranks[j])
			j++
		}
	}
	s.Channels, s.Ranks = cs, rs
}

// StatsKey is a channel on a day (days since 1970): q16's grouping.
//
//streamgen:record
type StatsKey struct {
	Channel string `json:"channel"`
	Day     int64  `json:"day"`
}

const msPerDay = 24 * 60 * 60 * 1000

// dayNumber is t's day, counted from 1970-01-01.
func dayNumber(t time.Time) int64 { return floorTo(t.UnixMilli(), msPerDay) / msPerDay }

// q16Delta is what the bids of a batch for one bidder or auction add to
// the counts of a channel and day: its bids by rank and their latest
// minute of the day (from the bidders' step only, so that each bid is
// counted once), and whether the bidder or auction is new on the channel
// and day (bit 0) or new at a rank (bit r).
type q16Delta struct {
	key      StatsKey
	minute   int32
	bids     [3]int32
	bidders  uint8
	auctions uint8
}

// q16Seen is q16's first step, of bidders or of auctions: per id and
// day, the channels seen (SeenChannels). A batch's bids of one id are
// summed by channel first, so that a busy bidder or auction writes its
// channels once a batch, however many bids it has, and one delta for
// each channel.
type q16Seen struct {
	auctions bool
	channels *typed.ValueState[SeenChannels]
	tallies  []q16Tally
	index    map[string]int // past q16ListMax channels: their tallies
	// added are the tallies of channels new to the id, and newChannels
	// and newRanks those channels, sorted, and their ranks.
	added       []int
	newChannels []string
	newRanks    []uint8
}

// q16ListMax is the most channels of a call q16Seen finds by a search of
// its list.
const q16ListMax = 8

// q16Tally is what q16Seen's call counts of one channel: whether the id
// was seen on it, at which ranks, before the call and after its bids,
// and the delta it writes.
type q16Tally struct {
	channel  string
	at       int // in the id's SeenChannels, or -1
	was, now uint8
	delta    q16Delta
}

func (p *q16Seen) Init(h *typed.Handle) error {
	p.channels = typed.NewValueState[SeenChannels](h, "channels")
	return nil
}

func (p *q16Seen) HandleInputRows(ctx context.Context, key SeenKey, rows iter.Seq[model.Bid], _ typed.TimerValues, emit func(q16Delta)) error {
	// Most ids' bids of a batch are on a few channels, which a list,
	// searched in order, finds sooner than a map would; a hot auction's
	// are on hundreds, which go in a map past the first few. Both are
	// kept from one call to the next (the processor runs one call at a
	// time).
	p.tallies = p.tallies[:0]
	if p.index != nil {
		clear(p.index)
	}
	seen, _, err := p.channels.Get(ctx)
	if err != nil {
		return err
	}
	for b := range rows {
		i := 0
		if len(p.tallies) > q16ListMax {
			var ok bool
			if i, ok = p.index[b.Channel]; !ok {
				i = len(p.tallies)
			}
		} else {
			for i < len(p.tallies) && p.tallies[i].channel != b.Channel {
				i++
			}
		}
		if i == len(p.tallies) {
			at, was := seen.find(b.Channel), uint8(0)
			if at >= 0 {
				was = seen.Ranks[at]
			}
			if i == q16ListMax {
				if p.index == nil {
					p.index = map[string]int{}
				}
				for j := range p.tallies {
					p.index[p.tallies[j].channel] = j
				}
			}
			if i >= q16ListMax {
				p.index[b.Channel] = i
			}
			p.tallies = append(p.tallies, q16Tally{channel: b.Channel, at: at, was: was, now: was,
				delta: q16Delta{key: StatsKey{Channel: b.Channel, Day: key.Day}, minute: -1}})
		}
		t, r := &p.tallies[i], rank(b.Price)
		t.now |= 1<<r | 1
		if !p.auctions {
			ms := b.DateTime.UnixMilli()
			t.delta.bids[r-1]++
			t.delta.minute = max(t.delta.minute, int32((floorTo(ms, 60_000)-floorTo(ms, msPerDay))/60_000))
		}
	}
	changed := false
	p.added = p.added[:0]
	for i := range p.tallies {
		t := &p.tallies[i]
		switch {
		case t.now == t.was:
		case t.at >= 0:
			seen.Ranks[t.at], changed = t.now, true
		default:
			p.added, changed = append(p.added, i), true
		}
	}
	if len(p.added) > 0 {
		slices.SortFunc(p.added, func(a, b int) int { return strings.Compare(p.tallies[a].channel, p.tallies[b].channel) })
		p.newChannels, p.newRanks = p.newChannels[:0], p.newRanks[:0]
		for _, i := range p.added {
			p.newChannels, p.newRanks = append(p.newChannels, p.tallies[i].channel), append(p.newRanks, p.tallies[i].now)
		}
		seen.add(p.newChannels, p.newRanks)
		clear(p.newChannels) // no strings kept from one call to the next
	}
	if changed {
		if err := p.channels.Update(ctx, seen); err != nil {
			return err
		}
	}
	for i := range p.tallies {
		t := &p.tallies[i]
		added := t.now &^ t.was
		if p.auctions {
			if added == 0 {
				continue
			}
			t.delta.auctions = added
		} else {
			t.delta.bidders = added
		}
		emit(t.delta)
	}
	return nil
}

// q16Sum is q16's second step: per channel and day, the counts.
type q16Sum struct{ stats *typed.ValueState[BidStats] }

func (p *q16Sum) Init(h *typed.Handle) error {
	p.stats = typed.NewValueState[BidStats](h, "stats")
	return nil
}

func (p *q16Sum) HandleInputRows(ctx context.Context, key StatsKey, rows iter.Seq[q16Delta], _ typed.TimerValues, emit func(Q16Row)) error {
	s, _, err := p.stats.Get(ctx)
	if err != nil {
		return err
	}
	last := int32(-1)
	distinct := func(bits uint8, total *int64, ranks [3]*int64) {
		*total += int64(bits & 1)
		for r, n := range ranks {
			*n += int64(bits >> (r + 1) & 1)
		}
	}
	for d := range rows {
		for r, n := range [3]*int64{&s.Rank1Bids, &s.Rank2Bids, &s.Rank3Bids} {
			*n += int64(d.bids[r])
			s.TotalBids += int64(d.bids[r])
		}
		last = max(last, d.minute)
		distinct(d.bidders, &s.TotalBidders, [3]*int64{&s.Rank1Bidders, &s.Rank2Bidders, &s.Rank3Bidders})
		distinct(d.auctions, &s.TotalAuctions, [3]*int64{&s.Rank1Auctions, &s.Rank2Auctions, &s.Rank3Auctions})
	}
	if last >= 0 {
		s.MaxMinute = max(s.MaxMinute, fmt.Sprintf("%02d:%02d", last/60, last%60))
	}
	emit(q16Row(key.Channel, day(time.UnixMilli(key.Day*msPerDay)), &s))
	return p.stats.Update(ctx, s)
}

func q16Row(channel, day string, s *BidStats) Q16Row {
	return Q16Row{Channel: channel, Day: day, Minute: s.MaxMinute, TotalBids: s.TotalBids, Rank1Bids: s.Rank1Bids, Rank2Bids: s.Rank2Bids, Rank3Bids: s.Rank3Bids,
		TotalBidders: s.TotalBidders, Rank1Bidders: s.Rank1Bidders, Rank2Bidders: s.Rank2Bidders, Rank3Bidders: s.Rank3Bidders,
		TotalAuctions: s.TotalAuctions, Rank1Auctions: s.Rank1Auctions, Rank2Auctions: s.Rank2Auctions, Rank3Auctions: s.Rank3Auctions}
}

// loopCounts is the counts of q15 and q16 over a group's bids, by a
// plain loop written from the SQL, apart from the queries' code: index 0
// is count(*) and count(distinct ...) over all the bids, 1 to 3 those
// FILTER (WHERE ...) of the three price ranks.
type loopCounts struct {
	bids              [4]int64
	bidders, auctions [4]map[int64]bool
	minute            string // max(DATE_FORMAT(dateTime, 'HH:mm'))
}

func (c *loopCounts) add(b *model.Bid) {
	for i, in := range [4]bool{true, b.Price < 10000, b.Price >= 10000 && b.Price < 1000000, b.Price >= 1000000} {
		if !in {
			continue
		}
		if c.bidders[i] == nil {
			c.bidders[i], c.auctions[i] = map[int64]bool{}, map[int64]bool{}
		}
		c.bids[i]++
		c.bidders[i][b.Bidder] = true
		c.auctions[i][b.Auction] = true
	}
	c.minute = max(c.minute, loopHourMinute(b.DateTime))
}

var _ = register(&Query{
	Name:  "q15",
	Title: "bidding statistics report: per day, the bids, distinct bidders and distinct auctions, in all and by price rank",
	Keys:  []string{"day"},
	// A group aggregation: Flink's keeps late rows, and its state of
	// every day (no TTL), as the processor does. A watermark would have
	// transformWithState drop the rows at or before it.
	noWatermark: true,
	build: func(events typed.Stream[model.Event], out Output) starter {
		byDay := typed.GroupByKey(bids(events), func(b *model.Bid) string { return day(b.DateTime) })
		stats := typed.TransformWithState(byDay, &q15{}, typed.TimeModeNone, typed.Update)
		return typed.WriteTo(stats, sinkOf[Q15Row](out)).OutputMode(typed.Update)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		groups := map[string]*loopCounts{}
		for i := range events {
			if b := events[i].Bid; b != nil {
				d := loopDate(b.DateTime)
				if groups[d] == nil {
					groups[d] = &loopCounts{}
				}
				groups[d].add(b)
			}
		}
		var rows []Q15Row
		for d, c := range groups {
			rows = append(rows, Q15Row{Day: d, TotalBids: c.bids[0], Rank1Bids: c.bids[1], Rank2Bids: c.bids[2], Rank3Bids: c.bids[3],
				TotalBidders: int64(len(c.bidders[0])), Rank1Bidders: int64(len(c.bidders[1])), Rank2Bidders: int64(len(c.bidders[2])), Rank3Bidders: int64(len(c.bidders[3])),
				TotalAuctions: int64(len(c.auctions[0])), Rank1Auctions: int64(len(c.auctions[1])), Rank2Auctions: int64(len(c.auctions[2])), Rank3Auctions: int64(len(c.auctions[3]))})
		}
		return lines(rows)
	},
})

var _ = register(&Query{
	Name:  "q16",
	Title: "channel statistics report: q15 per channel and day, with the latest minute",
	Keys:  []string{"channel", "day"},
	// As q15.
	noWatermark: true,
	build: func(events typed.Stream[model.Event], out Output) starter {
		seen := func(auctions bool, id func(*model.Bid) int64) typed.Stream[q16Delta] {
			byID := typed.GroupByKey(bids(events), func(b *model.Bid) SeenKey { return SeenKey{ID: id(b), Day: dayNumber(b.DateTime)} })
			return typed.TransformWithState(byID, &q16Seen{auctions: auctions}, typed.TimeModeNone, typed.Append)
		}
		deltas := typed.Union(seen(false, func(b *model.Bid) int64 { return b.Bidder }), seen(true, func(b *model.Bid) int64 { return b.Auction }))
		byKey := typed.GroupByKey(deltas, func(d *q16Delta) StatsKey { return d.key })
		stats := typed.TransformWithState(byKey, &q16Sum{}, typed.TimeModeNone, typed.Update)
		return typed.WriteTo(stats, sinkOf[Q16Row](out)).OutputMode(typed.Update)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		groups := map[[2]string]*loopCounts{}
		for i := range events {
			if b := events[i].Bid; b != nil {
				k := [2]string{b.Channel, loopDate(b.DateTime)}
				if groups[k] == nil {
					groups[k] = &loopCounts{}
				}
				groups[k].add(b)
			}
		}
		var rows []Q16Row
		for k, c := range groups {
			rows = append(rows, Q16Row{Channel: k[0], Day: k[1], Minute: c.minute, TotalBids: c.bids[0], Rank1Bids: c.bids[1], Rank2Bids: c.bids[2], Rank3Bids: c.bids[3],
				TotalBidders: int64(len(c.bidders[0])), Rank1Bidders: int64(len(c.bidders[1])), Rank2Bidders: int64(len(c.bidders[2])), Rank3Bidders: int64(len(c.bidders[3])),
				TotalAuctions: int64(len(c.auctions[0])), Rank1Auctions: int64(len(c.auctions[1])), Rank2Auctions: int64(len(c.auctions[2])), Rank3Auctions: int64(len(c.auctions[3]))})
		}
		return lines(rows)
	},
})

// Q17Row is q17's row.
//
//streamgen:record
type Q17Row struct {
	Auction   int64  `json:"auction"`
	Day       string `json:"day"`
	TotalBids int64  `json:"total_bids"`
	Rank1Bids int64  `json:"rank1_bids"`
	Rank2Bids int64  `json:"rank2_bids"`
	Rank3Bids int64  `json:"rank3_bids"`
	MinPrice  int64  `json:"min_price"`
	MaxPrice  int64  `json:"max_price"`
	AvgPrice  int64  `json:"avg_price"`
	SumPrice  int64  `json:"sum_price"`
}

// AuctionDay is q17's grouping.
//
//streamgen:record
type AuctionDay struct {
	Auction int64  `json:"auction"`
	Day     string `json:"day"`
}

// Q17Acc is q17's accumulator.
//
//streamgen:record
type Q17Acc struct {
	Total, Rank1, Rank2, Rank3 int64
	Min, Max, Sum              int64
}

type q17Agg struct{}

func (q17Agg) Zero() Q17Acc { return Q17Acc{} }

func (q17Agg) Add(a Q17Acc, b *model.Bid) Q17Acc {
	if a.Total == 0 || b.Price < a.Min {
		a.Min = b.Price
	}
	if a.Total == 0 || b.Price > a.Max {
		a.Max = b.Price
	}
	a.Total++
	a.Sum += b.Price
	switch rank(b.Price) {
	case 1:
		a.Rank1++
	case 2:
		a.Rank2++
	default:
		a.Rank3++
	}
	return a
}

func (q17Agg) Merge(a, b Q17Acc) Q17Acc {
	switch {
	case b.Total == 0:
		return a
	case a.Total == 0:
		return b
	}
	a.Min, a.Max = min(a.Min, b.Min), max(a.Max, b.Max)
	a.Total, a.Sum = a.Total+b.Total, a.Sum+b.Sum
	a.Rank1, a.Rank2, a.Rank3 = a.Rank1+b.Rank1, a.Rank2+b.Rank2, a.Rank3+b.Rank3
	return a
}

func (q17Agg) Result(a Q17Acc) Q17Acc { return a }

func q17Row(k AuctionDay, a Q17Acc) Q17Row {
	return Q17Row{Auction: k.Auction, Day: k.Day, TotalBids: a.Total, Rank1Bids: a.Rank1, Rank2Bids: a.Rank2, Rank3Bids: a.Rank3,
		MinPrice: a.Min, MaxPrice: a.Max, AvgPrice: a.Sum / a.Total, SumPrice: a.Sum}
}

var _ = register(&Query{
	Name:  "q17",
	Title: "auction statistics report: per auction and day, the bids by price rank and the prices' min, max, avg and sum",
	Keys:  []string{"auction", "day"},
	build: func(events typed.Stream[model.Event], out Output) starter {
		byKey := typed.GroupByKey(bids(events), func(b *model.Bid) AuctionDay { return AuctionDay{Auction: b.Auction, Day: day(b.DateTime)} })
		stats := typed.AggregateByKey(byKey, typed.Aggregator[model.Bid, Q17Acc, Q17Acc](q17Agg{}), q17Row)
		return typed.WriteTo(stats, sinkOf[Q17Row](out)).OutputMode(typed.Update)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		groups := map[AuctionDay][]int64{}
		for i := range events {
			if b := events[i].Bid; b != nil {
				k := AuctionDay{Auction: b.Auction, Day: loopDate(b.DateTime)}
				groups[k] = append(groups[k], b.Price)
			}
		}
		var rows []Q17Row
		for k, prices := range groups {
			r := Q17Row{Auction: k.Auction, Day: k.Day, MinPrice: slices.Min(prices), MaxPrice: slices.Max(prices), TotalBids: int64(len(prices))}
			for _, p := range prices {
				r.SumPrice += p
				switch {
				case p < 10_000:
					r.Rank1Bids++
				case p < 1_000_000:
					r.Rank2Bids++
				default:
					r.Rank3Bids++
				}
			}
			r.AvgPrice = r.SumPrice / r.TotalBids
			rows = append(rows, r)
		}
		return lines(rows)
	},
})

// Q18Row is q18's row: a bid.
//
//streamgen:record
type Q18Row struct {
	Auction  int64     `json:"auction"`
	Bidder   int64     `json:"bidder"`
	Price    int64     `json:"price"`
	Channel  string    `json:"channel"`
	URL      string    `json:"url"`
	DateTime time.Time `json:"dateTime"`
	Extra    string    `json:"extra"`
}

func q18Row(b *model.Bid) Q18Row {
	return Q18Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL, DateTime: b.DateTime, Extra: b.Extra}
}

// BidderAuction is q18's grouping.
//
//streamgen:record
type BidderAuction struct {
	Bidder  int64 `json:"bidder"`
	Auction int64 `json:"auction"`
}

// Q18Latest is q18's state: the time of a bidder's latest bid on an
// auction. Its result is an update of the row of its (bidder, auction),
// so the row written last need not be kept to be taken back, as
// Flink's deduplication keeps it to retract it: a bid that is not the
// latest writes nothing, and the state is the time alone.
//
//streamgen:record
type Q18Latest struct {
	DateTime time.Time `json:"dateTime"`
}

var _ = register(&Query{
	Name:  "q18",
	Title: "find last bid: each bidder's latest bid on each auction (of bids at the same time, the last)",
	Keys:  []string{"bidder", "auction"},
	build: func(events typed.Stream[model.Event], out Output) starter {
		byKey := typed.GroupByKey(bids(events), func(b *model.Bid) BidderAuction { return BidderAuction{Bidder: b.Bidder, Auction: b.Auction} })
		last := typed.FlatMapGroupsWithState(byKey, typed.Update, typed.NoTimeout,
			func(_ BidderAuction, rows iter.Seq[model.Bid], state *typed.GroupState[Q18Latest], emit func(Q18Row)) error {
				latest, has := state.Get()
				var newest model.Bid
				found := false
				for b := range rows {
					if !has || !b.DateTime.Before(latest.DateTime) {
						latest.DateTime, has = b.DateTime, true
						newest, found = b, true
					}
				}
				if found {
					state.Update(latest)
					emit(q18Row(&newest))
				}
				return nil
			})
		return typed.WriteTo(last, sinkOf[Q18Row](out)).OutputMode(typed.Update)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		latest := map[BidderAuction]*model.Bid{}
		for i := range events {
			if b := events[i].Bid; b != nil {
				k := BidderAuction{Bidder: b.Bidder, Auction: b.Auction}
				if l := latest[k]; l == nil || !b.DateTime.Before(l.DateTime) {
					latest[k] = b
				}
			}
		}
		var rows []Q18Row
		for _, b := range latest {
			rows = append(rows, q18Row(b))
		}
		return lines(rows)
	},
})

// Q19Row is q19's row: a bid and its rank among its auction's bids.
//
//streamgen:record
type Q19Row struct {
	Auction    int64     `json:"auction"`
	Bidder     int64     `json:"bidder"`
	Price      int64     `json:"price"`
	Channel    string    `json:"channel"`
	URL        string    `json:"url"`
	DateTime   time.Time `json:"dateTime"`
	Extra      string    `json:"extra"`
	RankNumber int64     `json:"rank_number"`
}

// Q19Top is q19's state of an auction: its ten highest bids, highest
// first (of equal prices, the first).
//
//streamgen:record
type Q19Top struct {
	Bids []model.Bid `json:"bids"`
}

var _ = register(&Query{
	Name:  "q19",
	Title: "auction top-10 price: each auction's ten highest bids, ranked (of equal prices, the first first)",
	Keys:  []string{"auction", "rank_number"},
	build: func(events typed.Stream[model.Event], out Output) starter {
		byAuction := typed.GroupByKey(bids(events), func(b *model.Bid) int64 { return b.Auction })
		top := typed.FlatMapGroupsWithState(byAuction, typed.Update, typed.NoTimeout,
			func(_ int64, rows iter.Seq[model.Bid], state *typed.GroupState[Q19Top], emit func(Q19Row)) error {
				t, _ := state.Get()
				changed := -1 // the first rank that changed
				for b := range rows {
					// After the bids of a price at least as high.
					at := len(t.Bids)
					for at > 0 && t.Bids[at-1].Price < b.Price {
						at--
					}
					if at >= 10 {
						continue
					}
					t.Bids = slices.Insert(t.Bids, at, b)
					if len(t.Bids) > 10 {
						t.Bids = t.Bids[:10]
					}
					if changed < 0 || at < changed {
						changed = at
					}
				}
				if changed < 0 {
					return nil
				}
				for i := changed; i < len(t.Bids); i++ {
					b := &t.Bids[i]
					emit(Q19Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL,
						DateTime: b.DateTime, Extra: b.Extra, RankNumber: int64(i + 1)})
				}
				state.Update(t)
				return nil
			})
		return typed.WriteTo(top, sinkOf[Q19Row](out)).OutputMode(typed.Update)
	},
	loop: func(events []model.Event) ([][]byte, error) {
		byAuction := map[int64][]*model.Bid{}
		for i := range events {
			if b := events[i].Bid; b != nil {
				byAuction[b.Auction] = append(byAuction[b.Auction], b)
			}
		}
		var rows []Q19Row
		for _, bs := range byAuction {
			slices.SortStableFunc(bs, func(a, b *model.Bid) int { return int(b.Price - a.Price) })
			for i, b := range bs[:min(10, len(bs))] {
				rows = append(rows, Q19Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL,
					DateTime: b.DateTime, Extra: b.Extra, RankNumber: int64(i + 1)})
			}
		}
		return lines(rows)
	},
})

// Q12Row is q12's row.
//
//streamgen:record
type Q12Row struct {
	Bidder    int64     `json:"bidder"`
	BidCount  int64     `json:"bid_count"`
	Starttime time.Time `json:"starttime"`
	Endtime   time.Time `json:"endtime"`
}

// Q12Window is q12's state of a bidder: the processing-time window open
// and its bids so far.
//
//streamgen:record
type Q12Window struct {
	Start int64 `json:"start"` // Unix ms
	Count int64 `json:"count"`
}

// q12 counts each bidder's bids in 10-second windows of processing time,
// writing a window when a timer at its end fires.
type q12 struct {
	h   *typed.Handle
	win *typed.ValueState[Q12Window]
}

func (p *q12) Init(h *typed.Handle) error {
	p.h, p.win = h, typed.NewValueState[Q12Window](h, "window")
	return nil
}

func (p *q12) HandleInputRows(ctx context.Context, bidder int64, rows iter.Seq[model.Bid], timers typed.TimerValues, emit func(Q12Row)) error {
	w, ok, err := p.win.Get(ctx)
	if err != nil {
		return err
	}
	start := floorTo(timers.CurrentProcessingTime().UnixMilli(), 10_000)
	if ok && w.Start != start {
		// The window before ended without its timer yet.
		emit(q12Row(bidder, w))
		if err := p.h.DeleteTimer(ctx, time.UnixMilli(w.Start+10_000)); err != nil {
			return err
		}
		ok = false
	}
	if !ok {
		w = Q12Window{Start: start}
		if err := p.h.RegisterTimer(ctx, time.UnixMilli(start+10_000)); err != nil {
			return err
		}
	}
	for range rows {
		w.Count++
	}
	return p.win.Update(ctx, w)
}

func (p *q12) HandleExpiredTimer(ctx context.Context, bidder int64, _ typed.TimerValues, _ typed.ExpiredTimerInfo, emit func(Q12Row)) error {
	w, ok, err := p.win.Get(ctx)
	if err != nil || !ok {
		return err
	}
	emit(q12Row(bidder, w))
	return p.win.Clear(ctx)
}

func q12Row(bidder int64, w Q12Window) Q12Row {
	return Q12Row{Bidder: bidder, BidCount: w.Count, Starttime: time.UnixMilli(w.Start).UTC(), Endtime: time.UnixMilli(w.Start + 10_000).UTC()}
}

// LoopClock is the processing time at which the loop of a query over
// processing-time windows (q12) takes every event to arrive: a test runs
// the query on a manual clock that stays there while the events are read.
var LoopClock = time.Date(2026, 1, 1, 0, 0, 3, 0, time.UTC)

var _ = register(&Query{
	Name:           "q12",
	Title:          "processing-time windows: each bidder's bids in 10-second windows of processing time",
	ProcessingTime: true,
	// Windows of processing time: Flink's keep the rows late by event
	// time, which a watermark would have transformWithState drop.
	noWatermark: true,
	build: func(events typed.Stream[model.Event], out Output) starter {
		byBidder := typed.GroupByKey(bids(events), func(b *model.Bid) int64 { return b.Bidder })
		counts := typed.TransformWithState(byBidder, &q12{}, typed.TimeModeProcessingTime, typed.Append)
		return typed.WriteTo(counts, sinkOf[Q12Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		counts := map[int64]int64{}
		for i := range events {
			if b := events[i].Bid; b != nil {
				counts[b.Bidder]++
			}
		}
		// Every bid arrives at LoopClock: in the TUMBLE of 10 s of
		// processing time, counted from the epoch, that holds it.
		ms := LoopClock.UnixMilli()
		start := time.UnixMilli(ms - ms%10000).UTC()
		var rows []Q12Row
		for bidder, n := range counts {
			rows = append(rows, Q12Row{Bidder: bidder, BidCount: n, Starttime: start, Endtime: start.Add(10 * time.Second)})
		}
		return lines(rows)
	},
})
