package typedtest_test

import (
	"context"
	"iter"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
	"github.com/streamgen/streamgen/typed/typedtest"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

func click(user string, s int) fixtures.Click {
	return fixtures.Click{User: user, Time: t0.Add(time.Duration(s) * time.Second), Page: "/"}
}

func byUser(c *fixtures.Click) string { return c.User }

// counter counts each user's clicks in a value state that lives an hour
// of processing time after its last write, and writes the count.
type counter struct{ count *typed.ValueState[int64] }

func (p *counter) Init(h *typed.Handle) error {
	p.count = typed.NewValueState[int64](h, "count", typed.WithTTL(time.Hour))
	return nil
}

func (p *counter) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(fixtures.UserCount)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	for range rows {
		n++
	}
	emit(fixtures.UserCount{User: user, Count: n})
	return p.count.Update(ctx, n)
}

// TestValueStateAndTTL: a processor's output a call at a time, its value
// state with its expiry, and the value gone once the clock passes it.
func TestValueStateAndTTL(t *testing.T) {
	d := typedtest.NewProcessor(t, typed.StatefulProcessor[string, fixtures.Click, fixtures.UserCount](&counter{}), byUser, typed.TimeModeProcessingTime,
		typedtest.OutputMode[fixtures.Click](typed.Update))
	out := d.Run(click("ana", 1), click("ana", 2), click("bo", 3))
	slices.SortFunc(out, func(a, b fixtures.UserCount) int { return len(a.User) - len(b.User) + int(a.Count-b.Count) })
	if len(out) != 2 {
		t.Fatalf("first batch: %+v", out)
	}
	if got := d.Run(click("ana", 4)); len(got) != 1 || got[0].Count != 3 {
		t.Fatalf("second batch: %+v, want ana's count 3", got)
	}
	rows := d.State(0, "ana", "count")
	n, ok := typedtest.Value[int64](t, rows)
	if !ok || n != 3 {
		t.Fatalf("ana's count in state: %v %v", n, ok)
	}
	if rows[0].ExpiresAt == nil || !rows[0].ExpiresAt.Equal(d.Now().Add(time.Hour)) {
		t.Fatalf("ana's count expires at %v, want an hour after %v", rows[0].ExpiresAt, d.Now())
	}
	d.AdvanceProcessingTime(2 * time.Hour)
	if got := d.Run(click("ana", 5)); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("after the TTL: %+v, want a count from 1", got)
	}
}

// sessions closes a user's session once the watermark passes its last
// click by 30 seconds, with an event-time timer.
type sessions struct {
	h    *typed.Handle
	seen *typed.ValueState[fixtures.Counter]
}

func (p *sessions) Init(h *typed.Handle) error {
	p.h, p.seen = h, typed.NewValueState[fixtures.Counter](h, "session")
	return nil
}

func (p *sessions) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, _ func(fixtures.UserCount)) error {
	s, _, err := p.seen.Get(ctx)
	if err != nil {
		return err
	}
	old := s.Last
	for c := range rows {
		if s.Count == 0 || c.Time.Before(s.First) {
			s.First = c.Time
		}
		if c.Time.After(s.Last) {
			s.Last = c.Time
		}
		s.Count++
	}
	if !old.IsZero() {
		if err := p.h.DeleteTimer(ctx, old.Add(30*time.Second)); err != nil {
			return err
		}
	}
	if err := p.h.RegisterTimer(ctx, s.Last.Add(30*time.Second)); err != nil {
		return err
	}
	return p.seen.Update(ctx, s)
}

func (p *sessions) HandleExpiredTimer(ctx context.Context, user string, _ typed.TimerValues, _ typed.ExpiredTimerInfo, emit func(fixtures.UserCount)) error {
	s, _, err := p.seen.Get(ctx)
	if err != nil {
		return err
	}
	emit(fixtures.UserCount{User: user, Count: s.Count, First: s.First, Last: s.Last, TimedOut: true})
	return p.seen.Clear(ctx)
}

// TestEventTimeTimers: the timers a key registered, the watermark the
// test sets firing them, and the rows too late for it.
func TestEventTimeTimers(t *testing.T) {
	d := typedtest.NewProcessor(t, typed.StatefulProcessor[string, fixtures.Click, fixtures.UserCount](&sessions{}), byUser, typed.TimeModeEventTime,
		typedtest.EventTime(func(c *fixtures.Click) time.Time { return c.Time }, 5*time.Second))
	if out := d.Run(click("ana", 0), click("ana", 10), click("bo", 12)); len(out) != 0 {
		t.Fatalf("rows before any timer: %+v", out)
	}
	if got, want := d.Timers(0, "ana"), []time.Time{t0.Add(40 * time.Second)}; !slices.Equal(got, want) {
		t.Fatalf("ana's timers %v, want %v", got, want)
	}
	// ana's fires, bo's (at 42 s) not yet.
	out := d.SetWatermark(t0.Add(41 * time.Second))
	if len(out) != 1 || out[0].User != "ana" || out[0].Count != 2 || !out[0].TimedOut {
		t.Fatalf("at watermark 41 s: %+v, want ana's session of 2", out)
	}
	if rows := d.State(0, "ana", ""); len(rows) != 0 {
		t.Fatalf("ana's state after the timer: %+v", rows)
	}
	if got := d.Timers(0, "bo"); len(got) != 1 {
		t.Fatalf("bo's timers %v", got)
	}
	// A click at or before the watermark is late: dropped and kept aside.
	d.Run(click("cy", 30))
	if late := d.Late(); len(late) != 1 || late[0].User != "cy" {
		t.Fatalf("late rows %+v, want cy's", late)
	}
}

