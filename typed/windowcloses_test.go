package typed_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
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

// windowTables are the pipelines of these tests, each with the table a
// plain loop makes of in: of the windows that end at or before through,
// if not zero.
func windowTables(in []fixtures.Click, through time.Time) []struct {
	name  string
	build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]
	want  map[string]float64
} {
	minutes := map[string]float64{}
	byWindow := map[typed.Window]map[string]float64{}
	for _, c := range in {
		start := c.Time.Truncate(time.Minute).UTC()
		minutes[windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()]++
		start = c.Time.Truncate(10 * time.Second).UTC()
		w := typed.Window{Start: start, End: start.Add(10 * time.Second)}
		if byWindow[w] == nil {
			byWindow[w] = map[string]float64{}
		}
		byWindow[w][c.User]++
	}
	most := map[string]float64{}
	for w, users := range byWindow {
		top := slices.Max(slices.Collect(maps.Values(users)))
		for u, n := range users {
			if n == top {
				most[windowCount{Window: w, User: u}.id()] = n
			}
		}
	}
	tens := loopWindows(in, 10*time.Second, 10*time.Second)
	if !through.IsZero() {
		for _, table := range []map[string]float64{tens, minutes, most} {
			for id := range table {
				// An id begins with its window, "[start, end)".
				end, err := time.Parse(time.RFC3339, id[strings.Index(id, ", ")+2:strings.Index(id, ")")])
				if err != nil {
					panic(err)
				}
				if end.After(through) {
					delete(table, id)
				}
			}
		}
	}
	return []struct {
		name  string
		build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]
		want  map[string]float64
	}{
		{"counts", tenSecondCounts, tens},
		{"sums of counts", minuteSums, minutes},
		{"users at the most", mostClicks, most},
	}
}

// TestWindowClosesAcrossBatches checks, at most 1 and 3 windows closed a
// batch, in batches of every row and of 13, across a restart, against a
// plain loop: the counts per user in 10-second windows, written at most
// that many a batch; the minutes' sums of those counts (an aggregation
// after them, which must count a window's rows however many batches
// they take); and the users at each window's most (a
// flatMapGroupsWithState with an event-time timeout, which must see a
// window's counts all before it writes them).
func TestWindowClosesAcrossBatches(t *testing.T) {
	in := manyUsersClicks(400)
	for _, bound := range []int{1, 3} {
		for _, perBatch := range []int{0, 13} {
			closes := runtime.WindowClosesPerBatch(bound)
			for _, p := range windowTables(in, time.Time{}) {
				what := fmt.Sprintf("%s, at most %d a batch, %d rows a batch", p.name, bound, perBatch)
				batches := runWindows(t, in, perBatch, typed.Append, true, p.build, closes)
				if p.name == "counts" {
					for id, rows := range batches {
						if len(rows) > bound {
							t.Fatalf("%s: batch %d wrote %d windows", what, id, len(rows))
						}
					}
				}
				sameTable(t, what, writtenOnce(t, batches), p.want)
			}
		}
	}
}

var errSink = errors.New("the sink failed")

// failingAt returns a sink whose write of the n-th batch with rows
// fails, once, with errSink, after it kept the rows.
func failingAt(n int) *batchSink[windowCount] {
	sink := newSink[windowCount]()
	failed, withRows := false, 0
	sink.fail = func(id int64) error {
		if len(sink.batches[id]) > 0 {
			withRows++
		}
		if !failed && withRows == n {
			failed = true
			return errSink
		}
		return nil
	}
	return sink
}

