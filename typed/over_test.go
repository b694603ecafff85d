package typed_test

import (
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

// overRow is a row of AggregateOver's output in the tests: the click,
// and its frame's sum.
type overRow struct {
	User string
	Time time.Time
	Page string
	Sum  float64
}

func (r overRow) String() string {
	return fmt.Sprintf("%s %s %s %g", r.User, r.Time.UTC().Format("15:04:05"), r.Page, r.Sum)
}

// overValue is what a click adds to a frame's sum.
func overValue(c *fixtures.Click) float64 { return float64(len(c.Page)) }

// overClicks are n clicks of four users, a few a second, several in the
// same second (peers), out of order by up to 4 s: none late under a
// watermark 10 s behind.
func overClicks(n int, seed uint64) []fixtures.Click {
	r := rand.New(rand.NewPCG(seed, seed))
	users := []string{"ann", "bob", "cy", "dee"}
	base := time.Unix(1_700_000_000, 0).UTC()
	out := make([]fixtures.Click, n)
	for i := range out {
		at := base.Add(time.Duration(i/3)*time.Second - time.Duration(r.IntN(5))*time.Second)
		out[i] = fixtures.Click{User: users[r.IntN(len(users))], Time: at, Page: strings.Repeat("p", 1+r.IntN(9))}
	}
	return out
}

// overLoop is AggregateOver's answer by a plain loop: for each click,
// the sum over its user's clicks in its frame, the clicks of a user in
// time order, peers in input order.
func overLoop(in []fixtures.Click, over string, d time.Duration, n int) []string {
	byUser := map[string][]fixtures.Click{}
	for _, c := range in {
		byUser[c.User] = append(byUser[c.User], c)
	}
	var out []string
	for _, cs := range byUser {
		slices.SortStableFunc(cs, func(a, b fixtures.Click) int { return a.Time.Compare(b.Time) })
		for i, c := range cs {
			var sum float64
			for j, o := range cs {
				var in bool
				switch over {
				case "range":
					in = !o.Time.Before(c.Time.Add(-d)) && !o.Time.After(c.Time)
				case "rows":
					in = j <= i && j >= i-n
				case "rangeUnbounded":
					in = !o.Time.After(c.Time)
				case "rowsUnbounded":
					in = j <= i
				}
				if in {
					sum += overValue(&o)
				}
			}
			out = append(out, overRow{c.User, c.Time, c.Page, sum}.String())
		}
	}
	slices.Sort(out)
	return out
}

// TestAggregateOver runs each frame over clicks out of order, in batches
// of several sizes across restarts, and compares the rows with a plain
// loop's; and each click is written once its time is behind the
// watermark, not before.
func TestAggregateOver(t *testing.T) {
	in := overClicks(240, 3)
	for _, tc := range []struct {
		name string
		over typed.Over
		d    time.Duration
		n    int
		// pages aggregates with pageSums, whose accumulator is a map
		// that its Merge changes, where the others use Sum.
		pages bool
	}{
		{"range", typed.RangePreceding(5 * time.Second), 5 * time.Second, 0, false},
		{"range", typed.RangePreceding(0), 0, 0, false},
		{"range", typed.RangePreceding(40 * time.Second), 40 * time.Second, 0, false},
		{"rows", typed.RowsPreceding(3), 0, 3, false},
		{"rows", typed.RowsPreceding(0), 0, 0, false},
		{"rows", typed.RowsPreceding(25), 0, 25, false},
		{"rangeUnbounded", typed.RangeUnbounded(), 0, 0, false},
		{"rowsUnbounded", typed.RowsUnbounded(), 0, 0, false},
		{"range", typed.RangePreceding(40 * time.Second), 40 * time.Second, 0, true},
		{"rows", typed.RowsPreceding(25), 0, 25, true},
	} {
		want := overLoop(in, tc.name, tc.d, tc.n)
		for _, perBatch := range []int{0, 7, 50} {
			for _, chunks := range []int{1, 4} {
				t.Run(fmt.Sprintf("%v/pages=%v/rowsPerBatch=%d/chunks=%d", tc.over, tc.pages, perBatch, chunks), func(t *testing.T) {
					m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
					src := typed.WithWatermark(typed.FromMemory(m), clickTime, 10*time.Second)
					byUser := typed.GroupByKey(src, func(c *fixtures.Click) string { return c.User })
					row := func(user string, c *fixtures.Click, sum float64) overRow { return overRow{user, c.Time, c.Page, sum} }
					rows := typed.AggregateOver(byUser, clickTime, tc.over, typed.Sum(overValue), row)
					if tc.pages {
						rows = typed.AggregateOver(byUser, clickTime, tc.over, pageSums{}, row)
					}
					sink := newSink[overRow]()
					w := typed.WriteTo(rows, sink)
					ck := newCheckpoint()
					size := (len(in) + chunks - 1) / chunks
					var latest time.Time // of the clicks added
					for start := 0; start < len(in); start += size {
						part := in[start:min(start+size, len(in))]
						m.Add(part...)
						opts := ck.opts()
						last := start+size >= len(in)
						if last {
							opts = append(opts, runtimeFlush())
						}
						if err := runToEnd(t, w, opts...); err != nil {
							t.Fatal(err)
						}
						for _, c := range part {
							if c.Time.After(latest) {
								latest = c.Time
							}
						}
						if !last {
							// Rows are written once the watermark
							// reaches them, and none after it.
							wm := latest.Add(-10 * time.Second)
							reached := 0 // the rows added that the watermark has reached
							for _, c := range in[:start+len(part)] {
								if !c.Time.After(wm) {
									reached++
								}
							}
							if got := len(sink.rows()); got != reached || got == 0 {
								t.Fatalf("%d rows written with the watermark at %v, want the %d it has reached", got, wm, reached)
							}
							for _, r := range sink.rows() {
								if r.Time.After(wm) {
									t.Fatalf("%v written before the watermark (%v) reached it", r, wm)
								}
							}
						}
					}
					var got []string
					for _, r := range sink.rows() {
						got = append(got, r.String())
					}
					slices.Sort(got)
					if !slices.Equal(got, want) {
						t.Fatalf("%d rows, want %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
					}
				})
			}
		}
	}
}

// pageSums is Sum(overValue) with an accumulator that holds a map (the
// clicks of each page), which Add and Merge change in place, as an
// Aggregator may: AggregateOver must fold each frame into an
// accumulator of its own.
type pageSums struct{}

type pageSumsAcc struct{ Clicks map[string]int }

func (pageSums) Zero() pageSumsAcc { return pageSumsAcc{Clicks: map[string]int{}} }
func (pageSums) Add(a pageSumsAcc, c *fixtures.Click) pageSumsAcc {
	a.Clicks[c.Page]++
	return a
}
func (pageSums) Merge(a, b pageSumsAcc) pageSumsAcc {
	for page, n := range b.Clicks {
		a.Clicks[page] += n
	}
	return a
}
func (pageSums) Result(a pageSumsAcc) float64 {
	var sum float64
	for page, n := range a.Clicks {
		sum += float64(n) * overValue(&fixtures.Click{Page: page})
	}
	return sum
}

// TestAggregateOverLateRows: a click at or before the watermark is late,
// dropped (counted, and sent to LateRows) and in no frame, as Flink
// drops it; a click behind the latest but after the watermark is not.
// One user, the watermark 10 s behind, RangePreceding(10 s), a count.
func TestAggregateOverLateRows(t *testing.T) {
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[string] {
		return typed.AggregateOver(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), clickTime, typed.RangePreceding(10*time.Second),
			typed.Count[fixtures.Click](), func(_ string, c *fixtures.Click, n int64) string {
				return fmt.Sprintf("%d:%d", c.Time.Unix(), n)
			})
	}
	runSparkStepsLate(t, typed.Append, build, func(s string) string { return s }, []sparkStep{
		{add: []int{40, 41}, stateRows: -1}, // the watermark moves to 31
		// 35 is behind 41 but after 31: kept. 31 is at the watermark:
		// late.
		{add: []int{35, 31}, stateRows: -1, droppedRows: 1},
		// The watermark moves to 50: 35, 40 and 41 are written.
		{add: []int{60}, want: []string{"35:1", "40:2", "41:3"}, stateRows: -1},
		// 45 is late (the watermark is 50), and 52 counts 60's frame.
		{add: []int{45, 52}, stateRows: -1, droppedRows: 1},
		// The watermark moves to 70: 52 (with 45 dropped, 52 alone, 41
		// more than 10 s before), then 60 with 52.
		{add: []int{80}, want: []string{"52:1", "60:2"}, stateRows: -1},
	}, newSink[fixtures.Click]())
}

// TestAggregateOverRefuses: rows without a binary encoding, and frames
// that cannot be, are refused at Start.
func TestAggregateOverRefuses(t *testing.T) {
	type plain struct {
		User string
		Time time.Time
	}
	m := typed.NewMemoryStream[plain]("plain", 0)
	at := func(p *plain) time.Time { return p.Time }
	src := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(m), at, time.Second), func(p *plain) string { return p.User })
	rows := typed.AggregateOver(src, at, typed.RowsPreceding(2), typed.Count[plain](), func(_ string, _ *plain, n int64) int64 { return n })
	if _, err := typed.WriteTo(rows, newSink[int64]()).Start(t.Context()); err == nil || !strings.Contains(err.Error(), "not a record") {
		t.Fatalf("rows without an encoding: error %v, want one saying the type is not a record", err)
	}
	clicks := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("c", 0)), clickTime, time.Second),
		func(c *fixtures.Click) string { return c.User })
	for _, tc := range []struct {
		over typed.Over
		want string
	}{
		{typed.RowsPreceding(-1), "RowsPreceding(-1): n must not be negative"},
		{typed.RangePreceding(-time.Second), "RangePreceding(-1s): d must not be negative"},
	} {
		rows := typed.AggregateOver(clicks, clickTime, tc.over, typed.Count[fixtures.Click](), func(_ string, _ *fixtures.Click, n int64) int64 { return n })
		if _, err := typed.WriteTo(rows, newSink[int64]()).Start(t.Context()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%v: error %v, want one saying %q", tc.over, err, tc.want)
		}
	}
	noWatermark := typed.GroupByKey(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("w", 0)), func(c *fixtures.Click) string { return c.User })
	rows = typed.AggregateOver(noWatermark, clickTime, typed.RangeUnbounded(), typed.Count[fixtures.Click](), func(_ string, _ *fixtures.Click, n int64) int64 { return n })
	if _, err := typed.WriteTo(rows, newSink[int64]()).Start(t.Context()); err == nil || !strings.Contains(err.Error(), "watermark") {
		t.Fatalf("without a watermark: error %v, want one saying it needs one", err)
	}
}

