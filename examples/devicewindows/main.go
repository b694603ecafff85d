// Command devicewindows emits, per device, the average x of each run of
// 500 readings in event-time order: flatMapGroupsWithState in Append mode,
// no timeout (a window that never fills is never emitted).
//
//	go run ./examples/devicewindows
//
// Flags: -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger
// N, -trigger availableNow|once|DURATION, -dead-letter DIR.
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
	cli.Exit("devicewindows", run(os.Args[1:], os.Stdout))
}

func run(args []string, stdout io.Writer) error {
	// updateWindowStream is generated from updateWindow's directive: it
	// groups the readings by Device and applies it.
	return cli.Main[DeviceAverage]("devicewindows", args, stdout, false, func(in typed.Stream[sensor.Event]) typed.Stream[DeviceAverage] { return updateWindowStream(in) })
}
