package typed_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// joinPages is associative and not commutative: the pages in order, the
// latest time.
func joinPages(value, row fixtures.Click) fixtures.Click {
	value.Page += "," + row.Page
	if row.Time.After(value.Time) {
		value.Time = row.Time
	}
	return value
}

// loopReduce is the independent answer: each group's clicks folded in
// the order they came; by group and pages, the latest time in seconds.
func loopReduce(in []fixtures.Click, group func(c *fixtures.Click) string) map[string]float64 {
	byGroup := map[string]fixtures.Click{}
	var order []string
	for _, c := range in {
		g := group(&c)
		if v, ok := byGroup[g]; ok {
			byGroup[g] = joinPages(v, c)
		} else {
			byGroup[g], order = c, append(order, g)
		}
	}
	want := map[string]float64{}
	for _, g := range order {
		want[g+" "+byGroup[g].Page] = float64(byGroup[g].Time.Unix())
	}
	return want
}

// TestReduceWindows: Reduce of each user's clicks in each 1-minute
// window, under batch splits and a restart, in the Append and the Update
// mode, folds them in the order they came, as a loop does.
func TestReduceWindows(t *testing.T) {
	in := copiedClicks(300)
	want := loopReduce(in, func(c *fixtures.Click) string {
		start := c.Time.Truncate(time.Minute)
		return windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()
	})
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, typed.Reduce(joinPages), func(w typed.Window, user string, v fixtures.Click) windowCount {
			return windowCount{Window: w, User: user + " " + v.Page, Value: float64(v.Time.Unix())}
		})
	}
	for _, perBatch := range []int{0, 7, 40} {
		got := appendedWindows(t, in, perBatch, build)
		sameTable(t, fmt.Sprintf("append, %d per batch", perBatch), got, want)
		sameTable(t, fmt.Sprintf("update, %d per batch", perBatch), latestReduced(t, in, perBatch, build), want)
	}
}

// latestReduced runs build, whose rows' users are followed by the pages
// reduced, as runWindows does, in Update mode, and returns each window's
// latest row.
func latestReduced(t *testing.T, in []fixtures.Click, perBatch int, build func(typed.Stream[fixtures.Click]) typed.Stream[windowCount]) map[string]float64 {
	t.Helper()
	latest := map[string]windowCount{}
	for _, rows := range sortedBatches(runWindows(t, in, perBatch, typed.Update, false, build)) {
		for _, r := range rows {
			user, _, _ := strings.Cut(r.User, " ")
			latest[r.Window.String()+" "+user] = r
		}
	}
	got := map[string]float64{}
	for _, r := range latest {
		got[r.id()] = r.Value
	}
	return got
}

// TestReduceByKey: Reduce by user, the input in two parts across a
// restart, under batch splits: each user's last row is the loop's fold.
func TestReduceByKey(t *testing.T) {
	in := copiedClicks(600)
	want := loopReduce(in, func(c *fixtures.Click) string { return c.User })
	for _, perBatch := range []int{0, 37, 250} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
		keyed := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		reduced := typed.AggregateByKey(keyed, typed.Reduce(joinPages), func(user string, v fixtures.Click) fixtures.Click {
			v.User = user
			return v
		})
		sink := newSink[fixtures.Click]()
		w := typed.WriteTo(reduced, sink).OutputMode(typed.Update)
		ck := newCheckpoint()
		for _, part := range [][]fixtures.Click{in[:200], in[200:]} {
			m.Add(part...)
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
		}
		last := map[string]fixtures.Click{}
		for _, rows := range sortedBatches(sink.snapshot()) {
			for _, r := range rows {
				last[r.User] = r
			}
		}
		got := map[string]float64{}
		for user, v := range last {
			got[user+" "+v.Page] = float64(v.Time.Unix())
		}
		sameTable(t, fmt.Sprintf("%d per batch", perBatch), got, want)
	}
}

// TestReduceKeepsItsArguments: Merge never changes its second
// accumulator, nor does an Add of what it returns, even when f changes
// the value it gets in place.
func TestReduceKeepsItsArguments(t *testing.T) {
	type tagged = fixtures.StateV1
	grow := func(value, row tagged) tagged {
		value.Tags = append(value.Tags[:len(value.Tags):len(value.Tags)], row.Tags...)
		value.Count += row.Count
		if len(value.Tags) > 1 {
			value.Tags[0] = strings.ToUpper(value.Tags[0]) // the value's own memory
		}
		return value
	}
	agg := typed.Reduce(grow)
	rows := []tagged{{Count: 1, Tags: []string{"a"}}, {Count: 2, Tags: []string{"b"}}, {Count: 4, Tags: []string{"c"}}}
	x := agg.Add(agg.Zero(), &rows[0])
	y := agg.Add(agg.Add(agg.Zero(), &rows[1]), &rows[2])
	xb, yb := bytes.Clone(x.Row), bytes.Clone(y.Row)
	merged := agg.Merge(x, y)
	merged = agg.Add(merged, &tagged{Count: 8, Tags: []string{"d"}})
	// (Merge may return its first accumulator, which Add may then
	// change: y goes first as a copy.)
	for _, other := range []typed.ReduceAcc{agg.Merge(agg.Zero(), y), agg.Merge(typed.ReduceAcc{Row: bytes.Clone(y.Row)}, agg.Zero())} {
		if got := agg.Result(other); got.Count != 6 {
			t.Fatalf("y merged with no row: %+v, want y's value", got)
		}
		agg.Add(other, &tagged{Count: 16, Tags: []string{"e"}})
	}
	if !bytes.Equal(x.Row, xb) || !bytes.Equal(y.Row, yb) {
		t.Fatal("an accumulator given to Add or Merge changed")
	}
	got := agg.Result(merged)
	if got.Count != 15 || strings.Join(got.Tags, "") != "ABcd" {
		t.Fatalf("reduced to %d, %q; want 15, ABcd", got.Count, got.Tags)
	}
	if zero := agg.Result(agg.Zero()); zero.Count != 0 || zero.Tags != nil {
		t.Fatalf("the result of no row: %+v, want the zero value", zero)
	}
}

// TestReduceRefuses: a stored value that does not decode fails with
// what is wrong.
func TestReduceRefuses(t *testing.T) {
	agg := typed.Reduce(joinPages)
	bad := typed.ReduceAcc{Row: []byte{0xff, 0xff, 0xff}}
	for op, call := range map[string]func(){
		"Add":    func() { agg.Add(bad, &fixtures.Click{Page: "2"}) },
		"Merge":  func() { agg.Merge(agg.Add(agg.Zero(), &fixtures.Click{}), bad) },
		"Result": func() { agg.Result(bad) },
	} {
		func() {
			defer func() {
				err, _ := recover().(error)
				if err == nil || !strings.Contains(err.Error(), "Reduce: the stored value does not decode") {
					t.Errorf("%s: %v, want a refusal saying what is wrong", op, err)
				}
			}()
			call()
		}()
	}
}
