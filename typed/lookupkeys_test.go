package typed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// starter is a pipeline over a stream of clicks, bound to a sink.
type starter interface {
	Start(ctx context.Context, opts ...runtime.Option) (*typed.Query, error)
}

// TestLookupEveryRowByItsKey: for every kind of stateful operator, each
// row that a read of all of its state shows is found again by a read of
// the key that row shows, as a user copies it from the status page or
// streamgen inspect into a read of one key; the rows of that read all
// have that key, and the key carried to another checkpoint of the
// pipeline (TransferKey, then StoreKey) is the one the query stores.
func TestLookupEveryRowByItsKey(t *testing.T) {
	user := func(c *fixtures.Click) string { return c.User }
	page := func(c *fixtures.Click) fixtures.PageKey { return fixtures.PageKey{User: c.User, Page: c.Page} }
	count := func(k string, n int64) int64 { return n }
	for _, tc := range []struct {
		name  string
		build func(s typed.Stream[fixtures.Click]) starter
	}{
		{"mapGroupsWithState", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.MapGroupsWithState(typed.GroupByKey(s, user), typed.NoTimeout, countClicks), newSink[fixtures.UserCount]()).OutputMode(typed.Update)
		}},
		{"flatMapGroupsWithState", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.FlatMapGroupsWithState(typed.GroupByKey(s, user), typed.Update, typed.NoTimeout,
				func(k string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(int64)) error {
					c, _ := st.Get()
					for range rows {
						c.Count++
					}
					st.Update(c)
					emit(int64(c.Count))
					return nil
				}), newSink[int64]()).OutputMode(typed.Update)
		}},
		{"transformWithState", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.TransformWithState(typed.GroupByKey(s, user), &pagesProcessor{}, typed.TimeModeNone, typed.Update), newSink[userPages]())
		}},
		{"aggregate by a record key", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.AggregateByKey(typed.GroupByKey(s, page), typed.Count[fixtures.Click](),
				func(k fixtures.PageKey, n int64) int64 { return n }), newSink[int64]()).OutputMode(typed.Update)
		}},
		{"aggregate by a record key whose JSON names are not its fields'", func(s typed.Stream[fixtures.Click]) starter {
			shop := func(c *fixtures.Click) fixtures.ShopKey {
				return fixtures.ShopKey{ShopID: c.User, OrderNo: int64(len(c.Page))}
			}
			return typed.WriteTo(typed.AggregateByKey(typed.GroupByKey(s, shop), typed.Count[fixtures.Click](),
				func(k fixtures.ShopKey, n int64) int64 { return n }), newSink[int64]()).OutputMode(typed.Update)
		}},
		{"windows by a record key whose JSON names are not its fields'", func(s typed.Stream[fixtures.Click]) starter {
			shop := func(c *fixtures.Click) fixtures.ShopKey {
				return fixtures.ShopKey{ShopID: c.User, OrderNo: int64(len(c.Page))}
			}
			ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), shop)
			return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, k fixtures.ShopKey, n int64) int64 { return n }),
				newSink[int64]()).OutputMode(typed.Update)
		}},
		{"aggregateEvery", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.AggregateEvery(typed.GroupByKey(s, user), 7, nil, typed.Count[fixtures.Click](), count), newSink[int64]())
		}},
		{"sliding windows starting at an offset", func(s typed.Stream[fixtures.Click]) starter {
			ws := typed.GroupByWindow(s, clickTime, typed.Sliding(2*time.Minute, time.Minute).StartingAt(15*time.Second), user)
			return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Update)
		}},
		{"session windows", func(s typed.Stream[fixtures.Click]) starter {
			ws := typed.GroupByWindow(s, clickTime, typed.Session(20*time.Second), user)
			return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Complete)
		}},
		{"dropDuplicates", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.DropDuplicates(s, page), newSink[fixtures.Click]())
		}},
		{"dropDuplicatesWithEventTime", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.DropDuplicatesWithEventTime(typed.WithWatermark(s, clickTime, time.Hour), page), newSink[fixtures.Click]())
		}},
		{"join on keys", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.Join(typed.GroupByKey(s, user), typed.GroupByKey(s, user), typed.Inner,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Key },
				typed.JoinWithin(typed.TimeBetween(-time.Minute, time.Minute)), typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime)), newSink[string]())
		}},
		{"join on windows", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.Join(typed.GroupByKey(s, page), typed.GroupByKey(s, page), typed.Inner,
				func(j typed.Joined[fixtures.PageKey, fixtures.Click, fixtures.Click]) string { return j.Key.User },
				typed.JoinOnWindows(typed.Tumbling(time.Minute)), typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime)), newSink[string]())
		}},
		{"cube", func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.Cube(typed.GroupByKey(s, page), typed.Count[fixtures.Click](),
				func(k fixtures.PageKey, set typed.GroupingSet, n int64) int64 { return n },
				func(k *fixtures.PageKey) { k.User = "*" }, func(k *fixtures.PageKey) { k.Page = "*" }), newSink[int64]()).OutputMode(typed.Update)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := runFirstBatch(t, clicks(150, 19), tc.build)
				all, err := q.LookupState(runtime.StateRequest{Operator: "0", Limit: 100000})
				if err != nil || len(all.Rows) == 0 || all.More {
					t.Fatalf("every row: %d rows (more: %v), %v", len(all.Rows), all.More, err)
				}
				if bytes.HasPrefix(all.Rows[0].Key, []byte("{")) {
					// A record's (or a window's, a set's) key is not null.
					if _, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: []byte("null")}); !errors.Is(err, runtime.ErrBadStateKey) {
						t.Fatalf("the key null: %v, want ErrBadStateKey", err)
					}
				}
				for _, row := range all.Rows {
					ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: row.Key, Limit: 100000})
					if err != nil {
						t.Fatalf("the key %s: %v", row.Key, err)
					}
					found := false
					for _, r := range ans.Rows {
						if !jsonEqual(r.Key, row.Key) {
							t.Fatalf("the key %s read a row of the key %s", row.Key, r.Key)
						}
						found = found || (r.Variable == row.Variable && bytes.Equal(r.Value, row.Value) && jsonEqual(r.MapKey, row.MapKey))
					}
					if !found {
						t.Fatalf("the key %s: its row %s %s is not among the %d read by its key", row.Key, row.Variable, row.Value, len(ans.Rows))
					}
					// Read from the checkpoint alone (an App's standby with
					// no task), and carried to another checkpoint of the
					// pipeline, the key reads back as the one stored.
					stored, err := q.EncodeKey("0", row.Key)
					if err != nil {
						t.Fatal(err)
					}
					moved, err := q.TransferKey("0", row.Key)
					if err != nil {
						t.Fatal(err)
					}
					err = q.ReadState(func(r *runtime.CheckpointReader) error {
						back, err := r.StoreKey("0", moved)
						if err == nil && !bytes.Equal(back, stored) {
							t.Fatalf("the key %s: StoreKey gave %x, the query stores %x", row.Key, back, stored)
						}
						if err != nil {
							return err
						}
						parsed, err := r.ParseKey("0", row.Key)
						if err != nil {
							return err
						}
						found, err := r.Lookup(runtime.StateRequest{Operator: "0", Limit: 100000}, parsed)
						if err == nil && !slices.ContainsFunc(found.Rows, func(r runtime.StateRow) bool {
							return r.Variable == row.Variable && bytes.Equal(r.Value, row.Value) && jsonEqual(r.MapKey, row.MapKey)
						}) {
							t.Fatalf("the key %s read from the checkpoint alone (%x) finds %d rows, not its own", row.Key, parsed, len(found.Rows))
						}
						return err
					})
					if err != nil {
						t.Fatalf("the key %s: %v", row.Key, err)
					}
					// A record key named by its JSON names, or with the
					// two mixed, is the same key, to the query and to
					// the checkpoint alone.
					for _, named := range jsonNamed(row.Key) {
						ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: named, Limit: 100000})
						if err != nil || !slices.ContainsFunc(ans.Rows, func(r runtime.StateRow) bool { return jsonEqual(r.Key, row.Key) }) {
							t.Fatalf("the key %s, as %s: %d rows, %v", row.Key, named, len(ans.Rows), err)
						}
						err = q.ReadState(func(r *runtime.CheckpointReader) error {
							parsed, err := r.ParseKey("0", named)
							if err == nil && !bytes.Equal(parsed, stored) {
								t.Fatalf("the key %s read from the checkpoint alone is %x, the query stores %x", named, parsed, stored)
							}
							return err
						})
						if err != nil {
							t.Fatalf("the key %s from the checkpoint alone: %v", named, err)
						}
					}
					// A record key with a member that names none of its
					// fields is refused, by the query and from the
					// checkpoint alone, rather than read as another key.
					for _, bad := range withUnknownMember(row.Key) {
						_, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: bad})
						if !errors.Is(err, runtime.ErrBadStateKey) || !strings.Contains(err.Error(), `"Zz"`) {
							t.Fatalf("the key %s: %v, want ErrBadStateKey naming its member Zz", bad, err)
						}
						err = q.ReadState(func(r *runtime.CheckpointReader) error {
							_, err := r.ParseKey("0", bad)
							return err
						})
						if !errors.Is(err, runtime.ErrBadStateKey) {
							t.Fatalf("the key %s from the checkpoint alone: %v, want ErrBadStateKey", bad, err)
						}
					}
				}
			})
		})
	}
}

