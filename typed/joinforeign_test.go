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

// TestJoinTablesByForeignKeyAgainstALoop: a table of users' clicks (the
// left table: each user's latest click, whose page names a category, or
// "none" for a null foreign key) joined on that foreign key with a table
// of categories (the right table), both with tombstones, Inner and
// LeftOuter. After each of two runs on one checkpoint, in one batch or
// several a run, with and without event times, the changes written add
// up to the table a plain loop over the updates makes: each user's
// latest click with its category's latest row; and each change carries
// the row the changes before it left (a removal, a row).
func TestJoinTablesByForeignKeyAgainstALoop(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 13))
	base := time.Unix(1000, 0).UTC()
	type update struct {
		right bool
		c     fixtures.Click
	}
	var updates []update
	for i := range 700 {
		at := base.Add(time.Duration(i) * time.Second)
		if rng.IntN(3) == 0 {
			// A category's row: under User, its name; Page its value.
			c := fixtures.Click{User: fmt.Sprint("c", rng.IntN(5)), Time: at, Page: fmt.Sprint("v", i)}
			if rng.IntN(4) == 0 {
				c.Page = ""
			}
			updates = append(updates, update{true, c})
			continue
		}
		// A user's click, its page the category it refers to.
		c := fixtures.Click{User: fmt.Sprint("u", rng.IntN(12)), Time: at, Page: fmt.Sprint("c", rng.IntN(6))}
		switch rng.IntN(8) {
		case 0:
			c.Page = "" // a tombstone
		case 1:
			c.Page = "none" // no category
		}
		updates = append(updates, update{false, c})
	}
	category := func(c *fixtures.Click) fixtures.RefKey { return fixtures.RefKey{Name: c.Page, Null: c.Page == "none"} }
	text := func(l, r *fixtures.Click) string {
		s := fmt.Sprintf("%s@%d-", l.Page, l.Time.Unix())
		if r == nil {
			return s + "null"
		}
		return s + r.Page
	}
	// The loop's table after the first n updates.
	loop := func(updates []update, how typed.JoinType, n int) map[string]string {
		lefts, rights := map[string]*fixtures.Click{}, map[string]*fixtures.Click{}
		for i := range updates[:n] {
			u := &updates[i]
			side := lefts
			if u.right {
				side = rights
			}
			if u.c.Page == "" {
				delete(side, u.c.User)
			} else {
				side[u.c.User] = &u.c
			}
		}
		table := map[string]string{}
		for user, l := range lefts {
			var r *fixtures.Click
			if l.Page != "none" {
				r = rights[l.Page]
			}
			if r != nil || how == typed.LeftOuter {
				table[user] = text(l, r)
			}
		}
		return table
	}
	halves := []int{len(updates) / 2, len(updates)}
	for _, how := range []typed.JoinType{typed.Inner, typed.LeftOuter} {
		for _, tc := range []struct {
			timed    bool
			perBatch int
			late     bool
		}{{true, 0, false}, {true, 1, false}, {true, 9, false}, {false, 0, false}, {false, 4, false}, {true, 0, true}, {true, 5, true}} {
			t.Run(fmt.Sprintf("%v/timed=%v/rows-per-batch=%d/late=%v", how, tc.timed, tc.perBatch, tc.late), func(t *testing.T) {
				updates := slices.Clone(updates)
				if tc.late {
					// Some updates come late, behind the watermark: each
					// table applies its updates in the order they come.
					for i := 0; i < len(updates); i += 5 {
						updates[i].c.Time = updates[i].c.Time.Add(-100 * time.Second)
					}
				}
				lastAt := map[string]time.Time{}
				leftIn := typed.NewMemoryStream[fixtures.Click]("users", tc.perBatch)
				rightIn := typed.NewMemoryStream[fixtures.Click]("categories", tc.perBatch)
				l, r := typed.FromMemory(leftIn), typed.FromMemory(rightIn)
				if tc.timed {
					l, r = watermarked(l, 0), watermarked(r, 0)
				}
				users := typed.TableUpdates(l, func(c *fixtures.Click) string { return c.User }, func(c *fixtures.Click) bool { return c.Page == "" })
				categories := typed.TableUpdates(r, func(c *fixtures.Click) fixtures.RefKey { return fixtures.RefKey{Name: c.User} }, func(c *fixtures.Click) bool { return c.Page == "" })
				joined := typed.JoinTablesByForeignKey(users, categories, category, how, func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string {
					if tc.timed == c.Time.IsZero() {
						t.Errorf("%s: a change at %v", c.Key, c.Time)
					}
					if tc.timed && !tc.late && tc.perBatch == 0 {
						// A key's changes come in order of time, as the
						// updates do.
						if c.Time.Before(lastAt[c.Key]) {
							t.Errorf("%s: a change at %v after one at %v", c.Key, c.Time, lastAt[c.Key])
						}
						lastAt[c.Key] = c.Time
					}
					prev := "none"
					if c.Previous != nil {
						prev = text(c.Previous.Left, c.Previous.Right)
					}
					if c.Removed {
						return c.Key + " " + prev + ">removed"
					}
					if c.Left == nil || c.Left.User != c.Key || how == typed.Inner && c.Right == nil {
						t.Errorf("%s: a change of rows %v, %v", c.Key, c.Left, c.Right)
					}
					return c.Key + " " + prev + ">" + text(c.Left, c.Right)
				})
				sink := newSink[string]()
				w := typed.WriteTo(joined, sink)
				ck := newCheckpoint()
				from := 0
				for half, n := range halves {
					for _, u := range updates[from:n] {
						if u.right {
							rightIn.Add(u.c)
						} else {
							leftIn.Add(u.c)
						}
					}
					from = n
					if err := runToEnd(t, w, ck.opts()...); err != nil {
						t.Fatalf("half %d: %v", half, err)
					}
					table := map[string]string{}
					for _, row := range sink.rows() {
						user, change, _ := strings.Cut(row, " ")
						prev, now, _ := strings.Cut(change, ">")
						// Each change's previous row is the row the
						// changes before it left; a removal has one.
						if had, ok := table[user]; ok && prev != had || !ok && prev != "none" {
							t.Fatalf("%q: the key's row was %q (ok %v)", row, had, ok)
						}
						if now == "removed" {
							if !strings.Contains(prev, "-") {
								t.Fatalf("%q: a removal of a key without a row", row)
							}
							delete(table, user)
						} else {
							table[user] = now
						}
					}
					if want := loop(updates, how, n); !mapsEqual(table, want) {
						t.Fatalf("after %d updates, the changes make the table\n%v\nwant\n%v", n, table, want)
					}
				}
			})
		}
	}
}

