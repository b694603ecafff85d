package typed_test

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// windowCount is an output row of the aggregation tests.
type windowCount struct {
	Window typed.Window
	User   string
	Value  float64
}

func (w windowCount) id() string {
	return fmt.Sprintf("%s %s", w.Window, w.User)
}

// orderedClicks makes n clicks of users in increasing event time (no row
// is late), a second apart with some jitter, starting at at(0).
func orderedClicks(n int) []fixtures.Click {
	in := clicks(n, 21)
	for i := range in {
		in[i].Time = at(i*7 + i%3)
	}
	return in
}

// runWindows runs an aggregation over in, with the input split in
// batches of perBatch rows and the query restarted on its checkpoint
// after the first third, with the options more, and returns the sink's
// batches.
func runWindows(t *testing.T, in []fixtures.Click, perBatch int, mode typed.OutputMode, flush bool,
	build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount], more ...runtime.Option) map[int64][]windowCount {
	t.Helper()
	return runWindowsRestarted(t, in, perBatch, mode, flush, build, func() {}, more...)
}

// runWindowsRestarted is runWindows, calling restart before the query
// starts again.
func runWindowsRestarted(t *testing.T, in []fixtures.Click, perBatch int, mode typed.OutputMode, flush bool,
	build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount], restart func(), more ...runtime.Option) map[int64][]windowCount {
	t.Helper()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
	sink := newSink[windowCount]()
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 30*time.Second)
	w := typed.WriteTo(build(s), sink).OutputMode(mode)
	ck := newCheckpoint()
	third := len(in) / 3
	m.Add(in[:third]...)
	if err := runToEnd(t, w, ck.opts(more...)...); err != nil {
		t.Fatal(err)
	}
	m.Add(in[third:]...)
	restart()
	opts := ck.opts(more...)
	if flush {
		opts = append(opts, runtime.FlushEventTime())
	}
	if err := runToEnd(t, w, opts...); err != nil {
		t.Fatal(err)
	}
	return sink.snapshot()
}

// appendedWindows runs build over in as runWindows does, in Append
// mode, and returns each window's value, failing on a window written
// twice.
func appendedWindows(t *testing.T, in []fixtures.Click, perBatch int, build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, rows := range sortedBatches(runWindows(t, in, perBatch, typed.Append, true, build)) {
		for _, r := range rows {
			if _, dup := got[r.id()]; dup {
				t.Fatalf("append, %d per batch: %s written twice", perBatch, r.id())
			}
			got[r.id()] = r.Value
		}
	}
	return got
}

// latestWindows runs build over in as runWindows does, in Update mode,
// and returns each window's latest value.
func latestWindows(t *testing.T, in []fixtures.Click, perBatch int, build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]) map[string]float64 {
	t.Helper()
	got := map[string]float64{}
	for _, rows := range sortedBatches(runWindows(t, in, perBatch, typed.Update, false, build)) {
		for _, r := range rows {
			got[r.id()] = r.Value
		}
	}
	return got
}

// loopWindows is the independent answer: for each row, each window that
// covers it (computed from the definition: starts at multiples of slide
// that cover t), a count per window and user.
func loopWindows(in []fixtures.Click, size, slide time.Duration) map[string]float64 {
	return loopWindowsFrom(in, size, slide, 0)
}

// loopWindowsFrom is loopWindows for windows starting at offset (plus
// multiples of slide).
func loopWindowsFrom(in []fixtures.Click, size, slide, offset time.Duration) map[string]float64 {
	out := map[string]float64{}
	for _, c := range in {
		for start := c.Time.Add(-offset).Truncate(slide).Add(offset); start.After(c.Time.Add(-size)); start = start.Add(-slide) {
			w := typed.Window{Start: start.UTC(), End: start.Add(size).UTC()}
			out[windowCount{Window: w, User: c.User}.id()]++
		}
	}
	return out
}

