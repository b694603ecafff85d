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

// clickTable is the table of the latest click per user that clicks keep
// up to date; a click without a page is a tombstone.
func clickTable(s typed.Stream[fixtures.Click]) typed.UpdatesTable[string, fixtures.Click] {
	return typed.TableUpdates(s, func(c *fixtures.Click) string { return c.User }, func(c *fixtures.Click) bool { return c.Page == "" })
}

// Kafka Streams' TableTableJoinIntegrationTest (without caching), through
// the API: one key, updates of the left and right tables, a record a
// batch, each with its timestamp in milliseconds; an update without a
// value is a tombstone. The joiner writes "left-right", the record's
// timestamp is the latest of the update's and the rows', and a removal is
// written "null" at the update's time.
func TestKafkaStreamsTableTableJoin(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	sequence := []ksRecord{
		{false, "", 1}, {true, "", 2}, {false, "A", 3}, {true, "a", 4}, {false, "B", 5}, {true, "b", 6}, {false, "", 7},
		{true, "", 8}, {false, "C", 9}, {true, "c", 10}, {true, "", 11}, {false, "", 12}, {true, "", 13}, {true, "d", 14}, {false, "D", 15},
	}
	for _, tc := range []struct {
		how  typed.JoinType
		want []string
	}{
		{typed.Inner, []string{"A-a@4", "B-a@5", "B-b@6", "null@7", "C-c@10", "null@11", "D-d@15"}},
		{typed.LeftOuter, []string{"A-null@3", "A-a@4", "B-a@5", "B-b@6", "null@7", "C-null@9", "C-c@10", "C-null@11", "null@12", "D-d@15"}},
		{typed.FullOuter, []string{"A-null@3", "A-a@4", "B-a@5", "B-b@6", "null-b@7", "null@8", "C-null@9", "C-c@10", "C-null@11", "null@12", "null-d@14", "D-d@15"}},
		// Kafka Streams has no right join; this is the left join with the
		// tables swapped.
		{typed.RightOuter, []string{"A-a@4", "B-a@5", "B-b@6", "null-b@7", "null@8", "C-c@10", "null@11", "null-d@14", "D-d@15"}},
	} {
		t.Run(tc.how.String(), func(t *testing.T) {
			leftIn := typed.NewMemoryStream[fixtures.Click]("left", 0)
			rightIn := typed.NewMemoryStream[fixtures.Click]("right", 0)
			left := clickTable(watermarked(typed.FromMemory(leftIn), 0))
			right := clickTable(watermarked(typed.FromMemory(rightIn), 0))
			joined := typed.JoinTables(left, right, tc.how, func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string {
				ms := func(at time.Time) int64 { return at.Sub(base).Milliseconds() }
				if c.Removed {
					return fmt.Sprintf("null@%d", ms(c.Time))
				}
				at := c.Time
				l, r := "null", "null"
				if c.Left != nil {
					l, at = c.Left.Page, laterOf(at, c.Left.Time)
				}
				if c.Right != nil {
					r, at = c.Right.Page, laterOf(at, c.Right.Time)
				}
				return fmt.Sprintf("%s-%s@%d", l, r, ms(at))
			})
			sink := newSink[string]()
			h := startLive(t, typed.WriteTo(joined, sink), runtime.NewManualClock(time.Unix(1_000_000, 0)), newCheckpoint().opts()...)
			defer h.stop()
			for _, r := range sequence {
				c := fixtures.Click{User: "k", Time: base.Add(time.Duration(r.ts) * time.Millisecond), Page: r.value}
				if r.table {
					rightIn.Add(c)
				} else {
					leftIn.Add(c)
				}
				h.clock.Advance(time.Second)
				h.wait()
			}
			if got := sink.rows(); !slices.Equal(got, tc.want) {
				t.Fatalf("rows %q, want %q", got, tc.want)
			}
		})
	}
}

