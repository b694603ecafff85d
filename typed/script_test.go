package typed_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
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

// TestScripts runs the scripts in testdata/scripts: stateful scenarios,
// many of them Spark's own (FlatMapGroupsWithStateSuite), driven batch by
// batch on a manual clock over an in-memory checkpoint. The commands:
//
//	setup key=value ...   start a query (see scriptConfig for the keys)
//	add                   add rows, one per line: "key" or "key@SECONDS"
//	                      (event time, seconds after the script's epoch)
//	advance-clock D       move the clock by D, wait for the query to do
//	                      what it can at the new time, print the batches
//	                      that ran: id, watermark, output rows (sorted), the
//	                      operator's state rows and the late rows
//	restart               stop the query and start it again on its checkpoint
//	state                 print the committed state rows and timers
//	stop                  stop the query
//
// Times print as seconds after the epoch (event time, "@15") or after the
// clock's start (processing time, "t=12s").
func TestScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/scripts", func(t *testing.T, path string) {
		s := &script{t: t}
		defer s.stop()
		datadriven.RunTest(t, path, s.run)
	})
}

// scriptEpoch is event time 0 of the scripts and the manual clock's start.
var scriptEpoch = time.Unix(1_000_000, 0).UTC()

// scriptConfig is what setup configures.
type scriptConfig struct {
	timeout typed.Timeout
	mode    typed.OutputMode
	// delay is the watermark's delay; without it, no watermark.
	delay        time.Duration
	watermarked  bool
	interval     time.Duration // 0: as soon as possible, polling every second
	noDataBatch  bool
	timeoutAfter time.Duration // set at every call with rows
	// onRows: "count" (add the rows to the count and update), "remove"
	// (Remove, then the timeout if any), "timeout-only" (touch no state).
	onRows string
	// onTimeout: "remove" (emit and remove), "keep" (emit, touch
	// nothing), "update" (emit, update the state unchanged).
	onTimeout string
	initial   []typed.Pair[string, fixtures.Counter]
}

type script struct {
	t      *testing.T
	cfg    scriptConfig
	fs     vfs.FS
	clock  *runtime.ManualClock
	input  *typed.MemoryStream[fixtures.Click]
	sink   *batchSink[fixtures.UserCount]
	q      *typed.Query
	shown  int64 // the batches up to this id have been printed
	status string
}

func (s *script) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "setup":
		s.setup(t, d)
		return s.start(t)
	case "add":
		var rows []fixtures.Click
		for _, line := range strings.Fields(d.Input) {
			key, at, found := strings.Cut(line, "@")
			c := fixtures.Click{User: key}
			if found {
				sec, err := strconv.ParseFloat(at, 64)
				if err != nil {
					d.Fatalf(t, "bad row %q: %v", line, err)
				}
				c.Time = scriptEpoch.Add(time.Duration(sec * float64(time.Second)))
			}
			rows = append(rows, c)
		}
		s.input.Add(rows...)
		return ""
	case "advance-clock":
		if len(d.CmdArgs) != 1 {
			d.Fatalf(t, "advance-clock takes a duration")
		}
		dur, err := time.ParseDuration(d.CmdArgs[0].Key)
		if err != nil {
			d.Fatalf(t, "%v", err)
		}
		s.clock.Advance(dur)
		return s.settle(t)
	case "restart":
		s.stop()
		return s.start(t)
	case "stop":
		s.stop()
		return ""
	case "state":
		s.stop()
		out := s.dumpState(t)
		if r := s.start(t); r != "" {
			out += r
		}
		return out
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (s *script) setup(t *testing.T, d *datadriven.TestData) {
	s.cfg = scriptConfig{mode: typed.Update, noDataBatch: true, onRows: "count", onTimeout: "remove"}
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
		case "timeout":
			s.cfg.timeout = map[string]typed.Timeout{"none": typed.NoTimeout, "processing": typed.ProcessingTimeTimeout, "event": typed.EventTimeTimeout}[v]
		case "mode":
			s.cfg.mode = map[string]typed.OutputMode{"append": typed.Append, "update": typed.Update}[v]
		case "watermark":
			s.cfg.delay, s.cfg.watermarked = dur(), true
		case "trigger":
			s.cfg.interval = dur()
		case "no-data-batches":
			s.cfg.noDataBatch = v == "true"
		case "timeout-after":
			s.cfg.timeoutAfter = dur()
		case "on-rows":
			s.cfg.onRows = v
		case "on-timeout":
			s.cfg.onTimeout = v
		case "initial":
			for _, v := range a.Vals {
				key, n, _ := strings.Cut(v, ":")
				count, _ := strconv.ParseInt(n, 10, 64)
				s.cfg.initial = append(s.cfg.initial, typed.Pair[string, fixtures.Counter]{Key: key, State: fixtures.Counter{Count: count}})
			}
		default:
			d.Fatalf(t, "unknown setup key %q", a.Key)
		}
	}
	s.fs = vfs.NewMem()
	s.clock = runtime.NewManualClock(scriptEpoch)
	s.input = typed.NewMemoryStream[fixtures.Click]("in", 0)
	s.sink = newSink[fixtures.UserCount]()
	s.shown = -1
}