// loopCumulative is loopWindows for Cumulate(step, size).StartingAt(offset):
// each row counts in every window of its period (size long, starting at
// offset plus a multiple of size from the epoch) that begins with the
// period and ends at a multiple of step past it, after the row.
func loopCumulative(in []fixtures.Click, step, size, offset time.Duration) map[string]float64 {
	out := map[string]float64{}
	for _, c := range in {
		ns := c.Time.UnixNano()
		period := ns - ((ns-int64(offset))%int64(size)+int64(size))%int64(size)
		for k := int64(1); k*int64(step) <= int64(size); k++ {
			if end := period + k*int64(step); end > ns {
				w := typed.Window{Start: time.Unix(0, period).UTC(), End: time.Unix(0, end).UTC()}
				out[windowCount{Window: w, User: c.User}.id()]++
			}
		}
	}
	return out
}

func countRow(w typed.Window, user string, n int64) windowCount {
	return windowCount{Window: w, User: user, Value: float64(n)}
}

// TestWindowedCounts compares counts per window and user with a plain loop,
// for tumbling and sliding windows, in each output mode, under several
// batch sizes and a restart: Update's latest row per window, Complete's
// last table, and Append's rows (each window exactly once, after the
// input is flushed).
func TestWindowedCounts(t *testing.T) {
	in := orderedClicks(300)
	for _, win := range []struct {
		name        string
		size, slide time.Duration
		// step, when set, makes the windows Cumulate(step, size); all
		// start at offset.
		step, offset time.Duration
	}{
		{"tumbling", time.Minute, time.Minute, 0, 0},
		{"tumbling, starting at 15s", time.Minute, time.Minute, 0, 15 * time.Second},
		{"sliding by its size, starting at -7s", time.Minute, time.Minute, 0, -7 * time.Second},
		{"sliding", time.Minute, 20 * time.Second, 0, 0},
		// 15 windows per row: more than the group front keeps (windowFront).
		{"sliding/15 windows a row", 5 * time.Minute, 20 * time.Second, 0, 0},
		{"cumulate", time.Minute, 0, 20 * time.Second, 0},
		// Up to 12 windows a row, which all start together.
		{"cumulate/12 windows, starting at 15s", 4 * time.Minute, 0, 20 * time.Second, 15 * time.Second},
	} {
		var want map[string]float64
		var windows typed.Windows
		switch {
		case win.step != 0:
			want = loopCumulative(in, win.step, win.size, win.offset)
			windows = typed.Cumulate(win.step, win.size).StartingAt(win.offset)
		case strings.HasPrefix(win.name, "tumbling"):
			want = loopWindowsFrom(in, win.size, win.slide, win.offset)
			windows = typed.Tumbling(win.size).StartingAt(win.offset)
		default:
			want = loopWindowsFrom(in, win.size, win.slide, win.offset)
			windows = typed.Sliding(win.size, win.slide).StartingAt(win.offset)
		}
		build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
			ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, windows, func(c *fixtures.Click) string { return c.User })
			return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow)
		}
		for _, perBatch := range []int{0, 17, 60} {
			t.Run(fmt.Sprintf("%s/%d per batch", win.name, perBatch), func(t *testing.T) {
				// Update: the latest row of each window is its count.
				got := latestWindows(t, in, perBatch, build)
				sameTable(t, "update", got, want)
				// Complete: the last batch holds the whole table.
				batches := sortedBatches(runWindows(t, in, perBatch, typed.Complete, false, build))
				got = map[string]float64{}
				for _, r := range batches[len(batches)-1] {
					got[r.id()] = r.Value
				}
				sameTable(t, "complete", got, want)
				// Append: every window once, final.
				got = map[string]float64{}
				for _, rows := range sortedBatches(runWindows(t, in, perBatch, typed.Append, true, build)) {
					for _, r := range rows {
						if _, dup := got[r.id()]; dup {
							t.Fatalf("append: window %s written twice", r.id())
						}
						got[r.id()] = r.Value
					}
				}
				sameTable(t, "append", got, want)
			})
		}
	}
}

func sortedBatches[T any](m map[int64][]T) [][]T {
	ids := slices.Sorted(maps.Keys(m))
	out := make([][]T, len(ids))
	for i, id := range ids {
		out[i] = m[id]
	}
	return out
}

func sameTable(t *testing.T, what string, got, want map[string]float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || math.Abs(g-w) > 1e-9 {
			t.Fatalf("%s: %s = %v, want %v", what, k, g, w)
		}
	}
}

