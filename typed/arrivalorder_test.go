package typed_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// windowsOf returns the windows of each kind that cover t, from their
// definitions: a sliding window of size starts at each multiple of slide
// after t-size up to t; a cumulative window of a period of size starts
// with the period that holds t and ends at each multiple of step after
// t up to the period's end.
func windowsOf(kind string, t time.Time, size, step time.Duration) []typed.Window {
	var out []typed.Window
	switch kind {
	case "sliding":
		for start := t.Truncate(step); start.After(t.Add(-size)); start = start.Add(-step) {
			out = append(out, typed.Window{Start: start.UTC(), End: start.Add(size).UTC()})
		}
	case "cumulate":
		period := t.Truncate(size)
		for end := period.Add(step); !end.After(period.Add(size)); end = end.Add(step) {
			if end.After(t) {
				out = append(out, typed.Window{Start: period.UTC(), End: end.UTC()})
			}
		}
	}
	return out
}

// TestArrivalOrderOverManyWindows: Reduce, CollectList and CollectSet
// over sliding and cumulative windows fold each window's rows in the
// order they came, as over tumbling windows (Kafka Streams' reduce over
// hopping windows folds each record into each of its windows as it
// comes), in Append and Update mode, under batch splits and a restart.
// The input brings copies of earlier clicks 14 to 21 seconds late, so a
// window's rows come out of event-time order across the 30-second slices
// that the windows of an order-blind aggregator are kept by (where each
// window merged its slices in order of time, a copy was folded in
// before the later clicks that came before it).
func TestArrivalOrderOverManyWindows(t *testing.T) {
	in := copiedClicks(300)
	const size, step = 2 * time.Minute, 30 * time.Second
	for _, kind := range []string{"sliding", "cumulate"} {
		windows := typed.Sliding(size, step)
		if kind == "cumulate" {
			windows = typed.Cumulate(step, size)
		}
		// Each row goes to each of its windows, as it comes.
		var exploded []fixtures.Click
		var group []string
		for _, c := range in {
			for _, w := range windowsOf(kind, c.Time, size, step) {
				exploded = append(exploded, c)
				group = append(group, windowCount{Window: w, User: c.User}.id())
			}
		}
		t.Run(kind+"/Reduce", func(t *testing.T) {
			want := map[string]float64{}
			folded := map[string]fixtures.Click{}
			for i, c := range exploded {
				if v, ok := folded[group[i]]; ok {
					folded[group[i]] = joinPages(v, c)
				} else {
					folded[group[i]] = c
				}
			}
			for g, v := range folded {
				want[g+" "+v.Page] = float64(v.Time.Unix())
			}
			build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
				ws := typed.GroupByWindow(s, clickTime, windows, func(c *fixtures.Click) string { return c.User })
				return typed.AggregateWindows(ws, typed.Reduce(joinPages), func(w typed.Window, user string, v fixtures.Click) windowCount {
					return windowCount{Window: w, User: user + " " + v.Page, Value: float64(v.Time.Unix())}
				})
			}
			for _, perBatch := range []int{0, 7, 40} {
				sameTable(t, fmt.Sprintf("append, %d per batch", perBatch), appendedWindows(t, in, perBatch, build), want)
				sameTable(t, fmt.Sprintf("update, %d per batch", perBatch), latestReduced(t, in, perBatch, build), want)
			}
		})
		for _, tc := range []struct {
			name string
			agg  typed.Aggregator[fixtures.Click, typed.RowsAcc, []fixtures.Click]
			set  bool
		}{
			{"CollectList", typed.CollectList[fixtures.Click](), false},
			{"CollectSet", typed.CollectSet[fixtures.Click](), true},
		} {
			t.Run(kind+"/"+tc.name, func(t *testing.T) {
				collected := map[string][]fixtures.Click{}
				for i, c := range exploded {
					if tc.set && slices.Contains(collected[group[i]], c) {
						continue
					}
					collected[group[i]] = append(collected[group[i]], c)
				}
				want := map[string]float64{}
				for g, clicks := range collected {
					for rank, c := range clicks {
						want[fmt.Sprintf("%s#%d", g, rank)] = float64(c.Time.Unix())
					}
				}
				build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
					ws := typed.GroupByWindow(s, clickTime, windows, func(c *fixtures.Click) string { return c.User })
					return typed.FlatMap(typed.AggregateWindows(ws, tc.agg, rankRows), func(rows *[]windowCount) []windowCount { return *rows })
				}
				for _, perBatch := range []int{0, 7, 40} {
					sameTable(t, fmt.Sprintf("append, %d per batch", perBatch), appendedWindows(t, in, perBatch, build), want)
					sameTable(t, fmt.Sprintf("update, %d per batch", perBatch), latestWindows(t, in, perBatch, build), want)
				}
			})
		}
	}
}

// TestArrivalOrderedBySlicesGoesOn: a checkpoint in which Reduce kept its
// sliding windows by slices (as versions before did) goes on by slices:
// a query restarted on it starts, and writes what a run by slices
// throughout writes.
func TestArrivalOrderedBySlicesGoesOn(t *testing.T) {
	in := copiedClicks(200)
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Sliding(2*time.Minute, 30*time.Second), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Reduce(joinPages), func(w typed.Window, user string, v fixtures.Click) windowCount {
			return windowCount{Window: w, User: user + " " + v.Page, Value: float64(v.Time.Unix())}
		})
	}
	typed.WriteSlicesWhateverTheOrder(true)
	defer typed.WriteSlicesWhateverTheOrder(false)
	want := batchTexts(runWindows(t, in, 7, typed.Append, true, build))
	got := batchTexts(runWindowsRestarted(t, in, 7, typed.Append, true, build, func() { typed.WriteSlicesWhateverTheOrder(false) }))
	if !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("restarted on slices, the batches wrote\n%q\nwhere by slices throughout they wrote\n%q", got, want)
	}
	// Per window from the start, the same input folds some windows
	// otherwise: the two layouts differ here, so the check above tells
	// which one the restarted query took.
	if perWindow := batchTexts(runWindows(t, in, 7, typed.Append, true, build)); slices.EqualFunc(perWindow, want, slices.Equal) {
		t.Fatal("per window and by slices wrote the same batches: this test tests nothing")
	}
}
