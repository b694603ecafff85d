package typed_test

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// timeDifferenceCounts counts rows per user in the windows of a time
// difference d.
func timeDifferenceCounts(d time.Duration) func(typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
	return func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.TimeDifference(d), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow)
	}
}

// loopTimeDifference is the independent answer, from Kafka Streams'
// definition of its sliding windows: per user, in milliseconds, the
// window [t-d, t] of each row's time t, and [t+1, t+1+d] when a row falls
// in it; each window's count is of the rows between its bounds, both
// included. A window is written half-open, ending 1 ms after its last
// instant.
func loopTimeDifference(in []fixtures.Click, d time.Duration) map[string]float64 {
	out := map[string]float64{}
	for _, w := range loopTimeDifferenceRows(in, d) {
		out[w.id()] = w.Value
	}
	return out
}

// loopTimeDifferenceRows is loopTimeDifference's windows as rows.
func loopTimeDifferenceRows(in []fixtures.Click, d time.Duration) []windowCount {
	diff := d.Milliseconds()
	byUser := map[string][]int64{}
	for _, c := range in {
		byUser[c.User] = append(byUser[c.User], c.Time.UnixMilli())
	}
	var out []windowCount
	for user, times := range byUser {
		windows := map[int64]bool{} // by start
		for _, t := range times {
			windows[t-diff] = true
			for _, u := range times {
				if u > t && u <= t+1+diff {
					windows[t+1] = true
				}
			}
		}
		for start := range windows {
			n := 0
			for _, t := range times {
				if t >= start && t <= start+diff {
					n++
				}
			}
			w := typed.Window{Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(start + diff + 1).UTC()}
			out = append(out, windowCount{Window: w, User: user, Value: float64(n)})
		}
	}
	return out
}

// TestTimeDifferenceExample: the example of Kafka Streams' SlidingWindows
// documentation, a difference of 5 s and rows at 8 s, 9.2 s and 12.4 s,
// makes its five windows, each with its rows.
func TestTimeDifferenceExample(t *testing.T) {
	in := []fixtures.Click{
		{User: "A", Time: time.UnixMilli(8000).UTC()},
		{User: "A", Time: time.UnixMilli(9200).UTC()},
		{User: "A", Time: time.UnixMilli(12400).UTC()},
	}
	ms := func(start, end int64) typed.Window {
		return typed.Window{Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(end + 1).UTC()}
	}
	want := map[string]float64{}
	for _, w := range []struct {
		start, end int64
		n          float64
	}{{3000, 8000, 1}, {4200, 9200, 2}, {7400, 12400, 3}, {8001, 13001, 2}, {9201, 14201, 1}} {
		want[windowCount{Window: ms(w.start, w.end), User: "A"}.id()] = w.n
	}
	for _, perBatch := range []int{0, 1} {
		got := writtenOnce(t, runWindows(t, in, perBatch, typed.Append, true, timeDifferenceCounts(5*time.Second)))
		sameTable(t, fmt.Sprint(perBatch, " per batch"), got, want)
	}
}

