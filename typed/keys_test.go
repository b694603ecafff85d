package typed_test

import (
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// TestKeyTypes groups by an integer key and by a record key, with
// event-time timeouts so that keys are also decoded back from the timer
// index, and compares the rows each key saw, in order, with the input.
func TestKeyTypes(t *testing.T) {
	in := clicks(150, 6)
	t.Run("int64", func(t *testing.T) {
		key := func(c *fixtures.Click) int64 { return int64(len(c.User))*100 - int64(c.Page[1]-'0') }
		checkKeyed(t, in, key, func(k int64) string { return string(rune('A' + k%26)) })
	})
	t.Run("record", func(t *testing.T) {
		key := func(c *fixtures.Click) fixtures.PageKey { return fixtures.PageKey{User: c.User, Page: c.Page} }
		checkKeyed(t, in, key, func(k fixtures.PageKey) string { return k.User + k.Page })
	})
}

func checkKeyed[K comparable](t *testing.T, in []fixtures.Click, key func(*fixtures.Click) K, name func(K) string) {
	want := map[K][]string{}
	for i := range in {
		k := key(&in[i])
		want[k] = append(want[k], in[i].Time.Format(time.RFC3339))
	}
	got := map[K][]string{}
	timedOut := map[K]bool{}
	f := func(k K, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
		if st.HasTimedOut() {
			timedOut[k] = true
			st.Remove()
			return nil
		}
		c, _ := st.Get()
		for r := range rows {
			got[k] = append(got[k], r.Time.Format(time.RFC3339))
			c.Last = r.Time
		}
		st.Update(c)
		emit(fixtures.UserCount{User: name(k)})
		return st.SetTimeoutTimestamp(c.Last.Add(time.Hour))
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 7)
	m.Add(in...)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 0)
	w := typed.WriteTo(typed.FlatMapGroupsWithState(typed.GroupByKey(s, key), typed.Append, typed.EventTimeTimeout, f), newSink[fixtures.UserCount]())
	if err := runToEnd(t, w, newCheckpoint().opts(runtimeFlush())...); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d keys, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Fatalf("key %v saw rows %v, want %v (in input order)", k, got[k], w)
		}
		if !timedOut[k] {
			t.Fatalf("key %v did not time out at the end of the input", k)
		}
	}
}
