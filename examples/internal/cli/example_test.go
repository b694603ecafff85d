package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

// counted is an Example over the sensor sample with every optional field
// set: -concurrency, 3 files per batch by default, its own -note flag,
// and Written and Finish that count the rows written.
type counted struct {
	concurrency int
	note        string
	rows        int
	batches     int
}

func (c *counted) example() Example[sensor.Event, sensor.Event] {
	return Example[sensor.Event, sensor.Event]{
		Name:               "test",
		Sample:             WriteSample,
		MaxFilesPerTrigger: 3,
		Concurrency:        true,
		Flags:              func(fs *flag.FlagSet) { fs.StringVar(&c.note, "note", "", "a flag of the example's own") },
		Pipeline: func(in typed.Stream[sensor.Event], f *Flags) (typed.Stream[sensor.Event], error) {
			c.concurrency = f.Concurrency
			return in, nil
		},
		Written: func(_ int64, rows []sensor.Event) {
			c.batches++
			c.rows += len(rows)
		},
		Finish: func(stdout io.Writer) error {
			_, err := fmt.Fprintf(stdout, "finished %s: %d rows in %d batches\n", c.note, c.rows, c.batches)
			return err
		},
	}
}

func (c *counted) run(stdout, stderr io.Writer, signals <-chan os.Signal, args ...string) error {
	return runWith[sensor.Event, sensor.Event](c.example(), args, stdout, stderr, signals)
}

// TestExampleFlags: an Example's usage lists -concurrency with its
// default and the example's own flags, and -max-files-per-trigger with
// the example's default; -concurrency below 1 is a usage error.
func TestExampleFlags(t *testing.T) {
	stderr := newOutput()
	var c counted
	if err := c.run(io.Discard, stderr, nil, "-h"); err != nil {
		t.Fatalf("-h: %v, want nil (exit 0)", err)
	}
	wantInStderr(t, stderr, "Usage: test [flags]", "-concurrency N", "(default 1)", "-note string", "(0: no limit) (default 3)")

	for _, bad := range []string{"0", "-2", "many"} {
		stderr = newOutput()
		err := c.run(io.Discard, stderr, nil, "-concurrency", bad)
		if ExitCode(err) != 2 {
			t.Fatalf("-concurrency %s: %v (status %d), want a usage error (status 2)", bad, err, ExitCode(err))
		}
		wantInStderr(t, stderr, `invalid value "`+bad+`" for flag -concurrency`)
	}
}

// TestExampleRuns: the pipeline gets the flags, the sample is read three
// files per batch, Written sees every row written and Finish prints to
// stdout once the input is done.
func TestExampleRuns(t *testing.T) {
	var c counted
	var stdout strings.Builder
	stderr := newOutput()
	if err := c.run(&stdout, stderr, nil, "-output", t.TempDir(), "-concurrency", "4", "-note", "here"); err != nil {
		t.Fatal(err)
	}
	if c.concurrency != 4 {
		t.Errorf("the pipeline got -concurrency %d, want 4", c.concurrency)
	}
	wantInStderr(t, stderr, "test: committed 3 batches in this run (ids 0 to 2): 4001 rows in, 4000 rows out, 1 dead letter (logged)\n")
	if want := "finished here: 4000 rows in 3 batches\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}
}

// TestExampleFinishAfterSignal: a run stopped by a signal finishes too;
// a failed one does not, and returns the query's error.
func TestExampleFinishAfterSignal(t *testing.T) {
	var c counted
	var stdout strings.Builder
	stderr := newOutput()
	signals := make(chan os.Signal, 2)
	done := make(chan error, 1)
	go func() { done <- c.run(&stdout, stderr, signals, "-output", t.TempDir(), "-trigger", "1h") }()
	stderr.waitFor(t, "test: batch 0 committed")
	signals <- syscall.SIGTERM
	var err error
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a safety net
		t.Fatalf("run has not returned; stderr:\n%s", stderr)
	}
	var interrupted *Interrupted
	if !errors.As(err, &interrupted) {
		t.Fatalf("got %v, want stopped by SIGTERM", err)
	}
	if want := "finished : 1500 rows in 1 batches\n"; stdout.String() != want {
		t.Errorf("stdout %q, want %q", stdout.String(), want)
	}

	notADir := t.TempDir() + "/file"
	if err := os.WriteFile(notADir, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	c, stdout = counted{}, strings.Builder{}
	if err := c.run(&stdout, newOutput(), nil, "-output", notADir); ExitCode(err) != 1 {
		t.Fatalf("got %v, want the sink's error (status 1)", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("a failed run finished: %q", stdout.String())
	}
}
