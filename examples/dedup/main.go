// Command dedup counts each user's distinct sensor readings, as Spark's
// streaming deduplication does: a watermark 5 s behind the event time (Creation_Time,
// in nanoseconds), duplicates dropped by User and event time
// (typed.DropDuplicatesWithEventTime), then a count per User (typed.AggregateByKey with
// typed.Count), in the Complete output mode: every batch writes the whole
// table, {"User": ..., "count": N} per user.
//
//	go run ./examples/dedup                     # the built-in sample, with readings sent twice and late ones, to the console
//	go run ./examples/dedup -output out/
//
// The built-in sample is the other examples' with what an unreliable
// network makes of it (cli.SampleWithDuplicates): some readings delivered
// twice, in the same file or the next, and some taken long before the
// others, which arrive late.
//
// Flags: -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger
// N, -trigger availableNow|once|DURATION, -dead-letter DIR, -metrics ADDR
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
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	cli.Exit("dedup", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	return cli.RunExample(cli.Example[sensor.Event, UserCount]{
		Name:   "dedup",
		Sample: cli.WriteSampleWithDuplicates,
		Pipeline: func(in typed.Stream[sensor.Event], _ *cli.Flags) (typed.Stream[UserCount], error) {
			return distinctCounts(in), nil
		},
		OutputMode: func() typed.OutputMode { return typed.Complete },
	}, args, stdout)
}
