package typed_test

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Count clicks per user with mapGroupsWithState: the state of each user is
// kept in the query's checkpoint between batches, and the Update-mode sink
// gets each user's new count.
func ExampleMapGroupsWithState() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2) // at most 2 rows per batch
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clicks.Add(
		fixtures.Click{User: "ann", Time: t0},
		fixtures.Click{User: "bob", Time: t0.Add(time.Second)},
		fixtures.Click{User: "ann", Time: t0.Add(2 * time.Second)},
	)

	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
	sink := typed.NewMemorySink[fixtures.UserCount]()
	q, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), sink).
		OutputMode(typed.Update).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for batch, rows := range sink.Batches() {
		for _, r := range rows {
			fmt.Printf("batch %d: %s %d\n", batch, r.User, r.Count)
		}
	}
	// Unordered output:
	// batch 0: ann 1
	// batch 0: bob 1
	// batch 1: ann 2
}

// Sessions of clicks with flatMapGroupsWithState and an event-time
// timeout: a user's session ends when the watermark passes 30 seconds
// after their last click, and only then is its count emitted (Append
// mode: every row out is final). As in Spark, the watermark a batch uses
// is the one its previous batches reached, and a user with clicks in a
// batch does not time out in it. After the last click's batch moves the
// watermark, a batch without data runs at it (batch 9, where no session
// has ended), then FlushEventTime ends the input by moving the watermark
// past every timeout (batch 10).
func ExampleFlatMapGroupsWithState() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // a batch per click
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(user string, seconds int) fixtures.Click {
		return fixtures.Click{User: user, Time: t0.Add(time.Duration(seconds) * time.Second)}
	}
	clicks.Add(
		at("ann", 0), at("bob", 5), at("ann", 10), at("ann", 40),
		at("cat", 45), // the watermark is 40, past bob's timeout (35): his session ends
		at("bob", 50), // a new session for bob
		at("bob", 80),
		at("dan", 85), // the watermark is 80, past ann's (70) and cat's (75)
		at("ann", 90),
	)

	sessions := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
		c, _ := state.Get()
		if state.HasTimedOut() {
			emit(fixtures.UserCount{User: user, Count: c.Count})
			state.Remove()
			return nil
		}
		var last time.Time
		for r := range rows {
			c.Count++
			last = r.Time
		}
		state.Update(c)
		return state.SetTimeoutTimestamp(last.Add(30 * time.Second))
	}
	watermarked := typed.WithWatermark(typed.FromMemory(clicks), func(c *fixtures.Click) time.Time { return c.Time }, 0)
	byUser := typed.GroupByKey(watermarked, func(c *fixtures.Click) string { return c.User })
	sink := typed.NewMemorySink[fixtures.UserCount]()
	q, err := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Append, typed.EventTimeTimeout, sessions), sink).
		OutputMode(typed.Append).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for batch, rows := range sink.Batches() {
		for _, r := range rows {
			fmt.Printf("batch %d: %s, a session of %d clicks\n", batch, r.User, r.Count)
		}
	}
	// Unordered output:
	// batch 4: bob, a session of 1 clicks
	// batch 7: ann, a session of 3 clicks
	// batch 7: cat, a session of 1 clicks
	// batch 10: bob, a session of 2 clicks
	// batch 10: dan, a session of 1 clicks
	// batch 10: ann, a session of 1 clicks
}

// Write each batch's counts with ForeachBatch, as Spark's foreachBatch:
// here into a map keyed by user, which a batch given again (after a
// failure) overwrites with the same counts.
func ExampleForeachBatch() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clicks.Add(
		fixtures.Click{User: "ann", Time: t0},
		fixtures.Click{User: "bob", Time: t0.Add(time.Second)},
		fixtures.Click{User: "ann", Time: t0.Add(2 * time.Second)},
	)
	counts := map[string]int64{}
	sink := typed.ForeachBatch(func(ctx context.Context, batchID int64, rows []fixtures.UserCount) error {
		for _, r := range rows {
			counts[r.User] = r.Count
		}
		fmt.Printf("batch %d: %d rows\n", batchID, len(rows))
		return nil
	})
	byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
	q, err := typed.WriteTo(typed.AggregateByKey(byUser, typed.Count[fixtures.Click](), func(user string, n int64) fixtures.UserCount {
		return fixtures.UserCount{User: user, Count: n}
	}), sink).Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(counts["ann"], counts["bob"])
	// Output:
	// batch 0: 2 rows
	// batch 1: 1 rows
	// 2 1
}

