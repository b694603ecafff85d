package typed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// events records what a listener is told.
type events struct {
	mu         sync.Mutex
	started    int
	progress   []runtime.QueryProgress
	terminated []error
}

func (e *events) OnQueryStarted(runtime.QueryStarted) { e.mu.Lock(); e.started++; e.mu.Unlock() }
func (e *events) OnQueryProgress(p runtime.QueryProgress) {
	e.mu.Lock()
	e.progress = append(e.progress, p)
	e.mu.Unlock()
}
func (e *events) OnQueryTerminated(t runtime.QueryTerminated) {
	e.mu.Lock()
	e.terminated = append(e.terminated, t.Err)
	e.mu.Unlock()
}

// TestProgressReports checks the progress of every batch against the
// input: rows read, state rows total and updated, batch ids in order;
// and its time as Spark reports it: the start in UTC, batchDuration the
// whole batch's (triggerExecution).
func TestProgressReports(t *testing.T) {
	in := clicks(100, 3)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 30)
	m.Add(in...)
	ev := &events{}
	q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(), newCheckpoint().opts(runtime.Listener(ev), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	if ev.started != 1 || len(ev.terminated) != 1 || ev.terminated[0] != nil {
		t.Fatalf("listener: started %d, terminated %v", ev.started, ev.terminated)
	}
	if got := q.RecentProgress(); len(got) != len(ev.progress) || len(got) != 4 {
		t.Fatalf("%d reports, listener saw %d, want 4 batches of at most 30 rows", len(got), len(ev.progress))
	}
	seen := map[string]bool{}
	for i, p := range ev.progress {
		batch := in[i*30 : min((i+1)*30, len(in))]
		keys := map[string]bool{}
		for _, c := range batch {
			keys[c.User] = true
			seen[c.User] = true
		}
		op := p.StateOperators[0]
		if p.BatchID != int64(i) || p.NumInputRows != int64(len(batch)) || op.NumRowsUpdated != int64(len(keys)) || op.NumRowsTotal != int64(len(seen)) ||
			p.Sink.NumOutputRows != int64(len(keys)) || p.Sources[0].EndOffset != strconv.Itoa(i*30+len(batch)) {
			t.Fatalf("batch %d report: %+v", i, p)
		}
		if p.Timestamp.Location() != time.UTC || p.BatchDuration != p.DurationMs[runtime.DurationTriggerExecution] {
			t.Fatalf("batch %d: timestamp %v, batchDuration %d, triggerExecution %d", i, p.Timestamp, p.BatchDuration, p.DurationMs[runtime.DurationTriggerExecution])
		}
	}
	if s := q.Status(); s.Message != "Stopped" || s.IsTriggerActive {
		t.Fatalf("status after the end: %+v", s)
	}
}

