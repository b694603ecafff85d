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
	var items []string
	for item, q := range p.items.Iterator(ctx) {
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
