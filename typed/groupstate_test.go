package typed_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

var t0 = time.Unix(1_700_000_000, 0).UTC()

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

func click(user string, sec int) fixtures.Click { return fixtures.Click{User: user, Time: at(sec)} }

// call records one call of a stateful function.
type call struct {
	key      string
	rows     int
	timedOut bool
	wm       time.Time
}

// recorder is a flatMapGroupsWithState function that counts rows, records
// its calls, and applies a timeout rule.
type recorder struct {
	mu    sync.Mutex
	calls []call
	// timeout, given the key's last event time and the state, sets the
	// timeout (or not) and returns its error.
	timeout func(st *typed.GroupState[fixtures.Counter], last time.Time) error
}

func (r *recorder) fn(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
	c, _ := st.Get()
	n := 0
	for row := range rows {
		n++
		c.Count++
		c.Last = row.Time
	}
	r.mu.Lock()
	r.calls = append(r.calls, call{key: key, rows: n, timedOut: st.HasTimedOut(), wm: st.CurrentWatermark()})
	r.mu.Unlock()
	if st.HasTimedOut() {
		emit(fixtures.UserCount{User: key, Count: c.Count, Last: c.Last, TimedOut: true})
		st.Remove()
		return nil
	}
	st.Update(c)
	if r.timeout != nil {
		return r.timeout(st, c.Last)
	}
	return nil
}

func (r *recorder) timedOut() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keys []string
	for _, c := range r.calls {
		if c.timedOut {
			keys = append(keys, c.key)
		}
	}
	return keys
}

func eventTimePipeline(m *typed.MemoryStream[fixtures.Click], delay time.Duration, r *recorder, sink typed.Sink[fixtures.UserCount], opts ...typed.WatermarkOption[fixtures.Click]) *typed.Writer[fixtures.UserCount] {
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, delay, opts...)
	byUser := typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
	out := typed.FlatMapGroupsWithState(byUser, typed.Append, typed.EventTimeTimeout, r.fn)
	return typed.WriteTo(out, sink)
}

