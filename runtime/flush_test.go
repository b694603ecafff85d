package runtime_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// windowUserCount is a window's count of a user's clicks.
type windowUserCount struct {
	End  time.Time
	User string
	N    int64
}

// TestFlushInBoundedBatches: the end of a bounded input (FlushEventTime)
// fires its timers a bounded number a batch (7 here), every timer of one
// instant together, the watermark moving on from batch to batch to the
// same end: the windows (a timer each, at their end) are the loop's,
// each written once, by several batches none of which writes more than
// 7 or one instant's windows. (All were written by one batch, which held
// them all in memory: millions, where the watermark stood far behind.)
func TestFlushInBoundedBatches(t *testing.T) {
	runtime.SetFlushTimers(t, 7)
	rnd := rand.New(rand.NewPCG(3, 9))
	base := time.Unix(1_700_000_000, 0).UTC()
	var in []fixtures.Click
	want := map[string]int64{}
	perEnd := map[time.Time]map[string]bool{}
	for i := range 400 {
		c := fixtures.Click{User: fmt.Sprint("u", rnd.IntN(5)), Time: base.Add(time.Duration(i*3+rnd.IntN(3)) * time.Second)}
		in = append(in, c)
		end := c.Time.Truncate(10 * time.Second).Add(10 * time.Second)
		want[fmt.Sprint(end.Unix(), c.User)]++
		if perEnd[end] == nil {
			perEnd[end] = map[string]bool{}
		}
		perEnd[end][c.User] = true
	}
	tie := 0
	for _, users := range perEnd {
		tie = max(tie, len(users))
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 100)
	m.Add(in...)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 24*time.Hour)
	ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) windowUserCount {
		return windowUserCount{End: w.End, User: user, N: n}
	})
	sink := typed.NewMemorySink[windowUserCount]()
	q, err := typed.WriteTo(counts, typed.Sink[windowUserCount](sink)).OutputMode(typed.Append).Start(t.Context(),
		runtime.Checkpoint("ckpt"), runtime.FileSystem(vfs.NewMem()), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range sink.Rows() {
		id := fmt.Sprint(r.End.Unix(), r.User)
		if _, dup := got[id]; dup {
			t.Errorf("window %s written twice", id)
		}
		got[id] = r.N
	}
	if !maps.Equal(got, want) {
		t.Errorf("%d windows, want %d (the loop's): %v", len(got), len(want), got)
	}
	flushes := 0
	for _, p := range q.RecentProgress() {
		if p.NumInputRows > 0 {
			continue
		}
		flushes++
		if p.Sink.NumOutputRows > int64(max(7, tie)) {
			t.Errorf("flush batch %d wrote %d windows, more than 7 or one instant's %d", p.BatchID, p.Sink.NumOutputRows, tie)
		}
	}
	if min := len(want) / max(7, tie); flushes < min {
		t.Errorf("%d flush batches for %d windows, want at least %d", flushes, len(want), min)
	}
}

// timerAtRow sets a timer at each row's event time, and writes the key
// and the timer's instant when it fires.
type timerAtRow struct{ h *typed.Handle }

func (p *timerAtRow) Init(h *typed.Handle) error { p.h = h; return nil }

func (p *timerAtRow) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, _ func(string)) error {
	for r := range rows {
		if err := p.h.RegisterTimer(ctx, r.Time); err != nil {
			return err
		}
	}
	return nil
}

func (p *timerAtRow) HandleExpiredTimer(ctx context.Context, user string, _ typed.TimerValues, e typed.ExpiredTimerInfo, emit func(string)) error {
	emit(fmt.Sprint(user, "@", e.ExpiryTime().Unix()))
	return nil
}

// TestFlushBoundsTimersThatFireAtTheWatermark: a transformWithState's
// timers fire once the watermark reaches them, not only past them; the
// end of a bounded input still fires no more than the bound a batch (5
// here), or one instant's timers (four timers at each of three
// instants): a batch each instant, every timer once.
func TestFlushBoundsTimersThatFireAtTheWatermark(t *testing.T) {
	runtime.SetFlushTimers(t, 5)
	base := time.Unix(1_700_000_000, 0).UTC()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	want := map[string]bool{}
	for i := range 12 {
		c := fixtures.Click{User: fmt.Sprint("u", i), Time: base.Add(time.Duration(10*(1+i/4)) * time.Second)}
		m.Add(c)
		want[fmt.Sprint(c.User, "@", c.Time.Unix())] = true
	}
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 24*time.Hour)
	byUser := typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
	out := typed.TransformWithState(byUser, &timerAtRow{}, typed.TimeModeEventTime, typed.Append)
	sink := typed.NewMemorySink[string]()
	q, err := typed.WriteTo(out, typed.Sink[string](sink)).Start(t.Context(),
		runtime.Checkpoint("ckpt"), runtime.FileSystem(vfs.NewMem()), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range sink.Rows() {
		if got[r] {
			t.Fatalf("timer %s fired twice", r)
		}
		got[r] = true
	}
	if !maps.Equal(got, want) {
		t.Fatalf("timers fired: %v, want %v", got, want)
	}
	var perBatch []int64
	for _, p := range q.RecentProgress() {
		if p.NumInputRows == 0 && p.Sink.NumOutputRows > 0 {
			perBatch = append(perBatch, p.Sink.NumOutputRows)
		}
	}
	if fmt.Sprint(perBatch) != "[4 4 4]" {
		t.Fatalf("the flush fired %v timers a batch, want [4 4 4]", perBatch)
	}
}
