package queries_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/generator"
	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/bench/nexmark/queries"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// testEvents generates n events at rate events a second of event time.
func testEvents(t testing.TB, n int64, rate int) []model.Event {
	return testEventsFrom(t, generator.DefaultBaseTime, n, rate)
}

// testEventsFrom generates n events at rate events a second of event
// time from base on.
func testEventsFrom(t testing.TB, base time.Time, n int64, rate int) []model.Event {
	t.Helper()
	cfg := generator.DefaultConfig()
	cfg.Events, cfg.Rate, cfg.BaseTime = n, rate, base
	g := generator.New(cfg, 0)
	var out []model.Event
	var e model.Event
	for g.Next(&e) {
		out = append(out, clone(&e))
	}
	if int64(len(out)) != n {
		t.Fatalf("the generator made %d events, want %d", len(out), n)
	}
	return out
}

// clone copies an event, whose parts the generator reuses.
func clone(e *model.Event) model.Event {
	var c model.Event
	switch {
	case e.Person != nil:
		p := *e.Person
		c.Person = &p
	case e.Auction != nil:
		a := *e.Auction
		c.Auction = &a
	case e.Bid != nil:
		b := *e.Bid
		c.Bid = &b
	}
	return c
}

// memOutput keeps a query's lines by batch: a batch written again
// replaces its lines.
type memOutput struct {
	mu      sync.Mutex
	batches map[int64][][]byte
}

func (o *memOutput) Write(_ context.Context, batch int64, lines [][]byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.batches == nil {
		o.batches = map[int64][][]byte{}
	}
	kept := make([][]byte, len(lines))
	for i, l := range lines {
		kept[i] = slices.Clone(l)
	}
	o.batches[batch] = kept
	return nil
}

// lines returns the lines in batch order.
func (o *memOutput) lines() [][]byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	var ids []int64
	for id := range o.batches {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out [][]byte
	for _, id := range ids {
		out = append(out, o.batches[id]...)
	}
	return out
}

// runQuery runs q over events split as c says, stopping and starting
// again on its checkpoint after each part, and returns its output lines.
// The last run ends the input: the watermark passes every event time.
func runQuery(t *testing.T, q *queries.Query, events []model.Event, c split) [][]byte {
	t.Helper()
	dir := t.TempDir()
	m := typed.NewMemoryStream[model.Event]("events", c.perBatch)
	out := &memOutput{}
	clock := runtime.NewManualClock(queries.LoopClock)
	parts := c.parts
	run := func(opts ...runtime.Option) {
		opts = append(opts, runtime.Checkpoint(dir), runtime.WithTrigger(runtime.AvailableNow()), runtime.WithManualClock(clock))
		if c.closes > 0 {
			opts = append(opts, runtime.WindowClosesPerBatch(c.closes))
		}
		run, err := q.Start(context.Background(), typed.FromMemory(m), out, opts...)
		if err != nil {
			t.Fatalf("%s: start: %v", q.Name, err)
		}
		if err := run.AwaitTermination(); err != nil {
			t.Fatalf("%s: %v", q.Name, err)
		}
	}
	for i := range parts {
		m.Add(events[i*len(events)/parts : (i+1)*len(events)/parts]...)
		if i == parts-1 {
			run(runtime.FlushEventTime())
		} else {
			run()
		}
	}
	if q.ProcessingTime {
		// The processing-time windows end: a run after them fires their
		// timers.
		clock.Advance(10 * time.Second)
		run()
	}
	return out.lines()
}

// TestQueriesAgainstALoop runs every query over generated events, in one
// batch and in many, across restarts, and compares its result table with
// the one a plain loop over the events computes from the SQL.
func TestQueriesAgainstALoop(t *testing.T) {
	// 30 seconds of event time: several of every window, sessions that
	// end, auctions that close.
	events := testEvents(t, 30_000, 1_000)
	// A bid's bidder is a person some 50,000 events later (the
	// generator's double offset of bidder ids): q23, which joins bids
	// with their bidders, joins nothing before that.
	longer := testEvents(t, 60_000, 1_000)
	for _, q := range queries.All {
		t.Run(q.Name, func(t *testing.T) {
			t.Parallel()
			events := events
			if q.Name == "q23" {
				events = longer
			}
			want := loopResult(t, q, events)
			t.Logf("%s: %d rows", q.Name, len(want))
			compareRuns(t, q, events, want, []split{{0, 1, 0}, {997, 1, 0}, {4_000, 3, 0}, {997, 3, 7}})
		})
	}
}

