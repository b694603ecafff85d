// Command devicewindows emits, per device, the average x of each run of
// 500 readings in event-time order: count windows (typed.AggregateEvery),
// in Append mode (a window that never fills is never emitted).
//
//	go run ./examples/devicewindows
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
)

func main() {
	cli.Exit("devicewindows", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	return cli.Main[DeviceAverage]("devicewindows", args, stdout, false, deviceAverages)
}
