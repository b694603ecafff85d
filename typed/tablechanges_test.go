package typed_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// regionDelta is a user taken back from (-1) or added to (+1) a region.
type regionDelta struct {
	Region string
	Delta  float64
}

// TestTableAggregationAgainstALoop: users move between regions (a table
// of each user's latest click, its page the region; tombstones remove a
// user); the count of users per region, as Kafka Streams' KGroupedTable
// aggregates with an adder and a subtractor, is TableChanges, each change
// made into the row it takes back and the one it adds, then a sum per
// region. After each of two runs on one checkpoint, in one batch or
// several, with and without event times, the latest count of each region
// is what a plain loop over the updates counts.
func TestTableAggregationAgainstALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 15))
	base := time.Unix(1000, 0).UTC()
	var updates []fixtures.Click
	for i := range 500 {
		c := fixtures.Click{User: fmt.Sprint("u", rng.IntN(30)), Time: base.Add(time.Duration(i) * time.Second), Page: fmt.Sprint("r", rng.IntN(4))}
		if rng.IntN(6) == 0 {
			c.Page = ""
		}
		updates = append(updates, c)
	}
	loop := func(n int) map[string]int64 {
		region := map[string]string{}
		for _, u := range updates[:n] {
			if u.Page == "" {
				delete(region, u.User)
			} else {
				region[u.User] = u.Page
			}
		}
		counts := map[string]int64{}
		for _, r := range region {
			counts[r]++
		}
		return counts
	}
	for _, tc := range []struct {
		timed    bool
		perBatch int
	}{{true, 0}, {true, 7}, {false, 0}, {false, 1}} {
		t.Run(fmt.Sprintf("timed=%v/rows-per-batch=%d", tc.timed, tc.perBatch), func(t *testing.T) {
			in := typed.NewMemoryStream[fixtures.Click]("users", tc.perBatch)
			s := typed.FromMemory(in)
			if tc.timed {
				s = watermarked(s, 0)
			}
			changes := typed.TableChanges(clickTable(s), func(c typed.Change[string, fixtures.Click]) []regionDelta {
				if tc.timed == c.Time.IsZero() {
					t.Errorf("%s: a change at %v", c.Key, c.Time)
				}
				var d []regionDelta
				if c.Previous != nil {
					d = append(d, regionDelta{c.Previous.Page, -1})
				}
				if c.Row != nil {
					d = append(d, regionDelta{c.Row.Page, 1})
				}
				if c.Removed != (c.Row == nil) {
					t.Errorf("%s: Removed %v with row %v", c.Key, c.Removed, c.Row)
				}
				return d
			})
			deltas := typed.FlatMap(changes, func(d *[]regionDelta) []regionDelta { return *d })
			counts := typed.AggregateByKey(typed.GroupByKey(deltas, func(d *regionDelta) string { return d.Region }),
				typed.Sum(func(d *regionDelta) float64 { return d.Delta }),
				func(region string, n float64) fixtures.UserCount {
					return fixtures.UserCount{User: region, Count: int64(n)}
				})
			sink := newSink[fixtures.UserCount]()
			w := typed.WriteTo(counts, sink)
			ck := newCheckpoint()
			from := 0
			for _, n := range []int{len(updates) / 2, len(updates)} {
				in.Add(updates[from:n]...)
				from = n
				if err := runToEnd(t, w, ck.opts()...); err != nil {
					t.Fatal(err)
				}
				got := map[string]int64{}
				for _, r := range sink.rows() {
					got[r.User] = r.Count
				}
				for r, n := range got {
					if n == 0 {
						delete(got, r)
					}
				}
				if want := loop(n); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("after %d updates: counts %v, want %v", n, got, want)
				}
			}
		})
	}
}