// TestWindowPipeline: a whole pipeline, a window count in Append mode,
// writes each window when the watermark passes its end.
func TestWindowPipeline(t *testing.T) {
	d := typedtest.NewPipeline(t, func(s typed.Stream[fixtures.Click]) typed.Stream[fixtures.UserCount] {
		return typed.AggregateWindows(typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(time.Minute), byUser),
			typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) fixtures.UserCount {
				return fixtures.UserCount{User: user, Count: n, First: w.Start, Last: w.End}
			})
	}, typedtest.EventTime(func(c *fixtures.Click) time.Time { return c.Time }, 10*time.Second), typedtest.OutputMode[fixtures.Click](typed.Append))
	// The watermark, 10 s behind the latest click, is then at 51 s.
	if out := d.Run(click("ana", 1), click("ana", 59), click("ana", 61)); len(out) != 0 {
		t.Fatalf("before the watermark passes a window: %+v", out)
	}
	out := d.SetWatermark(t0.Add(time.Minute))
	if len(out) != 1 || out[0].Count != 2 || !out[0].First.Equal(t0) {
		t.Fatalf("at the first window's end: %+v, want its count of 2", out)
	}
	out = d.SetWatermark(t0.Add(2 * time.Minute))
	if len(out) != 1 || out[0].Count != 1 {
		t.Fatalf("at the second window's end: %+v, want its count of 1", out)
	}
}

// TestQueryOfSeveralOutputs: a driver of a query of three outputs (a
// count per user, the users who reach three clicks, and the clicks of
// page /b) gives each Output the rows of each step, and its state reads
// as a pipeline's.
func TestQueryOfSeveralOutputs(t *testing.T) {
	counts, alerts, pageB := typedtest.NewOutput[fixtures.UserCount](), typedtest.NewOutput[string](), typedtest.NewOutput[fixtures.Click]()
	d := typedtest.NewQuery(t, func(s typed.Stream[fixtures.Click]) []typed.Output {
		n := typed.AggregateByKey(typed.GroupByKey(s, byUser), typed.Count[fixtures.Click](), func(user string, n int64) fixtures.UserCount {
			return fixtures.UserCount{User: user, Count: n}
		})
		three := typed.Map(typed.Filter(n, func(c *fixtures.UserCount) bool { return c.Count == 3 }), func(c *fixtures.UserCount) string { return c.User })
		b := typed.Filter(s, func(c *fixtures.Click) bool { return c.Page == "/b" })
		return []typed.Output{typed.WriteTo(n, counts), typed.WriteTo(three, alerts), typed.WriteTo(b, pageB)}
	})
	onB := click("ana", 3)
	onB.Page = "/b"
	d.Run(click("ana", 1), click("bo", 2), onB)
	sortCounts := func(cs []fixtures.UserCount) []fixtures.UserCount {
		slices.SortFunc(cs, func(a, b fixtures.UserCount) int { return strings.Compare(a.User, b.User) })
		return cs
	}
	if got := sortCounts(counts.Take()); !slices.Equal(got, []fixtures.UserCount{{User: "ana", Count: 2}, {User: "bo", Count: 1}}) {
		t.Fatalf("counts %v after the first step", got)
	}
	if got := alerts.Take(); len(got) != 0 {
		t.Fatalf("alerts %v after the first step, want none", got)
	}
	if got := pageB.Take(); !slices.Equal(got, []fixtures.Click{onB}) {
		t.Fatalf("page /b %v, want the click on it", got)
	}
	d.Run(click("ana", 4), click("bo", 5))
	if got := sortCounts(counts.Take()); !slices.Equal(got, []fixtures.UserCount{{User: "ana", Count: 3}, {User: "bo", Count: 2}}) {
		t.Fatalf("counts %v after the second step", got)
	}
	if got := alerts.Take(); !slices.Equal(got, []string{"ana"}) {
		t.Fatalf("alerts %v, want ana's", got)
	}
	if got := pageB.Take(); len(got) != 0 {
		t.Fatalf("page /b %v after the second step, want nothing new", got)
	}
	if rows := d.State(0, "bo", ""); len(rows) != 1 {
		t.Fatalf("bo's state %v, want one count", rows)
	}
}
