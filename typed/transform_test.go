package typed_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// userPages is the output of pagesProcessor: what it holds for a user.
type userPages struct {
	User    string
	Count   int64
	Pages   []string
	PerPage map[string]int64
}

// pagesProcessor keeps, per user, a count (value state), the pages in
// order (list state) and a count per page (map state), and emits them at
// every call with rows.
type pagesProcessor struct {
	count   *typed.ValueState[int64]
	pages   *typed.ListState[string]
	perPage *typed.MapState[string, int64]
}

func (p *pagesProcessor) Init(h *typed.Handle) error {
	p.count = typed.NewValueState[int64](h, "count")
	p.pages = typed.NewListState[string](h, "pages")
	p.perPage = typed.NewMapState[string, int64](h, "perPage")
	return nil
}

func (p *pagesProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(userPages)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	for r := range rows {
		n++
		if err := p.pages.AppendValue(ctx, r.Page); err != nil {
			return err
		}
		c, _, err := p.perPage.GetValue(ctx, r.Page)
		if err != nil {
			return err
		}
		if err := p.perPage.UpdateValue(ctx, r.Page, c+1); err != nil {
			return err
		}
	}
	if err := p.count.Update(ctx, n); err != nil {
		return err
	}
	out := userPages{User: user, Count: n, PerPage: map[string]int64{}}
	list, err := p.pages.Get(ctx)
	if err != nil {
		return err
	}
	for page := range list {
		out.Pages = append(out.Pages, page)
	}
	perPage, err := p.perPage.Iterator(ctx)
	if err != nil {
		return err
	}
	maps.Insert(out.PerPage, perPage)
	emit(out)
	return nil
}

func (p *pagesProcessor) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(userPages)) error {
	return errors.New("no timers")
}

func (p *pagesProcessor) Close() error { return nil }

// expectedPages is the independent answer: a plain loop.
func expectedPages(in []fixtures.Click) map[string]userPages {
	out := map[string]userPages{}
	for _, c := range in {
		u := out[c.User]
		if u.PerPage == nil {
			u = userPages{User: c.User, PerPage: map[string]int64{}}
		}
		u.Count++
		u.Pages = append(u.Pages, c.Page)
		u.PerPage[c.Page]++
		out[c.User] = u
	}
	return out
}

// TestProcessorStateKinds runs pagesProcessor under several batch sizes,
// with restarts between chunks of the input and 1 or 8 concurrent
// handlers, and compares its last output per user with a plain loop; the
// whole output, batch by batch, is the same for any concurrency.
func TestProcessorStateKinds(t *testing.T) {
	in := clicks(400, 11)
	want := expectedPages(in)
	for _, perBatch := range []int{0, 9, 64} {
		var outputs []string
		for _, conc := range []int{1, 8} {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
			sink := newSink[userPages]()
			byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
			w := typed.WriteTo(typed.TransformWithState(byUser, &pagesProcessor{}, typed.TimeModeNone, typed.Update, typed.Concurrency(conc)), sink)
			ck := newCheckpoint()
			for _, chunk := range [][2]int{{0, 100}, {100, 250}, {250, 400}} {
				m.Add(in[chunk[0]:chunk[1]]...)
				if err := runToEnd(t, w, ck.opts()...); err != nil {
					t.Fatal(err)
				}
			}
			got := map[string]userPages{}
			for _, r := range sink.rows() {
				got[r.User] = r
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%d per batch, concurrency %d:\n got %v\nwant %v", perBatch, conc, got, want)
			}
			outputs = append(outputs, fmt.Sprint(sink.snapshot()))
		}
		if outputs[0] != outputs[1] {
			t.Fatalf("%d per batch: the output with 8 concurrent handlers differs from the one with 1", perBatch)
		}
	}
}

// ttlProcessor keeps the last page of each user in a value with a time to
// live, and a list of pages whose entries expire one by one; it emits
// what it still sees before its rows.
type ttlProcessor struct {
	last  *typed.ValueState[string]
	pages *typed.ListState[string]
	ttl   time.Duration
}

func (p *ttlProcessor) Init(h *typed.Handle) error {
	p.last = typed.NewValueState[string](h, "last", typed.WithTTL(p.ttl))
	p.pages = typed.NewListState[string](h, "pages", typed.WithTTL(p.ttl))
	return nil
}

func (p *ttlProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(userPages)) error {
	out := userPages{User: user}
	if last, ok, err := p.last.Get(ctx); err != nil {
		return err
	} else if ok {
		out.Pages = append(out.Pages, "last:"+last)
	}
	list, err := p.pages.Get(ctx)
	if err != nil {
		return err
	}
	for page := range list {
		out.Pages = append(out.Pages, page)
	}
	emit(out)
	for r := range rows {
		if err := p.last.Update(ctx, r.Page); err != nil {
			return err
		}
		if err := p.pages.AppendValue(ctx, r.Page); err != nil {
			return err
		}
	}
	return nil
}

func (p *ttlProcessor) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(userPages)) error {
	return nil
}

func (p *ttlProcessor) Close() error { return nil }

