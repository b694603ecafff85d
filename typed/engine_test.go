package typed_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestEverySourceEveryTriggerAcrossRestart runs a count per key over each
// kind of source with each trigger, stopping and restarting on the same
// checkpoint between two halves of the input, and compares the final
// counts with a plain loop: nothing read twice, nothing skipped. (The
// Once trigger used to plan its batch without the source's Next, which a
// restarted Rate source refused and a Files source committed wrongly.)
func TestEverySourceEveryTriggerAcrossRestart(t *testing.T) {
	triggers := []runtime.Trigger{runtime.Once(), runtime.AvailableNow(), runtime.AsSoonAsPossible(), runtime.ProcessingTime(time.Millisecond)}
	for _, trigger := range triggers {
		t.Run("files/"+trigger.String(), func(t *testing.T) {
			dir := t.TempDir()
			in := clicks(60, 7)
			write := func(name string, rows []fixtures.Click) {
				var b []byte
				for i := range rows {
					b, _ = rows[i].AppendJSON(b)
					b = append(b, '\n')
				}
				if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("a.json", in[:20])
			write("b.json", in[20:30])
			src := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 1})
			sink := newSink[fixtures.UserCount]()
			ck := newCheckpoint()
			w := countFrom(typed.From[fixtures.Click](src), sink)
			runUntil(t, w, trigger, ck, sink, 30)
			write("c.json", in[30:60])
			runUntil(t, w, trigger, ck, sink, 60)
			sameCounts(t, latest(sink.rows()), expectedCounts(in))
		})
		t.Run("memory/"+trigger.String(), func(t *testing.T) {
			in := clicks(60, 8)
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 7)
			m.Add(in[:25]...)
			sink := newSink[fixtures.UserCount]()
			ck := newCheckpoint()
			w := countFrom(typed.FromMemory(m), sink)
			runUntil(t, w, trigger, ck, sink, 25)
			m.Add(in[25:]...)
			runUntil(t, w, trigger, ck, sink, 60)
			sameCounts(t, latest(sink.rows()), expectedCounts(in))
		})
		t.Run("rate/"+trigger.String(), func(t *testing.T) {
			clock := &fakeClock{now: at(0)}
			src := runtime.RateSource(runtime.RateOptions{RowsPerSecond: 10, Start: at(0), Clock: clock.Now})
			sink := newSink[rateCount]()
			ck := newCheckpoint()
			byPart := typed.GroupByKey(typed.From[fixtures.RateRow](src), func(r *fixtures.RateRow) int64 { return r.Value % 3 })
			w := typed.WriteTo(typed.MapGroupsWithState(byPart, typed.NoTimeout, countRate), sink)
			clock.Advance(2 * time.Second) // rows 0..20
			runUntilRows(t, w, trigger, ck, func() int64 { return total(sink) }, 21)
			clock.Advance(3 * time.Second) // rows 21..50
			runUntilRows(t, w, trigger, ck, func() int64 { return total(sink) }, 51)
			got := map[int64]int64{}
			for _, r := range sink.rows() {
				got[r.Key] = r.Count
			}
			want := map[int64]int64{}
			for v := range int64(51) {
				want[v%3]++
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("counts %v, want %v", got, want)
			}
		})
	}
}

// rateCount is the count of rate rows per value mod 3.
type rateCount struct{ Key, Count int64 }

func countRate(key int64, rows iter.Seq[fixtures.RateRow], st *typed.GroupState[fixtures.Counter]) (rateCount, error) {
	c, _ := st.Get()
	for range rows {
		c.Count++
	}
	st.Update(c)
	return rateCount{key, c.Count}, nil
}

func total(s *batchSink[rateCount]) int64 {
	last := map[int64]int64{}
	for _, r := range s.rows() {
		last[r.Key] = r.Count
	}
	var n int64
	for _, c := range last {
		n += c
	}
	return n
}

func countFrom(in typed.Stream[fixtures.Click], sink typed.Sink[fixtures.UserCount]) *typed.Writer[fixtures.UserCount] {
	byUser := typed.GroupByKey(in, func(c *fixtures.Click) string { return c.User })
	return typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks), sink)
}

// runUntil runs w with trigger until its sink's counts add up to rows:
// a stopping trigger runs to its end (and again, if its per-batch limit
// left input behind); a continuous one is stopped once they do.
func runUntil(t *testing.T, w *typed.Writer[fixtures.UserCount], trigger runtime.Trigger, ck *checkpoint, sink *batchSink[fixtures.UserCount], rows int64) {
	t.Helper()
	runUntilRows(t, w, trigger, ck, func() int64 {
		var n int64
		for _, u := range latest(sink.rows()) {
			n += u.Count
		}
		return n
	}, rows)
}

