// Package typedtest runs a stateful processor, a (flat)mapGroupsWithState
// function, a window aggregation or a whole pipeline inside a Go test, as
// Spark's TwsTester and Kafka Streams' TopologyTestDriver do: rows go in a
// batch at a time, processing time moves on a manual clock and the
// watermark where the test sets it, and each step returns the rows the
// pipeline wrote; the state of each key and variable (with its TTL
// expiry), the registered timers and the rows too late for the watermark
// can be read between steps.
//
// It runs the real engine: each step is a run of the query on its
// checkpoint, in a temporary directory of the test, so what a test sees
// is what a deployed pipeline does, restarts included.
//
//	d := typedtest.NewProcessor(t, &Counter{}, func(c *Click) string { return c.User },
//		typed.TimeModeEventTime, typedtest.EventTime(func(c *Click) time.Time { return c.Time }, 0))
//	out := d.Run(Click{User: "ana", Time: t0})
//	out = d.SetWatermark(t0.Add(time.Hour)) // the timers due fire
//	count, ok := typedtest.Value[int64](t, d.State(0, "ana", "count"))
package typedtest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Start is the processing time a driver's clock starts at, unless
// StartAt says otherwise.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Option configures a driver of a pipeline whose input rows are In.
type Option[In any] func(*config[In])

type config[In any] struct {
	eventTime func(*In) time.Time
	delay     time.Duration
	start     time.Time
	mode      *typed.OutputMode
	opts      []runtime.Option
}

// EventTime gives the input a watermark: delay behind the greatest event
// time of the rows, as typed.WithWatermark. Without it, the input has no
// watermark (SetWatermark then fails the test).
func EventTime[In any](eventTime func(*In) time.Time, delay time.Duration) Option[In] {
	return func(c *config[In]) { c.eventTime, c.delay = eventTime, delay }
}

// StartAt starts the driver's processing-time clock at t.
func StartAt[In any](t time.Time) Option[In] { return func(c *config[In]) { c.start = t } }

// OutputMode sets the query's output mode (typed.Writer.OutputMode).
func OutputMode[In any](m typed.OutputMode) Option[In] { return func(c *config[In]) { c.mode = &m } }

// RuntimeOptions adds options to each run of the query (runtime.Name,
// runtime.StateCacheSize, ...).
func RuntimeOptions[In any](opts ...runtime.Option) Option[In] {
	return func(c *config[In]) { c.opts = append(c.opts, opts...) }
}

// feed is a row of the driver's input, or a marker that moves the
// watermark and goes no further.
type feed[In any] struct {
	row    In
	at     time.Time
	marker bool
}

// Pipeline drives a pipeline from In rows to Out rows. Not safe for
// concurrent use: a test calls it from one goroutine.
type Pipeline[In, Out any] struct {
	t      testing.TB
	cfg    config[In]
	dir    string
	input  *typed.MemoryStream[feed[In]]
	clock  *runtime.ManualClock
	writer func() starter
	out    *collect[Out]
	late   *collect[feed[In]]
	last   time.Time // the greatest event time fed
}

// NewPipeline returns a driver of the pipeline build makes of its input.
// Its checkpoint is in a temporary directory of t's.
func NewPipeline[In, Out any](t testing.TB, build func(typed.Stream[In]) typed.Stream[Out], opts ...Option[In]) *Pipeline[In, Out] {
	t.Helper()
	d := newDriver[In, Out](t, opts)
	d.writer = func() starter {
		w := typed.WriteTo(build(d.rows()), typed.Sink[Out](d.out))
		if d.cfg.mode != nil {
			w = w.OutputMode(*d.cfg.mode)
		}
		return w
	}
	return d
}

// starter is a query ready to start: a *typed.Writer or *typed.Writers.
type starter interface {
	Start(ctx context.Context, opts ...runtime.Option) (*runtime.Query, error)
}

// rows is the driver's input as the pipeline sees it.
func (d *Pipeline[In, Out]) rows() typed.Stream[In] {
	fed := typed.FromMemory(d.input)
	if d.cfg.eventTime != nil {
		fed = typed.WithWatermark(fed, func(f *feed[In]) time.Time { return f.at }, d.cfg.delay, typed.LateRows[feed[In]](d.late))
	}
	return typed.Map(typed.Filter(fed, func(f *feed[In]) bool { return !f.marker }), func(f *feed[In]) In { return f.row })
}

