package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/msgporder"
	"github.com/streamgen/streamgen/bench/orderrec"
)

// The codecs on a richer record than the sensor reading: orderrec.Order,
// with a nested struct, a pointer that is sometimes nil, a slice of
// structs, a map, a slice of strings, times and scalars. The benchmarks
// cycle through a few hundred orders made from a fixed seed, so that
// the branches (nil or not, how many items, escapes, zones) vary as they
// would in a stream; each op is one order.

// orderCount is how many orders the benchmarks cycle through.
const orderCount = 300

var orders = makeOrders(orderCount)

// plainOrder is orderrec.Order without its generated methods, for
// encoding/json to handle by reflection (its nested types have none).
type plainOrder orderrec.Order

var (
	plainOrders = func() []plainOrder {
		p := make([]plainOrder, len(orders))
		for i := range orders {
			p[i] = plainOrder(orders[i])
		}
		return p
	}()
	msgpOrders = func() []msgporder.Order {
		m := make([]msgporder.Order, len(orders))
		for i := range orders {
			m[i] = toMsgpOrder(&orders[i])
		}
		return m
	}()
)

// makeOrders returns n orders made from a fixed seed: what a shop's
// service might emit, with most optional parts present and some absent.
func makeOrders(n int) []orderrec.Order {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(s []string) string { return s[rng.IntN(len(s))] }
	names := []string{"Ana García", "Ben Okafor", "Chloé Martin", "Dmitri Ivanov", "Emma Schmidt",
		"Fatima Zahra", "George O'Neil", "Hana Sato", "Ivan Horvat", "Jonas Müller", "Kai Nakamura", "Lena Berg"}
	statuses := []string{"placed", "paid", "packed", "shipped", "delivered", "cancelled"}
	products := []string{"USB-C cable 2 m", "Wireless mouse", "Mechanical keyboard", "27\" monitor",
		"Laptop stand", "Noise-cancelling headphones", "Webcam 1080p", "Desk lamp", "Notebook A5, dotted",
		"Coffee beans 1 kg", "Water bottle", "Phone case"}
	addresses := [][4]string{{"Hauptstraße 12", "Berlin", "10115", "DE"},
		{"12 rue de la République", "Lyon", "69002", "FR"}, {"Calle Mayor 5, 3º B", "Madrid", "28013", "ES"},
		{"1200 SW Main St", "Portland", "97205", "US"}, {"Flat 4, 22 Park Row", "Leeds", "LS1 4DY", "GB"},
		{"2-1-3 Umeda, Kita-ku", "Osaka", "530-0001", "JP"}}
	tags := []string{"first-order", "express", "fragile", "b2b", "promo", "repeat", "eco"}
	notes := []string{"Leave at the door, please.", "Ring twice (flat \"B\")", "Gift wrap & card: <Happy birthday!>",
		"Deliver after 6 pm\nCall ahead", "Bitte beim Nachbarn abgeben."}
	zones := []*time.Location{time.UTC, time.UTC, time.UTC, time.FixedZone("CET", 3600), time.FixedZone("", -5*3600)}
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).Unix()
	when := func() time.Time {
		t := time.Unix(base+rng.Int64N(90*86400), 0)
		switch rng.IntN(3) { // precision as sources give it: s, ms, ns
		case 1:
			t = t.Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
		case 2:
			t = t.Add(time.Duration(rng.IntN(1e9)))
		}
		return t.In(zones[rng.IntN(len(zones))])
	}
	out := make([]orderrec.Order, n)
	for i := range out {
		o := &out[i]
		o.ID = 4_200_000_000 + int64(i)*7919 + rng.Int64N(7919)
		o.Placed = when()
		o.Updated = o.Placed.Add(time.Duration(rng.IntN(3*86400)) * time.Second)
		o.Status = pick(statuses)
		name := pick(names)
		o.Customer = orderrec.Customer{
			ID:      100_000 + rng.Int64N(900_000),
			Name:    name,
			Email:   fmt.Sprintf("customer%d@example.com", rng.IntN(100_000)),
			Since:   time.Unix(base-rng.Int64N(5*365*86400), 0).UTC(),
			Loyalty: rng.IntN(5000),
			VIP:     rng.IntN(10) == 0,
		}
		if rng.IntN(4) != 0 { // a quarter are picked up: no address
			a := addresses[rng.IntN(len(addresses))]
			o.ShipTo = &orderrec.Address{Street: a[0], City: a[1], Zip: a[2], Country: a[3]}
		}
		var cents int
		for range 1 + rng.IntN(5) {
			item := orderrec.LineItem{
				SKU:      fmt.Sprintf("SKU-%06d", rng.IntN(1_000_000)),
				Name:     pick(products),
				Quantity: 1 + rng.IntN(4),
				Price:    float64(99+rng.IntN(30000)) / 100,
			}
			if rng.IntN(5) == 0 {
				item.Discount = float64(5 * (1 + rng.IntN(6)))
			}
			cents += item.Quantity * int(item.Price*100+0.5)
			o.Items = append(o.Items, item)
		}
		o.Total = float64(cents) / 100
		if rng.IntN(5) < 3 {
			o.Attributes = map[string]string{"channel": pick([]string{"web", "ios", "android"})}
			if rng.IntN(2) == 0 {
				o.Attributes["coupon"] = fmt.Sprintf("SPRING%d", 5*(1+rng.IntN(4)))
			}
			if rng.IntN(3) == 0 {
				o.Attributes["utm_source"] = pick([]string{"newsletter", "partner-blog", "search"})
			}
		}
		for range rng.IntN(4) {
			o.Tags = append(o.Tags, pick(tags))
		}
		o.Currency = pick([]string{"EUR", "EUR", "USD", "GBP", "JPY"})
		o.Paid = o.Status != "placed" && o.Status != "cancelled"
		o.Gift = rng.IntN(8) == 0
		if rng.IntN(6) == 0 {
			o.Note = pick(notes)
		}
		o.Attempts = int32(rng.IntN(3))
	}
	return out
}