// TestJoinTablesByForeignKeyRefuses: RightOuter and FullOuter, which
// Kafka Streams' foreign-key join lacks, are refused.
func TestJoinTablesByForeignKeyRefuses(t *testing.T) {
	for _, how := range []typed.JoinType{typed.RightOuter, typed.FullOuter, typed.LeftSemi} {
		in := typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("clicks", 0))
		joined := typed.JoinTablesByForeignKey(clickTable(in), clickTable(in), func(c *fixtures.Click) string { return c.Page }, how,
			func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string { return c.Key })
		_, err := typed.WriteTo(joined, newSink[string]()).Start(t.Context(), newCheckpoint().opts()...)
		if want := how.String() + ": a foreign-key join of two tables is Inner or LeftOuter"; err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Start: %v, want an error containing %q", err, want)
		}
	}
	// In Complete mode, which needs an aggregation, the join is named
	// once, not once for each of its three operators.
	for _, mode := range []typed.OutputMode{typed.Complete} {
		in := typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("clicks", 0))
		joined := typed.JoinTablesByForeignKey(clickTable(in), clickTable(in), func(c *fixtures.Click) string { return c.Page }, typed.Inner,
			func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string { return c.Key })
		_, err := typed.WriteTo(joined, newSink[string]()).OutputMode(mode).Start(t.Context(), newCheckpoint().opts()...)
		if err == nil || strings.Count(err.Error(), "does not support the Complete output mode") != 1 || !strings.Contains(err.Error(), "foreignKeyJoin (") {
			t.Errorf("%v: Start: %v, want an error that names the join once", mode, err)
		}
	}
}

