// Command activity keeps, per user, their current activity with its first
// and last reading time: mapGroupsWithState in Update mode, no timeout.
//
//	go run ./examples/activity
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
		fmt.Fprintln(os.Stderr, "activity:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	// updateActivityStream is generated from updateActivity's directive:
	// it groups the readings by user (the key field) and applies it.
	return cli.Main[Activity]("activity", args, stdout, false, func(in typed.Stream[sensor.Event]) typed.Stream[Activity] { return updateActivityStream(in) })
}
