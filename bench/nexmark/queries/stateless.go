package queries

import (
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/typed"
)

// The queries without state: projections, filters and calculations over
// the bids (q0, q1, q2, q10, q14, q21, q22).

// Q0Row is q0's row.
//
//streamgen:record
type Q0Row struct {
	Auction  int64     `json:"auction"`
	Bidder   int64     `json:"bidder"`
	Price    int64     `json:"price"`
	DateTime time.Time `json:"dateTime"`
	Extra    string    `json:"extra"`
}

func q0Row(b *model.Bid) Q0Row {
	return Q0Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra}
}

var _ = register(&Query{
	Name:  "q0",
	Title: "pass through: SELECT auction, bidder, price, dateTime, extra FROM bid",
	build: func(events typed.Stream[model.Event], out Output) starter {
		return typed.WriteTo(typed.Map(bids(events), q0Row), sinkOf[Q0Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q0Row
		for i := range events {
			if b := events[i].Bid; b != nil {
				rows = append(rows, q0Row(b))
			}
		}
		return lines(rows)
	},
})

// Q1Row is q1's row: the price in euros, DECIMAL(23, 3) in the SQL.
//
//streamgen:record
type Q1Row struct {
	Auction  int64     `json:"auction"`
	Bidder   int64     `json:"bidder"`
	Price    float64   `json:"price"`
	DateTime time.Time `json:"dateTime"`
	Extra    string    `json:"extra"`
}

// euros is `0.908 * price`, to the SQL's three decimals.
func euros(price int64) float64 { return float64(price*908) / 1000 }

func q1Row(b *model.Bid) Q1Row {
	return Q1Row{Auction: b.Auction, Bidder: b.Bidder, Price: euros(b.Price), DateTime: b.DateTime, Extra: b.Extra}
}

var _ = register(&Query{
	Name:  "q1",
	Title: "currency conversion: 0.908 * price",
	build: func(events typed.Stream[model.Event], out Output) starter {
		return typed.WriteTo(typed.Map(bids(events), q1Row), sinkOf[Q1Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q1Row
		for i := range events {
			if b := events[i].Bid; b != nil {
				price, _ := loopEuros(b.Price).Float64()
				rows = append(rows, Q1Row{Auction: b.Auction, Bidder: b.Bidder, Price: price, DateTime: b.DateTime, Extra: b.Extra})
			}
		}
		return lines(rows)
	},
})

// The loops' own arithmetic and formatting, written from the SQL and
// shared with no query, so that a bug in a query's helpers shows.

// loopEuros is the SQL's `0.908 * price`, exactly.
func loopEuros(price int64) *big.Rat {
	r, _ := new(big.Rat).SetString("0.908")
	return r.Mul(r, new(big.Rat).SetInt64(price))
}

// loopDate is DATE_FORMAT(t, 'yyyy-MM-dd'), loopHourMinute
// DATE_FORMAT(t, 'HH:mm'), of a TIMESTAMP in UTC.
func loopDate(t time.Time) string {
	y, m, d := t.UTC().Date()
	return fmt.Sprintf("%04d-%02d-%02d", y, int(m), d)
}

func loopHourMinute(t time.Time) string {
	return fmt.Sprintf("%02d:%02d", t.UTC().Hour(), t.UTC().Minute())
}

// Q2Row is q2's row.
//
//streamgen:record
type Q2Row struct {
	Auction int64 `json:"auction"`
	Price   int64 `json:"price"`
}

var _ = register(&Query{
	Name:  "q2",
	Title: "selection: the bids of every 123rd auction",
	build: func(events typed.Stream[model.Event], out Output) starter {
		selected := typed.Filter(bids(events), func(b *model.Bid) bool { return b.Auction%123 == 0 })
		return typed.WriteTo(typed.Map(selected, func(b *model.Bid) Q2Row { return Q2Row{Auction: b.Auction, Price: b.Price} }), sinkOf[Q2Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q2Row
		for i := range events {
			if b := events[i].Bid; b != nil && b.Auction%123 == 0 {
				rows = append(rows, Q2Row{Auction: b.Auction, Price: b.Price})
			}
		}
		return lines(rows)
	},
})

// Q10Row is q10's row: a bid with the day and the minute of the
// partition Flink's file sink writes it to.
//
//streamgen:record
type Q10Row struct {
	Auction  int64     `json:"auction"`
	Bidder   int64     `json:"bidder"`
	Price    int64     `json:"price"`
	DateTime time.Time `json:"dateTime"`
	Extra    string    `json:"extra"`
	Dt       string    `json:"dt"`
	Hm       string    `json:"hm"`
}

func q10Row(b *model.Bid) Q10Row {
	t := b.DateTime.UTC()
	return Q10Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra,
		Dt: t.Format("2006-01-02"), Hm: t.Format("15:04")}
}

var _ = register(&Query{
	Name:  "q10",
	Title: "log to files: every bid with its day (dt) and minute (hm), the partition columns of Flink's file sink",
	build: func(events typed.Stream[model.Event], out Output) starter {
		return typed.WriteTo(typed.Map(bids(events), q10Row), sinkOf[Q10Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q10Row
		for i := range events {
			if b := events[i].Bid; b != nil {
				rows = append(rows, Q10Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Extra: b.Extra,
					Dt: loopDate(b.DateTime), Hm: loopHourMinute(b.DateTime)})
			}
		}
		return lines(rows)
	},
})

// Q14Row is q14's row.
//
//streamgen:record
type Q14Row struct {
	Auction     int64     `json:"auction"`
	Bidder      int64     `json:"bidder"`
	Price       float64   `json:"price"`
	BidTimeType string    `json:"bidTimeType"`
	DateTime    time.Time `json:"dateTime"`
	Extra       string    `json:"extra"`
	CCounts     int64     `json:"c_counts"`
}

// q14Keep is q14's WHERE: 0.908 * price between 1,000,000 and
// 50,000,000, both excluded (in thousandths, exactly).
func q14Keep(b *model.Bid) bool {
	e := b.Price * 908
	return e > 1_000_000*1000 && e < 50_000_000*1000
}

func q14Row(b *model.Bid) Q14Row {
	kind := "otherTime"
	switch h := b.DateTime.UTC().Hour(); {
	case h >= 8 && h <= 18:
		kind = "dayTime"
	case h <= 6 || h >= 20:
		kind = "nightTime"
	}
	return Q14Row{Auction: b.Auction, Bidder: b.Bidder, Price: euros(b.Price), BidTimeType: kind, DateTime: b.DateTime,
		Extra: b.Extra, CCounts: int64(strings.Count(b.Extra, "c"))}
}

var _ = register(&Query{
	Name:  "q14",
	Title: "calculation: bids in a price range, the time of day and a user function (count_char)",
	build: func(events typed.Stream[model.Event], out Output) starter {
		return typed.WriteTo(typed.Map(typed.Filter(bids(events), q14Keep), q14Row), sinkOf[Q14Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q14Row
		for i := range events {
			b := events[i].Bid
			if b == nil {
				continue
			}
			// WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
			p := loopEuros(b.Price)
			if p.Cmp(big.NewRat(1000000, 1)) <= 0 || p.Cmp(big.NewRat(50000000, 1)) >= 0 {
				continue
			}
			price, _ := p.Float64()
			var kind string
			switch h := b.DateTime.UTC().Hour(); {
			case h >= 8 && h <= 18:
				kind = "dayTime"
			case h <= 6 || h >= 20:
				kind = "nightTime"
			default:
				kind = "otherTime"
			}
			// count_char(extra, 'c')
			var c int64
			for _, r := range b.Extra {
				if r == 'c' {
					c++
				}
			}
			rows = append(rows, Q14Row{Auction: b.Auction, Bidder: b.Bidder, Price: price, BidTimeType: kind, DateTime: b.DateTime, Extra: b.Extra, CCounts: c})
		}
		return lines(rows)
	},
})

// Q21Row is q21's row.
//
//streamgen:record
type Q21Row struct {
	Auction   int64   `json:"auction"`
	Bidder    int64   `json:"bidder"`
	Price     int64   `json:"price"`
	Channel   string  `json:"channel"`
	ChannelID *string `json:"channel_id"`
}

// channelID is REGEXP_EXTRACT(url, '(&|^)channel_id=([^&]*)', 2): the
// value of the first channel_id parameter that starts the URL or follows
// an '&', or nil.
func channelID(url string) *string {
	for i := 0; ; {
		j := strings.Index(url[i:], "channel_id=")
		if j < 0 {
			return nil
		}
		at := i + j
		if at == 0 || url[at-1] == '&' {
			v := url[at+len("channel_id="):]
			if k := strings.IndexByte(v, '&'); k >= 0 {
				v = v[:k]
			}
			return &v
		}
		i = at + 1
	}
}

// hotChannel is q21's CASE on lower(channel), and whether it applied.
func hotChannel(channel string) (string, bool) {
	switch strings.ToLower(channel) {
	case "apple":
		return "0", true
	case "google":
		return "1", true
	case "facebook":
		return "2", true
	case "baidu":
		return "3", true
	}
	return "", false
}

// q21Row is q21's row of b, and whether its WHERE keeps it.
func q21Row(b *model.Bid) (Q21Row, bool) {
	id := channelID(b.URL)
	hot, isHot := hotChannel(b.Channel)
	if id == nil && !isHot {
		return Q21Row{}, false
	}
	if isHot {
		id = &hot
	}
	return Q21Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, ChannelID: id}, true
}

var _ = register(&Query{
	Name:  "q21",
	Title: "add a channel id: CASE on the channel, else REGEXP_EXTRACT on the URL",
	build: func(events typed.Stream[model.Event], out Output) starter {
		kept := typed.Filter(bids(events), func(b *model.Bid) bool { _, ok := q21Row(b); return ok })
		return typed.WriteTo(typed.Map(kept, func(b *model.Bid) Q21Row { r, _ := q21Row(b); return r }), sinkOf[Q21Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		// The SQL's REGEXP_EXTRACT, with a regular expression.
		re := regexp.MustCompile(`(&|^)channel_id=([^&]*)`)
		var rows []Q21Row
		for i := range events {
			b := events[i].Bid
			if b == nil {
				continue
			}
			var id *string
			if m := re.FindStringSubmatch(b.URL); m != nil {
				id = &m[2]
			}
			switch c := strings.ToLower(b.Channel); c {
			case "apple", "google", "facebook", "baidu":
				n := map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}[c]
				id = &n
			}
			if id != nil {
				rows = append(rows, Q21Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, ChannelID: id})
			}
		}
		return lines(rows)
	},
})

// Q22Row is q22's row.
//
//streamgen:record
type Q22Row struct {
	Auction int64   `json:"auction"`
	Bidder  int64   `json:"bidder"`
	Price   int64   `json:"price"`
	Channel string  `json:"channel"`
	Dir1    *string `json:"dir1"`
	Dir2    *string `json:"dir2"`
	Dir3    *string `json:"dir3"`
}

// splitIndex is SPLIT_INDEX(s, '/', i): the i-th (from 0) of the parts of
// s between slashes, or nil.
func splitIndex(s string, i int) *string {
	for range i {
		j := strings.IndexByte(s, '/')
		if j < 0 {
			return nil
		}
		s = s[j+1:]
	}
	if j := strings.IndexByte(s, '/'); j >= 0 {
		s = s[:j]
	}
	return &s
}

func q22Row(b *model.Bid) Q22Row {
	return Q22Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel,
		Dir1: splitIndex(b.URL, 3), Dir2: splitIndex(b.URL, 4), Dir3: splitIndex(b.URL, 5)}
}

var _ = register(&Query{
	Name:  "q22",
	Title: "URL directories: SPLIT_INDEX(url, '/', 3 to 5)",
	build: func(events typed.Stream[model.Event], out Output) starter {
		return typed.WriteTo(typed.Map(bids(events), q22Row), sinkOf[Q22Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q22Row
		for i := range events {
			if b := events[i].Bid; b != nil {
				parts := strings.Split(b.URL, "/")
				r := Q22Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel}
				for k, dir := range []**string{&r.Dir1, &r.Dir2, &r.Dir3} {
					if 3+k < len(parts) {
						*dir = &parts[3+k]
					}
				}
				rows = append(rows, r)
			}
		}
		return lines(rows)
	},
})