// NewQuery returns a driver of a query of several outputs (typed.WriteAll),
// as Kafka Streams' TopologyTestDriver drives a topology that writes to
// several topics: build makes the outputs of its input, each a
// typed.WriteTo of a stream to an Output of the test's (made with
// NewOutput), whose Take returns the rows it got. Run and the driver's
// other steps return no rows; the outputs set their own modes (the
// OutputMode option fails the test). Its checkpoint is in a temporary
// directory of t's.
func NewQuery[In any](t testing.TB, build func(typed.Stream[In]) []typed.Output, opts ...Option[In]) *Pipeline[In, struct{}] {
	t.Helper()
	d := newDriver[In, struct{}](t, opts)
	if d.cfg.mode != nil {
		t.Fatal("typedtest: NewQuery with OutputMode: set the mode on the outputs (typed.Writer.OutputMode)")
	}
	d.writer = func() starter { return typed.WriteAll(build(d.rows())...) }
	return d
}

// newDriver returns a driver with opts, its checkpoint in a temporary
// directory of t's, before its query is set.
func newDriver[In, Out any](t testing.TB, opts []Option[In]) *Pipeline[In, Out] {
	d := &Pipeline[In, Out]{t: t, dir: t.TempDir(), out: &collect[Out]{}, late: &collect[feed[In]]{}}
	d.cfg.start = Start
	for _, o := range opts {
		o(&d.cfg)
	}
	d.clock = runtime.NewManualClock(d.cfg.start)
	d.input = typed.NewMemoryStream[feed[In]]("typedtest", 0)
	return d
}

// Output is a sink of a test's, for the outputs of a NewQuery driver: it
// keeps the rows of every batch (a batch written again replaces its
// rows). Safe for concurrent use.
type Output[T any] struct{ c collect[T] }

// NewOutput returns an Output that has had no rows.
func NewOutput[T any]() *Output[T] { return &Output[T]{} }

// Write keeps rows as batch's (typed.Sink).
func (o *Output[T]) Write(ctx context.Context, batch int64, rows []T) error {
	return o.c.Write(ctx, batch, rows)
}

// Take returns the rows of the batches written since the last Take, in
// batch order.
func (o *Output[T]) Take() []T { return o.c.take() }

// NewProcessor returns a driver of a transformWithState processor over
// rows grouped by key, in Append mode unless OutputMode says otherwise.
func NewProcessor[K comparable, In, Out any](t testing.TB, p typed.StatefulProcessor[K, In, Out], key func(*In) K, timeMode typed.TimeMode, opts ...Option[In]) *Pipeline[In, Out] {
	t.Helper()
	var cfg config[In]
	for _, o := range opts {
		o(&cfg)
	}
	mode := typed.Append
	if cfg.mode != nil {
		mode = *cfg.mode
	}
	return NewPipeline(t, func(s typed.Stream[In]) typed.Stream[Out] {
		return typed.TransformWithState(typed.GroupByKey(s, key), p, timeMode, mode)
	}, append(opts, OutputMode[In](mode))...)
}

// Run feeds rows to the pipeline as one batch (then the batches the
// engine runs after it, such as one without data for what the watermark
// made due) and returns the rows written.
func (d *Pipeline[In, Out]) Run(rows ...In) []Out {
	d.t.Helper()
	batch := make([]feed[In], len(rows))
	for i := range rows {
		batch[i] = feed[In]{row: rows[i]}
		if d.cfg.eventTime != nil {
			batch[i].at = d.cfg.eventTime(&rows[i])
			if batch[i].at.After(d.last) {
				d.last = batch[i].at
			}
		}
	}
	d.input.Add(batch...)
	return d.run()
}

// SetWatermark moves the watermark to at (it only rises: an earlier one
// changes nothing) and runs the batches that fire what is then due:
// event-time timers and timeouts, windows closed, state evicted. It
// returns the rows written.
func (d *Pipeline[In, Out]) SetWatermark(at time.Time) []Out {
	d.t.Helper()
	if d.cfg.eventTime == nil {
		d.t.Fatal("typedtest: SetWatermark on a pipeline without EventTime")
	}
	d.input.Add(feed[In]{at: at.Add(d.cfg.delay), marker: true})
	return d.run()
}

// AdvanceProcessingTime moves the clock by dt and runs the batches that
// fire what is then due: processing-time timers and timeouts, values past
// their time to live. It returns the rows written.
func (d *Pipeline[In, Out]) AdvanceProcessingTime(dt time.Duration) []Out {
	d.t.Helper()
	d.clock.Advance(dt)
	return d.run()
}

// Now is the driver's processing time.
func (d *Pipeline[In, Out]) Now() time.Time { return d.clock.Now() }

// Late returns the rows too late for the watermark so far, in the order
// they came.
func (d *Pipeline[In, Out]) Late() []In {
	var rows []In
	for _, f := range d.late.all() {
		if !f.marker {
			rows = append(rows, f.row)
		}
	}
	return rows
}

