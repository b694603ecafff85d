package typed_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// errSinkClosed is an error as this module's sinks (the kafka package's)
// return them, prefixed.
var errSinkClosed = errors.New("streamgen: sink closed")

// onePrefix fails unless err's message says "streamgen: " exactly once.
func onePrefix(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	if n := strings.Count(err.Error(), "streamgen: "); n != 1 {
		t.Errorf("%s: the message says \"streamgen: \" %d times:\n%v", what, n, err)
	}
}

// TestOutputModeMessagesNameTheFix: a query whose output mode its
// operator does not allow is refused with the call that fixes it, and
// without OutputMode the query takes the operator's mode.
func TestOutputModeMessagesNameTheFix(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2), click("a", 3))
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	r := &recorder{}
	flatAppend := typed.FlatMapGroupsWithState(byUser, typed.Append, typed.NoTimeout, r.fn)
	flatUpdate := typed.FlatMapGroupsWithState(byUser, typed.Update, typed.NoTimeout,
		func(user string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
			out, err := countClicks(user, rows, st)
			emit(out)
			return err
		})
	mapped := typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks)
	sink := newSink[fixtures.UserCount]()
	for _, tc := range []struct {
		name string
		w    *typed.Writer[fixtures.UserCount]
		want []string
	}{
		{"map in append mode", typed.WriteTo(mapped, sink).OutputMode(typed.Append),
			[]string{"needs the Update output mode; the query has Append: use WriteTo(...).OutputMode(typed.Update), or leave OutputMode out"}},
		{"append operator, update query", typed.WriteTo(flatAppend, sink).OutputMode(typed.Update),
			[]string{"is in Append mode; the query has Update: use WriteTo(...).OutputMode(typed.Append), or leave OutputMode out", "or give the operator typed.Update (mode=update in its //streamgen:flatMapGroupsWithState directive)"}},
		{"complete", typed.WriteTo(flatUpdate, sink).OutputMode(typed.Complete),
			[]string{"does not support the Complete output mode: use WriteTo(...).OutputMode(typed.Update)"}},
	} {
		_, err := tc.w.Start(context.Background())
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, want)
			}
		}
		onePrefix(t, tc.name, err)
	}

	// The operators' own modes, with no OutputMode: both run.
	for name, s := range map[string]typed.Stream[fixtures.UserCount]{"flatMapGroupsWithState Update": flatUpdate, "mapGroupsWithState": mapped} {
		out := newSink[fixtures.UserCount]()
		if err := runToEnd(t, typed.WriteTo(s, out)); err != nil {
			t.Errorf("%s without OutputMode: %v", name, err)
		} else if got := len(out.rows()); got != 2 {
			t.Errorf("%s without OutputMode: %d rows, want one per user (2)", name, got)
		}
	}
}

// plainState is a struct that is not a record: it has no generated codec.
type plainState struct{ N int }

// plainStateProcessor declares a state variable of plainState.
type plainStateProcessor struct{ s *typed.ValueState[plainState] }

func (p *plainStateProcessor) Init(h *typed.Handle) error {
	p.s = typed.NewValueState[plainState](h, "count")
	return nil
}

func (p *plainStateProcessor) HandleInputRows(context.Context, string, iter.Seq[fixtures.Click], typed.TimerValues, func(fixtures.UserCount)) error {
	return nil
}

// initFails is a processor whose Init fails.
type initFails struct{}

func (initFails) Init(*typed.Handle) error {
	return fmt.Errorf("%w: a test's", typed.ErrInvalidHandleState)
}

func (initFails) HandleInputRows(context.Context, string, iter.Seq[fixtures.Click], typed.TimerValues, func(fixtures.UserCount)) error {
	return nil
}