func runUntilRows[T any](t *testing.T, w *typed.Writer[T], trigger runtime.Trigger, ck *checkpoint, counted func() int64, rows int64) {
	t.Helper()
	for range 20 {
		// A continuous query runs on a manual clock: once it waits on the
		// clock it has done all there is to do, and is stopped.
		clock := runtime.NewManualClock(at(0))
		q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(trigger), runtime.WithManualClock(clock))...)
		if err != nil {
			t.Fatal(err)
		}
		stops := trigger.String() == "Once" || trigger.String() == "AvailableNow"
		if !stops {
			ctx, cancel := context.WithCancel(context.Background())
			go func() { <-q.Done(); cancel() }()
			clock.WaitUntilWaiting(ctx)
			cancel()
			q.Stop()
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		if n := counted(); n >= rows {
			if n > rows {
				t.Fatalf("%d rows counted, want %d: a row was read twice", n, rows)
			}
			return
		}
	}
	t.Fatalf("%d rows counted after 20 runs, want %d", counted(), rows)
}

// TestCheckpointIdentity: a pipeline with another timeout, output mode or
// operator function, or other sources, is refused on a checkpoint, unless
// the change is allowed; a state type of another name too. (Before, a
// processing-time pipeline started on an event-time pipeline's checkpoint
// and emitted the other's state.)
func TestCheckpointIdentity(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 10))
	ck := newCheckpoint()
	r := &recorder{timeout: func(st *typed.GroupState[fixtures.Counter], last time.Time) error {
		return st.SetTimeoutTimestamp(last.Add(time.Hour))
	}}
	if err := runToEnd(t, eventTimePipeline(m, 0, r, newSink[fixtures.UserCount]()), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	processing := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Append, typed.ProcessingTimeTimeout, r.fn), newSink[fixtures.UserCount]())
	_, err := processing.Start(context.Background(), ck.opts()...)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "timeout was EventTimeTimeout, is now ProcessingTimeTimeout") {
		t.Fatalf("processing-time pipeline on an event-time checkpoint: %v", err)
	}
	other := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Update, typed.NoTimeout,
		func(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
			return nil
		}),
		newSink[fixtures.UserCount]())
	_, err = other.Start(context.Background(), ck.opts()...)
	for _, want := range []string{"output mode was Append, is now Update", "timeout was EventTimeTimeout, is now NoTimeout", `was flatMapGroupsWithState "github.com/streamgen/streamgen/typed_test.(*recorder).fn-fm"`} {
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), want) {
			t.Fatalf("other function: err %v, want %q", err, want)
		}
	}
	q, err := processing.Start(context.Background(), ck.opts(runtime.AllowPipelineChanges(), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatalf("allowed change: %v", err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
}

// TestQueryIdentity: the query id is the checkpoint's, the same at every
// start; the run id is new at every start.
func TestQueryIdentity(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	ck := newCheckpoint()
	var ids, runs []string
	for range 2 {
		m.Add(click("a", 1))
		q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		p, _ := q.LastProgress()
		if p.ID != q.ID() || p.RunID != q.RunID() {
			t.Fatalf("progress ids %s/%s, query's %s/%s", p.ID, p.RunID, q.ID(), q.RunID())
		}
		ids, runs = append(ids, q.ID()), append(runs, q.RunID())
	}
	if ids[0] != ids[1] || runs[0] == runs[1] || ids[0] == "" {
		t.Fatalf("ids %v, run ids %v: want one id, two run ids", ids, runs)
	}
}

// TestListenerWithoutMethods: a listener that implements no listener
// method is refused at Start.
func TestListenerWithoutMethods(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	_, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(), runtime.Listener(struct{ OnProgress func() }{}))
	if err == nil || !strings.Contains(err.Error(), "has none of the methods") {
		t.Fatalf("err = %v", err)
	}
}

// TestStatusBetweenTriggers: between two interval triggers the status
// says so, as Spark's; with nothing to do under AsSoonAsPossible, the
// query waits for data.
func TestStatusBetweenTriggers(t *testing.T) {
	for _, tc := range []struct {
		trigger runtime.Trigger
		want    string
	}{
		{runtime.ProcessingTime(time.Second), "Waiting for next trigger"},
		{runtime.AsSoonAsPossible(), "Waiting for data to arrive"},
	} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		m.Add(click("a", 1))
		clock := runtime.NewManualClock(at(0))
		q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(),
			newCheckpoint().opts(runtime.WithManualClock(clock), runtime.WithTrigger(tc.trigger))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := clock.WaitUntilWaiting(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := q.Status()
		if st.Message != tc.want || st.IsTriggerActive {
			t.Errorf("%v: status %+v, want %q", tc.trigger, st, tc.want)
		}
		if p, ok := q.LastProgress(); !ok || p.BatchID != 0 {
			t.Errorf("%v: no batch ran", tc.trigger)
		}
		q.Stop()
	}
}

// TestIntervalTriggerOnManualClock: advancing the manual clock by the
// trigger's interval fires exactly one trigger, at the new time.
func TestIntervalTriggerOnManualClock(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1) // one row per batch
	m.Add(click("a", 1), click("a", 2), click("a", 3))
	clock := runtime.NewManualClock(at(0))
	q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(),
		newCheckpoint().opts(runtime.WithManualClock(clock), runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	for i := range 3 {
		if err := clock.WaitUntilWaiting(context.Background()); err != nil {
			t.Fatal(err)
		}
		p := q.RecentProgress()
		if len(p) != i+1 || !p[i].Timestamp.Equal(at(10*i)) {
			t.Fatalf("after %d intervals: %d batches, the last at %v", i, len(p), p[len(p)-1].Timestamp)
		}
		clock.Advance(10 * time.Second)
	}
}

// TestPanicInMapNamesTheFunction: a panic in a stateless stage stops the
// query with an error that names the function and carries the stack.
func TestPanicInMapNamesTheFunction(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("bad", 2))
	upper := func(c *fixtures.Click) fixtures.Click {
		if c.User == "bad" {
			panic("cannot upper-case")
		}
		return fixtures.Click{User: strings.ToUpper(c.User), Time: c.Time}
	}
	w := countFrom(typed.Map(typed.FromMemory(m), upper), newSink[fixtures.UserCount]())
	err := runToEnd(t, w, newCheckpoint().opts()...)
	if err == nil || !strings.Contains(err.Error(), "panic: cannot upper-case") || !strings.Contains(err.Error(), "TestPanicInMapNamesTheFunction.func1") ||
		!strings.Contains(err.Error(), "engine_test.go:") {
		t.Fatalf("err = %v", err)
	}
}

