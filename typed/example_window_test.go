package typed_test

import (
	"context"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Clicks per user in 10-minute windows of event time, as Spark's
// groupBy(window(time, "10 minutes"), user).count() with a watermark 5
// minutes behind the latest click: in Append mode each window is written
// once, when the watermark passes its end. bob's click at 9:03 comes
// after the watermark has passed 9:10 (the click at 9:16 took it to
// 9:11), so its window is written already: it is late and dropped
// (LateRows would have it). FlushEventTime closes the windows still open
// at the end.
func ExampleAggregateWindows() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // a batch per click
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(user string, hh, mm int) fixtures.Click {
		return fixtures.Click{User: user, Time: day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)}
	}
	clicks.Add(at("ann", 9, 1), at("bob", 9, 4), at("ann", 9, 8), at("ann", 9, 16), at("ann", 9, 30), at("bob", 9, 3), at("bob", 9, 33))
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	windows := typed.GroupByWindow(typed.WithWatermark(typed.FromMemory(clicks), clickTime, 5*time.Minute), clickTime,
		typed.Tumbling(10*time.Minute), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateWindows(windows, typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) string {
		return fmt.Sprintf("%s %s–%s: %d", user, w.Start.Format("15:04"), w.End.Format("15:04"), n)
	})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(counts, sink).OutputMode(typed.Append).
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
	// ann 09:00–09:10: 2
	// bob 09:00–09:10: 1
	// ann 09:10–09:20: 1
	// ann 09:30–09:40: 1
	// bob 09:30–09:40: 1
}

// Session windows, as Spark's session_window(time, "30 minutes"): a
// user's session takes each click within 30 minutes of another, and
// sessions a click bridges merge into one. Each session is written once
// the watermark passes its end (its last click plus the gap).
func ExampleSession() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(user string, hh, mm int) fixtures.Click {
		return fixtures.Click{User: user, Time: day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)}
	}
	clicks.Add(
		at("ann", 9, 0), at("ann", 9, 50), // two sessions, until a click comes between them
		at("ann", 9, 25), // within 30 minutes of both: one session of three
		at("ann", 11, 0), at("bob", 9, 10),
	)
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	sessions := typed.GroupByWindow(typed.WithWatermark(typed.FromMemory(clicks), clickTime, time.Hour), clickTime,
		typed.Session(30*time.Minute), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateWindows(sessions, typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) string {
		return fmt.Sprintf("%s %s–%s, clicks: %d", user, w.Start.Format("15:04"), w.End.Format("15:04"), n)
	})
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(counts, sink).OutputMode(typed.Append).
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
	// ann 09:00–10:20, clicks: 3
	// bob 09:10–09:40, clicks: 1
	// ann 11:00–11:30, clicks: 1
}
