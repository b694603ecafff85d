package typed_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Stateful operators one after another, in Append mode: an operator
// writes a window (a join its padded rows) in the batch whose watermark
// passes it, where the operator after it may close the window the row
// falls in too. That operator must count the row: as in Spark, the rows
// an operator writes are late only for what the batch before closed.

// TestChainedWindowsKeepTheRowsTheyWrite: a count per user in 10 s
// windows, then the sum of those counts per user and minute. Each minute
// must hold every row of its minute, its last 10 s window included (it
// was dropped as late when written in a batch with data, and counted
// when written in a batch without data), in one batch, in batches of 1
// and 13, across a restart.
func TestChainedWindowsKeepTheRowsTheyWrite(t *testing.T) {
	in := orderedClicks(300)
	want := map[string]float64{}
	for _, c := range in {
		start := c.Time.Truncate(time.Minute).UTC()
		want[windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()]++
	}
	user := func(c *fixtures.Click) string { return c.User }
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		tens := typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(10*time.Second), user), typed.Count[fixtures.Click](), countRow)
		minutes := typed.GroupByWindow(tens, func(w *windowCount) time.Time { return w.Window.Start }, typed.Tumbling(time.Minute),
			func(w *windowCount) string { return w.User })
		return typed.AggregateWindows(minutes, typed.Sum(func(w *windowCount) float64 { return w.Value }),
			func(w typed.Window, user string, n float64) windowCount {
				return windowCount{Window: w, User: user, Value: n}
			})
	}
	for _, perBatch := range []int{0, 1, 13} {
		got := writtenOnce(t, runWindows(t, in, perBatch, typed.Append, true, build))
		sameTable(t, fmt.Sprintf("minutes of 10 s windows, %d per batch", perBatch), got, want)
	}
}

// writtenOnce is the table of the rows of batches, each of which must be
// written once (Append mode).
func writtenOnce(t *testing.T, batches map[int64][]windowCount) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, rows := range sortedBatches(batches) {
		for _, r := range rows {
			if _, dup := got[r.id()]; dup {
				t.Fatalf("%s written twice", r.id())
			}
			got[r.id()] = r.Value
		}
	}
	return got
}

// TestWindowJoinThenWindows: a left outer join on 10 s windows of the
// clicks of pages p0 and p1 (left) with the other clicks (right) by
// user, then a count per user of the joined rows in the same windows.
// A left row adds its matches in its window, or 1 (its padded row,
// written as the watermark passes the window's end, when the count's
// window closes too).
func TestWindowJoinThenWindows(t *testing.T) {
	in := orderedClicks(300)
	isLeft := func(c *fixtures.Click) bool { return c.Page == "p0" || c.Page == "p1" }
	windowOf := func(c *fixtures.Click) typed.Window {
		start := c.Time.Truncate(10 * time.Second).UTC()
		return typed.Window{Start: start, End: start.Add(10 * time.Second)}
	}
	want := map[string]float64{}
	for _, l := range in {
		if !isLeft(&l) {
			continue
		}
		n := 0
		for _, r := range in {
			if !isLeft(&r) && r.User == l.User && windowOf(&r) == windowOf(&l) {
				n++
			}
		}
		want[windowCount{Window: windowOf(&l), User: l.User}.id()] += float64(max(n, 1))
	}
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		left := typed.Filter(s, isLeft)
		right := typed.Filter(s, func(c *fixtures.Click) bool { return !isLeft(c) })
		joined := typed.Join(byKey(left), byKey(right), typed.LeftOuter,
			func(j typed.Joined[string, fixtures.Click, fixtures.Click]) fixtures.Click { return *j.Left },
			typed.JoinOnWindows(typed.Tumbling(10*time.Second)))
		return typed.AggregateWindows(typed.GroupByWindow(joined, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
			typed.Count[fixtures.Click](), countRow)
	}
	for _, perBatch := range []int{0, 1, 13} {
		got := writtenOnce(t, runWindows(t, in, perBatch, typed.Append, true, build))
		sameTable(t, fmt.Sprintf("joined rows per window, %d per batch", perBatch), got, want)
	}
}