// toMsgpOrder copies o into msgp's peer type.
func toMsgpOrder(o *orderrec.Order) msgporder.Order {
	m := msgporder.Order{
		ID: o.ID, Placed: o.Placed, Updated: o.Updated, Status: o.Status,
		Customer:   msgporder.Customer(o.Customer),
		Attributes: o.Attributes, Tags: o.Tags, Total: o.Total, Currency: o.Currency,
		Paid: o.Paid, Gift: o.Gift, Note: o.Note, Attempts: o.Attempts,
	}
	if o.ShipTo != nil {
		a := msgporder.Address(*o.ShipTo)
		m.ShipTo = &a
	}
	if o.Items != nil {
		m.Items = make([]msgporder.LineItem, len(o.Items))
		for i, item := range o.Items {
			m.Items[i] = msgporder.LineItem(item)
		}
	}
	return m
}

// fromMsgpOrder is toMsgpOrder's inverse.
func fromMsgpOrder(m *msgporder.Order) orderrec.Order {
	o := orderrec.Order{
		ID: m.ID, Placed: m.Placed, Updated: m.Updated, Status: m.Status,
		Customer:   orderrec.Customer(m.Customer),
		Attributes: m.Attributes, Tags: m.Tags, Total: m.Total, Currency: m.Currency,
		Paid: m.Paid, Gift: m.Gift, Note: m.Note, Attempts: m.Attempts,
	}
	if m.ShipTo != nil {
		a := orderrec.Address(*m.ShipTo)
		o.ShipTo = &a
	}
	if m.Items != nil {
		o.Items = make([]orderrec.LineItem, len(m.Items))
		for i, item := range m.Items {
			o.Items[i] = orderrec.LineItem(item)
		}
	}
	return o
}