// withUnknownMember returns key, a key as rows show it, with a member
// "Zz" added to its record, and, for a key inside a window or a grouping
// set, with one added there.
func withUnknownMember(key json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	add := func(at func(map[string]any) map[string]any) {
		var v any
		if json.Unmarshal(key, &v) != nil {
			return
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return
		}
		if into := at(obj); into != nil {
			into["Zz"] = 1
			b, _ := json.Marshal(obj)
			out = append(out, b)
		}
	}
	wrapped := func(obj map[string]any) bool { return obj["window"] != nil || obj["set"] != nil }
	add(func(obj map[string]any) map[string]any { // the record
		if !wrapped(obj) {
			return obj
		}
		rec, _ := obj["key"].(map[string]any)
		return rec
	})
	add(func(obj map[string]any) map[string]any { // the window or set
		if wrapped(obj) {
			return obj
		}
		return nil
	})
	return out
}

// jsonNamed returns a ShopKey, as rows show it (inside its window, if
// it has one), with its members named by their JSON names, and with one
// of them so named; nothing for keys of other types.
func jsonNamed(key json.RawMessage) []json.RawMessage {
	var out []json.RawMessage
	for _, renames := range []map[string]string{{"ShopID": "shop_id", "OrderNo": "order_no"}, {"OrderNo": "order_no"}} {
		var obj map[string]any
		if json.Unmarshal(key, &obj) != nil {
			return nil
		}
		rec := obj
		if inner, ok := obj["key"].(map[string]any); ok && obj["window"] != nil {
			rec = inner
		}
		if _, ok := rec["ShopID"]; !ok {
			return nil
		}
		for from, to := range renames {
			rec[to] = rec[from]
			delete(rec, from)
		}
		b, _ := json.Marshal(obj)
		out = append(out, b)
	}
	return out
}