// TestProcessorTTL: values with a time to live are gone at their expiry
// (processing time of the write + TTL), list entries one by one, a write
// resets the expiry, and the store's entries are removed in the batch in
// which they expire, also without new data and across a restart.
func TestProcessorTTL(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	clock := runtime.NewManualClock(at(0))
	sink := newSink[userPages]()
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.TransformWithState(byUser, &ttlProcessor{ttl: 10 * time.Second}, typed.TimeModeProcessingTime, typed.Update), sink)
	ck := newCheckpoint()
	var q *typed.Query
	start := func() {
		var err error
		q, err = w.Start(context.Background(), ck.opts(runtime.WithManualClock(clock), runtime.WithTrigger(runtime.ProcessingTime(time.Second)))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := clock.WaitUntilWaiting(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	step := func(d time.Duration, rows ...fixtures.Click) (last runtime.QueryProgress) {
		t.Helper()
		m.Add(rows...)
		clock.Advance(d)
		if err := clock.WaitUntilWaiting(context.Background()); err != nil {
			t.Fatal(err)
		}
		p, _ := q.LastProgress()
		return p
	}
	lastOut := func() string {
		rows := sink.rows()
		return strings.Join(rows[len(rows)-1].Pages, ",")
	}
	start()
	p := step(time.Second, fixtures.Click{User: "a", Page: "p1"}) // t=1s: writes expire at 11s
	if p.StateOperators[0].NumRowsTotal != 3 {
		t.Fatalf("state rows after the first write: %d, want 3 (the value, the list's element and its header)", p.StateOperators[0].NumRowsTotal)
	}
	step(5*time.Second, fixtures.Click{User: "a", Page: "p2"}) // t=6s: last resets to 16s; p2 expires at 16s
	if got := lastOut(); got != "last:p1,p1" {
		t.Fatalf("at 6s a sees %q, want last:p1,p1", got)
	}
	q.Stop()
	start()
	// t=11s: p1's list entry has expired; no data arrives, but a batch
	// runs to remove it.
	p = step(5 * time.Second)
	if p.NumInputRows != 0 || p.StateOperators[0].NumRowsRemoved != 1 || p.StateOperators[0].NumRowsTotal != 3 {
		t.Fatalf("at 11s: %+v, want a batch without data removing one entry, three left", p.StateOperators[0])
	}
	step(time.Second, fixtures.Click{User: "a", Page: "p3"}) // t=12s
	if got := lastOut(); got != "last:p2,p2" {
		t.Fatalf("at 12s a sees %q, want last:p2,p2 (p1 expired)", got)
	}
	// t=30s: everything has expired.
	p = step(18 * time.Second)
	if p.StateOperators[0].NumRowsTotal != 0 {
		t.Fatalf("at 30s %d state rows are left, want 0", p.StateOperators[0].NumRowsTotal)
	}
	q.Stop()
	// The expired entries are gone from the store itself.
	store, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: ck.fs})
	if err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	for id := range uint8(2) {
		b.ScanVar(runtime.Var{Variable: id}, func(key, suffix, _ []byte) error {
			t.Errorf("variable %d: entry %q/%x left in the store after it expired", id, key, suffix)
			return nil
		})
	}
	b.Close()
	store.Close()
	start()
	step(time.Second, fixtures.Click{User: "a", Page: "p4"})
	if got := lastOut(); got != "" {
		t.Fatalf("at 31s a sees %q, want nothing", got)
	}
	q.Stop()
}

// timerProcessor registers a timer 5 s after each call with rows and
// deletes the previous one; expired timers emit what ListTimers shows.
type timerProcessor struct {
	h    *typed.Handle
	last *typed.ValueState[int64]
}

func (p *timerProcessor) Init(h *typed.Handle) error {
	p.h = h
	p.last = typed.NewValueState[int64](h, "timer")
	return nil
}

func (p *timerProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], timers typed.TimerValues, emit func(userPages)) error {
	if prev, ok, err := p.last.Get(ctx); err != nil {
		return err
	} else if ok {
		if err := p.h.DeleteTimer(ctx, time.Unix(0, prev)); err != nil {
			return err
		}
	}
	at := timers.CurrentProcessingTime().Add(5 * time.Second)
	if err := p.h.RegisterTimer(ctx, at); err != nil {
		return err
	}
	return p.last.Update(ctx, at.UnixNano())
}

func (p *timerProcessor) HandleExpiredTimer(ctx context.Context, user string, timers typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(userPages)) error {
	listed, err := p.h.ListTimers(ctx)
	if err != nil {
		return err
	}
	out := userPages{User: user}
	for _, l := range listed {
		out.Pages = append(out.Pages, fmt.Sprint(l.Sub(at(0))))
	}
	out.Pages = append(out.Pages, "fired:"+fmt.Sprint(expired.ExpiryTime().Sub(at(0))), "now:"+fmt.Sprint(timers.CurrentProcessingTime().Sub(at(0))))
	emit(out)
	return nil
}

func (p *timerProcessor) Close() error { return nil }

// TestProcessorTimers: a timer fires once, in the first batch whose
// processing time reaches it (Spark's rule), also without new data, and
// survives a restart; a deleted timer never fires; ListTimers in
// HandleExpiredTimer lists the timer that is firing.
func TestProcessorTimers(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	clock := runtime.NewManualClock(at(0))
	sink := newSink[userPages]()
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.TransformWithState(byUser, &timerProcessor{}, typed.TimeModeProcessingTime, typed.Append), sink)
	ck := newCheckpoint()
	var q *typed.Query
	start := func() {
		var err error
		if q, err = w.Start(context.Background(), ck.opts(runtime.WithManualClock(clock), runtime.WithTrigger(runtime.ProcessingTime(time.Second)))...); err != nil {
			t.Fatal(err)
		}
		clock.WaitUntilWaiting(context.Background())
	}
	step := func(d time.Duration, rows ...fixtures.Click) {
		m.Add(rows...)
		clock.Advance(d)
		clock.WaitUntilWaiting(context.Background())
	}
	start()
	step(time.Second, click("a", 0), click("b", 0)) // t=1s: timers at 6s
	step(2*time.Second, click("b", 0))              // t=3s: b's moves to 8s
	q.Stop()
	start()
	step(2 * time.Second) // t=5s: nothing is due
	if n := len(sink.rows()); n != 0 {
		t.Fatalf("%d rows at 5s, want none", n)
	}
	step(time.Second) // t=6s: a's fires, at its time (as Spark's)
	step(time.Second) // t=7s: nothing
	step(time.Second) // t=8s: b's fires
	step(10 * time.Second)
	q.Stop()
	var got []string
	for _, r := range sink.rows() {
		got = append(got, r.User+" "+strings.Join(r.Pages, " "))
	}
	want := []string{"a 6s fired:6s now:6s", "b 8s fired:8s now:8s"}
	if !slices.Equal(got, want) {
		t.Fatalf("timers fired: %q, want %q", got, want)
	}
}

