package generator

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/streamgen/streamgen/bench/nexmark/model"
)

// Constants of upstream GeneratorConfig, PersonGenerator, AuctionGenerator
// and BidGenerator.
const (
	firstPersonID   = 1000
	firstAuctionID  = 1000
	firstCategoryID = 10
	numCategories   = 5
	personIDLead    = 10
	auctionIDLead   = 10
	// hotRatio is HOT_SELLER_RATIO, HOT_AUCTION_RATIO and
	// HOT_BIDDER_RATIO: the hot entity is the first (second for bidders)
	// of the latest block of this many ids.
	hotRatio         = 100
	hotChannelsRatio = 2
	// firstEventNumber is the first event number of every split.
	firstEventNumber = 1
)

// A Generator generates the events of one split of a Nexmark stream, in
// order, as upstream's NexmarkGenerator does. A Generator is not safe for
// concurrent use; generators of different splits (or of different
// configurations) may run concurrently, in one goroutine each.
type Generator struct {
	rnd   splitRandom
	count int64 // events generated so far (eventsCountSoFar)
	total int64 // events to generate

	firstEventID int64
	baseMs       int64   // baseTime, ms since the epoch
	delayUs      float64 // interEventDelayUs

	personProp, auctionProp, totalProp int64
	avgPerson, avgAuction, avgBid      int32
	hotAuction, hotSellers, hotBidders int32
	activePeople, inFlightAuctions     int64
	ooo                                int64 // outOfOrderGroupSize
	numEventsForAuctions               int64

	tab *tables

	// arena holds the strings of people and auctions: they are appended
	// to its spare capacity and returned as strings of those bytes, which
	// are never written again. A full arena is left to the strings that
	// use it and replaced by a new one.
	arena []byte

	// Structs taken from the events passed to Next, for later events of
	// their type.
	sparePerson  *model.Person
	spareAuction *model.Auction
	spareBid     *model.Bid
}

// arenaSize is the size of the string arenas: 64 KiB hold the strings of
// about 15,000 events at the default proportions.
const arenaSize = 64 << 10

// New returns the generator of split split, in [0, cfg.Generators), of the
// stream cfg describes (after cfg.WithDefaults). It panics if cfg is not
// valid (see Config.Validate) or split is out of range. New is safe for
// concurrent use.
//
// Splits follow upstream's GeneratorConfig.split: with n = Generators,
// each split generates Events/n events (the last one also the remainder),
// and split i's event ids start at 1 + i*(Events/n), so that the splits'
// people and auctions have disjoint ids. All splits share BaseTime and
// start at event number 1, so they cover the same span of event time, as
// the parallel source instances of the Flink benchmark do: event k of
// every split has the same dateTime.
//
// Random numbers: upstream draws from an unseeded SplittableRandom per
// generator, so its streams differ from run to run. Here split i's
// SplittableRandom is seeded with cfg.Seed ^ mix64(i) (SplitMix64's
// finaliser; mix64(0) = 0, so split 0 uses cfg.Seed and a one-generator
// stream with Seed 42 is the Java harness's stream event for event). The
// two caches upstream builds once per JVM from unseeded static RNGs are
// built once per process from fixed seeds: 7 for the 4 hot URLs and the
// 10,000 channel URLs, 11 for the 1 MiB string the extra fields are cut
// from. Given these seeds, the stream is the upstream generator's, call
// for call and field for field.
//
// Upstream's bidder bug is kept: BidGenerator adds FIRST_PERSON_ID (1000)
// to the bidder twice, so bidders are base-0 person ids + 2000 while
// people are base-0 ids + 1000 (the first hot bidder is 2001, a person
// created 1000 people later, or never in a short stream). The published
// Nexmark figures (the Flink ones at least; Feldera's port fixes it) were
// produced with it, and the join queries' selectivities depend on it.
func New(cfg Config, split int) *Generator {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	n := cfg.Generators
	if split < 0 || split >= n {
		panic(fmt.Sprintf("nexmark generator: split %d out of range [0, %d)", split, n))
	}
	maxEvents := cfg.maxEvents()
	firstEventID, total := int64(1), maxEvents
	if n > 1 {
		sub := maxEvents / int64(n)
		firstEventID += int64(split) * sub
		total = sub
		if split == n-1 {
			total = maxEvents - sub*int64(n-1)
		}
	}
	totalProp := int64(cfg.PersonProportion + cfg.AuctionProportion + cfg.BidProportion)
	g := &Generator{
		rnd:          newSplitRandom(SplitSeed(cfg.Seed, split)),
		total:        total,
		firstEventID: firstEventID,
		baseMs:       cfg.BaseTime.UnixMilli(),
		// Java: 1000000.0 / firstEventRate * numEventGenerators.
		delayUs:          float64(float64(1000000.0)/float64(cfg.Rate)) * float64(n),
		personProp:       int64(cfg.PersonProportion),
		auctionProp:      int64(cfg.AuctionProportion),
		totalProp:        totalProp,
		avgPerson:        int32(cfg.AvgPersonBytes),
		avgAuction:       int32(cfg.AvgAuctionBytes),
		avgBid:           int32(cfg.AvgBidBytes),
		hotAuction:       int32(cfg.HotAuctionRatio),
		hotSellers:       int32(cfg.HotSellersRatio),
		hotBidders:       int32(cfg.HotBiddersRatio),
		activePeople:     int64(cfg.NumActivePeople),
		inFlightAuctions: int64(cfg.NumInFlightAuctions),
		ooo:              cfg.OutOfOrderGroupSize,
		// (long) numInFlightAuctions * totalProportion / auctionProportion
		numEventsForAuctions: int64(cfg.NumInFlightAuctions) * totalProp / int64(cfg.AuctionProportion),
		tab:                  getTables(),
	}
	return g
}

