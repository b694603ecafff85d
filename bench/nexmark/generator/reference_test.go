package generator

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
)

// The files testdata/ref-*.jsonl.gz hold events of the upstream Java
// generator, run with the port's seeds by testdata/refgen/gen.sh. Their
// first line is the configuration; the others are events with times in
// epoch milliseconds.

type refConfig struct {
	Events       int64 `json:"events"`
	Total        int64 `json:"total"`
	Rate         int   `json:"rate"`
	Generators   int   `json:"generators"`
	Split        int   `json:"split"`
	Seed         int64 `json:"seed"`
	Base         int64 `json:"base"`
	OOO          int64 `json:"ooo"`
	PersonBytes  int   `json:"personBytes"`
	AuctionBytes int   `json:"auctionBytes"`
	BidBytes     int   `json:"bidBytes"`
	FirstEventID int64 `json:"firstEventId"`
	MaxEvents    int64 `json:"maxEvents"`
}

type refPerson struct {
	ID           int64  `json:"id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	DateTime     int64  `json:"dateTime"`
	Extra        string `json:"extra"`
}

type refAuction struct {
	ID          int64  `json:"id"`
	ItemName    string `json:"itemName"`
	Description string `json:"description"`
	InitialBid  int64  `json:"initialBid"`
	Reserve     int64  `json:"reserve"`
	DateTime    int64  `json:"dateTime"`
	Expires     int64  `json:"expires"`
	Seller      int64  `json:"seller"`
	Category    int64  `json:"category"`
	Extra       string `json:"extra"`
}

type refBid struct {
	Auction  int64  `json:"auction"`
	Bidder   int64  `json:"bidder"`
	Price    int64  `json:"price"`
	Channel  string `json:"channel"`
	URL      string `json:"url"`
	DateTime int64  `json:"dateTime"`
	Extra    string `json:"extra"`
}

type refLine struct {
	Config  *refConfig  `json:"config"`
	Person  *refPerson  `json:"person"`
	Auction *refAuction `json:"auction"`
	Bid     *refBid     `json:"bid"`
}

func ms(v int64) time.Time { return time.UnixMilli(v).UTC() }

// event converts a reference line to the model event the port must
// produce.
func (l *refLine) event() model.Event {
	switch {
	case l.Person != nil:
		p := l.Person
		return model.Event{Person: &model.Person{ID: p.ID, Name: p.Name, EmailAddress: p.EmailAddress,
			CreditCard: p.CreditCard, City: p.City, State: p.State, DateTime: ms(p.DateTime), Extra: p.Extra}}
	case l.Auction != nil:
		a := l.Auction
		return model.Event{Auction: &model.Auction{ID: a.ID, ItemName: a.ItemName, Description: a.Description,
			InitialBid: a.InitialBid, Reserve: a.Reserve, DateTime: ms(a.DateTime), Expires: ms(a.Expires),
			Seller: a.Seller, Category: a.Category, Extra: a.Extra}}
	case l.Bid != nil:
		b := l.Bid
		return model.Event{Bid: &model.Bid{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price,
			Channel: b.Channel, URL: b.URL, DateTime: ms(b.DateTime), Extra: b.Extra}}
	}
	return model.Event{}
}

// readRef calls f with the configuration line of the reference file at
// path, then with each of its events, in order, until f returns false.
func readRef(t *testing.T, path string, f func(cfg *refConfig, i int64, e *model.Event) bool) {
	t.Helper()
	file, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	z, err := gzip.NewReader(file)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(z)
	sc.Buffer(nil, 1<<20)
	var cfg *refConfig
	var n int64
	for sc.Scan() {
		var l refLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if l.Config != nil {
			cfg = l.Config
			if !f(cfg, -1, nil) {
				return
			}
			continue
		}
		if cfg == nil {
			t.Fatalf("%s: no configuration line", path)
		}
		e := l.event()
		if !f(cfg, n, &e) {
			return
		}
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cfg == nil || n != cfg.Events {
		t.Fatalf("%s: %d events, want the configuration line and its events", path, n)
	}
}

// diffEvents lists the fields in which got differs from want.
func diffEvents(got, want *model.Event) []string {
	var diffs []string
	gv, wv := reflect.ValueOf(got).Elem(), reflect.ValueOf(want).Elem()
	for i := range gv.NumField() {
		name := gv.Type().Field(i).Name
		g, w := gv.Field(i), wv.Field(i)
		if g.IsNil() != w.IsNil() {
			diffs = append(diffs, fmt.Sprintf("%s: got set=%v, want set=%v", name, !g.IsNil(), !w.IsNil()))
			continue
		}
		if g.IsNil() {
			continue
		}
		g, w = g.Elem(), w.Elem()
		for j := range g.NumField() {
			gf, wf := g.Field(j).Interface(), w.Field(j).Interface()
			eq := gf == wf
			if gt, ok := gf.(time.Time); ok {
				eq = gt.Equal(wf.(time.Time)) && gt.Location() == time.UTC
			}
			if !eq {
				diffs = append(diffs, fmt.Sprintf("%s.%s: got %v, want %v", name, g.Type().Field(j).Name, gf, wf))
			}
		}
	}
	return diffs
}

// TestReference compares the port with the upstream Java generator, event
// for event and field for field, in three configurations: the defaults;
// the benchmark's layout (100M events at 10M/s over 8 generators, split
// 7); out-of-order groups with other extra sizes (split 1 of 3). Set
// NEXMARK_REF to a comma-separated list of more files written by
// testdata/refgen/Dump (gzipped) to compare those too, for instance
// millions of events:
//
//	DUMP_ONLY=1 testdata/refgen/gen.sh events=5000000 seed=42 | gzip -1 > /tmp/ref.jsonl.gz
//	NEXMARK_REF=/tmp/ref.jsonl.gz go test -run Reference
func TestReference(t *testing.T) {
	files := []string{"testdata/ref-default.jsonl.gz", "testdata/ref-split7.jsonl.gz", "testdata/ref-ooo.jsonl.gz"}
	if extra := os.Getenv("NEXMARK_REF"); extra != "" {
		files = append(files, strings.Split(extra, ",")...)
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			var g *Generator
			var e model.Event
			bad := 0
			readRef(t, path, func(rc *refConfig, i int64, want *model.Event) bool {
				if want == nil {
					// Java seeded the split's RNG with rc.Seed, which is
					// SplitSeed(seed, rc.Split) for this Config.Seed (42 for
					// the files of testdata).
					seed := uint64(rc.Seed) ^ mix64(uint64(rc.Split))
					g = New(Config{
						Events:              rc.Total,
						Rate:                rc.Rate,
						Generators:          rc.Generators,
						OutOfOrderGroupSize: rc.OOO,
						AvgPersonBytes:      rc.PersonBytes,
						AvgAuctionBytes:     rc.AuctionBytes,
						AvgBidBytes:         rc.BidBytes,
						BaseTime:            ms(rc.Base),
						Seed:                seed,
					}, rc.Split)
					if g.firstEventID != rc.FirstEventID || g.Total() != rc.MaxEvents {
						t.Errorf("firstEventID, Total = %d, %d; want %d, %d", g.firstEventID, g.Total(), rc.FirstEventID, rc.MaxEvents)
					}
					return true
				}
				if !g.Next(&e) {
					t.Fatalf("stream ended after %d events", i)
				}
				if d := diffEvents(&e, want); len(d) > 0 {
					t.Errorf("event %d differs:\n%v", i, d)
					if bad++; bad == 5 {
						return false
					}
				}
				return true
			})
		})
	}
}