// misuseProcessor declares a variable outside Init and uses a timer
// under TimeModeNone.
type misuseProcessor struct {
	h   *typed.Handle
	mu  sync.Mutex
	err []error
}

func (p *misuseProcessor) Init(h *typed.Handle) error { p.h = h; return nil }

func (p *misuseProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(userPages)) error {
	v := typed.NewValueState[int64](p.h, "late")
	_, _, err1 := v.Get(ctx)
	err2 := p.h.RegisterTimer(ctx, at(100))
	p.mu.Lock()
	p.err = append(p.err, err1, err2)
	p.mu.Unlock()
	return nil
}

func (p *misuseProcessor) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(userPages)) error {
	return nil
}

func (p *misuseProcessor) Close() error { return nil }

// TestProcessorMisuse: a state variable declared outside Init, and a
// timer under TimeModeNone, are errors (Spark's invalid handle state), and
// so is a state operation with a context that is not a handler's.
func TestProcessorMisuse(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1))
	p := &misuseProcessor{}
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	if err := runToEnd(t, typed.WriteTo(typed.TransformWithState(byUser, p, typed.TimeModeNone, typed.Append), newSink[userPages]()), newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	if len(p.err) != 2 || !errors.Is(p.err[0], typed.ErrInvalidHandleState) || !strings.Contains(p.err[0].Error(), "outside Init") ||
		!errors.Is(p.err[1], typed.ErrInvalidHandleState) || !strings.Contains(p.err[1].Error(), "TimeModeNone") {
		t.Fatalf("errors: %v", p.err)
	}
	// Every read of every kind of variable says so: none reads as empty.
	pp := &pagesProcessor{}
	if err := pp.Init(&typed.Handle{}); err == nil {
		ctx := context.Background()
		if _, _, err := pp.count.Get(ctx); !errors.Is(err, typed.ErrInvalidHandleState) {
			t.Fatalf("a value used outside a handler: %v", err)
		}
		if _, err := pp.pages.Get(ctx); !errors.Is(err, typed.ErrInvalidHandleState) {
			t.Fatalf("a list read outside a handler: %v", err)
		}
		if _, err := pp.perPage.Iterator(ctx); !errors.Is(err, typed.ErrInvalidHandleState) {
			t.Fatalf("a map iterated outside a handler: %v", err)
		}
		if _, err := pp.perPage.Keys(ctx); !errors.Is(err, typed.ErrInvalidHandleState) {
			t.Fatalf("a map's keys read outside a handler: %v", err)
		}
		if _, err := pp.perPage.Values(ctx); !errors.Is(err, typed.ErrInvalidHandleState) {
			t.Fatalf("a map's values read outside a handler: %v", err)
		}
		if _, _, err := pp.count.Expiry(ctx); !errors.Is(err, typed.ErrInvalidHandleState) {
			t.Fatalf("an expiry read outside a handler: %v", err)
		}
	}
}

// versionedProcessor declares what its version says, to test how a
// checkpoint's variables change between versions.
type versionedProcessor struct {
	version int
	count   *typed.ValueState[int64]
	extra   *typed.ValueState[int64]
	asList  *typed.ListState[int64]
}

func (p *versionedProcessor) Init(h *typed.Handle) error {
	switch p.version {
	case 1:
		p.count = typed.NewValueState[int64](h, "count")
		p.extra = typed.NewValueState[int64](h, "extra")
	case 2: // a variable added, one deleted
		p.count = typed.NewValueState[int64](h, "count")
		p.asList = typed.NewListState[int64](h, "added")
		h.DeleteIfExists("extra")
	case 3: // "count" becomes a list: refused
		p.asList = typed.NewListState[int64](h, "count")
	}
	return nil
}

func (p *versionedProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(userPages)) error {
	var n int64
	for range rows {
		n++
	}
	if p.count != nil {
		c, _, err := p.count.Get(ctx)
		if err != nil {
			return err
		}
		n += c
		if err := p.count.Update(ctx, n); err != nil {
			return err
		}
	}
	if p.extra != nil {
		if err := p.extra.Update(ctx, 42); err != nil {
			return err
		}
	}
	if p.asList != nil {
		if err := p.asList.AppendValue(ctx, n); err != nil {
			return err
		}
	}
	emit(userPages{User: user, Count: n})
	return nil
}

func (p *versionedProcessor) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(userPages)) error {
	return nil
}

func (p *versionedProcessor) Close() error { return nil }

// TestProcessorSchemaChanges: adding a variable is compatible (its data
// starts empty, and a new variable never reads another's), DeleteIfExists
// drops a variable's data, and changing a variable's kind is refused at
// Start with its name.
func TestProcessorSchemaChanges(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	ck := newCheckpoint()
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	run := func(version int) (*batchSink[userPages], error) {
		sink := newSink[userPages]()
		w := typed.WriteTo(typed.TransformWithState(byUser, &versionedProcessor{version: version}, typed.TimeModeNone, typed.Update), sink)
		q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			return nil, err
		}
		return sink, q.AwaitTermination()
	}
	m.Add(click("a", 1), click("a", 2))
	if _, err := run(1); err != nil {
		t.Fatal(err)
	}
	m.Add(click("a", 3))
	sink, err := run(2)
	if err != nil {
		t.Fatal(err)
	}
	if rows := sink.rows(); len(rows) != 1 || rows[0].Count != 3 {
		t.Fatalf("version 2 output %+v, want a count of 3", rows)
	}
	// "extra" (id 1) was deleted at start; "added" may take its id only
	// because its data is gone (its list starts empty, with no trace of
	// extra's value).
	store, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: ck.fs})
	if err != nil {
		t.Fatal(err)
	}
	b := store.NewBatch()
	var entries []string
	for id := range uint8(4) {
		b.ScanVar(runtime.Var{Variable: id}, func(key, suffix, _ []byte) error {
			entries = append(entries, fmt.Sprintf("%d/%s/%x", id, key, suffix))
			return nil
		})
	}
	b.Close()
	store.Close()
	// count (0): a; added (1): a's list header and one element.
	if want := []string{"0/a/", "1/a/", "1/a/0000000000000000"}; !slices.Equal(entries, want) {
		t.Fatalf("entries after DeleteIfExists: %q, want %q", entries, want)
	}
	m.Add(click("a", 4))
	_, err = run(3)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `state variable "count" was a value state, is now a list state`) {
		t.Fatalf("version 3: err = %v", err)
	}
}

