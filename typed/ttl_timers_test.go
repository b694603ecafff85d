package typed_test

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// cartProcessor keeps each user's cart (a count and items, under an
// event-time TTL of two hours) and writes it as abandoned 30 minutes of
// event time after the user's last click, from an event-time timer.
type cartProcessor struct {
	h     *typed.Handle
	count *typed.ValueState[int64]
	items *typed.MapState[string, int64]
}

const (
	cartTTL     = 2 * time.Hour
	cartTimeout = 30 * time.Minute
)

func (p *cartProcessor) Init(h *typed.Handle) error {
	p.h = h
	p.count = typed.NewValueState[int64](h, "count", typed.WithEventTimeTTL(cartTTL))
	p.items = typed.NewMapState[string, int64](h, "items", typed.WithEventTimeTTL(cartTTL))
	return nil
}

func (p *cartProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, _ func(string)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	var last time.Time
	for r := range rows {
		n++
		last = r.Time
		q, _, err := p.items.GetValue(ctx, r.Page)
		if err != nil {
			return err
		}
		if err := p.items.UpdateValue(ctx, r.Page, q+1); err != nil {
			return err
		}
	}
	if err := p.count.Update(ctx, n); err != nil {
		return err
	}
	timers, err := p.h.ListTimers(ctx)
	if err != nil {
		return err
	}
	for _, at := range timers {
		if err := p.h.DeleteTimer(ctx, at); err != nil {
			return err
		}
	}
	return p.h.RegisterTimer(ctx, last.Add(cartTimeout))
}

func (p *cartProcessor) HandleExpiredTimer(ctx context.Context, user string, _ typed.TimerValues, _ typed.ExpiredTimerInfo, emit func(string)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	cart, err := p.items.Iterator(ctx)
	if err != nil {
		return err
	}
	var items []string
	for item, q := range cart {
		items = append(items, fmt.Sprintf("%s:%d", item, q))
	}
	emit(fmt.Sprintf("%s abandoned n=%d items=%s", user, n, strings.Join(items, ",")))
	if err := p.count.Clear(ctx); err != nil {
		return err
	}
	return p.items.Clear(ctx)
}

// TestEventTimeTTLTimersSeeTheirState: the carts' abandonment rows, from
// timers that read state under an event-time TTL, are those of a plain
// loop over the clicks whatever the batches: one click per batch (the
// watermark creeps), a few, all at once, across a restart, and with the
// end of the input flushed, which moves the watermark past every timer
// and every TTL in one step. Event time has gaps of three hours, which
// one batch also jumps.
func TestEventTimeTTLTimersSeeTheirState(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	var clicks []fixtures.Click
	base := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	for u := range 60 {
		user := fmt.Sprintf("u%02d", u)
		// A session: clicks at most 15 minutes apart (its entries all live
		// until its timer), starting at one of
		// three periods three hours apart.
		at := base.Add(time.Duration(u%3)*3*time.Hour + time.Duration(rng.IntN(40))*time.Minute)
		for range 1 + rng.IntN(6) {
			clicks = append(clicks, fixtures.Click{User: user, Time: at, Page: fmt.Sprintf("item%d", rng.IntN(4))})
			at = at.Add(time.Duration(1+rng.IntN(15)) * time.Minute)
		}
	}
	sort.SliceStable(clicks, func(i, j int) bool { return clicks[i].Time.Before(clicks[j].Time) })

	// The plain loop: each user's clicks make one cart.
	carts := map[string]map[string]int64{}
	counts := map[string]int64{}
	for _, c := range clicks {
		if carts[c.User] == nil {
			carts[c.User] = map[string]int64{}
		}
		carts[c.User][c.Page]++
		counts[c.User]++
	}
	var want []string
	for user, items := range carts {
		var parts []string
		for _, item := range slices.Sorted(func(yield func(string) bool) {
			for k := range items {
				if !yield(k) {
					return
				}
			}
		}) {
			parts = append(parts, fmt.Sprintf("%s:%d", item, items[item]))
		}
		want = append(want, fmt.Sprintf("%s abandoned n=%d items=%s", user, counts[user], strings.Join(parts, ",")))
	}
	slices.Sort(want)

	for _, perBatch := range []int{1, 7, 0} {
		for _, conc := range []int{1, 4} {
			for _, restart := range []bool{false, true} {
				t.Run(fmt.Sprintf("rows-per-batch=%d/concurrency=%d/restart=%v", perBatch, conc, restart), func(t *testing.T) {
					in := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
					// A minute's delay: clicks of one minute are not late for one
					// another.
					s := typed.WithWatermark(typed.FromMemory(in), func(c *fixtures.Click) time.Time { return c.Time }, time.Minute)
					byUser := typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
					out := typed.TransformWithState(byUser, &cartProcessor{}, typed.TimeModeEventTime, typed.Append, typed.Concurrency(conc))
					sink := newSink[string]()
					w := typed.WriteTo(out, sink)
					ck := newCheckpoint()
					half := 0
					if restart {
						half = len(clicks) / 2
						in.Add(clicks[:half]...)
						if err := runToEnd(t, w, ck.opts()...); err != nil {
							t.Fatal(err)
						}
					}
					in.Add(clicks[half:]...)
					if err := runToEnd(t, w, ck.opts(runtime.FlushEventTime())...); err != nil {
						t.Fatal(err)
					}
					got := sink.rows()
					slices.Sort(got)
					if !slices.Equal(got, want) {
						t.Fatalf("%d rows, want %d; first difference:\n%s", len(got), len(want), firstDifference(got, want))
					}
				})
			}
		}
	}
}

