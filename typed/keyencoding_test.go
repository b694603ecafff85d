package typed_test

import (
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// floatKey is the grouping key of the tests below: NaN for a Page of
// "nan", -0 for "-0", else the Page's length.
func floatKey(c *fixtures.Click) float64 {
	switch c.Page {
	case "nan":
		return math.NaN()
	case "-0":
		return math.Copysign(0, -1)
	}
	return float64(len(c.Page))
}

// floatKeyName names a key as Spark groups it: every NaN one key, -0
// the key of +0 (its NormalizeFloatingNumbers).
func floatKeyName(k float64) string {
	if k == 0 {
		return "0"
	}
	return fmt.Sprint(k)
}

// TestKeysOneGroupByEncoding: keys that differ as Go values but are one
// key of state, NaNs (each unequal to itself) and -0 and +0, are one
// group in a batch, called once with all their rows, as Spark groups them;
// each was a call of its own, each reading the state the batch began
// with, so that every update but the last was lost. Compared with a loop,
// in one batch and in batches of three rows, across a restart.
func TestKeysOneGroupByEncoding(t *testing.T) {
	var in []fixtures.Click
	for i, page := range strings.Fields("nan a nan -0 nan bb a -0 nan cc") {
		in = append(in, fixtures.Click{User: "u", Time: at(i), Page: page})
	}
	// The 0 key's rows: the -0 ones here and none of +0 (the length of an
	// empty page), added below.
	in = append(in, fixtures.Click{User: "u", Time: at(20), Page: ""}, fixtures.Click{User: "u", Time: at(21), Page: "nan"})
	want := map[string]int64{}
	for i := range in {
		want[floatKeyName(floatKey(&in[i]))]++
	}
	for _, perBatch := range []int{0, 3} {
		t.Run(fmt.Sprint("perBatch=", perBatch), func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			f := func(k float64, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
				c, _ := st.Get()
				for range rows {
					c.Count++
				}
				st.Update(c)
				return fixtures.UserCount{User: floatKeyName(k), Count: c.Count}, nil
			}
			byKey := typed.GroupByKey(typed.FromMemory(m), floatKey)
			sink := newSink[fixtures.UserCount]()
			w := typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, f), sink)
			ck := newCheckpoint()
			for _, part := range [][]fixtures.Click{in[:7], in[7:]} { // a restart between
				m.Add(part...)
				if err := runToEnd(t, w, ck.opts()...); err != nil {
					t.Fatal(err)
				}
			}
			if got := latestByKey(t, sink); !maps.Equal(got, want) {
				t.Errorf("counts %v, want %v", got, want)
			}
		})
	}
}

// latestByKey returns each key's last count written, failing t for a key
// written twice in a batch (called twice, or aggregated as two keys).
func latestByKey(t *testing.T, sink *batchSink[fixtures.UserCount]) map[string]int64 {
	t.Helper()
	got := map[string]int64{}
	for _, rows := range sortedBatches(sink.snapshot()) {
		seen := map[string]bool{}
		for _, r := range rows {
			if seen[r.User] {
				t.Errorf("key %s written twice in one batch", r.User)
			}
			seen[r.User] = true
			got[r.User] = r.Count
		}
	}
	return got
}

// TestAggregateKeysByEncoding: an aggregation by a float key counts the
// NaNs as one key and -0 with +0, as Spark's, in a batch and across
// batches.
func TestAggregateKeysByEncoding(t *testing.T) {
	var in []fixtures.Click
	for i, page := range strings.Fields("nan -0 a nan x -0 nan b nan") {
		in = append(in, fixtures.Click{User: "u", Time: at(i), Page: page})
	}
	in = append(in, fixtures.Click{User: "u", Time: at(30), Page: ""})
	want := map[string]int64{}
	for i := range in {
		want[floatKeyName(floatKey(&in[i]))]++
	}
	for _, perBatch := range []int{0, 2} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
		m.Add(in...)
		counts := typed.AggregateByKey(typed.GroupByKey(typed.FromMemory(m), floatKey), typed.Count[fixtures.Click](),
			func(k float64, n int64) fixtures.UserCount {
				return fixtures.UserCount{User: floatKeyName(k), Count: n}
			})
		sink := newSink[fixtures.UserCount]()
		if err := runToEnd(t, typed.WriteTo(counts, sink), newCheckpoint().opts()...); err != nil {
			t.Fatal(err)
		}
		if got := latestByKey(t, sink); !maps.Equal(got, want) {
			t.Errorf("%d a batch: counts %v, want %v", perBatch, got, want)
		}
	}
}

