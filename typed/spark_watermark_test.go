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

// Scenarios of Spark's EventTimeWatermarkSuite and
// StreamingDeduplicationSuite, step by step: each step adds rows and runs
// the query until it has done all it can (its data batches, then the
// batches without data that the moved watermark calls for), and checks
// the rows written by the step, the state rows and the rows dropped as
// late, as Spark's CheckNewAnswer, assertNumStateRows and
// assertNumRowsDroppedByWatermark.

// sparkStep is one step: values are event times in seconds after the
// epoch; want is the step's new output ("start:count" per window, or any
// text the row function makes), in any order.
type sparkStep struct {
	add         []int
	want        []string
	stateRows   int64
	droppedRows int64
}

func runSparkSteps[T any](t *testing.T, mode typed.OutputMode, build func(typed.Stream[fixtures.Click]) typed.Stream[T], text func(T) string, steps []sparkStep) {
	t.Helper()
	runSparkStepsLate(t, mode, build, text, steps, nil)
}

// runSparkStepsLate is runSparkSteps with late, when not nil, given the
// rows the watermark drops (typed.LateRows), and checked to get as many
// as the steps drop; a step's stateRows below 0 is not checked.
func runSparkStepsLate[T any](t *testing.T, mode typed.OutputMode, build func(typed.Stream[fixtures.Click]) typed.Stream[T], text func(T) string, steps []sparkStep, late *batchSink[fixtures.Click]) {
	t.Helper()
	m := typed.NewMemoryStream[fixtures.Click]("values", 0)
	var opts []typed.WatermarkOption[fixtures.Click]
	if late != nil {
		opts = append(opts, typed.LateRows[fixtures.Click](late))
	}
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 10*time.Second, opts...)
	var allDropped int64
	sink := newSink[T]()
	w := typed.WriteTo(build(s), sink).OutputMode(mode)
	ck := newCheckpoint()
	shown := int64(-1)
	for i, step := range steps {
		for _, v := range step.add {
			m.Add(fixtures.Click{User: "u", Time: time.Unix(int64(v), 0).UTC()})
		}
		q, progress, rows := runAvailableNow(t, w, ck, sink)
		var got []string
		var dropped int64
		for i, p := range progress {
			for _, r := range rows[i] {
				got = append(got, text(r))
			}
			dropped += p.StateOperators[0].NumRowsDroppedByWatermark
			shown = max(shown, p.BatchID)
		}
		slices.Sort(got)
		want := slices.Clone(step.want)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (add %v): new rows %q, want %q", i, step.add, got, want)
		}
		p, ok := q.LastProgress()
		if ok && step.stateRows >= 0 && p.StateOperators[0].NumRowsTotal != step.stateRows {
			t.Fatalf("step %d: %d state rows, want %d", i, p.StateOperators[0].NumRowsTotal, step.stateRows)
		}
		if dropped != step.droppedRows {
			t.Fatalf("step %d: %d rows dropped by the watermark, want %d", i, dropped, step.droppedRows)
		}
		allDropped += dropped
	}
	if late != nil && int64(len(late.rows())) != allDropped {
		t.Fatalf("LateRows got %d rows, want the %d dropped", len(late.rows()), allDropped)
	}
}

type windowStart struct {
	start int64
	count int64
}

func fiveSecondCounts(s typed.Stream[fixtures.Click]) typed.Stream[windowStart] {
	ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(5*time.Second), func(*fixtures.Click) struct{} { return struct{}{} })
	return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, _ struct{}, n int64) windowStart {
		return windowStart{w.Start.Unix(), n}
	})
}

func windowText(w windowStart) string { return fmt.Sprintf("%d:%d", w.start, w.count) }

// Spark's "append mode": a window is written once, after the watermark
// passes its end, in a batch without data if need be; late rows are
// dropped and counted.
func TestSparkWatermarkAppendMode(t *testing.T) {
	runSparkSteps(t, typed.Append, fiveSecondCounts, windowText, []sparkStep{
		{add: []int{10, 11, 12, 13, 14, 15}, want: nil, stateRows: 2},
		{add: []int{25}, want: []string{"10:5"}, stateRows: 2}, // the watermark moves to 15
		{add: []int{10}, want: nil, stateRows: 2, droppedRows: 1},
	})
}