// TestSessionWindows compares session windows (a gap of 20 s) with a plain
// loop that sorts each user's rows by time and cuts where two are more
// than 20 s apart (rows exactly 20 s apart are one session, as in Spark
// and Flink): the sessions, their counts, and (Append mode) each written
// once. The second input has rows every 5 s, so that many of a user's
// rows are exactly the gap apart.
func TestSessionWindows(t *testing.T) {
	even := clicks(200, 21)
	for i := range even {
		even[i].Time = at(i * 5)
	}
	for _, in := range [][]fixtures.Click{orderedClicks(200), even} {
		testSessionWindows(t, in)
	}
}

func testSessionWindows(t *testing.T, in []fixtures.Click) {
	gap := 20 * time.Second
	want := map[string]float64{}
	byUser := map[string][]time.Time{}
	for _, c := range in {
		byUser[c.User] = append(byUser[c.User], c.Time)
	}
	for user, times := range byUser {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		start, last, n := times[0], times[0], 0
		for _, tm := range times {
			if tm.Sub(last) > gap {
				want[windowCount{Window: typed.Window{Start: start, End: last.Add(gap)}, User: user}.id()] = float64(n)
				start, n = tm, 0
			}
			last = tm
			n++
		}
		want[windowCount{Window: typed.Window{Start: start, End: last.Add(gap)}, User: user}.id()] = float64(n)
	}
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Session(gap), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow)
	}
	checkSessions(t, in, want, nil, build)
}

// checkSessions runs build over in under two batch splits and a restart:
// Append must write each session of want once, with its count, and
// Complete's last batch must be complete, which drops no late row (want
// when complete is nil). (Spark refuses Update for sessions.)
func checkSessions(t *testing.T, in []fixtures.Click, want, complete map[string]float64, build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]) {
	if complete == nil {
		complete = want
	}
	t.Helper()
	for _, perBatch := range []int{0, 13} {
		got := appendedWindows(t, in, perBatch, build)
		sameTable(t, fmt.Sprintf("sessions, %d per batch", perBatch), got, want)
		batches := sortedBatches(runWindows(t, in, perBatch, typed.Complete, false, build))
		got = map[string]float64{}
		for _, r := range batches[len(batches)-1] {
			got[r.id()] = r.Value
		}
		sameTable(t, fmt.Sprintf("complete, %d per batch", perBatch), got, complete)
	}
}

// TestSessionWindowsGapBy compares session windows whose rows each have
// a gap of their own (GapBy: 10, 25 or 40 s by page, none for page p0)
// with a plain loop: each row that has a gap and is not late makes
// [t, t+gap), and a user's intervals that overlap or touch are one
// session. Four rows of a user of their own arrive 15 s before the
// watermark, right after the restart: those with a gap of 10 s are late
// (their own session would end before the watermark), the other two make
// a session.
func TestSessionWindowsGapBy(t *testing.T) {
	gapOf := func(c *fixtures.Click) time.Duration {
		switch c.Page {
		case "p0":
			return 0
		case "p1":
			return 10 * time.Second
		case "p2":
			return 25 * time.Second
		}
		return 40 * time.Second
	}
	base := orderedClicks(200)
	cut := (len(base) + 4) / 3 // where runWindows restarts the query
	wm := base[cut-1].Time.Add(-30 * time.Second)
	var arrivals []fixtures.Click
	for _, page := range []string{"p1", "p2", "p3", "p1"} {
		// (A user of their own: a session closed before them is not
		// theirs to extend, as it would be in one batch.)
		arrivals = append(arrivals, fixtures.Click{User: "zed", Time: wm.Add(-15 * time.Second), Page: page})
	}
	in := slices.Concat(base[:cut], arrivals, base[cut:])

	sessions := func(dropLate bool) map[string]float64 {
		byUser := map[string][]interval{}
		for i, c := range in {
			g := gapOf(&c)
			// Only the arrivals come after the watermark has passed their
			// time; Complete mode drops no late row.
			if arrival := i >= cut && i < cut+len(arrivals); g <= 0 || dropLate && arrival && c.Time.Add(g).Compare(wm) <= 0 {
				continue
			}
			byUser[c.User] = append(byUser[c.User], interval{c.Time, c.Time.Add(g), 1})
		}
		return mergeIntervals(byUser)
	}
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Session(time.Minute), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws.GapBy(gapOf), typed.Count[fixtures.Click](), countRow)
	}
	checkSessions(t, in, sessions(true), sessions(false), build)
	tumbling := typed.GroupByWindow(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("clicks", 0)),
		func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
	_, err := typed.WriteTo(typed.AggregateWindows(tumbling.GapBy(gapOf), typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).
		Start(context.Background(), newCheckpoint().opts()...)
	if err == nil || !strings.Contains(err.Error(), "GapBy needs Session windows, not Tumbling(1m0s)") {
		t.Fatalf("GapBy of tumbling windows: %v, want a refusal", err)
	}
}

