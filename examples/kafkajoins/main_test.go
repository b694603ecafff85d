package main

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestJoinsMatchAPlainLoop: the rows the two joins write are a plain
// loop's over the sample: each order with its customer's latest record at
// the order's time (none after a tombstone), and each impression with the
// clicks on its ad within ten minutes after it, or alone.
func TestJoinsMatchAPlainLoop(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := run(context.Background(), nil, &stdout, &stderr); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	var want []string
	customers := sampleCustomers("customers")
	for _, r := range sampleOrders("orders") {
		var o Order
		if err := o.UnmarshalJSON(r.Value); err != nil {
			t.Fatal(err)
		}
		e := EnrichedOrder{Order: o.ID, Customer: o.Customer, Amount: o.Amount}
		var latest *Customer
		for _, c := range customers {
			if string(c.Key) != o.Customer || c.Timestamp.After(o.Time) {
				continue
			}
			if c.Value == nil {
				latest = nil
				continue
			}
			latest = &Customer{}
			if err := latest.UnmarshalJSON(c.Value); err != nil {
				t.Fatal(err)
			}
		}
		if latest != nil {
			e.Name, e.Tier, e.Known = latest.Name, latest.Tier, true
		}
		line, _ := e.MarshalJSON()
		want = append(want, "enriched-orders "+string(line))
	}
	clicks := sampleClicks("clicks")
	for _, r := range sampleImpressions("impressions") {
		var i Impression
		if err := i.UnmarshalJSON(r.Value); err != nil {
			t.Fatal(err)
		}
		matched := false
		for _, cr := range clicks {
			var c Click
			if err := c.UnmarshalJSON(cr.Value); err != nil {
				t.Fatal(err)
			}
			if c.Ad == i.Ad && !c.Time.Before(i.Time) && c.Time.Sub(i.Time) <= ClickWindow {
				matched = true
				line, _ := (&ImpressionClick{Impression: i.ID, Ad: i.Ad, Click: c.ID, Clicked: true, After: fmt.Sprint(c.Time.Sub(i.Time))}).MarshalJSON()
				want = append(want, "impression-clicks "+string(line))
			}
		}
		if !matched {
			line, _ := (&ImpressionClick{Impression: i.ID, Ad: i.Ad}).MarshalJSON()
			want = append(want, "impression-clicks "+string(line))
		}
	}
	got := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("rows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