// TestWindowClosesAfterAFailure fails the sink in a batch that closes
// some of the windows the watermark has passed and leaves the rest (and
// so holds the watermark of the operators after): the query started
// again runs that batch again, goes on from the checkpoint's held
// watermarks, and writes each window once, as the loop.
func TestWindowClosesAfterAFailure(t *testing.T) {
	in := manyUsersClicks(400)
	for _, p := range windowTables(in, time.Time{}) {
		for _, failAt := range []int{2, 5} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			m.Add(in...)
			sink := failingAt(failAt)
			s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
			w := typed.WriteTo(p.build(s), sink).OutputMode(typed.Append)
			opts := newCheckpoint().opts(runtime.WindowClosesPerBatch(1), runtime.FlushEventTime())
			if err := runToEnd(t, w, opts...); !errors.Is(err, errSink) {
				t.Fatalf("%s: the first run ended with %v, want the sink's error", p.name, err)
			}
			if err := runToEnd(t, w, opts...); err != nil {
				t.Fatal(err)
			}
			sameTable(t, fmt.Sprintf("%s, failed at the batch with rows number %d", p.name, failAt), writtenOnce(t, sink.snapshot()), p.want)
		}
	}
}

// firstWriteSink keeps the rows of a batch's first write and skips the
// batch when it is written again: a sink that skips the batch ids it
// has seen (a ForeachWriter whose Open returns false), which loses
// nothing only if a batch run again writes what it wrote before.
type firstWriteSink struct {
	inner *batchSink[windowCount]
}

func (s firstWriteSink) Write(ctx context.Context, id int64, rows []windowCount) error {
	s.inner.mu.Lock()
	_, seen := s.inner.batches[id]
	s.inner.mu.Unlock()
	if seen {
		return nil
	}
	return s.inner.Write(ctx, id, rows)
}

// TestWindowClosesOfABatchRunAgain: a batch that failed after its sink
// wrote runs again, at the next start, with the WindowClosesPerBatch of
// its plan, not the start's, so that it closes the same windows: a sink
// that skips the batch ids it has seen neither loses the windows a
// larger bound would add to it nor writes twice those a smaller one
// would leave to the next.
func TestWindowClosesOfABatchRunAgain(t *testing.T) {
	in := manyUsersClicks(400)
	for _, p := range windowTables(in, time.Time{}) {
		for _, again := range []int{1, 5} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			m.Add(in...)
			sink := failingAt(3)
			s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
			w := typed.WriteTo(p.build(s), firstWriteSink{sink}).OutputMode(typed.Append)
			ck := newCheckpoint()
			if err := runToEnd(t, w, ck.opts(runtime.WindowClosesPerBatch(3), runtime.FlushEventTime())...); !errors.Is(err, errSink) {
				t.Fatalf("%s: the first run ended with %v, want the sink's error", p.name, err)
			}
			if err := runToEnd(t, w, ck.opts(runtime.WindowClosesPerBatch(again), runtime.FlushEventTime())...); err != nil {
				t.Fatal(err)
			}
			sameTable(t, fmt.Sprintf("%s, 3 windows a batch, then %d", p.name, again), writtenOnce(t, sink.snapshot()), p.want)
		}
	}
}

// cancelingSink cancels a context once it has written n batches with
// rows: the query stops between batches.
type cancelingSink struct {
	inner    *batchSink[windowCount]
	n        *int
	cancelAt int
	cancel   context.CancelFunc
}

func (s cancelingSink) Write(ctx context.Context, id int64, rows []windowCount) error {
	if err := s.inner.Write(ctx, id, rows); err != nil {
		return err
	}
	if len(rows) > 0 {
		if *s.n++; *s.n == s.cancelAt {
			s.cancel()
		}
	}
	return nil
}

