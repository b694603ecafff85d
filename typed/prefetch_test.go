package typed_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestTimersReadTheirStateAhead: the windows that close in a batch, more
// than a small state cache holds, read their counts from Pebble ahead of
// their timers (a chunk of timers at a time, in key order, with one
// iterator), so that the timers' own reads find them in the cache; and
// the counts written are the loop's, with or without a restart between
// the batch that opens the windows and the one that closes them.
func TestTimersReadTheirStateAhead(t *testing.T) {
	const users = 3000
	base := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	var in []fixtures.Click
	for i := range 3 * users {
		in = append(in, fixtures.Click{User: fmt.Sprintf("user-%05d", i*7%users), Time: base.Add(time.Duration(i) * time.Millisecond)})
	}
	want := loopWindows(in, time.Minute, time.Minute)
	for _, restart := range []bool{false, true} {
		t.Run(fmt.Sprintf("restart=%v", restart), func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			sink := newSink[windowCount]()
			s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, time.Second)
			ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
			w := typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), sink).OutputMode(typed.Append)
			ck := newCheckpoint()
			// A cache of 64 KiB holds a few hundred of the 3,000 windows.
			opts := ck.opts(runtime.StateCacheSize(64 << 10))
			m.Add(in...)
			if restart {
				if err := runToEnd(t, w, opts...); err != nil {
					t.Fatal(err)
				}
			}
			// A row an hour later closes every window.
			m.Add(fixtures.Click{User: "closer", Time: base.Add(time.Hour)})
			q, err := w.Start(t.Context(), append(opts, runtime.WithTrigger(runtime.AvailableNow()))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := await(t, q); err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, r := range sink.rows() {
				got[r.id()] = r.Value
			}
			sameTable(t, "append", got, want)
			// The batch that closed the windows: its reads of them hit.
			progress := q.RecentProgress()
			var closing, before runtime.QueryProgress
			for i, p := range progress {
				if p.Sink.NumOutputRows >= users {
					closing = p
					if i > 0 {
						before = progress[i-1]
					}
				}
			}
			if closing.Sink.NumOutputRows == 0 {
				t.Fatalf("no batch wrote the %d windows: %+v", users, progress)
			}
			misses := closing.StateStore.StateCacheMisses - before.StateStore.StateCacheMisses
			hits := closing.StateStore.StateCacheHits - before.StateStore.StateCacheHits
			if misses > users/10 || hits < users {
				t.Fatalf("the batch that closed %d windows missed the state cache %d times and hit it %d times, want its reads read ahead", users, misses, hits)
			}
		})
	}
}
