package typed_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestProcessAllAvailable: a running query (the default trigger), given
// rows a few at a time, has after each ProcessAllAvailable written every
// window its rows close, the last of them in a batch without data that
// the watermark's move asked for, as a plain loop closes them: every
// window that ends at or before the latest event time read (a watermark
// with no delay).
func TestProcessAllAvailable(t *testing.T) {
	in := orderedClicks(120)
	for _, perBatch := range []int{0, 3} {
		t.Run(fmt.Sprint("rows-per-batch=", perBatch), func(t *testing.T) {
			clicks := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			counts := typed.AggregateWindows(typed.GroupByWindow(watermarked(typed.FromMemory(clicks), 0), clickTime, typed.Tumbling(time.Minute),
				func(c *fixtures.Click) string { return c.User }), typed.Count[fixtures.Click](), countRow)
			sink := newSink[windowCount]()
			q, err := typed.WriteTo(counts, sink).OutputMode(typed.Append).Start(t.Context(), newCheckpoint().opts()...)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Stop()
			for round, part := range [][]fixtures.Click{in[:50], in[50:51], in[51:]} {
				clicks.Add(part...)
				if err := q.ProcessAllAvailable(t.Context()); err != nil {
					t.Fatal(err)
				}
				latest := part[len(part)-1].Time
				want := map[string]float64{}
				for _, c := range in {
					start := c.Time.Truncate(time.Minute).UTC()
					if end := start.Add(time.Minute); !end.After(latest) {
						want[windowCount{Window: typed.Window{Start: start, End: end}, User: c.User}.id()]++
					}
				}
				sameTable(t, fmt.Sprintf("round %d", round), writtenOnce(t, sink.snapshot()), want)
			}
			if err := q.Stop(); err != nil {
				t.Fatal(err)
			}
			if err := q.ProcessAllAvailable(t.Context()); err != nil {
				t.Fatalf("a query stopped cleanly: %v", err)
			}
		})
	}
}

// TestProcessAllAvailableFails: a query that fails ends
// ProcessAllAvailable with its error.
func TestProcessAllAvailableFails(t *testing.T) {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	pages := typed.Map(typed.FromMemory(clicks), func(c *fixtures.Click) string {
		if c.Page == "boom" {
			panic("a page called boom")
		}
		return c.Page
	})
	q, err := typed.WriteTo(pages, newSink[string]()).Start(t.Context(), newCheckpoint().opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	clicks.Add(fixtures.Click{User: "ann", Page: "home", Time: at(0)}, fixtures.Click{User: "ann", Page: "boom", Time: at(1)})
	if err := q.ProcessAllAvailable(context.Background()); err == nil || !strings.Contains(err.Error(), "a page called boom") {
		t.Fatalf("ProcessAllAvailable: %v, want the query's error", err)
	}
}

// TestProcessAllAvailableWithProcessingTimeTimeouts: with a ProcessingTime
// trigger, an operator with processing-time timeouts asks for a batch
// without data at every trigger; ProcessAllAvailable still returns once
// the rows are counted, as nothing else waits.
func TestProcessAllAvailableWithProcessingTimeTimeouts(t *testing.T) {
	input := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		if err := state.SetTimeoutDuration(time.Hour); err != nil {
			return fixtures.UserCount{}, err
		}
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	byUser := typed.GroupByKey(typed.FromMemory(input), func(c *fixtures.Click) string { return c.User })
	sink := newSink[fixtures.UserCount]()
	q, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.ProcessingTimeTimeout, count), sink).
		Start(t.Context(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(time.Millisecond)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	in := clicks(30, 3)
	want := map[string]int64{}
	for _, c := range in {
		want[c.User]++
	}
	input.Add(in...)
	// A guard, not a measure: without the fix the call never returns.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := q.ProcessAllAvailable(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range sink.rows() {
		got[r.User] = r.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v", got, want)
	}
}

// TestAwaitedFromAHandler: a processor's handler that waits for its own
// query (AwaitTermination, ProcessAllAvailable), which waits for the
// handler, is told so at once, on the query's goroutine (Concurrency 1)
// as on the goroutines of concurrent handlers; its Stop then ends the
// query. (A handler that waited would never end: a guard of a minute
// fails the test then.)
func TestAwaitedFromAHandler(t *testing.T) {
	for _, conc := range []int{1, 2} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		m.Add(clicks(20, 3)...)
		p := &awaitingProcessor{}
		byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		w := typed.WriteTo(typed.TransformWithState(byUser, p, typed.TimeModeNone, typed.Update, typed.Concurrency(conc)), newSink[fixtures.UserCount]())
		q, err := w.Start(context.Background(), newCheckpoint().opts(runtime.Listener(p))...)
		if err != nil {
			t.Fatal(err)
		}
		ended := make(chan error, 1)
		go func() { ended <- q.AwaitTermination() }()
		select {
		case err := <-ended:
			if err != nil {
				t.Fatalf("Concurrency(%d): the query stopped by its handler ended with %v", conc, err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("Concurrency(%d): the query did not end: a handler waits for it", conc)
		}
		p.mu.Lock()
		if p.calls == 0 {
			t.Fatalf("Concurrency(%d): no handler ran", conc)
		}
		for _, err := range append(p.awaits, p.processes...) {
			if !errors.Is(err, runtime.ErrAwaitedByQuery) {
				t.Errorf("Concurrency(%d): from a handler: %v, want ErrAwaitedByQuery", conc, err)
			}
		}
		for _, err := range p.stops {
			if err != nil {
				t.Errorf("Concurrency(%d): Stop from a handler: %v", conc, err)
			}
		}
		p.mu.Unlock()
	}
}

// awaitingProcessor calls, from each handler, its query's
// AwaitTermination, ProcessAllAvailable and Stop, and keeps what they
// return; it learns its query as its listener.
type awaitingProcessor struct {
	q                        atomic.Pointer[runtime.Query]
	mu                       sync.Mutex
	calls                    int
	awaits, processes, stops []error
}

func (p *awaitingProcessor) OnQueryStarted(e runtime.QueryStarted) { p.q.Store(e.Query) }

func (p *awaitingProcessor) Init(*typed.Handle) error { return nil }

func (p *awaitingProcessor) HandleInputRows(ctx context.Context, _ string, _ iter.Seq[fixtures.Click], _ typed.TimerValues, _ func(fixtures.UserCount)) error {
	q := p.q.Load()
	await := q.AwaitTermination()
	process := q.ProcessAllAvailable(ctx)
	stop := q.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	p.awaits, p.processes, p.stops = append(p.awaits, await), append(p.processes, process), append(p.stops, stop)
	return nil
}
