package typed_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// keepAll keeps every page of a user, in a list (as a join keeps every
// row), and writes the user's count of pages at each call.
type keepAll struct{ pages *typed.ListState[string] }

func (p *keepAll) Init(h *typed.Handle) error {
	p.pages = typed.NewListState[string](h, "pages")
	return nil
}

func (p *keepAll) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(userPages)) error {
	for r := range rows {
		if err := p.pages.AppendValue(ctx, r.Page); err != nil {
			return err
		}
	}
	n := int64(0)
	pages, err := p.pages.Get(ctx)
	if err != nil {
		return err
	}
	for range pages {
		n++
	}
	emit(userPages{User: user, Count: n})
	return nil
}

// TestMaxBatchStateBytes: batches take no more records than fit under
// MaxBatchStateBytes at the state bytes a record the last batch wrote, the
// first of a checkpoint at a kilobyte a record (Kafka Streams commits
// early past statestore.uncommitted.max.bytes), across a restart too, and
// the state and the rows written are what one batch of all the rows
// gives; turned off, a batch takes all there is.
func TestMaxBatchStateBytes(t *testing.T) {
	const (
		budget = 64 << 10
		page   = 1 << 10 // a row's bytes of state, and a little more
	)
	rows := func(from, n int) []fixtures.Click {
		var out []fixtures.Click
		for i := from; i < from+n; i++ {
			out = append(out, fixtures.Click{User: fmt.Sprint("u", i%7), Page: fmt.Sprintf("%04d", i) + strings.Repeat("x", page-4)})
		}
		return out
	}
	// The loop: each user's count of pages after all the rows.
	want := map[string]int64{}
	for _, r := range rows(0, 1000) {
		want[r.User]++
	}
	for _, limit := range []int64{budget, -1} {
		t.Run(fmt.Sprintf("max=%d", limit), func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			sink := newSink[userPages]()
			w := typed.WriteTo(typed.TransformWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }),
				&keepAll{}, typed.TimeModeNone, typed.Update), sink)
			ck := newCheckpoint()
			var batches []int64 // the input rows of each batch with any
			run := func(add []fixtures.Click) {
				m.Add(add...)
				q, err := w.Start(context.Background(), ck.opts(runtime.MaxBatchStateBytes(limit), runtime.WithTrigger(runtime.AvailableNow()))...)
				if err != nil {
					t.Fatal(err)
				}
				if err := q.AwaitTermination(); err != nil {
					t.Fatal(err)
				}
				for _, p := range q.RecentProgress() {
					if p.NumInputRows > 0 {
						batches = append(batches, p.NumInputRows)
					}
				}
			}
			run(rows(0, 400))
			run(rows(400, 300)) // a restart: the measure is in the checkpoint
			run(rows(700, 300))
			got := map[string]int64{}
			for _, r := range sink.rows() {
				got[r.User] = r.Count
			}
			if !maps.Equal(got, want) {
				t.Fatalf("counts %v, want %v", got, want)
			}
			t.Logf("batches of %v rows", batches)
			if limit < 0 {
				if fmt.Sprint(batches) != "[400 300 300]" {
					t.Fatalf("batches of %v rows, want one a run", batches)
				}
				return
			}
			// Every batch takes at most what fits, the first, of a new
			// checkpoint, at a kilobyte a record, the others at what the
			// last wrote a record (a little more than page: its key and
			// sequence number too).
			if len(batches) < 1000*page/budget {
				t.Fatalf("batches of %v rows, want batches of at most %d", batches, budget/page)
			}
			for _, n := range batches {
				if n > budget/page {
					t.Fatalf("batches of %v rows, want batches of at most %d", batches, budget/page)
				}
			}
		})
	}
}
