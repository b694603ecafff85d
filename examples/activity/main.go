// Command activity keeps, per user, their current activity with its first
// and last reading time: mapGroupsWithState in Update mode, no timeout.
//
//	go run ./examples/activity
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
	cli.Exit("activity", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	// updateActivityStream is generated from updateActivity's directive:
	// it groups the readings by user (the key field) and applies it.
	return cli.Main[Activity]("activity", args, stdout, false, func(in typed.Stream[sensor.Event]) typed.Stream[Activity] { return updateActivityStream(in) })
}
