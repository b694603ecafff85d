package typed_test

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// higherPage ranks clicks by their page's value, highest first.
func higherPage(a, b *fixtures.Click) bool { return pageValue(a) > pageValue(b) }

// loopTop is the independent answer: each group's clicks in the order
// they came, sorted stably by page value, highest first (clicks of one
// value in their order), the first n; by group, then rank, the click's
// time in seconds.
func loopTop(in []fixtures.Click, n int, group func(c *fixtures.Click) string) map[string]float64 {
	byGroup := map[string][]fixtures.Click{}
	for _, c := range in {
		byGroup[group(&c)] = append(byGroup[group(&c)], c)
	}
	want := map[string]float64{}
	for g, clicks := range byGroup {
		slices.SortStableFunc(clicks, func(a, b fixtures.Click) int { return cmp.Compare(pageValue(&b), pageValue(&a)) })
		for rank, c := range clicks[:min(n, len(clicks))] {
			want[fmt.Sprintf("%s#%d", g, rank)] = float64(c.Time.Unix())
		}
	}
	return want
}

// rankRows makes a row of each of a group's top rows: the group and the
// rank, and the click's time in seconds.
func rankRows(w typed.Window, group string, top []fixtures.Click) []windowCount {
	out := make([]windowCount, len(top))
	for rank, c := range top {
		out[rank] = windowCount{Window: w, User: fmt.Sprintf("%s#%d", group, rank), Value: float64(c.Time.Unix())}
	}
	return out
}

// tiedClicks returns n ordered clicks whose pages hold values of which
// many tie.
func tiedClicks(n int) []fixtures.Click {
	in := orderedClicks(n)
	for i := range in {
		in[i].Page = strconv.Itoa(i * 37 % 11)
	}
	return in
}

// TestTopNWindows: Flink's Window Top-N, the 3 clicks of highest page
// value of each user in each 1-minute window (of tied values, the first
// to come), under batch splits and a restart, is what a stable sort of
// each window's clicks gives: in the Append mode each window's ranks
// once, when it closes; in the Update mode its latest ranks.
func TestTopNWindows(t *testing.T) {
	in := tiedClicks(400)
	want := loopTop(in, 3, func(c *fixtures.Click) string {
		start := c.Time.Truncate(time.Minute)
		return windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()
	})
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
		top := typed.AggregateWindows(ws, typed.TopN(3, higherPage), rankRows)
		return typed.FlatMap(top, func(rows *[]windowCount) []windowCount { return *rows })
	}
	for _, perBatch := range []int{0, 13, 70} {
		got := appendedWindows(t, in, perBatch, build)
		sameTable(t, fmt.Sprintf("append, %d per batch", perBatch), got, want)
		sameTable(t, fmt.Sprintf("update, %d per batch", perBatch), latestWindows(t, in, perBatch, build), want)
	}
}

// TestTopNByKey: each user's 5 clicks of highest page value over all
// their clicks (Flink's Top-N), written in the Update mode as they
// change, batch after batch across a restart, end as a stable sort of
// the user's clicks gives them.
func TestTopNByKey(t *testing.T) {
	in := tiedClicks(2000)
	want := loopTop(in, 5, func(c *fixtures.Click) string { return c.User })
	for _, perBatch := range []int{0, 37, 500} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
		keyed := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		top := typed.AggregateByKey(keyed, typed.TopN(5, higherPage), func(user string, top []fixtures.Click) []windowCount {
			return rankRows(typed.Window{}, user, top)
		})
		sink := newSink[windowCount]()
		w := typed.WriteTo(typed.FlatMap(top, func(rows *[]windowCount) []windowCount { return *rows }), sink)
		ck := newCheckpoint()
		for _, part := range [][]fixtures.Click{in[:700], in[700:]} {
			m.Add(part...)
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string]float64{}
		for _, rows := range sortedBatches(sink.snapshot()) {
			for _, r := range rows {
				got[r.User] = r.Value
			}
		}
		sameTable(t, fmt.Sprintf("%d per batch", perBatch), got, want)
	}
}