// firstDifference shows where two sorted lists first differ.
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
			return fmt.Sprintf("got  %q\nwant %q", g, w)
		}
	}
	return ""
}

// expiryProcessor writes, for each call, the expiry of the key's value,
// of each element of its list and of each entry of its map.
type expiryProcessor struct {
	ttl   typed.StateOption
	value *typed.ValueState[int64]
	list  *typed.ListState[string]
	m     *typed.MapState[string, int64]
}

func (p *expiryProcessor) Init(h *typed.Handle) error {
	p.value = typed.NewValueState[int64](h, "value", p.ttl)
	p.list = typed.NewListState[string](h, "list", p.ttl)
	p.m = typed.NewMapState[string, int64](h, "map", p.ttl)
	return nil
}

func (p *expiryProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	for r := range rows {
		if err := p.value.Update(ctx, 1); err != nil {
			return err
		}
		if err := p.list.AppendValue(ctx, r.Page); err != nil {
			return err
		}
		if err := p.m.UpdateValue(ctx, r.Page, 1); err != nil {
			return err
		}
	}
	var out []string
	at, ok, err := p.value.Expiry(ctx)
	if err != nil {
		return err
	}
	out = append(out, fmt.Sprintf("value=%v/%v", at.Unix(), ok))
	list, err := p.list.Expiries(ctx)
	if err != nil {
		return err
	}
	for _, at := range list {
		out = append(out, fmt.Sprintf("list=%v", at.Unix()))
	}
	keys, err := p.m.Keys(ctx)
	if err != nil {
		return err
	}
	for k := range keys {
		at, ok, err := p.m.Expiry(ctx, k)
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s=%v/%v", k, at.Unix(), ok))
	}
	emit(user + " " + strings.Join(out, " "))
	return nil
}

// TestStateExpiries: a handler reads when each value, list element and map
// entry expires: its TTL after the batch's processing time that wrote it
// (WithTTL), or after the latest event time of its call's rows
// (WithEventTimeTTL); an element written earlier keeps its own.
func TestStateExpiries(t *testing.T) {
	for _, tc := range []struct {
		name string
		ttl  typed.StateOption
		mode typed.TimeMode
		want []string
	}{
		{"processing time", typed.WithTTL(10 * time.Second), typed.TimeModeProcessingTime, []string{
			"a value=1000011/true list=1000011 p1=1000011/true",
			"a value=1000012/true list=1000011 list=1000012 p1=1000011/true p2=1000012/true",
		}},
		{"event time", typed.WithEventTimeTTL(10 * time.Second), typed.TimeModeEventTime, []string{
			"a value=110/true list=110 p1=110/true",
			"a value=130/true list=110 list=130 p1=110/true p2=130/true",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, time.Hour)
			out := typed.TransformWithState(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), &expiryProcessor{ttl: tc.ttl}, tc.mode, typed.Append)
			sink := newSink[string]()
			clock := runtime.NewManualClock(seconds(1_000_000))
			q := startLive(t, typed.WriteTo(out, sink), clock, newCheckpoint().opts()...)
			defer q.stop()
			m.Add(fixtures.Click{User: "a", Time: seconds(100), Page: "p1"})
			q.trigger()
			m.Add(fixtures.Click{User: "a", Time: seconds(120), Page: "p2"})
			q.trigger()
			if got := sink.rows(); !slices.Equal(got, tc.want) {
				t.Fatalf("rows %q, want %q", got, tc.want)
			}
		})
	}
}