// Spark's "update mode": every batch writes the windows that changed;
// windows whose end the watermark reached are evicted.
func TestSparkWatermarkUpdateMode(t *testing.T) {
	runSparkSteps(t, typed.Update, fiveSecondCounts, windowText, []sparkStep{
		{add: []int{10, 11, 12, 13, 14, 15}, want: []string{"10:5", "15:1"}, stateRows: 2},
		{add: []int{25}, want: []string{"25:1"}, stateRows: 2},
		{add: []int{10, 25, 26, 26}, want: []string{"25:4"}, stateRows: 2, droppedRows: 1},
		{add: []int{25}, want: []string{"25:5"}, stateRows: 2},
		// The watermark is 16 (26 less 10): 16 is at the watermark, but its
		// window, [15, 20), ends after it, so Spark counts it.
		{add: []int{16}, want: []string{"15:2"}, stateRows: 2},
	})
}

// Spark's "complete mode": the whole table every batch, nothing evicted,
// the watermark changes nothing: a late row is still counted.
func TestSparkWatermarkCompleteMode(t *testing.T) {
	runSparkSteps(t, typed.Complete, fiveSecondCounts, windowText, []sparkStep{
		{add: []int{10, 11, 12, 13, 14, 15}, want: []string{"10:5", "15:1"}, stateRows: 2},
		{add: []int{25}, want: []string{"10:5", "15:1", "25:1"}, stateRows: 3},
		{add: []int{25}, want: []string{"10:5", "15:1", "25:2"}, stateRows: 3},
		{add: []int{10}, want: []string{"10:6", "15:1", "25:2"}, stateRows: 3}, // late (the watermark is 15), counted
	})
}

// Spark's dropDuplicates on a column that is not the watermark's
// (StreamingDeduplicationSuite, "SPARK-21546: dropDuplicates should ignore
// watermark when it's not a key"): the key is kept for ever, so a later
// row of it is still a duplicate after the watermark has passed the first
// row's time; rows at or before the watermark are still late.
func TestSparkDropDuplicatesKeepsKeysWithoutEventTime(t *testing.T) {
	dedup := func(s typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click] {
		return typed.DropDuplicates(s, func(c *fixtures.Click) string { return c.User })
	}
	text := func(c fixtures.Click) string { return fmt.Sprint(c.Time.Unix()) }
	runSparkSteps(t, typed.Append, dedup, text, []sparkStep{
		{add: []int{20}, want: []string{"20"}, stateRows: 1},
		{add: []int{40}, want: nil, stateRows: 1}, // the watermark moves to 30, past 20
		{add: []int{45}, want: nil, stateRows: 1}, // still a duplicate
		{add: []int{10}, want: nil, stateRows: 1, droppedRows: 1},
	})
}

// The same with DropDuplicatesWithEventTime and no other key: the rows
// of one event time are copies; state is ordered by event time, and the
// keys the watermark passes go with one range deletion.
func TestSparkDeduplicationWithEventTime(t *testing.T) {
	dedup := func(s typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click] {
		return typed.DropDuplicatesWithEventTime(s, func(*fixtures.Click) struct{} { return struct{}{} })
	}
	text := func(c fixtures.Click) string { return fmt.Sprint(c.Time.Unix()) }
	var rows []int
	for range 5 {
		for v := 10; v <= 15; v++ {
			rows = append(rows, v)
		}
	}
	runSparkSteps(t, typed.Append, dedup, text, []sparkStep{
		{add: rows, want: []string{"10", "11", "12", "13", "14", "15"}, stateRows: 6},
		{add: []int{25}, want: []string{"25"}, stateRows: 1},
		{add: []int{10}, want: nil, stateRows: 1, droppedRows: 1},
		{add: []int{45}, want: []string{"45"}, stateRows: 1},
	})
}

