// Command quickstart is a complete streamgen program to copy: it reads
// clicks from JSON-lines files, groups each user's clicks into sessions
// that end after 30 minutes without a click, and writes the sessions as
// JSON lines, with its state in a checkpoint.
//
//	go run ./examples/quickstart             # a sample in a new temporary directory
//	go run ./examples/quickstart -dir work/  # work/in/*.jsonl (the sample when empty), work/out, ...
//
// Under -dir it reads in/, writes the sessions to out/ (a file per
// batch), keeps the query's state in checkpoint/, the lines that do not
// decode in deadletters/ and the clicks too late for the watermark in
// late/. Run it again on the same directory and it goes on from its
// checkpoint: files read before are not read again, and as the first run
// ended by moving the watermark past every event time, the clicks of new
// files are late.
//
// The records and the sessionize function below are annotated: go
// generate (the line below) writes their codecs and sessionizeStream, the
// binding that sets the watermark, groups the clicks by user and applies
// sessionize. This package is self-contained: it imports streamgen's
// public packages only.
package main

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

import (
	"context"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// Gap is how long a user may be idle before their session ends.
const Gap = 30 * time.Minute

// Click is one line of input. User is the grouping key and Time the event
// time: both are required in each line.
//
//streamgen:record
type Click struct {
	User string    `json:"user" stream:"key"`
	Time time.Time `json:"time" stream:"eventtime"`
	Page string    `json:"page"`
}

// Session is a user's open session: the state kept per user.
//
//streamgen:record
type Session struct {
	Start, End time.Time
	Clicks     int64
	Pages      []string // distinct, in order of first visit
}

// SessionOut is a closed session, a line of output.
//
//streamgen:record
type SessionOut struct {
	User   string    `json:"user"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Clicks int64     `json:"clicks"`
	Pages  []string  `json:"pages"`
}

// sessionize is called with a user's clicks of a batch, or with none when
// the session timed out: when the watermark passed its end + Gap. A click
// more than Gap after the session's last one closes it and opens the next.
//
//streamgen:flatMapGroupsWithState mode=append timeout=event watermark=10m
func sessionize(user string, clicks iter.Seq[Click], state *typed.GroupState[Session], emit func(SessionOut)) error {
	s, open := state.Get()
	if state.HasTimedOut() {
		emit(SessionOut{User: user, Start: s.Start, End: s.End, Clicks: s.Clicks, Pages: s.Pages})
		state.Remove()
		return nil
	}
	for _, c := range slices.SortedFunc(clicks, func(a, b Click) int { return a.Time.Compare(b.Time) }) {
		if open && c.Time.Sub(s.End) > Gap {
			emit(SessionOut{User: user, Start: s.Start, End: s.End, Clicks: s.Clicks, Pages: s.Pages})
			open = false
		}
		if !open {
			s, open = Session{Start: c.Time, End: c.Time}, true
		}
		s.Start, s.End = minTime(s.Start, c.Time), maxTime(s.End, c.Time)
		s.Clicks++
		if !slices.Contains(s.Pages, c.Page) {
			s.Pages = append(s.Pages, c.Page)
		}
	}
	state.Update(s)
	return state.SetTimeoutTimestamp(s.End.Add(Gap))
}

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "working directory: in/ (the sample is written there when it is empty), out/, checkpoint/, deadletters/, late/ (default: a new temporary directory)")
	ui := fs.String("ui", "", "serve the status page, Prometheus metrics (/metrics) and pprof (/debug/pprof/) at `host:port` while the query runs, such as 127.0.0.1:8080")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		var err error
		if *dir, err = os.MkdirTemp("", "quickstart-"); err != nil {
			return err
		}
	}
	in := filepath.Join(*dir, "in")
	if err := writeSample(in); err != nil {
		return err
	}

	// What the query shows while it runs: its progress on stderr, and,
	// with -ui, its status page, metrics and profiles.
	watch := []runtime.Option{runtime.Name("quickstart-sessions"), observe.Progress(stderr)}
	if *ui != "" {
		srv, err := observe.Serve(*ui)
		if err != nil {
			return err
		}
		defer srv.Close()
		fmt.Fprintf(stderr, "status page at %s\n", srv.URL())
		watch = append(watch, srv.Watch())
	}

	// The pipeline: clicks from the files of in/, decoded by Click's
	// generated JSON decoder, sessionized, written to out/.
	clicks := typed.From[Click](runtime.FilesSource(in, runtime.FilesOptions{}))
	sessions := sessionizeStream(clicks, sessionizeStreamLateRows(typed.FilesSink[Click](filepath.Join(*dir, "late"))))
	q, err := typed.WriteTo(sessions, typed.FilesSink[SessionOut](filepath.Join(*dir, "out"))).Start(context.Background(),
		runtime.Checkpoint(filepath.Join(*dir, "checkpoint")),
		// Run the batches the input holds now, then stop; at its end,
		// move the watermark past every event time so the sessions still
		// open are closed and written.
		runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime(),
		runtime.DeadLetters(runtime.DeadLetterDir(filepath.Join(*dir, "deadletters"))),
		runtime.Options(watch...),
	)
	if err != nil {
		return err
	}
	if err := q.AwaitTermination(); err != nil {
		return err
	}
	// The sink wrote a file per batch; show them.
	out := filepath.Join(*dir, "out")
	files, err := filepath.Glob(filepath.Join(out, "part-*.jsonl"))
	if err != nil {
		return err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s:\n%s", f, b)
	}
	fmt.Fprintf(stdout, "sessions in %s, dead letters in %s\n", out, filepath.Join(*dir, "deadletters"))
	return nil
}

// sample is the input written when in/ holds no file: three users'
// clicks, out of order as they may arrive, and one line that is not JSON,
// which goes to the dead letters.
const sample = `{"user":"ana","time":"2026-03-02T09:00:00Z","page":"/"}
{"user":"ana","time":"2026-03-02T09:10:00Z","page":"/pricing"}
{"user":"bo","time":"2026-03-02T09:12:00Z","page":"/"}
{"user":"ana","time":"2026-03-02T09:05:00Z","page":"/docs"}
{"user":"bo","time":"2026-03-02T09:50:00Z","page":"/blog"}
this line is not JSON
{"user":"cy","time":"2026-03-02T10:00:00Z","page":"/docs"}
{"user":"ana","time":"2026-03-02T11:00:00Z","page":"/"}
{"user":"bo","time":"2026-03-02T10:05:00Z","page":"/"}
{"user":"cy","time":"2026-03-02T10:20:00Z","page":"/docs"}
`

// writeSample writes the sample into dir unless dir already holds files.
func writeSample(dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "clicks.jsonl"), []byte(sample), 0o644)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
