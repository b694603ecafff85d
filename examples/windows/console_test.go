package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/typed"
)

// TestConsoleShowsWindowsWhole: the console table shows a window as
// Spark shows it, "{start, end}" with readable instants, whole even when
// cells are cut to 20 characters.
func TestConsoleShowsWindowsWhole(t *testing.T) {
	start := time.Date(2015, 2, 23, 10, 10, 0, 0, time.UTC)
	rows := []WindowCount{{Window: typed.Window{Start: start, End: start.Add(10 * time.Minute)}, Count: 517}}
	var out bytes.Buffer
	if err := typed.ConsoleSink[WindowCount](&out).Write(context.Background(), 0, rows); err != nil {
		t.Fatal(err)
	}
	if want := "|{2015-02-23 10:10:00, 2015-02-23 10:20:00}|"; !strings.Contains(out.String(), want) {
		t.Errorf("console output lacks %q:\n%s", want, &out)
	}
}
