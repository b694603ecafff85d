package generator

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Config holds the options of the upstream NexmarkConfiguration that the
// generator reads. A Config is a plain value: copying it and using copies
// from several goroutines is safe.
//
// Zero fields take DefaultConfig's values when a generator is built, so
// Config{Events: 1_000_000} is a valid configuration. Two exceptions:
// Events 0 means unbounded, as upstream, and Seed 0 is a seed like any
// other (DefaultConfig's is 42).
type Config struct {
	// Events is the number of events of the stream, over all generators
	// (upstream numEvents, SQL option events.num). 0 means unbounded: as
	// upstream, the generators then stop after Long.MAX_VALUE /
	// (totalProportion * the largest average size) events,
	// 368,934,881,474,191 with the defaults.
	Events int64

	// Rate is the event rate, in events per second of event time over all
	// generators (upstream firstEventRate, first-event.rate; default
	// 10,000). It spaces the events' dateTime: each generator advances
	// 1e6/Rate*Generators microseconds per event. It does not pace Next,
	// which returns events as fast as it can (upstream max-emit-speed).
	Rate int

	// Generators is the number of splits the stream is cut into
	// (upstream numEventGenerators, set to the source parallelism by the
	// Flink source; default 1). See New.
	Generators int

	// PersonProportion, AuctionProportion and BidProportion split each
	// block of PersonProportion+AuctionProportion+BidProportion event ids
	// into people, then auctions, then bids (defaults 1, 3, 46: 2%, 6%,
	// 92%).
	PersonProportion  int
	AuctionProportion int
	BidProportion     int

	// AvgPersonBytes, AvgAuctionBytes and AvgBidBytes are the average
	// sizes the extra field pads the records to, as upstream counts them
	// (defaults 200, 500, 100). A record whose other fields already count
	// more gets an empty extra.
	AvgPersonBytes  int
	AvgAuctionBytes int
	AvgBidBytes     int

	// HotAuctionRatio, HotSellersRatio and HotBiddersRatio make a bid go
	// to the hot auction, an auction be sold by the hot seller and a bid
	// be made by the hot bidder with probability 1 - 1/ratio (defaults 2,
	// 4, 4: 50%, 75%, 75%). The hot one is the first auction (the second
	// person for bidders) of the latest block of 100 ids.
	HotAuctionRatio int
	HotSellersRatio int
	HotBiddersRatio int

	// NumActivePeople is how many of the latest people sellers and
	// bidders that are not hot are drawn from, plus 10 ids not created
	// yet (default 1000).
	NumActivePeople int

	// NumInFlightAuctions is how many of the latest auctions bids that
	// are not for the hot auction are drawn from, plus 10 not created yet
	// (default 100). It also sets the auctions' lengths: twice, on
	// average, the event time in which that many auctions are created.
	NumInFlightAuctions int

	// OutOfOrderGroupSize, when more than 1, shuffles the event numbers,
	// hence ids and dateTimes, within groups of that size (default 1: in
	// order). The Nexmark benchmark keeps 1.
	OutOfOrderGroupSize int64

	// BaseTime is the dateTime of event number 0 of every generator;
	// upstream takes the wall clock at job submission, this port takes
	// it as a parameter so that streams are reproducible. It is used to
	// the millisecond (default 2026-01-01T00:00:00Z).
	BaseTime time.Time

	// Seed seeds the generators' random numbers: split i draws from a
	// SplittableRandom seeded with Seed ^ mix64(i), so split 0's seed is
	// Seed itself. See New.
	Seed uint64
}

// DefaultBaseTime is DefaultConfig's BaseTime, 2026-01-01T00:00:00Z.
var DefaultBaseTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DefaultConfig returns the upstream defaults (NexmarkConfiguration), an
// unbounded stream (Events 0), BaseTime DefaultBaseTime and Seed 42. It is
// safe for concurrent use.
func DefaultConfig() Config {
	return Config{
		Events:              0,
		Rate:                10_000,
		Generators:          1,
		PersonProportion:    1,
		AuctionProportion:   3,
		BidProportion:       46,
		AvgPersonBytes:      200,
		AvgAuctionBytes:     500,
		AvgBidBytes:         100,
		HotAuctionRatio:     2,
		HotSellersRatio:     4,
		HotBiddersRatio:     4,
		NumActivePeople:     1000,
		NumInFlightAuctions: 100,
		OutOfOrderGroupSize: 1,
		BaseTime:            DefaultBaseTime,
		Seed:                42,
	}
}

