package typed_test

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// visits counts each user's clicks in a visit, which ends 30 minutes of
// event time after its latest click: the count is a value state, the
// visit's end a timer that each click moves.
type visits struct {
	h     *typed.Handle
	count *typed.ValueState[int64]
}

func (p *visits) Init(h *typed.Handle) error {
	p.h = h
	p.count = typed.NewValueState[int64](h, "count")
	return nil
}

func (p *visits) HandleInputRows(ctx context.Context, user string, clicks iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	timers, err := p.h.ListTimers(ctx) // none, or the visit's end
	if err != nil {
		return err
	}
	var end time.Time
	for _, at := range timers {
		end = at
		if err := p.h.DeleteTimer(ctx, at); err != nil {
			return err
		}
	}
	for c := range clicks {
		if n > 0 && !c.Time.Before(end) { // a click after the visit's end: a visit of its own
			emit(visitText(user, n, end))
			n = 0
		}
		n++
		if e := c.Time.Add(30 * time.Minute); e.After(end) {
			end = e
		}
	}
	if err := p.count.Update(ctx, n); err != nil {
		return err
	}
	return p.h.RegisterTimer(ctx, end)
}

// HandleExpiredTimer writes the visit's count once the watermark passes
// its end, and forgets the visit.
func (p *visits) HandleExpiredTimer(ctx context.Context, user string, _ typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(string)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	emit(visitText(user, n, expired.ExpiryTime()))
	return p.count.Clear(ctx)
}

func visitText(user string, n int64, end time.Time) string {
	return fmt.Sprintf("%s: a visit over at %s, clicks: %d", user, end.Format("15:04"), n)
}

// A processor with state variables and event-time timers, as Spark's
// transformWithState: each user's clicks are counted per visit, and a
// visit's count is written when the watermark passes 30 minutes after
// its latest click, or when the user's next click comes first (Append
// mode: each row written is final). As in Spark, a batch runs with the
// watermark of the batches before it, and its rows are handled before
// its timers. FlushEventTime ends the input by moving the watermark past
// every timer.
func ExampleTransformWithState() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2) // at most 2 rows per batch
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	at := func(user string, hh, mm int) fixtures.Click {
		return fixtures.Click{User: user, Time: day.Add(time.Duration(hh)*time.Hour + time.Duration(mm)*time.Minute)}
	}
	clicks.Add(
		at("ann", 9, 0), at("bob", 9, 5),
		at("ann", 9, 20), at("ann", 10, 45), // ann's first visit ended at 9:50, before her click at 10:45
		at("bob", 11, 0), at("cat", 11, 10), // bob's visit ended at 9:35, before his click at 11:00
	)
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	byUser := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(clicks), clickTime, 0), func(c *fixtures.Click) string { return c.User })
	sink := typed.NewMemorySink[string]()
	out := typed.TransformWithState(byUser, &visits{}, typed.TimeModeEventTime, typed.Append)
	q, err := typed.WriteTo(out, sink).OutputMode(typed.Append).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range sink.Rows() {
		fmt.Println(r)
	}
	// Output:
	// ann: a visit over at 09:50, clicks: 2
	// bob: a visit over at 09:35, clicks: 1
	// ann: a visit over at 11:15, clicks: 1
	// bob: a visit over at 11:30, clicks: 1
	// cat: a visit over at 11:40, clicks: 1
}
