package typed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
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
	w := typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Append)
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
// from its checkpoint after each of several runs: each user with a window
// that a plain loop finds open (rows in it, its end past the watermark)
// has one, due a nanosecond before the end of its earliest such window,
// and a user whose windows have all closed has none (the windows are
// kept by slices, a user's one timer at a time: see slices.go).
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
		earliest := map[string]time.Time{}
		for _, c := range in[:end] {
			first := c.Time.Truncate(slide)
			for start := first; start.After(c.Time.Add(-size)); start = start.Add(-slide) {
				if wend := start.Add(size); wend.After(watermark) {
					if e, ok := earliest[c.User]; !ok || wend.Before(e) {
						earliest[c.User] = wend
					}
				}
			}
		}
		want := map[string]bool{}
		for user, e := range earliest {
			want[fmt.Sprintf("%s %v", user, e.Add(-time.Nanosecond).UnixNano())] = true
		}
		c, err := runtime.OpenCheckpointFS(ck.fs, "ckpt")
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		err = c.Timers(0, func(tm runtime.StoredTimer) error {
			// The key: the user (a string key is its bytes).
			got[fmt.Sprintf("%s %v", tm.Key, tm.At.UnixNano())] = true
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
			// The key's partition key is the rolled-up key's binary
			// encoding, without its set.
			bin, _ := (&fixtures.Click{User: k.user, Page: k.page}).MarshalBinary()
			if part, err := q.PartitionKey("0", key); err != nil || !bytes.Equal(part, bin) {
				t.Fatalf("%s: partition key %x, %v; want %x", key, part, err, bin)
			}
			// Without the pipeline's code, the key is read as its row
			// shows it (its fields' Go names) and by its JSON names, to
			// the key the query stores.
			stored, err := q.EncodeKey("0", key)
			if err != nil {
				t.Fatal(err)
			}
			rowKey := ans.Rows[0].Key
			err = q.ReadState(func(r *runtime.CheckpointReader) error {
				if parsed, err := r.ParseKey("0", rowKey); err != nil || !bytes.Equal(parsed, stored) {
					return fmt.Errorf("ParseKey of %s gave %x, %v; the query stores %x", rowKey, parsed, err, stored)
				}
				if parsed, err := r.ParseKey("0", key); err != nil || !bytes.Equal(parsed, stored) {
					return fmt.Errorf("ParseKey of %s, by JSON names, gave %x, %v; the query stores %x", key, parsed, err, stored)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		for _, bad := range []string{`{"user":"u1"}`, `{"set":1}`, `{"set":1,"key":null}`, `null`, `{"set":"1","key":{}}`} {
			if _, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: []byte(bad)}); !errors.Is(err, runtime.ErrBadStateKey) {
				t.Errorf("the key %s: %v, want ErrBadStateKey", bad, err)
			}
		}
	})
}

