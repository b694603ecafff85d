package typed_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
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

// TestJoinScripts runs the scripts in testdata/join: the rules of
// stream-stream joins, batch by batch, over an in-memory checkpoint. The
// commands:
//
//	setup how=inner|left-outer|right-outer|full-outer|left-semi
//	      [left-watermark=D] [right-watermark=D] [windows=D]
//	      [between=LO,HI] [left-after=D] [left-before=D] ...
//	                      start a join of the key (User) of two streams;
//	                      between is TimeBetween, left-after LeftAfter,
//	                      left-at-or-after, left-before, left-at-or-before
//	add [left|right]      add rows to a side, one per line:
//	                      "key@SECONDS value"; both sides' rows in one
//	                      batch with "left:" and "right:" prefixes
//	run                   run what the query can, print the batches: id,
//	                      watermark, output rows (sorted), state rows
//	restart               stop the query and start it again
//	flush                 start it again, run the input to its end, then
//	                      move the watermark past every event time
//	state                 print the buffered rows of each side (key,
//	                      time, matched, value) and when each side
//	                      forgets each of its rows (its index by time)
//
// Times print as seconds after the scripts' epoch.
func TestJoinScripts(t *testing.T) {
	datadriven.Walk(t, "testdata/join", func(t *testing.T, path string) {
		s := &joinScript{t: t}
		defer s.stop()
		datadriven.RunTest(t, path, s.run)
	})
}

type joinScript struct {
	t           *testing.T
	fs          vfs.FS
	clock       *runtime.ManualClock
	left, right *typed.MemoryStream[fixtures.Click]
	sink        *batchSink[string]
	w           *typed.Writer[string]
	q           *typed.Query
	shown       int64
}

func (s *joinScript) stop() {
	if s.q != nil {
		s.q.Stop()
		s.q = nil
	}
}

func scriptTime(t time.Time) string {
	return "@" + strconv.FormatFloat(t.Sub(scriptEpoch).Seconds(), 'f', -1, 64)
}

func (s *joinScript) run(t *testing.T, d *datadriven.TestData) string {
	switch d.Cmd {
	case "setup":
		s.stop()
		s.setup(t, d)
		return s.start(t)
	case "add":
		side := ""
		if len(d.CmdArgs) > 0 {
			side = d.CmdArgs[0].Key
		}
		for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			to := side
			if rest, ok := strings.CutPrefix(line, "left:"); ok {
				to, line = "left", strings.TrimSpace(rest)
			} else if rest, ok := strings.CutPrefix(line, "right:"); ok {
				to, line = "right", strings.TrimSpace(rest)
			}
			fields := strings.Fields(line)
			key, at, _ := strings.Cut(fields[0], "@")
			sec, err := strconv.ParseFloat(at, 64)
			if err != nil {
				d.Fatalf(t, "bad row %q: %v", line, err)
			}
			c := fixtures.Click{User: key, Time: scriptEpoch.Add(time.Duration(sec * float64(time.Second)))}
			if len(fields) > 1 {
				c.Page = fields[1]
			}
			switch to {
			case "left":
				s.left.Add(c)
			case "right":
				s.right.Add(c)
			default:
				d.Fatalf(t, "add: no side for %q", line)
			}
		}
		return ""
	case "run":
		s.clock.Advance(time.Second)
		return s.settle(t)
	case "restart":
		s.stop()
		return s.start(t)
	case "flush":
		s.stop()
		return s.start(t, runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	case "state":
		s.stop()
		out := s.dump(t)
		if r := s.start(t); r != "" {
			out += r
		}
		return out
	}
	d.Fatalf(t, "unknown command %q", d.Cmd)
	return ""
}

