package typed_test

import (
	"context"
	"fmt"
	"iter"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestProcessAllAvailable: a running query (the default trigger), given
// rows a few at a time, has after each ProcessAllAvailable written every
// window its rows close, the last of them in a batch without data that
// the watermark's move asked for, as a plain loop closes them: every
// window that ends at or before the latest event time read (a watermark
// with no delay).
func TestProcessAllAvailable(t *testing.T) {
	in := orderedClicks(120)
	for _, perBatch := range []int{0, 3} {
		t.Run(fmt.Sprint("rows-per-batch=", perBatch), func(t *testing.T) {
			clicks := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			counts := typed.AggregateWindows(typed.GroupByWindow(watermarked(typed.FromMemory(clicks), 0), clickTime, typed.Tumbling(time.Minute),
				func(c *fixtures.Click) string { return c.User }), typed.Count[fixtures.Click](), countRow)
			sink := newSink[windowCount]()
			q, err := typed.WriteTo(counts, sink).OutputMode(typed.Append).Start(t.Context(), newCheckpoint().opts()...)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Stop()
			for round, part := range [][]fixtures.Click{in[:50], in[50:51], in[51:]} {
				clicks.Add(part...)
				if err := q.ProcessAllAvailable(t.Context()); err != nil {
					t.Fatal(err)
				}
				latest := part[len(part)-1].Time
				want := map[string]float64{}
				for _, c := range in {
					start := c.Time.Truncate(time.Minute).UTC()
					if end := start.Add(time.Minute); !end.After(latest) {
						want[windowCount{Window: typed.Window{Start: start, End: end}, User: c.User}.id()]++
					}
				}
				sameTable(t, fmt.Sprintf("round %d", round), writtenOnce(t, sink.snapshot()), want)
			}
			if err := q.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := q.ProcessAllAvailable(t.Context()); err != nil {
				t.Fatalf("a query stopped cleanly: %v", err)
			}
		})
	}
}

// TestProcessAllAvailableFails: a query that fails ends
// ProcessAllAvailable with its error.
func TestProcessAllAvailableFails(t *testing.T) {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	pages := typed.Map(typed.FromMemory(clicks), func(c *fixtures.Click) string {
		if c.Page == "boom" {
			panic("a page called boom")
		}
		return c.Page
	})
	q, err := typed.WriteTo(pages, newSink[string]()).Start(t.Context(), newCheckpoint().opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	clicks.Add(fixtures.Click{User: "ann", Page: "home", Time: at(0)}, fixtures.Click{User: "ann", Page: "boom", Time: at(1)})
	if err := q.ProcessAllAvailable(context.Background()); err == nil || !strings.Contains(err.Error(), "a page called boom") {
		t.Fatalf("ProcessAllAvailable: %v, want the query's error", err)
	}
}

// TestProcessAllAvailableWithProcessingTimeTimeouts: with a ProcessingTime
// trigger, an operator with processing-time timeouts asks for a batch
// without data at every trigger; ProcessAllAvailable still returns once
// the rows are counted, as nothing else waits.
func TestProcessAllAvailableWithProcessingTimeTimeouts(t *testing.T) {
	input := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		if err := state.SetTimeoutDuration(time.Hour); err != nil {
			return fixtures.UserCount{}, err
		}
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	byUser := typed.GroupByKey(typed.FromMemory(input), func(c *fixtures.Click) string { return c.User })
	sink := newSink[fixtures.UserCount]()
	q, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.ProcessingTimeTimeout, count), sink).
		Start(t.Context(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(time.Millisecond)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	in := clicks(30, 3)
	want := map[string]int64{}
	for _, c := range in {
		want[c.User]++
	}
	input.Add(in...)
	// A guard, not a measure: without the fix the call never returns.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := q.ProcessAllAvailable(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range sink.rows() {
		got[r.User] = r.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}