// TestEventTimeTimeout follows the rules one batch at a time: a batch
// uses the watermark of the batches before it; a timer fires once the
// watermark is strictly past it, in a batch of its own if no data comes; a
// key with rows in a batch does not time out in it.
func TestEventTimeTimeout(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // one row per batch
	m.Add(click("a", 10), click("b", 20), click("b", 31), click("c", 40), click("d", 45))
	r := &recorder{timeout: func(st *typed.GroupState[fixtures.Counter], last time.Time) error {
		return st.SetTimeoutTimestamp(last.Add(5 * time.Second))
	}}
	sink := newSink[fixtures.UserCount]()
	ck := newCheckpoint()
	if err := runToEnd(t, eventTimePipeline(m, 0, r, sink), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	// Batch 0 (a@10) sets a's timer at 15; batch 1 (b@20) runs with
	// watermark 10; batch 2 (b@31) runs with watermark 20 > 15: a times
	// out there. b has rows in batch 2, so its timer (25) does not fire; it
	// is replaced by 36, which fires in batch 4 (d@45, watermark 40). c's
	// timer (45) equals the final watermark (45): not strictly past, so it
	// does not fire.
	if got := strings.Join(r.timedOut(), ","); got != "a,b" {
		t.Fatalf("timed out: %q, want a,b", got)
	}
	if got := sink.batches[2]; len(got) != 1 || got[0].User != "a" || !got[0].TimedOut || got[0].Count != 1 {
		t.Fatalf("batch 2 output: %+v", got)
	}
	for _, c := range r.calls {
		if c.timedOut && c.rows != 0 {
			t.Fatalf("a timed-out call got rows: %+v", c)
		}
	}

	// More data moves the watermark to 100: the timers of c (45) and d
	// (50) fire, in a batch after the one that moved it (that batch has
	// no data).
	m.Add(click("e", 100))
	if err := runToEnd(t, eventTimePipeline(m, 0, r, sink), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.timedOut(), ","); got != "a,b,c,d" {
		t.Fatalf("timed out: %q, want a,b,c,d (in timer order)", got)
	}
	last := r.calls[len(r.calls)-1]
	if !last.wm.Equal(at(100)) {
		t.Fatalf("the timeout batch ran with watermark %v, want %v", last.wm, at(100))
	}
}

// TestTimeoutClearedAtEachCall: a timeout set in one call and not set
// again in the next is gone.
func TestTimeoutClearedAtEachCall(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	m.Add(click("a", 10), click("a", 11), click("z", 1000))
	first := true
	r := &recorder{timeout: func(st *typed.GroupState[fixtures.Counter], last time.Time) error {
		if first {
			first = false
			return st.SetTimeoutTimestamp(last.Add(time.Second))
		}
		return nil
	}}
	if err := runToEnd(t, eventTimePipeline(m, 0, r, newSink[fixtures.UserCount]()), newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	if got := r.timedOut(); len(got) != 0 {
		t.Fatalf("timed out %v: the timeout of the first call was not cleared by the second", got)
	}
}

// TestLateRowsDropped: rows at or before the watermark of the batch
// before do not reach the stateful operator and are counted.
func TestLateRowsDropped(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	// Batch 0: a@50, a@60 → watermark 60-5 = 55. Batch 1, which runs with
	// it: a@57, a@58. Batch 2: a@55 (late: at the watermark batch 1 ran
	// with), a@56 (on time).
	m.Add(click("a", 50), click("a", 60), click("a", 57), click("a", 58), click("a", 55), click("a", 56))
	r := &recorder{}
	var progress []runtime.QueryProgress
	var mu sync.Mutex
	l := listener{progress: func(p runtime.QueryProgress) { mu.Lock(); progress = append(progress, p); mu.Unlock() }}
	late := typed.NewMemorySink[fixtures.Click]()
	if err := runToEnd(t, eventTimePipeline(m, 5*time.Second, r, newSink[fixtures.UserCount](), typed.LateRows(late)), newCheckpoint().opts(runtime.Listener(l))...); err != nil {
		t.Fatal(err)
	}
	if rows := late.Rows(); len(rows) != 1 || !rows[0].Time.Equal(at(55)) {
		t.Fatalf("late rows sink: %+v, want the row at 55", rows)
	}
	rows := 0
	for _, c := range r.calls {
		rows += c.rows
	}
	if rows != 5 {
		t.Fatalf("the operator saw %d rows, want 5 (one late)", rows)
	}
	if len(progress) != 3 || progress[1].StateOperators[0].NumRowsDroppedByWatermark != 0 || progress[2].StateOperators[0].NumRowsDroppedByWatermark != 1 ||
		progress[2].EventTime["watermark"] != at(55).Format(time.RFC3339Nano) {
		t.Fatalf("progress: %+v", progress)
	}
}

type listener struct{ progress func(runtime.QueryProgress) }

func (l listener) OnQueryProgress(p runtime.QueryProgress) { l.progress(p) }

// fakeClock is a processing-time clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestProcessingTimeTimeout: a processing-time timeout fires when the
// clock passes it, with no new data; CurrentProcessingTime is the batch's
// time. The query's polling runs in a bubble of virtual time.
func TestProcessingTimeTimeout(t *testing.T) {
	synctest.Test(t, testProcessingTimeTimeout)
}

func testProcessingTimeTimeout(t *testing.T) {
	clock := &fakeClock{now: at(0)}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	var seenNow []time.Time
	var mu sync.Mutex
	f := func(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
		mu.Lock()
		seenNow = append(seenNow, st.CurrentProcessingTime())
		mu.Unlock()
		if st.HasTimedOut() {
			emit(fixtures.UserCount{User: key, TimedOut: true})
			st.Remove()
			return nil
		}
		st.Update(fixtures.Counter{Count: 1})
		return st.SetTimeoutDuration(10 * time.Second)
	}
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	sink := newSink[fixtures.UserCount]()
	w := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Append, typed.ProcessingTimeTimeout, f), sink)
	q, err := w.Start(context.Background(), newCheckpoint().opts(runtime.Clock(clock.Now))...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	m.Add(click("a", 1))
	waitFor(t, "the first batch", func() bool { _, ok := q.LastProgress(); return ok })
	clock.Advance(9 * time.Second)
	time.Sleep(20 * time.Millisecond) // virtual: the loop polls every millisecond
	synctest.Wait()
	if rows := sink.rows(); len(rows) != 0 {
		t.Fatalf("timed out before its time: %+v", rows)
	}
	clock.Advance(2 * time.Second)
	waitFor(t, "the timeout", func() bool { return len(sink.rows()) == 1 })
	if r := sink.rows()[0]; r.User != "a" || !r.TimedOut {
		t.Fatalf("output %+v", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if !seenNow[0].Equal(at(0)) || !seenNow[1].Equal(at(11)) {
		t.Fatalf("processing times seen: %v", seenNow)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupStateMisuse: setting a timeout of the wrong kind, a duration
// that is not positive, a timestamp at or before the Unix epoch or before
// the watermark returns an error and changes nothing: a function that
// ignores the error goes on (and no timeout was set), one that returns it
// fails the batch with the key in the message.
func TestGroupStateMisuse(t *testing.T) {
	cases := []struct {
		name    string
		timeout typed.Timeout
		misuse  func(st *typed.GroupState[fixtures.Counter]) error
		want    string
	}{
		{"duration without processing-time timeout", typed.EventTimeTimeout, func(st *typed.GroupState[fixtures.Counter]) error { return st.SetTimeoutDuration(time.Second) }, "needs ProcessingTimeTimeout"},
		{"timestamp without event-time timeout", typed.ProcessingTimeTimeout, func(st *typed.GroupState[fixtures.Counter]) error { return st.SetTimeoutTimestamp(at(100)) }, "needs EventTimeTimeout"},
		{"zero duration", typed.ProcessingTimeTimeout, func(st *typed.GroupState[fixtures.Counter]) error { return st.SetTimeoutDuration(0) }, "must be positive"},
		{"negative duration", typed.ProcessingTimeTimeout, func(st *typed.GroupState[fixtures.Counter]) error { return st.SetTimeoutDuration(-time.Second) }, "must be positive"},
		{"timestamp at the epoch", typed.EventTimeTimeout, func(st *typed.GroupState[fixtures.Counter]) error { return st.SetTimeoutTimestamp(time.Unix(0, 0)) }, "after the Unix epoch"},
		{"timestamp before the epoch", typed.EventTimeTimeout, func(st *typed.GroupState[fixtures.Counter]) error { return st.SetTimeoutTimestamp(time.Unix(-5, 0)) }, "after the Unix epoch"},
		{"timestamp before the watermark", typed.EventTimeTimeout, func(st *typed.GroupState[fixtures.Counter]) error {
			// The watermark starts at the epoch, where a timestamp before it
			// is refused for being before the epoch, as Spark checks first.
			if !st.CurrentWatermark().After(time.Unix(1, 0)) {
				return nil
			}
			return st.SetTimeoutTimestamp(st.CurrentWatermark().Add(-time.Second))
		}, "before the current watermark"},
	}
	for _, tc := range cases {
		for _, returned := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/returned=%v", tc.name, returned), func(t *testing.T) {
				m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
				m.Add(click("a", 10), click("a", 20), click("z", 100))
				s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 0)
				var calls []call
				misused := 0
				f := func(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
					calls = append(calls, call{key: key, timedOut: st.HasTimedOut()})
					err := tc.misuse(st)
					if err != nil {
						misused++
						if !errors.Is(err, typed.ErrGroupState) || !strings.Contains(err.Error(), tc.want) {
							t.Errorf("misuse returned %v, want a GroupState error containing %q", err, tc.want)
						}
					}
					if returned {
						return err
					}
					return nil
				}
				w := typed.WriteTo(typed.FlatMapGroupsWithState(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), typed.Append, tc.timeout, f), newSink[fixtures.UserCount]())
				err := runToEnd(t, w, newCheckpoint().opts(runtime.FlushEventTime())...)
				if misused == 0 {
					t.Fatal("no call misused the state: the case tests nothing")
				}
				if returned {
					if !errors.Is(err, typed.ErrGroupState) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "key a") {
						t.Fatalf("err = %v, want a GroupState error containing %q and the key", err, tc.want)
					}
					return
				}
				if err != nil {
					t.Fatalf("a misuse whose error the function ignores failed the query: %v", err)
				}
				for _, c := range calls {
					if c.timedOut {
						t.Fatalf("key %s timed out: the misused call set a timeout", c.key)
					}
				}
			})
		}
	}
}