// TestTimeJoinThenWindows: a join on a time condition (the clicks of
// pages p0 and p1, left, with the user's other clicks within 5 s), then a
// count per user of the joined rows in 10 s windows of the left's time
// (a left outer join: a left row adds its matches, or 1, its padded row,
// written once the watermark is 5 s past it) or of the right's (an inner
// join), in Append mode. The join writes rows up to 5 s (and a
// millisecond) behind the watermark; as in Spark since 3.5, the count
// runs with the watermark that far behind (the join's output watermark),
// so it takes none of them for late ones: each window holds what a loop
// over the clicks counts, in one batch, in batches of 1 and 13, across
// a restart.
func TestTimeJoinThenWindows(t *testing.T) {
	in := clicks(240, 33)
	for i := range in {
		in[i].Time = at(i + i%3)
		in[i].User = in[i].User[:1] // fewer users: more matches
	}
	isLeft := func(c *fixtures.Click) bool { return c.Page == "p0" || c.Page == "p1" }
	windowOf := func(t time.Time) typed.Window {
		start := t.Truncate(10 * time.Second).UTC()
		return typed.Window{Start: start, End: start.Add(10 * time.Second)}
	}
	within := func(l, r fixtures.Click) bool {
		return l.User == r.User && !l.Time.Before(r.Time.Add(-5*time.Second)) && !l.Time.After(r.Time.Add(5*time.Second))
	}
	for _, how := range []typed.JoinType{typed.LeftOuter, typed.Inner} {
		want := map[string]float64{}
		for _, l := range in {
			if !isLeft(&l) {
				continue
			}
			n := 0
			for _, r := range in {
				if !isLeft(&r) && within(l, r) {
					n++
					if how == typed.Inner {
						want[windowCount{Window: windowOf(r.Time), User: l.User}.id()]++
					}
				}
			}
			if how == typed.LeftOuter {
				want[windowCount{Window: windowOf(l.Time), User: l.User}.id()] += float64(max(n, 1))
			}
		}
		build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
			left := typed.Filter(s, isLeft)
			right := typed.Filter(s, func(c *fixtures.Click) bool { return !isLeft(c) })
			joined := typed.Join(byKey(left), byKey(right), how,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) fixtures.Click {
					if how == typed.Inner {
						return *j.Right
					}
					return *j.Left
				},
				typed.JoinWithin(typed.TimeBetween(-5*time.Second, 5*time.Second)))
			return typed.AggregateWindows(typed.GroupByWindow(joined, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
				typed.Count[fixtures.Click](), countRow)
		}
		for _, perBatch := range []int{0, 1, 13} {
			got := writtenOnce(t, runWindows(t, in, perBatch, typed.Append, true, build))
			sameTable(t, fmt.Sprintf("%v joined rows per window, %d per batch", how, perBatch), got, want)
		}
	}
}

// TestTimeJoinThenOperators: what may follow a join on a time condition.
// One whose sides forget none of their rows (no watermark on the side a
// bound would let forget) may write rows of any age, which an operator
// after it would drop as late: the query is refused, as Spark refuses
// it. So is a stream-table join as of the rows' times, which writes a
// row once the watermark has passed it.
func TestTimeJoinThenOperators(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	s := watermarked(typed.FromMemory(m), 0)
	plain := typed.FromMemory(m)
	left := func(j typed.Joined[string, fixtures.Click, fixtures.Click]) fixtures.Click { return *j.Left }
	for _, c := range []struct {
		name   string
		joined typed.Stream[fixtures.Click]
		want   string
	}{
		{"inner, no watermark on the right", typed.Join(byKey(s), byKey(plain), typed.Inner, left, typed.JoinWithin(typed.LeftAtOrAfter(-5*time.Second)),
			typed.JoinRightTime(clickTime)), "a join on a time condition whose sides forget none of their rows"},
		{"as of", typed.JoinUpdates(byKey(s), typed.TableUpdates(s, func(c *fixtures.Click) string { return c.User }, nil), typed.Inner, left, typed.AsOf(time.Second)),
			"a join as of the rows' times"},
	} {
		how, joined := c.name, c.joined
		counts := typed.AggregateWindows(typed.GroupByWindow(joined, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
			typed.Count[fixtures.Click](), countRow)
		q, err := typed.WriteTo(counts, newSink[windowCount]()).OutputMode(typed.Append).Start(context.Background(), newCheckpoint().opts()...)
		if err == nil {
			q.Stop()
			t.Fatalf("%v: the join followed by a windowed aggregation started", how)
		}
		if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "possible 'correctness' issue") {
			t.Errorf("%v: %v, want the join and Spark's reason named", how, err)
		}
	}
}

