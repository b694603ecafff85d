package typed_test

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestProcessorScripts runs the scripts in testdata/processor: the rules
// of transformWithState, batch by batch on a manual clock, each script
// twice, with one handler at a time and with eight concurrent handlers,
// against the same expected output. The commands are those of TestScripts
// (setup, add, advance-clock, restart, stop); setup takes
//
//	time=none|processing|event  the processor's time mode
//	watermark=D                 a watermark D behind the rows' event time
//	ttl=D                       the states' time to live
//	event-ttl=D                 the states' time to live, in event time
//	timer-after=D               on rows, register a timer D after the
//	                            batch's processing time (processing) or the
//	                            latest event time (event)
//	timer-counts                a timer's call adds one to the count
//	initial=(key:count, ...)    an initial state
//
// and restart takes ttl=D or event-ttl=D, a time to live changed by the
// restart.
//
// The scripted processor keeps a count (value state), the rows' pages
// (list state) and a count per page (map state); each call with rows emits
// "key count=N pages=[...] per-page=[...] timers=[...]", as the state and
// timers are after the call, and each expired timer "key fired @T
// count=N ... timers=[...]" with the state and timers it sees (after
// its addition, with timer-counts).
func TestProcessorScripts(t *testing.T) {
	for _, conc := range []int{1, 8} {
		t.Run(fmt.Sprintf("concurrency=%d", conc), func(t *testing.T) {
			datadriven.Walk(t, "testdata/processor", func(t *testing.T, path string) {
				s := &processorScript{t: t, concurrency: conc}
				defer s.stop()
				datadriven.RunTest(t, path, s.run)
			})
		})
	}
}

type processorScript struct {
	t           *testing.T
	concurrency int
	timeMode    typed.TimeMode
	delay       time.Duration
	watermarked bool
	ttl         time.Duration
	eventTTL    bool
	timerAfter  time.Duration
	timerCounts bool
	initial     []typed.Pair[string, int64]
	fs          vfs.FS
	clock       *runtime.ManualClock
	input       *typed.MemoryStream[fixtures.Click]
	sink        *batchSink[string]
	q           *typed.Query
	shown       int64
}

// scriptedProcessor is the processor the scripts drive.
type scriptedProcessor struct {
	s       *processorScript
	h       *typed.Handle
	count   *typed.ValueState[int64]
	pages   *typed.ListState[string]
	perPage *typed.MapState[string, int64]
}

func (p *scriptedProcessor) Init(h *typed.Handle) error {
	p.h = h
	ttl := typed.WithTTL(p.s.ttl)
	if p.s.eventTTL {
		ttl = typed.WithEventTimeTTL(p.s.ttl)
	}
	p.count = typed.NewValueState[int64](h, "count", ttl)
	p.pages = typed.NewListState[string](h, "pages", ttl)
	p.perPage = typed.NewMapState[string, int64](h, "perPage", ttl)
	return nil
}

// describe says the key's state and timers: "count=N pages=[...]
// per-page=[...] timers=[...]".
func (p *scriptedProcessor) describe(ctx context.Context) (string, error) {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return "", err
	}
	var pages, perPage []string
	list, err := p.pages.Get(ctx)
	if err != nil {
		return "", err
	}
	for page := range list {
		pages = append(pages, page)
	}
	counts, err := p.perPage.Iterator(ctx)
	if err != nil {
		return "", err
	}
	for page, c := range counts {
		perPage = append(perPage, fmt.Sprintf("%s:%d", page, c))
	}
	// Exists answers from less than a whole read (a list's header, a
	// map's first live entry): it must agree with the read, whatever
	// expired, was cleared or came back after a restart.
	if ok, err := p.pages.Exists(ctx); err != nil || ok != (len(pages) > 0) {
		return "", fmt.Errorf("pages.Exists %v (%v) where the list holds %q", ok, err, pages)
	}
	if ok, err := p.perPage.Exists(ctx); err != nil || ok != (len(perPage) > 0) {
		return "", fmt.Errorf("perPage.Exists %v (%v) where the map holds %q", ok, err, perPage)
	}
	timers, err := p.timers(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("count=%d pages=[%s] per-page=[%s] timers=[%s]", n, strings.Join(pages, " "), strings.Join(perPage, " "), timers), nil
}

