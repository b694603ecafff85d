package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// windowCount is a user's clicks in a window.
type windowCount struct {
	Window typed.Window
	User   string
	N      float64
}

// stopAt is a sink that stops the query (cancel) at the write of batch
// at, before it writes anything: the batches before it are committed.
type stopAt struct {
	at     int64
	cancel context.CancelFunc
}

func (s stopAt) Write(_ context.Context, batch int64, _ []windowCount) error {
	if batch >= s.at {
		s.cancel()
		return context.Canceled
	}
	return nil
}

// TestInspectHeldWatermark: a query stopped while its windows close
// across batches (WindowClosesPerBatch) has run its last batch with the
// watermark of the aggregation after the windows held behind the
// query's; inspect lists that operator's watermark as held, and no
// other's.
func TestInspectHeldWatermark(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 50)
	for i := range 400 {
		m.Add(fixtures.Click{User: fmt.Sprintf("u%02d", (i*7+i/5)%12), Time: t0.Add(time.Duration(i) * time.Second)})
	}
	clickTime := func(c *fixtures.Click) time.Time { return c.Time }
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 30*time.Second)
	tens := typed.AggregateWindows(typed.GroupByWindow(s, clickTime, typed.Tumbling(10*time.Second), func(c *fixtures.Click) string { return c.User }),
		typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) windowCount { return windowCount{w, user, float64(n)} })
	minutes := typed.AggregateWindows(typed.GroupByWindow(tens, func(c *windowCount) time.Time { return c.Window.Start }, typed.Tumbling(time.Minute),
		func(c *windowCount) string { return c.User }),
		typed.Sum(func(c *windowCount) float64 { return c.N }), func(w typed.Window, user string, n float64) windowCount { return windowCount{w, user, n} })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cp := filepath.Join(t.TempDir(), "checkpoint")
	q, err := typed.WriteTo(minutes, stopAt{at: 6, cancel: cancel}).OutputMode(typed.Append).Start(ctx,
		runtime.Checkpoint(cp), runtime.WindowClosesPerBatch(1), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	sum := summary(t, cp)
	if sum.Progress.BatchID != 5 || len(sum.Progress.HeldWatermarks) != 2 || !sum.Progress.HeldWatermarks[0].IsZero() || sum.Progress.HeldWatermarks[1].IsZero() {
		t.Fatalf("the last batch, %d, ran with held watermarks %v: want batch 5, the second operator's held", sum.Progress.BatchID, sum.Progress.HeldWatermarks)
	}
	out, errText, code := inspect(t, cp)
	if code != 0 {
		t.Fatalf("inspect exited %d: %s", code, errText)
	}
	held := regexp.MustCompile(`(?m)^  watermark +(\S+) in the last batch, held behind the query's`).FindAllStringSubmatch(out, -1)
	if len(held) != 1 || held[0][1] != sum.Progress.HeldWatermarks[1].UTC().Format(time.RFC3339Nano) {
		t.Fatalf("inspect lists held watermarks %q, want the second operator's, %s:\n%s", held, sum.Progress.HeldWatermarks[1], out)
	}
	if i, j := regexp.MustCompile(`operator 1: `).FindStringIndex(out), regexp.MustCompile(`held behind`).FindStringIndex(out); i == nil || j[0] < i[0] {
		t.Errorf("the held watermark is not listed under operator 1:\n%s", out)
	}
}
