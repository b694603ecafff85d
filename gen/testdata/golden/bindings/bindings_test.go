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
	q, err := typed.WriteTo(countStream(typed.FromMemory(m)), pages).OutputMode(typed.Update).
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