// TestCancelStopsCleanly: cancelling the context ends a running query
// with no error and no goroutine left behind.
func TestCancelStopsCleanly(t *testing.T) {
	before := goruntime.NumGoroutine()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	ctx, cancel := context.WithCancel(context.Background())
	ev := &events{}
	q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(ctx, newCheckpoint().opts(runtime.Listener(ev), runtime.SyncInterval(time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	m.Add(clicks(10, 4)...)
	waitFor(t, "a batch", func() bool { _, ok := q.LastProgress(); return ok })
	if s := q.Status(); s.Message == "Stopped" {
		t.Fatalf("status while running: %+v", s)
	}
	cancel()
	if err := q.AwaitTermination(); err != nil {
		t.Fatalf("a cancelled query ended with %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := goruntime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines after the query, %d before:\n%s", n, before, buf[:goruntime.Stack(buf, true)])
	}
	if len(ev.terminated) != 1 || ev.terminated[0] != nil {
		t.Fatalf("terminated: %v", ev.terminated)
	}
}

// TestFailureIsReported: a query that fails ends with the error, tells
// its listeners, and reports it from Err.
func TestFailureIsReported(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(clicks(5, 5)...)
	sink := newSink[fixtures.UserCount]()
	boom := errors.New("disk full")
	sink.fail = func(int64) error { return boom }
	ev := &events{}
	q, err := countPipeline(m, sink).Start(context.Background(), newCheckpoint().opts(runtime.Listener(ev))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); !errors.Is(err, boom) || !errors.Is(q.Err(), boom) {
		t.Fatalf("AwaitTermination = %v, Err = %v", err, q.Err())
	}
	if len(ev.terminated) != 1 || !errors.Is(ev.terminated[0], boom) {
		t.Fatalf("terminated: %v", ev.terminated)
	}
}

// partitioned is a source with two partitions that a test fills.
type partitioned struct {
	mu   sync.Mutex
	rows [2][]fixtures.Click
}

func (p *partitioned) add(part int, c fixtures.Click) {
	p.mu.Lock()
	p.rows[part] = append(p.rows[part], c)
	p.mu.Unlock()
}

func (p *partitioned) Name() string { return "partitioned" }

func (p *partitioned) Available(context.Context) (json.RawMessage, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return json.Marshal([2]int{len(p.rows[0]), len(p.rows[1])})
}

func (p *partitioned) Next(_ context.Context, committed, upTo json.RawMessage, _ runtime.ReadLimit) (json.RawMessage, error) {
	if string(committed) == string(upTo) {
		return committed, nil
	}
	return upTo, nil
}

func (p *partitioned) Read(_ context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	var from, to [2]int
	if start != nil {
		json.Unmarshal(start, &from)
	}
	json.Unmarshal(end, &to)
	for part := range 2 {
		p.mu.Lock()
		rows := p.rows[part][from[part]:to[part]]
		p.mu.Unlock()
		for i, c := range rows {
			b, _ := c.MarshalJSON()
			if err := fn(runtime.Record{Partition: fmt.Sprint("p", part), Data: b, Position: fmt.Sprint(part, ":", from[part]+i)}); err != nil {
				return err
			}
		}
	}
	return nil
}

// TestWatermarkPerPartition: an input's watermark is the minimum over its
// source's partitions, and an idle partition stops holding it back after
// the idle timeout; with PartitionWatermarkPolicy(MaxWatermark), Spark's
// rule, it is the maximum.
func TestWatermarkPerPartition(t *testing.T) {
	for _, tc := range []struct {
		idle   time.Duration
		policy runtime.WatermarkPolicy
	}{{0, runtime.MinWatermark}, {time.Minute, runtime.MinWatermark}, {0, runtime.MaxWatermark}} {
		idle := tc.idle
		t.Run(fmt.Sprint("idle timeout ", idle, " ", tc.policy), func(t *testing.T) {
			src := &partitioned{}
			clock := runtime.NewManualClock(at(0))
			r := &recorder{}
			s := typed.WithWatermark(typed.From[fixtures.Click](src), func(c *fixtures.Click) time.Time { return c.Time }, 0)
			w := typed.WriteTo(typed.FlatMapGroupsWithState(typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User }), typed.Append, typed.NoTimeout, r.fn), newSink[fixtures.UserCount]())
			ck := newCheckpoint()
			q, err := w.Start(context.Background(), ck.opts(runtime.WithManualClock(clock), runtime.IdleTimeout(idle),
				runtime.PartitionWatermarkPolicy(tc.policy), runtime.WithTrigger(runtime.ProcessingTime(time.Minute)))...)
			if err != nil {
				t.Fatal(err)
			}
			defer q.Stop()
			// step adds rows, lets the next trigger's batch run and returns
			// its report.
			step := func(part int, c fixtures.Click) runtime.QueryProgress {
				t.Helper()
				src.add(part, c)
				clock.Advance(time.Minute)
				if err := clock.WaitUntilWaiting(t.Context()); err != nil {
					t.Fatal(err)
				}
				p, _ := q.LastProgress()
				return p
			}
			if err := clock.WaitUntilWaiting(t.Context()); err != nil {
				t.Fatal(err)
			}
			src.add(1, click("b", 10))
			step(0, click("a", 100))
			clock.Advance(time.Minute)
			if err := clock.WaitUntilWaiting(t.Context()); err != nil {
				t.Fatal(err)
			}
			step(0, click("a", 200)) // p1 has had no data for 2 minutes
			p := step(0, click("a", 300))
			want := at(10) // the minimum over both partitions
			if idle > 0 || tc.policy == runtime.MaxWatermark {
				want = at(200) // p1 is idle, or the maximum: p0's
			}
			if got := p.EventTime["watermark"]; got != want.Format(time.RFC3339Nano) {
				t.Fatalf("watermark %s, want %s", got, want.Format(time.RFC3339Nano))
			}
		})
	}
}

// TestWatermarkPerPartitionAcrossRestart: under the default partition
// policy a partition behind the others holds its input's watermark
// across a restart as it does without one, so its next rows are not
// taken for late ones; under PartitionWatermarkPolicy(MaxWatermark),
// Spark's rule, the marks start again from the rows after the restart,
// as Spark's do.
func TestWatermarkPerPartitionAcrossRestart(t *testing.T) {
	for _, policy := range []runtime.WatermarkPolicy{runtime.MinWatermark, runtime.MaxWatermark} {
		for _, restart := range []bool{false, true} {
			t.Run(fmt.Sprint(policy, " restart=", restart), func(t *testing.T) {
				src := &partitioned{}
				s := typed.WithWatermark(typed.From[fixtures.Click](src), func(c *fixtures.Click) time.Time { return c.Time }, 0)
				sink := newSink[fixtures.Click]()
				w := typed.WriteTo(typed.DropDuplicatesWithinWatermark(s, func(c *fixtures.Click) string { return c.User + c.Time.String() }), sink)
				ck := newCheckpoint()
				clock := runtime.NewManualClock(at(0))
				q := startLive(t, w, clock, ck.opts(runtime.PartitionWatermarkPolicy(policy))...)
				step := func(part int, c fixtures.Click) runtime.QueryProgress {
					t.Helper()
					src.add(part, c)
					return q.trigger()
				}
				src.add(1, click("b", 10))
				step(0, click("a", 100))
				if restart {
					q.stop()
					q = startLive(t, w, clock, ck.opts(runtime.PartitionWatermarkPolicy(policy))...)
				}
				step(0, click("a", 120))
				p := step(1, click("b", 20))
				q.stop()
				// The loop: the least of the partitions' largest times
				// before the batch (Min), or the greatest (Max); a row at
				// or before it is late. Max's restart counts only p0's
				// 120 s, the one row after it before the batch.
				wantMark, wantLate := at(10), false
				if policy == runtime.MaxWatermark {
					wantMark, wantLate = at(120), true
				}
				if got := watermarkOf(t, p); !got.Equal(wantMark) {
					t.Errorf("the watermark of the batch of b's row at 20 s is %v, want %v", got, wantMark)
				}
				var wrote bool
				for _, c := range sink.rows() {
					wrote = wrote || c.User == "b" && c.Time.Equal(at(20))
				}
				if wrote == wantLate {
					t.Errorf("b's row at 20 s written: %v, want %v", wrote, !wantLate)
				}
			})
		}
	}
}

// TestRecentProgressUpdates: a query keeps the number of progress
// reports RecentProgressUpdates says, the latest, as Spark's
// numRecentProgressUpdates; none is refused.
func TestRecentProgressUpdates(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 10)
	m.Add(clicks(40, 5)...)
	q, err := countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(),
		newCheckpoint().opts(runtime.RecentProgressUpdates(2), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	if p := q.RecentProgress(); len(p) != 2 || p[0].BatchID != 2 || p[1].BatchID != 3 {
		t.Fatalf("kept %d reports, want batches 2 and 3: %+v", len(p), p)
	}
	_, err = countPipeline(m, newSink[fixtures.UserCount]()).Start(context.Background(), newCheckpoint().opts(runtime.RecentProgressUpdates(0))...)
	if err == nil || !strings.Contains(err.Error(), "RecentProgressUpdates 0 is not positive") {
		t.Fatalf("RecentProgressUpdates(0): %v", err)
	}
}
