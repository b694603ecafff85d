// Command devicewindows emits, per device, the average x of each run of
// 500 readings in event-time order: flatMapGroupsWithState in Append mode,
// no timeout (a window that never fills is never emitted).
//
//	go run ./examples/devicewindows
//
// Flags: -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger
// N, -trigger availableNow|once|DURATION, -dead-letter DIR.
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "devicewindows:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	// updateWindowStream is generated from updateWindow's directive: it
	// groups the readings by Device and applies it.
	return cli.Main[DeviceAverage]("devicewindows", args, stdout, false, func(in typed.Stream[sensor.Event]) typed.Stream[DeviceAverage] { return updateWindowStream(in) })
}