// TestUnion: two sources in one query keep their own offsets across a
// restart, every row is counted once, and the watermark is the minimum
// over both sources.
func TestUnion(t *testing.T) {
	left := typed.NewMemoryStream[fixtures.Click]("left", 2)
	right := typed.NewMemoryStream[fixtures.Click]("right", 3)
	var in []fixtures.Click
	add := func(m *typed.MemoryStream[fixtures.Click], rows ...fixtures.Click) {
		m.Add(rows...)
		in = append(in, rows...)
	}
	add(left, click("a", 100), click("b", 110), click("a", 120))
	add(right, click("a", 10), click("c", 20))
	both := typed.Union(typed.FromMemory(left), typed.FromMemory(right))
	both = typed.WithWatermark(both, func(c *fixtures.Click) time.Time { return c.Time }, 0)
	sink := newSink[fixtures.UserCount]()
	w := countFrom(both, sink)
	ck := newCheckpoint()
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	add(right, click("c", 30))
	add(left, click("b", 130))
	q, err := w.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	// The sources' rows interleave batch by batch, so only the counts are
	// independent of the order.
	got, want := latest(sink.rows()), expectedCounts(in)
	if len(got) != len(want) {
		t.Fatalf("%d users, want %d", len(got), len(want))
	}
	for u, w := range want {
		if got[u].Count != w.Count {
			t.Fatalf("user %s: count %d, want %d", u, got[u].Count, w.Count)
		}
	}
	p, _ := q.LastProgress()
	// The last batch runs with the watermark of the batches before it:
	// left is at 130 by then or earlier, right at 20 or 30; the minimum is
	// right's.
	wm, _ := time.Parse(time.RFC3339Nano, p.EventTime["watermark"])
	if !slices.ContainsFunc([]time.Time{at(20), at(30)}, wm.Equal) {
		t.Fatalf("watermark %v, want the right source's (20 or 30)", wm)
	}
	if len(p.Sources) != 2 || p.Sources[0].Description != "memory:left" || p.Sources[1].Description != "memory:right" {
		t.Fatalf("sources in the report: %+v", p.Sources)
	}
}

// TestTimerAfterTheEndOfTime: a timeout far past the range of
// nanosecond timestamps fires at the flush, and is not left behind.
func TestTimerAfterTheEndOfTime(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 10))
	r := &recorder{timeout: func(st *typed.GroupState[fixtures.Counter], last time.Time) error {
		return st.SetTimeoutTimestamp(time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC))
	}}
	if err := runToEnd(t, eventTimePipeline(m, 0, r, newSink[fixtures.UserCount]()), newCheckpoint().opts(runtime.FlushEventTime())...); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(r.timedOut(), ","); got != "a" {
		t.Fatalf("timed out: %q, want a", got)
	}
}

// TestInitialStateStream: an initial state read from a bounded stream of
// files at Start is applied as one given as a map; a key given twice in it
// fails Start with the key; a row that does not decode fails Start.
func TestInitialStateStream(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a.json", `{"user":"a","count":10}`+"\n"+`{"user":"b","count":20}`+"\n")
	states := typed.Map(typed.From[fixtures.UserCount](runtime.FilesSource(dir, runtime.FilesOptions{})),
		func(u *fixtures.UserCount) typed.Pair[string, fixtures.Counter] {
			return typed.Pair[string, fixtures.Counter]{Key: u.User, State: fixtures.Counter{Count: u.Count}}
		})
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("c", 2))
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	sink := newSink[fixtures.UserCount]()
	w := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks, typed.InitialStateStream(states)), sink)
	if err := runToEnd(t, w, newCheckpoint().opts()...); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range sink.rows() {
		got[r.User] = r.Count
	}
	if fmt.Sprint(got) != fmt.Sprint(map[string]int64{"a": 11, "b": 20, "c": 1}) {
		t.Fatalf("counts %v, want a 11, b 20, c 1", got)
	}
	write("b.json", `{"user":"b","count":5}`+"\n")
	if err := runToEnd(t, w, newCheckpoint().opts()...); err == nil || !strings.Contains(err.Error(), "key b more than once") {
		t.Fatalf("a key twice: err = %v", err)
	}
	write("b.json", `{"user":`+"\n")
	if err := runToEnd(t, w, newCheckpoint().opts()...); err == nil || !strings.Contains(err.Error(), "b.json:1") {
		t.Fatalf("a row that does not decode: err = %v", err)
	}
}

