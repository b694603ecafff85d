package typed

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Window is an event-time window, [Start, End), as Spark's window struct:
// output rows carry it as {"window": {"start": ..., "end": ...}}.
//
//streamgen:record
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// Contains reports whether t falls in the window.
func (w Window) Contains(t time.Time) bool { return !t.Before(w.Start) && t.Before(w.End) }

// String shows the window as [start, end).
func (w Window) String() string {
	return "[" + w.Start.UTC().Format(time.RFC3339Nano) + ", " + w.End.UTC().Format(time.RFC3339Nano) + ")"
}

// Windows says how event time is cut into windows: Tumbling, Sliding or
// Cumulate (optionally StartingAt an offset), Session, or TimeDifference
// (Kafka Streams' sliding windows).
type Windows struct {
	kind                           windowKind
	size, slide, gap, offset, step time.Duration
	// joinOpen: a late row still joins the open sessions it touches
	// (JoiningOpenSessions).
	joinOpen bool
}

type windowKind int

const (
	tumbling windowKind = iota
	sliding
	session
	timeDifference
	cumulate
)

// Tumbling cuts event time into windows of size that follow one another,
// as Spark's window(time, size): each row falls in exactly one.
func Tumbling(size time.Duration) Windows { return Windows{kind: tumbling, size: size, slide: size} }

// Sliding makes windows of size that start every slide, as Spark's
// window(time, size, slide): a row falls in every window that covers it
// (size/slide of them when slide divides size).
func Sliding(size, slide time.Duration) Windows {
	return Windows{kind: sliding, size: size, slide: slide}
}

// Cumulate makes the windows of Flink's CUMULATE: event time is cut into
// periods of size, as Tumbling(size) cuts it, and each period has a
// window for every step, all starting with the period and ending step,
// 2×step, ... size after its start. A row falls in each window of its
// period that ends after it, so a period's later windows hold every row
// of its earlier ones: a day's count so far, written each hour, is
// Cumulate(time.Hour, 24*time.Hour). size must be a whole multiple of
// step. As with Sliding windows, each window closes when the watermark
// reaches its end, and a row is late only once its period's last window
// has closed: until then it counts in the windows that are still open
// (as in Flink, where a row whose first window has fired is added to the
// period's later ones).
func Cumulate(step, size time.Duration) Windows {
	return Windows{kind: cumulate, size: size, slide: size, step: step}
}

// Session makes windows per key that close after gap without a row, as
// Spark's session_window(time, gap): a row opens [t, t+gap), and windows of
// one key that overlap or touch merge into one, so rows at most gap apart
// are one session (as in Spark, and Flink's SESSION).
func Session(gap time.Duration) Windows { return Windows{kind: session, gap: gap} }

// TimeDifference makes the windows of Kafka Streams' SlidingWindows
// (ofTimeDifferenceAndGrace: the grace is the watermark's delay): windows
// d long, each key's defined by its rows' event times, in milliseconds
// as Kafka's timestamps are (a row's time is cut to the millisecond
// before it). A row at t makes the window that ends at it, holding the
// rows from t-d to t, both included, and the window that begins 1 ms
// after it, from t+1ms to t+1ms+d, once a later row of its key falls
// there; a window holds every row of its key between its bounds, both
// included. So each distinct set of rows at most d apart is one window,
// made when a row enters it or leaves it, as Kafka Streams makes them. A
// Window written for it is half-open as every Window is: it ends 1 ms
// after its last instant (Kafka Streams' [3000;8000] is [3000ms, 8001ms)).
// A window takes rows while its last instant is at or after the
// watermark (Kafka Streams' windowEnd >= streamTime - grace) and closes,
// written in Append mode, once the watermark passes it; a row is late,
// and dropped, when the window that begins after it ends at or before
// the watermark, as Kafka Streams drops a record. d must be a positive
// whole number of milliseconds.
func TimeDifference(d time.Duration) Windows { return Windows{kind: timeDifference, size: d} }

// StartingAt shifts the windows' starts by offset from the Unix epoch, as
// the startTime of Spark's window (a tumbling hour starting at 15 minutes
// past).
func (w Windows) StartingAt(offset time.Duration) Windows {
	w.offset = offset
	return w
}

