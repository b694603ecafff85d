package typed_test

import (
	"context"
	"iter"
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Spark's rules for the query's watermark, replayed from its
// EventTimeWatermarkSuite: it starts at the epoch, only rises, an input
// without data yet counts as the epoch, several inputs combine by the
// multipleWatermarkPolicy, and a restart keeps only the query's
// watermark.

// seconds is an event time in seconds after the Unix epoch, as Spark's
// timestamp_seconds(value).
func seconds(s int) time.Time { return time.Unix(int64(s), 0).UTC() }

// liveQuery runs a query on a manual clock with a trigger every second,
// so that each step is one trigger, as Spark's processAllAvailable.
type liveQuery struct {
	t     *testing.T
	q     *typed.Query
	clock *runtime.ManualClock
}

func startLive[T any](t *testing.T, w *typed.Writer[T], clock *runtime.ManualClock, opts ...runtime.Option) *liveQuery {
	t.Helper()
	q, err := w.Start(context.Background(), append(opts, runtime.WithManualClock(clock), runtime.WithTrigger(runtime.ProcessingTime(time.Second)))...)
	if err != nil {
		t.Fatal(err)
	}
	l := &liveQuery{t: t, q: q, clock: clock}
	l.wait()
	return l
}

func (l *liveQuery) wait() {
	l.t.Helper()
	if err := l.clock.WaitUntilWaiting(l.t.Context()); err != nil {
		l.t.Fatalf("the query did not settle: %v (err %v)", err, l.q.Err())
	}
	if err := l.q.Err(); err != nil {
		l.t.Fatal(err)
	}
}

// trigger runs the next trigger and returns the last report of the query.
func (l *liveQuery) trigger() runtime.QueryProgress {
	l.t.Helper()
	l.clock.Advance(time.Second)
	l.wait()
	return l.last()
}

func (l *liveQuery) last() runtime.QueryProgress {
	l.t.Helper()
	p, ok := l.q.LastProgress()
	if !ok {
		l.t.Fatalf("no batch has run (status %+v, err %v)", l.q.Status(), l.q.Err())
	}
	return p
}

func (l *liveQuery) stop() {
	l.t.Helper()
	if err := l.q.Stop(); err != nil {
		l.t.Fatal(err)
	}
}

func watermarkOf(t *testing.T, p runtime.QueryProgress) time.Time {
	t.Helper()
	w, ok := p.EventTime["watermark"]
	if !ok {
		t.Fatalf("batch %d reports no watermark", p.BatchID)
	}
	at, err := time.Parse(time.RFC3339Nano, w)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

type valueRow struct {
	V int
	T time.Time
}

func valueRows(vs ...int) []valueRow {
	rows := make([]valueRow, len(vs))
	for i, v := range vs {
		rows[i] = valueRow{V: v, T: seconds(v)}
	}
	return rows
}

// twoStreamsSummed is the union of two streams, watermarked with the
// delays given, summed in Complete mode.
func twoStreamsSummed(firstDelay, secondDelay time.Duration) (first, second *typed.MemoryStream[valueRow], w *typed.Writer[float64]) {
	first = typed.NewMemoryStream[valueRow]("first", 0)
	second = typed.NewMemoryStream[valueRow]("second", 0)
	eventTime := func(r *valueRow) time.Time { return r.T }
	union := typed.Union(
		typed.WithWatermark(typed.FromMemory(first), eventTime, firstDelay),
		typed.WithWatermark(typed.FromMemory(second), eventTime, secondDelay))
	sum := typed.AggregateByKey(typed.GroupByKey(union, func(*valueRow) int { return 0 }),
		typed.Sum(func(r *valueRow) float64 { return float64(r.V) }),
		func(_ int, s float64) float64 { return s })
	return first, second, typed.WriteTo(sum, newSink[float64]()).OutputMode(typed.Complete)
}

// TestSparkWatermarkWithTwoStreams is Spark's "watermark with 2 streams":
// the union of a stream with a 10 s delay and one with 5 s, summed in
// Complete mode. After each step a row at 0 s on the first stream runs one
// more batch, whose watermark is the one the step left.
func TestSparkWatermarkWithTwoStreams(t *testing.T) {
	first, second, w := twoStreamsSummed(10*time.Second, 5*time.Second)
	ck := newCheckpoint()
	clock := runtime.NewManualClock(seconds(1_000_000))
	q := startLive(t, w, clock, ck.opts()...)
	afterData := func(firstData, secondData []int) time.Time {
		t.Helper()
		first.Add(valueRows(firstData...)...)
		second.Add(valueRows(secondData...)...)
		q.clock.Advance(time.Second) // no batch when there is no data
		q.wait()
		first.Add(valueRows(0)...)
		return watermarkOf(t, q.trigger())
	}
	steps := []struct {
		first, second []int
		want          int
		restart       bool
	}{
		{first: []int{11}, want: 0}, // the second stream has no data: it counts as 0
		{second: []int{6}, want: 1},
		{second: []int{8}, want: 1},
		{first: []int{21}, want: 3},
		{second: []int{17, 28, 39}, want: 11},
		{first: []int{31}, want: 21},
		{first: []int{41}, want: 31},
		{first: []int{51}, want: 34},
		{first: []int{100}, second: []int{100}, want: 90},
		{first: []int{120}, second: []int{110}, want: 105},
		{first: []int{130}, second: []int{125}, want: 120},
		{first: []int{100}, second: []int{100}, want: 120}, // it does not go back
		{first: []int{140}, second: []int{100}, want: 120},
		{first: []int{100}, second: []int{135}, want: 130},
		{first: []int{200}, second: []int{190}, want: 185},
		// A restart keeps the query's watermark, not each stream's: the
		// first stream was past 185 before it, and is not counted so
		// until its rows pass it again.
		{restart: true, want: 185},
		{second: []int{200}, want: 185},
		{first: []int{200}, want: 190},
	}
	for i, s := range steps {
		if s.restart {
			q.stop()
			q = startLive(t, w, clock, ck.opts()...)
		}
		if got := afterData(s.first, s.second); !got.Equal(seconds(s.want)) {
			t.Fatalf("step %d (first %v, second %v): watermark %v, want %v", i+1, s.first, s.second, got, seconds(s.want))
		}
	}
	q.stop()
}

// TestSparkMultipleWatermarkPolicy is Spark's "MultipleWatermarkPolicy:
// max" and "min": two inputs with 10 s and 15 s delays, and a stop and
// start between; a row at 1 s runs the batch whose watermark is checked.
func TestSparkMultipleWatermarkPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy               runtime.WatermarkPolicy
		first, again, oneHas int
		// oneHasInput is the input the last step adds to.
		oneHasInput int
	}{
		{policy: runtime.MaxWatermark, first: 15, again: 115, oneHas: 140, oneHasInput: 1},
		{policy: runtime.MinWatermark, first: 10, again: 110, oneHas: 110, oneHasInput: 2},
	} {
		t.Run(tc.policy.String(), func(t *testing.T) {
			in1 := typed.NewMemoryStream[valueRow]("input1", 0)
			in2 := typed.NewMemoryStream[valueRow]("input2", 0)
			eventTime := func(r *valueRow) time.Time { return r.T }
			union := typed.Union(
				typed.WithWatermark(typed.FromMemory(in1), eventTime, 10*time.Second),
				typed.WithWatermark(typed.FromMemory(in2), eventTime, 15*time.Second))
			sink := newSink[valueRow]()
			w := typed.WriteTo(union, sink)
			ck := newCheckpoint()
			clock := runtime.NewManualClock(seconds(1_000_000))
			opts := ck.opts(runtime.MultipleWatermarkPolicy(tc.policy))
			q := startLive(t, w, clock, opts...)
			check := func(in *typed.MemoryStream[valueRow], want int) {
				t.Helper()
				in.Add(valueRows(1)...)
				if got := watermarkOf(t, q.trigger()); !got.Equal(seconds(want)) {
					t.Fatalf("watermark %v, want %v", got, seconds(want))
				}
			}
			in1.Add(valueRows(20)...)
			in2.Add(valueRows(30)...)
			q.trigger()
			check(in1, tc.first)
			q.stop()
			q = startLive(t, w, clock, opts...)
			check(in1, tc.first) // recovered
			in1.Add(valueRows(120)...)
			in2.Add(valueRows(130)...)
			q.trigger()
			check(in1, tc.again)
			in := in1
			if tc.oneHasInput == 2 {
				in = in2
			}
			in.Add(valueRows(150)...)
			q.trigger()
			check(in, tc.oneHas)
			q.stop()
		})
	}
}