// Join two tables kept up to date by streams, as Kafka Streams joins two
// KTables: the last page each user visited, and each user's count, where
// a count of zero removes the user's row. Each update that changes a
// user's row of the join writes the change; an Inner join's row goes when
// either table's row does.
func ExampleJoinTables() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	pages := typed.NewMemoryStream[fixtures.Click]("pages", 0)
	pages.Add(
		fixtures.Click{User: "ann", Time: t0, Page: "home"},
		fixtures.Click{User: "bob", Time: t0.Add(time.Second), Page: "cart"},
		fixtures.Click{User: "ann", Time: t0.Add(3 * time.Second), Page: "shop"},
	)
	counts := typed.NewMemoryStream[fixtures.UserCount]("counts", 0)
	counts.Add(
		fixtures.UserCount{User: "ann", Count: 3, Last: t0.Add(2 * time.Second)},
		fixtures.UserCount{User: "bob", Count: 1, Last: t0.Add(2 * time.Second)},
		fixtures.UserCount{User: "bob", Count: 0, Last: t0.Add(4 * time.Second)},
	)
	lastPage := typed.TableUpdates(typed.WithWatermark(typed.FromMemory(pages), func(c *fixtures.Click) time.Time { return c.Time }, 0),
		func(c *fixtures.Click) string { return c.User }, nil)
	count := typed.TableUpdates(typed.WithWatermark(typed.FromMemory(counts), func(c *fixtures.UserCount) time.Time { return c.Last }, 0),
		func(c *fixtures.UserCount) string { return c.User }, func(c *fixtures.UserCount) bool { return c.Count == 0 })
	joined := typed.JoinTables(lastPage, count, typed.Inner, func(c typed.TableChange[string, fixtures.Click, fixtures.UserCount]) string {
		if c.Removed {
			return fmt.Sprintf("%s: removed (was %s, %d)", c.Key, c.Previous.Left.Page, c.Previous.Right.Count)
		}
		return fmt.Sprintf("%s: %s, %d", c.Key, c.Left.Page, c.Right.Count)
	})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(joined, sink).Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Unordered output:
	// ann: home, 3
	// ann: shop, 3
	// bob: cart, 1
	// bob: removed (was cart, 1)
}

