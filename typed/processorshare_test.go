package typed_test

import (
	"context"
	"errors"
	"iter"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// countedPages is pagesProcessor counting its Init and Close calls.
type countedPages struct {
	pagesProcessor
	inits, closes int
}

func (p *countedPages) Init(h *typed.Handle) error {
	p.inits++
	return p.pagesProcessor.Init(h)
}

func (p *countedPages) Close() error {
	p.closes++
	return nil
}

// lastPerUser is the last row of each user in rows.
func lastPerUser(rows []userPages) map[string]userPages {
	out := map[string]userPages{}
	for _, r := range rows {
		out[r.User] = r
	}
	return out
}

// TestProcessorValueServesOneQuery: a processor value holds the state
// variables its Init declares, so a second query started with it while
// the first runs is refused with ErrProcessorInUse, without calling the
// value's Init or Close (which would rebind or close the running query's
// processor); the running query goes on with its own state, as the loop
// over its input says. Once it stops, the value starts a query again,
// which goes on from the checkpoint. Two transformWithState of one query
// with one value are refused alike; a processor of size zero, which
// holds nothing, may serve two queries at once.
func TestProcessorValueServesOneQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		p := &countedPages{}
		pipeline := func(m *typed.MemoryStream[fixtures.Click], sink typed.Sink[userPages]) *typed.Writer[userPages] {
			byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
			return typed.WriteTo(typed.TransformWithState(byUser, p, typed.TimeModeNone, typed.Update), sink)
		}
		ckpt := newCheckpoint()
		sink := newSink[userPages]()
		q, err := pipeline(m, sink).Start(ctx, ckpt.opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { q.Stop() }) // a test that fails leaves no query running
		var in []fixtures.Click
		add := func(c ...fixtures.Click) {
			m.Add(c...)
			in = append(in, c...)
		}
		add(click("a", 1), click("b", 2), click("a", 3))
		time.Sleep(10 * time.Second)
		synctest.Wait()

		// A second query on the same value, on another checkpoint.
		other := typed.NewMemoryStream[fixtures.Click]("other", 0)
		other.Add(click("z", 1))
		_, err = pipeline(other, newSink[userPages]()).Start(ctx, newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if !errors.Is(err, typed.ErrProcessorInUse) || !strings.Contains(err.Error(), "transformWithState") {
			t.Fatalf("a second query on a running query's processor: %v, want ErrProcessorInUse", err)
		}
		onePrefix(t, "the refused start", err)
		if p.inits != 1 || p.closes != 0 {
			t.Fatalf("the refused start called Init %d times and Close %d times, want 1 and 0 in all", p.inits, p.closes)
		}

		// The running query still has its own variables.
		add(click("b", 4), click("c", 5), click("a", 6))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got, want := lastPerUser(sink.rows()), expectedPages(in); !maps.EqualFunc(got, want, samePages) {
			t.Fatalf("the running query after a refused start:\n got %v\nwant %v", got, want)
		}
		if err := q.Stop(); err != nil {
			t.Fatal(err)
		}
		if p.closes != 1 {
			t.Fatalf("Close called %d times by the query's stop, want 1", p.closes)
		}

		// Stopped, the value starts a query again: the same one, from
		// its checkpoint.
		add(click("c", 7), click("d", 8))
		if err := runToEnd(t, pipeline(m, sink), ckpt.opts()...); err != nil {
			t.Fatalf("a restart with the value of a stopped query: %v", err)
		}
		if got, want := lastPerUser(sink.rows()), expectedPages(in); !maps.EqualFunc(got, want, samePages) {
			t.Fatalf("after the restart:\n got %v\nwant %v", got, want)
		}
	})

	// Two transformWithState of one query with one value.
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	p := &pagesProcessor{}
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	first := typed.TransformWithState(byUser, p, typed.TimeModeNone, typed.Append)
	again := typed.TransformWithState(byUser, p, typed.TimeModeNone, typed.Append)
	_, err := typed.WriteTo(typed.Union(first, again), newSink[userPages]()).Start(context.Background(), newCheckpoint().opts()...)
	if !errors.Is(err, typed.ErrProcessorInUse) {
		t.Fatalf("two transformWithState with one processor value: %v, want ErrProcessorInUse", err)
	}
	// and a failed start releases the value: it starts alone.
	m.Add(click("a", 1))
	if err := runToEnd(t, typed.WriteTo(first, newSink[userPages]()), newCheckpoint().opts()...); err != nil {
		t.Fatalf("the value of a start that failed: %v", err)
	}

	// A start that fails in the runtime (a bad option), and a query that
	// fails as it runs, release the value too.
	failing := &failingPages{}
	m = typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("boom", 2))
	byUser = typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	failingQuery := typed.WriteTo(typed.TransformWithState(byUser, failing, typed.TimeModeNone, typed.Append), newSink[userPages]())
	if _, err := failingQuery.Start(context.Background(), newCheckpoint().opts(runtime.PollInterval(0))...); err == nil || errors.Is(err, typed.ErrProcessorInUse) {
		t.Fatalf("a start with PollInterval(0): %v, want its refusal", err)
	}
	if err := runToEnd(t, failingQuery, newCheckpoint().opts()...); err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("the query over a row its processor fails on: %v, want the failure", err)
	}
	failing.spare = "boom"
	if err := runToEnd(t, failingQuery, newCheckpoint().opts()...); err != nil {
		t.Fatalf("the value of a query that failed: %v", err)
	}

	// A processor of size zero serves two running queries, each of which
	// writes its own key.
	synctest.Test(t, func(t *testing.T) {
		var zero upper
		sinks := []*batchSink[string]{newSink[string](), newSink[string]()}
		var queries []*typed.Query
		for i, user := range []string{"a", "b"} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			m.Add(click(user, 1))
			byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
			q, err := typed.WriteTo(typed.TransformWithState(byUser, &zero, typed.TimeModeNone, typed.Append), typed.Sink[string](sinks[i])).
				Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
			if err != nil {
				t.Fatalf("query %d on a processor of size zero: %v", i, err)
			}
			t.Cleanup(func() { q.Stop() })
			queries = append(queries, q)
		}
		time.Sleep(10 * time.Second) // both queries' first batch
		synctest.Wait()
		for i, q := range queries {
			if err := q.Stop(); err != nil {
				t.Fatal(err)
			}
			if got, want := sinks[i].rows(), []string{strings.ToUpper(string(rune('a' + i)))}; !slices.Equal(got, want) {
				t.Errorf("query %d on a processor of size zero wrote %q, want %q", i, got, want)
			}
		}
	})
}

// samePages compares two users' outputs.
func samePages(a, b userPages) bool {
	return a.User == b.User && a.Count == b.Count && strings.Join(a.Pages, ",") == strings.Join(b.Pages, ",") && maps.Equal(a.PerPage, b.PerPage)
}

// failingPages is pagesProcessor failing on the user "boom" unless it is
// spared.
type failingPages struct {
	pagesProcessor
	spare string
}

func (p *failingPages) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], timers typed.TimerValues, emit func(userPages)) error {
	if user == "boom" && p.spare != user {
		return errors.New("boom")
	}
	return p.pagesProcessor.HandleInputRows(ctx, user, rows, timers, emit)
}

// upper is a processor without fields: it writes its key.
type upper struct{}

func (upper) Init(*typed.Handle) error { return nil }

func (upper) HandleInputRows(_ context.Context, user string, _ iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	emit(strings.ToUpper(user))
	return nil
}