// TestWatermarkStartsAtTheEpoch: a query's watermark is the epoch in its
// first batch (Spark's 0: GroupState's CurrentWatermark says so), and a
// delay longer than the event times seen keeps it there rather than below
// it, so a row at the epoch is late and never reaches an event-time
// timeout function.
func TestWatermarkStartsAtTheEpoch(t *testing.T) {
	m := typed.NewMemoryStream[valueRow]("values", 0)
	s := typed.WithWatermark(typed.FromMemory(m), func(r *valueRow) time.Time { return r.T }, 10*time.Second)
	type seen struct {
		watermark time.Time
		values    []int
	}
	var calls []seen
	f := func(_ int, rows iter.Seq[valueRow], st *typed.GroupState[fixtures.Counter], emit func(int)) error {
		c := seen{watermark: st.CurrentWatermark()}
		for r := range rows {
			c.values = append(c.values, r.V)
			emit(r.V)
		}
		calls = append(calls, c)
		return nil
	}
	out := typed.FlatMapGroupsWithState(typed.GroupByKey(s, func(*valueRow) int { return 0 }), typed.Append, typed.EventTimeTimeout, f)
	w := typed.WriteTo(out, newSink[int]())
	clock := runtime.NewManualClock(seconds(1_000_000))
	q := startLive(t, w, clock, newCheckpoint().opts()...)
	defer q.stop()
	m.Add(valueRows(5)...)
	first := q.trigger()
	m.Add(valueRows(0, 1)...)
	second := q.trigger()
	if len(calls) != 2 {
		t.Fatalf("%d calls, want 2: %+v", len(calls), calls)
	}
	if !calls[0].watermark.Equal(seconds(0)) || !calls[1].watermark.Equal(seconds(0)) {
		t.Fatalf("watermarks seen %v and %v, want the epoch in both (5 s less 10 s is below it)", calls[0].watermark, calls[1].watermark)
	}
	if len(calls[1].values) != 1 || calls[1].values[0] != 1 {
		t.Fatalf("second call got %v, want [1]: the row at 0 s is at the watermark, so late", calls[1].values)
	}
	if n := second.StateOperators[0].NumRowsDroppedByWatermark; n != 1 {
		t.Fatalf("%d rows dropped by the watermark, want 1", n)
	}
	if _, ok := first.EventTime["watermark"]; ok {
		t.Fatalf("the first batch reports a watermark before any event time: %v", first.EventTime)
	}
	if got := watermarkOf(t, second); !got.Equal(seconds(0)) {
		t.Fatalf("second batch's watermark %v, want the epoch", got)
	}
}