// TestTimeDifferenceWindows compares the counts in the windows of a time
// difference with a plain loop over Kafka Streams' definition, in each
// output mode, under several batch sizes and a restart: Update's latest
// row per window, Complete's last table, and Append's rows (each window
// once, after the input is flushed). The rows come out of order within
// the watermark's delay, and some at instants within a millisecond.
func TestTimeDifferenceWindows(t *testing.T) {
	in := orderedClicks(300)
	for i := range in {
		in[i].Time = in[i].Time.Add(time.Duration(i%5) * 300 * time.Microsecond)
		if i%4 == 1 && i+1 < len(in) {
			in[i].Time, in[i+1].Time = in[i+1].Time, in[i].Time // 7 s out of order; the delay is 30 s
		}
	}
	for _, d := range []time.Duration{20 * time.Second, 2 * time.Minute} {
		// A user whose rows are d, d±1ms or 1 ms apart: windows that
		// begin or end at another row's instant.
		in := slices.Clone(in)
		edge := at(100)
		for _, gap := range []time.Duration{0, d, time.Millisecond, d, d + time.Millisecond, d - time.Millisecond, time.Millisecond, d + time.Millisecond, d} {
			edge = edge.Add(gap)
			in = append(in, fixtures.Click{User: "edge", Time: edge})
		}
		slices.SortStableFunc(in, func(a, b fixtures.Click) int { return a.Time.Compare(b.Time) })
		want := loopTimeDifference(in, d)
		for _, perBatch := range []int{0, 17, 60} {
			t.Run(fmt.Sprintf("%v/%d per batch", d, perBatch), func(t *testing.T) {
				got := map[string]float64{}
				for _, rows := range sortedBatches(runWindows(t, in, perBatch, typed.Update, false, timeDifferenceCounts(d))) {
					for _, r := range rows {
						got[r.id()] = r.Value
					}
				}
				sameTable(t, "update", got, want)
				batches := sortedBatches(runWindows(t, in, perBatch, typed.Complete, false, timeDifferenceCounts(d)))
				got = map[string]float64{}
				for _, r := range batches[len(batches)-1] {
					got[r.id()] = r.Value
				}
				sameTable(t, "complete", got, want)
				sameTable(t, "append", writtenOnce(t, runWindows(t, in, perBatch, typed.Append, true, timeDifferenceCounts(d))), want)
			})
		}
	}
}

// TestTimeDifferenceClosedWindows: with a difference of 5 s and a delay
// of 1 s, rows at 10 s and 12 s put the watermark at 11 s; a row at 11 s
// then is not late, counts in the windows still open, and makes its own,
// [6 s, 11 s], which ends at the watermark and so is still open (Kafka
// Streams updates a window while its end is at or after the stream time
// less the grace), but not [5 s, 10 s]'s successor or any window that
// closed. Once the input is flushed, no state is left.
func TestTimeDifferenceClosedWindows(t *testing.T) {
	got, ck := closedWindowsRun(t, false)
	if want := []string{"[10001, 15002) 2", "[11001, 16002) 1", "[5000, 10001) 1", "[6000, 11001) 2", "[7000, 12001) 3"}; !slices.Equal(got, want) {
		t.Errorf("windows %q, want %q", got, want)
	}
	// Every window has closed: the key's state is gone, its last instant
	// too, though no window follows it.
	c, meta := openCheckpoint(t, ck.fs)
	defer c.Close()
	err := c.Rows(meta, 0, "", func(r runtime.StateRow) error {
		return fmt.Errorf("state left for %s: %s", r.Key, r.Value)
	})
	if err != nil {
		t.Error(err)
	}
}

// closedWindowsRun runs TestTimeDifferenceClosedWindows' rows, the first
// run's windows closing at their last instant when atEndFirst (as before
// WindowsMeta.PastEnd), and returns the windows written, each once, and
// the checkpoint.
func closedWindowsRun(t *testing.T, atEndFirst bool) ([]string, *checkpoint) {
	t.Helper()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := newSink[windowCount]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, time.Second)
	w := typed.WriteTo(timeDifferenceCounts(5*time.Second)(s), sink).OutputMode(typed.Append)
	ck := newCheckpoint()
	row := func(ms int64) fixtures.Click { return fixtures.Click{User: "a", Time: time.UnixMilli(ms).UTC()} }
	typed.WriteTimeDifferenceAtEnd(atEndFirst)
	defer typed.WriteTimeDifferenceAtEnd(false)
	m.Add(row(10000), row(12000))
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	typed.WriteTimeDifferenceAtEnd(false)
	m.Add(row(11000))
	if err := runToEnd(t, w, ck.opts(runtime.FlushEventTime())...); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range writtenOnceRows(t, sink.snapshot()) {
		got = append(got, fmt.Sprintf("[%d, %d) %v", r.Window.Start.UnixMilli(), r.Window.End.UnixMilli(), r.Value))
	}
	slices.Sort(got)
	return got, ck
}