// initialProcessor counts per user, starting from an initial count.
type initialProcessor struct{ pagesProcessor }

func (p *initialProcessor) HandleInitialState(ctx context.Context, user string, initial int64, _ typed.TimerValues) error {
	return p.count.Update(ctx, initial)
}

// TestProcessorInitialState: the initial state is handed to
// HandleInitialState in the first batch, before its rows (which see it);
// a restart ignores it; a key given twice fails Start.
func TestProcessorInitialState(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	ck := newCheckpoint()
	sink := newSink[userPages]()
	initial := typed.ProcessorInitialState(typed.Pair[string, int64]{Key: "a", State: 10}, typed.Pair[string, int64]{Key: "b", State: 20})
	w := typed.WriteTo(typed.TransformWithState(byUser, &initialProcessor{}, typed.TimeModeNone, typed.Update, initial), sink)
	m.Add(click("a", 1))
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	m.Add(click("b", 2), click("c", 3))
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range sink.rows() {
		got[r.User] = r.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]int64{"a": 11, "b": 21, "c": 1}) {
		t.Fatalf("counts %v, want a 11, b 21, c 1", got)
	}
}

// kvRow is a row of a key and a value.
type kvRow struct {
	K string
	V int
}

// manyWrites is a processor that, for each row of a key's call, reads a
// map entry and a value, then writes or removes them: a call of many rows
// reads back many entries it wrote itself.
type manyWrites struct {
	seen  *typed.MapState[int64, int64]
	total *typed.ValueState[int64]
}

func (p *manyWrites) Init(h *typed.Handle) error {
	p.seen = typed.NewMapState[int64, int64](h, "seen")
	p.total = typed.NewValueState[int64](h, "total")
	return nil
}

func (p *manyWrites) HandleInputRows(ctx context.Context, key string, rows iter.Seq[kvRow], _ typed.TimerValues, emit func(string)) error {
	for r := range rows {
		k := int64(r.V % 37)
		n, _, err := p.seen.GetValue(ctx, k)
		if err != nil {
			return err
		}
		if r.V%5 == 0 {
			if err := p.seen.RemoveKey(ctx, k); err != nil {
				return err
			}
		} else if err := p.seen.UpdateValue(ctx, k, n+1); err != nil {
			return err
		}
		t, _, err := p.total.Get(ctx)
		if err != nil {
			return err
		}
		if err := p.total.Update(ctx, t+n); err != nil {
			return err
		}
	}
	t, _, err := p.total.Get(ctx)
	emit(fmt.Sprint(key, " ", t))
	return err
}

// TestProcessorReadsBackManyWrites: a call that writes and removes many
// entries of its key reads back what it wrote last (the call's writes
// are indexed past a few), as a plain loop computes, in one batch or
// many.
func TestProcessorReadsBackManyWrites(t *testing.T) {
	var rows []kvRow
	for i := range 3000 {
		rows = append(rows, kvRow{K: fmt.Sprint("k", i%3), V: i * 7 % 1001})
	}
	// The loop.
	seen := map[string]map[int64]int64{}
	total := map[string]int64{}
	for _, r := range rows {
		if seen[r.K] == nil {
			seen[r.K] = map[int64]int64{}
		}
		k := int64(r.V % 37)
		n := seen[r.K][k]
		if r.V%5 == 0 {
			delete(seen[r.K], k)
		} else {
			seen[r.K][k] = n + 1
		}
		total[r.K] += n
	}
	var want []string
	for k, t := range total {
		want = append(want, fmt.Sprint(k, " ", t))
	}
	slices.Sort(want)
	for _, perBatch := range []int{0, 1000} {
		m := typed.NewMemoryStream[kvRow]("rows", perBatch)
		m.Add(rows...)
		sink := newSink[string]()
		w := typed.WriteTo(typed.TransformWithState(typed.GroupByKey(typed.FromMemory(m), func(r *kvRow) string { return r.K }),
			typed.StatefulProcessor[string, kvRow, string](&manyWrites{}), typed.TimeModeNone, typed.Update), sink).OutputMode(typed.Update)
		if err := runToEnd(t, w, newCheckpoint().opts()...); err != nil {
			t.Fatal(err)
		}
		last := map[string]string{}
		for _, r := range sink.rows() {
			last[strings.Fields(r)[0]] = r
		}
		var got []string
		for _, r := range last {
			got = append(got, r)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("%d rows a batch: %q, want %q", perBatch, got, want)
		}
	}
}

// delTimerProcessor: each row registers timers at 100 s and 200 s; the
// timer at 100 s deletes the one at 200 s; each timer emits its instant.
type delTimerProcessor struct{ h *typed.Handle }

func (p *delTimerProcessor) Init(h *typed.Handle) error { p.h = h; return nil }

func (p *delTimerProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	if err := p.h.RegisterTimer(ctx, seconds(100)); err != nil {
		return err
	}
	return p.h.RegisterTimer(ctx, seconds(200))
}

func (p *delTimerProcessor) HandleExpiredTimer(ctx context.Context, user string, _ typed.TimerValues, e typed.ExpiredTimerInfo, emit func(string)) error {
	emit(fmt.Sprint(user, " fired ", e.ExpiryTime().Unix()))
	if e.ExpiryTime().Equal(seconds(100)) {
		return p.h.DeleteTimer(ctx, seconds(200))
	}
	return nil
}