// TestTopNMergeKeepsItsSecond: Merge changes neither accumulator, nor
// does what is done with its result later change the second (more rows
// added); one merged into two gives two of their own; Result gives rows
// of their own, whose change changes no accumulator.
func TestTopNMergeKeepsItsSecond(t *testing.T) {
	agg := typed.TopN(4, higherPage)
	in := tiedClicks(60)
	fold := func(clicks []fixtures.Click) typed.TopAcc {
		acc := agg.Zero()
		for i := range clicks {
			acc = agg.Add(acc, &clicks[i])
		}
		return acc
	}
	x, y := fold(in[:30]), fold(in[30:50])
	describe := func(rows []fixtures.Click) (out []string) {
		for _, c := range rows {
			out = append(out, fmt.Sprint(c.User, c.Time.Unix(), c.Page))
		}
		return out
	}
	keptX, keptY := describe(agg.Result(x)), describe(agg.Result(y))
	merged := agg.Merge(x, y)
	want := loopTop(in[:50], 4, func(*fixtures.Click) string { return "all" })
	check := func(what string, got []fixtures.Click, want map[string]float64) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d rows, want %d", what, len(got), len(want))
		}
		for rank, c := range got {
			if w := want[fmt.Sprint("all#", rank)]; float64(c.Time.Unix()) != w {
				t.Fatalf("%s: rank %d is the click of %d, want %v", what, rank, c.Time.Unix(), w)
			}
		}
	}
	check("merged", agg.Result(merged), want)
	for i := range in[50:] {
		merged = agg.Add(merged, &in[50+i])
	}
	check("merged, then more", agg.Result(merged), loopTop(in, 4, func(*fixtures.Click) string { return "all" }))
	// One merged into two empty ones gives two of their own.
	a, b := agg.Merge(agg.Zero(), y), agg.Merge(agg.Zero(), y)
	best := []fixtures.Click{{User: "a", Page: "100"}, {User: "b", Page: "100"}}
	a, b = agg.Add(a, &best[0]), agg.Add(b, &best[1])
	if ra, rb := agg.Result(a), agg.Result(b); ra[0].User != "a" || rb[0].User != "b" || ra[1] != rb[1] {
		t.Fatalf("one merged into two, then added to: the first ranks %q, the second %q", ra[0].User, rb[0].User)
	}
	result := agg.Result(y)
	result[0].User = "changed"
	if !slices.Equal(describe(agg.Result(x)), keptX) || !slices.Equal(describe(agg.Result(y)), keptY) {
		t.Fatal("an accumulator changed")
	}
}

// TestTopNAfterASmallerN: an accumulator of more rows than n (stored
// before a restart with a smaller n) gives n, the best, as it is, merged,
// or with a row added.
func TestTopNAfterASmallerN(t *testing.T) {
	in := tiedClicks(20)
	three := typed.TopN(3, higherPage)
	stored := func() typed.TopAcc {
		acc := three.Zero()
		for i := range in {
			acc = three.Add(acc, &in[i])
		}
		return acc
	}
	acc := stored()
	one := typed.TopN(1, higherPage)
	worse, best := fixtures.Click{User: "worse", Page: "-1"}, fixtures.Click{User: "best", Page: "99"}
	if got := one.Result(one.Add(stored(), &worse)); len(got) != 1 || got[0] != three.Result(acc)[0] {
		t.Errorf("stored, a worse row added: %d rows, want the best one", len(got))
	}
	if got := one.Result(one.Add(stored(), &best)); len(got) != 1 || got[0].User != "best" {
		t.Errorf("stored, a better row added: %v, want it alone", got)
	}
	for name, acc := range map[string]typed.TopAcc{"stored": acc, "merged": one.Merge(acc, one.Zero())} {
		if got := one.Result(acc); len(got) != 1 || got[0] != three.Result(acc)[0] {
			t.Errorf("%s: %d rows, want the best one", name, len(got))
		}
	}
}

