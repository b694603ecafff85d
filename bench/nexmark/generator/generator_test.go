package generator

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
)

// TestMix counts the event types of the first million events at the
// defaults: exactly 2%, 6% and 92%, since every block of 50 event ids
// holds 1 person, 3 auctions and 46 bids.
func TestMix(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Events = 1_000_000
	g := New(cfg, 0)
	var e model.Event
	var people, auctions, bids int
	for g.Next(&e) {
		n := 0
		if e.Person != nil {
			people++
			n++
		}
		if e.Auction != nil {
			auctions++
			n++
		}
		if e.Bid != nil {
			bids++
			n++
		}
		if n != 1 {
			t.Fatalf("event %d has %d records set", g.Count()-1, n)
		}
	}
	if people != 20_000 || auctions != 60_000 || bids != 920_000 {
		t.Errorf("people, auctions, bids = %d, %d, %d; want 20000, 60000, 920000", people, auctions, bids)
	}
	if g.Count() != 1_000_000 || g.Total() != 1_000_000 {
		t.Errorf("Count, Total = %d, %d", g.Count(), g.Total())
	}
	if g.Next(&e) {
		t.Error("Next after the end returned true")
	}
}

// TestFirstEvents checks the start of split 0 at the defaults: the first
// event id is 2, so two auctions (1001, 1002), 46 bids, then the first
// person, 1001, at event id 50.
func TestFirstEvents(t *testing.T) {
	g := New(DefaultConfig(), 0)
	var e model.Event
	for i := range 52 {
		g.Next(&e)
		switch {
		case i < 2:
			if e.Auction == nil || e.Auction.ID != int64(1001+i) {
				t.Errorf("event %d = %+v, want auction %d", i, e, 1001+i)
			}
		case i < 48:
			if e.Bid == nil {
				t.Errorf("event %d is not a bid", i)
			} else if e.Bid.Bidder < 2000 {
				t.Errorf("event %d: bidder %d, want >= 2000 (upstream's double offset)", i, e.Bid.Bidder)
			}
		case i == 48:
			if e.Person == nil || e.Person.ID != 1001 {
				t.Errorf("event %d = %+v, want person 1001", i, e)
			}
		default:
			if e.Auction == nil || e.Auction.ID != int64(1003+i-49) {
				t.Errorf("event %d = %+v, want auction %d", i, e, 1003+i-49)
			}
		}
	}
}

// TestTimestamps checks dateTime = BaseTime + (long)(n * 1e6/Rate *
// Generators µs) / 1000 ms for event number n = 1 + k, and auctions'
// expiry horizon.
func TestTimestamps(t *testing.T) {
	base := time.Date(2030, 6, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		rate, gens int
		events     int64
		lastMs     int64 // dateTime - BaseTime of the split's last event
		maxLenMs   int64 // longest auction
	}{
		// Defaults: 100 µs per event; 1M events span 100 s; auctions
		// last 1 to 2 * 167 ms (1666 events ahead).
		{10_000, 1, 1_000_000, 100_000, 2 * 167},
		// The benchmark: 10M/s over 8 generators, 0.8 µs per event;
		// 2M events of a split span 1.6 s; auctions last 1 to 4 ms.
		{10_000_000, 8, 8 * 2_000_000, 1_600, 4},
	} {
		cfg := Config{Events: c.events, Rate: c.rate, Generators: c.gens, BaseTime: base}
		g := New(cfg, c.gens-1)
		delayUs := 1e6 / float64(c.rate) * float64(c.gens)
		var e model.Event
		var k int64
		var maxLen int64
		prev := base
		for g.Next(&e) {
			want := base.Add(time.Duration(int64(float64(k+1)*delayUs)/1000) * time.Millisecond)
			got := e.Time()
			if !got.Equal(want) || got.Location() != time.UTC {
				t.Fatalf("rate %d: event %d at %v, want %v", c.rate, k, got, want)
			}
			if got.Before(prev) {
				t.Fatalf("rate %d: event %d at %v, before %v", c.rate, k, got, prev)
			}
			prev = got
			if a := e.Auction; a != nil {
				l := a.Expires.Sub(a.DateTime).Milliseconds()
				if l < 1 || l > c.maxLenMs {
					t.Fatalf("rate %d: auction %d lasts %d ms, want [1, %d]", c.rate, a.ID, l, c.maxLenMs)
				}
				maxLen = max(maxLen, l)
			}
			k++
		}
		if got := prev.Sub(base).Milliseconds(); got != c.lastMs {
			t.Errorf("rate %d: last event at base+%d ms, want %d", c.rate, got, c.lastMs)
		}
		if maxLen < c.maxLenMs*9/10 {
			t.Errorf("rate %d: longest auction %d ms, want about %d", c.rate, maxLen, c.maxLenMs)
		}
	}
}

