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