// jsonEqual reports whether a and b are the same JSON value.
func jsonEqual(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xb, yb)
}

// runFirstBatch starts the pipeline build makes, in a synctest bubble,
// lets its first batch read in, and returns the running query, which
// stops when the test ends.
func runFirstBatch(t *testing.T, in []fixtures.Click, build func(typed.Stream[fixtures.Click]) starter) *typed.Query {
	t.Helper()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	q, err := build(typed.FromMemory(m)).Start(context.Background(),
		newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop() })
	m.Add(in...)
	time.Sleep(10 * time.Second)
	synctest.Wait()
	return q
}

// TestLookupOfUnusualStringKeys: the empty string is a key like any
// other: a read of it, by a running query and from the checkpoint alone,
// gives its rows alone, not every key's. A string key that spells a
// number, a bool or null is read by its JSON string, and bare, as a
// URL's key=42 gives it.
func TestLookupOfUnusualStringKeys(t *testing.T) {
	for _, tc := range []struct{ user, key string }{
		{"", `""`}, {"42", `"42"`}, {"42", `42`}, {"-1.5e3", `-1.5e3`}, {"true", `true`}, {"false", ` false `}, {"null", `null`},
	} {
		t.Run(tc.key, func(t *testing.T) { lookupOneStringKey(t, tc.user, tc.key) })
	}
}

