// Command sessions groups each user's sensor readings into sessions that
// end after 5 s without a reading (event time, with a 5 s watermark delay
// and event-time timeouts), with flatMapGroupsWithState in Append mode.
//
//	go run ./examples/sessions               # the built-in sample, to the console
//	go run ./examples/sessions -flush -output out/
//
// Flags: -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger
// N, -trigger availableNow|once|DURATION, -dead-letter DIR, -flush,
// -metrics ADDR (Prometheus metrics at http://ADDR/metrics while the query
// runs).
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
	cli.Exit("sessions", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	// sessionizeStream is generated from sessionize's directive: it sets
	// the watermark on the readings' event time (Creation_Time), groups
	// them by user (the key field) and applies sessionize.
	return cli.Main[SessionOut]("sessions", args, stdout, true, func(in typed.Stream[sensor.Event]) typed.Stream[SessionOut] { return sessionizeStream(in) })
}