// TestDeletedTimerDoesNotFire: both of a key's timers are due in one
// batch (the watermark jumps past 200 s), and the first one's call
// deletes the second, which then does not fire: a deleted timer never
// fires, whether or not it was read with the one before it.
func TestDeletedTimerDoesNotFire(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 0)
	out := typed.TransformWithState(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), &delTimerProcessor{}, typed.TimeModeEventTime, typed.Append)
	sink := newSink[string]()
	q := startLive(t, typed.WriteTo(out, sink), runtime.NewManualClock(seconds(1_000_000)), newCheckpoint().opts()...)
	defer q.stop()
	m.Add(fixtures.Click{User: "a", Time: seconds(50), Page: "x"})
	q.trigger()
	m.Add(fixtures.Click{User: "b", Time: seconds(1000), Page: "x"})
	q.trigger()
	q.trigger()
	q.trigger()
	var got []string
	for _, r := range sink.rows() {
		if strings.HasPrefix(r, "a ") {
			got = append(got, r)
		}
	}
	if want := "[a fired 100]"; fmt.Sprint(got) != want {
		t.Fatalf("a's timers fired %q, want %s", got, want)
	}
}

// pastTimerProcessor: each row registers timers at 100 s and 200 s; the
// timer at 200 s registers one at 150 s, behind it (due, but behind the
// batch's walk through the due timers); each timer emits its instant.
type pastTimerProcessor struct{ h *typed.Handle }

func (p *pastTimerProcessor) Init(h *typed.Handle) error { p.h = h; return nil }

func (p *pastTimerProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	if err := p.h.RegisterTimer(ctx, seconds(100)); err != nil {
		return err
	}
	return p.h.RegisterTimer(ctx, seconds(200))
}

func (p *pastTimerProcessor) HandleExpiredTimer(ctx context.Context, user string, _ typed.TimerValues, e typed.ExpiredTimerInfo, emit func(string)) error {
	emit(fmt.Sprint(user, " ", e.ExpiryTime().Unix()))
	if e.ExpiryTime().Equal(seconds(200)) {
		return p.h.RegisterTimer(ctx, seconds(150))
	}
	return nil
}

func (p *pastTimerProcessor) Close() error { return nil }

// TestTimerSetBehindFiresNextBatch: 600 keys' timers at 100 s and 200 s
// are due in one batch (more than one read of the due timers); the call
// of each key's timer at 200 s sets one at 150 s, which the batch has
// walked past. Every timer fires once: 100 and 200 in that batch, 150
// in the next, then none again.
func TestTimerSetBehindFiresNextBatch(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 0)
	out := typed.TransformWithState(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), &pastTimerProcessor{}, typed.TimeModeEventTime, typed.Append)
	sink := newSink[string]()
	q := startLive(t, typed.WriteTo(out, sink), runtime.NewManualClock(seconds(1_000_000)), newCheckpoint().opts()...)
	defer q.stop()
	const keys = 600
	for i := range keys {
		m.Add(fixtures.Click{User: fmt.Sprintf("u%03d", i), Time: seconds(50), Page: "x"})
	}
	q.trigger()
	m.Add(fixtures.Click{User: "late", Time: seconds(1000), Page: "x"})
	// The batch each row came in, by the rows written after each trigger.
	batchOf := map[string]int{}
	for n := range 5 {
		q.trigger()
		for _, r := range sink.rows() {
			if _, ok := batchOf[r]; !ok {
				batchOf[r] = n
			}
		}
	}
	fired := map[string][]string{}
	for _, r := range sink.rows() {
		user, at, _ := strings.Cut(r, " ")
		fired[user] = append(fired[user], at)
	}
	first := batchOf["u000 100"]
	for r, n := range batchOf {
		want := first
		if strings.HasSuffix(r, " 150") {
			want = first + 1
		}
		if n != want {
			t.Errorf("%q in batch %d, want %d", r, n, want)
		}
	}
	for i := range keys {
		user := fmt.Sprintf("u%03d", i)
		if got := fmt.Sprint(fired[user]); got != "[100 200 150]" {
			t.Fatalf("%s's timers fired %s, want [100 200 150]", user, got)
		}
	}
}

// listEchoProcessor appends each row's page to a list with an event-time
// TTL and emits the list after its call.
type listEchoProcessor struct {
	list *typed.ListState[string]
}

func (p *listEchoProcessor) Init(h *typed.Handle) error {
	p.list = typed.NewListState[string](h, "list", typed.WithEventTimeTTL(100*time.Second))
	return nil
}

func (p *listEchoProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	for r := range rows {
		if err := p.list.AppendValue(ctx, r.Page); err != nil {
			return err
		}
	}
	l, err := p.list.Get(ctx)
	if err != nil {
		return err
	}
	var s []string
	for v := range l {
		s = append(s, v)
	}
	emit(user + " " + strings.Join(s, ","))
	return nil
}

// TestListHeaderOutlivesItsElements: under an event-time TTL, a's list
// gets p1 at event time 1000 (expiring at 1100), then p2 at 950 (1050).
// Once the watermark passes 1050, p2 is gone and p1 lives on; the next
// append follows p1. (The list's header, which holds the next element's
// number, expired with the last element appended, p2: numbering started
// again and p3 overwrote p1.)
func TestListHeaderOutlivesItsElements(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 60*time.Second)
	out := typed.TransformWithState(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), &listEchoProcessor{}, typed.TimeModeEventTime, typed.Append)
	sink := newSink[string]()
	q := startLive(t, typed.WriteTo(out, sink), runtime.NewManualClock(seconds(1_000_000)), newCheckpoint().opts()...)
	defer q.stop()
	m.Add(fixtures.Click{User: "a", Time: seconds(1000), Page: "p1"}) // wm after: 940
	q.trigger()
	m.Add(fixtures.Click{User: "a", Time: seconds(950), Page: "p2"}) // not late (950 > 940)
	q.trigger()
	m.Add(fixtures.Click{User: "b", Time: seconds(1120), Page: "x"}) // wm after: 1060
	q.trigger()
	q.trigger() // a batch at watermark 1060: p2 (1050) and the header go; p1 (1100) stays
	m.Add(fixtures.Click{User: "a", Time: seconds(1070), Page: "p3"})
	q.trigger()
	rows := sink.rows()
	got := rows[len(rows)-1]
	// The plain model: elements with expiry > watermark 1060, in append order.
	want := "a p1,p3"
	if got != want {
		t.Fatalf("rows %q; last %q, want %q", rows, got, want)
	}
}

