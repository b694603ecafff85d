package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/streamgen/streamgen/runtime"
)

// statusEvery is how often the status line of a run on a terminal is
// redrawn.
const statusEvery = 250 * time.Millisecond

// ticker is a stderr that draws the status line at its own ticks rather
// than on a terminal's clock: the tests' stand-in for a terminal.
type ticker interface {
	statusTicks() <-chan time.Time
}

// liveLine is the status line of a run on a terminal, redrawn in place
// (a carriage return and an erase to the end of the line) by a goroutine
// that the watch starts with the query and stops before its summary.
type liveLine struct {
	ticks     <-chan time.Time
	stopTicks func()
	quit      chan struct{}
	done      chan struct{}
	running   bool // startLive has started the goroutine
	// width is the terminal's, in columns; 0 when unknown. A longer
	// line would wrap, and the next draw would not erase all of it.
	width func() int
	// shown says a line is drawn, to erase before other output; under
	// the watch's mu.
	shown bool
}

// newLiveLine returns the status line of stderr when it is a terminal
// (or a ticker), nil otherwise: a stderr that is a file or a pipe gets a
// plain line per batch instead.
func newLiveLine(stderr io.Writer) *liveLine {
	l := &liveLine{quit: make(chan struct{}), done: make(chan struct{}), stopTicks: func() {}, width: func() int { return 0 }}
	switch w := stderr.(type) {
	case ticker:
		l.ticks = w.statusTicks()
	case *os.File:
		if !term.IsTerminal(int(w.Fd())) {
			return nil
		}
		t := time.NewTicker(statusEvery)
		l.ticks, l.stopTicks = t.C, t.Stop
		l.width = func() int {
			width, _, err := term.GetSize(int(w.Fd()))
			if err != nil {
				return 0
			}
			return width
		}
	default:
		return nil
	}
	return l
}

// startLive draws q's status line at each tick until stopLive.
func (w *watch) startLive(q *runtime.Query) {
	l := w.live
	l.running = true
	go func() {
		defer close(l.done)
		for {
			select {
			case <-l.quit:
				return
			case now := <-l.ticks:
				w.drawStatus(q.Status(), now)
			}
		}
	}()
}

// stopLive stops the status line's goroutine, waits for it and erases
// the line. It may be called more than once.
func (w *watch) stopLive() {
	l := w.live
	if l == nil || !l.running {
		return
	}
	select {
	case <-l.quit:
	default:
		close(l.quit)
	}
	<-l.done
	l.stopTicks()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.eraseLine()
}

// eraseLine erases the status line before other output; called with mu
// held.
func (w *watch) eraseLine() {
	if w.live != nil && w.live.shown {
		fmt.Fprint(w.stderr, "\r\x1b[K")
		w.live.shown = false
	}
}

// drawStatus draws the status line of st at now.
func (w *watch) drawStatus(st runtime.Status, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := w.statusLine(st, now)
	if width := w.live.width(); width > 1 && len(line) >= width {
		line = line[:width-1] // the line is ASCII
	}
	fmt.Fprintf(w.stderr, "\r\x1b[K%s", line)
	w.live.shown = true
}

// statusLine says what the query is doing at now: the batch running, the
// files it has done of those it reads, its rows and their rate, or else
// the last batch committed and its rate (or what the query waits for);
// then the watermark and the time since the run started. Called with mu
// held.
func (w *watch) statusLine(st runtime.Status, now time.Time) string {
	parts := []string{}
	switch b := st.Batch; {
	case b != runtime.RunningBatch{}:
		parts = append(parts, fmt.Sprintf("batch %d running", b.BatchID))
		if b.InputsPlanned > 0 {
			parts = append(parts, fmt.Sprintf("%d of %d %s", b.InputsDone, b.InputsPlanned, plural(b.InputsPlanned, "file", "files")))
		}
		read := fmt.Sprintf("%d rows read", b.NumInputRows)
		if secs := now.Sub(b.Started).Seconds(); secs > 0 {
			read += fmt.Sprintf(" (%.0f rows/s)", float64(b.NumInputRows)/secs)
		}
		parts = append(parts, read)
	case w.batches > 0:
		parts = append(parts, fmt.Sprintf("batch %d committed (%.0f rows/s)", w.last, w.lastRate))
		if !st.IsTriggerActive {
			parts = append(parts, strings.ToLower(st.Message))
		}
	default:
		parts = append(parts, strings.ToLower(st.Message))
	}
	switch {
	case w.flushed:
		parts = append(parts, "watermark flushed")
	case w.watermark != "":
		parts = append(parts, "watermark "+w.watermark)
	}
	parts = append(parts, now.Sub(w.started).Round(time.Second).String()+" elapsed")
	return w.name + ": " + strings.Join(parts, ", ")
}