func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// TestJoinTablesAgainstALoop: two tables kept up to date by streams (with
// tombstones), joined, write the changes a plain loop over the updates in
// order of event time writes, key by key, across a restart, for each
// join type. Under caps of rows per batch, where each input moves on its
// own and so the changes in between differ, and without event times,
// where a batch takes the left table's updates first, and with updates
// that come late, behind the watermark, the changes still add up to the
// loop's final table (each table's last update of a key counts), and each
// change carries the row the changes before it left.
func TestJoinTablesAgainstALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 11))
	base := time.Unix(1000, 0).UTC()
	type update struct {
		right bool
		c     fixtures.Click
	}
	var updates []update
	for i := range 600 {
		c := fixtures.Click{User: fmt.Sprint("k", rng.IntN(6)), Time: base.Add(time.Duration(i) * time.Second), Page: fmt.Sprint("v", i)}
		if rng.IntN(4) == 0 {
			c.Page = "" // a tombstone
		}
		updates = append(updates, update{rng.IntN(2) == 0, c})
	}
	page := func(c *fixtures.Click) string {
		if c == nil {
			return "null"
		}
		return c.Page
	}
	// The loop: each update in order of time, the change it makes to the
	// key's row of the join.
	has := func(how typed.JoinType, l, r *fixtures.Click) bool {
		switch how {
		case typed.Inner:
			return l != nil && r != nil
		case typed.LeftOuter:
			return l != nil
		case typed.RightOuter:
			return r != nil
		}
		return l != nil || r != nil
	}
	type result struct {
		changes map[string][]string // by key, in order
		final   map[string]string
	}
	loop := func(how typed.JoinType) result {
		res := result{changes: map[string][]string{}, final: map[string]string{}}
		lefts, rights := map[string]*fixtures.Click{}, map[string]*fixtures.Click{}
		for i := range updates {
			u := &updates[i]
			k := u.c.User
			l, r := lefts[k], rights[k]
			was, row := has(how, l, r), page(l)+"-"+page(r)
			side := lefts
			if u.right {
				side = rights
			}
			if u.c.Page == "" {
				delete(side, k)
			} else {
				side[k] = &u.c
			}
			l, r = lefts[k], rights[k]
			switch {
			case has(how, l, r):
				res.changes[k] = append(res.changes[k], page(l)+"-"+page(r))
				res.final[k] = page(l) + "-" + page(r)
			case was:
				res.changes[k] = append(res.changes[k], "removed "+row)
				delete(res.final, k)
			}
		}
		return res
	}
	for _, how := range []typed.JoinType{typed.Inner, typed.LeftOuter, typed.RightOuter, typed.FullOuter} {
		want := loop(how)
		for _, tc := range []struct {
			timed    bool
			perBatch int
			late     bool
		}{{true, 0, false}, {true, 1, false}, {true, 7, false}, {false, 0, false}, {false, 5, false}, {true, 0, true}, {true, 3, true}} {
			t.Run(fmt.Sprintf("%v/timed=%v/rows-per-batch=%d/late=%v", how, tc.timed, tc.perBatch, tc.late), func(t *testing.T) {
				updates := slices.Clone(updates)
				if tc.late {
					// Some updates come late, behind the watermark: each
					// table applies its updates in the order they come.
					for i := 0; i < len(updates); i += 7 {
						updates[i].c.Time = updates[i].c.Time.Add(-100 * time.Second)
					}
				}
				leftIn := typed.NewMemoryStream[fixtures.Click]("left", tc.perBatch)
				rightIn := typed.NewMemoryStream[fixtures.Click]("right", tc.perBatch)
				l, r := typed.FromMemory(leftIn), typed.FromMemory(rightIn)
				if tc.timed {
					l, r = watermarked(l, 0), watermarked(r, 0)
				}
				joined := typed.JoinTables(clickTable(l), clickTable(r), how, func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string {
					if tc.timed == c.Time.IsZero() {
						t.Errorf("%s: a change at %v", c.Key, c.Time)
					}
					// "key previous>new", "none" for no row.
					prev, now := "none", page(c.Left)+"-"+page(c.Right)
					if c.Previous != nil {
						prev = page(c.Previous.Left) + "-" + page(c.Previous.Right)
					}
					if c.Removed {
						if c.Left != nil || c.Right != nil {
							t.Errorf("a removal of %s with rows %v, %v", c.Key, c.Left, c.Right)
						}
						now = "none"
					}
					return c.Key + " " + prev + ">" + now
				})
				sink := newSink[string]()
				w := typed.WriteTo(joined, sink)
				ck := newCheckpoint()
				for half, part := range [][]update{updates[:len(updates)/2], updates[len(updates)/2:]} {
					for _, u := range part {
						if u.right {
							rightIn.Add(u.c)
						} else {
							leftIn.Add(u.c)
						}
					}
					if err := runToEnd(t, w, ck.opts()...); err != nil {
						t.Fatalf("half %d: %v", half, err)
					}
				}
				changes, final := map[string][]string{}, map[string]string{}
				for _, row := range sink.rows() {
					k, change, _ := strings.Cut(row, " ")
					prev, now, _ := strings.Cut(change, ">")
					// Each change's previous row is the row the changes
					// before it left.
					if had, ok := final[k]; ok && prev != had || !ok && prev != "none" {
						t.Fatalf("%q: the key's row was %q (ok %v)", row, had, ok)
					}
					if now == "none" {
						delete(final, k)
						changes[k] = append(changes[k], "removed "+prev)
						continue
					}
					final[k] = now
					changes[k] = append(changes[k], now)
				}
				if !mapsEqual(final, want.final) {
					t.Fatalf("the changes make the table %v, want %v", final, want.final)
				}
				if !tc.timed || tc.perBatch != 0 || tc.late {
					return
				}
				for k, w := range want.changes {
					if got := changes[k]; !slices.Equal(got, w) {
						t.Fatalf("key %s: %d changes, want %d; first difference:\n%s", k, len(got), len(w), firstDifference(got, w))
					}
				}
				if len(changes) != len(want.changes) {
					t.Fatalf("changes of %d keys, want %d", len(changes), len(want.changes))
				}
			})
		}
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestJoinTablesRefuses: the join types and options that do not apply to
// two tables are refused when the query starts, saying why.
func TestJoinTablesRefuses(t *testing.T) {
	for _, tc := range []struct {
		how  typed.JoinType
		opts []typed.UpdatesOption
		want string
	}{
		{typed.LeftSemi, nil, "LeftSemi: a join of two tables is Inner, LeftOuter, RightOuter or FullOuter"},
		{typed.LeftAnti, nil, "LeftAnti: a join of two tables"},
		{typed.Inner, []typed.UpdatesOption{typed.AsOf(time.Second)}, "AsOf and TableHistory apply to a stream joined with a table"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			in := typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("clicks", 0))
			joined := typed.JoinTables(clickTable(in), clickTable(in), tc.how, func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string { return c.Key }, tc.opts...)
			_, err := typed.WriteTo(joined, newSink[string]()).Start(t.Context(), newCheckpoint().opts()...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Start: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