// floorMin is the least of the clicks' page lengths and a floor of 100:
// an aggregator whose Zero is not its accumulator's zero value.
type floorMin struct{}

func (floorMin) Zero() fixtures.Counter { return fixtures.Counter{Count: 100} }
func (floorMin) Add(acc fixtures.Counter, c *fixtures.Click) fixtures.Counter {
	acc.Count = min(acc.Count, int64(len(c.Page)))
	return acc
}
func (floorMin) Merge(a, b fixtures.Counter) fixtures.Counter {
	return fixtures.Counter{Count: min(a.Count, b.Count)}
}
func (floorMin) Result(acc fixtures.Counter) int64 { return acc.Count }

// TestAggregateOverState: every frame starts from the aggregator's Zero;
// a RangePreceding key leaves no state once the watermark is d past its
// rows (here a row exactly d before the watermark, whose frame no later
// row takes); a stream of AggregateOver read twice in one output (a
// Union) and by two outputs of WriteAll runs.
func TestAggregateOverState(t *testing.T) {
	base := time.Unix(1_700_000_000, 0).UTC()
	click := func(user string, s int, page string) fixtures.Click {
		return fixtures.Click{User: user, Time: base.Add(time.Duration(s) * time.Second), Page: page}
	}
	for _, over := range []typed.Over{typed.RangePreceding(time.Hour), typed.RowsPreceding(100), typed.RangeUnbounded(), typed.RowsUnbounded()} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		m.Add(click("u", 10, "ppp"), click("u", 20, "pppppp"))
		src := typed.WithWatermark(typed.FromMemory(m), clickTime, 10*time.Second)
		mins := typed.AggregateOver(typed.GroupByKey(src, func(c *fixtures.Click) string { return c.User }), clickTime, over, floorMin{},
			func(_ string, _ *fixtures.Click, n int64) int64 { return n })
		sink := newSink[int64]()
		if err := runToEnd(t, typed.WriteTo(mins, sink), runtimeFlush()); err != nil {
			t.Fatal(err)
		}
		if got := sink.rows(); !slices.Equal(got, []int64{3, 3}) {
			t.Errorf("%v: %v, want [3 3]: the least page length of each frame", over, got)
		}
	}

	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	src := typed.WithWatermark(typed.FromMemory(m), clickTime, 10*time.Second)
	counts := typed.AggregateOver(typed.GroupByKey(src, func(c *fixtures.Click) string { return c.User }), clickTime, typed.RangePreceding(10*time.Second),
		typed.Count[fixtures.Click](), func(user string, c *fixtures.Click, n int64) string {
			return fmt.Sprintf("%s@%d:%d", user, c.Time.Sub(base)/time.Second, n)
		})
	twice := newSink[string]()
	w := typed.WriteTo(typed.Union(counts, counts), twice)
	ck := newCheckpoint()
	var stateRows int64
	for _, step := range [][]fixtures.Click{
		{click("u", 100, "p"), click("w", 105, "p"), click("v", 120, "p")}, // the watermark moves to 110
		// 100 and 105 are written; u's 100 = 110-10 is in no later frame,
		// w's 105 is kept, until the watermark is past 115.
		{click("v", 125, "p")},
		{click("v", 140, "p")}, // the watermark moves to 130: u's 100 is out of every frame
		{click("v", 150, "p")},
	} {
		m.Add(step...)
		q, err := w.Start(t.Context(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		if p, ok := q.LastProgress(); ok {
			stateRows = p.StateOperators[0].NumRowsTotal + p.StateOperators[1].NumRowsTotal
		}
	}
	q, err := w.Start(t.Context(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()), runtimeFlush())...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	p, _ := q.LastProgress()
	stateRows = p.StateOperators[0].NumRowsTotal + p.StateOperators[1].NumRowsTotal
	if stateRows != 0 {
		t.Errorf("%d state rows after every row was written and the watermark passed them all, want 0", stateRows)
	}
	want := []string{"u@100:1", "u@100:1", "v@120:1", "v@120:1", "v@125:2", "v@125:2", "v@140:1", "v@140:1", "v@150:2", "v@150:2", "w@105:1", "w@105:1"}
	if got := sortedRows(twice.rows()); !slices.Equal(got, want) {
		t.Errorf("the union of the stream with itself: %v, want %v", got, want)
	}

	// Two outputs of one query share the operator.
	m2 := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m2.Add(click("u", 1, "p"), click("u", 2, "p"))
	src2 := typed.WithWatermark(typed.FromMemory(m2), clickTime, time.Second)
	counts2 := typed.AggregateOver(typed.GroupByKey(src2, func(c *fixtures.Click) string { return c.User }), clickTime, typed.RowsUnbounded(),
		typed.Count[fixtures.Click](), func(_ string, _ *fixtures.Click, n int64) int64 { return n })
	a, b := newSink[int64](), newSink[int64]()
	progress := runAllToEnd(t, typed.WriteAll(typed.WriteTo(counts2, a), typed.WriteTo(counts2, b)), runtime.FlushEventTime())
	if got, got2 := a.rows(), b.rows(); !slices.Equal(got, []int64{1, 2}) || !slices.Equal(got2, []int64{1, 2}) {
		t.Errorf("two outputs got %v and %v, want [1 2] each", got, got2)
	}
	if n := len(progress[len(progress)-1].StateOperators); n != 1 {
		t.Errorf("%d state operators for two outputs of one AggregateOver, want 1", n)
	}
}

// TestAggregateOverTimeBehindItsKey: a row whose time (AggregateOver's,
// here 30 s before the watermark's) is at or before what its key has
// written is dropped, and in no later frame.
func TestAggregateOverTimeBehindItsKey(t *testing.T) {
	base := time.Unix(1_700_000_000, 0).UTC()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	src := typed.WithWatermark(typed.FromMemory(m), clickTime, 10*time.Second)
	earlier := func(c *fixtures.Click) time.Time { return c.Time.Add(-30 * time.Second) }
	counts := typed.AggregateOver(typed.GroupByKey(src, func(c *fixtures.Click) string { return c.User }), earlier, typed.RowsPreceding(5),
		typed.Count[fixtures.Click](), func(_ string, c *fixtures.Click, n int64) string {
			return fmt.Sprintf("%d:%d", c.Time.Sub(base)/time.Second, n)
		})
	sink := newSink[string]()
	w := typed.WriteTo(counts, sink)
	ck := newCheckpoint()
	// 100 and 200 (70 and 170 by AggregateOver's time) are written once
	// the watermark is 190; 215 (185) comes after, not late by the
	// watermark's time, and behind what its key has written.
	for i, step := range [][]int{{100, 200}, {215}, {300}} {
		for _, s := range step {
			m.Add(fixtures.Click{User: "u", Time: base.Add(time.Duration(s) * time.Second)})
		}
		opts := ck.opts()
		if i == 2 {
			opts = append(opts, runtimeFlush())
		}
		if err := runToEnd(t, w, opts...); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sortedRows(sink.rows()), []string{"100:1", "200:2", "300:3"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestAggregateOverRestarts: a restart with another output row type
// keeps the checkpoint; one with another frame is refused, as a change
// of the pipeline, naming both frames.
func TestAggregateOverRestarts(t *testing.T) {
	base := time.Unix(1_700_000_000, 0).UTC()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	keyed := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(m), clickTime, time.Second), func(c *fixtures.Click) string { return c.User })
	ck := newCheckpoint()
	m.Add(fixtures.Click{User: "u", Time: base.Add(time.Second)}, fixtures.Click{User: "u", Time: base.Add(5 * time.Second)})
	counts := typed.AggregateOver(keyed, clickTime, typed.RangePreceding(time.Minute), typed.Count[fixtures.Click](),
		func(_ string, _ *fixtures.Click, n int64) int64 { return n })
	first := newSink[int64]()
	if err := runToEnd(t, typed.WriteTo(counts, first), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	m.Add(fixtures.Click{User: "u", Time: base.Add(9 * time.Second)})
	texts := typed.AggregateOver(keyed, clickTime, typed.RangePreceding(time.Minute), typed.Count[fixtures.Click](),
		func(user string, c *fixtures.Click, n int64) string {
			return fmt.Sprintf("%s@%d:%d", user, c.Time.Sub(base)/time.Second, n)
		})
	second := newSink[string]()
	if err := runToEnd(t, typed.WriteTo(texts, second), ck.opts(runtimeFlush())...); err != nil {
		t.Fatalf("a restart with another output row type: %v", err)
	}
	if got, want := sortedRows(second.rows()), []string{"u@5:2", "u@9:3"}; !slices.Equal(got, want) || !slices.Equal(first.rows(), []int64{1}) {
		t.Fatalf("the runs wrote %v, then %v; want [1], then %v", first.rows(), got, want)
	}
	other := typed.AggregateOver(keyed, clickTime, typed.RowsPreceding(3), typed.Count[fixtures.Click](),
		func(_ string, _ *fixtures.Click, n int64) int64 { return n })
	err := runToEnd(t, typed.WriteTo(other, newSink[int64]()), ck.opts()...)
	if err == nil || !strings.Contains(err.Error(), "RangePreceding(1m0s)") || !strings.Contains(err.Error(), "RowsPreceding(3)") {
		t.Fatalf("a restart with another frame: %v, want it refused, naming both frames", err)
	}
}
