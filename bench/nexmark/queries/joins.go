package queries

import (
	"strconv"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/typed"
)

// The queries that are joins of the events' views: q3, q20 and q23 (regular
// inner joins: state kept for ever, and late rows joined, as Flink's:
// they read the events without a watermark, which would have the join
// drop the rows at or before it), q13 (a stream-static join with the
// bounded side input).

// Q3Row is q3's row.
//
//streamgen:record
type Q3Row struct {
	Name  string `json:"name"`
	City  string `json:"city"`
	State string `json:"state"`
	ID    int64  `json:"id"`
}

func q3Seller(p *model.Person) bool { return p.State == "OR" || p.State == "ID" || p.State == "CA" }

// Q3Auction is the columns of an auction that q3 reads: the join's state
// keeps these, not the whole auction, as Flink's planner prunes the
// columns a query does not select before its join.
//
//streamgen:record
type Q3Auction struct {
	ID     int64 `json:"id"`
	Seller int64 `json:"seller"`
}

// Q3Person is the columns of a person that q3 reads.
//
//streamgen:record
type Q3Person struct {
	ID    int64  `json:"id"`
	Name  string `json:"name"`
	City  string `json:"city"`
	State string `json:"state"`
}

var _ = register(&Query{
	Name:  "q3",
	Title: "local item suggestion: auctions of category 10 joined with their sellers in OR, ID or CA",
	// A regular join: Flink's keeps late rows, which a watermark would
	// have streamgen's join drop.
	noWatermark: true,
	build: func(events typed.Stream[model.Event], out Output) starter {
		a := typed.Map(typed.Filter(auctions(events), func(a *model.Auction) bool { return a.Category == 10 }),
			func(a *model.Auction) Q3Auction { return Q3Auction{ID: a.ID, Seller: a.Seller} })
		p := typed.Map(typed.Filter(persons(events), q3Seller),
			func(p *model.Person) Q3Person { return Q3Person{ID: p.ID, Name: p.Name, City: p.City, State: p.State} })
		joined := typed.Join(typed.GroupByKey(a, func(a *Q3Auction) int64 { return a.Seller }),
			typed.GroupByKey(p, func(p *Q3Person) int64 { return p.ID }),
			typed.Inner, func(j typed.Joined[int64, Q3Auction, Q3Person]) Q3Row {
				return Q3Row{Name: j.Right.Name, City: j.Right.City, State: j.Right.State, ID: j.Left.ID}
			})
		return typed.WriteTo(joined, sinkOf[Q3Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		var rows []Q3Row
		for i := range events {
			a := events[i].Auction
			if a == nil || a.Category != 10 {
				continue
			}
			for j := range events {
				if p := events[j].Person; p != nil && p.ID == a.Seller && (p.State == "OR" || p.State == "ID" || p.State == "CA") {
					rows = append(rows, Q3Row{Name: p.Name, City: p.City, State: p.State, ID: a.ID})
				}
			}
		}
		return lines(rows)
	},
})

// Q13Row is q13's row.
//
//streamgen:record
type Q13Row struct {
	Auction  int64     `json:"auction"`
	Bidder   int64     `json:"bidder"`
	Price    int64     `json:"price"`
	DateTime time.Time `json:"dateTime"`
	Value    string    `json:"value"`
}

// SideInput is a row of q13's bounded side input: the nexmark/nexmark
// side_input.txt, the lines "i,i" for i from 0 to 9,999.
type SideInput struct {
	Key   int64
	Value string
}

// SideInputRows is q13's side input.
func SideInputRows() []SideInput {
	rows := make([]SideInput, 10_000)
	for i := range rows {
		rows[i] = SideInput{Key: int64(i), Value: strconv.Itoa(i)}
	}
	return rows
}

var _ = register(&Query{
	Name:  "q13",
	Title: "bounded side input join: each bid with the side input's row of mod(auction, 10000)",
	build: func(events typed.Stream[model.Event], out Output) starter {
		side := typed.TableOf(SideInputRows(), func(s *SideInput) int64 { return s.Key }, typed.TableName("side_input"))
		joined := typed.JoinTable(bids(events), func(b *model.Bid) int64 { return b.Auction % 10_000 }, side, typed.Inner,
			func(j typed.Joined[int64, model.Bid, SideInput]) Q13Row {
				return Q13Row{Auction: j.Left.Auction, Bidder: j.Left.Bidder, Price: j.Left.Price, DateTime: j.Left.DateTime, Value: j.Right.Value}
			})
		return typed.WriteTo(joined, sinkOf[Q13Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		side := SideInputRows()
		var rows []Q13Row
		for i := range events {
			b := events[i].Bid
			if b == nil {
				continue
			}
			for _, s := range side {
				if b.Auction%10_000 == s.Key {
					rows = append(rows, Q13Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, DateTime: b.DateTime, Value: s.Value})
				}
			}
		}
		return lines(rows)
	},
})

// Q20Row is q20's row.
//
//streamgen:record
type Q20Row struct {
	Auction         int64     `json:"auction"`
	Bidder          int64     `json:"bidder"`
	Price           int64     `json:"price"`
	Channel         string    `json:"channel"`
	URL             string    `json:"url"`
	BidDateTime     time.Time `json:"bid_dateTime"`
	BidExtra        string    `json:"bid_extra"`
	ItemName        string    `json:"itemName"`
	Description     string    `json:"description"`
	InitialBid      int64     `json:"initialBid"`
	Reserve         int64     `json:"reserve"`
	AuctionDateTime time.Time `json:"auction_dateTime"`
	Expires         time.Time `json:"expires"`
	Seller          int64     `json:"seller"`
	Category        int64     `json:"category"`
	AuctionExtra    string    `json:"auction_extra"`
}

func q20Row(b *model.Bid, a *model.Auction) Q20Row {
	return Q20Row{Auction: b.Auction, Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL,
		BidDateTime: b.DateTime, BidExtra: b.Extra, ItemName: a.ItemName, Description: a.Description,
		InitialBid: a.InitialBid, Reserve: a.Reserve, AuctionDateTime: a.DateTime, Expires: a.Expires,
		Seller: a.Seller, Category: a.Category, AuctionExtra: a.Extra}
}

var _ = register(&Query{
	Name:  "q20",
	Title: "expand bid with auction: each bid joined with its auction, of category 10",
	// A regular join, as q3's.
	noWatermark: true,
	build: func(events typed.Stream[model.Event], out Output) starter {
		b := typed.GroupByKey(bids(events), func(b *model.Bid) int64 { return b.Auction })
		a := typed.GroupByKey(typed.Filter(auctions(events), func(a *model.Auction) bool { return a.Category == 10 }),
			func(a *model.Auction) int64 { return a.ID })
		joined := typed.Join(b, a, typed.Inner, func(j typed.Joined[int64, model.Bid, model.Auction]) Q20Row {
			return q20Row(j.Left, j.Right)
		})
		return typed.WriteTo(joined, sinkOf[Q20Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		byID := map[int64][]*model.Auction{}
		for i := range events {
			if a := events[i].Auction; a != nil && a.Category == 10 {
				byID[a.ID] = append(byID[a.ID], a)
			}
		}
		var rows []Q20Row
		for i := range events {
			if b := events[i].Bid; b != nil {
				for _, a := range byID[b.Auction] {
					rows = append(rows, q20Row(b, a))
				}
			}
		}
		return lines(rows)
	},
})

// Q23Row is q23's row.
//
//streamgen:record
type Q23Row struct {
	Bidder          int64     `json:"bidder"`
	Price           int64     `json:"price"`
	Channel         string    `json:"channel"`
	URL             string    `json:"url"`
	BidExtra        string    `json:"bid_extra"`
	PersonID        int64     `json:"person_id"`
	Name            string    `json:"name"`
	EmailAddress    string    `json:"emailAddress"`
	CreditCard      string    `json:"creditCard"`
	City            string    `json:"city"`
	State           string    `json:"state"`
	PersonExtra     string    `json:"person_extra"`
	ItemName        string    `json:"itemName"`
	Description     string    `json:"description"`
	InitialBid      int64     `json:"initialBid"`
	Reserve         int64     `json:"reserve"`
	AuctionDateTime time.Time `json:"auction_dateTime"`
	Expires         time.Time `json:"expires"`
	Seller          int64     `json:"seller"`
	Category        int64     `json:"category"`
	AuctionExtra    string    `json:"auction_extra"`
}

// Q23BidPerson is a row of q23's first join, a bid with its bidder: the
// columns the query selects of both, which the second join keeps.
//
//streamgen:record
type Q23BidPerson struct {
	Bidder       int64  `json:"bidder"`
	Price        int64  `json:"price"`
	Channel      string `json:"channel"`
	URL          string `json:"url"`
	BidExtra     string `json:"bid_extra"`
	PersonID     int64  `json:"person_id"`
	Name         string `json:"name"`
	EmailAddress string `json:"emailAddress"`
	CreditCard   string `json:"creditCard"`
	City         string `json:"city"`
	State        string `json:"state"`
	PersonExtra  string `json:"person_extra"`
}

func q23BidPerson(b *model.Bid, p *model.Person) Q23BidPerson {
	return Q23BidPerson{Bidder: b.Bidder, Price: b.Price, Channel: b.Channel, URL: b.URL, BidExtra: b.Extra,
		PersonID: p.ID, Name: p.Name, EmailAddress: p.EmailAddress, CreditCard: p.CreditCard, City: p.City, State: p.State, PersonExtra: p.Extra}
}

func q23Row(bp *Q23BidPerson, a *model.Auction) Q23Row {
	return Q23Row{Bidder: bp.Bidder, Price: bp.Price, Channel: bp.Channel, URL: bp.URL, BidExtra: bp.BidExtra,
		PersonID: bp.PersonID, Name: bp.Name, EmailAddress: bp.EmailAddress, CreditCard: bp.CreditCard, City: bp.City, State: bp.State, PersonExtra: bp.PersonExtra,
		ItemName: a.ItemName, Description: a.Description, InitialBid: a.InitialBid, Reserve: a.Reserve,
		AuctionDateTime: a.DateTime, Expires: a.Expires, Seller: a.Seller, Category: a.Category, AuctionExtra: a.Extra}
}

var _ = register(&Query{
	Name:  "q23",
	Title: "expand bid with person and auction: each bid joined with its bidder and with every auction the bidder listed (a multi-way join)",
	// Regular joins, as q3's.
	noWatermark: true,
	build: func(events typed.Stream[model.Event], out Output) starter {
		b := typed.GroupByKey(bids(events), func(b *model.Bid) int64 { return b.Bidder })
		p := typed.GroupByKey(persons(events), func(p *model.Person) int64 { return p.ID })
		withBidder := typed.Join(b, p, typed.Inner, func(j typed.Joined[int64, model.Bid, model.Person]) Q23BidPerson {
			return q23BidPerson(j.Left, j.Right)
		})
		a := typed.GroupByKey(auctions(events), func(a *model.Auction) int64 { return a.Seller })
		joined := typed.Join(typed.GroupByKey(withBidder, func(bp *Q23BidPerson) int64 { return bp.Bidder }), a, typed.Inner,
			func(j typed.Joined[int64, Q23BidPerson, model.Auction]) Q23Row { return q23Row(j.Left, j.Right) })
		return typed.WriteTo(joined, sinkOf[Q23Row](out))
	},
	loop: func(events []model.Event) ([][]byte, error) {
		persons := map[int64][]*model.Person{}
		bySeller := map[int64][]*model.Auction{}
		for i := range events {
			if p := events[i].Person; p != nil {
				persons[p.ID] = append(persons[p.ID], p)
			}
			if a := events[i].Auction; a != nil {
				bySeller[a.Seller] = append(bySeller[a.Seller], a)
			}
		}
		var rows []Q23Row
		for i := range events {
			b := events[i].Bid
			if b == nil {
				continue
			}
			for _, p := range persons[b.Bidder] {
				bp := q23BidPerson(b, p)
				for _, a := range bySeller[b.Bidder] {
					rows = append(rows, q23Row(&bp, a))
				}
			}
		}
		return lines(rows)
	},
})
