// Command windows counts the sensor readings per event-time window, as
// Spark's windowed aggregation does: event time from Creation_Time
// (nanoseconds), a watermark 5 h behind it, tumbling windows of 10
// minutes (or sliding ones with -slide, or Flink's cumulative ones with
// -cumulate), a count per window (or per window and user with -by-user),
// in the Complete output mode (or Update, or Append).
//
//	go run ./examples/windows                           # tumbling 10-minute windows, Complete mode, to the console
//	go run ./examples/windows -slide 5m                 # windows of 10 minutes every 5 minutes
//	go run ./examples/windows -cumulate 2m              # each 10 minutes so far, every 2 minutes
//	go run ./examples/windows -by-user -mode update     # per window and user, the rows that changed in each batch
//	go run ./examples/windows -mode append -flush       # each window once, when the watermark (or the end of the input) closes it
//
// Each output row is {"window": {"start": ..., "end": ...}, "count": N},
// with "User" before "count" with -by-user.
//
// Flags: -window DURATION (default 10m), -slide DURATION (default: the
// window's size, tumbling windows), -cumulate DURATION (windows that all
// start with their -window period and end every DURATION of it: Flink's
// CUMULATE), -watermark DURATION|none (default 5h),
// -mode complete|update|append (default complete), -by-user, and the
// examples' -input DIR, -output DIR, -checkpoint DIR,
// -max-files-per-trigger N, -trigger availableNow|once|DURATION,
// -dead-letter DIR, -flush, -metrics ADDR (Prometheus metrics at
// http://ADDR/metrics while the query runs).
//
// In Complete mode every batch writes the whole table and nothing is
// evicted; in Update mode a batch writes the windows it changed, and a
// window is evicted once the watermark passes its end; in Append mode a
// window is written once, in the batch after the watermark passes its end
// (-flush closes them all at the end of the input), which needs a
// watermark. As in Spark, a reading is late for each of its windows whose
// end the watermark has reached: in Update and Append mode it is left out
// of those windows (and counted); in Complete mode nothing is dropped.
//
// SIGINT or SIGTERM stops the query between batches. The exit status is 0
// when the input is done, 130 after SIGINT, 143 after SIGTERM, 1 on an
// error (-h lists it all).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	cli.Exit("windows", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	q := Query{Window: 10 * time.Minute, Watermark: 5 * time.Hour}
	mode := typed.Complete
	return cli.RunExample(cli.Example[sensor.Event, WindowCount]{
		Name:   "windows",
		Sample: cli.WriteSample,
		Flush:  true,
		Flags: func(fs *flag.FlagSet) {
			fs.Var(positiveDuration{&q.Window}, "window", "the windows' size, a `duration`")
			fs.Var(positiveDuration{&q.Slide}, "slide", "how far apart windows start, a `duration` (default: the window's size, tumbling windows)")
			fs.Var(positiveDuration{&q.Cumulate}, "cumulate", "make each -window period's windows start with it and end every `duration` of it (Flink's CUMULATE)")
			fs.Var(watermarkFlag{&q}, "watermark", "how far the watermark stays behind the newest event time: a `duration`, or none")
			fs.TextVar(&mode, "mode", typed.Complete, "the output `mode`: complete, update or append")
			fs.BoolVar(&q.ByUser, "by-user", false, "count per window and User")
		},
		Pipeline: func(in typed.Stream[sensor.Event], _ *cli.Flags) (typed.Stream[WindowCount], error) {
			if q.Cumulate != 0 && q.Slide != 0 {
				return typed.Stream[WindowCount]{}, errors.New("-cumulate and -slide make windows of two kinds: give one")
			}
			if q.Slide == 0 {
				q.Slide = q.Window
			}
			if q.Slide > q.Window {
				return typed.Stream[WindowCount]{}, fmt.Errorf("-slide %v is longer than -window %v", q.Slide, q.Window)
			}
			if q.Cumulate != 0 && q.Window%q.Cumulate != 0 {
				return typed.Stream[WindowCount]{}, fmt.Errorf("-window %v is not a whole multiple of -cumulate %v", q.Window, q.Cumulate)
			}
			return windowCounts(in, q), nil
		},
		OutputMode: func() typed.OutputMode { return mode },
		Console:    []typed.ConsoleOption{typed.ConsoleTruncate(0)}, // the windows in full
	}, args, stdout)
}

// positiveDuration is a duration flag that refuses zero and below.
type positiveDuration struct{ d *time.Duration }

func (v positiveDuration) String() string {
	if v.d == nil || *v.d == 0 { // the zero value, which PrintDefaults makes, or unset
		return ""
	}
	return v.d.String()
}

func (v positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return errors.New("not a duration (such as 10m or 1h30m)")
	case d <= 0:
		return errors.New("not positive")
	}
	*v.d = d
	return nil
}

// watermarkFlag is -watermark: a delay of zero or more, or none.
type watermarkFlag struct{ q *Query }

func (v watermarkFlag) String() string {
	switch {
	case v.q == nil:
		return ""
	case v.q.NoWatermark:
		return "none"
	}
	return v.q.Watermark.String()
}

func (v watermarkFlag) Set(s string) error {
	if s == "none" {
		v.q.NoWatermark = true
		return nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return errors.New("not a duration (such as 5h or 10s) nor none")
	case d < 0:
		return errors.New("negative")
	}
	v.q.Watermark, v.q.NoWatermark = d, false
	return nil
}