// interval is a row's own session in TestSessionWindowsGapBy.
type interval struct {
	start, end time.Time
	n          int
}

// mergeIntervals merges each user's intervals that overlap or touch into
// sessions, and returns their counts by window and user.
func mergeIntervals(byUser map[string][]interval) map[string]float64 {
	want := map[string]float64{}
	for user, ivs := range byUser {
		slices.SortStableFunc(ivs, func(a, b interval) int { return a.start.Compare(b.start) })
		cur := ivs[0]
		for _, iv := range ivs[1:] {
			if !iv.start.After(cur.end) {
				if iv.end.After(cur.end) {
					cur.end = iv.end
				}
				cur.n++
				continue
			}
			want[windowCount{Window: typed.Window{Start: cur.start, End: cur.end}, User: user}.id()] = float64(cur.n)
			cur = iv
		}
		want[windowCount{Window: typed.Window{Start: cur.start, End: cur.end}, User: user}.id()] = float64(cur.n)
	}
	return want
}

// userStat is a per-key aggregate row.
type userStat struct {
	User  string
	Value float64
}

// TestAggregateByKey: count, sum, avg, min and max per key, Update and
// Complete, against a plain loop.
func TestAggregateByKey(t *testing.T) {
	in := clicks(250, 31)
	value := func(c *fixtures.Click) float64 { return float64(len(c.Page)*7 + c.Time.Second()%13) }
	type loopAcc struct{ n, sum, min, max float64 }
	acc := map[string]*loopAcc{}
	for i := range in {
		c := &in[i]
		a := acc[c.User]
		if a == nil {
			a = &loopAcc{min: math.Inf(1), max: math.Inf(-1)}
			acc[c.User] = a
		}
		v := value(c)
		a.n++
		a.sum += v
		a.min, a.max = math.Min(a.min, v), math.Max(a.max, v)
	}
	for _, tc := range []struct {
		name  string
		agg   func(typed.KeyedStream[string, fixtures.Click]) typed.Stream[userStat]
		value func(*loopAcc) float64
	}{
		{"count", func(ks typed.KeyedStream[string, fixtures.Click]) typed.Stream[userStat] {
			return typed.AggregateByKey(ks, typed.Count[fixtures.Click](), func(u string, n int64) userStat { return userStat{u, float64(n)} })
		}, func(a *loopAcc) float64 { return a.n }},
		{"sum", func(ks typed.KeyedStream[string, fixtures.Click]) typed.Stream[userStat] {
			return typed.AggregateByKey(ks, typed.Sum(value), func(u string, v float64) userStat { return userStat{u, v} })
		}, func(a *loopAcc) float64 { return a.sum }},
		{"avg", func(ks typed.KeyedStream[string, fixtures.Click]) typed.Stream[userStat] {
			return typed.AggregateByKey(ks, typed.Avg(value), func(u string, v float64) userStat { return userStat{u, v} })
		}, func(a *loopAcc) float64 { return a.sum / a.n }},
		{"min", func(ks typed.KeyedStream[string, fixtures.Click]) typed.Stream[userStat] {
			return typed.AggregateByKey(ks, typed.Min(value), func(u string, v float64) userStat { return userStat{u, v} })
		}, func(a *loopAcc) float64 { return a.min }},
		{"max", func(ks typed.KeyedStream[string, fixtures.Click]) typed.Stream[userStat] {
			return typed.AggregateByKey(ks, typed.Max(value), func(u string, v float64) userStat { return userStat{u, v} })
		}, func(a *loopAcc) float64 { return a.max }},
	} {
		want := map[string]float64{}
		for u, a := range acc {
			want[u] = tc.value(a)
		}
		for _, mode := range []typed.OutputMode{typed.Update, typed.Complete} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 40)
			m.Add(in...)
			sink := newSink[userStat]()
			byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
			if err := runToEnd(t, typed.WriteTo(tc.agg(byUser), sink).OutputMode(mode), newCheckpoint().opts()...); err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			batches := sortedBatches(sink.snapshot())
			if mode == typed.Complete {
				batches = batches[len(batches)-1:]
			}
			for _, rows := range batches {
				for _, r := range rows {
					got[r.User] = r.Value
				}
			}
			sameTable(t, tc.name+" "+mode.String(), got, want)
		}
	}
}