// TestTopNRefuses: a stored row that does not decode fails with which
// row it is; n must be positive.
func TestTopNRefuses(t *testing.T) {
	agg := typed.TopN(2, higherPage)
	good := agg.Add(agg.Zero(), &fixtures.Click{User: "u", Page: "1"})
	bad := typed.TopAcc{Rows: [][]byte{good.Rows[0], {0xff, 0xff, 0xff}}}
	for op, call := range map[string]func(){
		"Add":      func() { agg.Add(bad, &fixtures.Click{Page: "2"}) },
		"Merge of": func() { agg.Merge(good, bad) },
		"Result":   func() { agg.Result(bad) },
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if err == nil || !strings.Contains(err.Error(), "TopN: stored row 2 of 2 does not decode") {
					t.Errorf("%s: %v, want a refusal naming the row", op, err)
				}
			}()
			call()
		}()
	}
	func() {
		defer func() {
			if msg, _ := recover().(string); !strings.Contains(msg, "TopN: n is 0") {
				t.Errorf("TopN(0): %q, want a panic", msg)
			}
		}()
		typed.TopN(0, higherPage)
	}()
}

// TestAggregatorMetaInCheckpoint: the checkpoint keeps how many rows a
// TopN keeps (by key and in AggregateOver's unbounded frames), whether a
// collection is a set, and the type of the rows TopN and CollectList
// keep encoded. A start with another n, or a set on a list, is refused,
// saying both, unless the pipeline's changes are allowed; a start whose
// row type cannot read the stored rows is refused even then. (A row
// type of another name is another aggregator: a change of the pipeline;
// the same type with fields added is runtime's TestKeptRowsChanges.)
func TestAggregatorMetaInCheckpoint(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(tiedClicks(30)...)
	byUser := func() typed.KeyedStream[string, fixtures.Click] {
		return typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	}
	top := func(n int) *typed.Writer[int] {
		return typed.WriteTo(typed.AggregateByKey(byUser(), typed.TopN(n, higherPage), func(_ string, rows []fixtures.Click) int { return len(rows) }), newSink[int]()).OutputMode(typed.Update)
	}
	ck := newCheckpoint()
	if err := runToEnd(t, top(3), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta := openCheckpoint(t, ck.fs)
	c.Close()
	if op := meta.Operators[0]; op.Params != "keeps the 3 best rows" || op.Rows == nil || op.Rows.Name != (*fixtures.Click)(nil).StreamSchema().Name {
		t.Fatalf("the checkpoint keeps params %q and rows %v", op.Params, op.Rows)
	}
	err := runToEnd(t, top(5), ck.opts()...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "it keeps the 3 best rows, and now keeps the 5 best rows") {
		t.Fatalf("a start with TopN(5) on TopN(3)'s checkpoint: %v", err)
	}
	if err := runToEnd(t, top(3), ck.opts()...); err != nil {
		t.Fatalf("a start with the same n: %v", err)
	}
	if err := runToEnd(t, top(5), ck.opts(runtime.AllowPipelineChanges())...); err != nil {
		t.Fatalf("a start with TopN(5), the change allowed: %v", err)
	}

	// So does AggregateOver's unbounded frame, which keeps an
	// accumulator; and CollectSet is not CollectList.
	clicks := typed.WithWatermark(typed.FromMemory(m), clickTime, time.Minute)
	over := func(n int) *typed.Writer[int] {
		keyed := typed.GroupByKey(clicks, func(c *fixtures.Click) string { return c.User })
		return typed.WriteTo(typed.AggregateOver(keyed, clickTime, typed.RowsUnbounded(), typed.TopN(n, higherPage),
			func(_ string, _ *fixtures.Click, rows []fixtures.Click) int { return len(rows) }), newSink[int]())
	}
	ock := newCheckpoint()
	if err := runToEnd(t, over(3), ock.opts()...); err != nil {
		t.Fatal(err)
	}
	if err := runToEnd(t, over(5), ock.opts()...); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "now keeps the 5 best rows") {
		t.Fatalf("AggregateOver with TopN(5) on TopN(3)'s checkpoint: %v", err)
	}
	collected := func(agg typed.Aggregator[fixtures.Click, typed.RowsAcc, []fixtures.Click]) *typed.Writer[int] {
		return typed.WriteTo(typed.AggregateByKey(byUser(), agg, func(_ string, rows []fixtures.Click) int { return len(rows) }), newSink[int]()).OutputMode(typed.Update)
	}
	cck := newCheckpoint()
	if err := runToEnd(t, collected(typed.CollectList[fixtures.Click]()), cck.opts()...); err != nil {
		t.Fatal(err)
	}
	if err := runToEnd(t, collected(typed.CollectSet[fixtures.Click]()), cck.opts()...); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "keeps every row, and now keeps each row once") {
		t.Fatalf("CollectSet on CollectList's checkpoint: %v", err)
	}

	// Rows of StateV1 are kept; StateV2 reads them, StateV3 (Count a
	// string) does not.
	states := typed.NewMemoryStream[fixtures.StateV1]("states", 0)
	states.Add(fixtures.StateV1{Count: 1, Name: "a"}, fixtures.StateV1{Count: 2, Name: "b"})
	ks := func() typed.KeyedStream[string, fixtures.StateV1] {
		return typed.GroupByKey(typed.FromMemory(states), func(s *fixtures.StateV1) string { return s.Name })
	}
	sck := newCheckpoint()
	v1 := typed.WriteTo(typed.AggregateByKey(ks(), typed.CollectList[fixtures.StateV1](), func(_ string, rows []fixtures.StateV1) int { return len(rows) }), newSink[int]()).OutputMode(typed.Update)
	if err := runToEnd(t, v1, sck.opts()...); err != nil {
		t.Fatal(err)
	}
	asV2 := typed.Map(typed.FromMemory(states), func(s *fixtures.StateV1) fixtures.StateV2 {
		return fixtures.StateV2{Count: int64(s.Count), Label: s.Name}
	})
	v2 := typed.WriteTo(typed.AggregateByKey(typed.GroupByKey(asV2, func(s *fixtures.StateV2) string { return s.Label }), typed.CollectList[fixtures.StateV2](),
		func(_ string, rows []fixtures.StateV2) int { return len(rows) }), newSink[int]()).OutputMode(typed.Update)
	err = runToEnd(t, v2, sck.opts()...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || strings.Contains(err.Error(), "kept rows") || !strings.Contains(err.Error(), "AllowPipelineChanges") {
		t.Fatalf("StateV2 rows on StateV1's: %v, want a refusal of the operator's other name only", err)
	}
	if err := runToEnd(t, v2, sck.opts(runtime.AllowPipelineChanges())...); err != nil {
		t.Fatalf("StateV2 rows on StateV1's, the change allowed: %v", err)
	}
	asV3 := typed.Map(typed.FromMemory(states), func(s *fixtures.StateV1) fixtures.StateV3 { return fixtures.StateV3{Count: s.Name} })
	v3 := typed.WriteTo(typed.AggregateByKey(typed.GroupByKey(asV3, func(s *fixtures.StateV3) string { return s.Count }), typed.CollectList[fixtures.StateV3](),
		func(_ string, rows []fixtures.StateV3) int { return len(rows) }), newSink[int]()).OutputMode(typed.Update)
	err = runToEnd(t, v3, sck.opts(runtime.AllowPipelineChanges())...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "kept rows:") || !strings.Contains(err.Error(), "Count") {
		t.Fatalf("StateV3 rows on StateV2's: %v, want a refusal naming the field", err)
	}
}