// JoiningOpenSessions makes a Session row that is late, whose own session
// [t, t+gap) ends at or before the watermark, still join the sessions of
// its key that are open and that it overlaps or touches, as Flink's
// session windows merge a row's window with the open ones before they
// judge it late; it is dropped only when it touches none (counted in
// numRowsDroppedByWatermark, and sent to LateRows). By default, as
// in Spark, every such row is dropped. Flink judges row by row, as rows
// arrive; here a batch's rows that are not late join their key's
// sessions first, in event-time order, then the late ones, in the order
// they came, as Flink takes them: a late row may join a session a row
// after it in the same batch made that was not late, or a late row before
// it extended. For Session windows only (with or without GapBy).
func (w Windows) JoiningOpenSessions() Windows {
	w.joinOpen = true
	return w
}

// String writes the windows as the call that makes them, as in
// "Sliding(10m0s, 5m0s).StartingAt(15s)".
func (w Windows) String() string {
	var s string
	switch w.kind {
	case session:
		if w.joinOpen {
			return "Session(" + w.gap.String() + ").JoiningOpenSessions()"
		}
		return "Session(" + w.gap.String() + ")"
	case timeDifference:
		return "TimeDifference(" + w.size.String() + ")"
	case sliding:
		s = "Sliding(" + w.size.String() + ", " + w.slide.String() + ")"
	case cumulate:
		s = "Cumulate(" + w.step.String() + ", " + w.size.String() + ")"
	default:
		s = "Tumbling(" + w.size.String() + ")"
	}
	if w.offset != 0 {
		s += ".StartingAt(" + w.offset.String() + ")"
	}
	return s
}

// meta describes tumbling, sliding or cumulative windows for the
// checkpoint, the offset taken modulo the slide.
func (w Windows) meta() *runtime.WindowsMeta {
	return &runtime.WindowsMeta{Size: w.size, Slide: w.slide, Offset: time.Duration(mod(int64(w.offset), max(int64(w.slide), 1))), Step: w.step}
}

// maxWindowSpan bounds a window's size, slide, step and gap: the event
// times kept (1700 to 2200) leave that much room before the ends of int64
// nanoseconds, which a window's bounds must not pass.
const maxWindowSpan = 20 * 365 * 24 * time.Hour

func (w Windows) validate() error {
	if longest := max(w.size, w.slide, w.step, w.gap); longest > maxWindowSpan {
		return fmt.Errorf("streamgen: %v: a window's size, slide, step or gap may be 20 years at most", w)
	}
	if w.joinOpen && w.kind != session {
		return fmt.Errorf("streamgen: %v.JoiningOpenSessions(): only session windows have sessions to join", w)
	}
	switch w.kind {
	case session:
		if w.gap <= 0 {
			return fmt.Errorf("streamgen: Session(%v): the gap must be positive", w.gap)
		}
	case timeDifference:
		if w.size <= 0 || w.size%time.Millisecond != 0 {
			return fmt.Errorf("streamgen: TimeDifference(%v): the difference must be a positive whole number of milliseconds", w.size)
		}
		if w.offset != 0 {
			return fmt.Errorf("streamgen: %v: the windows of a time difference follow their rows, and start at no offset", w)
		}
	case cumulate:
		if w.step <= 0 || w.size <= 0 {
			return fmt.Errorf("streamgen: %v: the step and the size must be positive", w)
		}
		if w.size%w.step != 0 {
			return fmt.Errorf("streamgen: %v: the size must be a whole multiple of the step", w)
		}
	default:
		if w.size <= 0 || w.slide <= 0 {
			return fmt.Errorf("streamgen: windows of size %v sliding by %v: both must be positive", w.size, w.slide)
		}
		if w.slide > w.size {
			return fmt.Errorf("streamgen: windows of size %v sliding by %v: the slide must not pass the size", w.size, w.slide)
		}
	}
	return nil
}

// assign calls fn with each tumbling, sliding or cumulative window that
// holds t. Tumbling and sliding windows come the latest first (as Spark
// lists them), as Spark computes them: the windows whose start is offset
// + k*slide and that cover t. Cumulative windows come the longest first:
// those of t's period that end after t.
func (w Windows) assign(ns int64, fn func(start, end int64)) {
	slide, size, offset := int64(w.slide), int64(w.size), int64(w.offset)
	// The last window start at or before ns.
	last := ns - mod(ns-offset, slide)
	if w.kind == cumulate {
		for end := last + size; end > ns; end -= int64(w.step) {
			fn(last, end)
		}
		return
	}
	for start := last; start > ns-size; start -= slide {
		fn(start, start+size)
	}
}

// oneEach returns the size and offset of windows that hold each row in
// one of them (tumbling, or sliding by their size; ok is false for the
// others): a row's window is then the one whose id (see id) is its
// start, ns - mod(ns-offset, size), as assign gives it.
func (w Windows) oneEach() (size, offset int64, ok bool) {
	if (w.kind != tumbling && w.kind != sliding) || w.slide != w.size || w.size <= 0 {
		return 0, 0, false
	}
	return int64(w.size), int64(w.offset), true
}

