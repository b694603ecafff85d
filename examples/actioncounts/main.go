// Command actioncounts counts the events of each action, as Spark 4's
// transformWithState count per action over the events data set: rows
// {"time": <Unix seconds>, "action": "Open"|"Close"}, grouped by action,
// through a transformWithState processor that keeps each action's count in
// a value state and emits the new count of every action with new events
// (Update mode). At the end it prints the final count per action: the
// highest count written in the run, as
// SELECT action, MAX(count) ... GROUP BY action.
//
//	go run ./examples/actioncounts                   # the built-in sample, 10 files per batch
//	go run ./examples/actioncounts -concurrency 2 -output out/
//
// Flags: -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger
// N (default 10), -trigger availableNow|once|DURATION, -dead-letter DIR,
// -concurrency N (handlers of different actions at once), -metrics ADDR
// (Prometheus metrics at http://ADDR/metrics while the query runs).
//
// SIGINT or SIGTERM stops the query between batches. The exit status is 0
// when the input is done, 130 after SIGINT, 143 after SIGTERM, 1 on an
// error (-h lists it all).
package main

import (
	"io"
	"os"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	cli.Exit("actioncounts", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	final := finalCounts{}
	return cli.RunExample(cli.Example[Event, ActionCount]{
		Name:               "actioncounts",
		Sample:             writeSample,
		MaxFilesPerTrigger: 10, // Spark's maxFilesPerTrigger
		Concurrency:        true,
		Pipeline: func(in typed.Stream[Event], f *cli.Flags) (typed.Stream[ActionCount], error) {
			return countPerAction(in, f.Concurrency), nil
		},
		Written: final.add,
		Finish:  final.print,
	}, args, stdout)
}
