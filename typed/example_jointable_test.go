package typed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// A stream-static join, as Spark's join of a stream with a static
// Dataset: each click joined with its page's title from a table held in
// memory, left outer, so that a click on a page the table lacks is
// written with Right nil. The join keeps no state and needs no
// watermark.
func ExampleJoinTable() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	clicks.Add(
		fixtures.Click{User: "ann", Time: t0, Page: "/"},
		fixtures.Click{User: "bob", Time: t0, Page: "/cart"},
		fixtures.Click{User: "ann", Time: t0, Page: "/gone"},
	)
	titles := typed.TableFromMap(map[string]string{"/": "Home", "/cart": "Your cart"})
	joined := typed.JoinTable(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.Page }, titles, typed.LeftOuter,
		func(j typed.Joined[string, fixtures.Click, string]) string {
			if j.Right == nil {
				return fmt.Sprintf("%s on %s (no title)", j.Left.User, j.Key)
			}
			return fmt.Sprintf("%s on %s", j.Left.User, *j.Right)
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
	// Output:
	// ann on Home
	// bob on Your cart
	// ann on /gone (no title)
}

// A stream-table join, as Kafka Streams' join of a KStream with a
// versioned KTable: each purchase joined with its user's loyalty points
// as they were at the purchase's event time (AsOf), whatever order the
// two inputs are read in. The table is made of a stream of updates per
// key, such as a compacted topic, its versions kept in state by event
// time; an update writes nothing. With AsOf(grace) a purchase waits
// until the watermark is past its time plus the grace, so that the
// table's updates up to its time have come; FlushEventTime ends the
// inputs.
func ExampleJoinUpdates() {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	purchases := typed.NewMemoryStream[fixtures.Click]("purchases", 0)
	purchases.Add(
		fixtures.Click{User: "ann", Time: t0.Add(1 * time.Minute), Page: "shoes"},
		fixtures.Click{User: "ann", Time: t0.Add(5 * time.Minute), Page: "hats"},
		fixtures.Click{User: "bob", Time: t0.Add(2 * time.Minute), Page: "bags"},
	)
	// The points of each user: ann's rise to 120 at 9:03.
	tiers := typed.NewMemoryStream[fixtures.UserCount]("tiers", 0)
	tiers.Add(
		fixtures.UserCount{User: "ann", Count: 40, Last: t0},
		fixtures.UserCount{User: "ann", Count: 120, Last: t0.Add(3 * time.Minute)},
	)
	byUser := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(purchases), func(c *fixtures.Click) time.Time { return c.Time }, time.Minute),
		func(c *fixtures.Click) string { return c.User })
	table := typed.TableUpdates(typed.WithWatermark(typed.FromMemory(tiers), func(u *fixtures.UserCount) time.Time { return u.Last }, time.Minute),
		func(u *fixtures.UserCount) string { return u.User }, nil)
	joined := typed.JoinUpdates(byUser, table, typed.LeftOuter, func(j typed.Joined[string, fixtures.Click, fixtures.UserCount]) string {
		if j.Right == nil {
			return fmt.Sprintf("%s bought %s at %s with no points", j.Key, j.Left.Page, j.Left.Time.Format("15:04"))
		}
		return fmt.Sprintf("%s bought %s at %s with %d points", j.Key, j.Left.Page, j.Left.Time.Format("15:04"), j.Right.Count)
	}, typed.AsOf(2*time.Minute))
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(joined, sink).OutputMode(typed.Append).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
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
	// ann bought shoes at 09:01 with 40 points
	// ann bought hats at 09:05 with 120 points
	// bob bought bags at 09:02 with no points
}