// fn is the scripted stateful function: a count per key whose handling
// of rows and timeouts setup chooses. Its output rows carry the count, or
// TimedOut.
func (s *script) fn(key string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
	c, _ := st.Get()
	if st.HasTimedOut() {
		emit(fixtures.UserCount{User: key, Count: c.Count, TimedOut: true})
		switch s.cfg.onTimeout {
		case "remove":
			st.Remove()
		case "update":
			st.Update(c)
		}
		return nil
	}
	for r := range rows {
		c.Count++
		if r.Time.After(c.Last) {
			c.Last = r.Time
		}
	}
	switch s.cfg.onRows {
	case "count":
		st.Update(c)
		emit(fixtures.UserCount{User: key, Count: c.Count, Last: c.Last})
	case "remove":
		st.Remove()
		emit(fixtures.UserCount{User: key, Count: c.Count})
	case "timeout-only":
		emit(fixtures.UserCount{User: key, Count: c.Count})
	}
	if s.cfg.timeoutAfter > 0 {
		if s.cfg.timeout == typed.EventTimeTimeout {
			return st.SetTimeoutTimestamp(c.Last.Add(s.cfg.timeoutAfter))
		}
		return st.SetTimeoutDuration(s.cfg.timeoutAfter)
	}
	return nil
}

func (s *script) start(t *testing.T) string {
	in := typed.FromMemory(s.input)
	if s.cfg.watermarked {
		in = typed.WithWatermark(in, func(c *fixtures.Click) time.Time { return c.Time }, s.cfg.delay)
	}
	byKey := typed.GroupByKey(in, func(c *fixtures.Click) string { return c.User })
	var opts []typed.GroupsOption[string, fixtures.Counter]
	if len(s.cfg.initial) > 0 {
		opts = append(opts, typed.InitialStatePairs(s.cfg.initial...))
	}
	out := typed.FlatMapGroupsWithState(byKey, s.cfg.mode, s.cfg.timeout, s.fn, opts...)
	trigger, poll := runtime.AsSoonAsPossible(), time.Second
	if s.cfg.interval > 0 {
		trigger = runtime.ProcessingTime(s.cfg.interval)
	}
	q, err := typed.WriteTo(out, s.sink).Start(context.Background(),
		runtime.Checkpoint("ckpt"), runtime.FileSystem(s.fs), runtime.WithManualClock(s.clock),
		runtime.WithTrigger(trigger), runtime.PollInterval(poll), runtime.NoDataBatches(s.cfg.noDataBatch))
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	s.q = q
	return s.settle(t)
}

func (s *script) stop() {
	if s.q != nil {
		s.q.Stop()
		s.q = nil
	}
}

