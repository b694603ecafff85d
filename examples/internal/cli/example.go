package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Example describes an example program for RunExample: it reads records
// of type In (JSON lines, decoded with In's generated decoder) and writes
// records of type Out. The zero value of each optional field leaves its
// feature out.
type Example[In, Out any] struct {
	// Name is the program's name, in its usage and at the start of what
	// it prints to stderr.
	Name string
	// Sample writes the built-in sample, the input of a run without
	// -input, into an empty directory. Required.
	Sample func(dir string) error
	// Pipeline builds the query from the input stream; RunExample calls
	// it once, after parsing the flags and before starting the query.
	// Required.
	Pipeline func(in typed.Stream[In], f *Flags) (typed.Stream[Out], error)

	// MaxFilesPerTrigger is the default of -max-files-per-trigger (0: no
	// limit).
	MaxFilesPerTrigger int
	// Flush adds -flush (Flags.Flush).
	Flush bool
	// Concurrency adds -concurrency N (Flags.Concurrency, default 1), for
	// a pipeline that hands it to typed.Concurrency.
	Concurrency bool
	// Flags defines the example's own flags on fs, beside the common ones.
	Flags func(fs *flag.FlagSet)
	// Written sees each batch's rows once the sink has written them, on
	// the query's goroutine, one batch at a time. A batch written again
	// (after a failure, or a stop before its commit) is seen again.
	Written func(batchID int64, rows []Out)
	// Finish runs when the query has ended without failing: by itself,
	// or stopped by a first signal. It prints the example's closing words
	// to stdout; its error is RunExample's when the query's is nil.
	Finish func(stdout io.Writer) error
	// OutputMode gives the query's output mode (WriteTo(...).OutputMode);
	// RunExample calls it once, after Pipeline, so that it may return
	// what one of the example's flags says. Nil leaves the mode of the
	// pipeline's operators.
	OutputMode func() typed.OutputMode
	// Console are the options of the console table the output goes to
	// without -output (typed.ConsoleTruncate(0) shows long cells whole).
	Console []typed.ConsoleOption
}

// RunExample runs an example as Main does: it parses args, reads the
// input the flags point to (e's sample without -input), applies e's
// pipeline, writes the result to the sink the flags ask for, and waits for
// the query, printing each committed batch (or a status line on a
// terminal) and a summary to stderr, then calls e.Finish. Signals, exit
// statuses, -metrics and the result are Main's.
func RunExample[In, Out any, PIn codec.RecordPtr[In], POut codec.RecordPtr[Out]](e Example[In, Out], args []string, stdout io.Writer) error {
	// Two signals fit: the one that stops the query and the one that
	// ends the program; signal.Notify drops what does not fit.
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(signals)
	return runWith[In, Out, PIn, POut](e, args, stdout, os.Stderr, signals)
}

// runWith is RunExample with stderr and the signals given, for tests.
func runWith[In, Out any, PIn codec.RecordPtr[In], POut codec.RecordPtr[Out]](e Example[In, Out], args []string,
	stdout, stderr io.Writer, signals <-chan os.Signal) (err error) {
	var flags Flags
	fs := flag.NewFlagSet(e.Name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { usage(fs) }
	flags.register(fs, flagSet{flush: e.Flush, concurrency: e.Concurrency, maxFilesPerTrigger: e.MaxFilesPerTrigger})
	if e.Flags != nil {
		e.Flags(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // asked for, and printed
		}
		return &UsageError{Err: err}
	}
	setup, err := flags.SetupWith(e.Sample)
	if err != nil {
		return err
	}
	defer setup.Close()
	// A run on the built-in sample cannot be resumed even with
	// -checkpoint: the sample's temporary directory names the source, and
	// the next run's is another.
	w := &watch{name: e.Name, stderr: stderr, resumable: flags.Checkpoint != "" && flags.Input != "",
		deadLetterDir: flags.DeadLetter, started: time.Now(), live: newLiveLine(stderr)}
	out, err := e.Pipeline(typed.From[In, PIn](setup.Source), &flags)
	if err != nil {
		return err
	}
	sink := Sink[Out, POut](&flags, stdout, e.Console...)
	if e.Written != nil {
		sink = &observedSink[Out]{sink: sink, written: e.Written}
	}
	writer := typed.WriteTo(out, sink)
	if e.OutputMode != nil {
		writer.OutputMode(e.OutputMode())
	}
	opts := setup.Options
	// The query has the example's name, in its metrics and on its page.
	opts = append(opts, runtime.Name(e.Name))
	if flags.UI != "" {
		page, err := serveStatusPage(flags.UI, w)
		if err != nil {
			return err
		}
		// The page hears of each batch before w prints it.
		opts = append(opts, page.listener())
		defer func() {
			if closeErr := page.close(); err == nil {
				err = closeErr
			}
		}()
	}
	if flags.Metrics != "" {
		metrics, err := serveMetrics(flags.Metrics)
		if err != nil {
			return err
		}
		defer metrics.close() // when the query has ended
		// Before w, so that the metrics hold a batch once its line is
		// printed.
		opts = append(opts, runtime.Listener(metrics.Metrics))
		w.printf("metrics at %s", metrics.url())
	}
	opts = append(opts, runtime.Listener(w))
	q, err := writer.Start(context.Background(), opts...)
	if err != nil {
		return err
	}
	if w.live != nil {
		w.startLive(q)
	}
	err = w.wait(q, signals)
	var interrupted *Interrupted
	if e.Finish != nil && (err == nil || errors.As(err, &interrupted) && !interrupted.Forced) {
		if finishErr := e.Finish(stdout); err == nil {
			err = finishErr
		}
	}
	return err
}

// observedSink hands each batch to written after sink has written it.
type observedSink[T any] struct {
	sink    typed.Sink[T]
	written func(batchID int64, rows []T)
}

func (s *observedSink[T]) Write(ctx context.Context, batchID int64, rows []T) error {
	if err := s.sink.Write(ctx, batchID, rows); err != nil {
		return err
	}
	s.written(batchID, rows)
	return nil
}

// Description names the sink it wraps in progress reports.
func (s *observedSink[T]) Description() string {
	if d, ok := s.sink.(interface{ Description() string }); ok {
		return d.Description()
	}
	return "observed"
}