// TestEventTimeStatistics: a batch's report carries Spark's eventTime
// statistics of its rows (min, max, avg, late rows included) and the
// watermark in effect, absent before the first. A row is late by the
// watermark of the batch before.
func TestEventTimeStatistics(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 3)
	m.Add(click("a", 10), click("b", 20), click("a", 60), click("a", 61), click("b", 62), click("c", 63), click("a", 5))
	r := &recorder{}
	q, err := eventTimePipeline(m, 0, r, newSink[fixtures.UserCount]()).Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	p := q.RecentProgress()
	if len(p) != 3 {
		t.Fatalf("%d batches, want 3", len(p))
	}
	f := func(sec int) string { return at(sec).Format(time.RFC3339Nano) }
	first, second, third := p[0].EventTime, p[1].EventTime, p[2].EventTime
	if _, ok := first["watermark"]; ok || first["min"] != f(10) || first["max"] != f(60) || first["avg"] != f(30) {
		t.Fatalf("first batch: %v, want min 10, max 60, avg 30 and no watermark", first)
	}
	if second["watermark"] != f(60) || second["min"] != f(61) || second["max"] != f(63) || second["avg"] != f(62) {
		t.Fatalf("second batch: %v, want watermark 60, min 61, max 63, avg 62", second)
	}
	if third["watermark"] != f(63) || third["min"] != f(5) || third["max"] != f(5) {
		t.Fatalf("third batch: %v, want watermark 63 and the late row's time", third)
	}
	for i, want := range []int64{0, 0, 1} {
		if got := p[i].StateOperators[0].NumRowsDroppedByWatermark; got != want {
			t.Fatalf("late rows in batch %d: %d, want %d", i, got, want)
		}
	}
}

// countingWriter is a ForeachWriter that, as Spark's contract allows,
// skips an epoch it has already handled: it must then never be given more
// rows for that epoch than the first time.
type countingWriter struct {
	handled map[int64]bool
	rows    []string
	failAt  int64 // fail Close (after the rows) of this epoch once
}

func (w *countingWriter) Open(_ int, epoch int64) (bool, error) {
	if w.handled[epoch] {
		return false, nil
	}
	return true, nil
}

func (w *countingWriter) Process(row fixtures.UserCount) error {
	if row.TimedOut {
		w.rows = append(w.rows, row.User+" timed out")
		return nil
	}
	w.rows = append(w.rows, fmt.Sprintf("%s %d", row.User, row.Count))
	return nil
}

func (w *countingWriter) Close(error) {}

// failAfter is w's sink, which fails once at batch id, after w wrote the
// batch and recorded its epoch, as if the process died before the commit.
func failAfter(w *countingWriter, id int64) typed.Sink[fixtures.UserCount] {
	failed := false
	sink := typed.ForeachSink[fixtures.UserCount](w)
	return sinkFunc[fixtures.UserCount](func(ctx context.Context, batch int64, rows []fixtures.UserCount) error {
		if err := sink.Write(ctx, batch, rows); err != nil {
			return err
		}
		w.handled[batch] = true
		if batch == id && !failed {
			failed = true
			return errors.New("crash after the sink")
		}
		return nil
	})
}

// countAndTimeOut is a flatMapGroupsWithState function that writes a
// key's count at each of its rows, and a timed-out row when its timeout
// fires: the key's gap after its last event time with an event-time
// timeout, else its gap after the batch's processing time.
func countAndTimeOut(eventTime bool, gap func(key string) time.Duration) func(string, iter.Seq[fixtures.Click], *typed.GroupState[fixtures.Counter], func(fixtures.UserCount)) error {
	return func(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
		if st.HasTimedOut() {
			emit(fixtures.UserCount{User: key, TimedOut: true})
			st.Remove()
			return nil
		}
		c, _ := st.Get()
		for row := range rows {
			c.Count++
			c.Last = row.Time
		}
		st.Update(c)
		emit(fixtures.UserCount{User: key, Count: c.Count})
		if eventTime {
			return st.SetTimeoutTimestamp(c.Last.Add(gap(key)))
		}
		return st.SetTimeoutDuration(gap(key))
	}
}

