package runtime_test

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// waitingStream is a source of JSON rows in memory that is a
// runtime.DataWaiter: a wait returns when rows are added, after d, or
// when its context is done; it counts the waits that ended with their
// context.
type waitingStream struct {
	name     string
	mu       sync.Mutex
	rows     [][]byte
	arrived  chan struct{}
	canceled int
}

func newWaitingStream(name string) *waitingStream {
	return &waitingStream{name: name, arrived: make(chan struct{})}
}

func (w *waitingStream) Add(rows ...fixtures.Click) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range rows {
		v, _ := r.MarshalJSON()
		w.rows = append(w.rows, v)
	}
	close(w.arrived)
	w.arrived = make(chan struct{})
}

func (w *waitingStream) Name() string { return w.name }

func (w *waitingStream) Available(context.Context) (json.RawMessage, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return json.RawMessage(strconv.Itoa(len(w.rows))), nil
}

func (w *waitingStream) Next(_ context.Context, committed, upTo json.RawMessage, _ runtime.ReadLimit) (json.RawMessage, error) {
	if len(committed) > 0 && string(committed) == string(upTo) {
		return committed, nil
	}
	return upTo, nil
}

func (w *waitingStream) Read(_ context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	from, _ := strconv.Atoi(string(start))
	to, _ := strconv.Atoi(string(end))
	w.mu.Lock()
	rows := w.rows[from:to]
	w.mu.Unlock()
	for _, r := range rows {
		if err := fn(runtime.Record{Partition: w.name, Data: r}); err != nil {
			return err
		}
	}
	return nil
}

func (w *waitingStream) WaitForData(ctx context.Context, _ json.RawMessage, d time.Duration) {
	w.mu.Lock()
	arrived := w.arrived
	w.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-arrived:
	case <-t.C:
	case <-ctx.Done():
		w.mu.Lock()
		w.canceled++
		w.mu.Unlock()
	}
}

// TestWaitForDataOfSeveralInputs: a query over two inputs that are both
// DataWaiters, with an hour's poll interval, runs a batch as soon as
// rows arrive on either, and the wait on the other ends with it.
func TestWaitForDataOfSeveralInputs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := newWaitingStream("a"), newWaitingStream("b")
		sink := typed.NewMemorySink[fixtures.Click]()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		q, err := typed.WriteTo(typed.Union(typed.From[fixtures.Click](a), typed.From[fixtures.Click](b)), sink).
			Start(ctx, runtime.PollInterval(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the first batch ran; the query waits
		started := time.Now()
		a.Add(fixtures.Click{User: "u1"})
		synctest.Wait()
		b.Add(fixtures.Click{User: "u2"}, fixtures.Click{User: "u3"})
		synctest.Wait()
		if waited := time.Since(started); waited != 0 {
			t.Errorf("the batches ran %v after their rows arrived, want at once", waited)
		}
		var users []string
		for _, c := range sink.Rows() {
			users = append(users, c.User)
		}
		slices.Sort(users)
		if !slices.Equal(users, []string{"u1", "u2", "u3"}) {
			t.Errorf("wrote %v, want u1, u2 and u3", users)
		}
		a.mu.Lock()
		aCanceled := a.canceled
		a.mu.Unlock()
		b.mu.Lock()
		bCanceled := b.canceled
		b.mu.Unlock()
		if bCanceled != 1 || aCanceled != 1 {
			t.Errorf("waits ended by the other input's rows: a %d, b %d, want 1 each", aCanceled, bCanceled)
		}
		if err := q.Stop(); err != nil {
			t.Fatal(err)
		}
	})
}
