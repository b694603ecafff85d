package processor

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

type sink[T any] struct {
	mu   sync.Mutex
	rows []T
}

func (s *sink[T]) Write(_ context.Context, _ int64, rows []T) error {
	s.mu.Lock()
	s.rows = append(s.rows, rows...)
	s.mu.Unlock()
	return nil
}

func run[T any](t *testing.T, s typed.Stream[T], mode typed.OutputMode, opts ...runtime.Option) []T {
	t.Helper()
	out := &sink[T]{}
	q, err := typed.WriteTo(s, out).OutputMode(mode).
		Start(context.Background(), append(opts, runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	return out.rows
}

// TestProcessorBindings runs each generated binding on a memory stream,
// in batches of two rows, and checks its output against a plain loop.
func TestProcessorBindings(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0).UTC()
	var clicks []Click
	for i, c := range []struct{ page, user string }{{"/a", "u1"}, {"/b", "u2"}, {"/a", "u1"}, {"/a", "u2"}, {"/c", "u1"}} {
		at := t0.Add(time.Duration(i) * time.Second)
		clicks = append(clicks, Click{Page: c.page, User: c.user, At: at, Nanos: at.UnixNano()})
	}
	perUser, perPage := map[string]int64{}, map[string]int64{}
	for _, c := range clicks {
		perUser[c.User]++
		perPage[c.Page]++
	}
	source := func() typed.Stream[Click] {
		m := typed.NewMemoryStream[Click]("clicks", 2)
		m.Add(clicks...)
		return typed.FromMemory(m)
	}

	// Update mode: the last count emitted for a user is their total, from
	// the initial state given to u1.
	perUser["u1"] += 10
	last := map[string]int64{}
	initial := typed.ProcessorInitialState(typed.Pair[string, int64]{Key: "u1", State: 10})
	for _, r := range run(t, countStream(source(), &counter{}, initial), typed.Update) {
		last[r.Key] = r.N
	}
	if !maps.Equal(last, perUser) {
		t.Errorf("countStream: last counts %v, want %v", last, perUser)
	}

	// Event-time timers fire when the input ends (FlushEventTime), once
	// per page, with the page's total.
	totals := map[string]int64{}
	for _, r := range run(t, pageTotalsStream(source(), &pageTotals{}), typed.Append, runtime.FlushEventTime()) {
		if _, twice := totals[r.Key]; twice {
			t.Errorf("pageTotalsStream: page %s emitted twice", r.Key)
		}
		totals[r.Key] = r.N
	}
	if !maps.Equal(totals, perPage) {
		t.Errorf("pageTotalsStream: totals %v, want %v", totals, perPage)
	}

	// A value processor, its output a string.
	got := run(t, shoutStream(source(), shout{suffix: "!"}, typed.Concurrency(2)), typed.Append)
	slices.Sort(got)
	want := []string{"/A U1!", "/A U1!", "/A U2!", "/B U2!", "/C U1!"}
	if !slices.Equal(got, want) {
		t.Errorf("shoutStream: %q, want %q", got, want)
	}
}

// TestProcessorLateRows: a click older than the watermark of
// pageTotalsStream (the newest click less 10s, in Nanos) goes to the sink
// given with pageTotalsStreamLateRows; the others are counted.
func TestProcessorLateRows(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0).UTC()
	click := func(page string, at time.Time) Click {
		return Click{Page: page, User: "u", At: at, Nanos: at.UnixNano()}
	}
	m := typed.NewMemoryStream[Click]("clicks", 0)
	late := &sink[Click]{}
	ckpt := t.TempDir()
	start := func(opts ...runtime.Option) {
		t.Helper()
		run(t, pageTotalsStream(typed.FromMemory(m), &pageTotals{}, pageTotalsStreamLateRows(late)), typed.Append,
			append(opts, runtime.Checkpoint(ckpt))...)
	}
	m.Add(click("/a", t0), click("/b", t0.Add(time.Minute)))
	start()
	tooLate := click("/a", t0.Add(time.Minute-20*time.Second))
	m.Add(tooLate, click("/c", t0.Add(2*time.Minute)))
	start()
	if len(late.rows) != 1 || late.rows[0] != tooLate {
		t.Errorf("late rows %+v, want %+v", late.rows, tooLate)
	}
}