// TestNonRecordStateSaysHow: a state variable of a struct that is not a
// record is refused at Start with what to do about it.
func TestNonRecordStateSaysHow(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	s := typed.TransformWithState(byUser, &plainStateProcessor{}, typed.TimeModeNone, typed.Append)
	_, err := typed.WriteTo(s, newSink[fixtures.UserCount]()).Start(context.Background())
	for _, want := range []string{`state variable "count"`, "typed_test.plainState is a struct but not a record", "add //streamgen:record to its doc comment and run go generate"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	onePrefix(t, "non-record state", err)
}

// TestErrorsSayStreamgenOnce drives the paths on which an error of this
// module is wrapped by another: errors at Start, a sink's error, a panic
// in user code and a grouping key that cannot be encoded.
func TestErrorsSayStreamgenOnce(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(click("a", 1), click("b", 2))
	in := typed.FromMemory(m)
	eventTime := func(c *fixtures.Click) time.Time { return c.Time }

	twice := typed.WithWatermark(typed.WithWatermark(in, eventTime, time.Second), eventTime, time.Second)
	_, err := typed.WriteTo(twice, newSink[fixtures.Click]()).Start(context.Background())
	onePrefix(t, "WithWatermark twice", err)

	type point struct{ X, Y float64 }
	byPoint := typed.GroupByKey(in, func(c *fixtures.Click) point { return point{} })
	_, err = typed.WriteTo(typed.MapGroupsWithState(byPoint, typed.NoTimeout, func(point, iter.Seq[fixtures.Click], *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		return fixtures.UserCount{}, nil
	}), newSink[fixtures.UserCount]()).Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "add //streamgen:record") {
		t.Errorf("a struct key that is not a record: err = %v", err)
	}
	onePrefix(t, "struct key", err)

	// A files sink whose directory is a file fails the batch.
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err = runToEnd(t, typed.WriteTo(in, typed.FilesSink[fixtures.Click](file)))
	onePrefix(t, "files sink into a file", err)

	// A dead-letter directory that is a file fails the batch of a bad line.
	in2 := t.TempDir()
	if err := os.WriteFile(filepath.Join(in2, "bad.jsonl"), []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = runToEnd(t, typed.WriteTo(typed.From[fixtures.Click](runtime.FilesSource(in2, runtime.FilesOptions{})), newSink[fixtures.Click]()),
		runtime.DeadLetters(runtime.DeadLetterDir(file)))
	if err == nil || !strings.Contains(err.Error(), "dead-letter sink") {
		t.Errorf("dead letters into a file: err = %v", err)
	}
	onePrefix(t, "dead letters into a file", err)

	// A sink of the user's that returns one of this module's errors.
	failing := newSink[fixtures.Click]()
	failing.fail = func(int64) error { return errSinkClosed }
	err = runToEnd(t, typed.WriteTo(in, failing))
	if !errors.Is(err, errSinkClosed) {
		t.Errorf("sink error: errors.Is lost the sink's error: %v", err)
	}
	onePrefix(t, "sink error", err)

	// A panic in a stateful function.
	byUser := typed.GroupByKey(in, func(c *fixtures.Click) string { return c.User })
	panicky := typed.MapGroupsWithState(byUser, typed.NoTimeout, func(string, iter.Seq[fixtures.Click], *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		panic("boom")
	})
	err = runToEnd(t, typed.WriteTo(panicky, newSink[fixtures.UserCount]()))
	onePrefix(t, "panic in mapGroupsWithState", err)

	// A GroupState misuse returned by the function.
	misuse := typed.MapGroupsWithState(byUser, typed.NoTimeout, func(_ string, _ iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		return fixtures.UserCount{}, st.SetTimeoutTimestamp(time.Now()) // NoTimeout: refused
	})
	err = runToEnd(t, typed.WriteTo(misuse, newSink[fixtures.UserCount]()))
	if !errors.Is(err, typed.ErrGroupState) {
		t.Errorf("GroupState misuse: errors.Is(err, ErrGroupState) is false: %v", err)
	}
	onePrefix(t, "GroupState misuse", err)

	// A processor whose Init fails with one of this module's errors.
	s := typed.TransformWithState(byUser, initFails{}, typed.TimeModeNone, typed.Append)
	_, err = typed.WriteTo(s, newSink[fixtures.UserCount]()).Start(context.Background())
	if !errors.Is(err, typed.ErrInvalidHandleState) {
		t.Errorf("Init error: errors.Is lost it: %v", err)
	}
	onePrefix(t, "Init error", err)

	// A panic in a stateless stage.
	mapped := typed.Map(in, func(c *fixtures.Click) fixtures.Click { panic("boom") })
	err = runToEnd(t, typed.WriteTo(mapped, newSink[fixtures.Click]()))
	onePrefix(t, "panic in Map", err)

	// A source that fails with one of this module's errors (as the Kafka
	// source's say "streamgen: kafka source ..."), at planning and at
	// reading.
	good := t.TempDir()
	if err := os.WriteFile(filepath.Join(good, "a.jsonl"), []byte(`{"user":"a"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, at := range []string{"next", "read"} {
		src := failingSource{Source: runtime.FilesSource(good, runtime.FilesOptions{}), at: at}
		err = runToEnd(t, typed.WriteTo(typed.From[fixtures.Click](src), newSink[fixtures.Click]()))
		if !errors.Is(err, errSourceDown) {
			t.Errorf("source error at %s: errors.Is lost it: %v", at, err)
		}
		onePrefix(t, "source error at "+at, err)
	}
}

var errSourceDown = errors.New("streamgen: the source is down")

// failingSource is a source whose Next or Read fails.
type failingSource struct {
	runtime.Source
	at string
}

func (s failingSource) Next(ctx context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit) (json.RawMessage, error) {
	if s.at == "next" {
		return nil, errSourceDown
	}
	return s.Source.Next(ctx, committed, upTo, limit)
}

func (s failingSource) Read(ctx context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	if s.at == "read" {
		return errSourceDown
	}
	return s.Source.Read(ctx, start, end, fn)
}

// TestBindingLateRows: the late rows of a binding's watermark go to the
// sink given with BindingLateRows (which the <binding>LateRows functions
// the generator writes return), here with a binding written by hand as
// the generator writes it; given to an operator without such a
// watermark, the option is an error at Start, not ignored.
func TestBindingLateRows(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	r := &recorder{timeout: func(st *typed.GroupState[fixtures.Counter], last time.Time) error {
		return st.SetTimeoutTimestamp(last.Add(time.Hour))
	}}
	binding := func(in typed.Stream[fixtures.Click], opts ...typed.GroupsOption[string, fixtures.Counter]) typed.Stream[fixtures.UserCount] {
		in = typed.WithWatermark(in, func(c *fixtures.Click) time.Time { return c.Time }, 5*time.Second,
			typed.BindingWatermarkOptions[string, fixtures.Counter, fixtures.Click](opts)...)
		byKey := typed.GroupByKey(in, func(c *fixtures.Click) string { return c.User })
		return typed.FlatMapGroupsWithState(byKey, typed.Update, typed.EventTimeTimeout, r.fn, opts...)
	}
	late := newSink[fixtures.Click]()
	w := typed.WriteTo(binding(typed.FromMemory(m), typed.BindingLateRows[string, fixtures.Counter](late)), newSink[fixtures.UserCount]())
	ck := newCheckpoint()
	m.Add(click("a", 10), click("b", 20))
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	// The watermark is 20s - 5s: a row at 15s or before is late.
	m.Add(click("a", 15), click("c", 16), click("b", 3))
	if err := runToEnd(t, w, ck.opts()...); err != nil {
		t.Fatal(err)
	}
	got := late.rows()
	if len(got) != 2 || got[0] != click("a", 15) || got[1] != click("b", 3) {
		t.Errorf("late rows %v, want a at 15s and b at 3s", got)
	}

	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	plain := typed.FlatMapGroupsWithState(byUser, typed.Update, typed.NoTimeout, r.fn, typed.BindingLateRows[string, fixtures.Counter](late))
	_, err := typed.WriteTo(plain, newSink[fixtures.UserCount]()).Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), "pass typed.LateRows(sink) to WithWatermark") {
		t.Errorf("a late-rows option no watermark took: err = %v", err)
	}
}