// TestSplits checks upstream's split rules: Events/n events per split,
// the remainder in the last one, disjoint event ids, hence disjoint
// person and auction ids, the same dateTimes in every split and distinct
// random streams.
func TestSplits(t *testing.T) {
	const n, events = 8, 80_000 + 5
	cfg := Config{Events: events, Generators: n, Rate: 1_000_000}
	people := map[int64]int{}
	auctions := map[int64]int{}
	var times [][]time.Time
	var bidPrices [][]int64
	var sum int64
	for s := range n {
		g := New(cfg, s)
		wantTotal, wantFirst := int64(events/n), int64(1+s*(events/n))
		if s == n-1 {
			wantTotal = events - (n-1)*(events/n)
		}
		if g.Total() != wantTotal || g.firstEventID != wantFirst {
			t.Errorf("split %d: Total, firstEventID = %d, %d; want %d, %d", s, g.Total(), g.firstEventID, wantTotal, wantFirst)
		}
		var e model.Event
		var ts []time.Time
		var prices []int64
		for g.Next(&e) {
			ts = append(ts, e.Time())
			switch {
			case e.Person != nil:
				if o, dup := people[e.Person.ID]; dup {
					t.Errorf("person %d in splits %d and %d", e.Person.ID, o, s)
				}
				people[e.Person.ID] = s
			case e.Auction != nil:
				if o, dup := auctions[e.Auction.ID]; dup {
					t.Errorf("auction %d in splits %d and %d", e.Auction.ID, o, s)
				}
				auctions[e.Auction.ID] = s
			default:
				prices = append(prices, e.Bid.Price)
			}
		}
		sum += g.Count()
		times = append(times, ts)
		bidPrices = append(bidPrices, prices)
	}
	if sum != events {
		t.Errorf("splits generated %d events, want %d", sum, events)
	}
	// Event ids run from 2 to events+1.
	var wantPeople, wantAuctions int
	for id := 2; id <= events+1; id++ {
		switch id % 50 {
		case 0:
			wantPeople++
		case 1, 2, 3:
			wantAuctions++
		}
	}
	if len(people) != wantPeople || len(auctions) != wantAuctions {
		t.Errorf("%d people and %d auctions, want %d and %d", len(people), len(auctions), wantPeople, wantAuctions)
	}
	for s := 1; s < n; s++ {
		for k := range times[0] {
			if !times[s][k].Equal(times[0][k]) {
				t.Fatalf("event %d: split %d at %v, split 0 at %v", k, s, times[s][k], times[0][k])
			}
		}
		same := 0
		for k := range min(len(bidPrices[0]), len(bidPrices[s])) {
			if bidPrices[s][k] == bidPrices[0][k] {
				same++
			}
		}
		if same > len(bidPrices[0])/100 {
			t.Errorf("splits 0 and %d: %d equal prices out of %d", s, same, len(bidPrices[0]))
		}
	}
}

// jsonStream returns the JSON lines of the first n events of split split.
func jsonStream(t testing.TB, cfg Config, split, n int) []byte {
	g := New(cfg, split)
	var e model.Event
	var buf []byte
	var err error
	for range n {
		if !g.Next(&e) {
			break
		}
		if buf, err = AppendJSONLine(buf, &e); err != nil {
			t.Fatal(err)
		}
	}
	return buf
}

// TestDeterminism generates the same configuration twice, and checks
// that another seed gives another stream.
func TestDeterminism(t *testing.T) {
	cfg := Config{Generators: 3, Events: 300_000, Seed: 7}
	a := jsonStream(t, cfg, 1, 100_000)
	b := jsonStream(t, cfg, 1, 100_000)
	if !bytes.Equal(a, b) {
		t.Error("the same configuration gave two streams")
	}
	cfg.Seed++
	if c := jsonStream(t, cfg, 1, 100_000); bytes.Equal(a, c) {
		t.Error("two seeds gave the same stream")
	}
}

// TestConcurrentSplits runs splits in parallel goroutines (sharing the
// process's tables) and compares them with the same splits run one after
// the other; run it with -race.
func TestConcurrentSplits(t *testing.T) {
	cfg := Config{Events: 40_000, Generators: 4}
	got := make([][]byte, 4)
	var wg sync.WaitGroup
	for s := range 4 {
		wg.Go(func() { got[s] = jsonStream(t, cfg, s, 1<<30) })
	}
	wg.Wait()
	for s := range 4 {
		if !bytes.Equal(got[s], jsonStream(t, cfg, s, 1<<30)) {
			t.Errorf("split %d differs when run concurrently", s)
		}
	}
}