// WithDefaults returns c with its zero fields, but Events and Seed, set to
// DefaultConfig's values. New applies it; it is exported so that callers
// can see the configuration a generator uses. It is safe for concurrent
// use.
func (c Config) WithDefaults() Config {
	d := DefaultConfig()
	def := func(v *int, dv int) {
		if *v == 0 {
			*v = dv
		}
	}
	def(&c.Rate, d.Rate)
	def(&c.Generators, d.Generators)
	def(&c.PersonProportion, d.PersonProportion)
	def(&c.AuctionProportion, d.AuctionProportion)
	def(&c.BidProportion, d.BidProportion)
	def(&c.AvgPersonBytes, d.AvgPersonBytes)
	def(&c.AvgAuctionBytes, d.AvgAuctionBytes)
	def(&c.AvgBidBytes, d.AvgBidBytes)
	def(&c.HotAuctionRatio, d.HotAuctionRatio)
	def(&c.HotSellersRatio, d.HotSellersRatio)
	def(&c.HotBiddersRatio, d.HotBiddersRatio)
	def(&c.NumActivePeople, d.NumActivePeople)
	def(&c.NumInFlightAuctions, d.NumInFlightAuctions)
	if c.OutOfOrderGroupSize == 0 {
		c.OutOfOrderGroupSize = d.OutOfOrderGroupSize
	}
	if c.BaseTime.IsZero() {
		c.BaseTime = d.BaseTime
	}
	return c
}

// maxSize bounds the average sizes, so that upstream's int arithmetic on
// them (2*delta in nextExtra) cannot overflow.
const maxSize = 1 << 29

// Validate reports whether c, with its defaults applied, is a
// configuration the upstream generator handles: no negative field, and
// the fields upstream holds in a Java int within its range. It is safe
// for concurrent use.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	check := func(name string, v, lo, hi int64) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("nexmark generator: %s = %d, want it in [%d, %d]", name, v, lo, hi))
		}
	}
	const maxInt32 = math.MaxInt32
	check("Events", c.Events, 0, math.MaxInt64)
	check("Rate", int64(c.Rate), 1, maxInt32)
	check("Generators", int64(c.Generators), 1, maxInt32)
	check("PersonProportion", int64(c.PersonProportion), 1, maxInt32)
	check("AuctionProportion", int64(c.AuctionProportion), 1, maxInt32)
	check("BidProportion", int64(c.BidProportion), 1, maxInt32)
	check("PersonProportion+AuctionProportion+BidProportion",
		int64(c.PersonProportion)+int64(c.AuctionProportion)+int64(c.BidProportion), 3, maxInt32)
	check("AvgPersonBytes", int64(c.AvgPersonBytes), 1, maxSize)
	check("AvgAuctionBytes", int64(c.AvgAuctionBytes), 1, maxSize)
	check("AvgBidBytes", int64(c.AvgBidBytes), 1, maxSize)
	check("HotAuctionRatio", int64(c.HotAuctionRatio), 1, maxInt32)
	check("HotSellersRatio", int64(c.HotSellersRatio), 1, maxInt32)
	check("HotBiddersRatio", int64(c.HotBiddersRatio), 1, maxInt32)
	check("NumActivePeople", int64(c.NumActivePeople), 1, maxInt32)
	check("NumInFlightAuctions", int64(c.NumInFlightAuctions), 1, maxInt32)
	check("OutOfOrderGroupSize", c.OutOfOrderGroupSize, 1, math.MaxInt64)
	if c.Events == 0 {
		// Upstream's bound for an unbounded stream multiplies two Java
		// ints (see maxEvents); refuse what would overflow there.
		check("(PersonProportion+AuctionProportion+BidProportion)*max(Avg*Bytes) of an unbounded stream",
			(int64(c.PersonProportion)+int64(c.AuctionProportion)+int64(c.BidProportion))*
				int64(max(c.AvgPersonBytes, c.AvgAuctionBytes, c.AvgBidBytes)), 1, maxInt32)
	}
	return errors.Join(errs...)
}

// maxEvents is upstream GeneratorConfig.maxEvents: Events, or when it is 0
// Long.MAX_VALUE / (totalProportion * the largest average size). c has its
// defaults applied.
func (c Config) maxEvents() int64 {
	if c.Events != 0 {
		return c.Events
	}
	total := int64(c.PersonProportion + c.AuctionProportion + c.BidProportion)
	// Java multiplies two ints here; Validate keeps their product within
	// an int.
	return math.MaxInt64 / (total * int64(max(c.AvgPersonBytes, c.AvgAuctionBytes, c.AvgBidBytes)))
}
