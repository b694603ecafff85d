package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

// The tests run Main's body in-process on the built-in sample (4,000
// readings and one line that does not decode, in 8 files), with the
// identity pipeline, so that rows out = readings; signals come from a
// channel the test sends on. examples/signals_test.go sends real ones to
// the built programs.

func identity(s typed.Stream[sensor.Event]) typed.Stream[sensor.Event] { return s }

// started is run started in a goroutine; its result arrives on done.
type started struct {
	signals chan os.Signal
	stderr  *output
	done    chan error
}

func start(t *testing.T, stdout io.Writer, args ...string) *started {
	t.Helper()
	s := &started{signals: make(chan os.Signal, 2), stderr: newOutput(), done: make(chan error, 1)}
	go func() {
		s.done <- run[sensor.Event]("test", args, stdout, s.stderr, s.signals, false, identity)
	}()
	return s
}

// result waits for run's result. The deadline is a safety net for a run
// that never returns.
func (s *started) result(t *testing.T) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		t.Fatalf("run has not returned; stderr:\n%s", s.stderr)
		return nil
	}
}

// output is a stderr the tests can wait on. The query's goroutine writes
// to it while a test reads, and a write never blocks: a test that has
// stopped waiting does not hold up the query.
type output struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{} // a token after each write, dropped when one is pending
}

func newOutput() *output { return &output{wrote: make(chan struct{}, 1)} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	select {
	case o.wrote <- struct{}{}:
	default:
	}
	return o.b.Write(p)
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}

// waitFor waits until the output holds s; the deadline is a safety net.
func (o *output) waitFor(t *testing.T, s string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for !strings.Contains(o.String(), s) {
		select {
		case <-o.wrote:
		case <-ctx.Done():
			t.Fatalf("stderr never said %q:\n%s", s, o)
		}
	}
}

// stuckWriter is a stdout whose first write blocks until release is
// closed: it holds the console sink, and so the batch, in flight.
type stuckWriter struct {
	writing chan struct{} // closed when the first write starts
	release chan struct{}
	once    sync.Once
}

func (w *stuckWriter) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.writing) })
	<-w.release
	return len(p), nil
}

func wantInStderr(t *testing.T, stderr fmt.Stringer, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(stderr.String(), l) {
			t.Errorf("stderr lacks %q:\n%s", l, stderr)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("streamgen: source files: broken"), 1},
		{&UsageError{Err: errors.New("flag provided but not defined: -x")}, 2},
		{&Interrupted{Signal: syscall.SIGINT}, 130},
		{&Interrupted{Signal: syscall.SIGTERM}, 143},
		{&Interrupted{Signal: syscall.SIGINT, Forced: true}, 130},
		{fmt.Errorf("wrapped: %w", &Interrupted{Signal: syscall.SIGTERM}), 143},
	} {
		if got := ExitCode(c.err); got != c.want {
			t.Errorf("ExitCode(%v) = %d, want %d", c.err, got, c.want)
		}
	}
}

// TestReport: Exit prints the error after the program's name, except a
// usage error, which the flag package has printed already.
func TestReport(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{&UsageError{Err: errors.New("flag provided but not defined: -x")}, ""},
		{errors.New("streamgen: boom"), "test: streamgen: boom\n"},
		{&Interrupted{Signal: syscall.SIGTERM}, "test: stopped by SIGTERM\n"},
		{&Interrupted{Signal: syscall.SIGINT, Forced: true}, "test: SIGINT again while stopping: exited without waiting for the query\n"},
	} {
		var b bytes.Buffer
		report(&b, "test", c.err)
		if b.String() != c.want {
			t.Errorf("report(%v) printed %q, want %q", c.err, b.String(), c.want)
		}
	}
}

// TestHelp: -h prints the usage with the exit statuses and is no error;
// an unknown flag is a usage error (status 2).
func TestHelp(t *testing.T) {
	stderr := newOutput()
	if err := run[sensor.Event]("test", []string{"-h"}, io.Discard, stderr, nil, false, identity); err != nil {
		t.Fatalf("-h: %v, want nil (exit 0)", err)
	}
	wantInStderr(t, stderr, "Usage: test [flags]", "-trigger", "Exit status: 0 when the input is done")

	stderr = newOutput()
	err := run[sensor.Event]("test", []string{"-no-such-flag"}, io.Discard, stderr, nil, false, identity)
	if ExitCode(err) != 2 {
		t.Fatalf("-no-such-flag: %v (status %d), want a usage error (status 2)", err, ExitCode(err))
	}
	wantInStderr(t, stderr, "flag provided but not defined: -no-such-flag", "Usage: test [flags]")
}