// TestReplayReadsTheSameInput: a batch that fails after its sink wrote it
// runs again, after a restart, on exactly the input of its first attempt
// (its planned offsets are in the checkpoint), even though more rows have
// arrived; those go to the next batch. A sink that skips an epoch it has
// handled, as Spark's ForeachWriter contract allows, loses nothing.
func TestReplayReadsTheSameInput(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2))
	ck := newCheckpoint()
	w := &countingWriter{handled: map[int64]bool{}}
	failing := true
	sink := typed.ForeachSink[fixtures.UserCount](w)
	failOnce := sinkFunc[fixtures.UserCount](func(ctx context.Context, id int64, rows []fixtures.UserCount) error {
		if err := sink.Write(ctx, id, rows); err != nil {
			return err
		}
		w.handled[id] = true
		if failing {
			failing = false
			return errors.New("crash after the sink")
		}
		return nil
	})
	pipeline := countPipeline(m, failOnce)
	if err := runToEnd(t, pipeline, ck.opts()...); err == nil {
		t.Fatal("the first attempt did not fail")
	}
	m.Add(click("a", 3), click("c", 4)) // arrives before the restart
	if err := runToEnd(t, pipeline, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	// Batch 0 (a, b) was handled by its first attempt and skipped by the
	// second; batch 1 has the rows that came later.
	if got := strings.Join(w.rows, " "); got != "a 1 b 1 a 2 c 1" {
		t.Fatalf("rows written: %q, want a 1 b 1 a 2 c 1", got)
	}
}

// TestOnceAfterAFailedRun: a Once run after one that failed after its
// sink runs the failed batch again as planned, then its own batch over
// what came since.
func TestOnceAfterAFailedRun(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2))
	ck := newCheckpoint()
	w := &countingWriter{handled: map[int64]bool{}}
	pipeline := countPipeline(m, failAfter(w, 0))
	once := func() error {
		q, err := pipeline.Start(context.Background(), ck.opts(runtime.WithTrigger(runtime.Once()))...)
		if err != nil {
			return err
		}
		return q.AwaitTermination()
	}
	if err := once(); err == nil {
		t.Fatal("the first run did not fail")
	}
	m.Add(click("a", 3), click("c", 4))
	if err := once(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.rows, ", "); got != "a 1, b 1, a 2, c 1" {
		t.Fatalf("rows written: %q, want a 1, b 1, a 2, c 1", got)
	}
	if err := once(); err != nil { // nothing new: no batch
		t.Fatal(err)
	}
	if len(w.handled) != 2 {
		t.Fatalf("batches written: %v, want 0 and 1", w.handled)
	}
}

// TestReplayOfABatchWithoutData: a batch without data (a timer fires as
// the watermark moves) that fails after its sink wrote it runs again,
// after a restart, without data, though rows have arrived since: they go
// to the next batch. A sink that skips an epoch it has handled loses
// none of their rows.
func TestReplayOfABatchWithoutData(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 10), click("b", 20))
	ck := newCheckpoint()
	w := &countingWriter{handled: map[int64]bool{}}
	s := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 0)
	byUser := typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
	f := countAndTimeOut(true, func(string) time.Duration { return 5 * time.Second })
	pipeline := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Append, typed.EventTimeTimeout, f), failAfter(w, 1))
	// Batch 0 writes a 1 and b 1 and moves the watermark to 20; batch 1,
	// without data, times a out (15) and fails after its sink.
	if err := runToEnd(t, pipeline, ck.opts()...); err == nil {
		t.Fatal("batch 1 did not fail")
	}
	m.Add(click("c", 100)) // arrives before the restart
	if err := runToEnd(t, pipeline, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	// Batch 1 runs again as it ran (skipped); batch 2 reads c; batch 3,
	// at watermark 100, times b out (25); c's timer (105) is not due.
	if got := strings.Join(w.rows, ", "); got != "a 1, b 1, a timed out, c 1, b timed out" {
		t.Fatalf("rows written: %q, want a 1, b 1, a timed out, c 1, b timed out", got)
	}
}

// TestReplayAtItsProcessingTime: a batch run again after a failure runs
// at the processing time of its first attempt, though the clock has moved
// on: it times out the keys its first attempt did, and a key whose
// timeout passed since times out in the next batch, which a sink that
// skips an epoch it has handled then writes.
func TestReplayAtItsProcessingTime(t *testing.T) {
	clock := &fakeClock{now: at(0)}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2))
	ck := newCheckpoint()
	w := &countingWriter{handled: map[int64]bool{}}
	gaps := map[string]time.Duration{"a": 10 * time.Second, "b": 20 * time.Second}
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	f := countAndTimeOut(false, func(key string) time.Duration { return gaps[key] })
	pipeline := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Append, typed.ProcessingTimeTimeout, f), failAfter(w, 1))
	// Batch 0, at 0 s: a 1 and b 1, timing out at 10 and 20 s.
	if err := runToEnd(t, pipeline, ck.opts(runtime.Clock(clock.Now))...); err != nil {
		t.Fatal(err)
	}
	// Batch 1, at 11 s, without data: a times out; it fails after its
	// sink.
	clock.Advance(11 * time.Second)
	if err := runToEnd(t, pipeline, ck.opts(runtime.Clock(clock.Now))...); err == nil {
		t.Fatal("batch 1 did not fail")
	}
	// The checkpoint tells what runs again, and when.
	c, _ := openCheckpoint(t, ck.fs)
	sum, err := c.Summary()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if p := sum.Planned; p == nil || p.BatchID != 1 || !p.Now.Equal(at(11)) {
		t.Fatalf("the checkpoint's planned batch: %+v, want batch 1 at 11 s", p)
	}
	// At 25 s, batch 1 runs again at 11 s (skipped), and batch 2 times b
	// out.
	clock.Advance(14 * time.Second)
	if err := runToEnd(t, pipeline, ck.opts(runtime.Clock(clock.Now))...); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(w.rows, ", "); got != "a 1, b 1, a timed out, b timed out" {
		t.Fatalf("rows written: %q, want a 1, b 1, a timed out, b timed out", got)
	}
}

