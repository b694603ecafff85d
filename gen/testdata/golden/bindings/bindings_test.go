package bindings

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

type sink struct {
	mu   sync.Mutex
	rows []PageHits
}

func (s *sink) Write(_ context.Context, _ int64, rows []PageHits) error {
	s.mu.Lock()
	s.rows = append(s.rows, rows...)
	s.mu.Unlock()
	return nil
}

func TestBindings(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0).UTC()
	visits := []Visit{{"/a", t0, "u1"}, {"/b", t0.Add(time.Second), "u2"}, {"/a", t0.Add(2 * time.Second), "u1"}}
	m := typed.NewMemoryStream[Visit]("visits", 0)
	m.Add(visits...)

	pages := &sink{}
	q, err := typed.WriteTo(countStream(typed.FromMemory(m)), pages).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	for _, v := range visits {
		want[v.Page]++
	}
	for _, r := range pages.rows {
		if want[r.Page] != r.N {
			t.Fatalf("page %s: %d hits, want %d", r.Page, r.N, want[r.Page])
		}
	}

	users := &sink{}
	q, err = typed.WriteTo(UserTotals(typed.FromMemory(m)), users).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	if len(users.rows) != 2 {
		t.Fatalf("user totals: %+v", users.rows)
	}
}

type pingSink struct {
	mu   sync.Mutex
	outs []HostPings
}

func (s *pingSink) Write(_ context.Context, _ int64, rows []HostPings) error {
	s.mu.Lock()
	s.outs = append(s.outs, rows...)
	s.mu.Unlock()
	return nil
}

type lateSink struct {
	mu   sync.Mutex
	rows []Ping
}

func (s *lateSink) Write(_ context.Context, _ int64, rows []Ping) error {
	s.mu.Lock()
	s.rows = append(s.rows, rows...)
	s.mu.Unlock()
	return nil
}

// TestPingsMillisUpdateLate: the event time is read as milliseconds (the
// watermark in the progress report is the largest ping less a second);
// the binding's Update mode is the query's without OutputMode at
// WriteTo; and a ping older than the watermark goes to the late-rows
// sink given with pingsStreamLateRows.
func TestPingsMillisUpdateLate(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	m := typed.NewMemoryStream[Ping]("pings", 0)
	m.Add(Ping{"a", t0.UnixMilli()}, Ping{"b", t0.Add(5 * time.Second).UnixMilli()})
	out, late := &pingSink{}, &lateSink{}
	ckpt := t.TempDir()
	var q *typed.Query
	run := func() {
		t.Helper()
		var err error
		q, err = typed.WriteTo(pingsStream(typed.FromMemory(m), pingsStreamLateRows(late)), out).
			Start(context.Background(), runtime.Checkpoint(ckpt), runtime.WithTrigger(runtime.AvailableNow()))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
	}
	run()
	// The watermark is now b's ping less a second: a ping of a at t0 is late.
	m.Add(Ping{"a", t0.UnixMilli()}, Ping{"c", t0.Add(6 * time.Second).UnixMilli()})
	run()
	// The batch of the second run's pings ran at b's watermark; the one
	// without data after it at c's (6 s less a second).
	p := q.RecentProgress()
	if len(p) != 2 {
		t.Fatalf("%d batches in the second run, want the pings' and one without data", len(p))
	}
	for i, want := range []time.Time{t0.Add(4 * time.Second), t0.Add(5 * time.Second)} {
		if got := p[i].EventTime["watermark"]; got != want.Format(time.RFC3339Nano) {
			t.Errorf("batch %d: watermark %q, want %q (milliseconds read as such)", p[i].BatchID, got, want.Format(time.RFC3339Nano))
		}
	}
	late.mu.Lock()
	defer late.mu.Unlock()
	if len(late.rows) != 1 || late.rows[0] != (Ping{"a", t0.UnixMilli()}) {
		t.Errorf("late rows %+v, want a's second ping", late.rows)
	}
	out.mu.Lock()
	defer out.mu.Unlock()
	want := []HostPings{{"a", 1}, {"b", 1}, {"c", 1}}
	if len(out.outs) != len(want) {
		t.Fatalf("output %+v, want %+v", out.outs, want)
	}
	for i := range want {
		if out.outs[i] != want[i] {
			t.Fatalf("output %+v, want %+v", out.outs, want)
		}
	}
}