// TestTimeKeysOneGroupByEncoding: times of one instant and offset,
// decoded each into a *time.Location of its own (an offset that is not a
// whole hour), are one key: one call a batch, and the count goes on
// across batches.
func TestTimeKeysOneGroupByEncoding(t *testing.T) {
	decode := func() fixtures.Click {
		var c fixtures.Click
		if err := c.UnmarshalJSON([]byte(`{"user":"a","time":"2024-01-01T10:00:00+05:30","page":"p"}`)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	var calls []int
	f := func(k fixtures.Click, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := st.Get()
		n := 0
		for range rows {
			n++
		}
		c.Count += int64(n)
		calls = append(calls, n)
		st.Update(c)
		return fixtures.UserCount{User: k.User, Count: c.Count}, nil
	}
	byTime := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.Click { return fixtures.Click{User: c.User, Time: c.Time} })
	sink := newSink[fixtures.UserCount]()
	w := typed.WriteTo(typed.MapGroupsWithState(byTime, typed.NoTimeout, f), sink)
	ck := newCheckpoint()
	for _, n := range []int{2, 1} {
		for range n {
			m.Add(decode())
		}
		if err := runToEnd(t, w, ck.opts()...); err != nil {
			t.Fatal(err)
		}
	}
	rows := sink.rows()
	if !slices.Equal(calls, []int{2, 1}) || rows[len(rows)-1].Count != 3 {
		t.Errorf("calls with %v rows, last count %d; want one call a batch, with 2 then 1 rows, and a count of 3", calls, rows[len(rows)-1].Count)
	}
}

// TestInitialStateKeysByEncoding: an initial state that gives one key
// twice, as two NaNs or as one instant in two *time.Location values, is
// refused at Start, as Spark refuses duplicate keys in it.
func TestInitialStateKeysByEncoding(t *testing.T) {
	f := func(k float64, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		return fixtures.UserCount{}, nil
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	byKey := typed.GroupByKey(typed.FromMemory(m), floatKey)
	w := typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, f, typed.InitialStatePairs(
		typed.Pair[float64, fixtures.Counter]{Key: math.NaN(), State: fixtures.Counter{Count: 1}},
		typed.Pair[float64, fixtures.Counter]{Key: math.NaN(), State: fixtures.Counter{Count: 2}})), newSink[fixtures.UserCount]())
	if _, err := w.Start(t.Context(), newCheckpoint().opts()...); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("two NaN keys in the initial state: %v, want them refused", err)
	}

	g := func(k fixtures.Click, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		return fixtures.UserCount{}, nil
	}
	byTime := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.Click { return fixtures.Click{User: c.User, Time: c.Time} })
	instant := fixtures.Click{User: "a", Time: time.Date(2024, 1, 1, 10, 0, 0, 0, time.FixedZone("", 19800))}
	again := fixtures.Click{User: "a", Time: instant.Time.In(time.FixedZone("", 19800))}
	w2 := typed.WriteTo(typed.MapGroupsWithState(byTime, typed.NoTimeout, g, typed.InitialStatePairs(
		typed.Pair[fixtures.Click, fixtures.Counter]{Key: instant, State: fixtures.Counter{Count: 1}},
		typed.Pair[fixtures.Click, fixtures.Counter]{Key: again, State: fixtures.Counter{Count: 2}})), newSink[fixtures.UserCount]())
	if _, err := w2.Start(t.Context(), newCheckpoint().opts()...); err == nil || !strings.Contains(err.Error(), "more than once") {
		t.Errorf("one instant in two locations in the initial state: %v, want it refused", err)
	}
}

// TestLateRowsOfKeysGroupedByEncoding: a late row that a
// JoiningOpenSessions aggregation drops goes to LateRows whatever Go
// value its key has, when keys are gathered by their encoding (one
// instant in two *time.Location values; a NaN).
func TestLateRowsOfKeysGroupedByEncoding(t *testing.T) {
	locA, locB := time.FixedZone("A", 0), time.FixedZone("B", 0)
	instant := time.Unix(0, 0)
	cases := map[string]func(c *fixtures.Click) any{
		"time": func(c *fixtures.Click) any {
			if c.Page == "a" {
				return fixtures.Click{User: "u", Time: instant.In(locA)}
			}
			return fixtures.Click{User: "u", Time: instant.In(locB)}
		},
		"nan": func(c *fixtures.Click) any { return math.NaN() },
	}
	for name, key := range cases {
		t.Run(name, func(t *testing.T) {
			switch name {
			case "time":
				runLateByEncoding(t, func(c *fixtures.Click) fixtures.Click { return key(c).(fixtures.Click) })
			case "nan":
				runLateByEncoding(t, func(c *fixtures.Click) float64 { return key(c).(float64) })
			}
		})
	}
}

