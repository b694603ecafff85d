package typed_test

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestGroupingSetsAgainstALoop: Cube, Rollup and GroupingSets over (user,
// page) count what a plain loop counts for each grouping set, with the
// rolled-up dimensions marked, in Complete and Update mode, whatever the
// batches, across a restart.
func TestGroupingSetsAgainstALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	var clicks []fixtures.Click
	for i := range 300 {
		clicks = append(clicks, fixtures.Click{User: fmt.Sprint("u", rng.IntN(4)), Page: fmt.Sprint("p", rng.IntN(3)), Time: at(i)})
	}
	const all = "*"
	dims := []func(*fixtures.Click){
		func(k *fixtures.Click) { k.User = all },
		func(k *fixtures.Click) { k.Page = all },
	}
	text := func(k fixtures.Click, set typed.GroupingSet, n int64) string {
		return fmt.Sprintf("%s/%s set=%d spark=%d n=%d", k.User, k.Page, set, set.SparkID(2), n)
	}
	for _, tc := range []struct {
		name string
		sets []typed.GroupingSet
		agg  func(typed.KeyedStream[fixtures.Click, fixtures.Click]) typed.Stream[string]
	}{
		{"cube", []typed.GroupingSet{0, 1, 2, 3}, func(ks typed.KeyedStream[fixtures.Click, fixtures.Click]) typed.Stream[string] {
			return typed.Cube(ks, typed.Count[fixtures.Click](), text, dims...)
		}},
		{"rollup", []typed.GroupingSet{0, 2, 3}, func(ks typed.KeyedStream[fixtures.Click, fixtures.Click]) typed.Stream[string] {
			return typed.Rollup(ks, typed.Count[fixtures.Click](), text, dims...)
		}},
		{"sets", []typed.GroupingSet{1, 2}, func(ks typed.KeyedStream[fixtures.Click, fixtures.Click]) typed.Stream[string] {
			return typed.GroupingSets(ks, typed.Count[fixtures.Click](), text, []typed.GroupingSet{1, 2}, dims...)
		}},
		// A set given twice is written twice, each time with the whole
		// count (Spark's SPARK-29708).
		{"sets given twice", []typed.GroupingSet{3, 1, 3, 3}, func(ks typed.KeyedStream[fixtures.Click, fixtures.Click]) typed.Stream[string] {
			return typed.GroupingSets(ks, typed.Count[fixtures.Click](), text, []typed.GroupingSet{3, 1, 3, 3}, dims...)
		}},
	} {
		// The loop: per set, the rows' keys with its dimensions rolled
		// up; a set's rows as many times as it is given.
		counts := map[string]int64{}
		keyOf := map[string]fixtures.Click{}
		setOf := map[string]typed.GroupingSet{}
		times := map[typed.GroupingSet]int{}
		for _, set := range tc.sets {
			times[set]++
		}
		for _, c := range clicks {
			for set := range times {
				k := fixtures.Click{User: c.User, Page: c.Page}
				for i, roll := range dims {
					if set.RolledUp(i) {
						roll(&k)
					}
				}
				id := fmt.Sprint(set, k.User, k.Page)
				counts[id]++
				keyOf[id], setOf[id] = k, set
			}
		}
		var want []string
		for id, n := range counts {
			for range times[setOf[id]] {
				want = append(want, text(keyOf[id], setOf[id], n))
			}
		}
		slices.Sort(want)
		for _, mode := range []typed.OutputMode{typed.Complete, typed.Update} {
			for _, perBatch := range []int{1, 9, 0} {
				t.Run(fmt.Sprintf("%s/%v/rows-per-batch=%d", tc.name, mode, perBatch), func(t *testing.T) {
					m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
					ks := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.Click { return fixtures.Click{User: c.User, Page: c.Page} })
					sink := newSink[string]()
					w := typed.WriteTo(tc.agg(ks), sink).OutputMode(mode)
					ck := newCheckpoint()
					m.Add(clicks[:150]...)
					if err := runToEnd(t, w, ck.opts()...); err != nil {
						t.Fatal(err)
					}
					m.Add(clicks[150:]...)
					if err := runToEnd(t, w, ck.opts()...); err != nil {
						t.Fatal(err)
					}
					// Complete: the last batch's table; Update: each key's
					// last row.
					batches := sink.snapshot()
					ids := slices.Sorted(func(yield func(int64) bool) {
						for id := range batches {
							if !yield(id) {
								return
							}
						}
					})
					last := map[string][]string{}
					var got []string
					if mode == typed.Complete {
						got = slices.Clone(batches[ids[len(ids)-1]])
					} else {
						for _, id := range ids {
							rows := map[string][]string{}
							for _, r := range batches[id] {
								key, _, _ := strings.Cut(r, " n=")
								rows[key] = append(rows[key], r)
							}
							maps.Copy(last, rows)
						}
						for _, rs := range last {
							got = append(got, rs...)
						}
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

// TestGroupingSetsRefused checks what a grouping-sets aggregation
// refuses at start, and that a restart with other sets is refused unless
// the change is allowed: the stored aggregates of a set no longer asked
// for would stay, and be written in Complete mode.
func TestGroupingSetsRefused(t *testing.T) {
	user := func(k *fixtures.Click) { k.User = "*" }
	page := func(k *fixtures.Click) { k.Page = "*" }
	text := func(k fixtures.Click, set typed.GroupingSet, n int64) string {
		return fmt.Sprintf("%s/%s set=%d n=%d", k.User, k.Page, set, n)
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(fixtures.Click{User: "u1", Page: "p1", Time: at(0)}, fixtures.Click{User: "u2", Page: "p1", Time: at(1)})
	ks := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.Click { return fixtures.Click{User: c.User, Page: c.Page} })
	count := typed.Count[fixtures.Click]()
	sets := func(sets ...typed.GroupingSet) *typed.Writer[string] {
		return typed.WriteTo(typed.GroupingSets(ks, count, text, sets, user, page), newSink[string]()).OutputMode(typed.Complete)
	}
	thirteen := slices.Repeat([]func(*fixtures.Click){user}, 13)
	for _, tc := range []struct {
		name string
		w    *typed.Writer[string]
		want string
	}{
		{"no sets", sets(), "groupingSets: no grouping sets"},
		{"a set past the dimensions", sets(0, 4), "grouping set 4 (100) names a dimension past the 2 given"},
		{"no dimensions", typed.WriteTo(typed.Rollup(ks, count, text), newSink[string]()), "rollup: no dimensions"},
		{"a cube of 13", typed.WriteTo(typed.Cube(ks, count, text, thirteen...), newSink[string]()), "cube: 13 dimensions (8192 grouping sets), at most 12"},
		{"a rollup of 33", typed.WriteTo(typed.Rollup(ks, count, text, slices.Repeat(thirteen, 3)[:33]...), newSink[string]()), "rollup: 33 dimensions, at most 32"},
	} {
		if err := runToEnd(t, tc.w.OutputMode(typed.Complete), newCheckpoint().opts()...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
	// A rollup of 13 dimensions is 14 sets: it runs.
	if err := runToEnd(t, typed.WriteTo(typed.Rollup(ks, count, text, thirteen...), newSink[string]()).OutputMode(typed.Complete), newCheckpoint().opts()...); err != nil {
		t.Errorf("a rollup of 13: %v", err)
	}

	ck := newCheckpoint()
	if err := runToEnd(t, sets(1), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	err := runToEnd(t, sets(2), ck.opts()...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "its grouping sets were 1 (grouping_id 2) of 2 dimensions, are now 2 (grouping_id 1) of 2 dimensions") {
		t.Fatalf("a start with other sets: %v", err)
	}
	if err := runToEnd(t, sets(1, 1), ck.opts()...); err != nil {
		t.Fatalf("a start with the same set given twice: %v", err)
	}
	if err := runToEnd(t, sets(2), ck.opts(runtime.AllowPipelineChanges())...); err != nil {
		t.Fatalf("a start with other sets, the change allowed: %v", err)
	}
}
