// Command nexmark runs the Nexmark benchmark's queries with streamgen:
//
//	go run ./bench/nexmark list
//	go run ./bench/nexmark generate -events 1000000 -out DIR
//	go run ./bench/nexmark run -query q5 -input DIR -output DIR
//	go run ./bench/nexmark bench -query q5 -events 10000000
//	go run ./bench/nexmark bench -query all -events 1000000 -source kafka
//
// generate writes the events as JSON lines files ({"person": {...}},
// {"auction": {...}} or {"bid": {...}}, one a line), in order. run runs a
// query over events (-input DIR of such files, or -events N from the
// in-process generator), writing its rows as JSON lines files, one a
// batch, to -output DIR (standard output without it), with its state in
// -checkpoint DIR (a temporary directory without it). bench runs a query
// over -events N events, from the in-process generator (-source
// generator, the default), from files it writes first (-source files), or
// from the embedded Kafka cluster (-source kafka; $STREAMGEN_KAFKA_BROKERS
// for a cluster of your own), into a sink that keeps nothing, with its
// state in Pebble on disk, and prints the events per second, per
// CPU-second (the process's user and system time: generator, decoding,
// query and state store), the peak resident memory, and the published
// figures per core of Flink and Feldera beside them.
//
// The generator's defaults are the workload of the published Flink
// figures: -rate 10000000 events a second of event time (so that 10M
// events span one second, and every 10-second window stays open to the
// end) from -generators 8, each its own split of ids and times, merged in
// event-time order. -rate 10000 -generators 1 are the generator's own
// defaults (upstream NexmarkConfiguration's).
//
// The exit status is 0 on success, 1 on an error, 2 for bad arguments.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/streamgen/streamgen/bench/nexmark/queries"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// A second signal, while the first's stop is under way, ends the
	// process at once, as Go's default does.
	go func() { <-ctx.Done(); stop() }()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	var usage *usageError
	switch {
	case errors.As(err, &usage):
		fmt.Fprintln(os.Stderr, "nexmark:", err)
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "nexmark:", err)
		os.Exit(1)
	}
}

// usageError is a mistake in the command line.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return &usageError{fmt.Errorf(format, args...)} }

const usage = `usage:
  nexmark list
  nexmark generate -events N -out DIR [-rate R] [-generators G] [-seed S] [-per-file N]
  nexmark run -query qN (-input DIR | -events N [-rate R] [-generators G]) [-output DIR] [-checkpoint DIR]
  nexmark bench -query qN|all -events N [-rate R] [-generators G] [-source generator|files|kafka] [-batch N]`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("%s", usage)
	}
	switch args[0] {
	case "list":
		for _, q := range queries.All {
			fmt.Fprintf(stdout, "%-4s %s\n", q.Name, q.Title)
		}
		for _, name := range []string{"q6"} {
			fmt.Fprintf(stdout, "%-4s (not run) %s\n", name, queries.Excluded[name])
		}
		return nil
	case "generate":
		return generate(ctx, args[1:], stdout, stderr)
	case "run":
		return runQuery(ctx, args[1:], stdout, stderr)
	case "bench":
		return bench(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return usagef("unknown command %q\n%s", args[0], usage)
}

// parse parses a subcommand's flags.
func parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &usageError{err}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return nil
}
