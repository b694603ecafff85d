package typed_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
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
	} {
		// The loop: per set, the rows' keys with its dimensions rolled up.
		counts := map[string]int64{}
		keyOf := map[string]fixtures.Click{}
		setOf := map[string]typed.GroupingSet{}
		for _, c := range clicks {
			for _, set := range tc.sets {
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
			want = append(want, text(keyOf[id], setOf[id], n))
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
					last := map[string]string{}
					var got []string
					if mode == typed.Complete {
						got = slices.Clone(batches[ids[len(ids)-1]])
					} else {
						for _, id := range ids {
							for _, r := range batches[id] {
								key, _, _ := strings.Cut(r, " n=")
								last[key] = r
							}
						}
						for _, r := range last {
							got = append(got, r)
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