// Enrich a table of orders with a table of products on each order's
// product, as Kafka Streams' foreign-key join: an update of a product
// reaches every order of it, and an order that moves to another product
// takes that one's row.
func ExampleJoinTablesByForeignKey() {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// Orders: User is the order, Page its product.
	orders := typed.NewMemoryStream[fixtures.Click]("orders", 0)
	// Products: User is the product, Page its name.
	products := typed.NewMemoryStream[fixtures.Click]("products", 0)
	products.Add(fixtures.Click{User: "p1", Page: "lamp", Time: t0}, fixtures.Click{User: "p2", Page: "desk", Time: t0})
	orders.Add(fixtures.Click{User: "o1", Page: "p1", Time: t0}, fixtures.Click{User: "o2", Page: "p1", Time: t0})
	key := func(c *fixtures.Click) string { return c.User }
	enriched := typed.JoinTablesByForeignKey(
		typed.TableUpdates(typed.FromMemory(orders), key, nil),
		typed.TableUpdates(typed.FromMemory(products), key, nil),
		func(order *fixtures.Click) string { return order.Page }, typed.Inner,
		func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string {
			return c.Key + ": " + c.Right.Page
		})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(enriched, sink).Start(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Stop()
	seen := 0
	step := func(add func()) {
		add()
		if err := q.ProcessAllAvailable(context.Background()); err != nil {
			fmt.Println(err)
			return
		}
		rows := sink.Rows()
		fmt.Println(rows[seen:])
		seen = len(rows)
	}
	step(func() {})
	step(func() { products.Add(fixtures.Click{User: "p1", Page: "brass lamp", Time: t0.Add(time.Second)}) })
	step(func() { orders.Add(fixtures.Click{User: "o2", Page: "p2", Time: t0.Add(2 * time.Second)}) })
	// Output:
	// [o1: lamp o2: lamp]
	// [o1: brass lamp o2: brass lamp]
	// [o2: desk]
}

// Count each user's clicks within 5 seconds of one another, in the
// windows of Kafka Streams' sliding windows (its documentation's example:
// rows at 8 s, 9.2 s and 12.4 s), each written once the watermark closes
// it. A Window is half-open: [3 s, 8.001 s) is Kafka Streams' [3000;8000].
func ExampleTimeDifference() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	for _, ms := range []int64{8000, 9200, 12400} {
		clicks.Add(fixtures.Click{User: "A", Time: time.UnixMilli(ms).UTC()})
	}
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	windows := typed.GroupByWindow(typed.WithWatermark(typed.FromMemory(clicks), clickTime, 0), clickTime, typed.TimeDifference(5*time.Second),
		func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateWindows(windows, typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) string {
		return fmt.Sprintf("%s [%d;%d] %d", user, w.Start.UnixMilli(), w.End.UnixMilli()-1, n)
	})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(counts, sink).OutputMode(typed.Append).Start(context.Background(),
		runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Output:
	// A [3000;8000] 1
	// A [4200;9200] 2
	// A [7400;12400] 3
	// A [8001;13001] 2
	// A [9201;14201] 1
}

// The distinct pages each user visits per hour, as Spark's
// approx_count_distinct(page) grouped by window(time, "1 hour") and user:
// a HyperLogLog sketch per window and user, merged across batches, that
// counts a few values exactly and many within about 5%.
func ExampleApproxCountDistinct() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2) // two clicks a batch
	hour := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i, page := range []string{"home", "cart", "home", "help", "cart", "home"} {
		clicks.Add(fixtures.Click{User: "A", Time: hour.Add(time.Duration(i) * time.Minute), Page: page})
	}
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	windows := typed.GroupByWindow(typed.WithWatermark(typed.FromMemory(clicks), clickTime, time.Minute), clickTime,
		typed.Tumbling(time.Hour), func(c *fixtures.Click) string { return c.User })
	pages := typed.AggregateWindows(windows, typed.ApproxCountDistinct(func(c *fixtures.Click) string { return c.Page }, 0.05),
		func(w typed.Window, user string, n int64) string {
			return fmt.Sprintf("%s %s: %d pages", user, w.Start.Format("15:04"), n)
		})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(pages, sink).OutputMode(typed.Append).Start(context.Background(),
		runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Output:
	// A 09:00: 3 pages
}