// TestWatermarkInMilliseconds: the watermark counts whole milliseconds,
// as Spark's (EventTimeWatermarkExec keeps each row's event time in
// milliseconds): rows at 10.0007 s, 10.0006 s and 10.0005 s, one a batch
// with no delay, put the watermark at 10 s, not at 10.0007 s, so none of
// them is late and each reaches the deduplication; and an event-time
// timeout may be set at one of them, which is not before the watermark.
func TestWatermarkInMilliseconds(t *testing.T) {
	rows := []fixtures.Click{
		{User: "a", Time: at(10).Add(700 * time.Microsecond)},
		{User: "b", Time: at(10).Add(600 * time.Microsecond)},
		{User: "c", Time: at(10).Add(500 * time.Microsecond)},
	}
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	m.Add(rows...)
	sink := newSink[fixtures.Click]()
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 0)
	_, progress, batches := runAvailableNow(t, typed.WriteTo(typed.DropDuplicates(s, func(c *fixtures.Click) string { return c.User }), sink), newCheckpoint(), sink)
	var kept []string
	for _, b := range batches {
		for _, c := range b {
			kept = append(kept, c.User)
		}
	}
	if !slices.Equal(kept, []string{"a", "b", "c"}) {
		t.Fatalf("kept %q, want every row", kept)
	}
	if wm := progress[len(progress)-1].EventTime["watermark"]; wm != at(10).UTC().Format(time.RFC3339Nano) {
		t.Fatalf("the last batch's watermark is %s, want %s", wm, at(10))
	}

	m = typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	m.Add(rows[0], rows[2])
	f := func(user string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(string)) error {
		for r := range rows {
			if err := st.SetTimeoutTimestamp(r.Time); err != nil {
				return err
			}
		}
		emit(user)
		return nil
	}
	out := typed.FlatMapGroupsWithState(typed.GroupByKey(typed.WithWatermark(typed.FromMemory(m), clickTime, 0), func(c *fixtures.Click) string { return c.User }), typed.Append, typed.EventTimeTimeout, f)
	if err := runToEnd(t, typed.WriteTo(out, newSink[string]()), newCheckpoint().opts()...); err != nil {
		t.Fatalf("a timeout at a row 0.5 ms after the watermark's millisecond: %v", err)
	}

	// The delay counts whole milliseconds too (Spark's delayMs): 1.5 ms
	// is 1 ms, so after a row at 10.0007 s (10 s) the watermark is 9.999
	// s, and a row at 9.9987 s, two batches on, is late (with 1.5 ms, the
	// watermark would be 9.9985 s, and it would not be).
	m = typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	m.Add(rows[0], rows[1], fixtures.Click{User: "d", Time: at(10).Add(-1300 * time.Microsecond)})
	sink = newSink[fixtures.Click]()
	s = typed.WithWatermark(typed.FromMemory(m), clickTime, 1500*time.Microsecond)
	_, progress, _ = runAvailableNow(t, typed.WriteTo(typed.DropDuplicates(s, func(c *fixtures.Click) string { return c.User }), sink), newCheckpoint(), sink)
	if wm := progress[len(progress)-1].EventTime["watermark"]; wm != at(10).Add(-time.Millisecond).UTC().Format(time.RFC3339Nano) {
		t.Fatalf("with a delay of 1.5 ms, the last batch's watermark is %s, want %s", wm, at(10).Add(-time.Millisecond))
	}
	if rows := sink.rows(); len(rows) != 2 || rows[0].User != "a" || rows[1].User != "b" {
		t.Fatalf("with a delay of 1.5 ms, kept %v, want a's and b's rows", rows)
	}
}

