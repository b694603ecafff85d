package typed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestCheckpointRowsOfStateKinds reads pagesProcessor's value, list and
// map state back from its checkpoint, without its code, and compares it
// with a plain loop over the input.
func TestCheckpointRowsOfStateKinds(t *testing.T) {
	in := clicks(400, 11)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 64)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.TransformWithState(byUser, &pagesProcessor{}, typed.TimeModeNone, typed.Update), newSink[userPages]())
	ck := newCheckpoint()
	for _, chunk := range [][2]int{{0, 150}, {150, 400}} {
		m.Add(in[chunk[0]:chunk[1]]...)
		if err := runToEnd(t, w, ck.opts()...); err != nil {
			t.Fatal(err)
		}
	}
	c, meta := openCheckpoint(t, ck.fs)
	defer c.Close()
	got := map[string]userPages{}
	type listEntry struct {
		index uint64
		page  string
	}
	lists := map[string][]listEntry{}
	err := c.Rows(meta, 0, "", func(r runtime.StateRow) error {
		var user string
		if err := json.Unmarshal(r.Key, &user); err != nil {
			return err
		}
		u, ok := got[user]
		if !ok {
			u = userPages{User: user, PerPage: map[string]int64{}}
		}
		switch r.Variable {
		case "count":
			if err := json.Unmarshal(r.Value, &u.Count); err != nil {
				return err
			}
		case "pages":
			var page string
			if err := json.Unmarshal(r.Value, &page); err != nil || r.Index == nil {
				return fmt.Errorf("list entry %+v: %v", r, err)
			}
			lists[user] = append(lists[user], listEntry{*r.Index, page})
		case "perPage":
			var page string
			var n int64
			if err := json.Unmarshal(r.MapKey, &page); err != nil {
				return err
			}
			if err := json.Unmarshal(r.Value, &n); err != nil {
				return err
			}
			u.PerPage[page] = n
		default:
			return fmt.Errorf("variable %q", r.Variable)
		}
		got[user] = u
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for user, entries := range lists {
		if !slices.IsSortedFunc(entries, func(a, b listEntry) int { return int(a.index) - int(b.index) }) {
			t.Errorf("%s: list entries out of order: %v", user, entries)
		}
		u := got[user]
		for _, e := range entries {
			u.Pages = append(u.Pages, e.page)
		}
		got[user] = u
	}
	if want := expectedPages(in); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("state read from the checkpoint:\n got %v\nwant %v", got, want)
	}
}

// TestCheckpointRowsOfSessions reads the open sessions of a session-window
// aggregation from its checkpoint: each is one of the sessions a plain
// loop finds, with its start, end and count.
func TestCheckpointRowsOfSessions(t *testing.T) {
	in := orderedClicks(200)
	gap := 20 * time.Second
	type session struct {
		Start, End time.Time
		N          int64
	}
	want := map[string][]session{}
	byUser := map[string][]time.Time{}
	for _, c := range in {
		byUser[c.User] = append(byUser[c.User], c.Time)
	}
	for user, times := range byUser {
		sort.Slice(times, func(i, j int) bool { return times[i].Before(times[j]) })
		start, last, n := times[0], times[0], int64(0)
		for _, tm := range times {
			if tm.Sub(last) >= gap {
				want[user] = append(want[user], session{start, last.Add(gap), n})
				start, n = tm, 0
			}
			last = tm
			n++
		}
		want[user] = append(want[user], session{start, last.Add(gap), n})
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(in...)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 30*time.Second)
	ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Session(gap), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Update)
	ck := newCheckpoint()
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta := openCheckpoint(t, ck.fs)
	defer c.Close()
	found := 0
	err := c.Rows(meta, 0, "", func(r runtime.StateRow) error {
		var user string
		if err := json.Unmarshal(r.Key, &user); err != nil {
			return err
		}
		var sessions []struct {
			Start, End time.Time
			Value      struct{ N int64 }
		}
		if err := json.Unmarshal(r.Value, &sessions); err != nil {
			return fmt.Errorf("%s: %s: %v", user, r.Value, err)
		}
		for _, got := range sessions {
			found++
			if !slices.Contains(want[user], session{got.Start, got.End, got.Value.N}) {
				t.Errorf("%s: session %+v in the checkpoint, not among %+v", user, got, want[user])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if found == 0 {
		t.Error("no session in the checkpoint")
	}
}

// TestWindowTimersAreTheOpenWindows reads a sliding-window count's timers
// from its checkpoint after each of several runs: there is one per window
// and user that a plain loop finds open (rows in it, its end past the
// watermark), due a nanosecond before the window's end, and none of a
// closed window: the timers of closed windows were removed as they fired.
func TestWindowTimersAreTheOpenWindows(t *testing.T) {
	in := orderedClicks(300)
	const size, slide, delay = 60 * time.Second, 20 * time.Second, 30 * time.Second
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 16)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, delay)
	ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Sliding(size, slide), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Append)
	ck := newCheckpoint()
	prev := 0
	for _, end := range []int{90, 200, 300} {
		m.Add(in[prev:end]...)
		prev = end
		if err := runToEnd(t, w, ck.opts()...); err != nil {
			t.Fatal(err)
		}
		latest := in[end-1].Time // rows come in event-time order
		watermark := latest.Add(-delay)
		want := map[string]bool{}
		for _, c := range in[:end] {
			first := c.Time.Truncate(slide)
			for start := first; start.After(c.Time.Add(-size)); start = start.Add(-slide) {
				if wend := start.Add(size); wend.After(watermark) {
					want[fmt.Sprintf("%s %v", c.User, wend.Add(-time.Nanosecond).UnixNano())] = true
				}
			}
		}
		c, err := runtime.OpenCheckpointFS(ck.fs, "ckpt")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		err = c.Timers(0, func(tm runtime.StoredTimer) error {
			var user string
			// The key: the window's start and end (8 bytes each), then
			// the user (a string key is its bytes).
			if len(tm.Key) < 16 {
				return fmt.Errorf("timer key of %d bytes", len(tm.Key))
			}
			user = string(tm.Key[16:])
			got[fmt.Sprintf("%s %v", user, tm.At.UnixNano())] = true
			return nil
		})
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("after %d rows (watermark %v): timers\n got %v\nwant %v", end, watermark, got, want)
		}
	}
}