// TestOperatorRowsHaveNoEventTime: the rows an operator writes carry no
// event time of a WithWatermark (its function reads the rows of its
// input), so an operator after it that would read their time from one (a
// join on windows or a time condition, a deduplication by event time, a
// stream-table join of rows with times, a transformWithState whose state
// has an event-time TTL) is refused at Start, saying what
// to give; a join given the side's time starts, and so does an operator
// after a WithWatermark that follows the operator.
func TestOperatorRowsHaveNoEventTime(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	clicks := watermarked(typed.FromMemory(m), 0)
	// The count's rows: a click per user and 10 s window, at the
	// window's start.
	counts := func() typed.Stream[fixtures.Click] {
		return typed.AggregateWindows(typed.GroupByWindow(clicks, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
			typed.Count[fixtures.Click](), func(w typed.Window, user string, _ int64) fixtures.Click {
				return fixtures.Click{User: user, Time: w.Start}
			})
	}
	joinRow := func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Key }
	user := func(c *fixtures.Click) string { return c.User }
	start := func(s typed.Stream[string]) error {
		q, err := typed.WriteTo(s, newSink[string]()).OutputMode(typed.Append).Start(context.Background(), newCheckpoint().opts()...)
		if err == nil {
			q.Stop()
		}
		return err
	}
	for _, c := range []struct {
		name string
		s    typed.Stream[string]
		want string // "" to start
	}{
		{"window join", typed.Join(byKey(counts()), byKey(clicks), typed.Inner, joinRow,
			typed.JoinOnWindows(typed.Tumbling(time.Minute))), "JoinLeftTime"},
		{"window join, right side", typed.Join(byKey(clicks), byKey(counts()), typed.Inner, joinRow,
			typed.JoinOnWindows(typed.Tumbling(time.Minute))), "JoinRightTime"},
		{"window join with the left time", typed.Join(byKey(counts()), byKey(clicks), typed.Inner, joinRow,
			typed.JoinOnWindows(typed.Tumbling(time.Minute)), typed.JoinLeftTime(clickTime)), ""},
		{"deduplication by event time", typed.Map(typed.DropDuplicatesWithEventTime(counts(), user), user), "deduplicate before the operator"},
		{"deduplication within the watermark", typed.Map(typed.DropDuplicatesWithinWatermark(counts(), user), user), "deduplicate before the operator"},
		{"deduplication by key", typed.Map(typed.DropDuplicates(counts(), user), user), ""},
		{"transformWithState with an event-time TTL", typed.TransformWithState(byKey(counts()),
			&expiryProcessor{ttl: typed.WithEventTimeTTL(time.Minute)}, typed.TimeModeEventTime, typed.Append), "WithWatermark after that operator"},
		{"transformWithState with a processing-time TTL", typed.TransformWithState(byKey(counts()),
			&expiryProcessor{ttl: typed.WithTTL(time.Minute)}, typed.TimeModeProcessingTime, typed.Append), ""},
		{"transformWithState with an event-time TTL after a WithWatermark", typed.TransformWithState(byKey(watermarked(typed.DropDuplicates(typed.FromMemory(m), user), 0)),
			&expiryProcessor{ttl: typed.WithEventTimeTTL(time.Minute)}, typed.TimeModeEventTime, typed.Append), ""},
		// A WithWatermark after the operator gives its rows a time.
		{"deduplication within a watermark after the operator", typed.Map(typed.DropDuplicatesWithinWatermark(
			watermarked(typed.DropDuplicates(typed.FromMemory(m), user), 0), user), user), ""},
	} {
		err := start(c.s)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "no event time")):
			t.Errorf("%s: %v, want a refusal that says %q", c.name, err, c.want)
		}
	}
}