// initTTLProcessor holds a count under an event-time TTL of an hour,
// seeded by the initial state; each call adds its rows and emits it.
type initTTLProcessor struct{ n *typed.ValueState[int64] }

func (p *initTTLProcessor) Init(h *typed.Handle) error {
	p.n = typed.NewValueState[int64](h, "n", typed.WithEventTimeTTL(time.Hour))
	return nil
}

func (p *initTTLProcessor) HandleInitialState(ctx context.Context, key string, initial int64, _ typed.TimerValues) error {
	return p.n.Update(ctx, initial)
}

func (p *initTTLProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	n, _, err := p.n.Get(ctx)
	if err != nil {
		return err
	}
	for range rows {
		n++
	}
	emit(user + " " + fmt.Sprint(n))
	return p.n.Update(ctx, n)
}

// TestInitialStateEventTimeTTL: values HandleInitialState writes under an
// event-time TTL (an hour) count it from the first batch's processing
// time, taken for an event time: a's initial count is there at its first
// row, the watermark well within the hour, and gone once the watermark is
// past it. (They expired at the epoch plus the TTL: gone at the
// watermark's first move.)
func TestInitialStateEventTimeTTL(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 60*time.Second)
	init := typed.ProcessorInitialState(typed.Pair[string, int64]{Key: "a", State: 10}, typed.Pair[string, int64]{Key: "c", State: 20})
	out := typed.TransformWithState(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), &initTTLProcessor{}, typed.TimeModeEventTime, typed.Append, init)
	sink := newSink[string]()
	const start = 1_700_000_000 // the first batch's processing time
	q := startLive(t, typed.WriteTo(out, sink), runtime.NewManualClock(seconds(start)), newCheckpoint().opts()...)
	defer q.stop()
	m.Add(fixtures.Click{User: "b", Time: seconds(start), Page: "x"})
	q.trigger()
	m.Add(fixtures.Click{User: "a", Time: seconds(start + 1), Page: "y"})
	q.trigger()
	m.Add(fixtures.Click{User: "b", Time: seconds(start + 3600 + 61), Page: "x"}) // the watermark past start + 1 h
	q.trigger()
	m.Add(fixtures.Click{User: "c", Time: seconds(start + 3600 + 62), Page: "y"})
	q.trigger()
	var got []string
	for _, r := range sink.rows() {
		if !strings.HasPrefix(r, "b ") {
			got = append(got, r)
		}
	}
	if want := "[a 11 c 1]"; fmt.Sprint(got) != want {
		t.Fatalf("rows %q, want %s: a's initial count kept within the hour, c's gone after it", got, want)
	}
}

// emptyListProcessor puts a row's page in the key's list, or, for the
// page "none", puts an empty list; for "nothing" it appends none.
type emptyListProcessor struct{ list *typed.ListState[string] }

func (p *emptyListProcessor) Init(h *typed.Handle) error {
	p.list = typed.NewListState[string](h, "list")
	return nil
}

func (p *emptyListProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	for r := range rows {
		var err error
		switch r.Page {
		case "none":
			err = p.list.Put(ctx, nil)
		case "nothing":
			err = p.list.AppendList(ctx, nil)
		default:
			err = p.list.Put(ctx, []string{r.Page})
		}
		if err != nil {
			return err
		}
	}
	ok, err := p.list.Exists(ctx)
	emit(fmt.Sprint(user, " ", ok))
	return err
}

// TestEmptyListLeavesNoState: a list put empty, or appended nothing to,
// leaves the key no list and no state row (a header without elements
// stayed for ever, counted among the operator's rows).
func TestEmptyListLeavesNoState(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	out := typed.TransformWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), &emptyListProcessor{}, typed.TimeModeNone, typed.Append)
	sink := newSink[string]()
	q := startLive(t, typed.WriteTo(out, sink), runtime.NewManualClock(seconds(1_000_000)), newCheckpoint().opts()...)
	defer q.stop()
	m.Add(fixtures.Click{User: "a", Time: seconds(1), Page: "p1"}, fixtures.Click{User: "b", Time: seconds(1), Page: "nothing"})
	if rows := q.trigger().StateOperators[0].NumRowsTotal; rows != 2 { // a's header and element
		t.Fatalf("%d state rows after a put of one element, want 2", rows)
	}
	m.Add(fixtures.Click{User: "a", Time: seconds(2), Page: "none"})
	if rows := q.trigger().StateOperators[0].NumRowsTotal; rows != 0 {
		t.Fatalf("%d state rows once a's list is put empty and b's appended nothing, want none", rows)
	}
	if got, want := fmt.Sprint(sink.rows()), "[a true b false a false]"; got != want {
		t.Fatalf("rows %s, want %s", got, want)
	}
}

// ttlListProcessor appends each row's page to a list whose time to live
// is ttl's (nil: none).
type ttlListProcessor struct {
	ttl   typed.StateOption
	pages *typed.ListState[string]
}

func (p *ttlListProcessor) Init(h *typed.Handle) error {
	var opts []typed.StateOption
	if p.ttl != nil {
		opts = append(opts, p.ttl)
	}
	p.pages = typed.NewListState[string](h, "pages", opts...)
	return nil
}

