package typed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// A stream-stream join, as Spark's join of two streaming Datasets with
// watermarks: each page a user views joined with what the user bought
// within the 10 minutes after it (view time between purchase time - 10
// min and purchase time), left outer, so that a view with no purchase is
// written too, padded (its Right nil), once the watermark shows no
// purchase can come for it. Each side keeps its rows in state until the
// watermark passes the condition's bound; FlushEventTime ends both
// inputs at the end.
func ExampleJoin() {
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(user, page string, hh, mm int) fixtures.Click {
		return fixtures.Click{User: user, Page: page, Time: day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)}
	}
	views := typed.NewMemoryStream[fixtures.Click]("views", 0)
	views.Add(at("ann", "shoes", 9, 0), at("bob", "hats", 9, 2), at("ann", "bags", 9, 30))
	purchases := typed.NewMemoryStream[fixtures.Click]("purchases", 0)
	purchases.Add(at("ann", "shoes", 9, 5), at("ann", "bags", 9, 50)) // the bags 20 minutes after their view

	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	user := func(c *fixtures.Click) string { return c.User }
	byUser := func(m *typed.MemoryStream[fixtures.Click]) typed.KeyedStream[string, fixtures.Click] {
		return typed.GroupByKey(typed.WithWatermark(typed.FromMemory(m), clickTime, 5*time.Minute), user)
	}
	joined := typed.Join(byUser(views), byUser(purchases), typed.LeftOuter,
		func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
			seen := fmt.Sprintf("%s viewed %s at %s", j.Key, j.Left.Page, j.Left.Time.Format("15:04"))
			if j.Right == nil {
				return seen + ", bought nothing within 10 minutes"
			}
			return fmt.Sprintf("%s, bought %s at %s", seen, j.Right.Page, j.Right.Time.Format("15:04"))
		},
		typed.JoinWithin(typed.TimeBetween(-10*time.Minute, 0)))
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
	// ann viewed shoes at 09:00, bought shoes at 09:05
	// bob viewed hats at 09:02, bought nothing within 10 minutes
	// ann viewed bags at 09:30, bought nothing within 10 minutes
}