// TestLiveStateOfWindows looks up every (window, user) count of a running
// windowed aggregation by the key its rows show, {"window": {"start",
// "end"}, "key": ...}, and compares each with a plain loop's. The key's
// partition key is the user's (input is partitioned by user, not by
// window); the encoding that moves a key to another checkpoint of the
// pipeline, and the one read from the checkpoint alone, give the key the
// query stores. A window of another size or start, or a key without its
// window, is refused.
func TestLiveStateOfWindows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := clicks(300, 14)
		type windowUser struct {
			start time.Time
			user  string
		}
		want := map[windowUser]int64{}
		for _, c := range in {
			want[windowUser{c.Time.Truncate(time.Minute), c.User}]++
		}
		q := runFirstBatch(t, in, func(s typed.Stream[fixtures.Click]) starter {
			ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
			return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Update)
		})
		keyOf := func(start time.Time, size time.Duration, user string) json.RawMessage {
			b, _ := json.Marshal(map[string]any{"window": map[string]time.Time{"start": start, "end": start.Add(size)}, "key": user})
			return b
		}
		for k, n := range want {
			key := keyOf(k.start, time.Minute, k.user)
			ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: key})
			if err != nil || len(ans.Rows) != 1 {
				t.Fatalf("%s: %+v, %v", key, ans, err)
			}
			var acc typed.CountAcc
			if err := json.Unmarshal(ans.Rows[0].Value, &acc); err != nil || acc.N != n {
				t.Fatalf("%s: row %s %s, want a count of %d", key, ans.Rows[0].Key, ans.Rows[0].Value, n)
			}
			var back struct {
				Window typed.Window `json:"window"`
				Key    string       `json:"key"`
			}
			if err := json.Unmarshal(ans.Rows[0].Key, &back); err != nil || !back.Window.Start.Equal(k.start) || back.Key != k.user {
				t.Fatalf("%s: the answer's key is %s", key, ans.Rows[0].Key)
			}
			if part, err := q.PartitionKey("0", key); err != nil || string(part) != k.user {
				t.Fatalf("%s: partition key %q, %v; want the user's", key, part, err)
			}
			stored, err := q.EncodeKey("0", key)
			if err != nil {
				t.Fatal(err)
			}
			moved, err := q.TransferKey("0", key)
			if err != nil {
				t.Fatal(err)
			}
			err = q.ReadState(func(r *runtime.CheckpointReader) error {
				if back, err := r.StoreKey("0", moved); err != nil || !bytes.Equal(back, stored) {
					return fmt.Errorf("StoreKey gave %x, %v; the query stores %x", back, err, stored)
				}
				if parsed, err := r.ParseKey("0", key); err != nil || !bytes.Equal(parsed, stored) {
					return fmt.Errorf("ParseKey gave %x, %v; the query stores %x", parsed, err, stored)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
		}
		start := in[0].Time.Truncate(time.Minute)
		for _, bad := range []json.RawMessage{keyOf(start, 2*time.Minute, "ann"), keyOf(start.Add(30*time.Second), time.Minute, "ann"),
			json.RawMessage(`"ann"`), json.RawMessage(`{"key":"ann"}`),
			json.RawMessage(`{"window":{"start":"2023-11-14T22:13:00Z"},"key":"ann"}`),
			json.RawMessage(`{"window":{"start":"2023-11-14T22:13:00Z","end":"2023-11-14T22:14:00Z"},"key":null}`)} {
			if _, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: bad}); !errors.Is(err, runtime.ErrBadStateKey) {
				t.Errorf("the key %s: %v, want ErrBadStateKey", bad, err)
			}
			if _, err := q.PartitionKey("0", bad); !errors.Is(err, runtime.ErrBadStateKey) {
				t.Errorf("the partition of the key %s: %v, want ErrBadStateKey", bad, err)
			}
		}
	})
}

// TestLiveStateOfJoins reads the rows a running stream-stream join keeps
// for a key, by the key its rows show: the key alone for a join on keys,
// {"window", "key"} for a join on windows. Each side's rows of the key
// (of the window) are there, as a plain loop counts them.
func TestLiveStateOfJoins(t *testing.T) {
	for _, windowed := range []bool{false, true} {
		t.Run(fmt.Sprint("windowed=", windowed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				left, right := clicks(120, 15), clicks(90, 16)
				type sideKey struct {
					start time.Time
					user  string
				}
				want := map[sideKey][2]int{}
				for side, rows := range [][]fixtures.Click{left, right} {
					for _, c := range rows {
						k := sideKey{user: c.User}
						if windowed {
							k.start = c.Time.Truncate(time.Minute)
						}
						n := want[k]
						n[side]++
						want[k] = n
					}
				}
				lm, rm := typed.NewMemoryStream[fixtures.Click]("left", 0), typed.NewMemoryStream[fixtures.Click]("right", 0)
				var opts []typed.JoinOption
				if windowed {
					opts = append(opts, typed.JoinOnWindows(typed.Tumbling(time.Minute)), typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime))
				}
				userOf := func(c *fixtures.Click) string { return c.User }
				joined := typed.Join(typed.GroupByKey(typed.FromMemory(lm), userOf), typed.GroupByKey(typed.FromMemory(rm), userOf), typed.Inner,
					func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Key }, opts...)
				q, err := typed.WriteTo(joined, newSink[string]()).Start(context.Background(),
					newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
				if err != nil {
					t.Fatal(err)
				}
				defer q.Stop()
				lm.Add(left...)
				rm.Add(right...)
				time.Sleep(10 * time.Second)
				synctest.Wait()
				for k, n := range want {
					key, _ := json.Marshal(k.user)
					if windowed {
						key, _ = json.Marshal(map[string]any{"window": map[string]time.Time{"start": k.start, "end": k.start.Add(time.Minute)}, "key": k.user})
					}
					ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: key})
					if err != nil {
						t.Fatalf("%s: %v", key, err)
					}
					var got [2]int
					for _, r := range ans.Rows {
						side := 0
						if strings.Contains(r.Variable, "right") {
							side = 1
						}
						got[side]++
					}
					if got != n {
						t.Fatalf("%s: %d left and %d right rows, want %v: %+v", key, got[0], got[1], n, ans.Rows)
					}
				}
			})
		})
	}
}