// lateFor returns the number of t's windows (tumbling, sliding or
// cumulative) when all of them end at or before the watermark wm, and 0
// when one ends after it: a row wholly late, and for how many windows.
func (w Windows) lateFor(t, wm time.Time) int64 {
	ns, slide, size, offset := t.UnixNano(), int64(w.slide), int64(w.size), int64(w.offset)
	last := ns - mod(ns-offset, slide)
	if last+size > wm.UnixNano() {
		return 0
	}
	var n int64
	w.assign(ns, func(int64, int64) { n++ })
	return n
}

// perRow is the most windows (tumbling, sliding or cumulative) a row
// falls in: 1 for windows that cannot be, which Start refuses.
func (w Windows) perRow() int64 {
	switch {
	case w.kind == cumulate && w.step > 0:
		return int64(w.size / w.step)
	case w.kind != cumulate && w.slide > 0:
		return int64((w.size + w.slide - 1) / w.slide)
	}
	return 1
}

// id is what tells a window from the others of its key, given its
// bounds: its start, or, for cumulative windows, which share their
// period's start, its end.
func (w Windows) id(start, end int64) int64 {
	if w.kind == cumulate {
		return end
	}
	return start
}

// bounds is id's inverse: the start and end of the window id names.
func (w Windows) bounds(id int64) (start, end int64) {
	if w.kind == cumulate {
		return id - 1 - mod(id-1-int64(w.offset), int64(w.size)), id
	}
	return id, id + int64(w.size)
}

// mod is a % b for b > 0, never negative.
func mod(a, b int64) int64 {
	m := a % b
	if m < 0 {
		m += b
	}
	return m
}

// Windowed is a grouping key made of a window and a key.
type Windowed[K comparable] struct {
	Window Window
	Key    K
}

// appendWindow appends the window of size that starts at start, in
// Unix nanoseconds, as a windowed key begins with it: its start and end,
// 8 ordered bytes each (runtime.AppendTimedKey).
func appendWindow(b []byte, start, size int64) []byte {
	return runtime.AppendTimedKey(runtime.AppendTimedKey(b, start), start+size)
}

// readWindow returns the start of the window a windowed key b begins
// with, which must be size long: a stored window of another length was
// written by windows the query's are not.
func readWindow(b []byte, size int64) (int64, error) {
	start, end, err := readBounds(b)
	if err == nil && end-start != size {
		err = fmt.Errorf("streamgen: a stored window is %v long, the query's windows %v: the window size changed", time.Duration(end-start), time.Duration(size))
	}
	return start, err
}

// readBounds returns the bounds of the window a windowed key b begins
// with.
func readBounds(b []byte) (start, end int64, err error) {
	if len(b) < 16 {
		return 0, 0, fmt.Errorf("streamgen: a key of %d bytes does not begin with its window", len(b))
	}
	return int64(binary.BigEndian.Uint64(b) ^ 1<<63), int64(binary.BigEndian.Uint64(b[8:]) ^ 1<<63), nil
}

// windowedCodec encodes a Windowed key: the window's start and end, 8
// ordered bytes each, then the key's encoding. Keys sort by window start.
// A windowKey holds its window's id (Windows.id).
func windowedCodec[K comparable](kc keyCodec[K], windows Windows) keyCodec[windowKey[K]] {
	size := int64(windows.size)
	encode := func(b []byte, w *windowKey[K]) ([]byte, error) {
		return kc.encode(appendWindow(b, w.start, size), &w.key)
	}
	decode := func(b []byte, w *windowKey[K]) (err error) {
		if w.start, err = readWindow(b, size); err != nil {
			return err
		}
		return kc.decode(b[16:], &w.key)
	}
	if windows.kind == cumulate {
		meta := windows.meta()
		encode = func(b []byte, w *windowKey[K]) ([]byte, error) {
			start, end := windows.bounds(w.start)
			return kc.encode(runtime.AppendTimedKey(runtime.AppendTimedKey(b, start), end), &w.key)
		}
		decode = func(b []byte, w *windowKey[K]) error {
			start, end, err := readBounds(b)
			if err != nil {
				return err
			}
			if err := meta.Check(start, end); err != nil {
				return fmt.Errorf("streamgen: a stored window: %w", err)
			}
			w.start = windows.id(start, end)
			return kc.decode(b[16:], &w.key)
		}
	}
	c := wrap(kc, "window+", encode, decode)
	c.windows = windows.meta()
	c.parse = windowedParse(kc, c.windows)
	return c
}