// rewritePages handles a row whose page is a command to the list of
// pages, each after reading the list as a handler that acts on what it
// holds would: "clear" clears it; "append-clear" appends "tmp", then
// clears it; "put:P1,P2" puts P1 and P2 in its place (none: "put:").
func (p *scriptedProcessor) rewritePages(ctx context.Context, page string) (bool, error) {
	put, isPut := strings.CutPrefix(page, "put:")
	if page != "clear" && page != "append-clear" && !isPut {
		return false, nil
	}
	if _, err := p.pages.Get(ctx); err != nil {
		return true, err
	}
	switch {
	case isPut:
		var values []string
		if put != "" {
			values = strings.Split(put, ",")
		}
		return true, p.pages.Put(ctx, values)
	case page == "append-clear":
		if err := p.pages.AppendValue(ctx, "tmp"); err != nil {
			return true, err
		}
	}
	return true, p.pages.Clear(ctx)
}

func (p *scriptedProcessor) timers(ctx context.Context) (string, error) {
	if p.s.timeMode == typed.TimeModeNone {
		return "", nil
	}
	listed, err := p.h.ListTimers(ctx)
	if err != nil {
		return "", err
	}
	var out []string
	for _, at := range listed {
		out = append(out, p.s.timeText(at))
	}
	return strings.Join(out, " "), nil
}