// orderBytes is the mean size of the orders' encodings by enc.
func orderBytes(enc func(i int) []byte) int64 {
	var n int
	for i := range orders {
		n += len(enc(i))
	}
	return int64(n / len(orders))
}

func BenchmarkOrderBinaryEncode(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf, _ = orders[i%orderCount].AppendBinary(buf[:0])
		}
		b.SetBytes(orderBytes(func(i int) []byte { out, _ := orders[i].MarshalBinary(); return out }))
	})
	b.Run("codec=msgp", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf, _ = msgpOrders[i%orderCount].MarshalMsg(buf[:0])
		}
		b.SetBytes(orderBytes(func(i int) []byte { out, _ := msgpOrders[i].MarshalMsg(nil); return out }))
	})
}

func BenchmarkOrderBinaryDecode(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		data := make([][]byte, orderCount)
		for i := range data {
			data[i], _ = orders[i].MarshalBinary()
		}
		var out orderrec.Order
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if err := out.UnmarshalBinary(data[i%orderCount]); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(orderBytes(func(i int) []byte { return data[i] }))
	})
	b.Run("codec=msgp", func(b *testing.B) {
		data := make([][]byte, orderCount)
		for i := range data {
			data[i], _ = msgpOrders[i].MarshalMsg(nil)
		}
		var out msgporder.Order
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := out.UnmarshalMsg(data[i%orderCount]); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(orderBytes(func(i int) []byte { return data[i] }))
	})
	// Into a new Order each time, as streamgen's UnmarshalBinary decodes:
	// msgp decoding into the same value reuses its slices, map and
	// address, so a decoded order shares memory with the one before,
	// which a stream that keeps or passes on its records cannot allow.
	b.Run("codec=msgp_fresh", func(b *testing.B) {
		data := make([][]byte, orderCount)
		for i := range data {
			data[i], _ = msgpOrders[i].MarshalMsg(nil)
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			var out msgporder.Order
			if _, err := out.UnmarshalMsg(data[i%orderCount]); err != nil {
				b.Fatal(err)
			}
		}
		b.SetBytes(orderBytes(func(i int) []byte { return data[i] }))
	})
}

// BenchmarkOrderBinaryRoundTrip is encode then decode, the figure the
// binary codec's target is set on. streamgen's decoder always builds a
// new value (nothing shared with what the variable held before); msgp's
// reuses the slices, map and pointer of the value it decodes into, so it
// is measured both ways: into one value (codec=msgp) and into a new one
// each time (codec=msgp_fresh), which is what streamgen does.
func BenchmarkOrderBinaryRoundTrip(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		var out orderrec.Order
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf, _ = orders[i%orderCount].AppendBinary(buf[:0])
			if err := out.UnmarshalBinary(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=msgp", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		var out msgporder.Order
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf, _ = msgpOrders[i%orderCount].MarshalMsg(buf[:0])
			if _, err := out.UnmarshalMsg(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("codec=msgp_fresh", func(b *testing.B) {
		buf := make([]byte, 0, 1024)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf, _ = msgpOrders[i%orderCount].MarshalMsg(buf[:0])
			var out msgporder.Order
			if _, err := out.UnmarshalMsg(buf); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// orderSink keeps a benchmark's result alive, so that its allocation is
// not optimized away.
var orderSink []byte

// BenchmarkOrderJSONEncode appends to a reused buffer (streamgen) against
// json.Marshal, as BenchmarkJSONEncode does for the sensor record.
func BenchmarkOrderJSONEncode(b *testing.B) {
	b.Run("codec=streamgen", func(b *testing.B) {
		buf := make([]byte, 0, 2048)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			buf, _ = orders[i%orderCount].AppendJSON(buf[:0])
		}
		b.SetBytes(orderBytes(func(i int) []byte { out, _ := orders[i].MarshalJSON(); return out }))
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			json.Marshal(&plainOrders[i%orderCount])
		}
		b.SetBytes(orderBytes(func(i int) []byte { out, _ := json.Marshal(&plainOrders[i]); return out }))
	})
}

// BenchmarkOrderJSONMarshal is what json.Marshal and most users call: the
// generated MarshalJSON, which returns a new slice, against json.Marshal.
// codec=copy is the floor of any MarshalJSON: it copies each order's
// JSON, made beforehand, into a new slice of its length, the one
// allocation a result needs.
func BenchmarkOrderJSONMarshal(b *testing.B) {
	b.Run("codec=copy", func(b *testing.B) {
		made := make([][]byte, orderCount)
		for i := range made {
			made[i], _ = orders[i].MarshalJSON()
		}
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			orderSink = append([]byte(nil), made[i%orderCount]...)
		}
		b.SetBytes(orderBytes(func(i int) []byte { return made[i] }))
	})
	b.Run("codec=streamgen", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			orders[i%orderCount].MarshalJSON()
		}
		b.SetBytes(orderBytes(func(i int) []byte { out, _ := orders[i].MarshalJSON(); return out }))
	})
	b.Run("codec=encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			json.Marshal(&plainOrders[i%orderCount])
		}
		b.SetBytes(orderBytes(func(i int) []byte { out, _ := json.Marshal(&plainOrders[i]); return out }))
	})
}