// TestMinMaxNaN: NaN is greater than any other value in Min and Max, as
// in Spark (its NaN semantics: "NaN values go last when in ascending
// order") and Flink, whatever the order of the rows and their batches: a
// key's maximum is NaN once one of its values is, its minimum only when
// all are. (Compared with < and >, a NaN seen first stuck and one seen
// later was passed over.) Checked against a plain loop, with a batch of
// every row, of three and of one.
func TestMinMaxNaN(t *testing.T) {
	choices := []float64{math.NaN(), math.Inf(-1), -1, 0, 2, math.Inf(1)}
	rnd := rand.New(rand.NewPCG(5, 8))
	var in []fixtures.Click
	values := map[string][]float64{}
	for i := range 200 {
		user := fmt.Sprint("u", rnd.IntN(24))
		v := choices[rnd.IntN(len(choices))]
		if user >= "u20" {
			v = math.NaN() // keys of NaN only
		}
		values[user] = append(values[user], v)
		in = append(in, fixtures.Click{User: user, Time: at(i), Page: strconv.FormatFloat(v, 'g', -1, 64)})
	}
	value := func(c *fixtures.Click) float64 {
		v, _ := strconv.ParseFloat(c.Page, 64)
		return v
	}
	// Spark's order: the non-NaN values by <, then NaN.
	wantMin, wantMax := map[string]float64{}, map[string]float64{}
	for user, vs := range values {
		lo, hi, numbers := math.NaN(), math.NaN(), 0
		for _, v := range vs {
			if math.IsNaN(v) {
				continue
			}
			if numbers++; numbers == 1 || v < lo {
				lo = v
			}
			if numbers == 1 || v > hi {
				hi = v
			}
		}
		wantMin[user], wantMax[user] = lo, hi
		if numbers < len(vs) {
			wantMax[user] = math.NaN()
		}
	}
	for _, perBatch := range []int{0, 3, 1} {
		for name, agg := range map[string]typed.Aggregator[fixtures.Click, typed.ExtremeAcc, float64]{"min": typed.Min(value), "max": typed.Max(value)} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			m.Add(in...)
			byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
			sink := newSink[userStat]()
			out := typed.AggregateByKey(byUser, agg, func(u string, v float64) userStat { return userStat{u, v} })
			if err := runToEnd(t, typed.WriteTo(out, sink), newCheckpoint().opts()...); err != nil {
				t.Fatal(err)
			}
			want := map[string]map[string]float64{"min": wantMin, "max": wantMax}[name]
			got := map[string]float64{}
			for _, rows := range sortedBatches(sink.snapshot()) {
				for _, r := range rows {
					got[r.User] = r.Value
				}
			}
			for user, w := range want {
				if g, ok := got[user]; !ok || fmt.Sprint(g) != fmt.Sprint(w) {
					t.Errorf("%s of %s (%d a batch) over %v: %v, want %v", name, user, perBatch, values[user], g, w)
				}
			}
		}
	}
}