// TestRemove: a removed state is gone for the next call.
func TestRemove(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	m.Add(click("a", 1), click("a", 2), click("a", 3))
	var exists []bool
	f := func(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		exists = append(exists, st.Exists())
		if _, ok := st.Get(); ok {
			st.Remove()
		} else {
			st.Update(fixtures.Counter{Count: 1})
		}
		return fixtures.UserCount{User: key}, nil
	}
	w := typed.WriteTo(typed.MapGroupsWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), typed.NoTimeout, f), newSink[fixtures.UserCount]()).OutputMode(typed.Update)
	if err := runToEnd(t, w, newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	if len(exists) != 3 || exists[0] || !exists[1] || exists[2] {
		t.Fatalf("Exists in the three calls: %v, want false true false", exists)
	}
}

// TestStartRefusesBadPipelines: combinations Spark refuses are errors at
// Start, before anything runs.
func TestStartRefusesBadPipelines(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	mapped := typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks)
	r := &recorder{}
	flatAppend := typed.FlatMapGroupsWithState(byUser, typed.Append, typed.NoTimeout, r.fn)
	noWatermark := typed.FlatMapGroupsWithState(byUser, typed.Append, typed.EventTimeTimeout, r.fn)
	sink := newSink[fixtures.UserCount]()
	for _, tc := range []struct {
		name string
		w    *typed.Writer[fixtures.UserCount]
		want string
	}{
		{"map in append mode", typed.WriteTo(mapped, sink).OutputMode(typed.Append), "needs the Update output mode; the query has Append: use WriteTo(...).OutputMode(typed.Update)"},
		{"flatMap append in update mode", typed.WriteTo(flatAppend, sink).OutputMode(typed.Update), "is in Append mode; the query has Update"},
		{"complete", typed.WriteTo(flatAppend, sink).OutputMode(typed.Complete), "Complete"},
		{"event-time timeout without watermark", typed.WriteTo(noWatermark, sink), "no watermark"},
	} {
		if _, err := tc.w.Start(context.Background()); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
	}
	type point struct{ X, Y float64 }
	byPoint := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) point { return point{} })
	byPointCount := typed.MapGroupsWithState(byPoint, typed.NoTimeout, func(k point, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		return fixtures.UserCount{}, nil
	})
	if _, err := typed.WriteTo(byPointCount, sink).OutputMode(typed.Update).Start(context.Background()); err == nil || !strings.Contains(err.Error(), "grouping key") {
		t.Errorf("a struct key that is not a record: err = %v", err)
	}
}