// TestTimeDifferenceUpdates: in Update mode a batch writes the windows
// it changed, those that hold one of its rows and those it made, and no
// other. A difference of 5 s and a delay of 1 s; rows at 10 s and 12 s,
// then at 16.5 s: the second batch makes [11.5 s, 16.5 s] and [12.001 s,
// 17.001 s], and leaves [7 s, 12 s] and [10.001 s, 15.001 s] as they were;
// a row at 11 s then makes [11.001 s, 16.001 s], which holds the row at
// 12 s but not its own, and changes no window still open; a row at 15.5
// s, the watermark, changes the windows still open that hold it and makes
// [15.501 s, 20.501 s] and its own, [10.5 s, 15.5 s], which ends at the
// watermark and so is still open, as in Kafka Streams.
func TestTimeDifferenceUpdates(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := newSink[windowCount]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, time.Second)
	w := typed.WriteTo(timeDifferenceCounts(5*time.Second)(s), sink).OutputMode(typed.Update)
	ck := newCheckpoint()
	row := func(ms int64) fixtures.Click { return fixtures.Click{User: "a", Time: time.UnixMilli(ms).UTC()} }
	var batches []string
	for _, rows := range [][]fixtures.Click{{row(10000), row(12000)}, {row(16500)}, {row(11000)}, {row(15500)}} {
		m.Add(rows...)
		before := len(sink.rows())
		if err := runToEnd(t, w, ck.opts()...); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range sink.rows()[before:] {
			got = append(got, fmt.Sprintf("[%d, %d) %v", r.Window.Start.UnixMilli(), r.Window.End.UnixMilli(), r.Value))
		}
		slices.Sort(got)
		batches = append(batches, fmt.Sprint(got))
	}
	want := []string{"[[10001, 15002) 1 [5000, 10001) 1 [7000, 12001) 2]", "[[11500, 16501) 2 [12001, 17002) 1]", "[[11001, 16002) 1]",
		"[[10500, 15501) 3 [11001, 16002) 2 [11500, 16501) 3 [12001, 17002) 2 [15501, 20502) 1]"}
	if !slices.Equal(batches, want) {
		t.Errorf("written %q, want %q", batches, want)
	}
	// The checkpoint keeps the instants open windows need: not 10 s, whose
	// last window, [10.001 s, 15.001 s], has closed.
	c, meta := openCheckpoint(t, ck.fs)
	defer c.Close()
	var kept []string
	err := c.Rows(meta, 0, "", func(r runtime.StateRow) error {
		var instants []struct {
			Time  time.Time       `json:"time"`
			Value json.RawMessage `json:"value"`
		}
		if err := json.Unmarshal(r.Value, &instants); err != nil {
			return fmt.Errorf("%s: %w", r.Value, err)
		}
		for _, i := range instants {
			kept = append(kept, fmt.Sprintf("%s %d", r.Key, i.Time.UnixMilli()))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{`"a" 11000`, `"a" 12000`, `"a" 15500`, `"a" 16500`}; !slices.Equal(kept, want) {
		t.Errorf("the checkpoint keeps %q, want %q", kept, want)
	}
}

// TestTimeDifferenceLateRows: a row is dropped as late when the window
// that begins after it ends at or before the watermark, as Kafka Streams
// drops a record; a row not late counts in the open windows only, and
// makes no window that has closed (a window closes once the watermark is
// past its last instant: Kafka Streams updates a window while its end is
// at or after the stream time less the grace). A difference of 5 s and no
// delay: after a row at 10 s, a row at 4 s is late (its following window
// ends at 9.001 s), while rows at 5 s and 6 s are not: their own windows,
// [0 s, 5 s] and [1 s, 6 s], have closed, but the row at 10 s's, [5 s,
// 10 s], ending at the watermark, is open and counts them, and the ones
// after them stay open: [5.001 s, 10.001 s] holds the rows at 6 s and 10
// s, [6.001 s, 11.001 s] the row at 10 s.
func TestTimeDifferenceLateRows(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := newSink[windowCount]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0)
	w := typed.WriteTo(timeDifferenceCounts(5*time.Second)(s), sink).OutputMode(typed.Append)
	ck := newCheckpoint()
	row := func(ms int64) fixtures.Click { return fixtures.Click{User: "a", Time: time.UnixMilli(ms).UTC()} }
	m.Add(row(10000))
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	m.Add(row(4000), row(5000), row(6000))
	q, err := w.Start(t.Context(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	var dropped int64
	for _, p := range q.RecentProgress() {
		for _, op := range p.StateOperators {
			dropped += op.NumRowsDroppedByWatermark
		}
	}
	if dropped != 1 {
		t.Errorf("%d rows dropped as late, want 1", dropped)
	}
	var got []string
	for _, r := range writtenOnceRows(t, sink.snapshot()) {
		got = append(got, fmt.Sprintf("[%d, %d) %v", r.Window.Start.UnixMilli(), r.Window.End.UnixMilli(), r.Value))
	}
	slices.Sort(got)
	if want := []string{"[5000, 10001) 3", "[5001, 10002) 2", "[6001, 11002) 1"}; !slices.Equal(got, want) {
		t.Errorf("windows %q, want %q", got, want)
	}
}

// writtenOnceRows returns the rows of batches, each window once.
func writtenOnceRows(t *testing.T, batches map[int64][]windowCount) []windowCount {
	t.Helper()
	seen := map[string]bool{}
	var rows []windowCount
	for _, b := range sortedBatches(batches) {
		for _, r := range b {
			if seen[r.id()] {
				t.Fatalf("%s written twice", r.id())
			}
			seen[r.id()] = true
			rows = append(rows, r)
		}
	}
	return rows
}

// TestTimeDifferenceChanged: a checkpoint of windows of one time
// difference is refused to a query of another, saying both: the stored
// windows' timers are at the old windows' ends.
func TestTimeDifferenceChanged(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(fixtures.Click{User: "a", Time: time.UnixMilli(10000).UTC()})
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0)
	ck := newCheckpoint()
	if err := runToEnd(t, typed.WriteTo(timeDifferenceCounts(5*time.Second)(s), newSink[windowCount]()), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	err := runToEnd(t, typed.WriteTo(timeDifferenceCounts(6*time.Second)(s), newSink[windowCount]()), ck.opts()...)
	if want := "its windows were windows of rows at most 5s apart, are now windows of rows at most 6s apart"; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("start with another difference: %v, want an error containing %q", err, want)
	}
}

// TestTimeDifferenceClosesOnTime: in Append mode each window is written
// as soon as the watermark passes its last instant, not a batch later,
// and not before (not when the watermark is on it). Rows of two users
// come in batches, some out of order but none late, at gaps that put the
// watermark now and then exactly on a window's last instant, or 1 ms
// past it: a row's own, or that of the window after it. After each batch
// (the query restarted on its checkpoint each time), the windows written
// are those of a plain loop over the rows so far whose last instant is
// before the watermark.
func TestTimeDifferenceClosesOnTime(t *testing.T) {
	const d, delay = 2000, 1000 // ms
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := newSink[windowCount]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, delay*time.Millisecond)
	w := typed.WriteTo(timeDifferenceCounts(d*time.Millisecond)(s), sink).OutputMode(typed.Append)
	ck := newCheckpoint()
	rng := rand.New(rand.NewPCG(7, 23))
	gaps := []int64{0, 1, delay - 1, delay, delay + 1, d, d + 1, d + 1 + delay, d + delay - 1}
	var in []fixtures.Click
	high := int64(100_000) // the greatest time so far
	for batch := range 200 {
		low := high - delay // the watermark the batch runs with
		var rows []fixtures.Click
		for range 1 + rng.IntN(4) {
			var ms int64
			switch rng.IntN(4) {
			case 0:
				ms = low + 1 + rng.Int64N(delay)*int64(rng.IntN(2)) // out of order, not late: at times the earliest such
			case 1:
				// The watermark on a recent row's instant, or on the
				// last instant of the window after it, or 1 ms past
				// either.
				recent := high
				if len(in) > 0 {
					recent = in[len(in)-1-rng.IntN(min(len(in), 6))].Time.UnixMilli()
				}
				high = max(high, recent+delay+[]int64{0, 1, 1 + d, 2 + d}[rng.IntN(4)])
				ms = high
			default:
				high += gaps[rng.IntN(len(gaps))]
				ms = high
			}
			rows = append(rows, fixtures.Click{User: []string{"a", "b"}[rng.IntN(2)], Time: time.UnixMilli(ms).UTC()})
		}
		m.Add(rows...)
		in = append(in, rows...)
		if err := runToEnd(t, w, ck.opts()...); err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{}
		for _, w := range loopTimeDifferenceRows(in, d*time.Millisecond) {
			if w.Window.End.UnixMilli()-1 < high-delay {
				want[w.id()] = w.Value
			}
		}
		sameTable(t, fmt.Sprintf("after batch %d, watermark %d", batch, high-delay), writtenOnce(t, sink.snapshot()), want)
	}
}

// TestTimeDifferenceTimersForStateWithout: state written without timers
// (a query that ran without a watermark) gets a timer at the key's next
// row once the query runs with one: the key's instants are forgotten
// once the watermark passes them, though its new row makes no end
// earlier than its old instants would.
func TestTimeDifferenceTimersForStateWithout(t *testing.T) {
	const d = 2 * time.Second
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := newSink[windowCount]()
	ck := newCheckpoint()
	row := func(user string, sec int64) fixtures.Click {
		return fixtures.Click{User: user, Time: time.Unix(sec, 0).UTC()}
	}
	m.Add(row("a", 100))
	if err := runToEnd(t, typed.WriteTo(timeDifferenceCounts(d)(typed.FromMemory(m)), sink).OutputMode(typed.Update), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	w := typed.WriteTo(timeDifferenceCounts(d)(typed.WithWatermark(typed.FromMemory(m), clickTime, time.Second)), sink).OutputMode(typed.Update)
	var rows int64
	for _, r := range []fixtures.Click{row("a", 200), row("b", 10_000), row("b", 20_000), row("b", 30_000)} {
		m.Add(r)
		q, err := w.Start(t.Context(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		p, _ := q.LastProgress()
		rows = p.StateOperators[0].NumRowsTotal
	}
	if rows != 1 {
		t.Errorf("%d keys keep state, want 1 (b's row at 30,000 s): a's rows at 100 s and 200 s are long past the watermark", rows)
	}
}

// TestTimeDifferenceCheckpointKeepsItsRule: a checkpoint whose windows
// closed once the watermark reached their last instant (written before
// they closed once it is past it) keeps that rule, so that a window it
// wrote is not written again: with the rows of
// TestTimeDifferenceClosedWindows, run first with the old rule and then
// with the new one on its checkpoint, the windows are the old rule's,
// each once (TestTimeDifferenceClosedWindows: a new checkpoint takes the
// new rule).
func TestTimeDifferenceCheckpointKeepsItsRule(t *testing.T) {
	got, _ := closedWindowsRun(t, true)
	if want := []string{"[10001, 15002) 2", "[11001, 16002) 1", "[5000, 10001) 1", "[7000, 12001) 3"}; !slices.Equal(got, want) {
		t.Errorf("on a checkpoint of the old rule: windows %q, want %q", got, want)
	}
}