// TestChainedWindowsAcrossStarts: the minutes of 10 s windows again, each
// batch in a start of its own (Trigger.Once, which runs no batch without
// data), then a last start that ends the input. A start goes on from the
// watermark the last batch made, and its first batch's rows are late by
// the one that batch ran with: a 10 s window closed by the first batch
// of a start still counts in its minute.
func TestChainedWindowsAcrossStarts(t *testing.T) {
	in := orderedClicks(120)
	want := map[string]float64{}
	for _, c := range in {
		start := c.Time.Truncate(time.Minute).UTC()
		want[windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()]++
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0)
	user := func(c *fixtures.Click) string { return c.User }
	tens := typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(10*time.Second), user), typed.Count[fixtures.Click](), countRow)
	minutes := typed.AggregateWindows(typed.GroupByWindow(tens, func(w *windowCount) time.Time { return w.Window.Start }, typed.Tumbling(time.Minute),
		func(w *windowCount) string { return w.User }), typed.Sum(func(w *windowCount) float64 { return w.Value }),
		func(w typed.Window, user string, n float64) windowCount {
			return windowCount{Window: w, User: user, Value: n}
		})
	sink := newSink[windowCount]()
	w := typed.WriteTo(minutes, sink).OutputMode(typed.Append)
	ck := newCheckpoint()
	run := func(trigger runtime.Trigger, opts ...runtime.Option) {
		t.Helper()
		q, err := w.Start(context.Background(), append(ck.opts(opts...), runtime.WithTrigger(trigger))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < len(in); i += 4 {
		m.Add(in[i:min(i+4, len(in))]...)
		run(runtime.Once())
	}
	run(runtime.AvailableNow(), runtime.FlushEventTime())
	got := writtenOnce(t, sink.snapshot())
	sameTable(t, "minutes of 10 s windows, a start per batch", got, want)
}

// TestLateRowsAreTheirOperatorsToDrop: rows are judged late by the
// operator they reach first. flatMapGroupsWithState without an
// event-time timeout drops none (as in Spark), though a windowed count
// after it does: a row whose window the count has closed still reaches
// the function, and the count leaves it out of its window and counts it
// as late. (Every WithWatermark applied the first late-dropping
// operator's rule, the count's, and dropped the row before the function.)
func TestLateRowsAreTheirOperatorsToDrop(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // a row a batch
	m.Add(click("u", 100), click("u", 130), click("u", 140), click("u", 95))
	var seen []int64
	passed := typed.FlatMapGroupsWithState(typed.GroupByKey(watermarked(typed.FromMemory(m), 0), func(c *fixtures.Click) string { return c.User }),
		typed.Append, typed.NoTimeout,
		func(_ string, rows iter.Seq[fixtures.Click], _ *typed.GroupState[fixtures.Counter], emit func(fixtures.Click)) error {
			for r := range rows {
				seen = append(seen, r.Time.Unix()-t0.Unix())
				emit(r)
			}
			return nil
		})
	counts := typed.AggregateWindows(typed.GroupByWindow(passed, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
		typed.Count[fixtures.Click](), countRow)
	var late int64
	l := listener{progress: func(p runtime.QueryProgress) {
		for _, op := range p.StateOperators {
			late += op.NumRowsDroppedByWatermark
		}
	}}
	sink := newSink[windowCount]()
	if err := runToEnd(t, typed.WriteTo(counts, sink).OutputMode(typed.Append), newCheckpoint().opts(runtime.Listener(l), runtime.FlushEventTime())...); err != nil {
		t.Fatal(err)
	}
	if want := []int64{100, 130, 140, 95}; !slices.Equal(seen, want) {
		t.Errorf("the function saw %v, want every row, %v", seen, want)
	}
	if late != 1 {
		t.Errorf("%d rows reported late, want 1 (the count's)", late)
	}
	want := map[string]float64{}
	for _, sec := range []int{100, 130, 140} {
		start := at(sec).Truncate(10 * time.Second).UTC()
		want[windowCount{Window: typed.Window{Start: start, End: start.Add(10 * time.Second)}, User: "u"}.id()]++
	}
	sameTable(t, "the count's windows", writtenOnce(t, sink.snapshot()), want)
}
