// Command countkeys counts sensor readings per user: the plainest stateful
// query, for the fault campaign of package faults. It reads JSON-lines
// files of sensor.Event with runtime.FilesSource, keeps a count per user
// with typed.MapGroupsWithState (Update mode, no timeout) and writes each
// batch's updated counts with typed.FilesSink, so that the last row per
// user in the output is the number of that user's readings in the input.
//
//	countkeys -input DIR -output DIR -checkpoint DIR [-dead-letter DIR]
//	          [-max-files-per-trigger N] [-max-line-bytes N] [-trigger availableNow]
//
// It reports to stderr as the examples do ("countkeys: batch N committed:
// ..."), so that a test can pace itself on those lines, and exits 0 when
// the input is done, 1 when the query fails, 2 for bad flags. It handles
// no signal: the campaign ends it with SIGKILL.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	err := run(os.Args[1:], os.Stderr)
	var usage usageError
	switch {
	case err == nil:
	case errors.As(err, &usage):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "countkeys: %v\n", err)
		os.Exit(1)
	}
}

// usageError is a flag error, which the flag package has printed already.
type usageError struct{ error }

func run(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("countkeys", flag.ContinueOnError)
	fs.SetOutput(stderr)
	input := fs.String("input", "", "directory of JSON-lines files of sensor readings (required)")
	output := fs.String("output", "", "directory for the counts, one file per batch (required)")
	checkpoint := fs.String("checkpoint", "", "checkpoint directory (required)")
	deadLetter := fs.String("dead-letter", "", "directory for the input that does not decode (default: logged)")
	maxFiles := fs.Int("max-files-per-trigger", 0, "at most this many input files per batch (0: no limit)")
	maxLine := fs.Int("max-line-bytes", 0, "the longest input line accepted (0: the runtime's default, 64 MiB)")
	trigger := fs.String("trigger", "availableNow", "availableNow, once, or an interval such as 10s")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError{err}
	}
	if *input == "" || *output == "" || *checkpoint == "" {
		fmt.Fprintln(stderr, "countkeys: -input, -output and -checkpoint are required")
		return usageError{errors.New("missing flags")}
	}
	t, err := runtime.ParseTrigger(*trigger)
	if err != nil {
		return fmt.Errorf("-trigger: %w", err)
	}

	src := runtime.FilesSource(*input, runtime.FilesOptions{MaxFilesPerTrigger: *maxFiles, MaxLineBytes: *maxLine})
	byUser := typed.GroupByKey(typed.From[sensor.Event](src), func(e *sensor.Event) string { return e.User })
	counts := typed.MapGroupsWithState(byUser, typed.NoTimeout, count)
	opts := []runtime.Option{runtime.Checkpoint(*checkpoint), runtime.WithTrigger(t), runtime.Listener(reporter{stderr})}
	if *deadLetter != "" {
		opts = append(opts, runtime.DeadLetters(runtime.DeadLetterDir(*deadLetter)))
	}
	q, err := typed.WriteTo(counts, typed.FilesSink[countrec.KeyCount](*output)).Start(context.Background(), opts...)
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// count adds the user's readings of the batch to their count.
func count(user string, events iter.Seq[sensor.Event], state *typed.GroupState[countrec.Count]) (countrec.KeyCount, error) {
	c, _ := state.Get()
	for range events {
		c.N++
	}
	state.Update(c)
	return countrec.KeyCount{Key: user, Count: c.N}, nil
}

// reporter prints a line per committed batch, in the examples' words. The
// query's goroutine calls it; nothing else writes to stderr meanwhile.
type reporter struct{ stderr io.Writer }

func (r reporter) OnQueryProgress(p runtime.QueryProgress) {
	fmt.Fprintf(r.stderr, "countkeys: batch %d committed: %d rows in, %d rows out\n", p.BatchID, p.NumInputRows, p.Sink.NumOutputRows)
}