// An aggregation after flatMapGroupsWithState in Append mode, with
// Complete output, as Spark's FlatMapGroupsWithStateSuite allows: a count
// per number of clicks emitted.
func TestAggregationAfterFlatMapGroupsWithState(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	m.Add(click("a", 1), click("b", 2), click("a", 3), click("c", 4), click("a", 5))
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	// Emits one row per click with the user's running count.
	running := typed.FlatMapGroupsWithState(byUser, typed.Append, typed.NoTimeout,
		func(u string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
			c, _ := st.Get()
			for range rows {
				c.Count++
				emit(fixtures.UserCount{User: u, Count: c.Count})
			}
			st.Update(c)
			return nil
		})
	perCount := typed.AggregateByKey(typed.GroupByKey(running, func(u *fixtures.UserCount) int64 { return u.Count }),
		typed.Count[fixtures.UserCount](), func(n int64, k int64) string { return fmt.Sprintf("%d:%d", n, k) })
	sink := newSink[string]()
	if err := runToEnd(t, typed.WriteTo(perCount, sink).OutputMode(typed.Complete), newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	batches := sortedBatches(sink.snapshot())
	last := slices.Clone(batches[len(batches)-1])
	slices.Sort(last)
	// Counts 1 (a, b, c), 2 (a), 3 (a).
	if got := strings.Join(last, " "); got != "1:3 2:1 3:1" {
		t.Fatalf("the last table: %q, want 1:3 2:1 3:1", got)
	}
}

// TestLateRowsOfSlidingWindows: with sliding windows a row is late for
// each of its windows that the watermark closed (Spark filters the rows
// of each window by its end): a row late for all its windows goes to the
// LateRows sink and counts once per window; a row late for some is
// counted in the others and left out of the closed ones.
func TestLateRowsOfSlidingWindows(t *testing.T) {
	run, late := windowsWithLateRows(t, typed.Sliding(10*time.Second, 5*time.Second), func(w typed.Window) int64 { return w.Start.Unix() })
	if rows, dropped := run(20); !slices.Equal(rows, []string{"15:1", "20:1"}) || dropped != 0 {
		t.Fatalf("first batch: %q, %d dropped", rows, dropped)
	}
	// The watermark is 20. 12 is in [10, 20) and [5, 15): late for both.
	// 17 is in [15, 25), open, and [10, 20), closed.
	rows, dropped := run(12, 17)
	if !slices.Equal(rows, []string{"15:2"}) || dropped != 3 {
		t.Fatalf("second batch: %q, %d dropped; want [15:2], 3 dropped (2 for 12, 1 for 17)", rows, dropped)
	}
	if got := late(); !slices.Equal(got, []int64{12}) {
		t.Fatalf("LateRows got %v, want [12]", got)
	}
}

// windowsWithLateRows runs a count of one user's clicks in windows, in
// Update mode with the watermark at the latest click, each batch a run
// to the end of the clicks given to run (seconds since the epoch),
// which returns the batch's rows as "label:count", sorted, and the rows
// dropped as late; late returns the times of the clicks sent to
// LateRows so far.
func windowsWithLateRows(t *testing.T, windows typed.Windows, label func(typed.Window) int64) (run func(values ...int) ([]string, int64), late func() []int64) {
	m := typed.NewMemoryStream[fixtures.Click]("values", 0)
	lateSink := newSink[fixtures.Click]()
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 0, typed.LateRows(lateSink))
	ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, windows, func(*fixtures.Click) struct{} { return struct{}{} })
	counts := typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, _ struct{}, n int64) windowStart {
		return windowStart{label(w), n}
	})
	sink := newSink[windowStart]()
	w := typed.WriteTo(counts, sink).OutputMode(typed.Update)
	ck := newCheckpoint()
	run = func(values ...int) (rows []string, dropped int64) {
		t.Helper()
		for _, v := range values {
			m.Add(fixtures.Click{User: "u", Time: time.Unix(int64(v), 0).UTC()})
		}
		return batchRowsToEnd(t, w, sink, windowText, ck.opts()...)
	}
	late = func() []int64 {
		var times []int64
		for _, rows := range lateSink.snapshot() {
			for _, r := range rows {
				times = append(times, r.Time.Unix())
			}
		}
		return times
	}
	return run, late
}

