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
				if inFrame(over, d, n, &c, i, &o, j) {
					sum += overValue(&o)
				}
			}
			out = append(out, overRow{c.User, c.Time, c.Page, sum}.String())
		}
	}
	slices.Sort(out)
	return out
}

// inFrame reports whether click o, the j-th of its user's in time order,
// is in the frame of c, the i-th: over is "range" (RangePreceding(d)),
// "rows" (RowsPreceding(n)), "rangeUnbounded" or "rowsUnbounded".
func inFrame(over string, d time.Duration, n int, c *fixtures.Click, i int, o *fixtures.Click, j int) bool {
	switch over {
	case "range":
		return !o.Time.Before(c.Time.Add(-d)) && !o.Time.After(c.Time)
	case "rows":
		return j <= i && j >= i-n
	case "rangeUnbounded":
		return !o.Time.After(c.Time)
	}
	return j <= i
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

// TestAggregateOverLateRows: a bounded frame's click is late, dropped
// (counted, and sent to LateRows) and in no frame, as Flink drops it,
// when it is at or before the last click of its user written (Flink's
// last triggering time); a click behind the watermark but after its
// user's last written, or before any is written, is written at once.
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
		// 35 is behind 41 but after 31: kept. 31 is at the watermark,
		// but the user has written none: written at once, as Flink
		// writes a key's row after its last triggering time (none).
		{add: []int{35, 31}, want: []string{"31:1"}, stateRows: -1},
		// The watermark moves to 50: 35, 40 and 41 are written, each
		// with 31 in its frame.
		{add: []int{60}, want: []string{"35:2", "40:3", "41:4"}, stateRows: -1},
		// 45 is behind the watermark (50) but after 41, the last
		// written: written at once, with 35, 40 and 41; 38 is late.
		{add: []int{45, 52, 38}, want: []string{"45:4"}, stateRows: -1, droppedRows: 1},
		// The watermark moves to 70: 52 (with 45), then 60 with 52.
		{add: []int{80}, want: []string{"52:2", "60:2"}, stateRows: -1},
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
// here 30 s before the watermark's) is at or before its key's last row
// written is dropped, and in no later frame, though the watermark's time
// is after the watermark.
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
	// 100, 200 and 210 (70, 170 and 180 by AggregateOver's time) are
	// written once the watermark is 190; 205 (175) comes after, not late
	// by the watermark's time (190), and behind its key's last written.
	for i, step := range [][]int{{100, 200}, {210}, {205}, {300}} {
		for _, s := range step {
			m.Add(fixtures.Click{User: "u", Time: base.Add(time.Duration(s) * time.Second)})
		}
		opts := ck.opts()
		if i == 3 {
			opts = append(opts, runtimeFlush())
		}
		if err := runToEnd(t, w, opts...); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := sortedRows(sink.rows()), []string{"100:1", "200:2", "210:3", "300:4"}; !slices.Equal(got, want) {
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

// overLateClicks are n clicks of a busy user and three rare ones, a few a
// second, out of order by up to 8 s: under a watermark 2 s behind, many
// are behind it, and a rare user's click is often behind the watermark
// (which the busy user moves) but after the user's last click written.
func overLateClicks(n int, seed uint64) []fixtures.Click {
	r := rand.New(rand.NewPCG(seed, seed))
	base := time.Unix(1_700_000_000, 0).UTC()
	out := make([]fixtures.Click, n)
	for i := range out {
		user := "busy"
		if r.IntN(4) == 0 {
			user = []string{"ann", "bob", "cy"}[r.IntN(3)]
		}
		at := base.Add(time.Duration(i/3)*time.Second - time.Duration(r.IntN(9))*time.Second)
		out[i] = fixtures.Click{User: user, Time: at, Page: strings.Repeat("p", 1+r.IntN(9))}
	}
	return out
}

// overLateLoop is AggregateOver's answer by a plain loop over the
// batches the clicks come in (batches of perBatch, 0: all of a chunk;
// after each chunk, a batch without data once the watermark has moved),
// under a watermark delay behind the latest click of the batches
// before: Flink's rules for which rows are late. For the unbounded
// frames a click at or before the watermark the batch before ran with
// (Spark's watermark for late rows) is late; for the bounded ones, a
// click at or before its user's last click written (Flink's last
// triggering time), none for a user with none written or whose clicks
// are forgotten (RangePreceding: none waits and the watermark is more
// than d past the last written, as Flink's cleanup of a RANGE frame's
// state forgets it; a ROWS frame keeps it). A user's
// clicks are written in time order, peers in arrival order, once the
// watermark reaches them, each with the sum over the clicks of its
// frame among those not late. It returns the rows written, the clicks
// dropped, and how many clicks not dropped were at or before the
// watermark.
func overLateLoop(chunks [][]fixtures.Click, perBatch int, over string, d time.Duration, n int, delay time.Duration) (rows, dropped []string, behind int) {
	type user struct {
		accepted []*fixtures.Click // in time order, peers in arrival order
		waiting  []*fixtures.Click
		written  time.Time
		some     bool // written is set, and the clicks are not forgotten
	}
	users := map[string]*user{}
	var order []string // the users, in the order they first came
	var latest, ran time.Time
	first := true
	write := func(u *user, name string, wm time.Time, all bool) {
		slices.SortStableFunc(u.waiting, func(a, b *fixtures.Click) int { return a.Time.Compare(b.Time) })
		k := 0
		for k < len(u.waiting) && (all || !u.waiting[k].Time.After(wm)) {
			k++
		}
		for _, c := range u.waiting[:k] {
			i := slices.Index(u.accepted, c)
			var sum float64
			for j, o := range u.accepted {
				if inFrame(over, d, n, c, i, o, j) {
					sum += overValue(o)
				}
			}
			rows = append(rows, overRow{name, c.Time, c.Page, sum}.String())
			u.written, u.some = c.Time, true
		}
		u.waiting = u.waiting[k:]
		if len(u.waiting) == 0 && over == "range" && wm.After(u.written.Add(d)) {
			// Forgotten: a later click's frame holds none of these.
			u.some, u.accepted = false, nil
		}
	}
	watermark := func() time.Time {
		if latest.IsZero() {
			return time.Time{}
		}
		return latest.Add(-delay)
	}
	batch := func(in []fixtures.Click) {
		wm := watermark()
		late := ran
		if first {
			late, first = wm, false
		}
		for i := range in {
			c := &in[i]
			// The watermark counts every click, late or not.
			if c.Time.After(latest) {
				latest = c.Time
			}
			u := users[c.User]
			if u == nil {
				u = &user{}
				users[c.User] = u
				order = append(order, c.User)
			}
			bound := late
			if over == "range" || over == "rows" {
				bound = time.Time{} // none: a click is after it
				if u.some {
					bound = u.written
				}
			}
			if !c.Time.After(bound) {
				dropped = append(dropped, fmt.Sprintf("%s %s", c.User, c.Time.Format("15:04:05")))
				continue
			}
			if !c.Time.After(late) {
				behind++
			}
			u.waiting = append(u.waiting, c)
			u.accepted = append(u.accepted, c)
			slices.SortStableFunc(u.accepted, func(a, b *fixtures.Click) int { return a.Time.Compare(b.Time) })
		}
		for _, name := range order {
			write(users[name], name, wm, false)
		}
		ran = wm
	}
	for _, chunk := range chunks {
		size := perBatch
		if size == 0 {
			size = len(chunk)
		}
		for start := 0; start < len(chunk); start += size {
			batch(chunk[start:min(start+size, len(chunk))])
		}
		if wm := watermark(); wm.After(ran) {
			batch(nil)
		}
	}
	for _, name := range order {
		write(users[name], name, time.Time{}, true)
	}
	slices.Sort(rows)
	slices.Sort(dropped)
	return rows, dropped, behind
}

// TestAggregateOverLateLoop runs each frame over clicks of which many are
// late by the watermark, some only by their user's last click written,
// in batches of several sizes across restarts, and compares the rows
// written, and those sent to LateRows, with a plain loop's.
func TestAggregateOverLateLoop(t *testing.T) {
	in := overLateClicks(300, 7)
	const delay = 2 * time.Second
	var dropped, behind int // by the loop, over all the runs
	for _, tc := range []struct {
		name string
		over typed.Over
		d    time.Duration
		n    int
	}{
		{"range", typed.RangePreceding(5 * time.Second), 5 * time.Second, 0},
		{"range", typed.RangePreceding(0), 0, 0},
		{"range", typed.RangePreceding(30 * time.Second), 30 * time.Second, 0},
		{"rows", typed.RowsPreceding(3), 0, 3},
		{"rows", typed.RowsPreceding(0), 0, 0},
		{"rangeUnbounded", typed.RangeUnbounded(), 0, 0},
		{"rowsUnbounded", typed.RowsUnbounded(), 0, 0},
	} {
		for _, perBatch := range []int{0, 7, 50} {
			for _, chunks := range []int{1, 4} {
				t.Run(fmt.Sprintf("%v/rowsPerBatch=%d/chunks=%d", tc.over, perBatch, chunks), func(t *testing.T) {
					size := (len(in) + chunks - 1) / chunks
					var parts [][]fixtures.Click
					for start := 0; start < len(in); start += size {
						parts = append(parts, in[start:min(start+size, len(in))])
					}
					want, wantDropped, wantBehind := overLateLoop(parts, perBatch, tc.name, tc.d, tc.n, delay)
					dropped += len(wantDropped)
					behind += wantBehind
					m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
					late := newSink[fixtures.Click]()
					src := typed.WithWatermark(typed.FromMemory(m), clickTime, delay, typed.LateRows(late))
					byUser := typed.GroupByKey(src, func(c *fixtures.Click) string { return c.User })
					rows := typed.AggregateOver(byUser, clickTime, tc.over, typed.Sum(overValue),
						func(user string, c *fixtures.Click, sum float64) overRow { return overRow{user, c.Time, c.Page, sum} })
					sink := newSink[overRow]()
					w := typed.WriteTo(rows, sink)
					ck := newCheckpoint()
					for i, part := range parts {
						m.Add(part...)
						opts := ck.opts()
						if i == len(parts)-1 {
							opts = append(opts, runtimeFlush())
						}
						if err := runToEnd(t, w, opts...); err != nil {
							t.Fatal(err)
						}
					}
					var got, gotDropped []string
					for _, r := range sink.rows() {
						got = append(got, r.String())
					}
					for _, c := range late.rows() {
						gotDropped = append(gotDropped, fmt.Sprintf("%s %s", c.User, c.Time.Format("15:04:05")))
					}
					slices.Sort(got)
					slices.Sort(gotDropped)
					if !slices.Equal(got, want) {
						t.Fatalf("%d rows, want %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
					}
					if !slices.Equal(gotDropped, wantDropped) {
						t.Fatalf("%d late rows, want %d; first difference:\n%s", len(gotDropped), len(wantDropped), firstDifference(gotDropped, wantDropped))
					}
				})
			}
		}
	}
	if dropped == 0 || behind == 0 {
		t.Fatalf("the loop dropped %d clicks, and wrote %d behind the watermark: the clicks test too little", dropped, behind)
	}
}

// TestAggregateOverRowJustAfterWatermark: a row one nanosecond after the
// watermark its key last wrote by waits for a timer at that watermark,
// and is written when the timer fires.
func TestAggregateOverRowJustAfterWatermark(t *testing.T) {
	base := time.Unix(1_700_000_000, 0).UTC()
	for _, over := range []typed.Over{typed.RangeUnbounded(), typed.RowsUnbounded(), typed.RangePreceding(time.Minute), typed.RowsPreceding(2)} {
		t.Run(over.String(), func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			src := typed.WithWatermark(typed.FromMemory(m), clickTime, 10*time.Second)
			counts := typed.AggregateOver(typed.GroupByKey(src, func(c *fixtures.Click) string { return c.User }), clickTime, over,
				typed.Count[fixtures.Click](), func(user string, c *fixtures.Click, n int64) string {
					return fmt.Sprintf("%s %v:%d", user, c.Time.Sub(base), n)
				})
			sink := newSink[string]()
			w := typed.WriteTo(counts, sink)
			ck := newCheckpoint()
			// v's click moves the watermark to 90 s; u's comes 1 ns after
			// it; v's next moves the watermark past both. Not flushed:
			// the timers write them.
			for _, c := range []fixtures.Click{
				{User: "v", Time: base.Add(100 * time.Second)},
				{User: "u", Time: base.Add(90*time.Second + time.Nanosecond)},
				{User: "v", Time: base.Add(200 * time.Second)},
			} {
				m.Add(c)
				if err := runToEnd(t, w, ck.opts()...); err != nil {
					t.Fatal(err)
				}
			}
			if got, want := sortedRows(sink.rows()), []string{"u 1m30.000000001s:1", "v 1m40s:1"}; !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}
