// Package model holds Nexmark's events, as the nexmark/nexmark
// specification names them: a person, an auction or a bid, each with its
// event time (dateTime). An event is one JSON line holding one of them:
// {"person": {...}}, {"auction": {...}} or {"bid": {...}}.
package model

import "time"

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Person is a new user of the auction site.
//
//streamgen:record
type Person struct {
	ID           int64     `json:"id"`
	Name         string    `json:"name"`
	EmailAddress string    `json:"emailAddress"`
	CreditCard   string    `json:"creditCard"`
	City         string    `json:"city"`
	State        string    `json:"state"`
	DateTime     time.Time `json:"dateTime"`
	Extra        string    `json:"extra"`
}

// Auction is an item put up for auction by a seller, open from dateTime
// to expires.
//
//streamgen:record
type Auction struct {
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
}

// Bid is a bid on an auction, in cents.
//
//streamgen:record
type Bid struct {
	Auction  int64     `json:"auction"`
	Bidder   int64     `json:"bidder"`
	Price    int64     `json:"price"`
	Channel  string    `json:"channel"`
	URL      string    `json:"url"`
	DateTime time.Time `json:"dateTime"`
	Extra    string    `json:"extra"`
}

// Event is one event of the stream: exactly one of its fields is set.
//
//streamgen:record
type Event struct {
	Person  *Person  `json:"person,omitempty"`
	Auction *Auction `json:"auction,omitempty"`
	Bid     *Bid     `json:"bid,omitempty"`
}

// Time is the event's time: its person's, auction's or bid's dateTime.
func (e *Event) Time() time.Time {
	switch {
	case e.Bid != nil:
		return e.Bid.DateTime
	case e.Auction != nil:
		return e.Auction.DateTime
	case e.Person != nil:
		return e.Person.DateTime
	}
	return time.Time{}
}