// TestJoinTablesByForeignKeyNewFunction: a query started again with
// another foreign-key function (a fix, say) still ends the subscription
// its rows made under the old one: an update of the right row a left row
// referred to before no longer reaches it.
func TestJoinTablesByForeignKeyNewFunction(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	users := typed.NewMemoryStream[fixtures.Click]("users", 0)
	categories := typed.NewMemoryStream[fixtures.Click]("categories", 0)
	run := func(fk func(*fixtures.Click) string, ck *checkpoint, sink *batchSink[string]) {
		t.Helper()
		joined := typed.JoinTablesByForeignKey(clickTable(typed.FromMemory(users)), clickTable(typed.FromMemory(categories)), fk, typed.Inner,
			func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string {
				if c.Removed {
					return c.Key + " removed"
				}
				return c.Key + " " + c.Right.Page
			})
		if err := runToEnd(t, typed.WriteTo(joined, sink), ck.opts()...); err != nil {
			t.Fatal(err)
		}
	}
	ck, sink := newCheckpoint(), newSink[string]()
	categories.Add(fixtures.Click{User: "c1", Page: "v1", Time: base}, fixtures.Click{User: "c2", Page: "v2", Time: base})
	users.Add(fixtures.Click{User: "u1", Page: "c1", Time: base})
	run(func(c *fixtures.Click) string { return c.Page }, ck, sink)
	// The new function puts every user in c2.
	users.Add(fixtures.Click{User: "u1", Page: "c1", Time: base.Add(time.Second)})
	categories.Add(fixtures.Click{User: "c1", Page: "v1b", Time: base.Add(2 * time.Second)})
	run(func(*fixtures.Click) string { return "c2" }, ck, sink)
	if got, want := sink.rows(), []string{"u1 v1", "u1 v2"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

// TestJoinTablesByForeignKeyOrderOfTime: the left keys' changes reach the
// right row in order of their times, not of the keys' first rows: u2's
// update at 12 s is taken before the right row's at 15 s, although u1,
// whose last update is at 20 s, came first in the batch.
func TestJoinTablesByForeignKeyOrderOfTime(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	users := typed.NewMemoryStream[fixtures.Click]("users", 0)
	categories := typed.NewMemoryStream[fixtures.Click]("categories", 0)
	joined := typed.JoinTablesByForeignKey(clickTable(watermarked(typed.FromMemory(users), 0)), clickTable(watermarked(typed.FromMemory(categories), 0)),
		func(c *fixtures.Click) string { return c.Page }, typed.Inner,
		func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string {
			return fmt.Sprintf("%s %s@%d", c.Key, c.Right.Page, c.Time.Sub(base)/time.Second)
		})
	sink := newSink[string]()
	w := typed.WriteTo(joined, sink)
	ck := newCheckpoint()
	categories.Add(fixtures.Click{User: "b", Page: "v0", Time: at(0)})
	users.Add(fixtures.Click{User: "u2", Page: "b", Time: at(1)})
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	users.Add(fixtures.Click{User: "u1", Page: "b", Time: at(10)}, fixtures.Click{User: "u2", Page: "b", Time: at(12)}, fixtures.Click{User: "u1", Page: "b", Time: at(20)})
	categories.Add(fixtures.Click{User: "b", Page: "v1", Time: at(15)})
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	if got, want := sink.rows(), []string{"u2 v0@1", "u2 v0@12", "u2 v1@15", "u1 v1@20"}; !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

// TestCheckpointRowsOfAForeignKeyJoin: the checkpoint of a foreign-key
// join reads back as the tables it holds: each user's category under the
// user (the left operator), and under each category its row and the rows
// of the users in it, by user (the right operator).
func TestCheckpointRowsOfAForeignKeyJoin(t *testing.T) {
	base := time.Unix(1000, 0).UTC()
	users := typed.NewMemoryStream[fixtures.Click]("users", 0)
	categories := typed.NewMemoryStream[fixtures.Click]("categories", 0)
	joined := typed.JoinTablesByForeignKey(clickTable(typed.FromMemory(users)), clickTable(typed.FromMemory(categories)),
		func(c *fixtures.Click) string { return c.Page }, typed.LeftOuter,
		func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) string { return c.Key })
	ck := newCheckpoint()
	categories.Add(fixtures.Click{User: "c1", Page: "v1", Time: base}, fixtures.Click{User: "c2", Page: "v2", Time: base},
		fixtures.Click{User: "c2", Time: base}) // c2 deleted
	users.Add(fixtures.Click{User: "u1", Page: "c1", Time: base}, fixtures.Click{User: "u2", Page: "c2", Time: base},
		fixtures.Click{User: "u3", Page: "c1", Time: base}, fixtures.Click{User: "u3", Page: "c2", Time: base},
		fixtures.Click{User: "u4", Page: "c1", Time: base}, fixtures.Click{User: "u4", Time: base}) // u4 deleted
	if err := runToEnd(t, typed.WriteTo(joined, newSink[string]()), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta := openCheckpoint(t, ck.fs)
	defer c.Close()
	var got []string
	for op := range 2 {
		err := c.Rows(meta, op, "", func(r runtime.StateRow) error {
			got = append(got, fmt.Sprintf("%d %s %s %s %s", op, r.Key, r.Variable, r.MapKey, r.Value))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(got)
	// Inspect writes a record by its fields' names.
	click := func(user, page string) string {
		return fmt.Sprintf(`{"User":%q,"Time":%q,"Page":%q}`, user, base.Format(time.RFC3339), page)
	}
	want := []string{
		`0 "u1" foreignKey  "c1"`, `0 "u2" foreignKey  "c2"`, `0 "u3" foreignKey  "c2"`,
		`1 "c1" left "u1" ` + click("u1", "c1"), `1 "c1" right  ` + click("c1", "v1"),
		`1 "c2" left "u2" ` + click("u2", "c2"), `1 "c2" left "u3" ` + click("u3", "c2"),
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("state\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
