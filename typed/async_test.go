package typed_test

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// tagged is a click with the page a lookup gave it, and its place in the
// input.
type tagged struct {
	N    int
	User string
	Page string
	Time time.Time
}

// pairGate makes the call of each even-numbered row wait until the call
// of the row after it has returned, so that calls end out of order: a
// MapAsync that wrote rows as their calls end would reorder them.
type pairGate struct {
	mu   sync.Mutex
	done map[int]chan struct{}
}

func (g *pairGate) ch(n int) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.done == nil {
		g.done = map[int]chan struct{}{}
	}
	if g.done[n] == nil {
		g.done[n] = make(chan struct{})
	}
	return g.done[n]
}

// TestMapAsyncIsMap: a lookup of each click's page, by MapAsync, for
// concurrencies of 1, 3 and 16, in one batch and in batches of 16 and 60,
// across a restart, in three queries: the lookups' rows reach the sink in
// the input's order, every row once, with one call a row (with more than
// one call at a time, each even row's call ends after the next row's);
// the counts per user and minute of the looked-up rows are those of a
// plain loop; and a deduplication within the watermark, which reads each
// row's event time from the pipeline, writes after MapAsync what it
// writes after Map, batch by batch.
func TestMapAsyncIsMap(t *testing.T) {
	in := orderedClicks(300)
	index := map[time.Time]int{}
	for i, c := range in {
		index[c.Time] = i
	}
	wantCounts := loopWindows(in, time.Minute, time.Minute)
	// run runs the query of build over in with the restart after a third.
	run := func(perBatch int, build func(s typed.Stream[fixtures.Click]) *typed.Writers) {
		t.Helper()
		m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
		ws := build(typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second))
		ck := newCheckpoint()
		third := len(in) / 3
		m.Add(in[:third]...)
		runAllToEnd(t, ws, ck.opts()...)
		m.Add(in[third:]...)
		runAllToEnd(t, ws, ck.opts()...)
	}
	for _, concurrency := range []int{1, 3, 16} {
		for _, perBatch := range []int{0, 16, 60} {
			t.Run(fmt.Sprintf("%d at a time, %d per batch", concurrency, perBatch), func(t *testing.T) {
				gate := &pairGate{}
				var calls atomic.Int64
				lookup := func(ctx context.Context, c fixtures.Click) (tagged, error) {
					calls.Add(1)
					n := index[c.Time]
					if concurrency > 1 && gate != nil {
						if n%2 == 0 && n+1 < len(in) {
							select {
							case <-gate.ch(n + 1):
							case <-ctx.Done():
								return tagged{}, ctx.Err()
							}
						}
						defer close(gate.ch(n))
					}
					goruntime.Gosched()
					return tagged{N: n, User: c.User, Page: strings.ToUpper(c.Page), Time: c.Time}, nil
				}

				rowSink := newSink[tagged]()
				run(perBatch, func(s typed.Stream[fixtures.Click]) *typed.Writers {
					return typed.WriteAll(typed.WriteTo(typed.MapAsync(s, lookup, concurrency), rowSink))
				})
				gate = nil // the other queries call again for each row
				rows := slices.Concat(sortedBatches(rowSink.snapshot())...)
				if len(rows) != len(in) {
					t.Fatalf("%d rows, want %d", len(rows), len(in))
				}
				for i, r := range rows {
					if c := in[i]; r.N != i || r.User != c.User || r.Page != strings.ToUpper(c.Page) || !r.Time.Equal(c.Time) {
						t.Fatalf("row %d is %+v, want the lookup of click %d, %+v", i, r, i, c)
					}
				}
				if n := calls.Load(); n != int64(len(in)) {
					t.Fatalf("%d calls for %d rows: want one a row", n, len(in))
				}

				countSink := newSink[windowCount]()
				run(perBatch, func(s typed.Stream[fixtures.Click]) *typed.Writers {
					counts := typed.AggregateWindows(typed.GroupByWindow(typed.MapAsync(s, lookup, concurrency), func(r *tagged) time.Time { return r.Time },
						typed.Tumbling(time.Minute), func(r *tagged) string { return r.User }), typed.Count[tagged](), countRow)
					return typed.WriteAll(typed.WriteTo(counts, countSink))
				})
				got := map[string]float64{}
				for _, rows := range sortedBatches(countSink.snapshot()) {
					for _, r := range rows {
						got[r.id()] = r.Value
					}
				}
				sameTable(t, "counts", got, wantCounts)

				firstSink, firstMapSink := newSink[tagged](), newSink[tagged]()
				run(perBatch, func(s typed.Stream[fixtures.Click]) *typed.Writers {
					firstOf := func(s typed.Stream[tagged]) typed.Stream[tagged] {
						return typed.DropDuplicatesWithinWatermark(s, func(r *tagged) string { return r.User })
					}
					mapped := typed.Map(s, func(c *fixtures.Click) tagged {
						return tagged{N: index[c.Time], User: c.User, Page: strings.ToUpper(c.Page), Time: c.Time}
					})
					return typed.WriteAll(typed.WriteTo(firstOf(typed.MapAsync(s, lookup, concurrency)), firstSink), typed.WriteTo(firstOf(mapped), firstMapSink))
				})
				firsts, mapFirsts := firstSink.snapshot(), firstMapSink.snapshot()
				if len(firsts) != len(mapFirsts) {
					t.Fatalf("first rows in %d batches, with Map in %d", len(firsts), len(mapFirsts))
				}
				var firstRows int
				for id, rows := range mapFirsts {
					if !slices.EqualFunc(firsts[id], rows, func(a, b tagged) bool { return a.N == b.N }) {
						t.Fatalf("batch %d: the first rows %v, with Map %v", id, firsts[id], rows)
					}
					firstRows += len(rows)
				}
				if firstRows <= 5 || firstRows >= len(in) {
					t.Fatalf("%d first rows of 5 users in %d rows: the deduplication forgets no key, or every one at once", firstRows, len(in))
				}
			})
		}
	}
}

