package main

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// sampleStart is the time of the sample's first event.
var sampleStart = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// record makes a record of topic keyed by key, stamped at, with the JSON
// of v (no value for a nil v: a tombstone).
func record(topic, key string, at time.Time, v interface{ MarshalJSON() ([]byte, error) }) *kgo.Record {
	r := &kgo.Record{Topic: topic, Key: []byte(key), Timestamp: at}
	if v != nil {
		value, err := v.MarshalJSON()
		if err != nil {
			panic(err)
		}
		r.Value = value
	}
	return r
}

// sampleCustomers are the customers' records: c2 moves to gold at 9:30,
// c4 is deleted at 9:40.
func sampleCustomers(topic string) []*kgo.Record {
	at := func(m int) time.Time { return sampleStart.Add(time.Duration(m) * time.Minute) }
	out := []*kgo.Record{}
	for i, tier := range []string{"silver", "bronze", "gold", "silver"} {
		id := fmt.Sprint("c", i+1)
		out = append(out, record(topic, id, at(0), &Customer{ID: id, Name: fmt.Sprint("Customer ", i+1), Tier: tier}))
	}
	out = append(out, record(topic, "c2", at(30), &Customer{ID: "c2", Name: "Customer 2", Tier: "gold"}))
	out = append(out, record(topic, "c4", at(40), nil))
	return out
}

// sampleOrders are orders of c1 to c5 every five minutes (c5 has no
// record).
func sampleOrders(topic string) []*kgo.Record {
	var out []*kgo.Record
	for i := range 12 {
		at := sampleStart.Add(time.Duration(5*i+2) * time.Minute)
		customer := fmt.Sprint("c", i%5+1)
		id := fmt.Sprint("o", i+1)
		out = append(out, record(topic, customer, at, &Order{ID: id, Customer: customer, Amount: float64(10 * (i + 1)), Time: at}))
	}
	return out
}

// sampleImpressions and sampleClicks: an impression of an ad every three
// minutes; clicks 1 to 9 minutes after some, one 15 minutes after (too
// late to count).
func sampleImpressions(topic string) []*kgo.Record {
	var out []*kgo.Record
	for i := range 12 {
		at := sampleStart.Add(time.Duration(3*i) * time.Minute)
		ad := fmt.Sprint("ad", i%3+1)
		out = append(out, record(topic, ad, at, &Impression{ID: fmt.Sprint("i", i+1), Ad: ad, Time: at}))
	}
	return out
}

func sampleClicks(topic string) []*kgo.Record {
	var out []*kgo.Record
	for n, c := range []struct{ imp, after int }{{0, 1}, {1, 9}, {4, 2}, {6, 15}, {9, 4}} {
		at := sampleStart.Add(time.Duration(3*c.imp+c.after) * time.Minute)
		ad := fmt.Sprint("ad", c.imp%3+1)
		out = append(out, record(topic, ad, at, &Click{ID: fmt.Sprint("k", n+1), Ad: ad, Time: at}))
	}
	return out
}