// TestCheckpointRowsOfGroupingSets reads a cube's counts back from its
// checkpoint, without its code: each key is its grouping set and the key
// with the set's dimensions rolled up, and each count is a plain loop's.
func TestCheckpointRowsOfGroupingSets(t *testing.T) {
	in := clicks(300, 12)
	const all = "*"
	dims := []func(*fixtures.Click){
		func(k *fixtures.Click) { k.User = all },
		func(k *fixtures.Click) { k.Page = all },
	}
	want := map[string]int64{}
	for _, c := range in {
		for set := range typed.GroupingSet(4) {
			k := fixtures.Click{User: c.User, Page: c.Page}
			for i, roll := range dims {
				if set.RolledUp(i) {
					roll(&k)
				}
			}
			want[fmt.Sprint(set, " ", k.User, "/", k.Page)]++
		}
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 64)
	m.Add(in...)
	ks := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.Click { return fixtures.Click{User: c.User, Page: c.Page} })
	cube := typed.Cube(ks, typed.Count[fixtures.Click](), func(k fixtures.Click, set typed.GroupingSet, n int64) int64 { return n }, dims...)
	ck := newCheckpoint()
	if err := runToEnd(t, typed.WriteTo(cube, newSink[int64]()).OutputMode(typed.Update), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta := openCheckpoint(t, ck.fs)
	defer c.Close()
	got := map[string]int64{}
	err := c.Rows(meta, 0, "", func(r runtime.StateRow) error {
		var key struct {
			Set typed.GroupingSet `json:"set"`
			Key fixtures.Click    `json:"key"`
		}
		var acc typed.CountAcc
		if err := json.Unmarshal(r.Key, &key); err != nil {
			return fmt.Errorf("key %s: %v", r.Key, err)
		}
		if err := json.Unmarshal(r.Value, &acc); err != nil {
			return fmt.Errorf("value %s: %v", r.Value, err)
		}
		got[fmt.Sprint(key.Set, " ", key.Key.User, "/", key.Key.Page)] = acc.N
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		t.Fatalf("the checkpoint's counts:\n%v\nthe loop's:\n%v", got, want)
	}
}

// TestLiveStateOfGroupingSets looks a rollup's keys up in its running
// query by the keys the checkpoint's rows show: each answer is that key's
// count, a plain loop's.
func TestLiveStateOfGroupingSets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := clicks(200, 13)
		type setKey struct {
			set        typed.GroupingSet
			user, page string
		}
		want := map[setKey]int64{}
		for _, c := range in {
			want[setKey{0, c.User, c.Page}]++
			want[setKey{2, c.User, "*"}]++
			want[setKey{3, "*", "*"}]++
		}
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		ks := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.Click { return fixtures.Click{User: c.User, Page: c.Page} })
		rollup := typed.Rollup(ks, typed.Count[fixtures.Click](), func(k fixtures.Click, set typed.GroupingSet, n int64) int64 { return n },
			func(k *fixtures.Click) { k.User = "*" }, func(k *fixtures.Click) { k.Page = "*" })
		q, err := typed.WriteTo(rollup, newSink[int64]()).OutputMode(typed.Update).
			Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
		if err != nil {
			t.Fatal(err)
		}
		defer q.Stop()
		m.Add(in...)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		for k, n := range want {
			key, _ := json.Marshal(map[string]any{"set": k.set, "key": fixtures.Click{User: k.user, Page: k.page}})
			ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: key})
			if err != nil || len(ans.Rows) != 1 {
				t.Fatalf("%s: %+v, %v", key, ans, err)
			}
			var acc typed.CountAcc
			var back struct {
				Set typed.GroupingSet `json:"set"`
				Key fixtures.Click    `json:"key"`
			}
			if err := json.Unmarshal(ans.Rows[0].Value, &acc); err != nil || acc.N != n {
				t.Fatalf("%s: row %s %s, want a count of %d", key, ans.Rows[0].Key, ans.Rows[0].Value, n)
			}
			if err := json.Unmarshal(ans.Rows[0].Key, &back); err != nil || (setKey{back.Set, back.Key.User, back.Key.Page} != k) {
				t.Fatalf("%s: the answer's key is %s", key, ans.Rows[0].Key)
			}
		}
		for _, bad := range []string{`{"user":"u1"}`, `{"set":1}`, `{"set":1,"key":null}`, `null`, `{"set":"1","key":{}}`} {
			if _, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: []byte(bad)}); !errors.Is(err, runtime.ErrBadStateKey) {
				t.Errorf("the key %s: %v, want ErrBadStateKey", bad, err)
			}
		}
	})
}
