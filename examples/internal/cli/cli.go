// Package cli holds what the example programs share: their flags, the
// built-in sample of sensor readings, and the wiring of sources, sinks and
// the checkpoint from those flags. Main runs an example over the sensor
// readings; RunExample, one over records and a sample of its own.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"syscall"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Flags are the examples' common flags.
type Flags struct {
	Input              string
	Output             string
	Checkpoint         string
	MaxFilesPerTrigger int
	Trigger            string
	DeadLetter         string
	Flush              bool
	// Concurrency is -concurrency, at least 1; it is 1 in an example
	// without the flag.
	Concurrency int
	// UI is -ui, the address of the query's status page ("": none).
	UI string
	// Metrics is -metrics: the address to serve the query's Prometheus
	// metrics on while it runs; "" for none.
	Metrics string
}

// Register defines the flags on fs. withFlush adds -flush.
func (f *Flags) Register(fs *flag.FlagSet, withFlush bool) {
	f.register(fs, flagSet{flush: withFlush})
}

// flagSet says which of the optional flags an example has, and the
// defaults that differ between examples.
type flagSet struct {
	flush, concurrency bool
	maxFilesPerTrigger int // the default of -max-files-per-trigger
}

func (f *Flags) register(fs *flag.FlagSet, set flagSet) {
	fs.StringVar(&f.Input, "input", "", "directory of JSON-lines files (*.json, *.jsonl, either compressed as .gz, .bz2 or .zst), read oldest first by modification time; default: a built-in deterministic sample")
	fs.StringVar(&f.Output, "output", "", "directory for the output, JSON lines, one file per batch; default: a console table")
	fs.StringVar(&f.Checkpoint, "checkpoint", "", "checkpoint directory; running again with the same one resumes; default: a temporary directory removed at exit")
	fs.IntVar(&f.MaxFilesPerTrigger, "max-files-per-trigger", set.maxFilesPerTrigger, "at most this many input files per batch (0: no limit)")
	fs.StringVar(&f.Trigger, "trigger", "availableNow", "availableNow (process what is there and exit), once, or an interval such as 10s")
	fs.StringVar(&f.DeadLetter, "dead-letter", "", "directory for input lines that do not decode (default: logged)")
	fs.StringVar(&f.Metrics, "metrics", "", "serve the query's Prometheus metrics at http://`ADDR`/metrics while it runs, such as :9090 or 127.0.0.1:9090")
	if set.flush {
		fs.BoolVar(&f.Flush, "flush", false, "when the input ends, move the watermark past every pending timeout so every open group is emitted")
	}
	fs.StringVar(&f.UI, "ui", "", "serve a status page of the query at `host:port` while it runs (:0 picks a free port; the address is printed)")
	f.Concurrency = 1
	if set.concurrency {
		fs.Var(positiveInt{&f.Concurrency}, "concurrency", "handle up to `N` keys of a batch at once (the output is the same for any N)")
	}
}

// positiveInt is an int flag that refuses values below 1.
type positiveInt struct{ p *int }

func (v positiveInt) String() string {
	if v.p == nil { // the zero value, which PrintDefaults makes
		return "0"
	}
	return strconv.Itoa(*v.p)
}

func (v positiveInt) Set(s string) error {
	n, err := strconv.Atoi(s)
	switch {
	case err != nil:
		return errors.New("not an integer")
	case n < 1:
		return errors.New("at least 1")
	}
	*v.p = n
	return nil
}

// Run is an example's setup done from its flags.
type Run struct {
	Source  runtime.Source
	Options []runtime.Option
	cleanup []func()
}

// Setup turns the flags into a source and query options, with the
// built-in sample of sensor readings (WriteSample) when -input is not
// given.
func (f *Flags) Setup() (*Run, error) { return f.SetupWith(WriteSample) }