// SplitSeed returns the seed of split's SplittableRandom for Config.Seed
// seed: seed ^ mix64(split), with mix64 SplittableRandom's (and
// SplitMix64's) finaliser. Split 0's seed is seed itself. It is safe for
// concurrent use.
func SplitSeed(seed uint64, split int) uint64 { return seed ^ mix64(uint64(split)) }

// Count returns the number of events g has generated so far. It is
// upstream's eventsCountSoFar.
func (g *Generator) Count() int64 { return g.count }

// Total returns the number of events g generates in all: its share of
// Config.Events.
func (g *Generator) Total() int64 { return g.total }

// Next sets e to the next event and returns true, or returns false (and
// leaves e alone) once g has generated Total events. It sets exactly one
// of e.Person, e.Auction and e.Bid and clears the others.
//
// To avoid allocating, Next reuses the structs e points to: Next takes
// ownership of them, and may overwrite them in this call or a later one
// (if e holds a Person and the next event is a bid, the Person is kept
// for a later person). To keep an event past the next call, copy the
// structs or pass a new Event. The strings of people and auctions share
// arenas of 64 KiB, and extra fields are substrings of a shared 1 MiB
// string, so holding one keeps the block alive.
func (g *Generator) Next(e *model.Event) bool {
	if g.count >= g.total {
		return false
	}
	if e.Person != nil {
		g.sparePerson, e.Person = e.Person, nil
	}
	if e.Auction != nil {
		g.spareAuction, e.Auction = e.Auction, nil
	}
	if e.Bid != nil {
		g.spareBid, e.Bid = e.Bid, nil
	}

	adjusted := g.adjustedEventNumber(g.count)
	ts := g.timestampForEvent(adjusted)
	id := g.firstEventID + adjusted
	rem := id % g.totalProp
	switch {
	case rem < g.personProp:
		p := g.sparePerson
		if p == nil {
			p = new(model.Person)
		}
		g.sparePerson = nil
		g.nextPerson(p, id, ts)
		e.Person = p
	case rem < g.personProp+g.auctionProp:
		a := g.spareAuction
		if a == nil {
			a = new(model.Auction)
		}
		g.spareAuction = nil
		g.nextAuction(a, id, ts)
		e.Auction = a
	default:
		b := g.spareBid
		if b == nil {
			b = new(model.Bid)
		}
		g.spareBid = nil
		g.nextBid(b, id, ts)
		e.Bid = b
	}
	g.count++
	return true
}

// adjustedEventNumber is GeneratorConfig.nextAdjustedEventNumber: the
// event number of the event after numEvents, shuffled within groups of
// outOfOrderGroupSize.
func (g *Generator) adjustedEventNumber(numEvents int64) int64 {
	n := g.ooo
	eventNumber := firstEventNumber + numEvents
	if n == 1 {
		return eventNumber
	}
	return eventNumber/n*n + eventNumber*953%n
}