// TestWatermarkAcrossTwoRestarts: a watermark that has had no rows since
// a restart counts as the epoch, and holds the query's at the restored
// value; its mark from before the restart, still in the checkpoint, does
// not count at the next restart either. Two streams with no delay, the
// default policy (the least): the first at 10 s and the second at 5 s
// make the watermark 5 s; after a restart the second alone moves on (to
// 20 s, then 21 s) and, across a second restart, the watermark stays at
// 5 s, as Spark's (which restores its watermark from the commit log and
// counts each stream from the epoch), where the first stream's old mark
// would make it 10 s.
func TestWatermarkAcrossTwoRestarts(t *testing.T) {
	first, second, w := twoStreamsSummed(0, 0)
	ck := newCheckpoint()
	clock := runtime.NewManualClock(seconds(1_000_000))
	q := startLive(t, w, clock, ck.opts()...)
	first.Add(valueRows(10)...)
	second.Add(valueRows(5)...)
	q.trigger()
	for i, at := range []int{20, 21} {
		q.stop()
		q = startLive(t, w, clock, ck.opts()...)
		second.Add(valueRows(at)...)
		if got := watermarkOf(t, q.trigger()); !got.Equal(seconds(5)) {
			t.Fatalf("after restart %d, the second stream at %d s: watermark %v, want %v", i+1, at, got, seconds(5))
		}
	}
	q.stop()
}