// Each device's median and 99th-percentile delivery delay (from a
// reading's creation to its arrival) per minute, as Spark's
// percentile_approx(delay, array(0.5, 0.99), 1000) grouped by
// window(time, "1 minute") and device: a quantile summary per window and
// device, merged across batches, within 0.1% of each rank.
func ExampleApproxPercentile() {
	readings := typed.NewMemoryStream[sensor.Event]("readings", 50) // 50 readings a batch
	minute := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i := range 200 {
		created := minute.Add(time.Duration(i) * 250 * time.Millisecond)
		delay := time.Duration(10+i%10*5) * time.Millisecond // 10 to 55 ms
		if i%50 == 49 {
			delay = 900 * time.Millisecond // one reading in 50 is slow
		}
		readings.Add(sensor.Event{Device: "d1", CreationTime: created.UnixNano(), ArrivalTime: created.Add(delay).UnixMilli()})
	}
	created := func(e *sensor.Event) time.Time { return time.Unix(0, e.CreationTime) }
	delayMillis := func(e *sensor.Event) float64 { return float64(e.ArrivalTime - e.CreationTime/1e6) }
	windows := typed.GroupByWindow(typed.WithWatermark(typed.FromMemory(readings), created, time.Second), created,
		typed.Tumbling(time.Minute), func(e *sensor.Event) string { return e.Device })
	delays := typed.AggregateWindows(windows, typed.ApproxPercentile(delayMillis, []float64{0.5, 0.99}, 1000),
		func(w typed.Window, device string, p []float64) string {
			return fmt.Sprintf("%s %s: p50 %v ms, p99 %v ms", device, w.Start.UTC().Format("15:04"), p[0], p[1])
		})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(delays, sink).OutputMode(typed.Append).Start(context.Background(),
		runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Output:
	// d1 09:00: p50 30 ms, p99 900 ms
}

// Each device's two strongest readings per minute, as Flink's Window
// Top-N (ROW_NUMBER() OVER (PARTITION BY window_start, window_end,
// device ORDER BY x DESC) <= 2): written once the minute closes, best
// first; of readings alike, the first to come.
func ExampleTopN() {
	readings := typed.NewMemoryStream[sensor.Event]("readings", 3) // three readings a batch
	minute := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i, x := range []float64{0.3, 1.7, 0.9, 1.7, 0.2, 2.5, 0.4} {
		readings.Add(sensor.Event{Device: "d1", Index: int64(i), X: x, CreationTime: minute.Add(time.Duration(i) * 8 * time.Second).UnixNano()})
	}
	created := func(e *sensor.Event) time.Time { return time.Unix(0, e.CreationTime) }
	windows := typed.GroupByWindow(typed.WithWatermark(typed.FromMemory(readings), created, time.Second), created,
		typed.Tumbling(time.Minute), func(e *sensor.Event) string { return e.Device })
	strongest := typed.AggregateWindows(windows, typed.TopN(2, func(a, b *sensor.Event) bool { return a.X > b.X }),
		func(w typed.Window, device string, top []sensor.Event) []string {
			var rows []string
			for rank, e := range top {
				rows = append(rows, fmt.Sprintf("%s %s #%d: reading %d, x %v", device, w.Start.UTC().Format("15:04"), rank+1, e.Index, e.X))
			}
			return rows
		})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(typed.FlatMap(strongest, func(rows *[]string) []string { return *rows }), sink).
		OutputMode(typed.Append).Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Output:
	// d1 09:00 #1: reading 5, x 2.5
	// d1 09:00 #2: reading 1, x 1.7
}

// Each user's clicks of the day so far, written every 6 hours, as
// Flink's CUMULATE(TABLE clicks, DESCRIPTOR(time), INTERVAL '6' HOUR,
// INTERVAL '1' DAY): every window starts with its day, and one ends every
// 6 hours, each written once the watermark closes it; a click counts in
// each window of its day that ends after it. A window with no click
// (the second day's first) is not written.
func ExampleCumulate() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for _, h := range []int{1, 2, 9, 23, 31} {
		clicks.Add(fixtures.Click{User: "A", Time: day.Add(time.Duration(h) * time.Hour)})
	}
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	windows := typed.GroupByWindow(typed.WithWatermark(typed.FromMemory(clicks), clickTime, time.Hour), clickTime,
		typed.Cumulate(6*time.Hour, 24*time.Hour), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateWindows(windows, typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) string {
		return fmt.Sprintf("%s %s to %s: %d", user, w.Start.Format("Jan 2 15:04"), w.End.Format("Jan 2 15:04"), n)
	})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(counts, sink).OutputMode(typed.Append).Start(context.Background(),
		runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Output:
	// A Mar 1 00:00 to Mar 1 06:00: 2
	// A Mar 1 00:00 to Mar 1 12:00: 3
	// A Mar 1 00:00 to Mar 1 18:00: 3
	// A Mar 1 00:00 to Mar 2 00:00: 4
	// A Mar 2 00:00 to Mar 2 12:00: 1
	// A Mar 2 00:00 to Mar 2 18:00: 1
	// A Mar 2 00:00 to Mar 3 00:00: 1
}

// A running count of each user's clicks in the last 10 seconds, written
// with every click, as Flink's COUNT(*) OVER (PARTITION BY user ORDER BY
// time RANGE BETWEEN INTERVAL '10' SECOND PRECEDING AND CURRENT ROW): a
// click is written once the watermark reaches it, with the clicks of its
// user from 10 s before it up to it (the click at 0 s is 10 s before the
// one at 10 s, and counts; two clicks at 12 s count each other).
func ExampleAggregateOver() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	for _, s := range []int64{0, 4, 10, 12, 12, 30} {
		clicks.Add(fixtures.Click{User: "A", Time: time.Unix(1_700_000_000+s, 0).UTC(), Page: fmt.Sprint("p", s)})
	}
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	byUser := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(clicks), clickTime, 5*time.Second), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateOver(byUser, clickTime, typed.RangePreceding(10*time.Second), typed.Count[fixtures.Click](),
		func(user string, c *fixtures.Click, n int64) string {
			return fmt.Sprintf("%s %s at %ds: %d in the last 10 s", user, c.Page, c.Time.Unix()-1_700_000_000, n)
		})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(counts, sink).Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Output:
	// A p0 at 0s: 1 in the last 10 s
	// A p4 at 4s: 2 in the last 10 s
	// A p10 at 10s: 3 in the last 10 s
	// A p12 at 12s: 4 in the last 10 s
	// A p12 at 12s: 4 in the last 10 s
	// A p30 at 30s: 1 in the last 10 s
}

