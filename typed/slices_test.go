package typed_test

import (
	"errors"
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

// Sliding and cumulative windows kept by slices (slices.go) against the
// same windows kept per window, the layout before slices, and a plain
// loop.

// jumbledClicks makes n clicks about 2 s apart, each up to 100 s early:
// with runWindows' watermark 30 s behind, many rows come late for some
// of their windows, and some for all of them.
func jumbledClicks(n int) []fixtures.Click {
	in := clicks(n, 7)
	r := rand.New(rand.NewPCG(3, 3))
	for i := range in {
		in[i].Time = at(2*i - r.IntN(101))
	}
	return in
}

// slidingCases are the windows and aggregations of these tests: sliding
// windows whose slide divides their size, and ones whose slices are
// shorter than the slide (their greatest common divisor); cumulative
// windows, sliced by their step; a count, and a count of distinct
// pages, whose accumulator holds memory that a merge may share.
func slidingCases() []struct {
	name  string
	build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]
} {
	count := func(w typed.Windows) func(typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		return func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
			return typed.AggregateWindows(typed.GroupByWindow(s, clickTime, w, func(c *fixtures.Click) string { return c.User }),
				typed.Count[fixtures.Click](), countRow)
		}
	}
	pages := func(w typed.Windows) func(typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		return func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
			return typed.AggregateWindows(typed.GroupByWindow(s, clickTime, w, func(c *fixtures.Click) string { return c.User }),
				typed.CountDistinct(func(c *fixtures.Click) string { return c.Page }),
				func(w typed.Window, user string, n int64) windowCount {
					return windowCount{Window: w, User: user, Value: float64(n)}
				})
		}
	}
	return []struct {
		name  string
		build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]
	}{
		{"count, Sliding(1m, 20s)", count(typed.Sliding(time.Minute, 20*time.Second))},
		{"count, Sliding(50s, 20s) at 5s", count(typed.Sliding(50*time.Second, 20*time.Second).StartingAt(5 * time.Second))},
		{"distinct pages, Sliding(90s, 10s)", pages(typed.Sliding(90*time.Second, 10*time.Second))},
		{"count, Cumulate(20s, 1m) at 15s", count(typed.Cumulate(20*time.Second, time.Minute).StartingAt(15 * time.Second))},
		{"distinct pages, Cumulate(10s, 1m)", pages(typed.Cumulate(10*time.Second, time.Minute))},
		// Twelve windows a period, a slice each, starting before the
		// epoch's minutes.
		{"count, Cumulate(5s, 1m) at -7s", count(typed.Cumulate(5*time.Second, time.Minute).StartingAt(-7 * time.Second))},
	}
}

// perWindow runs fn with sliding and cumulative windows kept per window.
func perWindow(fn func()) {
	typed.WritePerWindowSliding(true)
	defer typed.WritePerWindowSliding(false)
	fn()
}

// batchTexts are a run's batches that wrote rows, each its rows as
// sorted text (batches without data that close windows across batches
// write none, and their number depends on the bound's count).
func batchTexts(batches map[int64][]windowCount) [][]string {
	var out [][]string
	for _, rows := range sortedBatches(batches) {
		if len(rows) == 0 {
			continue
		}
		var b []string
		for _, r := range rows {
			b = append(b, fmt.Sprintf("%s=%v", r.id(), r.Value))
		}
		slices.Sort(b)
		out = append(out, b)
	}
	return out
}