// TestWatermarkPolicyIsTheCheckpoints is Spark's "MultipleWatermarkPolicy:
// recovery from checkpoints ignores session conf": a checkpoint keeps the
// policy of the start that created it, whatever a later start asks for.
// The streams' delays are 10 s and 15 s, the first start's policy is
// MaxWatermark; the starts after it ask for MinWatermark, then for none.
func TestWatermarkPolicyIsTheCheckpoints(t *testing.T) {
	first, second, w := twoStreamsSummed(10*time.Second, 15*time.Second)
	ck := newCheckpoint()
	clock := runtime.NewManualClock(seconds(1_000_000))
	q := startLive(t, w, clock, append(ck.opts(), runtime.MultipleWatermarkPolicy(runtime.MaxWatermark))...)
	// step adds the rows, runs their batch, then one more (a late row on
	// the first stream) and returns its watermark: the one they left.
	step := func(firstAt, secondAt []int) time.Time {
		t.Helper()
		first.Add(valueRows(firstAt...)...)
		second.Add(valueRows(secondAt...)...)
		q.trigger()
		first.Add(valueRows(0)...)
		return watermarkOf(t, q.trigger())
	}
	if got := step([]int{20}, []int{30}); !got.Equal(seconds(15)) {
		t.Fatalf("first start: watermark %v, want %v", got, seconds(15))
	}
	q.stop()
	q = startLive(t, w, clock, append(ck.opts(), runtime.MultipleWatermarkPolicy(runtime.MinWatermark))...)
	if got := step([]int{120}, []int{130}); !got.Equal(seconds(115)) {
		t.Fatalf("restarted asking for the least: watermark %v, want the greatest, %v", got, seconds(115))
	}
	if got := step([]int{150}, nil); !got.Equal(seconds(140)) {
		t.Fatalf("restarted asking for the least, the first stream at 150 s: watermark %v, want %v", got, seconds(140))
	}
	q.stop()
	q = startLive(t, w, clock, ck.opts()...)
	if got := step([]int{200}, []int{260}); !got.Equal(seconds(245)) {
		t.Fatalf("restarted with no policy: watermark %v, want the greatest, %v", got, seconds(245))
	}
	q.stop()
}

// TestSummaryWatermarkByTheCheckpointsPolicy: streamgen inspect tells the
// watermark of the next batch by the checkpoint's policy: with
// MaxWatermark, delays of 10 s and 15 s and rows at 20 s and 30 s, 15 s.
func TestSummaryWatermarkByTheCheckpointsPolicy(t *testing.T) {
	first, second, w := twoStreamsSummed(10*time.Second, 15*time.Second)
	ck := newCheckpoint()
	q := startLive(t, w, runtime.NewManualClock(seconds(1_000_000)), append(ck.opts(), runtime.MultipleWatermarkPolicy(runtime.MaxWatermark))...)
	first.Add(valueRows(20)...)
	second.Add(valueRows(30)...)
	q.trigger()
	q.stop()
	c, _ := openCheckpoint(t, ck.fs)
	sum, err := c.Summary()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if !sum.NextWatermark.Equal(seconds(15)) {
		t.Fatalf("the checkpoint's summary: next watermark %v, want %v", sum.NextWatermark, seconds(15))
	}
}
