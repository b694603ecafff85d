package typed_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestCheckpointKeepsItsWindows: a checkpoint describes the windows of
// its windowed aggregations and window joins. A pipeline whose windows
// are of another size is refused at start, whatever the options (the
// stored windows would be read as the query's); windows of the same size
// that start elsewhere or more often are refused unless the change is
// allowed; the same windows, an offset of a whole slide included, start.
// From the checkpoint alone, a window that is none of the operator's is
// refused.
func TestCheckpointKeepsItsWindows(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	for i := range 200 {
		m.Add(click(fmt.Sprint("u", i%7), i*7))
	}
	user := func(c *fixtures.Click) string { return c.User }
	counts := func(w typed.Windows) *typed.Writer[windowCount] {
		ws := typed.GroupByWindow(typed.FromMemory(m), clickTime, w, user)
		return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Update)
	}
	ck := newCheckpoint()
	if err := runToEnd(t, counts(typed.Tumbling(time.Minute)), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta := openCheckpoint(t, ck.fs)
	if w := meta.Operators[0].Windows; w == nil || *w != (runtime.WindowsMeta{Size: time.Minute, Slide: time.Minute}) {
		t.Fatalf("the checkpoint describes the windows as %v", w)
	}
	start := at(0).UnixNano()
	for _, bad := range []struct{ start, end int64 }{{start, start + int64(2*time.Minute)}, {start + int64(time.Second), start + int64(time.Second+time.Minute)}} {
		key := fmt.Sprintf(`{"window":{"start":%q,"end":%q},"key":"u1"}`,
			time.Unix(0, bad.start).UTC().Format(time.RFC3339Nano), time.Unix(0, bad.end).UTC().Format(time.RFC3339Nano))
		if _, err := c.ParseKey("0", []byte(key)); !errors.Is(err, runtime.ErrNotOperatorsWindow) || !errors.Is(err, runtime.ErrBadStateKey) {
			t.Errorf("%s from the checkpoint alone: %v, want ErrNotOperatorsWindow", key, err)
		}
	}
	c.Close()

	for _, tc := range []struct {
		windows typed.Windows
		want    string // "" to start; else the refusal
		allowed bool   // whether AllowPipelineChanges lets it start
	}{
		{typed.Tumbling(2 * time.Minute), "its windows were 1m0s long, are now 2m0s long", false},
		{typed.Sliding(2*time.Minute, time.Minute), "its windows were 1m0s long, are now 2m0s long, one every 1m0s", false},
		{typed.Sliding(time.Minute, 30*time.Second), "its windows were 1m0s long, are now 1m0s long, one every 30s", true},
		{typed.Tumbling(time.Minute).StartingAt(10 * time.Second), "its windows were 1m0s long, are now 1m0s long, starting 10s past the epoch (modulo 1m0s)", true},
		{typed.Tumbling(time.Minute).StartingAt(-50 * time.Second), "are now 1m0s long, starting 10s past the epoch (modulo 1m0s)", true},
		{typed.Tumbling(time.Minute).StartingAt(time.Minute), "", true},
		{typed.Tumbling(time.Minute), "", true},
	} {
		err := runToEnd(t, counts(tc.windows), ck.opts()...)
		if tc.want == "" {
			if err != nil {
				t.Errorf("windows %v: %v", tc.windows, err)
			}
			continue
		}
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("windows %v: %v, want a refusal saying %q", tc.windows, err, tc.want)
		}
		err = runToEnd(t, counts(tc.windows), ck.opts(runtime.AllowPipelineChanges())...)
		if tc.allowed != (err == nil) {
			t.Errorf("windows %v with the change allowed: %v", tc.windows, err)
		}
		if tc.allowed {
			// Back to the checkpoint's windows for the next case.
			if err := runToEnd(t, counts(typed.Tumbling(time.Minute)), ck.opts(runtime.AllowPipelineChanges())...); err != nil {
				t.Fatal(err)
			}
		}
	}

	for w, want := range map[typed.Windows]string{
		typed.Tumbling(time.Minute):                                        "Tumbling(1m0s)",
		typed.Sliding(time.Hour, time.Minute).StartingAt(15 * time.Second): "Sliding(1h0m0s, 1m0s).StartingAt(15s)",
		typed.Session(30 * time.Second):                                    "Session(30s)",
	} {
		if w.String() != want {
			t.Errorf("windows %s, want %s", w, want)
		}
	}

	// Session windows keep their gap: another is refused unless the
	// change is allowed.
	sck := newCheckpoint()
	sessions := func(gap time.Duration) *typed.Writer[windowCount] {
		ws := typed.GroupByWindow(typed.FromMemory(m), clickTime, typed.Session(gap), user)
		return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Complete)
	}
	if err := runToEnd(t, sessions(20*time.Second), sck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta = openCheckpoint(t, sck.fs)
	if w := meta.Operators[0].Windows; w == nil || *w != (runtime.WindowsMeta{Gap: 20 * time.Second}) {
		t.Fatalf("the sessions' checkpoint describes their windows as %v", w)
	}
	c.Close()
	if err := runToEnd(t, sessions(40*time.Second), sck.opts()...); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) ||
		!strings.Contains(err.Error(), "its windows were sessions closed after 20s without a row, are now sessions closed after 40s without a row") {
		t.Errorf("sessions of another gap: %v", err)
	}
	if err := runToEnd(t, sessions(40*time.Second), sck.opts(runtime.AllowPipelineChanges())...); err != nil {
		t.Errorf("sessions of another gap, the change allowed: %v", err)
	}

	// A join on windows keeps its windows too.
	jck := newCheckpoint()
	left := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(m), clickTime, time.Minute), user)
	join := typed.WriteTo(typed.Join(left, left, typed.Inner,
		func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Key },
		typed.JoinOnWindows(typed.Sliding(time.Minute, 20*time.Second)), typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime)), newSink[string]())
	if err := runToEnd(t, join, jck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta = openCheckpoint(t, jck.fs)
	if w := meta.Operators[0].Windows; w == nil || *w != (runtime.WindowsMeta{Size: time.Minute, Slide: 20 * time.Second}) {
		t.Fatalf("the join's checkpoint describes its windows as %v", w)
	}
	c.Close()
	longer := typed.WriteTo(typed.Join(left, left, typed.Inner,
		func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Key },
		typed.JoinOnWindows(typed.Sliding(2*time.Minute, 20*time.Second)), typed.JoinLeftTime(clickTime), typed.JoinRightTime(clickTime)), newSink[string]())
	for i, opts := range [][]runtime.Option{jck.opts(), jck.opts(runtime.AllowPipelineChanges())} {
		if err := runToEnd(t, longer, opts...); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "its windows were 1m0s long, one every 20s, are now 2m0s long") {
			t.Errorf("the join on longer windows (changes allowed: %v): %v", i == 1, err)
		}
	}
}