// Write one count to two sinks in one query, as a Kafka Streams topology
// writes to two topics: every user's count to one, and the users who
// reach three clicks, as an alert of another type, to the other. The
// count runs once, with one state, and each sink gets the rows of every
// batch.
func ExampleWriteAll() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, user := range []string{"ann", "bob", "ann", "ann", "bob"} {
		clicks.Add(fixtures.Click{User: user, Time: t0.Add(time.Duration(i) * time.Second)})
	}
	byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateByKey(byUser, typed.Count[fixtures.Click](), func(user string, n int64) fixtures.UserCount {
		return fixtures.UserCount{User: user, Count: n}
	})
	alerts := typed.Map(typed.Filter(counts, func(c *fixtures.UserCount) bool { return c.Count == 3 }),
		func(c *fixtures.UserCount) string { return c.User + " clicked 3 times" })
	countSink, alertSink := typed.NewMemorySink[fixtures.UserCount](), typed.NewMemorySink[string]()
	q, err := typed.WriteAll(typed.WriteTo(counts, countSink), typed.WriteTo(alerts, alertSink)).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for batch, rows := range countSink.Batches() {
		for _, r := range rows {
			fmt.Printf("batch %d: %s %d\n", batch, r.User, r.Count)
		}
	}
	for batch, rows := range alertSink.Batches() {
		for _, r := range rows {
			fmt.Printf("batch %d alert: %s\n", batch, r)
		}
	}
	// Unordered output:
	// batch 0: ann 1
	// batch 0: bob 1
	// batch 1: ann 3
	// batch 2: bob 2
	// batch 1 alert: ann clicked 3 times
}

// Look up each click's user in a service, up to 8 calls at once, as
// Flink's async I/O: the rows come out in the order of the clicks, and
// the count per country after the lookup has them all in its batch.
func ExampleMapAsync() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, user := range []string{"ann", "bob", "ann", "cy"} {
		clicks.Add(fixtures.Click{User: user, Time: t0.Add(time.Duration(i) * time.Second)})
	}
	// countryOf stands for a call to another service; it honours ctx.
	countryOf := func(ctx context.Context, c fixtures.Click) (string, error) {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		return map[string]string{"ann": "fr", "bob": "de", "cy": "fr"}[c.User], nil
	}
	countries := typed.MapAsync(typed.FromMemory(clicks), countryOf, 8)
	byCountry := typed.GroupByKey(countries, func(country *string) string { return *country })
	sink := typed.NewMemorySink[fixtures.UserCount]()
	q, err := typed.WriteTo(typed.AggregateByKey(byCountry, typed.Count[string](), func(country string, n int64) fixtures.UserCount {
		return fixtures.UserCount{User: country, Count: n}
	}), sink).Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, rows := range sink.Batches() {
		for _, r := range rows {
			fmt.Printf("%s: %d clicks\n", r.User, r.Count)
		}
	}
	// Unordered output:
	// fr: 3 clicks
	// de: 1 clicks
}