// TestWindowClosesAfterAStop stops a query, without batches without
// data, while windows are left to its next batch: started again on its
// checkpoint with no new data, it closes them first, as the run that
// stopped would have, and writes what a run that did not stop writes.
func TestWindowClosesAfterAStop(t *testing.T) {
	in := manyUsersClicks(400)
	for _, p := range windowTables(in, time.Time{}) {
		run := func(cancelAt int) map[string]float64 {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 50)
			m.Add(in...)
			sink := newSink[windowCount]()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			written := 0
			s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
			w := typed.WriteTo(p.build(s), cancelingSink{sink, &written, cancelAt, cancel}).OutputMode(typed.Append)
			opts := newCheckpoint().opts(runtime.WindowClosesPerBatch(1), runtime.NoDataBatches(false), runtime.WithTrigger(runtime.AvailableNow()))
			q, err := w.Start(ctx, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.AwaitTermination(); err != nil && !errors.Is(err, context.Canceled) {
				t.Fatal(err)
			}
			if cancelAt > 0 {
				if written != cancelAt {
					t.Fatalf("%s: the first run stopped after %d batches with rows, want %d", p.name, written, cancelAt)
				}
				q, err := w.Start(t.Context(), opts...)
				if err != nil {
					t.Fatal(err)
				}
				if err := q.AwaitTermination(); err != nil {
					t.Fatal(err)
				}
			}
			return writtenOnce(t, sink.snapshot())
		}
		want := run(0)
		if len(want) < 5 {
			t.Fatalf("%s: %d rows without a stop", p.name, len(want))
		}
		for id, v := range want {
			if p.want[id] != v {
				t.Fatalf("%s: %s = %v, the loop %v", p.name, id, v, p.want[id])
			}
		}
		sameTable(t, p.name+", stopped and started again", run(3), want)
	}
}

// TestWindowClosesWhateverTheTrigger: windows left to the next batch
// close in the batches right after, with the Once trigger and
// FlushEventTime (which ends only once they have), without batches
// without data (NoDataBatches(false): they close what a batch began),
// and with a ProcessingTime trigger, without waiting for its interval.
func TestWindowClosesWhateverTheTrigger(t *testing.T) {
	in := manyUsersClicks(200)
	for _, c := range []struct {
		name string
		opts []runtime.Option
	}{
		{"once", []runtime.Option{runtime.FlushEventTime(), runtime.WithTrigger(runtime.Once())}},
		{"available now, no batches without data", []runtime.Option{runtime.FlushEventTime(), runtime.WithTrigger(runtime.AvailableNow()), runtime.NoDataBatches(false)}},
	} {
		for _, p := range windowTables(in, time.Time{}) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			m.Add(in...)
			sink := newSink[windowCount]()
			s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
			w := typed.WriteTo(p.build(s), sink).OutputMode(typed.Append)
			q, err := w.Start(t.Context(), newCheckpoint().opts(append(c.opts, runtime.WindowClosesPerBatch(1))...)...)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.AwaitTermination(); err != nil {
				t.Fatal(err)
			}
			sameTable(t, fmt.Sprintf("%s, %s", p.name, c.name), writtenOnce(t, sink.snapshot()), p.want)
		}
	}
	// An hourly trigger on a manual clock: the first batch reads the
	// clicks; the second, an hour later, has the watermark 30 s behind
	// the last, and closes the windows it has passed, one a batch,
	// without waiting for the next hour.
	watermark := in[len(in)-1].Time.Add(-30 * time.Second)
	for _, p := range windowTables(in, watermark) {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		m.Add(in...)
		sink := newSink[windowCount]()
		s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
		w := typed.WriteTo(p.build(s), sink).OutputMode(typed.Append)
		clock := runtime.NewManualClock(at(0))
		q, err := w.Start(t.Context(), newCheckpoint().opts(runtime.WithManualClock(clock), runtime.WithTrigger(runtime.ProcessingTime(time.Hour)),
			runtime.WindowClosesPerBatch(1))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := clock.WaitUntilWaiting(t.Context()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Hour)
		if err := clock.WaitUntilWaiting(t.Context()); err != nil {
			t.Fatal(err)
		}
		q.Stop()
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		if len(p.want) < 2 {
			t.Fatalf("%s: %d windows closed by the watermark", p.name, len(p.want))
		}
		sameTable(t, p.name+", an hourly trigger", writtenOnce(t, sink.snapshot()), p.want)
	}
}

// tenSecondCounts counts each user's clicks in 10-second windows.
func tenSecondCounts(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
	return typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
		typed.Count[fixtures.Click](), countRow)
}