// sinkFunc is a Sink made of a function.
type sinkFunc[T any] func(ctx context.Context, id int64, rows []T) error

func (f sinkFunc[T]) Write(ctx context.Context, id int64, rows []T) error { return f(ctx, id, rows) }

// TestFromFunc: a decoder that sees whole records makes the rows; what it
// refuses goes to the dead letters with its position.
func TestFromFunc(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.json"), []byte("a\nb\n!\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	rows := typed.FromFunc(src, func(r runtime.Record) (fixtures.Click, error) {
		if string(r.Data) == "!" {
			return fixtures.Click{}, errors.New("not a user")
		}
		return fixtures.Click{User: string(r.Data), Page: r.Position}, nil
	})
	sink := newSink[fixtures.UserCount]()
	dead := runtime.DeadLetterMemory()
	if err := runToEnd(t, countFrom(rows, sink), newCheckpoint().opts(runtime.DeadLetters(dead))...); err != nil {
		t.Fatal(err)
	}
	got := latest(sink.rows())
	if got["a"].Count != 2 || got["b"].Count != 1 || len(got) != 2 {
		t.Fatalf("counts %v", got)
	}
	if l := dead.Letters(); len(l) != 1 || l[0].Position != "a.json:3" || l[0].Error != "not a user" {
		t.Fatalf("dead letters %+v", l)
	}
}

// TestParseOutputMode: each mode reads back from its name in any case,
// and an unknown name is refused, naming the choices.
func TestParseOutputMode(t *testing.T) {
	for _, m := range []typed.OutputMode{typed.Append, typed.Update, typed.Complete} {
		for _, s := range []string{m.String(), strings.ToLower(m.String()), strings.ToUpper(m.String())} {
			var got typed.OutputMode
			if err := got.UnmarshalText([]byte(s)); err != nil || got != m {
				t.Errorf("%q: %v, %v; want %v", s, got, err, m)
			}
		}
	}
	if _, err := typed.ParseOutputMode("replace"); err == nil || !strings.Contains(err.Error(), "append, update or complete") {
		t.Errorf("an unknown mode: %v", err)
	}
}

// stopAtFirstBatch is a listener that stops its query from
// OnQueryProgress, and awaits it there and from OnQueryTerminated.
type stopAtFirstBatch struct {
	q                              *runtime.Query
	stopErr, awaitErr, lateAwait   error
	stopped, terminated, lateStops int
}

func (l *stopAtFirstBatch) OnQueryStarted(e runtime.QueryStarted) { l.q = e.Query }

func (l *stopAtFirstBatch) OnQueryProgress(runtime.QueryProgress) {
	l.stopped++
	l.stopErr = l.q.Stop()
	l.awaitErr = l.q.AwaitTermination()
}

func (l *stopAtFirstBatch) OnQueryTerminated(runtime.QueryTerminated) {
	l.terminated++
	if l.q.Stop() == nil {
		l.lateStops++
	}
	l.lateAwait = l.q.AwaitTermination()
}

// TestListenerStopsItsQuery: a listener that calls Stop from
// OnQueryProgress, on the query's own goroutine, stops the query once it
// returns (Stop used to wait for the query, which waited for the
// listener: the query never ended). AwaitTermination there says it would
// wait for itself; from OnQueryTerminated both return at once.
func TestListenerStopsItsQuery(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2))
	l := &stopAtFirstBatch{}
	q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(), newCheckpoint().opts(runtime.Listener(l))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatalf("the query stopped by its listener ended with %v", err)
	}
	if l.stopped != 1 || l.stopErr != nil || !errors.Is(l.awaitErr, runtime.ErrAwaitedByQuery) {
		t.Errorf("in OnQueryProgress: %d reports, Stop gave %v, AwaitTermination %v; want one report, nil and ErrAwaitedByQuery", l.stopped, l.stopErr, l.awaitErr)
	}
	if l.terminated != 1 || l.lateStops != 1 || l.lateAwait != nil {
		t.Errorf("in OnQueryTerminated: called %d times, Stop nil %d times, AwaitTermination %v; want once, once and nil", l.terminated, l.lateStops, l.lateAwait)
	}
}

// rereadSource serves n records, its offsets a count; read reports record
// i, which a test changes between runs: a source whose read of the same
// offsets failed the first time and not the next.
type rereadSource struct {
	n    int
	read func(i int) runtime.Record
}