// TestParseKeyOfGroupingSets: a grouping set's key of a basic type, given
// as {"set", "key"}, is read from the checkpoint alone (as an App's
// standby reads it, with no query of the pipeline running) into the key
// the query stores; a key without its set is refused.
func TestParseKeyOfGroupingSets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := clicks(100, 17)
		q := runFirstBatch(t, in, func(s typed.Stream[fixtures.Click]) starter {
			ks := typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
			return typed.WriteTo(typed.Rollup(ks, typed.Count[fixtures.Click](), func(user string, set typed.GroupingSet, n int64) int64 { return n },
				func(user *string) { *user = "*" }), newSink[int64]()).OutputMode(typed.Update)
		})
		keys := []json.RawMessage{json.RawMessage(`{"set":1,"key":"*"}`)}
		for _, c := range in[:10] {
			keys = append(keys, json.RawMessage(fmt.Sprintf(`{"set":0,"key":%q}`, c.User)))
		}
		for _, key := range keys {
			stored, err := q.EncodeKey("0", key)
			if err != nil {
				t.Fatal(err)
			}
			err = q.ReadState(func(r *runtime.CheckpointReader) error {
				parsed, err := r.ParseKey("0", key)
				if err == nil && !bytes.Equal(parsed, stored) {
					err = fmt.Errorf("ParseKey gave %x; the query stores %x", parsed, stored)
				}
				return err
			})
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
		}
		for _, bad := range []string{`"ann"`, `{"set":1}`, `{"set":1,"key":null}`} {
			err := q.ReadState(func(r *runtime.CheckpointReader) error {
				_, err := r.ParseKey("0", json.RawMessage(bad))
				return err
			})
			if !errors.Is(err, runtime.ErrBadStateKey) {
				t.Errorf("%s: %v, want ErrBadStateKey", bad, err)
			}
		}
	})
}

// TestLiveStateOfWindowedRecordKeys: a windowed aggregation by a record
// key, which the checkpoint stores in its ordered encoding after the
// window: each (window, key) count read by {"window", "key"} is a plain
// loop's, its partition key is the record's binary encoding, and the
// encoding that carries it to another checkpoint reads back as the key
// the query stores.
func TestLiveStateOfWindowedRecordKeys(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		in := clicks(200, 18)
		type windowKey struct {
			start time.Time
			key   fixtures.PageKey
		}
		want := map[windowKey]int64{}
		for _, c := range in {
			want[windowKey{c.Time.Truncate(time.Minute), fixtures.PageKey{User: c.User, Page: c.Page}}]++
		}
		q := runFirstBatch(t, in, func(s typed.Stream[fixtures.Click]) starter {
			ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute),
				func(c *fixtures.Click) fixtures.PageKey { return fixtures.PageKey{User: c.User, Page: c.Page} })
			return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, k fixtures.PageKey, n int64) int64 { return n }),
				newSink[int64]()).OutputMode(typed.Update)
		})
		for k, n := range want {
			key, _ := json.Marshal(map[string]any{"window": map[string]time.Time{"start": k.start, "end": k.start.Add(time.Minute)}, "key": k.key})
			ans, err := q.LookupState(runtime.StateRequest{Operator: "0", Key: key})
			var acc typed.CountAcc
			if err != nil || len(ans.Rows) != 1 || json.Unmarshal(ans.Rows[0].Value, &acc) != nil || acc.N != n {
				t.Fatalf("%s: %+v, %v; want a count of %d", key, ans, err, n)
			}
			bin, _ := k.key.MarshalBinary()
			if part, err := q.PartitionKey("0", key); err != nil || !bytes.Equal(part, bin) {
				t.Fatalf("%s: partition key %x, %v; want %x", key, part, err, bin)
			}
			stored, err := q.EncodeKey("0", key)
			if err != nil {
				t.Fatal(err)
			}
			moved, err := q.TransferKey("0", key)
			if err != nil || !bytes.Equal(moved[16:], bin) || !bytes.Equal(moved[:16], stored[:16]) {
				t.Fatalf("%s: transfer key %x, %v; want the window, then %x", key, moved, err, bin)
			}
			err = q.ReadState(func(r *runtime.CheckpointReader) error {
				back, err := r.StoreKey("0", moved)
				if err == nil && !bytes.Equal(back, stored) {
					err = fmt.Errorf("StoreKey gave %x; the query stores %x", back, stored)
				}
				return err
			})
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
		}
	})
}