func runLateByEncoding[K comparable](t *testing.T, key func(c *fixtures.Click) K) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	lateSink := newSink[fixtures.Click]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0, typed.LateRows(lateSink))
	ws := typed.GroupByWindow(s, clickTime, typed.Session(10*time.Second).JoiningOpenSessions(), key)
	counts := typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, _ K, n int64) sessionCount {
		return sessionCount{w.Start.Unix(), w.End.Unix(), n}
	})
	sink := newSink[sessionCount]()
	w := typed.WriteTo(counts, sink).OutputMode(typed.Append)
	ck := newCheckpoint()
	m.Add(userClick(100, "b"))
	if rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts()...); len(rows) != 0 || dropped != 0 {
		t.Fatalf("first batch: %q, %d dropped", rows, dropped)
	}
	// The watermark is 100; 92 (key in B) comes first, then 80 (key in
	// A), late, touching no open session.
	m.Add(userClick(92, "b"), userClick(80, "a"))
	rows, dropped := batchRowsToEnd(t, w, sink, sessionText, ck.opts(runtime.FlushEventTime())...)
	if dropped != 1 || !slices.Equal(rows, []string{"92-110:2"}) {
		t.Fatalf("rows %q, %d dropped; want [92-110:2], 1 dropped", rows, dropped)
	}
	if late := lateClicks(lateSink); !slices.Equal(late, []string{"80 a"}) {
		t.Fatalf("LateRows got %q, want [80 a] (the row dropped as late)", late)
	}
}

// TestSkippedFieldKeysOneGroup: keys of a record that differ only in a
// field its encoding leaves out (stream:"-") are one key of state, and so
// one group a batch: one call with all three rows, not three each
// reading the state the batch began with.
func TestSkippedFieldKeysOneGroup(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("u", 1), click("u", 2), click("u", 3))
	f := func(k fixtures.NoteKey, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := st.Get()
		for range rows {
			c.Count++
		}
		st.Update(c)
		return fixtures.UserCount{User: k.User, Count: c.Count}, nil
	}
	byKey := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.NoteKey {
		return fixtures.NoteKey{User: c.User, Note: c.Time.String()}
	})
	sink := newSink[fixtures.UserCount]()
	if err := runToEnd(t, typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, f), sink), newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	if got := latestByKey(t, sink); got["u"] != 3 {
		t.Errorf("count of u %d, want 3", got["u"])
	}
}

type floatWord struct {
	K float64
	W string
}

// TestTableNaNKey: a static table with a row under a NaN key: every
// other key joins its own row (the NaN, a new entry of the index at each
// write and found at no read, took the row of another key's span).
func TestTableNaNKey(t *testing.T) {
	var rows []floatWord
	for i := range 10 {
		rows = append(rows, floatWord{float64(i + 1), fmt.Sprint("w", i+1)})
	}
	rows = append(rows, floatWord{math.NaN(), "nan"})
	for attempt := range 10 {
		table := typed.TableOf(rows, func(w *floatWord) float64 { return w.K })
		m := typed.NewMemoryStream[valueRow]("values", 0)
		joined := typed.JoinTable(typed.FromMemory(m), func(v *valueRow) float64 { return float64(v.V) }, table, typed.Inner,
			func(j typed.Joined[float64, valueRow, floatWord]) string {
				return fmt.Sprintf("%d:%s", j.Left.V, j.Right.W)
			})
		sink := newSink[string]()
		m.Add(valueRows(1, 2, 3, 4, 5, 6, 7, 8, 9, 10)...)
		if err := runToEnd(t, typed.WriteTo(joined, sink), newCheckpoint().opts()...); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := range 10 {
			want = append(want, fmt.Sprintf("%d:w%d", i+1, i+1))
		}
		if got := sortedRows(sink.rows()); !slices.Equal(got, sortedRows(want)) {
			t.Fatalf("attempt %d: rows %q, want %q", attempt, got, sortedRows(want))
		}
	}
}

// TestTableTimeKeyInMemoryAndOnDisk: a table keyed by a record holding a
// time, joined by the same instant in another *time.Location, matches in
// memory as on disk (by the key's encoding).
func TestTableTimeKeyInMemoryAndOnDisk(t *testing.T) {
	instant := time.Date(2024, 1, 1, 10, 0, 0, 0, time.FixedZone("", 19800))
	var rows []fixtures.Click
	for i := range 20 {
		rows = append(rows, fixtures.Click{User: fmt.Sprint("u", i), Time: instant.In(time.FixedZone("", 19800)), Page: "table"})
	}
	key := func(c *fixtures.Click) fixtures.Click { return fixtures.Click{User: c.User, Time: c.Time} }
	for _, disk := range []bool{true, false} {
		t.Run(fmt.Sprint("disk=", disk), func(t *testing.T) {
			var opts []typed.TableOption
			if disk {
				opts = append(opts, typed.TableOnDiskAbove(1), typed.TableDir(t.TempDir()))
			}
			table := typed.TableOf(rows, key, opts...)
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			joined := typed.JoinTable(typed.FromMemory(m), key, table, typed.Inner,
				func(j typed.Joined[fixtures.Click, fixtures.Click, fixtures.Click]) string {
					return j.Left.User + ":" + j.Right.Page
				})
			sink := newSink[string]()
			m.Add(fixtures.Click{User: "u3", Time: instant.In(time.FixedZone("", 19800))})
			if err := runToEnd(t, typed.WriteTo(joined, sink), newCheckpoint().opts()...); err != nil {
				t.Fatal(err)
			}
			if got := sink.rows(); !slices.Equal(got, []string{"u3:table"}) {
				t.Fatalf("rows %q, want [u3:table]", got)
			}
		})
	}
}
