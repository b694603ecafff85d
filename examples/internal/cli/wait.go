package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// watch reports a query on stderr for Main: a line for each committed
// batch, as the query's listener, and what the run did when it ends.
//
// It counts the batches itself rather than reading RecentProgress at the
// end, which keeps only the last 100 reports: a long run commits more.
// OnQueryProgress runs on the query's goroutine and the rest on Main's, so
// the counts and every write to stderr are under mu; stderr then needs no
// lock of its own, and lines from the two goroutines never interleave.
type watch struct {
	name string
	// resumable says a stopped run can be resumed: the checkpoint
	// outlives the run, and so does the input.
	resumable bool

	// deadLetters says where the dead letters go: a directory, or ""
	// when they are logged.
	deadLetterDir string
	// started is when the run started, for the status line's elapsed
	// time.
	started time.Time
	// live is the status line drawn on a terminal; nil when stderr is
	// not one, which gets a line per batch instead.
	live *liveLine

	mu     sync.Mutex
	stderr io.Writer
	// The totals of the batches committed in this run. first and last
	// are batch ids; batches == 0 leaves them meaningless.
	batches, first, last         int64
	rowsIn, rowsOut, deadLetters int64
	// lastRate is the last batch's rows processed per second.
	lastRate float64
	// watermark is the last batch's, RFC 3339, "" without one; flushed
	// says the input's end was flushed (-flush), which moves the
	// watermark past every event time.
	watermark string
	flushed   bool
}

// OnQueryProgress prints the batch and adds it to the totals. The
// runtime calls it after the batch is committed.
func (w *watch) OnQueryProgress(p runtime.QueryProgress) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batches == 0 {
		w.first = p.BatchID
	}
	w.batches++
	w.last = p.BatchID
	w.rowsIn += p.NumInputRows
	w.rowsOut += p.OutputRowsTotal()
	w.deadLetters += p.NumDeadLetters
	w.lastRate = p.ProcessedRowsPerSecond
	if t, ok := p.WatermarkTime(); ok && t.Equal(runtime.EndOfTime) {
		w.flushed, w.watermark = true, ""
	} else if ok {
		w.watermark = t.UTC().Format(time.RFC3339)
	}
	if w.live == nil {
		fmt.Fprintf(w.stderr, "%s: batch %d committed: %d rows in, %s rows out\n", w.name, p.BatchID, p.NumInputRows, p.OutputRows())
	}
}

// printf writes a line to stderr under the lock.
func (w *watch) printf(format string, args ...any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.eraseLine()
	fmt.Fprintf(w.stderr, w.name+": "+format+"\n", args...)
}

// summarize prints what the run did: the batches it committed (which a
// stop never leaves half done: a batch is committed whole or not at all),
// the rows they read and wrote, the dead letters and where they went, and
// the watermark reached. It stops the status line first.
func (w *watch) summarize() {
	w.stopLive()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.batches == 0 {
		fmt.Fprintf(w.stderr, "%s: committed no batch in this run\n", w.name)
		return
	}
	ids := fmt.Sprintf("id %d", w.first)
	if w.batches > 1 {
		ids = fmt.Sprintf("ids %d to %d", w.first, w.last)
	}
	fmt.Fprintf(w.stderr, "%s: committed %d %s in this run (%s): %d rows in, %d rows out",
		w.name, w.batches, plural(w.batches, "batch", "batches"), ids, w.rowsIn, w.rowsOut)
	if w.deadLetters > 0 {
		where := "logged"
		if w.deadLetterDir != "" {
			where = "in " + w.deadLetterDir
		}
		fmt.Fprintf(w.stderr, ", %d dead %s (%s)", w.deadLetters, plural(w.deadLetters, "letter", "letters"), where)
	}
	switch {
	case w.flushed:
		// The watermark of the flush is past every event time: a date
		// at the end of time would say nothing more.
		fmt.Fprint(w.stderr, "; input flushed (-flush)")
	case w.watermark != "":
		fmt.Fprintf(w.stderr, "; watermark %s", w.watermark)
	}
	fmt.Fprintln(w.stderr)
}

// resumeHint says where a run on the same checkpoint starts.
func (w *watch) resumeHint() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.eraseLine()
	if w.batches == 0 {
		fmt.Fprintf(w.stderr, "%s: run again with the same -checkpoint to resume where it stopped\n", w.name)
		return
	}
	fmt.Fprintf(w.stderr, "%s: run again with the same -checkpoint to resume after batch %d\n", w.name, w.last)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// wait waits for the started query q to finish by itself, or for a
// signal on signals to stop it, prints the summary and returns Main's
// result: nil when q finished by itself without error, q's error, or an
// *Interrupted when a signal stopped it.
//
// The first signal stops q with Stop, which abandons the batch in flight
// uncommitted (it runs again at the next start on the same checkpoint).
// A second signal while Stop waits for that returns at once, with q's
// goroutine still running: the program is about to exit.
func (w *watch) wait(q *typed.Query, signals <-chan os.Signal) error {
	var stoppedBy os.Signal
	select {
	case <-q.Done():
	case stoppedBy = <-signals:
		select {
		case <-q.Done():
			// q finished by itself as the signal came: its input is done,
			// so the run is a success (or q's error) as without a signal.
			stoppedBy = nil
		default:
			w.printf("%s: stopping the query; the batch in flight, if any, is abandoned uncommitted (a second signal exits at once)",
				signalName(stoppedBy))
			go q.Stop() // its result is q.Err, read below
			select {
			case <-q.Done():
			case again := <-signals:
				w.summarize()
				return &Interrupted{Signal: again, Forced: true}
			}
		}
	}
	w.summarize()
	if err := q.Err(); err != nil {
		return err
	}
	if stoppedBy == nil {
		return nil
	}
	if w.resumable {
		w.resumeHint()
	}
	return &Interrupted{Signal: stoppedBy}
}