// SetupWith is Setup with another built-in sample: writeSample writes it
// into an empty temporary directory when -input is not given.
func (f *Flags) SetupWith(writeSample func(dir string) error) (*Run, error) {
	r := &Run{}
	input := f.Input
	if input == "" {
		dir, err := os.MkdirTemp("", "streamgen-sample-")
		if err != nil {
			return nil, fmt.Errorf("the built-in sample: %w", err)
		}
		r.cleanup = append(r.cleanup, func() { os.RemoveAll(dir) })
		if err := writeSample(dir); err != nil {
			r.Close()
			return nil, fmt.Errorf("the built-in sample: %w", err)
		}
		input = dir
	}
	opts := runtime.FilesOptions{MaxFilesPerTrigger: f.MaxFilesPerTrigger}
	if f.Input == "" {
		// The sample is written to a new temporary directory at every
		// run; its name stays the same, so a checkpoint of an earlier run
		// on the sample is the same source's.
		opts.Name = "files:built-in-sample"
	}
	r.Source = runtime.FilesSource(input, opts)
	ckpt := f.Checkpoint
	if ckpt == "" {
		dir, err := os.MkdirTemp("", "streamgen-checkpoint-")
		if err != nil {
			r.Close()
			return nil, fmt.Errorf("a temporary checkpoint: %w", err)
		}
		r.cleanup = append(r.cleanup, func() { os.RemoveAll(dir) })
		ckpt = dir
	}
	trigger, err := runtime.ParseTrigger(f.Trigger)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("-trigger: %w", err)
	}
	r.Options = []runtime.Option{runtime.Checkpoint(ckpt), runtime.WithTrigger(trigger)}
	if f.DeadLetter != "" {
		r.Options = append(r.Options, runtime.DeadLetters(runtime.DeadLetterDir(f.DeadLetter)))
	}
	if f.Flush {
		r.Options = append(r.Options, runtime.FlushEventTime())
	}
	return r, nil
}

// Close removes the temporary directories.
func (r *Run) Close() {
	for _, c := range r.cleanup {
		c()
	}
}

// Sink is the output sink the flags ask for: JSON-lines files, or a
// console table on w, with the console options given.
func Sink[T any, P codec.RecordPtr[T]](f *Flags, w io.Writer, console ...typed.ConsoleOption) typed.Sink[T] {
	if f.Output != "" {
		return typed.FilesSink[T, P](f.Output)
	}
	return typed.ConsoleSink[T, P](w, console...)
}

// Main runs an example: it parses args, reads the sensor readings the
// flags point to, applies pipeline, writes the result to the sink the
// flags ask for (in the output mode of the pipeline's operator), and waits
// for the query, printing each committed batch and a summary to stderr:
// a line per batch, or, when stderr is a terminal, a status line redrawn
// in place while the query runs. With -metrics it serves the query's
// Prometheus metrics until the query ends.
//
// SIGINT and SIGTERM stop the query (see Interrupted); a second one while
// it stops ends Main at once. Main returns nil when the query finished by
// itself (a Once or AvailableNow trigger at the end of its input) or -h
// asked for the usage; otherwise an error whose exit status ExitCode
// gives: pass it to Exit.
func Main[T any, P codec.RecordPtr[T]](name string, args []string, stdout io.Writer, withFlush bool,
	pipeline func(typed.Stream[sensor.Event]) typed.Stream[T]) error {
	return RunExample[sensor.Event, T, *sensor.Event, P](sensorExample(name, withFlush, pipeline), args, stdout)
}

// run is Main with stderr and the signals given, for tests.
func run[T any, P codec.RecordPtr[T]](name string, args []string, stdout, stderr io.Writer, signals <-chan os.Signal, withFlush bool,
	pipeline func(typed.Stream[sensor.Event]) typed.Stream[T]) error {
	return runWith[sensor.Event, T, *sensor.Event, P](sensorExample(name, withFlush, pipeline), args, stdout, stderr, signals)
}

// sensorExample is Main's example: the sensor readings, with the sample
// of WriteSample.
func sensorExample[T any](name string, withFlush bool, pipeline func(typed.Stream[sensor.Event]) typed.Stream[T]) Example[sensor.Event, T] {
	return Example[sensor.Event, T]{
		Name:   name,
		Sample: WriteSample,
		Flush:  withFlush,
		Pipeline: func(in typed.Stream[sensor.Event], _ *Flags) (typed.Stream[T], error) {
			return pipeline(in), nil
		},
	}
}

// usage prints the flags and what the exit status says.
func usage(fs *flag.FlagSet) {
	out := fs.Output()
	fmt.Fprintf(out, "Usage: %s [flags]\n\nFlags:\n", fs.Name())
	fs.PrintDefaults()
	fmt.Fprintf(out, `
SIGINT or SIGTERM stops the query between batches: the batch in flight is
not committed, and runs again at the next start on the same -checkpoint.
A second signal exits at once.

Exit status: %d when the input is done (-trigger availableNow or once); %d
after SIGINT and %d after SIGTERM; %d when the query fails; %d for bad flags.
`, exitOK, exitSignalBase+int(syscall.SIGINT), exitSignalBase+int(syscall.SIGTERM), exitError, exitUsage)
}