// TestCheckpointKeepsCumulativeWindows: a checkpoint describes
// cumulative windows with their step; windows of another step or start,
// or tumbling windows of the period's size, are refused at start whatever
// the options (the stored windows would be read as the query's); from
// the checkpoint alone, each of a period's windows is the operator's,
// and a window that does not end at a step is not.
func TestCheckpointKeepsCumulativeWindows(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	for i := range 200 {
		m.Add(click(fmt.Sprint("u", i%7), i*7))
	}
	counts := func(w typed.Windows) *typed.Writer[windowCount] {
		ws := typed.GroupByWindow(typed.FromMemory(m), clickTime, w, func(c *fixtures.Click) string { return c.User })
		return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), newSink[windowCount]()).OutputMode(typed.Update)
	}
	cumulate := typed.Cumulate(20*time.Second, time.Minute)
	if got, want := cumulate.StartingAt(5*time.Second).String(), "Cumulate(20s, 1m0s).StartingAt(5s)"; got != want {
		t.Errorf("windows %s, want %s", got, want)
	}
	ck := newCheckpoint()
	if err := runToEnd(t, counts(cumulate), ck.opts()...); err != nil {
		t.Fatal(err)
	}
	c, meta := openCheckpoint(t, ck.fs)
	if w := meta.Operators[0].Windows; w == nil || *w != (runtime.WindowsMeta{Size: time.Minute, Slide: time.Minute, Step: 20 * time.Second}) {
		t.Fatalf("the checkpoint describes the windows as %v", w)
	}
	start := at(0).Truncate(time.Minute).UnixNano() // a period's start
	for _, tc := range []struct {
		end int64
		ok  bool
	}{{start + int64(20*time.Second), true}, {start + int64(40*time.Second), true}, {start + int64(time.Minute), true},
		{start + int64(50*time.Second), false}, {start + int64(80*time.Second), false}} {
		key := fmt.Sprintf(`{"window":{"start":%q,"end":%q},"key":"u1"}`,
			time.Unix(0, start).UTC().Format(time.RFC3339Nano), time.Unix(0, tc.end).UTC().Format(time.RFC3339Nano))
		if _, err := c.ParseKey("0", []byte(key)); tc.ok != (err == nil) || !tc.ok && !errors.Is(err, runtime.ErrNotOperatorsWindow) {
			t.Errorf("%s from the checkpoint alone: %v, want it read: %v", key, err, tc.ok)
		}
	}
	c.Close()
	for _, tc := range []struct {
		windows typed.Windows
		want    string
	}{
		{typed.Tumbling(time.Minute), "its windows were from 20s to 1m0s long by 20s, all starting every 1m0s, are now 1m0s long"},
		{typed.Cumulate(30*time.Second, time.Minute), "are now from 30s to 1m0s long by 30s, all starting every 1m0s"},
		// A key holds its window's end: read by other periods, it would
		// be another window.
		{cumulate.StartingAt(10 * time.Second), "are now from 20s to 1m0s long by 20s, all starting every 1m0s, starting 10s past the epoch"},
	} {
		for _, opts := range [][]runtime.Option{ck.opts(), ck.opts(runtime.AllowPipelineChanges())} {
			if err := runToEnd(t, counts(tc.windows), opts...); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("windows %v: %v, want a refusal saying %q", tc.windows, err, tc.want)
			}
		}
	}
	if err := runToEnd(t, counts(cumulate), ck.opts()...); err != nil {
		t.Errorf("the same windows again: %v", err)
	}
}