// minuteSums sums each user's 10-second counts by minute.
func minuteSums(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
	byMinute := typed.GroupByWindow(tenSecondCounts(s), func(w *windowCount) time.Time { return w.Window.Start }, typed.Tumbling(time.Minute),
		func(w *windowCount) string { return w.User })
	return typed.AggregateWindows(byMinute, typed.Sum(func(w *windowCount) float64 { return w.Value }),
		func(w typed.Window, user string, n float64) windowCount {
			return windowCount{Window: w, User: user, Value: n}
		})
}

// mostClicks writes the users at the most clicks of each 10-second
// window.
func mostClicks(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
	byWindow := typed.GroupByKey(tenSecondCounts(s), func(w *windowCount) int64 { return w.Window.Start.UnixMilli() })
	return typed.FlatMapGroupsWithState(byWindow, typed.Append, typed.EventTimeTimeout,
		func(ms int64, rows iter.Seq[windowCount], state *typed.GroupState[fixtures.Counter], emit func(windowCount)) error {
			start := time.UnixMilli(ms).UTC()
			// The state keeps the most so far (Count) and, in
			// Pages, the users at it.
			s, _ := state.Get()
			for r := range rows {
				switch n := int64(r.Value); {
				case n > s.Count:
					s.Count, s.Pages = n, []string{r.User}
				case n == s.Count:
					s.Pages = append(s.Pages, r.User)
				}
			}
			// The window's counts are written as the watermark passes
			// its last instant, which this operator's watermark
			// passes once they are all in: the users at the most are
			// written then, at once if it has, or at a timeout there.
			last := start.Add(10*time.Second - time.Nanosecond)
			if state.HasTimedOut() || state.CurrentWatermark().After(last) {
				for _, u := range s.Pages {
					emit(windowCount{Window: typed.Window{Start: start, End: start.Add(10 * time.Second)}, User: u, Value: float64(s.Count)})
				}
				state.Remove()
				return nil
			}
			state.Update(s)
			return state.SetTimeoutTimestamp(last)
		})
}

// TestHeldWatermarksAreReported: while windows are left to later
// batches, the operators after the windowed aggregation run with the
// watermark held at the first window left, and each batch's report says
// so per operator (HeldWatermark, before the query's watermark); the
// aggregation that leaves them runs with the query's, and so does every
// operator of the last batch, which closes the last windows.
func TestHeldWatermarksAreReported(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 50)
	m.Add(manyUsersClicks(400)...)
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
	w := typed.WriteTo(minuteSums(s), newSink[windowCount]()).OutputMode(typed.Append)
	q, err := w.Start(t.Context(), newCheckpoint().opts(runtime.WindowClosesPerBatch(1), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	reports := q.RecentProgress()
	held := 0
	for _, p := range reports {
		if len(p.StateOperators) != 2 {
			t.Fatalf("batch %d: %d operators reported, want 2", p.BatchID, len(p.StateOperators))
		}
		for i, op := range p.StateOperators {
			if op.HeldWatermark == "" {
				continue
			}
			if i == 0 {
				t.Errorf("batch %d: the windows that leave windows to later batches ran with a held watermark, %s", p.BatchID, op.HeldWatermark)
			}
			h, err := time.Parse(time.RFC3339Nano, op.HeldWatermark)
			if err != nil {
				t.Fatal(err)
			}
			wm, err := time.Parse(time.RFC3339Nano, p.EventTime["watermark"])
			if err != nil {
				t.Fatal(err)
			}
			if !h.Before(wm) {
				t.Errorf("batch %d: operator %d held at %s, not before the query's watermark %s", p.BatchID, i, h, wm)
			}
			held++
		}
	}
	if held == 0 {
		t.Fatalf("no operator ran with a held watermark in %d batches", len(reports))
	}
	if last := reports[len(reports)-1]; last.StateOperators[1].HeldWatermark != "" {
		t.Errorf("the last batch, %d, held its second operator at %s", last.BatchID, last.StateOperators[1].HeldWatermark)
	}
}