// TestLateRowsOfCumulativeWindows: a row whose period's first windows
// the watermark closed still counts in the later ones, which are open
// (as Flink adds it to the period's later windows), and is late for the
// closed ones only; a row whose period's last window is closed is late
// for all of them: sent to LateRows, and counted once per window.
func TestLateRowsOfCumulativeWindows(t *testing.T) {
	// A period's windows start together: each is told by its end.
	run, late := windowsWithLateRows(t, typed.Cumulate(5*time.Second, 20*time.Second), func(w typed.Window) int64 { return w.End.Unix() })
	// 27 is in [20, 30), [20, 35) and [20, 40).
	if rows, dropped := run(27); !slices.Equal(rows, []string{"30:1", "35:1", "40:1"}) || dropped != 0 {
		t.Fatalf("first batch: %q, %d dropped", rows, dropped)
	}
	// The watermark is 27. 21 is in [20, 25), closed, and in [20, 30),
	// [20, 35) and [20, 40), open; 12 is in [0, 15) and [0, 20), both
	// closed.
	rows, dropped := run(21, 12)
	if !slices.Equal(rows, []string{"30:2", "35:2", "40:2"}) || dropped != 3 {
		t.Fatalf("second batch: %q, %d dropped; want [30:2 35:2 40:2], 3 dropped (1 for 21, 2 for 12)", rows, dropped)
	}
	if got := late(); !slices.Equal(got, []int64{12}) {
		t.Fatalf("LateRows got %v, want [12]", got)
	}
}

type sessionCount struct {
	start, end int64
	count      int64
}

// Spark's StreamingSessionWindowSuite, "append mode - session window", on
// one key, with a gap of 10 s and the watermark 10 s behind: a row is
// late when the session it alone would make ends at or before the
// watermark, not when the row itself is at or before it: a row within
// the gap of the watermark still opens (or extends) a session.
func TestSparkSessionWindowLateRows(t *testing.T) {
	sessions := func(s typed.Stream[fixtures.Click]) typed.Stream[sessionCount] {
		ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Session(10*time.Second), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, _ string, n int64) sessionCount {
			return sessionCount{w.Start.Unix(), w.End.Unix(), n}
		})
	}
	text := func(s sessionCount) string { return fmt.Sprintf("%d-%d:%d", s.start, s.end, s.count) }
	runSparkSteps(t, typed.Append, sessions, text, []sparkStep{
		{add: []int{40, 41}, stateRows: 1}, // [40, 51); the watermark moves to 31
		// 25 is before the watermark, but its session, [25, 35), ends
		// after it: kept, a session of its own.
		{add: []int{25}, stateRows: 1},
		// 15's session, [15, 25), ends before the watermark: late.
		{add: []int{15}, stateRows: 1, droppedRows: 1},
		// The watermark moves to 50: [25, 35) closes, [40, 51) stays open.
		{add: []int{60}, want: []string{"25-35:1"}, stateRows: 1},
		// The watermark moves to 65: [40, 51) closes.
		{add: []int{75}, want: []string{"40-51:2"}, stateRows: 1},
	})
}