// lookupOneStringKey reads the rows of the user given as key.
func lookupOneStringKey(t *testing.T, user, key string) {
	synctest.Test(t, func(t *testing.T) {
		in := clicks(150, 19)
		for i := range in {
			if i%3 == 0 {
				in[i].User = user
			}
		}
		q := runFirstBatch(t, in, func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.AggregateByKey(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), typed.Count[fixtures.Click](),
				func(k string, n int64) int64 { return n }), newSink[int64]()).OutputMode(typed.Update)
		})
		all, err := q.LookupState(runtime.StateRequest{Operator: "0", Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		quoted, _ := json.Marshal(user)
		var want []runtime.StateRow
		for _, r := range all.Rows {
			if string(r.Key) == string(quoted) {
				want = append(want, r)
			}
		}
		if len(want) == 0 || len(want) == len(all.Rows) {
			t.Fatalf("%d rows of the key %s among %d", len(want), quoted, len(all.Rows))
		}
		check := func(how string, rows []runtime.StateRow) {
			t.Helper()
			if len(rows) != len(want) {
				t.Fatalf("%s: %d rows, the key %s has %d", how, len(rows), quoted, len(want))
			}
			for i := range rows {
				if string(rows[i].Key) != string(quoted) || !bytes.Equal(rows[i].Value, want[i].Value) {
					t.Fatalf("%s: row %s %s, want %s %s", how, rows[i].Key, rows[i].Value, want[i].Key, want[i].Value)
				}
			}
		}
		ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: []byte(key), Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		check("the query", ans.Rows)
		err = q.ReadState(func(r *runtime.CheckpointReader) error {
			stored, err := r.ParseKey("0", []byte(key))
			if err != nil {
				return err
			}
			ans, err := r.Lookup(runtime.StateRequest{Operator: "0", Limit: 100000}, stored)
			check("the checkpoint alone", ans.Rows)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestNullIsNoIntKey: a key of a number type given as null is refused,
// by the query and from the checkpoint alone, not read as zero.
func TestNullIsNoIntKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := runFirstBatch(t, clicks(50, 7), func(s typed.Stream[fixtures.Click]) starter {
			return typed.WriteTo(typed.AggregateByKey(typed.GroupByKey(s, func(c *fixtures.Click) int { return len(c.Page) % 3 }), typed.Count[fixtures.Click](),
				func(k int, n int64) int64 { return n }), newSink[int64]()).OutputMode(typed.Update)
		})
		all, err := q.LookupState(runtime.StateRequest{Operator: "0"})
		if err != nil || len(all.Rows) == 0 {
			t.Fatalf("every key: %d rows, %v", len(all.Rows), err)
		}
		if ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: all.Rows[0].Key}); err != nil || len(ans.Rows) != 1 {
			t.Fatalf("the key %s: %d rows, %v", all.Rows[0].Key, len(ans.Rows), err)
		}
		if ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: []byte(" null ")}); !errors.Is(err, runtime.ErrBadStateKey) {
			t.Fatalf("the key null: %d rows, %v; want ErrBadStateKey", len(ans.Rows), err)
		}
		err = q.ReadState(func(r *runtime.CheckpointReader) error {
			_, err := r.ParseKey("0", []byte("null"))
			return err
		})
		if !errors.Is(err, runtime.ErrBadStateKey) {
			t.Fatalf("the key null from the checkpoint alone: %v, want ErrBadStateKey", err)
		}
	})
}