// TestAggregationOutputModes: Append needs windows and a watermark;
// mapGroupsWithState needs the Update mode, with an aggregation too.
func TestAggregationOutputModes(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateByKey(byUser, typed.Count[fixtures.Click](), func(u string, n int64) userStat { return userStat{u, float64(n)} })
	_, err := typed.WriteTo(counts, newSink[userStat]()).OutputMode(typed.Append).Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "Append output mode needs event-time windows and a watermark") {
		t.Fatalf("append without windows: err = %v", err)
	}
	noWatermark := typed.GroupByWindow(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
	_, err = typed.WriteTo(typed.AggregateWindows(noWatermark, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Append).Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "needs event-time windows and a watermark") {
		t.Fatalf("append without a watermark: err = %v", err)
	}
	mapped := typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks)
	again := typed.AggregateByKey(typed.GroupByKey(mapped, func(u *fixtures.UserCount) string { return u.User }), typed.Count[fixtures.UserCount](), func(u string, n int64) userStat { return userStat{u, float64(n)} })
	_, err = typed.WriteTo(again, newSink[userStat]()).OutputMode(typed.Complete).Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "mapGroupsWithState (github.com/streamgen/streamgen/typed_test.countClicks) needs the Update output mode; the query has Complete") {
		t.Fatalf("mapGroupsWithState before an aggregation, in Complete mode: err = %v", err)
	}
}

// TestSessionOutputModes: session windows are refused in Update mode, as
// Spark refuses them (a row that merges two sessions would leave the
// rows written for those standing: a sink upserting by window and key
// kept [0, 10) and [15, 25) beside the [0, 25) that merged them); without
// OutputMode their query is in Append mode, which writes each session
// once, merged, and which needs a watermark (else Complete).
func TestSessionOutputModes(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sessions := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Session(10*time.Second), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow)
	}
	watermarked := typed.WithWatermark(typed.FromMemory(m), clickTime, time.Hour)
	_, err := typed.WriteTo(sessions(watermarked), newSink[windowCount]()).OutputMode(typed.Update).Start(t.Context(), newCheckpoint().opts()...)
	if err == nil || !strings.Contains(err.Error(), "Update output mode not supported for session window") {
		t.Fatalf("sessions in Update mode: %v, want Spark's refusal", err)
	}
	_, err = typed.WriteTo(sessions(typed.FromMemory(m)), newSink[windowCount]()).Start(t.Context(), newCheckpoint().opts()...)
	if err == nil || !strings.Contains(err.Error(), "needs a watermark") || !strings.Contains(err.Error(), "typed.Complete") {
		t.Fatalf("sessions without a watermark, no mode given: %v, want Append refused, Complete named", err)
	}
	// The default: Append. Rows at 0 and 15, then 8, which merges them:
	// one session, written once, when the input ends.
	sink := newSink[windowCount]()
	w := typed.WriteTo(sessions(watermarked), sink)
	ck := newCheckpoint()
	m.Add(userClick(0, ""), userClick(15, ""))
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	m.Add(userClick(8, ""))
	if err := runToEnd(t, w, ck.opts(runtime.FlushEventTime())...); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range sink.rows() {
		got = append(got, fmt.Sprintf("%d-%d:%v", r.Window.Start.Unix(), r.Window.End.Unix(), r.Value))
	}
	if want := []string{"0-25:3"}; !slices.Equal(got, want) {
		t.Errorf("sessions written %q, want %q", got, want)
	}
}

// TestWindowsRefused: windows that cannot be are refused at Start, with
// what is wrong.
func TestWindowsRefused(t *testing.T) {
	for _, tc := range []struct {
		windows typed.Windows
		want    string
	}{
		{typed.Session(0), "Session(0s): the gap must be positive"},
		{typed.TimeDifference(1500 * time.Microsecond), "a positive whole number of milliseconds"},
		{typed.Sliding(time.Minute, 0), "both must be positive"},
		{typed.Tumbling(time.Minute).JoiningOpenSessions(), "Tumbling(1m0s).JoiningOpenSessions(): only session windows have sessions to join"},
		{typed.Cumulate(0, time.Hour), "Cumulate(0s, 1h0m0s): the step and the size must be positive"},
		{typed.Cumulate(7*time.Minute, time.Hour), "Cumulate(7m0s, 1h0m0s): the size must be a whole multiple of the step"},
		{typed.Tumbling(21 * 365 * 24 * time.Hour), "a window's size, slide, step or gap may be 20 years at most"},
		{typed.Session(200_000 * time.Hour), "a window's size, slide, step or gap may be 20 years at most"},
	} {
		src := typed.WithWatermark(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("clicks", 0)), clickTime, time.Minute)
		counts := typed.AggregateWindows(typed.GroupByWindow(src, clickTime, tc.windows, func(c *fixtures.Click) string { return c.User }),
			typed.Count[fixtures.Click](), countRow)
		q, err := typed.WriteTo(counts, newSink[windowCount]()).Start(t.Context())
		if err == nil {
			q.Stop()
			t.Fatalf("%v: started", tc.windows)
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %q, want one saying %q", tc.windows, err, tc.want)
		}
	}
}