// TestReuse checks that Next reuses the structs it is given, and keeps
// what it takes: no allocation per event once warm, and events equal to
// those of a fresh Event each time.
func TestReuse(t *testing.T) {
	cfg := Config{Events: 200_000}
	g := New(cfg, 0)
	var e model.Event
	for range 1000 {
		g.Next(&e)
	}
	allocs := testing.AllocsPerRun(100_000, func() { g.Next(&e) })
	// One arena of 64 KiB per ~15,000 events.
	if allocs > 0.001 {
		t.Errorf("%v allocations per event", allocs)
	}

	reused, fresh := New(cfg, 0), New(cfg, 0)
	var r model.Event
	for i := range 20_000 {
		var f model.Event
		reused.Next(&r)
		fresh.Next(&f)
		if d := diffEvents(&r, &f); len(d) > 0 {
			t.Fatalf("event %d: reused and fresh events differ: %v", i, d)
		}
	}
}

// TestExtra checks the extra fields' lengths (uniform within 20% around
// the average size minus the other fields) and alphabet ('H' to 'z').
func TestExtra(t *testing.T) {
	g := New(Config{Events: 500_000}, 0)
	var e model.Event
	var sum [3]int
	var cnt [3]int
	for g.Next(&e) {
		var x string
		switch {
		case e.Person != nil:
			x = e.Person.Extra
			sum[0] += len(x)
			cnt[0]++
		case e.Auction != nil:
			x = e.Auction.Extra
			sum[1] += len(x)
			cnt[1]++
		default:
			x = e.Bid.Extra
			if len(x) < 54 || len(x) > 81 {
				t.Fatalf("bid extra of %d bytes, want [54, 81]", len(x))
			}
			sum[2] += len(x)
			cnt[2]++
		}
		if strings.IndexFunc(x, func(r rune) bool { return r < 'H' || r > 'z' }) >= 0 {
			t.Fatalf("extra %q has characters out of 'H'..'z'", x)
		}
	}
	// Measured on the Java generator over 1M events: 138.9, 389.5, 67.5.
	for i, want := range []float64{138.9, 389.5, 67.5} {
		if got := float64(sum[i]) / float64(cnt[i]); got < want-1.5 || got > want+1.5 {
			t.Errorf("average extra %d: %.1f, want about %.1f", i, got, want)
		}
	}
}

func TestConfig(t *testing.T) {
	d := DefaultConfig()
	if got := (Config{Seed: 42}).WithDefaults(); got != d {
		t.Errorf("Config{Seed: 42}.WithDefaults() = %+v, want %+v", got, d)
	}
	if err := d.Validate(); err != nil {
		t.Error(err)
	}
	if got := New(d, 0).Total(); got != 368_934_881_474_191 {
		t.Errorf("unbounded stream: Total = %d, want 368934881474191", got)
	}
	for _, bad := range []Config{{Events: -1}, {Rate: -5}, {Generators: -1}, {HotBiddersRatio: -1}, {AvgBidBytes: 1 << 30}} {
		if bad.Validate() == nil {
			t.Errorf("%+v is valid", bad)
		}
	}
	for _, split := range []int{-1, 2} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(split %d of 2) did not panic", split)
				}
			}()
			New(Config{Generators: 2}, split)
		}()
	}
}

// TestLargeExtra checks the path of upstream's nextExactString for sizes
// of half a MiB or more, which builds a new string instead of cutting the
// shared one.
func TestLargeExtra(t *testing.T) {
	g := New(Config{Events: 50, AvgBidBytes: 700_000, AvgAuctionBytes: 1}, 0)
	var e model.Event
	for g.Next(&e) {
		if e.Auction != nil && e.Auction.Extra != "" {
			t.Errorf("auction extra %q, want none", e.Auction.Extra)
		}
		if e.Bid != nil {
			if l := len(e.Bid.Extra); l < 524_288 || l > 840_000 {
				t.Errorf("bid extra of %d bytes", l)
			}
		}
	}
}

// BenchmarkNext measures Next at the defaults, in events per second.
func BenchmarkNext(b *testing.B) {
	g := New(DefaultConfig(), 0)
	var e model.Event
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		g.Next(&e)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkNextJSON measures Next and AppendJSONLine at the defaults.
func BenchmarkNextJSON(b *testing.B) {
	g := New(DefaultConfig(), 0)
	var e model.Event
	buf := make([]byte, 0, 4096)
	var n int
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		g.Next(&e)
		buf, _ = AppendJSONLine(buf[:0], &e)
		n += len(buf)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	b.SetBytes(int64(n / b.N))
}