// TestStoredWindowOfAnotherLength: a windowed aggregation and a window
// join read back the windows and keys they store, and refuse a stored
// window of another length (written by other windows) rather than read
// it as one of theirs: the backstop behind the refusal at start.
func TestStoredWindowOfAnotherLength(t *testing.T) {
	for _, join := range []bool{false, true} {
		minute := typed.NewWindowKeys(typed.Tumbling(time.Minute), join)
		sliding := typed.NewWindowKeys(typed.Sliding(time.Minute, 20*time.Second), join)
		two := typed.NewWindowKeys(typed.Tumbling(2*time.Minute), join)
		for _, start := range []int64{0, int64(time.Minute), -int64(time.Hour), 1 << 60} {
			for _, key := range []string{"", "u1", "a\x00b"} {
				b, err := minute.Encode(start, key)
				if err != nil {
					t.Fatal(err)
				}
				for name, same := range map[string]typed.WindowKeys{"tumbling(1m)": minute, "sliding(1m, 20s)": sliding} {
					gotStart, gotKey, err := same.Decode(b)
					if err != nil || gotStart != start || gotKey != key {
						t.Errorf("join %v: %s read (%d, %q) back as (%d, %q), %v", join, name, start, key, gotStart, gotKey, err)
					}
				}
				_, _, err = two.Decode(b)
				if err == nil || !strings.Contains(err.Error(), "a stored window is 1m0s long, the query's windows 2m0s") {
					t.Errorf("join %v: a 1m window read by 2m windows: %v, want the lengths named", join, err)
				}
			}
		}
		if _, _, err := minute.Decode([]byte("short")); err == nil {
			t.Errorf("join %v: a key of 5 bytes was read as a window", join)
		}
	}
}