func (s *rereadSource) Name() string { return "reread" }

func (s *rereadSource) Available(context.Context) (json.RawMessage, error) {
	return json.Marshal(s.n)
}

func (s *rereadSource) Next(_ context.Context, _, upTo json.RawMessage, _ runtime.ReadLimit) (json.RawMessage, error) {
	return upTo, nil
}

func (s *rereadSource) Read(_ context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	var from, to int
	if start != nil {
		if err := json.Unmarshal(start, &from); err != nil {
			return err
		}
	}
	if err := json.Unmarshal(end, &to); err != nil {
		return err
	}
	for i := from; i < to; i++ {
		if err := fn(s.read(i)); err != nil {
			return err
		}
	}
	return nil
}

// lettersThenFail keeps a batch's dead letters, then fails the batch once.
type lettersThenFail struct {
	*runtime.MemoryDeadLetters
	failed bool
}

func (l *lettersThenFail) WriteDeadLetters(ctx context.Context, id int64, letters []runtime.DeadLetter) error {
	if err := l.MemoryDeadLetters.WriteDeadLetters(ctx, id, letters); err != nil {
		return err
	}
	if !l.failed {
		l.failed = true
		return errors.New("the batch fails after its dead letters were written")
	}
	return nil
}

// TestDeadLettersOfAFailedAttempt: a batch whose first attempt sent a
// record to the dead letters (a read that failed), then failed, is run
// again at the next start, and that read succeeds: the dead letters of
// the first attempt are replaced by the second's, none, and the record
// is in the output once.
func TestDeadLettersOfAFailedAttempt(t *testing.T) {
	clicks := []fixtures.Click{click("a", 1), click("b", 2), click("c", 3)}
	unreadable := true
	src := &rereadSource{n: len(clicks), read: func(i int) runtime.Record {
		if i == 1 && unreadable {
			return runtime.Record{Partition: "0", Position: "1", Err: errors.New("permission denied")}
		}
		data, err := clicks[i].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return runtime.Record{Partition: "0", Position: fmt.Sprint(i), Data: data}
	}}
	letters := &lettersThenFail{MemoryDeadLetters: runtime.DeadLetterMemory()}
	sink := newSink[fixtures.Click]()
	w := typed.WriteTo(typed.From[fixtures.Click](src), sink)
	ck := newCheckpoint()
	run := func() error {
		q, err := w.Start(context.Background(), ck.opts(runtime.DeadLetters(letters), runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			t.Fatal(err)
		}
		return q.AwaitTermination()
	}
	if err := run(); err == nil {
		t.Fatal("the first attempt did not fail")
	}
	if got := letters.Letters(); len(got) != 1 {
		t.Fatalf("the first attempt's dead letters: %v, want the unreadable record", got)
	}
	unreadable = false
	if err := run(); err != nil {
		t.Fatal(err)
	}
	if got := letters.Letters(); len(got) != 0 {
		t.Errorf("after the second attempt, the dead letters hold %v, want none: the record was read", got)
	}
	if got := sink.rows(); !slices.Equal(got, clicks) {
		t.Errorf("output %v, want %v", got, clicks)
	}
}

// idleListener records the instants of a query's idle events, as
// seconds after start, and its batches' ids.
type idleListener struct {
	start   time.Time
	mu      sync.Mutex
	idle    []int
	batches []int64
}

func (l *idleListener) OnQueryIdle(e runtime.QueryIdle) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.idle = append(l.idle, int(e.Time.Sub(l.start)/time.Second))
}

func (l *idleListener) OnQueryProgress(p runtime.QueryProgress) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.batches = append(l.batches, p.BatchID)
}

// TestQueryIdleEvents: a query that finds nothing to do tells its
// listeners so at the first such trigger, then once an interval while
// nothing comes, the interval counted again from a batch (Spark 3.5's
// QueryIdleEvent, at spark.sql.streaming.noDataProgressEventInterval).
func TestQueryIdleEvents(t *testing.T) {
	for _, tc := range []struct {
		interval time.Duration
		want     string
	}{
		{0, "[0 10 23]"}, // the default, 10 s
		{5 * time.Second, "[0 5 10 18 23]"},
	} {
		t.Run(fmt.Sprint(tc.interval), func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			clock := runtime.NewManualClock(at(0))
			l := &idleListener{start: at(0)}
			opts := []runtime.Option{runtime.WithManualClock(clock), runtime.WithTrigger(runtime.ProcessingTime(time.Second)), runtime.Listener(l)}
			if tc.interval > 0 {
				opts = append(opts, runtime.IdleEventInterval(tc.interval))
			}
			q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Stop()
			ctx := context.Background()
			clock.WaitUntilWaiting(ctx)
			for s := 1; s <= 25; s++ {
				if s == 13 {
					m.Add(click("a", s))
				}
				clock.Advance(time.Second)
				clock.WaitUntilWaiting(ctx)
			}
			q.Stop()
			l.mu.Lock()
			defer l.mu.Unlock()
			if got := fmt.Sprint(l.idle); got != tc.want || fmt.Sprint(l.batches) != "[0]" {
				t.Fatalf("idle at %s s, batches %v; want idle at %s s, batch 0 at 13 s", got, l.batches, tc.want)
			}
		})
	}
	if _, err := countPipeline(typed.NewMemoryStream[fixtures.Click]("clicks", 0), newSink[fixtures.UserCount]()).Start(context.Background(),
		runtime.IdleEventInterval(0)); err == nil || !strings.Contains(err.Error(), "IdleEventInterval 0s is not positive") {
		t.Fatalf("IdleEventInterval(0): %v", err)
	}
}