// TestMapAsyncAfterAnOperator: the rows a count per user writes go
// through MapAsync to the sink, each batch's rows in that batch: the
// latest row of each user is its count in a plain loop.
func TestMapAsyncAfterAnOperator(t *testing.T) {
	in := clicks(200, 9)
	want := map[string]float64{}
	for _, c := range in {
		want[c.User]++
	}
	for _, perBatch := range []int{0, 13} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
		m.Add(in...)
		counts := typed.AggregateByKey(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }),
			typed.Count[fixtures.Click](), func(user string, n int64) fixtures.UserCount { return fixtures.UserCount{User: user, Count: n} })
		described := typed.MapAsync(counts, func(_ context.Context, u fixtures.UserCount) (string, error) {
			goruntime.Gosched()
			return fmt.Sprintf("%s=%d", u.User, u.Count), nil
		}, 4)
		sink := newSink[string]()
		var batches int
		for _, p := range runAllToEnd(t, typed.WriteAll(typed.WriteTo(described, sink))) {
			if p.NumInputRows > 0 {
				batches++
				if int64(len(sink.snapshot()[p.BatchID])) != p.Sink.NumOutputRows || p.Sink.NumOutputRows == 0 {
					t.Fatalf("batch %d: the sink got %d rows, the report says %d", p.BatchID, len(sink.snapshot()[p.BatchID]), p.Sink.NumOutputRows)
				}
			}
		}
		got := map[string]float64{}
		for _, rows := range sortedBatches(sink.snapshot()) {
			for _, r := range rows {
				user, n, _ := strings.Cut(r, "=")
				var v float64
				fmt.Sscan(n, &v)
				got[user] = v
			}
		}
		sameTable(t, fmt.Sprintf("%d per batch", perBatch), got, want)
		if perBatch > 0 && batches < 2 {
			t.Fatalf("%d batches with data: the test needs several", batches)
		}
	}
}