// run runs the query on its checkpoint to the end of what it was fed.
func (d *Pipeline[In, Out]) run() []Out {
	d.t.Helper()
	opts := append([]runtime.Option{runtime.Checkpoint(d.dir), runtime.WithTrigger(runtime.AvailableNow()),
		runtime.WithManualClock(d.clock)}, d.cfg.opts...)
	q, err := d.writer().Start(context.Background(), opts...)
	if err != nil {
		d.t.Fatalf("typedtest: start: %v", err)
	}
	if err := q.AwaitTermination(); err != nil {
		d.t.Fatalf("typedtest: %v", err)
	}
	return d.out.take()
}

// State returns the state rows of key in variable (all its variables for
// "") of the pipeline's operator-th stateful operator (0 for a
// processor's), decoded to JSON: a value's, a list's entries, a map's
// entries, each with its TTL expiry.
func (d *Pipeline[In, Out]) State(operator int, key any, variable string) []runtime.StateRow {
	d.t.Helper()
	want, err := json.Marshal(key)
	if err != nil {
		d.t.Fatalf("typedtest: key %v: %v", key, err)
	}
	var rows []runtime.StateRow
	d.read(func(c *runtime.CheckpointReader, m runtime.Meta) error {
		return c.Rows(m, operator, variable, func(r runtime.StateRow) error {
			if sameJSON(r.Key, want) {
				r.Key = slices.Clone(r.Key)
				r.Value = slices.Clone(r.Value)
				r.MapKey = slices.Clone(r.MapKey)
				rows = append(rows, r)
			}
			return nil
		})
	})
	return rows
}

// Timers returns the times of the timers key has registered in the
// pipeline's operator-th stateful operator, earliest first.
func (d *Pipeline[In, Out]) Timers(operator int, key any) []time.Time {
	d.t.Helper()
	want, err := json.Marshal(key)
	if err != nil {
		d.t.Fatalf("typedtest: key %v: %v", key, err)
	}
	var at []time.Time
	d.read(func(c *runtime.CheckpointReader, m runtime.Meta) error {
		if operator < 0 || operator >= len(m.Operators) {
			return fmt.Errorf("no operator %d", operator)
		}
		return c.Timers(uint8(operator), func(t runtime.StoredTimer) error {
			k, err := runtime.KeyJSON(m.Operators[operator], t.Key)
			if err != nil {
				return err
			}
			if sameJSON(k, want) {
				at = append(at, t.At)
			}
			return nil
		})
	})
	slices.SortFunc(at, time.Time.Compare)
	return at
}

// read opens the checkpoint for fn.
func (d *Pipeline[In, Out]) read(fn func(*runtime.CheckpointReader, runtime.Meta) error) {
	d.t.Helper()
	c, err := runtime.OpenCheckpoint(d.dir)
	if err != nil {
		d.t.Fatalf("typedtest: %v (run a step first)", err)
	}
	defer c.Close()
	m, ok, err := c.Meta()
	if err == nil && !ok {
		err = fmt.Errorf("the checkpoint has no description yet")
	}
	if err == nil {
		err = fn(c, m)
	}
	if err != nil {
		d.t.Fatalf("typedtest: %v", err)
	}
}

// Value decodes the one value row of rows (a value state's, as State
// returns it) into a T, through encoding/json; ok is false without one.
func Value[T any](t testing.TB, rows []runtime.StateRow) (v T, ok bool) {
	t.Helper()
	switch len(rows) {
	case 0:
		return v, false
	case 1:
	default:
		t.Fatalf("typedtest: %d state rows, want one value", len(rows))
	}
	if err := json.Unmarshal(rows[0].Value, &v); err != nil {
		t.Fatalf("typedtest: the value %s does not decode into %T: %v", rows[0].Value, v, err)
	}
	return v, true
}

// sameJSON reports whether two JSON texts hold the same value.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return string(xs) == string(ys)
}

// collect is a sink that keeps every row by batch, a batch written again
// replacing its rows (a sink is idempotent by batch id), in batch order.
type collect[T any] struct {
	mu       sync.Mutex
	ids      []int64
	batches  map[int64][]T
	returned map[int64]bool // the batches taken
}

func (c *collect[T]) Write(_ context.Context, batch int64, rows []T) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.batches == nil {
		c.batches = map[int64][]T{}
	}
	if _, ok := c.batches[batch]; !ok {
		c.ids = append(c.ids, batch)
	}
	c.batches[batch] = slices.Clone(rows)
	return nil
}

func (c *collect[T]) all() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []T
	for _, id := range c.ids {
		out = append(out, c.batches[id]...)
	}
	return out
}

// take returns the rows of the batches not taken before, in batch order.
func (c *collect[T]) take() []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.returned == nil {
		c.returned = map[int64]bool{}
	}
	var out []T
	for _, id := range c.ids {
		if !c.returned[id] {
			c.returned[id] = true
			out = append(out, c.batches[id]...)
		}
	}
	return out
}