// TestWindowsReadTheirRowsEventTime: a windowed aggregation given the
// WithWatermark's own function reuses the time it read for the row as
// pushed (eventNanosOf), but reads its rows' time itself once they are
// other rows (a Map between, which moves each click an hour later), or
// with a function of its own: in each, the windows are the loop's over
// the times the aggregation's function gives, tumbling and sliding.
func TestWindowsReadTheirRowsEventTime(t *testing.T) {
	in := orderedClicks(200)
	later := slices.Clone(in)
	for i := range later {
		later[i].Time = later[i].Time.Add(time.Hour)
	}
	minuteLater := func(c *fixtures.Click) time.Time { return c.Time.Add(time.Minute) }
	shifted := slices.Clone(in)
	for i := range shifted {
		shifted[i].Time = shifted[i].Time.Add(time.Minute)
	}
	for _, w := range []struct {
		name        string
		size, slide time.Duration
	}{{"tumbling", time.Minute, time.Minute}, {"sliding", time.Minute, 20 * time.Second}} {
		windows := typed.Sliding(w.size, w.slide)
		count := func(s typed.Stream[fixtures.Click], eventTime func(*fixtures.Click) time.Time) typed.Stream[windowCount] {
			ws := typed.GroupByWindow(s, eventTime, windows, func(c *fixtures.Click) string { return c.User })
			return typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow)
		}
		for _, tc := range []struct {
			name  string
			build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]
			want  []fixtures.Click
		}{
			{"the watermark's function", func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
				return count(typed.Filter(s, func(*fixtures.Click) bool { return true }), clickTime)
			}, in},
			{"after a Map", func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
				hourLater := typed.Map(s, func(c *fixtures.Click) fixtures.Click { d := *c; d.Time = d.Time.Add(time.Hour); return d })
				return count(hourLater, clickTime)
			}, later},
			{"a function of its own", func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
				return count(s, minuteLater)
			}, shifted},
		} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 17)
			m.Add(in...)
			sink := newSink[windowCount]()
			s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
			if err := runToEnd(t, typed.WriteTo(tc.build(s), sink).OutputMode(typed.Append), newCheckpoint().opts(runtime.FlushEventTime())...); err != nil {
				t.Fatal(err)
			}
			sameTable(t, w.name+", "+tc.name, writtenOnce(t, sink.snapshot()), loopWindows(tc.want, w.size, w.slide))
		}
	}
}

// TestEventTimesOutOfRangeElsewhere: the rows of TestEventTimesOutOfRange
// whose times are outside those kept are dead letters, with their own
// positions, for session windows and Kafka Streams' sliding windows,
// which read the time when the batch runs, and behind a MapAsync, which
// writes a row it held back after later records were read; the good
// rows' windows are all within the times kept.
func TestEventTimesOutOfRangeElsewhere(t *testing.T) {
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	for _, tc := range []struct {
		name    string
		windows typed.Windows
		async   bool
	}{
		{"session", typed.Session(10 * time.Second), false},
		{"time difference", typed.TimeDifference(10 * time.Second), false},
		{"tumbling behind MapAsync", typed.Tumbling(10 * time.Second), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stage := func(in typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click] { return in }
			if tc.async {
				stage = func(in typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click] {
					in = typed.MapAsync(in, func(_ context.Context, c fixtures.Click) (fixtures.Click, error) { return c, nil }, 2)
					return typed.WithWatermark(in, clickTime, time.Hour)
				}
			}
			for _, r := range countOutOfRange(t, tc.windows, stage) {
				if r.User == "odd" || r.Window.Start.Year() != 2024 || !r.Window.End.After(r.Window.Start) {
					t.Errorf("row %+v", r)
				}
			}
		})
	}
}

