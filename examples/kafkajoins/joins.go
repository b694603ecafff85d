package main

import (
	"fmt"
	"time"

	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Order is an order of a customer, keyed by the customer.
//
//streamgen:record
type Order struct {
	ID       string    `json:"id"`
	Customer string    `json:"customer"`
	Amount   float64   `json:"amount"`
	Time     time.Time `json:"time"`
}

// Customer is a customer's record, the latest per customer in a compacted
// topic; a tombstone (a record with no value) deletes the customer.
//
//streamgen:record
type Customer struct {
	ID      string    `json:"id"`
	Name    string    `json:"name"`
	Tier    string    `json:"tier"`
	Time    time.Time `json:"-"`
	Deleted bool      `json:"-"`
}

// EnrichedOrder is an order with its customer's record at the time: the
// output of the stream-table join. Name and Tier are empty for a customer
// the table does not have.
//
//streamgen:record
type EnrichedOrder struct {
	Order    string  `json:"order"`
	Customer string  `json:"customer"`
	Amount   float64 `json:"amount"`
	Name     string  `json:"name"`
	Tier     string  `json:"tier"`
	Known    bool    `json:"known"`
}

// Impression is an ad shown, keyed by the ad.
//
//streamgen:record
type Impression struct {
	ID   string    `json:"id"`
	Ad   string    `json:"ad"`
	Time time.Time `json:"time"`
}

// Click is a click on an ad, keyed by the ad.
//
//streamgen:record
type Click struct {
	ID   string    `json:"id"`
	Ad   string    `json:"ad"`
	Time time.Time `json:"time"`
}

// ImpressionClick is an impression and the click on its ad within ten
// minutes after it, or no click: the output of the stream-stream join.
//
//streamgen:record
type ImpressionClick struct {
	Impression string `json:"impression"`
	Ad         string `json:"ad"`
	Click      string `json:"click,omitempty"`
	Clicked    bool   `json:"clicked"`
	After      string `json:"after,omitempty"`
}

// ClickWindow is how long after an impression a click counts.
const ClickWindow = 10 * time.Minute

// decodeCustomer reads a customer's record, or its tombstone (no value).
func decodeCustomer(m *kafka.Message) (Customer, error) {
	c := Customer{ID: string(m.Key), Time: m.Timestamp}
	if m.Value == nil {
		c.Deleted = true
		return c, nil
	}
	err := c.UnmarshalJSON(m.Value)
	c.Time = m.Timestamp
	return c, err
}

// enrich joins each order with its customer's record current at the
// order's time (Kafka Streams' KStream-KTable left join): the latest
// record per customer, a tombstone deleting it; an order of a customer
// the table does not have is written with Known false.
func enrich(orders typed.Stream[Order], customers typed.Stream[Customer]) typed.Stream[EnrichedOrder] {
	orders = typed.WithWatermark(orders, func(o *Order) time.Time { return o.Time }, 0)
	customers = typed.WithWatermark(customers, func(c *Customer) time.Time { return c.Time }, 0)
	table := typed.TableUpdates(customers, func(c *Customer) string { return c.ID }, func(c *Customer) bool { return c.Deleted })
	return typed.JoinUpdates(typed.GroupByKey(orders, func(o *Order) string { return o.Customer }), table, typed.LeftOuter,
		func(j typed.Joined[string, Order, Customer]) EnrichedOrder {
			e := EnrichedOrder{Order: j.Left.ID, Customer: j.Key, Amount: j.Left.Amount}
			if j.Right != nil {
				e.Name, e.Tier, e.Known = j.Right.Name, j.Right.Tier, true
			}
			return e
		})
}

// clicked joins each impression with the clicks on its ad within
// ClickWindow after it (a stream-stream left outer join with an event-time
// condition, 5-minute watermarks): an impression with no such click is
// written once the watermark shows none can come.
func clicked(impressions typed.Stream[Impression], clicks typed.Stream[Click]) typed.Stream[ImpressionClick] {
	impressions = typed.WithWatermark(impressions, func(i *Impression) time.Time { return i.Time }, 5*time.Minute)
	clicks = typed.WithWatermark(clicks, func(c *Click) time.Time { return c.Time }, 5*time.Minute)
	return typed.Join(typed.GroupByKey(impressions, func(i *Impression) string { return i.Ad }), typed.GroupByKey(clicks, func(c *Click) string { return c.Ad }),
		typed.LeftOuter, func(j typed.Joined[string, Impression, Click]) ImpressionClick {
			out := ImpressionClick{Impression: j.Left.ID, Ad: j.Key}
			if j.Right != nil {
				out.Click, out.Clicked, out.After = j.Right.ID, true, fmt.Sprint(j.Right.Time.Sub(j.Left.Time))
			}
			return out
		},
		// The click at or after the impression, within the window: the
		// impression's time is between the click's less the window and
		// the click's.
		typed.JoinWithin(typed.TimeBetween(-ClickWindow, 0)))
}