// TestMinMaxInCheckpoint: Min and Max keep one accumulator type, so the
// checkpoint keeps which extreme an aggregation keeps: a start of Max on
// Min's checkpoint is refused, saying both (it went on from the stored
// least value, and wrote it as the greatest), unless the pipeline's
// changes are allowed.
func TestMinMaxInCheckpoint(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 5), click("a", 1))
	extreme := func(agg typed.Aggregator[fixtures.Click, typed.ExtremeAcc, float64]) *typed.Writer[float64] {
		byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		return typed.WriteTo(typed.AggregateByKey(byUser, agg, func(_ string, v float64) float64 { return v }), newSink[float64]()).OutputMode(typed.Update)
	}
	second := func(c *fixtures.Click) float64 { return float64(c.Time.Unix() % 60) }
	ck := newCheckpoint()
	if err := runToEnd(t, extreme(typed.Min(second)), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	m.Add(click("a", 3))
	err := runToEnd(t, extreme(typed.Max(second)), ck.opts()...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "it keeps the least value, and now keeps the greatest value") {
		t.Fatalf("a start with Max on Min's checkpoint: %v", err)
	}
	if err := runToEnd(t, extreme(typed.Min(second)), ck.opts()...); err != nil {
		t.Fatalf("a start with Min again: %v", err)
	}
}