// TestSlidingWindowsBySlices runs sliding and cumulative windows over
// rows out of order (many late for some of their windows), in Update
// and Append mode, in batches of several sizes, with a restart, and
// with windows closed at most 2 a batch or without bound, by slices and
// per window: both write the same rows, in the same batches unless
// windows close across batches (the bound counts a key's windows
// closing at once as one, by slices); in Append mode each window once.
// And, against a plain loop, each window written holds at most the rows
// the loop counts in it, and every row in order (none late) counts.
func TestSlidingWindowsBySlices(t *testing.T) {
	in := jumbledClicks(240)
	dropped := false
	for _, c := range slidingCases() {
		for _, mode := range []typed.OutputMode{typed.Update, typed.Append} {
			for _, perBatch := range []int{0, 7, 50} {
				for _, bound := range []int{0, 2} {
					what := fmt.Sprintf("%s, %v, %d a batch, at most %d closed a batch", c.name, mode, perBatch, bound)
					closes := runtime.WindowClosesPerBatch(bound)
					flush := mode == typed.Append
					var want map[int64][]windowCount
					perWindow(func() { want = runWindows(t, in, perBatch, mode, flush, c.build, closes) })
					got := runWindows(t, in, perBatch, mode, flush, c.build, closes)
					if mode == typed.Append {
						w, g := writtenOnce(t, want), writtenOnce(t, got)
						sameTable(t, what, g, w)
						if len(g) == 0 {
							t.Fatalf("%s: no window written", what)
						}
					}
					if bound == 0 || mode == typed.Update {
						if w, g := batchTexts(want), batchTexts(got); fmt.Sprint(w) != fmt.Sprint(g) {
							t.Fatalf("%s: by slices, %d batches with rows\n%.3000v\nper window, %d\n%.3000v", what, len(g), g, len(w), w)
						}
					}
					if mode == typed.Append && strings.HasPrefix(c.name, "count") {
						// No more rows than the loop counts; fewer where
						// rows came late.
						loop := loopOfCase(in, c.name)
						for id, n := range writtenOnce(t, got) {
							if l, ok := loop[id]; !ok || n > l {
								t.Fatalf("%s: %s counts %v, the loop %v", what, id, n, l)
							}
							dropped = dropped || n < loop[id]
						}
					}
				}
			}
		}
	}
	if !dropped {
		t.Fatal("no row came late: the input tests nothing of late rows")
	}
	// In order, every row counts: the loop's table.
	ordered := orderedClicks(240)
	for _, c := range slidingCases() {
		if !strings.HasPrefix(c.name, "count") {
			continue
		}
		sameTable(t, c.name+", in order", appendedWindows(t, ordered, 13, c.build), loopOfCase(ordered, c.name))
	}
}

// loopOfCase is the plain loop's counts of the count cases of
// slidingCases.
func loopOfCase(in []fixtures.Click, name string) map[string]float64 {
	if strings.Contains(name, "Cumulate(5s") {
		return loopCumulative(in, 5*time.Second, time.Minute, -7*time.Second)
	}
	if strings.Contains(name, "Cumulate") {
		return loopCumulative(in, 20*time.Second, time.Minute, 15*time.Second)
	}
	if strings.Contains(name, "at 5s") {
		// Windows start 5 s past each 20 s: the loop's, shifted.
		shifted := slices.Clone(in)
		for i := range shifted {
			shifted[i].Time = shifted[i].Time.Add(-5 * time.Second)
		}
		out := map[string]float64{}
		for _, c := range shifted {
			for start := c.Time.Truncate(20 * time.Second); start.After(c.Time.Add(-50 * time.Second)); start = start.Add(-20 * time.Second) {
				w := typed.Window{Start: start.Add(5 * time.Second).UTC(), End: start.Add(55 * time.Second).UTC()}
				out[windowCount{Window: w, User: c.User}.id()]++
			}
		}
		return out
	}
	return loopWindows(in, time.Minute, 20*time.Second)
}