// Session windows JoiningOpenSessions, Flink's rule, on one key, with a
// gap of 10 s and the watermark 10 s behind: a late row (its own session
// ends at or before the watermark) joins the open sessions it overlaps
// or touches, and is dropped only when there are none; in a batch, it
// joins after the rows that are not late.
func TestSessionWindowJoiningOpenSessions(t *testing.T) {
	sessions := func(s typed.Stream[fixtures.Click]) typed.Stream[sessionCount] {
		ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Session(10*time.Second).JoiningOpenSessions(),
			func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, _ string, n int64) sessionCount {
			return sessionCount{w.Start.Unix(), w.End.Unix(), n}
		})
	}
	text := func(s sessionCount) string { return fmt.Sprintf("%d-%d:%d", s.start, s.end, s.count) }
	runSparkSteps(t, typed.Append, sessions, text, []sparkStep{
		{add: []int{40, 41}, stateRows: 1}, // [40, 51); the watermark moves to 31
		{add: []int{25}, stateRows: 1},     // [25, 35), not late
		// 15's session, [15, 25), ends before the watermark, and touches
		// [25, 35): it joins it, and so does 5 then.
		{add: []int{15}, stateRows: 1},
		{add: []int{5}, stateRows: 1},
		// The watermark moves to 50: [5, 35) closes.
		{add: []int{60}, want: []string{"5-35:3"}, stateRows: 1},
		// 20's session, [20, 30), touches no open session: dropped.
		{add: []int{20}, stateRows: 1, droppedRows: 1},
		// The watermark moves to 65: [40, 51) closes.
		{add: []int{75}, want: []string{"40-51:2"}, stateRows: 1},
		// 49, late, touches [60, 70) only once 57, not late, has joined
		// it: [49, 70).
		{add: []int{49, 57}, stateRows: 1},
		// The watermark moves to 80.
		{add: []int{90}, want: []string{"49-70:3"}, stateRows: 1},
	})
}

// gappedClick is a click with its session gap, made by a Map between
// the WithWatermark and a session aggregation with GapBy.
type gappedClick struct {
	User string
	Time time.Time
	Gap  time.Duration
}

// gapOfClick is a gappedClick's gap.
func gapOfClick(g *gappedClick) time.Duration { return g.Gap }

// sessionCounts counts the rows of ws's sessions, in Append mode (Spark
// refuses Update for sessions), and returns the query and its sink: a
// session is written once the watermark passes its end, or when a run
// with FlushEventTime ends its input.
func sessionCounts[T any](ws typed.WindowedStream[string, T]) (*typed.Writer[sessionCount], *batchSink[sessionCount]) {
	counts := typed.AggregateWindows(ws, typed.Count[T](), func(w typed.Window, _ string, n int64) sessionCount {
		return sessionCount{w.Start.Unix(), w.End.Unix(), n}
	})
	sink := newSink[sessionCount]()
	return typed.WriteTo(counts, sink).OutputMode(typed.Append), sink
}

// sessionText shows a session's count as "start-end:count".
func sessionText(r sessionCount) string { return fmt.Sprintf("%d-%d:%d", r.start, r.end, r.count) }

// userClick is a click of user u, sec seconds after the epoch, on page.
func userClick(sec int64, page string) fixtures.Click {
	return fixtures.Click{User: "u", Time: time.Unix(sec, 0).UTC(), Page: page}
}

// lateClicks are the clicks a LateRows sink got, as "seconds page",
// sorted.
func lateClicks(sink *batchSink[fixtures.Click]) []string {
	var late []string
	for _, rows := range sink.snapshot() {
		for _, r := range rows {
			late = append(late, fmt.Sprintf("%d %s", r.Time.Unix(), r.Page))
		}
	}
	slices.Sort(late)
	return late
}

// TestLateRowsOfGapBySessions: over session windows whose rows each have
// a gap of their own (GapBy), a row whose own session ends at or before
// the watermark is late: dropped and counted by the aggregation, which
// judges it as it reaches it, and the row the WithWatermark read (a
// click, before a Map made it another type) goes to LateRows. A row as
// old whose gap reaches past the watermark extends the open session.
func TestLateRowsOfGapBySessions(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	lateSink := newSink[fixtures.Click]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0, typed.LateRows(lateSink))
	gapped := typed.Map(s, func(c *fixtures.Click) gappedClick {
		return gappedClick{User: c.User, Time: c.Time, Gap: time.Duration(len(c.Page)) * 10 * time.Second}
	})
	ws := typed.GroupByWindow(gapped, func(g *gappedClick) time.Time { return g.Time }, typed.Session(time.Minute), func(g *gappedClick) string { return g.User })
	w, sink := sessionCounts(ws.GapBy(gapOfClick))
	ck := newCheckpoint()
	m.Add(userClick(100, "p"))
	if rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts()...); len(rows) != 0 || dropped != 0 {
		t.Fatalf("first batch: %q, %d dropped", rows, dropped)
	}
	// The watermark is 100. 85's gap of 10 s ends its session at 95:
	// late. 95's of 40 s ends it at 135: it joins [100, 110).
	m.Add(userClick(85, "p"), userClick(95, "pppp"))
	if rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts(runtime.FlushEventTime())...); !slices.Equal(rows, []string{"95-135:2"}) || dropped != 1 {
		t.Fatalf("second batch: %q, %d dropped; want [95-135:2], 1 dropped", rows, dropped)
	}
	if late := lateClicks(lateSink); !slices.Equal(late, []string{"85 p"}) {
		t.Fatalf("LateRows got %q, want [85 p]", late)
	}
}