func (s *joinScript) setup(t *testing.T, d *datadriven.TestData) {
	how := typed.Inner
	var opts []typed.JoinOption
	leftDelay, rightDelay := time.Duration(-1), time.Duration(-1)
	for _, a := range d.CmdArgs {
		v := ""
		if len(a.Vals) > 0 {
			v = a.Vals[0]
		}
		dur := func(v string) time.Duration {
			x, err := time.ParseDuration(v)
			if err != nil {
				d.Fatalf(t, "%s: %v", a.Key, err)
			}
			return x
		}
		switch a.Key {
		case "how":
			how = map[string]typed.JoinType{"inner": typed.Inner, "left-outer": typed.LeftOuter, "right-outer": typed.RightOuter,
				"full-outer": typed.FullOuter, "left-semi": typed.LeftSemi}[v]
		case "left-watermark":
			leftDelay = dur(v)
		case "right-watermark":
			rightDelay = dur(v)
		case "windows":
			opts = append(opts, typed.JoinOnWindows(typed.Tumbling(dur(v))))
		case "between":
			opts = append(opts, typed.JoinWithin(typed.TimeBetween(dur(a.Vals[0]), dur(a.Vals[1]))))
		case "left-after":
			opts = append(opts, typed.JoinWithin(typed.LeftAfter(dur(v))))
		case "left-at-or-after":
			opts = append(opts, typed.JoinWithin(typed.LeftAtOrAfter(dur(v))))
		case "left-before":
			opts = append(opts, typed.JoinWithin(typed.LeftBefore(dur(v))))
		case "left-at-or-before":
			opts = append(opts, typed.JoinWithin(typed.LeftAtOrBefore(dur(v))))
		default:
			d.Fatalf(t, "unknown setup key %q", a.Key)
		}
	}
	s.fs = vfs.NewMem()
	s.clock = runtime.NewManualClock(scriptEpoch)
	s.left = typed.NewMemoryStream[fixtures.Click]("left", 0)
	s.right = typed.NewMemoryStream[fixtures.Click]("right", 0)
	s.sink = newSink[string]()
	s.shown = -1
	l, r := typed.FromMemory(s.left), typed.FromMemory(s.right)
	if leftDelay >= 0 {
		l = watermarked(l, leftDelay)
	} else {
		opts = append(opts, typed.JoinLeftTime(clickTime))
	}
	if rightDelay >= 0 {
		r = watermarked(r, rightDelay)
	} else {
		opts = append(opts, typed.JoinRightTime(clickTime))
	}
	side := func(c *fixtures.Click) string {
		if c == nil {
			return "-"
		}
		return c.Page + scriptTime(c.Time)
	}
	out := typed.Join(byKey(l), byKey(r), how, func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string {
		row := j.Key + " " + side(j.Left) + " " + side(j.Right)
		if !j.Window.Start.IsZero() {
			row += " window=" + scriptTime(j.Window.Start)
		}
		return row
	}, opts...)
	s.w = typed.WriteTo(out, s.sink)
}

func (s *joinScript) start(t *testing.T, more ...runtime.Option) string {
	opts := append([]runtime.Option{runtime.Checkpoint("ckpt"), runtime.FileSystem(s.fs), runtime.WithManualClock(s.clock),
		runtime.PollInterval(time.Second)}, more...)
	q, err := s.w.Start(context.Background(), opts...)
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	s.q = q
	return s.settle(t)
}

func (s *joinScript) settle(t *testing.T) string {
	return settleQuery(t, &s.q, s.clock, &s.shown, func(id int64) []string {
		rows := slices.Clone(s.sink.snapshot()[id])
		slices.Sort(rows)
		return rows
	})
}

// dump prints the buffered rows of each side and the timers, read from
// the checkpoint as streamgen inspect reads it.
func (s *joinScript) dump(t *testing.T) string {
	r, m := openCheckpoint(t, s.fs)
	defer r.Close()
	var b strings.Builder
	for _, side := range []string{"left", "right"} {
		err := r.Rows(m, 0, side, func(row runtime.StateRow) error {
			var key string
			var windowed struct {
				Window typed.Window `json:"window"`
				Key    string       `json:"key"`
			}
			if err := json.Unmarshal(row.Key, &key); err != nil {
				if err := json.Unmarshal(row.Key, &windowed); err != nil {
					return err
				}
				key = windowed.Key + " window=" + scriptTime(windowed.Window.Start)
			}
			var c fixtures.Click
			if err := json.Unmarshal(row.Value, &c); err != nil {
				return err
			}
			matched := ""
			if row.Matched != nil && *row.Matched {
				matched = " matched"
			}
			fmt.Fprintf(&b, "%s %s %s%s%s\n", side, key, c.Page, scriptTime(*row.EventTime), matched)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The index of rows by the time they are forgotten: the time, then
	// the side, uvarint(len(key)), the key and the row's suffix.
	windowed := strings.HasPrefix(m.Operators[0].KeyType, "window+")
	index := m.Operators[0].Variables["byTime"].ID
	err := r.ScanState(0, func(e runtime.Entry) error {
		if e.Variable != index {
			return nil
		}
		at := time.Unix(0, int64(beUint64(e.Key)^1<<63)).UTC()
		side := map[byte]string{0: "left", 1: "right"}[e.Suffix[0]]
		n, w := binary.Uvarint(e.Suffix[1:])
		key := e.Suffix[1+w : 1+w+int(n)]
		name := string(key)
		if windowed && len(key) >= 16 {
			start := time.Unix(0, int64(beUint64(key)^1<<63)).UTC()
			name = string(key[16:]) + " window=" + scriptTime(start)
		}
		fmt.Fprintf(&b, "forget %s %s at %s\n", side, name, scriptTime(at))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