// TestMapAsyncFailure: a call that fails, or panics, fails its batch:
// the query stops with an error naming the function, the sink has
// nothing of the batch, and a start on the checkpoint runs the batch
// again, every row once.
func TestMapAsyncFailure(t *testing.T) {
	for _, how := range []string{"error", "panic"} {
		t.Run(how, func(t *testing.T) {
			in := clicks(40, 3)
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 10)
			m.Add(in...)
			var fail atomic.Bool
			fail.Store(true)
			errLookup := errors.New("lookup failed")
			lookup := func(ctx context.Context, c fixtures.Click) (string, error) {
				if c.Time.Equal(in[25].Time) && fail.Load() {
					if how == "panic" {
						panic(errLookup)
					}
					return "", errLookup
				}
				return c.User + " " + c.Page, nil
			}
			sink := newSink[string]()
			w := typed.WriteTo(typed.MapAsync(typed.FromMemory(m), lookup, 3), sink)
			ck := newCheckpoint()
			q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
			if err != nil {
				t.Fatal(err)
			}
			err = q.AwaitTermination()
			if err == nil || !strings.Contains(err.Error(), "MapAsync") || !strings.Contains(err.Error(), "lookup failed") || !strings.Contains(err.Error(), "TestMapAsyncFailure") {
				t.Fatalf("the query ended with %v, want the lookup's failure, naming MapAsync and the function", err)
			}
			if how == "panic" && !strings.Contains(err.Error(), "panic") {
				t.Fatalf("the query ended with %v, want it to say the function panicked", err)
			}
			if _, ok := sink.snapshot()[2]; ok {
				t.Fatal("the sink has rows of the batch that failed")
			}
			fail.Store(false)
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, c := range in {
				want = append(want, c.User+" "+c.Page)
			}
			if got := slices.Concat(sortedBatches(sink.snapshot())...); !slices.Equal(got, want) {
				t.Fatalf("after the restart the sink has %v, want every row once: %v", got, want)
			}
		})
	}
}