// TestLateRowsOfSessionsJoiningOpenOnes: a late row that joins no open
// session (JoiningOpenSessions) is dropped when the batch runs, counted,
// and the row the WithWatermark read goes to LateRows, once, though a
// FlatMap made two of it; a late row that joins an open session is not
// late.
func TestLateRowsOfSessionsJoiningOpenOnes(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	lateSink := newSink[fixtures.Click]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0, typed.LateRows(lateSink))
	twice := typed.FlatMap(s, func(c *fixtures.Click) []fixtures.Click { return []fixtures.Click{*c, *c} })
	w, sink := sessionCounts(typed.GroupByWindow(twice, clickTime, typed.Session(10*time.Second).JoiningOpenSessions(), func(c *fixtures.Click) string { return c.User }))
	ck := newCheckpoint()
	m.Add(userClick(100, ""))
	if rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts()...); len(rows) != 0 || dropped != 0 {
		t.Fatalf("first batch: %q, %d dropped", rows, dropped)
	}
	// The watermark is 100. 92's session, [92, 102), is not late, and
	// makes [92, 110); 85's, [85, 95), late, touches it: it joins it.
	// 80's, [80, 90), touches no open one: late.
	m.Add(userClick(80, ""), userClick(85, ""), userClick(92, ""))
	if rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts(runtime.FlushEventTime())...); !slices.Equal(rows, []string{"85-110:6"}) || dropped != 2 {
		t.Fatalf("second batch: %q, %d dropped; want [85-110:6], 2 dropped (80's two copies)", rows, dropped)
	}
	if late := lateClicks(lateSink); !slices.Equal(late, []string{"80 "}) {
		t.Fatalf("LateRows got %q, want [80]", late)
	}
}

// TestLateRowsThroughMapAsync: a MapAsync between the WithWatermark and
// the sessions writes a row after the rows pushed after it, or when the
// batch ends: a row the sessions drop as late is still the one sent to
// LateRows, whatever the order of the late row and the row kept, for
// GapBy (judged as the row reaches the sessions) and JoiningOpenSessions
// (judged when the batch runs).
func TestLateRowsThroughMapAsync(t *testing.T) {
	for _, joinOpen := range []bool{false, true} {
		for _, lateFirst := range []bool{false, true} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			lateSink := newSink[fixtures.Click]()
			s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0, typed.LateRows(lateSink))
			gapped := typed.MapAsync(s, func(_ context.Context, c fixtures.Click) (gappedClick, error) {
				return gappedClick{User: c.User, Time: c.Time, Gap: time.Duration(len(c.Page)) * 10 * time.Second}, nil
			}, 2)
			windows := typed.Session(time.Minute)
			if joinOpen {
				windows = windows.JoiningOpenSessions()
			}
			ws := typed.GroupByWindow(gapped, func(g *gappedClick) time.Time { return g.Time }, windows, func(g *gappedClick) string { return g.User })
			w, sink := sessionCounts(ws.GapBy(gapOfClick))
			ck := newCheckpoint()
			m.Add(userClick(100, "p"))
			if _, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts()...); dropped != 0 {
				t.Fatalf("first batch: %d dropped", dropped)
			}
			// The watermark is 100: 70's session, [70, 80), is late and
			// touches none; 95's, [95, 135), is not.
			batch := []fixtures.Click{userClick(95, "pppp"), userClick(70, "p")}
			if lateFirst {
				slices.Reverse(batch)
			}
			m.Add(batch...)
			if rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts(runtime.FlushEventTime())...); !slices.Equal(rows, []string{"95-135:2"}) || dropped != 1 {
				t.Fatalf("join open %v, late first %v: second batch %q, %d dropped", joinOpen, lateFirst, rows, dropped)
			}
			if late := lateClicks(lateSink); !slices.Equal(late, []string{"70 p"}) {
				t.Errorf("join open %v, late first %v: LateRows got %q, want [70 p]", joinOpen, lateFirst, late)
			}
		}
	}
}