// TestSlidingWindowsKeepACheckpointPerWindow: a query on a checkpoint
// that keeps sliding windows per window (written before slices) goes on
// in that layout, and writes the windows the loop does; a new
// checkpoint keeps them by slices, and streamgen inspect reads them.
func TestSlidingWindowsKeepACheckpointPerWindow(t *testing.T) {
	in := orderedClicks(240)
	build := slidingCases()[0].build
	run := func(ck *checkpoint, m *typed.MemoryStream[fixtures.Click], sink *batchSink[windowCount], rows []fixtures.Click, more ...runtime.Option) {
		t.Helper()
		s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 30*time.Second)
		m.Add(rows...)
		if err := runToEnd(t, typed.WriteTo(build(s), sink).OutputMode(typed.Append), ck.opts(more...)...); err != nil {
			t.Fatal(err)
		}
	}
	keyType := func(ck *checkpoint) string {
		c, meta := openCheckpoint(t, ck.fs)
		defer c.Close()
		return meta.Operators[0].KeyType
	}
	old, m, sink := newCheckpoint(), typed.NewMemoryStream[fixtures.Click]("clicks", 17), newSink[windowCount]()
	perWindow(func() { run(old, m, sink, in[:100]) })
	if kt := keyType(old); !strings.HasPrefix(kt, "window+") {
		t.Fatalf("per window: the key type %q", kt)
	}
	run(old, m, sink, in[100:], runtime.FlushEventTime())
	if kt := keyType(old); !strings.HasPrefix(kt, "window+") {
		t.Fatalf("after a start by slices: the key type %q, want the checkpoint's per window", kt)
	}
	sameTable(t, "per window, then on", writtenOnce(t, sink.snapshot()), loopWindows(in, time.Minute, 20*time.Second))

	fresh, m, sink := newCheckpoint(), typed.NewMemoryStream[fixtures.Click]("clicks", 17), newSink[windowCount]()
	run(fresh, m, sink, in[:100])
	if kt := keyType(fresh); strings.HasPrefix(kt, "window+") {
		t.Fatalf("a new checkpoint: the key type %q, want the user's alone", kt)
	}
	// The stored slices hold the rows of the windows still open: each
	// user's rows since the watermark's window.
	c, meta := openCheckpoint(t, fresh.fs)
	rows := 0
	err := c.Rows(meta, 0, "slices", func(r runtime.StateRow) error {
		rows++
		if !strings.HasPrefix(string(r.Value), `{"closed":"`) || !strings.Contains(string(r.Value), `"slices":[{"start":"`) {
			return fmt.Errorf("a stored row %s", r.Value)
		}
		return nil
	})
	c.Close()
	if err != nil || rows == 0 {
		t.Fatalf("%d stored rows, %v", rows, err)
	}
	run(fresh, m, sink, in[100:], runtime.FlushEventTime())
	sameTable(t, "by slices", writtenOnce(t, sink.snapshot()), loopWindows(in, time.Minute, 20*time.Second))
}

// TestSlicedCheckpointRefusesOtherWindows: a checkpoint that keeps
// sliding windows by slices refuses, whatever the options, windows that
// would cut other slices (another slide or start: a stored slice would
// fall in windows that do not hold it whole), and a query that would
// read it per window (Complete mode, or no watermark), saying why; the
// same query starts on it.
func TestSlicedCheckpointRefusesOtherWindows(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(orderedClicks(60)...)
	query := func(w typed.Windows, mode typed.OutputMode, watermark bool) *typed.Writer[windowCount] {
		s := typed.FromMemory(m)
		if watermark {
			s = typed.WithWatermark(s, clickTime, 30*time.Second)
		}
		ws := typed.GroupByWindow(s, clickTime, w, func(c *fixtures.Click) string { return c.User })
		return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(mode)
	}
	windows := typed.Sliding(time.Minute, 20*time.Second)
	ck := newCheckpoint()
	if err := runToEnd(t, query(windows, typed.Append, true), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what  string
		query *typed.Writer[windowCount]
		want  string
	}{
		{"another slide", query(typed.Sliding(time.Minute, 30*time.Second), typed.Append, true), "sliding ones' slide and start, whose slices the checkpoint keeps"},
		{"another start", query(windows.StartingAt(5*time.Second), typed.Append, true), "sliding ones' slide and start, whose slices the checkpoint keeps"},
		{"Complete mode", query(windows, typed.Complete, true), "keeps its windows by slices, which only a query with a watermark, in Update or Append mode, reads, and it is in Complete mode"},
		{"no watermark", query(windows, typed.Update, false), "and its input has no watermark"},
	} {
		for _, allow := range []bool{false, true} {
			opts := ck.opts()
			if allow {
				opts = ck.opts(runtime.AllowPipelineChanges())
			}
			if err := runToEnd(t, tc.query, opts...); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (changes allowed: %v): %v, want a refusal saying %q", tc.what, allow, err, tc.want)
			}
		}
	}
	if err := runToEnd(t, query(windows, typed.Update, true), ck.opts(runtime.AllowPipelineChanges())...); err != nil {
		t.Fatalf("the same windows in Update mode: %v", err)
	}
}
