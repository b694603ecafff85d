// Command devicestats is a Spark device_counts query ported: the
// averages of x, y and z of the sensor readings per (gt, Model), over a
// cube of the two (so also per gt, per Model and over all, which roll a
// part up), joined (inner, on gt and Model) with the historical averages
// of the same groups over a static directory of readings. A cube's row
// with a rolled-up part has a null in its key and joins nothing, as in
// SQL, so each output row is a (gt, Model) of both:
//
//	{"gt": ..., "Model": ..., "avg_x": ..., "avg_y": ..., "avg_z": ..., "hist_avg_x": ..., "hist_avg_y": ..., "hist_avg_z": ...}
//
// in the Complete output mode: every batch writes the whole table.
//
//	go run ./examples/devicestats                      # the built-in sample, as the stream and (without its line cut short) as the history
//	go run ./examples/devicestats -static DIR          # the historical readings of DIR
//
// Flags: -static DIR (default: the built-in sample), and the examples'
// -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger N,
// -trigger availableNow|once|DURATION, -dead-letter DIR, -metrics ADDR.
//
// SIGINT or SIGTERM stops the query between batches. The exit status is 0
// when the input is done, 130 after SIGINT, 143 after SIGTERM, 1 on an
// error (-h lists it all).
package main

import (
	"flag"
	"io"
	"os"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	cli.Exit("devicestats", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	var static string
	var cleanup func()
	defer func() {
		if cleanup != nil {
			cleanup()
		}
	}()
	return cli.RunExample(cli.Example[sensor.Event, DeviceCount]{
		Name:   "devicestats",
		Sample: cli.WriteSample,
		Flags: func(fs *flag.FlagSet) {
			fs.StringVar(&static, "static", "", "the `directory` of the historical readings (default: the built-in sample)")
		},
		Pipeline: func(in typed.Stream[sensor.Event], _ *cli.Flags) (typed.Stream[DeviceCount], error) {
			if static == "" {
				dir, err := os.MkdirTemp("", "devicestats-history-")
				if err != nil {
					return typed.Stream[DeviceCount]{}, err
				}
				cleanup = func() { os.RemoveAll(dir) }
				if err := cli.WriteValidSample(dir); err != nil {
					return typed.Stream[DeviceCount]{}, err
				}
				static = dir
			}
			return deviceCounts(in, historical(static)), nil
		},
		OutputMode: func() typed.OutputMode { return typed.Complete },
		Console:    []typed.ConsoleOption{typed.ConsoleTruncate(0)},
	}, args, stdout)
}
