package typed_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
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

// TestNullKeyUpdatesAreCounted: a table's updates whose key is null
// (NullKey) are dropped by every operator that keeps a table, and counted
// in its progress (numNullKeyUpdatesDropped, as Kafka Streams counts them
// in dropped-records), from batch to batch and across a restart; no
// change is written for a null key. A stream's rows with a null key are
// dropped and counted (numNullKeyRowsDropped) by a join that does not
// keep that side's rows without a match, and written padded, once each,
// by one that does.
func TestNullKeyUpdatesAreCounted(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Unix(1000, 0).UTC()
	var left, right []fixtures.Click
	var leftNulls, rightNulls int64
	for i := range 300 {
		c := fixtures.Click{User: fmt.Sprint("k", rng.IntN(5)), Time: base.Add(time.Duration(i) * time.Second), Page: fmt.Sprint("v", i)}
		null := rng.IntN(4) == 0
		if null {
			c.User = "null"
		}
		if rng.IntN(2) == 0 {
			left = append(left, c)
			leftNulls += map[bool]int64{true: 1}[null]
		} else {
			right = append(right, c)
			rightNulls += map[bool]int64{true: 1}[null]
		}
	}
	key := func(c *fixtures.Click) fixtures.RefKey { return fixtures.RefKey{Name: c.User, Null: c.User == "null"} }
	deleted := func(*fixtures.Click) bool { return false }
	nullKey := func(k fixtures.RefKey) string {
		if k.Null {
			return "a null key"
		}
		return ""
	}
	within := typed.JoinWithin(typed.TimeBetween(-5*time.Second, 5*time.Second))
	onWindows := typed.JoinOnWindows(typed.Sliding(10*time.Second, 5*time.Second))
	joined := func(j typed.Joined[fixtures.RefKey, fixtures.Click, fixtures.Click]) string { return nullKey(j.Key) }
	for _, tc := range []struct {
		name  string
		build func(l, r typed.Stream[fixtures.Click]) typed.Stream[string]
		want  int64
		// metric is the figure counted (numNullKeyUpdatesDropped when
		// empty); written, the rows of a null key written padded.
		metric  string
		written int64
	}{
		{"JoinTables", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.JoinTables(typed.TableUpdates(l, key, deleted), typed.TableUpdates(r, key, deleted), typed.FullOuter,
				func(c typed.TableChange[fixtures.RefKey, fixtures.Click, fixtures.Click]) string {
					return nullKey(c.Key)
				})
		}, leftNulls + rightNulls, "", 0},
		{"TableChanges", func(l, _ typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.TableChanges(typed.TableUpdates(l, key, deleted),
				func(c typed.Change[fixtures.RefKey, fixtures.Click]) string { return nullKey(c.Key) })
		}, leftNulls, "", 0},
		{"JoinTablesByForeignKey", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			// Each left row refers to the right row of its own key.
			return typed.JoinTablesByForeignKey(typed.TableUpdates(l, key, deleted), typed.TableUpdates(r, key, deleted), key, typed.LeftOuter,
				func(c typed.TableChange[fixtures.RefKey, fixtures.Click, fixtures.Click]) string {
					return nullKey(c.Key)
				})
		}, leftNulls + rightNulls, "", 0},
		{"JoinUpdates", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.JoinUpdates(typed.GroupByKey(l, key), typed.TableUpdates(r, key, deleted), typed.Inner,
				func(j typed.Joined[fixtures.RefKey, fixtures.Click, fixtures.Click]) string { return nullKey(j.Key) })
		}, rightNulls, "", 0},
		// A stream's rows: a join that does not keep a side's rows without
		// a match drops that side's null keys and counts them; one that
		// keeps them writes them padded.
		{"JoinUpdates/stream/Inner", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.JoinUpdates(typed.GroupByKey(l, key), typed.TableUpdates(r, key, deleted), typed.Inner, joined)
		}, leftNulls, "numNullKeyRowsDropped", 0},
		{"JoinUpdates/stream/LeftOuter", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.JoinUpdates(typed.GroupByKey(l, key), typed.TableUpdates(r, key, deleted), typed.LeftOuter, joined)
		}, 0, "numNullKeyRowsDropped", leftNulls},
		{"Join/Inner", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(r, key), typed.Inner, joined, within)
		}, leftNulls + rightNulls, "numNullKeyRowsDropped", 0},
		{"Join/LeftOuter", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(r, key), typed.LeftOuter, joined, within)
		}, rightNulls, "numNullKeyRowsDropped", leftNulls},
		{"Join/FullOuter", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(r, key), typed.FullOuter, joined, within)
		}, 0, "numNullKeyRowsDropped", leftNulls + rightNulls},
		{"Join/RightOuter", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(r, key), typed.RightOuter, joined, within)
		}, leftNulls, "numNullKeyRowsDropped", rightNulls},
		{"Join/LeftSemi", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(r, key), typed.LeftSemi, joined, within)
		}, leftNulls + rightNulls, "numNullKeyRowsDropped", 0},
		// On windows of 10 s every 5 s: a row is in two windows, and
		// counted once; a kept side's is written once a window.
		{"Join/windows/Inner", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(r, key), typed.Inner, joined, onWindows)
		}, leftNulls + rightNulls, "numNullKeyRowsDropped", 0},
		{"Join/windows/LeftOuter", func(l, r typed.Stream[fixtures.Click]) typed.Stream[string] {
			return typed.Join(typed.GroupByKey(l, key), typed.GroupByKey(r, key), typed.LeftOuter, joined, onWindows)
		}, rightNulls, "numNullKeyRowsDropped", 2 * leftNulls},
	} {
		if tc.metric == "" {
			tc.metric = "numNullKeyUpdatesDropped"
		}
		for _, perBatch := range []int{0, 7} {
			t.Run(fmt.Sprintf("%s/rows-per-batch=%d", tc.name, perBatch), func(t *testing.T) {
				leftIn := typed.NewMemoryStream[fixtures.Click]("left", perBatch)
				rightIn := typed.NewMemoryStream[fixtures.Click]("right", perBatch)
				sink := newSink[string]()
				w := typed.WriteTo(tc.build(watermarked(typed.FromMemory(leftIn), 0), watermarked(typed.FromMemory(rightIn), 0)), sink)
				ck := newCheckpoint()
				var counted int64
				for half := range 2 {
					leftIn.Add(left[half*len(left)/2 : (half+1)*len(left)/2]...)
					rightIn.Add(right[half*len(right)/2 : (half+1)*len(right)/2]...)
					q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
					if err != nil {
						t.Fatal(err)
					}
					if err := q.AwaitTermination(); err != nil {
						t.Fatal(err)
					}
					p, ok := q.LastProgress()
					if !ok {
						t.Fatal("no progress")
					}
					counted = 0
					for _, op := range p.StateOperators {
						counted += op.CustomMetrics[tc.metric]
					}
				}
				if counted != tc.want {
					t.Errorf("%d counted as dropped for a null key (%s), want %d", counted, tc.metric, tc.want)
				}
				rows := sink.rows()
				if len(rows) == 0 {
					t.Fatal("nothing written")
				}
				var written int64
				for _, row := range rows {
					if row != "" {
						written++
					}
				}
				if written != tc.written {
					t.Errorf("%d rows written for a null key, want %d", written, tc.written)
				}
			})
		}
	}
}
