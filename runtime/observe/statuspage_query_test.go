package observe_test

import (
	"context"
	"iter"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// The tests of the status page run a real query: sessions of clicks, an
// event-time watermark and a flatMapGroupsWithState whose state grows and
// shrinks, two clicks a batch, with an available-now trigger and an
// end-of-input flush (whose watermark, the end of time, has no delay to
// chart). Its clock steps forward at every reading, so batch durations
// and rates are not zero, with no real time spent.

var clickT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// clicks are the query's input: 16 clicks, 8 batches, and the flush.
func sessionClicks() []fixtures.Click {
	// Sessions start and end, so the state rows go up and down.
	users := strings.Fields("ann bob ann cat dan cat cat ann bob bob dan ann cat cat bob dan")
	var out []fixtures.Click
	for i, u := range users {
		out = append(out, fixtures.Click{User: u, Time: clickT0.Add(time.Duration(i*13) * time.Second)})
	}
	return out
}

// minBatches is the batches the query runs at least: two clicks a batch,
// and the flush (it may run more without data, for due timeouts).
const minBatches = 16/2 + 1

// steppingClock moves by a few milliseconds, varying, at every reading.
type steppingClock struct {
	mu    sync.Mutex
	now   time.Time
	calls int
}

func (c *steppingClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.now = c.now.Add(time.Duration(1+c.calls%7) * time.Millisecond)
	return c.now
}

// progressGate holds the query on its goroutine after the report of batch at,
// until release is closed: the query is then running, with batches 0 to
// at committed and reported to the listeners before the progressGate.
type progressGate struct {
	at      int64
	reached chan struct{}
	release chan struct{}
}

func newProgressGate(at int64) *progressGate {
	return &progressGate{at: at, reached: make(chan struct{}), release: make(chan struct{})}
}

func (g *progressGate) OnQueryProgress(p runtime.QueryProgress) {
	if p.BatchID == g.at {
		close(g.reached)
		<-g.release
	}
}

// startClicks starts the sessions query with the listeners given (in
// order), and stops it at the end of the test.
func startClicks(t *testing.T, name string, listeners ...any) *typed.Query {
	t.Helper()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	m.Add(sessionClicks()...)
	sessions := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
		c, _ := state.Get()
		if state.HasTimedOut() {
			emit(fixtures.UserCount{User: user, Count: c.Count})
			state.Remove()
			return nil
		}
		var last time.Time
		for r := range rows {
			c.Count++
			last = r.Time
		}
		state.Update(c)
		return state.SetTimeoutTimestamp(last.Add(30 * time.Second))
	}
	watermarked := typed.WithWatermark(typed.FromMemory(m), func(c *fixtures.Click) time.Time { return c.Time }, 5*time.Second)
	byUser := typed.GroupByKey(watermarked, func(c *fixtures.Click) string { return c.User })
	clock := &steppingClock{now: clickT0.Add(time.Hour)}
	opts := []runtime.Option{runtime.Name(name), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime(), runtime.Clock(clock.Now)}
	for _, l := range listeners {
		opts = append(opts, runtime.Listener(l))
	}
	q, err := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Append, typed.EventTimeTimeout, sessions), typed.NewMemorySink[fixtures.UserCount]()).
		OutputMode(typed.Append).Start(context.Background(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop() })
	return q
}

// chartWant is what a chart should show of one batch, computed from its
// progress report here, apart from the page's code.
type chartWant struct {
	batch       int64
	inputRate   float64
	processRate float64
	phases      map[string]int64 // the duration chart's segments
	stateRows   int64
	outputRows  int64
	lateRows    int64
	deadLetters int64
	diskMiB     float64 // to two decimals
	delayMs     *int64  // nil: no point
	lag         *int64  // rows added and not read after the batch; nil: no point
}

var phaseNames = []string{"latestOffset", "getBatch", "stateOperators", "timers", "sink", "walCommit", "other"}

func chartValues(p runtime.QueryProgress) chartWant {
	e := chartWant{batch: p.BatchID, inputRate: p.InputRowsPerSecond, processRate: p.ProcessedRowsPerSecond, phases: map[string]int64{}}
	var parts int64
	for _, name := range phaseNames[:6] {
		e.phases[name] = p.DurationMs[name]
		parts += p.DurationMs[name]
	}
	e.phases["other"] = max(0, p.DurationMs["triggerExecution"]-parts)
	for _, op := range p.StateOperators {
		e.stateRows += op.NumRowsTotal
		e.lateRows += op.NumRowsDroppedByWatermark
	}
	e.outputRows, e.deadLetters = p.Sink.NumOutputRows, p.NumDeadLetters
	for _, s := range p.OtherSinks {
		e.outputRows += s.NumOutputRows
	}
	e.diskMiB = math.Round(float64(p.StateStore.DiskBytes)/(1<<20)*100) / 100
	if len(p.Sources) == 1 && p.Sources[0].Lag != nil {
		// Every click is added before the query starts: the rows after
		// the batch's end offset are behind.
		end, err := strconv.Atoi(p.Sources[0].EndOffset)
		if err != nil {
			panic(err)
		}
		lag := int64(len(sessionClicks()) - end)
		e.lag = &lag
	}
	if s, ok := p.EventTime["watermark"]; ok {
		wm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			panic(err)
		}
		if wm.Before(clickT0.AddDate(100, 0, 0)) { // not the flush's end of time
			d := p.Timestamp.Sub(wm).Milliseconds()
			e.delayMs = &d
		}
	}
	return e
}