// TestCleanSourceKeepsWhatDeadLettersLack: CleanSource deletes the files
// read once their batch commits, but leaves a file a record of which is a
// dead letter that does not hold it whole: a damaged compressed file
// (its letter holds no bytes), a line past MaxLineBytes (its letter, a
// prefix), and, without a dead-letter sink (the letters logged without
// their bytes), a line that does not decode. With a sink, that line's
// letter holds it, and its file goes.
func TestCleanSourceKeepsWhatDeadLettersLack(t *testing.T) {
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for i := range 50 {
		fmt.Fprintf(zw, `{"user":"z%d","time":"2024-05-01T10:00:00Z","page":"p"}`+"\n", i)
	}
	zw.Close()
	good := `{"user":"a","time":"2024-05-01T10:00:00Z","page":"p"}` + "\n"
	files := map[string]string{
		"good.json":        good,
		"damaged.jsonl.gz": gz.String()[:gz.Len()-1],
		"long.json":        good + `{"user":"` + strings.Repeat("x", 300) + `","time":"2024-05-01T10:00:00Z","page":"p"}` + "\n",
		"undecodable.json": good + `{"user":"b","time":"2024-05-01T10:00:00Z","page":7}` + "\n",
	}
	for _, withSink := range []bool{true, false} {
		t.Run(fmt.Sprintf("sink=%v", withSink), func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			src := runtime.FilesSource(dir, runtime.FilesOptions{CleanSource: runtime.CleanDelete, MaxLineBytes: 200})
			opts := newCheckpoint().opts()
			dead := runtime.DeadLetterMemory()
			if withSink {
				opts = append(opts, runtime.DeadLetters(dead))
			}
			sink := newSink[fixtures.UserCount]()
			if err := runToEnd(t, countFrom(typed.From[fixtures.Click](src), sink), opts...); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, e := range entries {
				left = append(left, e.Name())
			}
			want := []string{"damaged.jsonl.gz", "long.json"}
			if !withSink {
				want = append(want, "undecodable.json")
			}
			if !slices.Equal(left, want) {
				t.Fatalf("the directory holds %q after the run, want %q", left, want)
			}
			if got := latest(sink.rows()); got["a"].Count != 3 {
				t.Fatalf("counts %v, want a counted 3 times", got)
			}
			if withSink && len(dead.Letters()) != 3 {
				t.Fatalf("dead letters %+v, want 3", dead.Letters())
			}
		})
	}
}

// TestInputRowsPerSecondCountsIdleTriggers: a batch's inputRowsPerSecond
// is its rows over the time since the trigger before it started, with
// data or not, as Spark's: with ProcessingTime(100ms), 16 rows after two
// seconds of triggers that found nothing are 160 rows a second (not 16
// over two seconds), and the first batch of a start has 0.
func TestInputRowsPerSecondCountsIdleTriggers(t *testing.T) {
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	add := func(n int) {
		for i := range n {
			m.Add(fixtures.Click{User: fmt.Sprint("u", i), Time: base})
		}
	}
	add(4)
	clock := runtime.NewManualClock(base)
	q, err := typed.WriteTo(typed.FromMemory(m), typed.NewMemorySink[fixtures.Click]()).Start(t.Context(),
		runtime.WithManualClock(clock), runtime.WithTrigger(runtime.ProcessingTime(100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	step := func() {
		t.Helper()
		clock.Advance(100 * time.Millisecond)
		if err := clock.WaitUntilWaiting(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if err := clock.WaitUntilWaiting(t.Context()); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		step()
	}
	add(16)
	step()
	q.Stop()
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	reports := q.RecentProgress()
	if len(reports) != 2 || reports[0].NumInputRows != 4 || reports[1].NumInputRows != 16 {
		t.Fatalf("batches of %v rows, want 4 then 16", rowsOf(reports))
	}
	for i, want := range []float64{0, 160} {
		p := reports[i]
		if p.InputRowsPerSecond != want || p.Sources[0].InputRowsPerSecond != want {
			t.Errorf("batch %d: inputRowsPerSecond %v (its source's %v), want %v", p.BatchID, p.InputRowsPerSecond, p.Sources[0].InputRowsPerSecond, want)
		}
	}
}

// rowsOf is the input rows of each report.
func rowsOf(reports []runtime.QueryProgress) []int64 {
	var rows []int64
	for _, p := range reports {
		rows = append(rows, p.NumInputRows)
	}
	return rows
}