// seenProcessor counts each user's rows in a value with a time to live
// (ttl), written again by every row, and writes the count with the row's
// time.
type seenProcessor struct {
	ttl  typed.StateOption
	seen *typed.ValueState[int64]
}

func (p *seenProcessor) Init(h *typed.Handle) error {
	p.seen = typed.NewValueState[int64](h, "seen", p.ttl)
	return nil
}

func (p *seenProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	n, _, err := p.seen.Get(ctx)
	if err != nil {
		return err
	}
	for r := range rows {
		n++
		emit(fmt.Sprintf("%s@%d n=%d", user, r.Time.Unix(), n))
	}
	return p.seen.Update(ctx, n)
}

// TestRestartRunsNoBatchForRewrittenTTL: a value written again in each
// batch leaves its earlier expiries behind in the expiry index, stale.
// After a restart, a trigger without data runs a batch only for state
// that expires by the watermark it would run with (as for a timer due),
// not for those stale expiries: such a batch would move the watermark to
// where no state expires, and the rows after it would be late. Rows
// a@100, a@101 and a@120 (no delay) come in three batches; after the
// restart (the next watermark 120, the value expiring at 123) a trigger
// has no data, and a@115 still counts, against the watermark of the
// batch before the restart (101), as Spark's first batch after a
// restart judges its rows.
func TestRestartRunsNoBatchForRewrittenTTL(t *testing.T) {
	in := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := newSink[string]()
	byUser := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(in), clickTime, 0), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.TransformWithState(byUser, &seenProcessor{ttl: typed.WithEventTimeTTL(3 * time.Second)}, typed.TimeModeEventTime, typed.Append), sink)
	ck := newCheckpoint()
	clock := runtime.NewManualClock(seconds(1_000_000))
	q := startLive(t, w, clock, ck.opts()...)
	for _, at := range []int{100, 101, 120} {
		in.Add(fixtures.Click{User: "a", Time: seconds(at)})
		q.trigger()
	}
	q.stop()
	q = startLive(t, w, clock, ck.opts()...)
	q.clock.Advance(time.Second)
	q.wait()
	if p, ran := q.q.LastProgress(); ran {
		t.Fatalf("after the restart, a trigger without data ran batch %d (watermark %s); nothing expires by it", p.BatchID, p.EventTime["watermark"])
	}
	in.Add(fixtures.Click{User: "a", Time: seconds(115)})
	q.trigger()
	q.stop()
	want := []string{"a@100 n=1", "a@101 n=2", "a@120 n=3", "a@115 n=4"}
	if got := sink.rows(); !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}

// TestIdleTriggersSkipRewrittenTTL: without a time mode (no trigger asks
// for a batch), a value written again at each of three triggers (t+1 s,
// t+2 s, t+3 s), with a time to live of five seconds, leaves expiries at
// t+6 s and t+7 s behind, stale: the idle triggers after it run no batch
// until t+8 s, when the value expires and one does, and a row after it
// starts the count again.
func TestIdleTriggersSkipRewrittenTTL(t *testing.T) {
	in := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := newSink[string]()
	byUser := typed.GroupByKey(typed.FromMemory(in), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.TransformWithState(byUser, &seenProcessor{ttl: typed.WithTTL(5 * time.Second)}, typed.TimeModeNone, typed.Append), sink)
	start := seconds(1_000_000)
	clock := runtime.NewManualClock(start)
	q := startLive(t, w, clock, newCheckpoint().opts()...)
	for at := range 3 {
		in.Add(fixtures.Click{User: "a", Time: seconds(at)})
		q.trigger()
	}
	last := q.last().BatchID
	for range 5 { // t+4 s to t+8 s
		p := q.trigger()
		now := clock.Now().Sub(start)
		switch expired := now >= 8*time.Second; {
		case expired && p.BatchID != last+1:
			t.Fatalf("at t+%v, the value has expired and no batch ran to remove it (last batch %d)", now, p.BatchID)
		case !expired && p.BatchID != last:
			t.Fatalf("at t+%v, batch %d ran without data, with nothing expiring", now, p.BatchID)
		}
	}
	in.Add(fixtures.Click{User: "a", Time: seconds(3)})
	q.trigger()
	q.stop()
	want := []string{"a@0 n=1", "a@1 n=2", "a@2 n=3", "a@3 n=1"}
	if got := sink.rows(); !slices.Equal(got, want) {
		t.Fatalf("rows %q, want %q", got, want)
	}
}