// TestDailyQueriesAcrossMidnight runs the queries grouped by day (q15,
// q16, q17) over events from ten minutes before midnight to ten after, so
// that their days and minutes change, and compares them with the loop.
func TestDailyQueriesAcrossMidnight(t *testing.T) {
	events := testEventsFrom(t, time.Date(2025, 12, 31, 23, 50, 0, 0, time.UTC), 24_000, 20)
	for _, q := range queries.All {
		if !slices.Contains(q.Keys, "day") {
			continue
		}
		t.Run(q.Name, func(t *testing.T) {
			t.Parallel()
			want := loopResult(t, q, events)
			days := map[string]bool{}
			for _, l := range want {
				days[l[strings.Index(l, `"day":`):][:18]] = true
			}
			if len(days) != 2 {
				t.Fatalf("%s: the loop's result has %d days, want 2: the events test no midnight", q.Name, len(days))
			}
			compareRuns(t, q, events, want, []split{{0, 1, 0}, {1_500, 2, 0}})
		})
	}
}

// TestQ14AtEveryHour runs q14 over events from each hour of a day, one
// second across each hour's end, so that its CASE on HOUR(dateTime) takes
// each of its branches, on both sides of each of its bounds (the other
// tests' events are all in the first minute of a day, its nightTime).
func TestQ14AtEveryHour(t *testing.T) {
	q, err := queries.ByName("q14")
	if err != nil {
		t.Fatal(err)
	}
	var events []model.Event
	for h := range 24 {
		events = append(events, testEventsFrom(t, time.Date(2026, 1, 1, h, 59, 59, 500_000_000, time.UTC), 1_000, 1_000)...)
	}
	want := loopResult(t, q, events)
	kinds := map[string]int{}
	for _, l := range want {
		var r struct{ BidTimeType string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		kinds[r.BidTimeType]++
	}
	t.Logf("q14: %d rows, by bidTimeType %v", len(want), kinds)
	for _, k := range []string{"dayTime", "nightTime", "otherTime"} {
		if kinds[k] == 0 {
			t.Errorf("the loop's result has no row of bidTimeType %s: the events test no such hour", k)
		}
	}
	compareRuns(t, q, events, want, []split{{0, 1, 0}, {997, 1, 0}, {3_000, 3, 0}})
}

// loopResult is q's result table over events by its plain loop; it fails
// the test when the table is empty.
func loopResult(t *testing.T, q *queries.Query, events []model.Event) []string {
	t.Helper()
	loop, err := q.Loop(events)
	if err != nil {
		t.Fatal(err)
	}
	want, err := queries.Final(q, loop)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatalf("%s: the loop's result is empty: the events test nothing", q.Name)
	}
	return want
}

// split is how a test run hands a query its events: perBatch rows a
// batch (0: one batch), in parts runs, each started on the checkpoint of
// the one before.
// split is how a test runs a query: perBatch events a batch (0: one
// batch), in parts runs, and, when closes is not 0, at most that many
// windows closed a batch (runtime.WindowClosesPerBatch).
type split struct{ perBatch, parts, closes int }

// compareRuns runs q over events split each way and compares its result
// table with want.
func compareRuns(t *testing.T, q *queries.Query, events []model.Event, want []string, splits []split) {
	t.Helper()
	for _, c := range splits {
		got, err := queries.Final(q, runQuery(t, q, events, c))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s, %d rows a batch, %d runs: %d rows, the loop %d; first difference:\n%s",
				q.Name, c.perBatch, c.parts, len(got), len(want), firstDifference(got, want))
			if c.closes > 0 {
				t.Logf("(at most %d windows closed a batch)", c.closes)
			}
		}
	}
}

func firstDifference(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("  got  %s\n  want %s", g, w)
		}
	}
	return ""
}

// TestEveryQueryIsListed: the suite has q0 to q23 (nexmark/nexmark's
// conf/nexmark.yaml), each here or excluded with a reason.
func TestEveryQueryIsListed(t *testing.T) {
	for n := range 24 {
		name := fmt.Sprintf("q%d", n)
		if _, err := queries.ByName(name); err != nil && !strings.Contains(err.Error(), "not in the suite") {
			t.Errorf("%s: %v", name, err)
		}
	}
}