// TestOrderBenchmarkInputsAgree checks that the peers encode the same
// orders, so that the benchmarks compare like with like: MarshalJSON
// writes what json.Marshal writes, byte for byte, and both binary codecs
// give back what they were given (msgp keeps a time's instant, not its
// zone: its times are compared as instants).
func TestOrderBenchmarkInputsAgree(t *testing.T) {
	var ships, attrs, notes, zones int
	for i := range orders {
		o := &orders[i]
		ours, err := o.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		theirs, _ := json.Marshal(&plainOrders[i])
		if !bytes.Equal(ours, theirs) {
			t.Fatalf("order %d: JSON differs:\n%s\n%s", i, ours, theirs)
		}
		bin, _ := o.MarshalBinary()
		var back orderrec.Order
		if err := back.UnmarshalBinary(bin); err != nil {
			t.Fatalf("order %d: binary: %v", i, err)
		}
		if want, got := orderJSON(o, false), orderJSON(&back, false); want != got || (o.Attributes == nil) != (back.Attributes == nil) {
			t.Fatalf("order %d: binary round trip:\n%s\n%s", i, got, want)
		}
		data, _ := msgpOrders[i].MarshalMsg(nil)
		var m msgporder.Order
		if _, err := m.UnmarshalMsg(data); err != nil {
			t.Fatalf("order %d: msgp: %v", i, err)
		}
		mback := fromMsgpOrder(&m)
		if want, got := orderJSON(o, true), orderJSON(&mback, true); want != got {
			t.Fatalf("order %d: msgp round trip:\n%s\n%s", i, got, want)
		}
		if o.ShipTo != nil {
			ships++
		}
		if o.Attributes != nil {
			attrs++
		}
		if o.Note != "" {
			notes++
		}
		if o.Placed.Location() != time.UTC {
			zones++
		}
	}
	// The branches the benchmarks are meant to vary do vary.
	if n := len(orders); ships == 0 || ships == n || attrs == 0 || attrs == n || notes == 0 || zones == 0 {
		t.Fatalf("orders vary too little: %d of %d shipped, %d with attributes, %d with notes, %d zoned",
			ships, n, attrs, n, zones)
	}
}

// orderJSON is encoding/json's encoding of o, with its times in UTC when
// utc is set.
func orderJSON(o *orderrec.Order, utc bool) string {
	p := plainOrder(*o)
	if utc {
		p.Placed, p.Updated, p.Customer.Since = p.Placed.UTC(), p.Updated.UTC(), p.Customer.Since.UTC()
	}
	out, err := json.Marshal(&p)
	if err != nil {
		panic(err)
	}
	return string(out)
}
