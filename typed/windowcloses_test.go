package typed_test

import (
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Windows that close more keys at once than WindowClosesPerBatch close
// across batches; the operators after them wait, with the watermark held,
// until a window's rows are all in.

// manyUsersClicks makes n clicks a second apart, of 12 users in turn
// with some jitter: each 10-second window has up to 10 users, each
// minute all 12.
func manyUsersClicks(n int) []fixtures.Click {
	in := make([]fixtures.Click, n)
	for i := range in {
		in[i] = fixtures.Click{User: fmt.Sprintf("u%02d", (i*7+i/5)%12), Time: at(i)}
	}
	return in
}

// TestWindowClosesAcrossBatches checks, at most 1 and 3 windows closed a
// batch, in batches of every row and of 13, across a restart, against a
// plain loop: the counts per user in 10-second windows, written at most
// that many a batch; the minutes' sums of those counts (an aggregation
// after them, which must count a window's rows however many batches
// they take); and the users at each window's most (a
// flatMapGroupsWithState with an event-time timeout, which must see a
// window's counts all before its timeout).
func TestWindowClosesAcrossBatches(t *testing.T) {
	in := manyUsersClicks(400)
	tens := loopWindows(in, 10*time.Second, 10*time.Second)
	minutes := map[string]float64{}
	for _, c := range in {
		start := c.Time.Truncate(time.Minute).UTC()
		minutes[windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()]++
	}
	// The users at the most of each 10-second window, from the loop's
	// counts.
	most := map[string]float64{}
	byWindow := map[typed.Window]map[string]float64{}
	for _, c := range in {
		start := c.Time.Truncate(10 * time.Second).UTC()
		w := typed.Window{Start: start, End: start.Add(10 * time.Second)}
		if byWindow[w] == nil {
			byWindow[w] = map[string]float64{}
		}
		byWindow[w][c.User]++
	}
	for w, users := range byWindow {
		top := slices.Max(slices.Collect(maps.Values(users)))
		for u, n := range users {
			if n == top {
				most[windowCount{Window: w, User: u}.id()] = n
			}
		}
	}
	user := func(c *fixtures.Click) string { return c.User }
	counts := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		return typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(10*time.Second), user), typed.Count[fixtures.Click](), countRow)
	}
	sums := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		byMinute := typed.GroupByWindow(counts(s), func(w *windowCount) time.Time { return w.Window.Start }, typed.Tumbling(time.Minute),
			func(w *windowCount) string { return w.User })
		return typed.AggregateWindows(byMinute, typed.Sum(func(w *windowCount) float64 { return w.Value }),
			func(w typed.Window, user string, n float64) windowCount {
				return windowCount{Window: w, User: user, Value: n}
			})
	}
	tops := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		byWindow := typed.GroupByKey(counts(s), func(w *windowCount) int64 { return w.Window.Start.UnixMilli() })
		return typed.FlatMapGroupsWithState(byWindow, typed.Append, typed.EventTimeTimeout,
			func(ms int64, rows iter.Seq[windowCount], state *typed.GroupState[fixtures.Counter], emit func(windowCount)) error {
				start := time.UnixMilli(ms).UTC()
				// The state keeps the most so far (Count) and, in
				// Pages, the users at it.
				s, _ := state.Get()
				if state.HasTimedOut() {
					for _, u := range s.Pages {
						emit(windowCount{Window: typed.Window{Start: start, End: start.Add(10 * time.Second)}, User: u, Value: float64(s.Count)})
					}
					state.Remove()
					return nil
				}
				for r := range rows {
					switch n := int64(r.Value); {
					case n > s.Count:
						s.Count, s.Pages = n, []string{r.User}
					case n == s.Count:
						s.Pages = append(s.Pages, r.User)
					}
				}
				state.Update(s)
				// The window's counts are written once the watermark
				// reaches its end: the timeout is there, or, for counts
				// that come later, at the watermark.
				end := start.Add(10*time.Second - time.Nanosecond)
				if wm := state.CurrentWatermark(); wm.After(end) {
					end = wm
				}
				return state.SetTimeoutTimestamp(end)
			})
	}
	for _, bound := range []int{1, 3} {
		for _, perBatch := range []int{0, 13} {
			what := fmt.Sprintf("at most %d a batch, %d rows a batch", bound, perBatch)
			closes := runtime.WindowClosesPerBatch(bound)
			batches := runWindows(t, in, perBatch, typed.Append, true, counts, closes)
			for id, rows := range batches {
				if len(rows) > bound {
					t.Fatalf("%s: batch %d wrote %d windows", what, id, len(rows))
				}
			}
			sameTable(t, what+": counts", writtenOnce(t, batches), tens)
			sameTable(t, what+": sums of counts", writtenOnce(t, runWindows(t, in, perBatch, typed.Append, true, sums, closes)), minutes)
			sameTable(t, what+": users at the most", writtenOnce(t, runWindows(t, in, perBatch, typed.Append, true, tops, closes)), most)
		}
	}
}

// TestWindowClosesAfterAFailure fails the sink in a batch that closes
// some of a window's keys and leaves the rest: the query started again
// runs that batch again, and closes the rest after it, each window once.
func TestWindowClosesAfterAFailure(t *testing.T) {
	in := manyUsersClicks(200)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(in...)
	sink := newSink[windowCount]()
	failed := false
	errSink := errors.New("the sink failed")
	sink.fail = func(id int64) error {
		if !failed && len(sink.batches[id]) > 0 && id > 2 {
			failed = true
			return errSink
		}
		return nil
	}
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
	w := typed.WriteTo(typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
		typed.Count[fixtures.Click](), countRow), sink).OutputMode(typed.Append)
	ck := newCheckpoint()
	opts := ck.opts(runtime.WindowClosesPerBatch(2), runtime.FlushEventTime())
	if err := runToEnd(t, w, opts...); !errors.Is(err, errSink) {
		t.Fatalf("the first run ended with %v, want the sink's error", err)
	}
	if err := runToEnd(t, w, opts...); err != nil {
		t.Fatal(err)
	}
	sameTable(t, "counts", writtenOnce(t, sink.snapshot()), loopWindows(in, 10*time.Second, 10*time.Second))
}

// TestWindowClosesWithTriggerOnce: a query with the Once trigger and
// FlushEventTime closes every window before it stops, however many
// batches they take.
func TestWindowClosesWithTriggerOnce(t *testing.T) {
	in := manyUsersClicks(200)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(in...)
	sink := newSink[windowCount]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
	w := typed.WriteTo(typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
		typed.Count[fixtures.Click](), countRow), sink).OutputMode(typed.Append)
	q, err := w.Start(t.Context(), newCheckpoint().opts(runtime.WindowClosesPerBatch(1), runtime.FlushEventTime(), runtime.WithTrigger(runtime.Once()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	batches := sink.snapshot()
	want := loopWindows(in, 10*time.Second, 10*time.Second)
	if len(batches) < len(want) {
		t.Fatalf("%d batches for %d windows of a key each, at most 1 a batch", len(batches), len(want))
	}
	sameTable(t, "counts", writtenOnce(t, batches), want)
}