// TestLateRowsOfOneTimeJoiningOpenSessions: late rows of one time whose
// gaps differ, with JoiningOpenSessions: the first of a gap of 5 s is
// dropped, then one of 20 s joins the open session, and the next of 5 s
// touches it and joins too; LateRows gets the first, the one dropped.
func TestLateRowsOfOneTimeJoiningOpenSessions(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	lateSink := newSink[fixtures.Click]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0, typed.LateRows(lateSink))
	gaps := map[string]time.Duration{"x": 5 * time.Second, "a": 5 * time.Second, "b": 5 * time.Second, "cccc": 20 * time.Second, "p": 10 * time.Second}
	ws := typed.GroupByWindow(s, clickTime, typed.Session(time.Minute).JoiningOpenSessions(), func(c *fixtures.Click) string { return c.User })
	w, sink := sessionCounts(ws.GapBy(func(c *fixtures.Click) time.Duration { return gaps[c.Page] }))
	ck := newCheckpoint()
	m.Add(userClick(100, "p"))
	if _, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts()...); dropped != 0 {
		t.Fatalf("first batch: %d dropped", dropped)
	}
	m.Add(userClick(50, "x"), userClick(80, "a"), userClick(80, "cccc"), userClick(80, "b"))
	if rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts(runtime.FlushEventTime())...); !slices.Equal(rows, []string{"80-110:3"}) || dropped != 2 {
		t.Fatalf("second batch: %q, %d dropped; want [80-110:3], 2 dropped (50 and the first 80)", rows, dropped)
	}
	if late := lateClicks(lateSink); !slices.Equal(late, []string{"50 x", "80 a"}) {
		t.Fatalf("LateRows got %q, want [50 x 80 a]", late)
	}
}

// TestSessionLateRowsInTheirOrder: with JoiningOpenSessions, a batch's
// late rows join in the order they came, as Flink takes them: 72's
// session touches the open [80, 108) and joins it, then 63's touches the
// session 72 extended and joins too; in the other order, 63 comes when
// it touches no open session and is dropped, as in Flink.
func TestSessionLateRowsInTheirOrder(t *testing.T) {
	sessions := func(s typed.Stream[fixtures.Click]) typed.Stream[sessionCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Session(10*time.Second).JoiningOpenSessions(), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, _ string, n int64) sessionCount {
			return sessionCount{w.Start.Unix(), w.End.Unix(), n}
		})
	}
	text := func(s sessionCount) string { return fmt.Sprintf("%d-%d:%d", s.start, s.end, s.count) }
	runSparkSteps(t, typed.Append, sessions, text, []sparkStep{
		{add: []int{80, 89, 98}, stateRows: 1}, // [80, 108); the watermark moves to 88
		{add: []int{72, 63}, stateRows: 1},
		{add: []int{130}, want: []string{"63-108:5"}, stateRows: 1},
	})
	runSparkSteps(t, typed.Append, sessions, text, []sparkStep{
		{add: []int{80, 89, 98}, stateRows: 1},
		{add: []int{63, 72}, stateRows: 1, droppedRows: 1},
		{add: []int{130}, want: []string{"72-108:4"}, stateRows: 1},
	})
}