// settle waits until the query waits on the clock (or ends), and prints
// the batches that ran since the last print.
func (s *script) settle(t *testing.T) string {
	return settleQuery(t, &s.q, s.clock, &s.shown, func(id int64) []string {
		var lines []string
		for _, r := range s.sink.snapshot()[id] {
			lines = append(lines, rowText(r))
		}
		slices.Sort(lines)
		return lines
	})
}

// settleQuery waits until *q waits on clock (or ends), and prints the
// batches that ran after batch *shown: id, time, watermark, the lines rows
// gives for the batch's output, and the operators' state rows. A query
// that ended is printed as such and *q set to nil.
func settleQuery(t *testing.T, q **typed.Query, clock *runtime.ManualClock, shown *int64, rows func(batchID int64) []string) string {
	if *q == nil {
		return "no query\n"
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	query := *q
	go func() {
		select {
		case <-query.Done():
			cancel()
		case <-ctx.Done():
		}
	}()
	waitErr := clock.WaitUntilWaiting(ctx)
	var b strings.Builder
	for _, p := range query.RecentProgress() {
		if p.BatchID <= *shown {
			continue
		}
		*shown = p.BatchID
		wm := "none"
		if w, ok := p.EventTime["watermark"]; ok {
			at, _ := time.Parse(time.RFC3339Nano, w)
			wm = "@" + strconv.FormatFloat(at.Sub(scriptEpoch).Seconds(), 'f', -1, 64)
		}
		fmt.Fprintf(&b, "batch %d at t=%v watermark=%s\n", p.BatchID, p.Timestamp.Sub(scriptEpoch), wm)
		for _, line := range rows(p.BatchID) {
			fmt.Fprintf(&b, "  %s\n", line)
		}
		for _, op := range p.StateOperators {
			fmt.Fprintf(&b, "  state rows: total=%d updated=%d removed=%d late=%d\n", op.NumRowsTotal, op.NumRowsUpdated, op.NumRowsRemoved, op.NumRowsDroppedByWatermark)
		}
	}
	select {
	case <-query.Done():
		if err := query.Err(); err != nil {
			fmt.Fprintf(&b, "error: %v\n", err)
		} else {
			b.WriteString("stopped\n")
		}
		*q = nil
	default:
		if waitErr != nil {
			t.Fatalf("the query did not settle: %v", waitErr)
		}
	}
	return b.String()
}

func rowText(r fixtures.UserCount) string {
	if r.TimedOut {
		return fmt.Sprintf("%s timed-out count=%d", r.User, r.Count)
	}
	return fmt.Sprintf("%s count=%d", r.User, r.Count)
}

// dumpState prints the committed state rows and timers of operator 0,
// read from the checkpoint directly.
func (s *script) dumpState(t *testing.T) string {
	store, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: s.fs})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	b := store.NewBatch()
	defer b.Close()
	var out strings.Builder
	err = b.ScanVar(runtime.Var{}, func(key, suffix, value []byte) error {
		fmt.Fprintf(&out, "state %s:", key)
		flags, rest := value[0], value[1:]
		if flags&2 != 0 {
			at := time.Unix(0, int64(beUint64(rest))).UTC()
			fmt.Fprintf(&out, " timeout=%s", s.timeText(at))
			rest = rest[8:]
		}
		if flags&1 != 0 {
			var c fixtures.Counter
			if err := c.UnmarshalBinary(rest); err != nil {
				return err
			}
			fmt.Fprintf(&out, " count=%d", c.Count)
		} else {
			out.WriteString(" no value")
		}
		out.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	c := b.DueTimers(runtime.Scope{}, runtime.EndOfTime)
	for {
		due, err := c.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		for _, d := range due {
			fmt.Fprintf(&out, "timer %s at %s\n", d.Key, s.timeText(d.At))
		}
	}
	return out.String()
}

func (s *script) timeText(at time.Time) string {
	if s.cfg.timeout == typed.EventTimeTimeout {
		return "@" + strconv.FormatFloat(at.Sub(scriptEpoch).Seconds(), 'f', -1, 64)
	}
	return "t=" + at.Sub(scriptEpoch).String()
}

func beUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}
