package typed_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// loopCollect is the independent answer: each group's clicks in the
// order they came (with set, each click once, where it first came); by
// group and place, the click's time in seconds.
func loopCollect(in []fixtures.Click, set bool, group func(c *fixtures.Click) string) map[string]float64 {
	byGroup := map[string][]fixtures.Click{}
	for _, c := range in {
		g := group(&c)
		if set && slices.Contains(byGroup[g], c) {
			continue
		}
		byGroup[g] = append(byGroup[g], c)
	}
	want := map[string]float64{}
	for g, clicks := range byGroup {
		for i, c := range clicks {
			want[fmt.Sprintf("%s#%d", g, i)] = float64(c.Time.Unix())
		}
	}
	return want
}

// copiedClicks returns ordered clicks, with a copy of every third click
// coming again a few clicks later (still in its window, mostly).
func copiedClicks(n int) []fixtures.Click {
	var in []fixtures.Click
	for i, c := range orderedClicks(n) {
		in = append(in, c)
		if i%3 == 0 && i > 0 {
			in = append(in, in[len(in)-3])
		}
	}
	return in
}

// TestCollectWindows: CollectList and CollectSet of each user's clicks in
// each 1-minute window, under batch splits and a restart, in the Append
// and the Update mode, are the window's clicks in the order they came
// (the set's each once), as a loop collects them.
func TestCollectWindows(t *testing.T) {
	in := copiedClicks(300)
	window := func(c *fixtures.Click) string {
		start := c.Time.Truncate(time.Minute)
		return windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()
	}
	for _, tc := range []struct {
		name string
		agg  typed.Aggregator[fixtures.Click, typed.RowsAcc, []fixtures.Click]
		set  bool
	}{
		{"CollectList", typed.CollectList[fixtures.Click](), false},
		{"CollectSet", typed.CollectSet[fixtures.Click](), true},
	} {
		want := loopCollect(in, tc.set, window)
		build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
			ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
			return typed.FlatMap(typed.AggregateWindows(ws, tc.agg, rankRows), func(rows *[]windowCount) []windowCount { return *rows })
		}
		for _, perBatch := range []int{0, 7, 40} {
			got := appendedWindows(t, in, perBatch, build)
			sameTable(t, fmt.Sprintf("%s, append, %d per batch", tc.name, perBatch), got, want)
			sameTable(t, fmt.Sprintf("%s, update, %d per batch", tc.name, perBatch), latestWindows(t, in, perBatch, build), want)
		}
	}
}

// TestCollectMergeKeepsItsSecond: Merge never changes its second
// accumulator, nor does what is done with the result later (more rows
// added, more merged), whether the first is empty or not; one merged
// into two gives two that share nothing.
func TestCollectMergeKeepsItsSecond(t *testing.T) {
	in := copiedClicks(40)
	for _, agg := range []typed.Aggregator[fixtures.Click, typed.RowsAcc, []fixtures.Click]{typed.CollectList[fixtures.Click](), typed.CollectSet[fixtures.Click]()} {
		fold := func(acc typed.RowsAcc, clicks []fixtures.Click) typed.RowsAcc {
			for i := range clicks {
				acc = agg.Add(acc, &clicks[i])
			}
			return acc
		}
		y := fold(agg.Zero(), in[20:30])
		kept := slices.Clone(agg.Result(y))
		for _, x := range []typed.RowsAcc{agg.Zero(), fold(agg.Zero(), in[:20])} {
			merged := fold(agg.Merge(x, y), in[30:])
			merged = agg.Merge(merged, fold(agg.Zero(), in[:5]))
			if !slices.Equal(agg.Result(y), kept) {
				t.Fatalf("%T: the second accumulator changed", agg)
			}
		}
		// One merged into two empty ones gives two of their own, even
		// when its rows have room to be appended to.
		y.Rows = slices.Grow(y.Rows, 4)
		a, b := agg.Merge(agg.Zero(), y), agg.Merge(agg.Zero(), y)
		a, b = agg.Add(a, &in[35]), agg.Add(b, &in[36])
		if got := agg.Result(a); len(got) != len(kept)+1 || got[len(kept)] != in[35] {
			t.Fatalf("%T: one merged into two, then added to: %d rows, want %d ending with the row added", agg, len(got), len(kept)+1)
		}
	}
}

// TestCollectRefuses: a stored row that does not decode fails with which
// row it is.
func TestCollectRefuses(t *testing.T) {
	agg := typed.CollectList[fixtures.Click]()
	good := agg.Add(agg.Zero(), &fixtures.Click{User: "u"})
	bad := typed.RowsAcc{Rows: [][]byte{good.Rows[0], {0xff, 0xff, 0xff}}}
	defer func() {
		err, _ := recover().(error)
		if err == nil || !strings.Contains(err.Error(), "CollectList: stored row 2 of 2 does not decode") {
			t.Errorf("%v, want a refusal naming the row", err)
		}
	}()
	agg.Result(bad)
}

// TestCountDistinctWindows: the exact count of distinct pages of each
// user in each 1-minute window, under batch splits and a restart, in the
// Append and the Update mode, is what a loop's set of them holds; a
// count merged into two stays the same in each while the other grows.
func TestCountDistinctWindows(t *testing.T) {
	in := orderedClicks(400)
	for i := range in {
		in[i].Page = fmt.Sprint("p", i*7%5)
	}
	sets := map[string]map[string]bool{}
	for _, c := range in {
		start := c.Time.Truncate(time.Minute)
		id := windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()
		if sets[id] == nil {
			sets[id] = map[string]bool{}
		}
		sets[id][c.Page] = true
	}
	want := map[string]float64{}
	for id, pages := range sets {
		want[id] = float64(len(pages))
	}
	agg := typed.CountDistinct(func(c *fixtures.Click) string { return c.Page })
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, agg, countRow)
	}
	for _, perBatch := range []int{0, 7, 40} {
		got := appendedWindows(t, in, perBatch, build)
		sameTable(t, fmt.Sprintf("append, %d per batch", perBatch), got, want)
		sameTable(t, fmt.Sprintf("update, %d per batch", perBatch), latestWindows(t, in, perBatch, build), want)
	}
	y := agg.Zero()
	for i := range in[:30] {
		y = agg.Add(y, &in[i])
	}
	n := agg.Result(y)
	a, b := agg.Merge(agg.Zero(), y), agg.Merge(agg.Zero(), y)
	a = agg.Add(a, &fixtures.Click{Page: "new a"})
	b = agg.Add(agg.Add(b, &fixtures.Click{Page: "new b"}), &fixtures.Click{Page: "new a"})
	if agg.Result(y) != n || agg.Result(a) != n+1 || agg.Result(b) != n+2 {
		t.Fatalf("merged into two: %d, %d and %d distinct, want %d, %d and %d", agg.Result(y), agg.Result(a), agg.Result(b), n, n+1, n+2)
	}
	// Stored and read back, a's values are its own: its new one again
	// is no new value.
	raw, err := a.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var stored typed.RowsAcc
	if err := stored.UnmarshalBinary(raw); err != nil {
		t.Fatal(err)
	}
	if got := agg.Result(agg.Add(stored, &fixtures.Click{Page: "new a"})); got != n+1 {
		t.Fatalf("merged into two, stored, the same value added again: %d distinct, want %d", got, n+1)
	}
}