// countOutOfRange counts outOfRangeLines, read from a file, per window
// and user, through the stages that stage adds before GroupByWindow,
// in Complete mode, and returns the rows written; it checks that the
// rows outside the times kept, and they alone, are dead letters with
// their own positions and bytes.
func countOutOfRange(t *testing.T, windows typed.Windows, stage func(typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click]) []windowCount {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "clicks.json"), []byte(strings.Join(outOfRangeLines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := stage(typed.From[fixtures.Click](runtime.FilesSource(dir, runtime.FilesOptions{})))
	ws := typed.GroupByWindow(in, func(c *fixtures.Click) time.Time { return c.Time }, windows, func(c *fixtures.Click) string { return c.User })
	sink := newSink[windowCount]()
	dead := runtime.DeadLetterMemory()
	w := typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), sink).OutputMode(typed.Complete)
	if err := runToEnd(t, w, newCheckpoint().opts(runtime.DeadLetters(dead))...); err != nil {
		t.Fatal(err)
	}
	var positions []string
	for _, l := range dead.Letters() {
		positions = append(positions, l.Position)
		if !strings.Contains(l.Error, "is outside the times the engine keeps (1700-01-01 to 2200-01-01)") || !strings.Contains(l.Raw, `"user":"odd"`) {
			t.Errorf("dead letter %+v: not the row's own", l)
		}
	}
	if want := []string{"clicks.json:2", "clicks.json:4", "clicks.json:5"}; !slices.Equal(positions, want) {
		t.Fatalf("dead letters at %q, want %q", positions, want)
	}
	return sink.rows()
}

// outOfRangeLines are clicks, three of them at times outside those kept.
var outOfRangeLines = []string{
	`{"user":"a","time":"2024-05-01T10:00:01Z","page":"p"}`,
	`{"user":"odd","time":"0001-01-01T00:00:00Z","page":"p"}`,
	`{"user":"a","time":"2024-05-01T10:00:07Z","page":"p"}`,
	`{"user":"odd","time":"9999-12-31T23:59:59Z","page":"p"}`,
	`{"user":"odd","time":"1677-09-21T00:12:54.9Z","page":"p"}`,
	`{"user":"b","time":"2024-05-01T10:00:12Z","page":"p"}`,
}

// TestEventTimesOutOfRange: a row whose event time is outside the times
// the engine keeps (1700 to 2200: Go's zero time, of a field never set;
// the year 9999; an instant near the end of int64 nanoseconds) is a dead
// letter with its file, line and bytes, for windows read with their own
// function and for those behind a WithWatermark; it is in no window
// (where it made windows past the ends of int64, or, for cumulative
// windows, billions of them), and the other rows are counted as a plain
// loop counts them.
func TestEventTimesOutOfRange(t *testing.T) {
	lines := outOfRangeLines
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	for _, tc := range []struct {
		name, kind string
		windows    typed.Windows
		size, step time.Duration // (step: the slide of sliding windows)
	}{
		{"tumbling", "sliding", typed.Tumbling(10 * time.Second), 10 * time.Second, 10 * time.Second},
		{"sliding", "sliding", typed.Sliding(10*time.Second, 5*time.Second), 10 * time.Second, 5 * time.Second},
		{"cumulate", "cumulate", typed.Cumulate(5*time.Second, 10*time.Second), 10 * time.Second, 5 * time.Second},
	} {
		for _, watermarked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/watermarked=%v", tc.name, watermarked), func(t *testing.T) {
				stage := func(in typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click] {
					if watermarked {
						in = typed.WithWatermark(in, clickTime, time.Hour)
					}
					return in
				}
				rows := countOutOfRange(t, tc.windows, stage)
				// The plain loop: each good row in each of its windows.
				want := map[string]float64{}
				for _, line := range lines {
					var c fixtures.Click
					if err := c.UnmarshalJSON([]byte(line)); err != nil {
						t.Fatal(err)
					}
					if c.User == "odd" {
						continue
					}
					for _, win := range windowsOf(tc.kind, c.Time, tc.size, tc.step) {
						want[fmt.Sprintf("%s %v %v", c.User, win.Start.Unix(), win.End.Unix())]++
					}
				}
				got := map[string]float64{}
				for _, r := range rows {
					got[fmt.Sprintf("%s %v %v", r.User, r.Window.Start.Unix(), r.Window.End.Unix())] = r.Value
				}
				if !maps.Equal(got, want) {
					t.Fatalf("counts %v, want %v", got, want)
				}
			})
		}
	}
}
