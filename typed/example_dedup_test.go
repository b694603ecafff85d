package typed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Drop resent clicks: a click of the same user at the same event time is
// a copy, as Spark's dropDuplicates("user", "time") with a watermark on
// "time". A user and time is forgotten once the watermark passes the
// time; a click at or before the watermark is late, and dropped.
func ExampleDropDuplicatesWithEventTime() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 3) // at most 3 rows per batch
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sec := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	clicks.Add(
		fixtures.Click{User: "ann", Time: sec(0), Page: "home"},
		fixtures.Click{User: "ann", Time: sec(0), Page: "home (resent)"}, // a copy in the same batch
		fixtures.Click{User: "bob", Time: sec(20), Page: "cart"},
		fixtures.Click{User: "bob", Time: sec(20), Page: "cart (resent)"}, // a copy of the batch before
		fixtures.Click{User: "ann", Time: sec(21), Page: "shop"},          // another time: kept
		fixtures.Click{User: "ann", Time: sec(0), Page: "home (late)"},    // at or before the watermark (10 s)
	)
	withTime := typed.WithWatermark(typed.FromMemory(clicks), func(c *fixtures.Click) time.Time { return c.Time }, 10*time.Second)
	distinct := typed.DropDuplicatesWithEventTime(withTime, func(c *fixtures.Click) string { return c.User })
	sink := typed.NewMemorySink[fixtures.Click]()
	q, err := typed.WriteTo(distinct, sink).Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for batch, rows := range sink.Batches() {
		for _, c := range rows {
			fmt.Printf("batch %d: %s %s\n", batch, c.User, c.Page)
		}
	}
	// Unordered output:
	// batch 0: ann home
	// batch 0: bob cart
	// batch 1: ann shop
}