func (p *ttlListProcessor) HandleInputRows(ctx context.Context, _ string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	for r := range rows {
		if err := p.pages.AppendValue(ctx, r.Page); err != nil {
			return err
		}
	}
	pages, err := p.pages.Get(ctx)
	if err != nil {
		return err
	}
	emit(fmt.Sprint(slices.Collect(pages)))
	return nil
}

// TestProcessorTTLChanges: a restart may give a variable a time to live,
// take it away or change its length, but not move it to the other clock
// (processing time, event time), whose instants its stored expiries are
// not, even after a run that took it away: that is refused at start,
// naming the variable and both.
func TestProcessorTTLChanges(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	ck := newCheckpoint()
	in := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, time.Second)
	byUser := typed.GroupByKey(in, func(c *fixtures.Click) string { return c.User })
	run := func(ttl typed.StateOption) error {
		w := typed.WriteTo(typed.TransformWithState(byUser, &ttlListProcessor{ttl: ttl}, typed.TimeModeEventTime, typed.Append), newSink[string]())
		q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			return err
		}
		return q.AwaitTermination()
	}
	steps := []struct {
		name    string
		ttl     typed.StateOption
		refused string
	}{
		{"none", nil, ""},
		{"processing time", typed.WithTTL(time.Hour), ""},
		{"processing time, longer", typed.WithTTL(2 * time.Hour), ""},
		{"event time", typed.WithEventTimeTTL(time.Hour), `state variable "pages" had a time to live in processing time (2h0m0s), now in event time (1h0m0s)`},
		{"none again", nil, ""},
		// The entries written with the processing-time TTL keep their
		// expiries: a TTL in event time is refused after a run without.
		{"event time after none", typed.WithEventTimeTTL(time.Hour), `state variable "pages" had a time to live in processing time (taken away since, its entries keeping their expiries), now in event time (1h0m0s)`},
		{"processing time after none", typed.WithTTL(time.Minute), ""},
	}
	for i, step := range steps {
		m.Add(click("a", i+1))
		err := run(step.ttl)
		switch {
		case step.refused == "" && err != nil:
			t.Fatalf("%s: %v", step.name, err)
		case step.refused != "" && (!errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), step.refused)):
			t.Fatalf("%s: err = %v, want it to say %s", step.name, err, step.refused)
		}
	}
}

// TestProcessorEventTTLTakenAway: a restart that takes a variable's
// event-time TTL away keeps what was written with it until the watermark
// passes its expiry, as the TTL said (it was judged by processing time,
// and gone at once), and then removes it from the store; what is written
// after never expires.
func TestProcessorEventTTLTakenAway(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // a batch per row
	ck := newCheckpoint()
	in := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 0)
	byUser := typed.GroupByKey(in, func(c *fixtures.Click) string { return c.User })
	var rows int64 // the state rows after the last run
	run := func(ttl typed.StateOption) []string {
		t.Helper()
		sink := newSink[string]()
		w := typed.WriteTo(typed.TransformWithState(byUser, &ttlListProcessor{ttl: ttl}, typed.TimeModeEventTime, typed.Append), sink)
		q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		if p := q.RecentProgress(); len(p) > 0 {
			rows = p[len(p)-1].StateOperators[0].NumRowsTotal
		}
		return sink.rows()
	}
	page := func(sec int, name string) fixtures.Click {
		return fixtures.Click{User: "a", Time: at(sec), Page: name}
	}
	m.Add(page(100, "p1")) // expires at 3700 s of event time
	if got := fmt.Sprint(run(typed.WithEventTimeTTL(time.Hour))); got != "[[p1]]" {
		t.Fatalf("with the TTL: %s", got)
	}
	m.Add(page(200, "p2"))
	if got := fmt.Sprint(run(nil)); got != "[[p1 p2]]" {
		t.Fatalf("without it: %s, want p1 kept until the watermark passes 3700 s", got)
	}
	// The batch of 3710 s runs with the watermark of 200 s, the next with
	// 3710 s: p1 has expired.
	m.Add(page(3710, "p3"))
	m.Add(page(3800, "p4"))
	if got := fmt.Sprint(run(nil)); got != "[[p1 p2 p3] [p2 p3 p4]]" {
		t.Fatalf("past p1's expiry: %s", got)
	}
	// p1 is swept from the store too: the list's header, p2, p3 and p4.
	if rows != 4 {
		t.Fatalf("%d state rows, want 4: the expired p1 kept", rows)
	}
}

// gapProcessor declares a value state "s" of fixtures.StateV1 (version
// 1), of fixtures.StateV3 (3; 4 deletes the stored "s" first), or, in
// version 2, another variable only. It writes "s" of each key with rows,
// and says whether the key had one.
type gapProcessor struct {
	version int
	v1      *typed.ValueState[fixtures.StateV1]
	v3      *typed.ValueState[fixtures.StateV3]
}

func (p *gapProcessor) Init(h *typed.Handle) error {
	switch p.version {
	case 1:
		p.v1 = typed.NewValueState[fixtures.StateV1](h, "s")
	case 2:
		typed.NewValueState[int64](h, "other")
	case 4:
		h.DeleteIfExists("s")
		fallthrough
	default:
		p.v3 = typed.NewValueState[fixtures.StateV3](h, "s")
	}
	return nil
}

func (p *gapProcessor) HandleInputRows(ctx context.Context, _ string, _ iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(string)) error {
	switch {
	case p.v1 != nil:
		ok, err := p.v1.Exists(ctx)
		emit(fmt.Sprint(ok))
		if err != nil {
			return err
		}
		return p.v1.Update(ctx, fixtures.StateV1{Count: 1})
	case p.v3 != nil:
		ok, err := p.v3.Exists(ctx)
		emit(fmt.Sprint(ok))
		if err != nil {
			return err
		}
		return p.v3.Update(ctx, fixtures.StateV3{Count: "x"})
	}
	return nil
}