func (p *scriptedProcessor) HandleInputRows(ctx context.Context, key string, rows iter.Seq[fixtures.Click], timers typed.TimerValues, emit func(string)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	var latest time.Time
	for r := range rows {
		n++
		if r.Time.After(latest) {
			latest = r.Time
		}
		if r.Page == "" {
			continue
		}
		if done, err := p.rewritePages(ctx, r.Page); done || err != nil {
			if err != nil {
				return err
			}
			continue
		}
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
	if p.s.timerAfter > 0 {
		base := timers.CurrentProcessingTime()
		if p.s.timeMode == typed.TimeModeEventTime {
			base = latest
		}
		if err := p.h.RegisterTimer(ctx, base.Add(p.s.timerAfter)); err != nil {
			return err
		}
	}
	state, err := p.describe(ctx)
	if err != nil {
		return err
	}
	emit(key + " " + state)
	return nil
}

func (p *scriptedProcessor) HandleExpiredTimer(ctx context.Context, key string, _ typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(string)) error {
	if p.s.timerCounts {
		n, _, err := p.count.Get(ctx)
		if err != nil {
			return err
		}
		if err := p.count.Update(ctx, n+1); err != nil {
			return err
		}
	}
	state, err := p.describe(ctx)
	if err != nil {
		return err
	}
	emit(fmt.Sprintf("%s fired %s %s", key, p.s.timeText(expired.ExpiryTime()), state))
	return nil
}

func (p *scriptedProcessor) HandleInitialState(ctx context.Context, key string, initial int64, _ typed.TimerValues) error {
	return p.count.Update(ctx, initial)
}

func (p *scriptedProcessor) Close() error { return nil }

func (s *processorScript) timeText(at time.Time) string {
	if s.timeMode == typed.TimeModeEventTime {
		return "@" + strconv.FormatFloat(at.Sub(scriptEpoch).Seconds(), 'f', -1, 64)
	}
	return "t=" + at.Sub(scriptEpoch).String()
}

func (s *processorScript) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "setup":
		s.stop()
		s.timeMode, s.delay, s.watermarked, s.ttl, s.eventTTL, s.timerAfter, s.timerCounts, s.initial = typed.TimeModeNone, 0, false, 0, false, 0, false, nil
		for _, a := range d.CmdArgs {
			v := ""
			if len(a.Vals) > 0 {
				v = a.Vals[0]
			}
			dur := func() time.Duration {
				x, err := time.ParseDuration(v)
				if err != nil {
					d.Fatalf(t, "%s: %v", a.Key, err)
				}
				return x
			}
			switch a.Key {
			case "time":
				s.timeMode = map[string]typed.TimeMode{"none": typed.TimeModeNone, "processing": typed.TimeModeProcessingTime, "event": typed.TimeModeEventTime}[v]
			case "watermark":
				s.delay, s.watermarked = dur(), true
			case "ttl":
				s.ttl = dur()
			case "event-ttl":
				s.ttl, s.eventTTL = dur(), true
			case "timer-after":
				s.timerAfter = dur()
			case "timer-counts":
				s.timerCounts = true
			case "initial":
				for _, v := range a.Vals {
					key, n, _ := strings.Cut(v, ":")
					count, _ := strconv.ParseInt(n, 10, 64)
					s.initial = append(s.initial, typed.Pair[string, int64]{Key: key, State: count})
				}
			default:
				d.Fatalf(t, "unknown setup key %q", a.Key)
			}
		}
		s.fs = vfs.NewMem()
		s.clock = runtime.NewManualClock(scriptEpoch)
		s.input = typed.NewMemoryStream[fixtures.Click]("in", 0)
		s.sink = newSink[string]()
		s.shown = -1
		return s.start(t)
	case "add":
		var rows []fixtures.Click
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			// key[@seconds][ page]
			fields := strings.Fields(line)
			if len(fields) == 0 {
				continue
			}
			key, at, found := strings.Cut(fields[0], "@")
			c := fixtures.Click{User: key}
			if found {
				sec, err := strconv.ParseFloat(at, 64)
				if err != nil {
					d.Fatalf(t, "bad row %q: %v", line, err)
				}
				c.Time = scriptEpoch.Add(time.Duration(sec * float64(time.Second)))
			}
			if len(fields) > 1 {
				c.Page = fields[1]
			}
			rows = append(rows, c)
		}
		s.input.Add(rows...)
		return ""
	case "advance-clock":
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		s.clock.Advance(dur)
		return s.settle(t)
	case "restart":
		// restart [ttl=D | event-ttl=D]: the same query, its states' time
		// to live changed (ttl=0: none), as a new version of a program
		// may change it.
		for _, a := range d.CmdArgs {
			if len(a.Vals) != 1 || (a.Key != "ttl" && a.Key != "event-ttl") {
				d.Fatalf(t, "restart takes ttl=D or event-ttl=D, not %v", a)
			}
			x, err := time.ParseDuration(a.Vals[0])
			if err != nil {
				d.Fatalf(t, "%s: %v", a.Key, err)
			}
			s.ttl, s.eventTTL = x, a.Key == "event-ttl"
		}
		s.stop()
		return s.start(t)
	case "flush":
		// Start again on what the input holds, run it to its end, then move
		// the watermark past every event time (FlushEventTime).
		s.stop()
		return s.start(t, runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	case "stop":
		s.stop()
		return ""
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (s *processorScript) start(t *testing.T, more ...runtime.Option) string {
	in := typed.FromMemory(s.input)
	if s.watermarked {
		in = typed.WithWatermark(in, func(c *fixtures.Click) time.Time { return c.Time }, s.delay)
	}
	byKey := typed.GroupByKey(in, func(c *fixtures.Click) string { return c.User })
	opts := []typed.ProcessorOption{typed.Concurrency(s.concurrency)}
	if len(s.initial) > 0 {
		opts = append(opts, typed.ProcessorInitialState(s.initial...))
	}
	out := typed.TransformWithState(byKey, &scriptedProcessor{s: s}, s.timeMode, typed.Append, opts...)
	qopts := append([]runtime.Option{runtime.Checkpoint("ckpt"), runtime.FileSystem(s.fs), runtime.WithManualClock(s.clock),
		runtime.WithTrigger(runtime.ProcessingTime(time.Second))}, more...)
	q, err := typed.WriteTo(out, s.sink).Start(context.Background(), qopts...)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	s.q = q
	return s.settle(t)
}

func (s *processorScript) stop() {
	if s.q != nil {
		s.q.Stop()
		s.q = nil
	}
}

// settle waits until the query waits on the clock, and prints the batches
// that ran since the last print, their output in order.
func (s *processorScript) settle(t *testing.T) string {
	return settleQuery(t, &s.q, s.clock, &s.shown, func(id int64) []string { return s.sink.snapshot()[id] })
}
