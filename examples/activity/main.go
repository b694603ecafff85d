// Command activity keeps, per user, their current activity with its first
// and last reading time: mapGroupsWithState in Update mode, no timeout.
//
//	go run ./examples/activity
//
// Flags: -input DIR, -output DIR, -checkpoint DIR, -max-files-per-trigger
// N, -trigger availableNow|once|DURATION, -dead-letter DIR.
package main

import (
	"context"
	"flag"
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
	var flags cli.Flags
	fs := flag.NewFlagSet("activity", flag.ContinueOnError)
	flags.Register(fs, false)
	if err := fs.Parse(args); err != nil {
		return err
	}
	setup, err := flags.Setup()
	if err != nil {
		return err
	}
	defer setup.Close()

	// updateActivityStream is generated from updateActivity's directive:
	// it groups the readings by user (the key field) and applies it.
	activities := updateActivityStream(typed.From[sensor.Event](setup.Source))
	q, err := typed.WriteTo(activities, cli.Sink[Activity](&flags, stdout)).OutputMode(typed.Update).Start(context.Background(), setup.Options...)
	if err != nil {
		return err
	}
	return cli.Wait(q)
}