// TestMapAsyncOverlapsItsCalls: with a concurrency of 4, the first four
// calls of a batch run at once (each waits for all four to have begun,
// which calls one at a time would never do), and no more than four ever
// run.
func TestMapAsyncOverlapsItsCalls(t *testing.T) {
	const limit = 4
	in := clicks(20, 5)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(in...)
	var running, most, begun atomic.Int64
	all := make(chan struct{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lookup := func(_ context.Context, c fixtures.Click) (string, error) {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		if b := begun.Add(1); b == limit {
			close(all)
		} else if b < limit {
			select {
			case <-all:
			case <-ctx.Done():
				return "", errors.New("the first calls never ran at once")
			}
		}
		return c.User, nil
	}
	sink := newSink[string]()
	if err := runToEnd(t, typed.WriteTo(typed.MapAsync(typed.FromMemory(m), lookup, limit), sink)); err != nil {
		t.Fatal(err)
	}
	if n := most.Load(); n != limit {
		t.Fatalf("at most %d calls ran at once, want %d", n, limit)
	}
	if got := slices.Concat(sortedBatches(sink.snapshot())...); len(got) != len(in) {
		t.Fatalf("%d rows, want %d", len(got), len(in))
	}
}

// TestMapAsyncKeepsEachRowsPlace: MapAsync writes each row with its own
// place in the pipeline (its input and partition, its event time), not
// that of the row pushed last, as the differences with Map show: a
// watermark after it, over a union of two inputs whose second has later
// rows, and a deduplication by event time of the two copies a FlatMap
// makes of each row, before it. Each pipeline's output and watermark are
// those of the same pipeline with Map.
func TestMapAsyncKeepsEachRowsPlace(t *testing.T) {
	for _, async := range []bool{false, true} {
		var mapped func(typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click]
		if async {
			mapped = func(s typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click] {
				return typed.MapAsync(s, func(_ context.Context, c fixtures.Click) (fixtures.Click, error) { return c, nil }, 2)
			}
		} else {
			mapped = func(s typed.Stream[fixtures.Click]) typed.Stream[fixtures.Click] {
				return typed.Map(s, func(c *fixtures.Click) fixtures.Click { return *c })
			}
		}
		t.Run(fmt.Sprintf("async %v", async), func(t *testing.T) {
			// The watermark of the second input: a union of two memory
			// inputs, the second's rows 40 s later.
			a, b := typed.NewMemoryStream[fixtures.Click]("a", 0), typed.NewMemoryStream[fixtures.Click]("b", 0)
			a.Add(click("ann", 10), click("ann", 11))
			b.Add(click("bob", 50), click("bob", 51))
			s := typed.WithWatermark(mapped(typed.Union(typed.FromMemory(a), typed.FromMemory(b))), clickTime, 0)
			q, err := typed.WriteTo(s, newSink[fixtures.Click]()).Start(context.Background(), runtime.PollInterval(time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Stop()
			if err := q.ProcessAllAvailable(context.Background()); err != nil {
				t.Fatal(err)
			}
			a.Add(click("ann", 12))
			if err := q.ProcessAllAvailable(context.Background()); err != nil {
				t.Fatal(err)
			}
			// The second batch runs with the watermark of the first: the
			// least of its partitions', a's 11 s, had none of b's rows been
			// credited to a.
			p, _ := q.LastProgress()
			if wm, _ := p.WatermarkTime(); !wm.Equal(at(11)) {
				t.Fatalf("watermark %v, want a's latest row's %v", wm, at(11))
			}

			// Each row twice: the deduplication by event time keeps one of
			// each, which it could only do knowing each copy's time.
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			in := orderedClicks(10)
			m.Add(in...)
			twice := typed.FlatMap(typed.WithWatermark(typed.FromMemory(m), clickTime, time.Minute),
				func(c *fixtures.Click) []fixtures.Click { return []fixtures.Click{*c, *c} })
			sink := newSink[fixtures.Click]()
			runAllToEnd(t, typed.WriteAll(typed.WriteTo(typed.DropDuplicatesWithEventTime(mapped(twice), func(c *fixtures.Click) string { return c.User }), sink)))
			if got := slices.Concat(sortedBatches(sink.snapshot())...); !slices.EqualFunc(got, in, sameClick) {
				t.Fatalf("the deduplication kept %d rows, want each of the %d once:\n%v", len(got), len(in), got)
			}
		})
	}
}

// TestMapAsyncInAnInitialState: an initial state read from a stream with
// a MapAsync has every row, the last ones, still in their calls when the
// input ends, among them.
func TestMapAsyncInAnInitialState(t *testing.T) {
	init := typed.NewMemoryStream[fixtures.UserCount]("init", 0)
	want := map[string]int64{}
	for i := range 5 {
		u := fixtures.UserCount{User: fmt.Sprint("u", i), Count: int64(100 * (i + 1))}
		init.Add(u)
		want[u.User] = u.Count + 1
	}
	states := typed.MapAsync(typed.FromMemory(init), func(_ context.Context, u fixtures.UserCount) (typed.Pair[string, fixtures.Counter], error) {
		goruntime.Gosched()
		return typed.Pair[string, fixtures.Counter]{Key: u.User, State: fixtures.Counter{Count: u.Count}}, nil
	}, 2)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	for user := range want {
		m.Add(click(user, 1))
	}
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	sink := newSink[fixtures.UserCount]()
	if err := runToEnd(t, typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks, typed.InitialStateStream(states)), sink)); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range sink.rows() {
		got[r.User] = r.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("counts %v, want %v (each user's initial count and its click)", got, want)
	}
}

// TestMapAsyncFailsAtOnce: a call that fails cancels the calls of its
// batch still running, at once: the query fails with that call's error,
// not with a cancelled one's, and the call that waits for its ctx ends.
func TestMapAsyncFailsAtOnce(t *testing.T) {
	in := clicks(2, 4)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(in...)
	guard, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cancelled atomic.Bool
	lookup := func(ctx context.Context, c fixtures.Click) (string, error) {
		if c.Time.Equal(in[1].Time) {
			return "", errors.New("the second row's lookup failed")
		}
		select {
		case <-ctx.Done():
			cancelled.Store(true)
			return "", ctx.Err()
		case <-guard.Done():
			return "", errors.New("never cancelled")
		}
	}
	err := runToEnd(t, typed.WriteTo(typed.MapAsync(typed.FromMemory(m), lookup, 2), newSink[string]()))
	if err == nil || !strings.Contains(err.Error(), "the second row's lookup failed") {
		t.Fatalf("the query ended with %v, want the second row's failure", err)
	}
	if !cancelled.Load() {
		t.Fatal("the first row's call was not cancelled")
	}
}

// TestMapAsyncStopsCleanly: a query stopped while a call runs stops
// without an error, the call seeing its ctx cancelled.
func TestMapAsyncStopsCleanly(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(clicks(1, 4)...)
	running := make(chan struct{})
	lookup := func(ctx context.Context, c fixtures.Click) (string, error) {
		close(running)
		<-ctx.Done()
		return "", ctx.Err()
	}
	q, err := typed.WriteTo(typed.MapAsync(typed.FromMemory(m), lookup, 2), newSink[string]()).Start(context.Background(), runtime.PollInterval(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	<-running
	if err := q.Stop(); err != nil {
		t.Fatalf("Stop: %v, want a clean stop", err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatalf("AwaitTermination: %v, want a clean stop", err)
	}
}