// TestProcessorVariableBackAfterAGap: a variable a run leaves out keeps
// its data and its type in the checkpoint, so a later run that declares
// it with a type that cannot read its data is refused, as it is straight
// after (it was taken for a new variable, and read the old data as the
// new type); deleted first (DeleteIfExists), as the refusal advises, it
// may be declared with any type, and starts empty (that was refused too).
func TestProcessorVariableBackAfterAGap(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	ck := newCheckpoint()
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	var sink *batchSink[string]
	run := func(p typed.StatefulProcessor[string, fixtures.Click, string]) error {
		sink = newSink[string]()
		w := typed.WriteTo(typed.TransformWithState(byUser, p, typed.TimeModeNone, typed.Append), sink)
		q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			return err
		}
		return q.AwaitTermination()
	}
	m.Add(click("a", 1))
	if err := run(&gapProcessor{version: 1}); err != nil {
		t.Fatal(err)
	}
	m.Add(click("a", 2))
	if err := run(&gapProcessor{version: 2}); err != nil {
		t.Fatal(err)
	}
	m.Add(click("a", 3))
	err := run(&gapProcessor{version: 3})
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `state "s"`) {
		t.Fatalf("declared again as another type: err = %v", err)
	}
	m.Add(click("a", 4))
	if err := run(&gapProcessor{version: 1}); err != nil || fmt.Sprint(sink.rows()) != "[true]" {
		t.Fatalf("declared again as its type: %v, rows %v, want [true]", err, sink.rows())
	}
	m.Add(click("a", 5))
	if err := run(&gapProcessor{version: 4}); err != nil || fmt.Sprint(sink.rows()) != "[false]" {
		t.Fatalf("deleted, then declared as another type: %v, rows %v, want [false]", err, sink.rows())
	}
}

// TestGroupingKeyWidened: a grouping key of an integer type made wider
// (int32 to int64) reads the stored state, every integer key being
// stored in 8 bytes: the start is accepted and the counts go on (it was
// refused, even with AllowPipelineChanges, which the functions' new
// names need here). A narrower one is refused.
func TestGroupingKeyWidened(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	ck := newCheckpoint()
	count := func(_ int64, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (int64, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		return c.Count, nil
	}
	clicks := func() typed.Stream[fixtures.Click] { return typed.FromMemory(m) }
	sink32, sink64, sink16 := newSink[int64](), newSink[int64](), newSink[int64]()
	by32 := typed.MapGroupsWithState(typed.GroupByKey(clicks(), func(c *fixtures.Click) int32 { return int32(len(c.User)) }), typed.NoTimeout,
		func(k int32, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (int64, error) {
			return count(int64(k), rows, state)
		})
	by64 := typed.MapGroupsWithState(typed.GroupByKey(clicks(), func(c *fixtures.Click) int64 { return int64(len(c.User)) }), typed.NoTimeout, count)
	by16 := typed.MapGroupsWithState(typed.GroupByKey(clicks(), func(c *fixtures.Click) int16 { return int16(len(c.User)) }), typed.NoTimeout,
		func(k int16, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (int64, error) {
			return count(int64(k), rows, state)
		})
	start := func(w *typed.Writer[int64]) error {
		q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()), runtime.AllowPipelineChanges())...)
		if err != nil {
			return err
		}
		return q.AwaitTermination()
	}
	m.Add(click("abc", 1), click("xyz", 2))
	if err := start(typed.WriteTo(by32, sink32).OutputMode(typed.Update)); err != nil {
		t.Fatal(err)
	}
	m.Add(click("abc", 3))
	if err := start(typed.WriteTo(by64, sink64).OutputMode(typed.Update)); err != nil {
		t.Fatalf("int32 key widened to int64: %v", err)
	}
	if got := fmt.Sprint(sink64.rows()); got != "[3]" {
		t.Fatalf("the count of key 3 after the widening: %s, want [3]", got)
	}
	m.Add(click("abc", 4))
	if err := start(typed.WriteTo(by16, sink16).OutputMode(typed.Update)); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "key type was int64, is now int16") {
		t.Fatalf("int64 key narrowed to int16: %v", err)
	}
}

// infoProcessor writes, for each call, the QueryInfo its handle gives.
type infoProcessor struct{ h *typed.Handle }

func (p *infoProcessor) Init(h *typed.Handle) error {
	p.h = h
	if _, err := h.QueryInfo(context.Background()); !errors.Is(err, typed.ErrInvalidHandleState) {
		return fmt.Errorf("QueryInfo in Init: %v, want ErrInvalidHandleState", err)
	}
	return nil
}

func (p *infoProcessor) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], _ typed.TimerValues, emit func(typed.QueryInfo)) error {
	info, err := p.h.QueryInfo(ctx)
	if err != nil {
		return err
	}
	emit(info)
	return nil
}

// TestProcessorQueryInfo: a handler's call knows its query's id, kept
// across a restart, the run's, new at every start, and its batch's, the
// one its rows are written with (Spark's getQueryInfo).
func TestProcessorQueryInfo(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	sink := newSink[typed.QueryInfo]()
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	w := typed.WriteTo(typed.TransformWithState(byUser, &infoProcessor{}, typed.TimeModeNone, typed.Append), sink)
	ck := newCheckpoint()
	var runs [][2]string
	for _, users := range [][]string{{"a", "b"}, {"c"}} {
		for _, u := range users {
			m.Add(click(u, 0))
		}
		q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, [2]string{q.ID(), q.RunID()})
	}
	if runs[0][0] != runs[1][0] || runs[0][1] == runs[1][1] {
		t.Fatalf("runs (query id, run id) %v: want one query id, two run ids", runs)
	}
	var got []string
	for id, infos := range sink.snapshot() {
		for _, info := range infos {
			run := 0
			if id == 2 {
				run = 1
			}
			if info.BatchID != id || info.QueryID != runs[run][0] || info.RunID != runs[run][1] {
				t.Errorf("batch %d of run %d: a call's info %+v", id, run, info)
			}
			got = append(got, fmt.Sprint(id))
		}
	}
	if slices.Sort(got); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Fatalf("calls in batches %v, want one in each of 0, 1 and 2", got)
	}
}