// TestPanicFailsTheBatch: a panic in user code stops the query with an
// error naming the operator and the key; nothing of the batch is
// committed, so the next start runs it again.
func TestPanicFailsTheBatch(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2))
	panics := true
	f := func(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		if key == "b" && panics {
			panic("boom")
		}
		return countClicks(key, rows, st)
	}
	ck := newCheckpoint()
	sink := newSink[fixtures.UserCount]()
	w := func() *typed.Writer[fixtures.UserCount] {
		return typed.WriteTo(typed.MapGroupsWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), typed.NoTimeout, f), sink).OutputMode(typed.Update)
	}
	err := runToEnd(t, w(), ck.opts()...)
	if err == nil || !strings.Contains(err.Error(), "key b") || !strings.Contains(err.Error(), "panic: boom") || !strings.Contains(err.Error(), "mapGroupsWithState") ||
		!strings.Contains(err.Error(), "TestPanicFailsTheBatch.func1") || !strings.Contains(err.Error(), "groupstate_test.go:") {
		t.Fatalf("err = %v", err)
	}
	panics = false
	if err := runToEnd(t, w(), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	sameCounts(t, latest(sink.rows()), expectedCounts([]fixtures.Click{click("a", 1), click("b", 2)}))
}

// TestCheckpointFromAnotherPipeline: a checkpoint whose state type changed
// a field's type is refused at Start with a message that says so.
func TestCheckpointFromAnotherPipeline(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1))
	ck := newCheckpoint()
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	if err := runToEnd(t, typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks), newSink[fixtures.UserCount]()).OutputMode(typed.Update), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	other := func(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.StateV3]) (fixtures.UserCount, error) {
		return fixtures.UserCount{}, nil
	}
	_, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, other), newSink[fixtures.UserCount]()).OutputMode(typed.Update).Start(context.Background(), ck.opts()...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "field Count") {
		t.Fatalf("err = %v", err)
	}
}

// TestFlushEventTime: when the input ends, FlushEventTime fires every
// pending event-time timeout, with a Once trigger as with AvailableNow.
func TestFlushEventTime(t *testing.T) {
	for _, trigger := range []runtime.Trigger{runtime.Once(), runtime.AvailableNow()} {
		t.Run(trigger.String(), func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			m.Add(click("a", 10), click("b", 20))
			r := &recorder{timeout: func(st *typed.GroupState[fixtures.Counter], last time.Time) error {
				return st.SetTimeoutTimestamp(last.Add(time.Hour))
			}}
			q, err := eventTimePipeline(m, 0, r, newSink[fixtures.UserCount]()).Start(context.Background(),
				newCheckpoint().opts(runtime.WithTrigger(trigger), runtime.FlushEventTime())...)
			if err != nil {
				t.Fatal(err)
			}
			if err := q.AwaitTermination(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(r.timedOut(), ","); got != "a,b" {
				t.Fatalf("timed out: %q, want a,b", got)
			}
		})
	}
}