// timestampForEvent is GeneratorConfig.timestampForEvent, in ms since the
// epoch: baseTime + (long)(eventNumber * interEventDelayUs) / 1000.
func (g *Generator) timestampForEvent(eventNumber int64) int64 {
	return g.baseMs + int64(float64(float64(eventNumber)*g.delayUs))/1000
}

func millisTime(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// lastBase0PersonID is PersonGenerator.lastBase0PersonId: the latest
// person's id (without FIRST_PERSON_ID) at event id eventID, which is the
// new person's if eventID is a person's.
func (g *Generator) lastBase0PersonID(eventID int64) int64 {
	epoch := eventID / g.totalProp
	offset := eventID % g.totalProp
	if offset >= g.personProp {
		offset = g.personProp - 1
	}
	return epoch*g.personProp + offset
}

// lastBase0AuctionID is AuctionGenerator.lastBase0AuctionId.
func (g *Generator) lastBase0AuctionID(eventID int64) int64 {
	epoch := eventID / g.totalProp
	offset := eventID % g.totalProp
	switch {
	case offset < g.personProp:
		// A person: the last auction of the previous epoch.
		epoch--
		offset = g.auctionProp - 1
	case offset >= g.personProp+g.auctionProp:
		// A bid: the last auction of this epoch.
		offset = g.auctionProp - 1
	default:
		offset -= g.personProp
	}
	return epoch*g.auctionProp + offset
}

// nextBase0PersonID is PersonGenerator.nextBase0PersonId: one of the
// latest numActivePeople people, or of the next PERSON_ID_LEAD ones.
func (g *Generator) nextBase0PersonID(eventID int64) int64 {
	numPeople := g.lastBase0PersonID(eventID) + 1
	active := min(numPeople, g.activePeople)
	n := g.rnd.nextLongn(active + personIDLead)
	return numPeople - active + n
}

// nextBase0AuctionID is AuctionGenerator.nextBase0AuctionId: one of the
// latest numInFlightAuctions auctions, or of the next AUCTION_ID_LEAD ones.
func (g *Generator) nextBase0AuctionID(eventID int64) int64 {
	maxAuction := g.lastBase0AuctionID(eventID)
	minAuction := max(maxAuction-g.inFlightAuctions, 0)
	return minAuction + g.rnd.nextLongn(maxAuction-minAuction+1+auctionIDLead)
}

// nextPerson is PersonGenerator.nextPerson.
func (g *Generator) nextPerson(p *model.Person, eventID, ts int64) {
	r := &g.rnd
	p.ID = g.lastBase0PersonID(eventID) + firstPersonID
	first := r.nextIntn(int32(len(firstNames)))
	last := r.nextIntn(int32(len(lastNames)))
	p.Name = g.tab.names[int(first)*len(lastNames)+int(last)]

	// nextString(7) + "@" + nextString(5) + ".com"
	g.reserve(6 + 1 + 4 + 4)
	start := len(g.arena)
	g.arena = appendString(g.arena, r, 7, ' ')
	g.arena = append(g.arena, '@')
	g.arena = appendString(g.arena, r, 5, ' ')
	g.arena = append(g.arena, ".com"...)
	p.EmailAddress = g.since(start)

	// Four "%04d" of nextInt(10000), separated by spaces.
	g.reserve(19)
	start = len(g.arena)
	for i := range 4 {
		if i > 0 {
			g.arena = append(g.arena, ' ')
		}
		v := r.nextIntn(10000)
		g.arena = append(g.arena, byte('0'+v/1000), byte('0'+v/100%10), byte('0'+v/10%10), byte('0'+v%10))
	}
	p.CreditCard = g.since(start)

	p.City = usCities[r.nextIntn(int32(len(usCities)))]
	p.State = usStates[r.nextIntn(int32(len(usStates)))]
	size := 8 + len(p.Name) + len(p.EmailAddress) + len(p.CreditCard) + len(p.City) + len(p.State)
	p.Extra = g.nextExtra(int32(size), g.avgPerson)
	p.DateTime = millisTime(ts)
}

// nextAuction is AuctionGenerator.nextAuction.
func (g *Generator) nextAuction(a *model.Auction, eventID, ts int64) {
	r := &g.rnd
	a.ID = g.lastBase0AuctionID(eventID) + firstAuctionID
	var seller int64
	if r.nextIntn(g.hotSellers) > 0 {
		seller = g.lastBase0PersonID(eventID) / hotRatio * hotRatio
	} else {
		seller = g.nextBase0PersonID(eventID)
	}
	a.Seller = seller + firstPersonID
	a.Category = firstCategoryID + int64(r.nextIntn(numCategories))
	a.InitialBid = r.nextPrice()
	a.DateTime = millisTime(ts)
	a.Expires = millisTime(ts + g.nextAuctionLengthMs(ts))

	g.reserve(19)
	start := len(g.arena)
	g.arena = appendString(g.arena, r, 20, ' ')
	a.ItemName = g.since(start)
	g.reserve(99)
	start = len(g.arena)
	g.arena = appendString(g.arena, r, 100, ' ')
	a.Description = g.since(start)

	a.Reserve = a.InitialBid + r.nextPrice()
	size := 8 + len(a.ItemName) + len(a.Description) + 8 + 8 + 8 + 8 + 8
	a.Extra = g.nextExtra(int32(size), g.avgAuction)
}

// nextAuctionLengthMs is AuctionGenerator.nextAuctionLengthMs: uniform in
// [1, 2*horizon], where horizon is the event time until
// numInFlightAuctions more auctions are created. ts is the auction's
// timestamp; g.count is still the auction's eventsCountSoFar.
func (g *Generator) nextAuctionLengthMs(ts int64) int64 {
	current := g.adjustedEventNumber(g.count)
	future := g.timestampForEvent(current + g.numEventsForAuctions)
	horizon := future - ts
	return 1 + g.rnd.nextLongn(max(horizon*2, 1))
}

// nextBid is BidGenerator.nextBid.
func (g *Generator) nextBid(b *model.Bid, eventID, ts int64) {
	r := &g.rnd
	var auction int64
	if r.nextIntn(g.hotAuction) > 0 {
		auction = g.lastBase0AuctionID(eventID) / hotRatio * hotRatio
	} else {
		auction = g.nextBase0AuctionID(eventID)
	}
	b.Auction = auction + firstAuctionID

	var bidder int64
	if r.nextIntn(g.hotBidders) > 0 {
		// The second person of the block, so that hot bidders and hot
		// sellers differ.
		bidder = g.lastBase0PersonID(eventID)/hotRatio*hotRatio + 1
	} else {
		bidder = g.nextBase0PersonID(eventID)
	}
	bidder += firstPersonID

	b.Price = r.nextPrice()
	if r.nextIntn(hotChannelsRatio) > 0 {
		i := r.nextIntn(int32(len(hotChannels)))
		b.Channel = hotChannels[i]
		b.URL = g.tab.hotURLs[i]
	} else {
		c := r.nextIntn(channelsNumber)
		b.Channel = g.tab.channels[c]
		b.URL = g.tab.urls[c]
	}
	// Upstream adds FIRST_PERSON_ID a second time (see New).
	bidder += firstPersonID
	b.Bidder = bidder
	b.Extra = g.nextExtra(8+8+8+8, g.avgBid)
	b.DateTime = millisTime(ts)
}

// nextExtra is StringsGenerator.nextExtra: a string of about
// desiredAverageSize - currentSize characters, uniform within 20% of it,
// or "" (without drawing) if currentSize is larger.
func (g *Generator) nextExtra(currentSize, desiredAverageSize int32) string {
	if currentSize > desiredAverageSize {
		return ""
	}
	desired := desiredAverageSize - currentSize
	delta := int32(javaRound(float64(float64(desired) * 0.2)))
	size := desired - delta
	if delta != 0 {
		size += g.rnd.nextIntn(2 * delta)
	}
	return g.nextExactString(size)
}

// nextExactString is StringsGenerator.nextExactString once the reusable
// string exists: a substring of it at a random offset, if shorter than
// half of it; otherwise a new string (which allocates).
func (g *Generator) nextExactString(length int32) string {
	if length < extraStringLen/2 {
		off := g.rnd.nextIntn(extraStringLen - length)
		return g.tab.extra[off : off+length]
	}
	return string(appendExactString(make([]byte, 0, length), &g.rnd, int(length)))
}

// reserve makes room for n more bytes in the arena, so that a string of at
// most n bytes appended next is in one block.
func (g *Generator) reserve(n int) {
	if cap(g.arena)-len(g.arena) < n {
		g.arena = make([]byte, 0, max(arenaSize, n))
	}
}

// since returns the arena's bytes from start on as a string. They are
// never written again: later strings are appended after them, or to a new
// arena.
func (g *Generator) since(start int) string {
	b := g.arena[start:]
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
