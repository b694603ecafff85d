package typed_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// withDuplicates makes n clicks in increasing event time, a third of them
// repeated at once (same user and time, another page).
func withDuplicates(n int) []fixtures.Click {
	base := orderedClicks(n)
	var out []fixtures.Click
	for i, c := range base {
		out = append(out, c)
		if i%3 == 0 && i+2 < len(base) {
			dup := c
			dup.Page = "dup"
			out = append(out, dup)
		}
	}
	return out
}

// TestDropDuplicates compares with a plain loop that keeps the first row
// of each key: without a watermark (key: user and page), and with one
// (key: user and event time, so keys are forgotten as the watermark
// passes them), under several batch sizes and a restart; with the
// watermark, state stays bounded.
func TestDropDuplicates(t *testing.T) {
	in := withDuplicates(300)
	type key struct {
		user string
		at   time.Time
	}
	var want []fixtures.Click
	seen := map[key]bool{}
	for _, c := range in {
		if k := (key{c.User, c.Time}); !seen[k] {
			seen[k] = true
			want = append(want, c)
		}
	}
	for _, perBatch := range []int{0, 11, 50} {
		for _, watermarked := range []bool{false, true} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			s := typed.FromMemory(m)
			if watermarked {
				s = typed.WithWatermark(s, func(c *fixtures.Click) time.Time { return c.Time }, 5*time.Second)
			}
			sink := newSink[fixtures.Click]()
			w := typed.WriteTo(typed.DropDuplicates(s, func(c *fixtures.Click) string { return c.User + "@" + c.Time.String() }), sink)
			ck := newCheckpoint()
			m.Add(in[:100]...)
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
			m.Add(in[100:]...)
			q, err := w.Start(t.Context(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.AwaitTermination(); err != nil {
				t.Fatal(err)
			}
			got := sink.rows()
			// Within a batch rows come out by key, in order of first
			// arrival; so compare as sets, and check each is the first.
			sortClicks := func(c []fixtures.Click) []string {
				var out []string
				for _, x := range c {
					out = append(out, fmt.Sprint(x.User, x.Time.Unix(), x.Page))
				}
				slices.Sort(out)
				return out
			}
			if !slices.Equal(sortClicks(got), sortClicks(want)) {
				t.Fatalf("%d per batch, watermark %v: %d rows, want %d (the first of each key)", perBatch, watermarked, len(got), len(want))
			}
			if p, _ := q.LastProgress(); watermarked && p.StateOperators[0].NumRowsTotal > 40 {
				t.Fatalf("%d keys in state at the end: the watermark does not evict them", p.StateOperators[0].NumRowsTotal)
			}
		}
	}
}

// TestDropDuplicatesWithinWatermark: a duplicate within the watermark's
// delay of its key's first row is dropped; after the watermark has passed
// the first row's time plus the delay, the key is forgotten and its next
// row kept.
func TestDropDuplicatesWithinWatermark(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // one row per batch
	m.Add(
		fixtures.Click{User: "a", Time: at(0), Page: "first"},
		fixtures.Click{User: "a", Time: at(8), Page: "within"}, // dropped: within 10 s of the first
		fixtures.Click{User: "b", Time: at(25), Page: "b"},     // moves the watermark to 15
		fixtures.Click{User: "a", Time: at(16), Page: "after"}, // a's state expired at 10: kept
		fixtures.Click{User: "a", Time: at(20), Page: "again"}, // within 10 s of 16: dropped
		fixtures.Click{User: "a", Time: at(12), Page: "late"},  // at or before the watermark (15): late
	)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 10*time.Second)
	sink := newSink[fixtures.Click]()
	w := typed.WriteTo(typed.DropDuplicatesWithinWatermark(s, func(c *fixtures.Click) string { return c.User }), sink)
	if err := runToEnd(t, w, newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range sink.rows() {
		got = append(got, c.Page)
	}
	if want := []string{"first", "b", "after"}; !slices.Equal(got, want) {
		t.Fatalf("kept %q, want %q", got, want)
	}
}