// TestAvailableNowFinishesByItself: a run that reaches the end of its
// input is a success, and the summary counts every batch.
func TestAvailableNowFinishesByItself(t *testing.T) {
	s := start(t, io.Discard, "-max-files-per-trigger", "3")
	if err := s.result(t); err != nil {
		t.Fatalf("%v (status %d), want nil (status 0)", err, ExitCode(err))
	}
	wantInStderr(t, s.stderr,
		"test: batch 0 committed: 1500 rows in, 1500 rows out\n",
		"test: batch 2 committed: 1000 rows in, 1000 rows out\n",
		"test: committed 3 batches in this run (ids 0 to 2): 4001 rows in, 4000 rows out, 1 dead letter (logged)\n")
}

// TestSignalStopsTheQuery: a signal stops an interval run, which never
// ends by itself, after the batch it has committed; the status is the
// signal's, and a run on the same checkpoint has nothing left to do.
func TestSignalStopsTheQuery(t *testing.T) {
	for _, c := range []struct {
		signal syscall.Signal
		name   string
		status int
	}{
		{syscall.SIGTERM, "SIGTERM", 143},
		{syscall.SIGINT, "SIGINT", 130},
	} {
		t.Run(c.name, func(t *testing.T) {
			input, checkpoint := t.TempDir(), t.TempDir()
			if err := WriteSample(input); err != nil {
				t.Fatal(err)
			}
			s := start(t, io.Discard, "-input", input, "-checkpoint", checkpoint, "-trigger", "1h")
			s.stderr.waitFor(t, "test: batch 0 committed")
			s.signals <- c.signal
			err := s.result(t)
			var interrupted *Interrupted
			if !errors.As(err, &interrupted) || interrupted.Signal != c.signal || interrupted.Forced {
				t.Fatalf("got %v, want stopped by %s", err, c.name)
			}
			if ExitCode(err) != c.status {
				t.Errorf("status %d, want %d", ExitCode(err), c.status)
			}
			wantInStderr(t, s.stderr,
				"test: "+c.name+": stopping the query",
				"test: committed 1 batch in this run (id 0): 4001 rows in, 4000 rows out, 1 dead letter (logged)\n",
				"test: run again with the same -checkpoint to resume after batch 0\n")

			again := start(t, io.Discard, "-input", input, "-checkpoint", checkpoint)
			if err := again.result(t); err != nil {
				t.Fatalf("run again: %v", err)
			}
			wantInStderr(t, again.stderr, "test: committed no batch in this run\n")
		})
	}
}

// TestSecondSignalExitsAtOnce: with the batch stuck in the sink, Stop
// cannot end; a second signal makes run return all the same, with the
// second signal's status, while the sink still holds the batch.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	stdout := &stuckWriter{writing: make(chan struct{}), release: make(chan struct{})}
	defer close(stdout.release) // lets the abandoned query end
	s := start(t, stdout)
	select {
	case <-stdout.writing:
	case err := <-s.done:
		t.Fatalf("run returned %v before writing a batch", err)
	}
	s.signals <- syscall.SIGTERM
	s.stderr.waitFor(t, "test: SIGTERM: stopping the query")
	s.signals <- syscall.SIGINT
	err := s.result(t)
	var interrupted *Interrupted
	if !errors.As(err, &interrupted) || interrupted.Signal != syscall.SIGINT || !interrupted.Forced {
		t.Fatalf("got %v, want a forced exit on SIGINT", err)
	}
	if ExitCode(err) != 130 {
		t.Errorf("status %d, want 130", ExitCode(err))
	}
	wantInStderr(t, s.stderr, "test: committed no batch in this run\n")
}

// TestQueryErrorIsStatus1: a query that fails ends run with its error
// (status 1) after the summary.
func TestQueryErrorIsStatus1(t *testing.T) {
	notADir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s := start(t, io.Discard, "-output", notADir)
	err := s.result(t)
	if err == nil || ExitCode(err) != 1 || !strings.Contains(err.Error(), notADir) {
		t.Fatalf("got %v (status %d), want the sink's error on %s (status 1)", err, ExitCode(err), notADir)
	}
	wantInStderr(t, s.stderr, "test: committed no batch in this run\n")
}
