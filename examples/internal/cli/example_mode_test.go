package cli

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

// TestExampleOutputModeAndConsole: OutputMode is called after Pipeline, so
// that a flag may choose the mode, and sets the query's (Append, which a
// count per key refuses, fails the start; Complete runs); Console's options
// reach the console table.
func TestExampleOutputModeAndConsole(t *testing.T) {
	for _, c := range []struct {
		mode string
		want typed.OutputMode
	}{{"append", typed.Append}, {"complete", typed.Complete}} {
		var mode string
		var calls []string
		e := Example[sensor.Event, fixtures.UserCount]{
			Name:               "test",
			Sample:             WriteSample,
			MaxFilesPerTrigger: 3,
			Flags:              func(fs *flag.FlagSet) { fs.StringVar(&mode, "mode", "update", "the output mode") },
			Pipeline: func(in typed.Stream[sensor.Event], _ *Flags) (typed.Stream[fixtures.UserCount], error) {
				calls = append(calls, "Pipeline")
				byUser := typed.GroupByKey(in, func(e *sensor.Event) string { return e.User })
				return typed.AggregateByKey(byUser, typed.Count[sensor.Event](), func(user string, n int64) fixtures.UserCount {
					return fixtures.UserCount{User: user, Count: n}
				}), nil
			},
			OutputMode: func() typed.OutputMode {
				calls = append(calls, "OutputMode "+mode)
				return c.want
			},
			Console: []typed.ConsoleOption{typed.ConsoleNumRows(2)},
		}
		var stdout strings.Builder
		err := runWith[sensor.Event, fixtures.UserCount](e, []string{"-mode", c.mode}, &stdout, io.Discard, nil)
		if want := []string{"Pipeline", "OutputMode " + c.mode}; !slices.Equal(calls, want) {
			t.Errorf("-mode %s: calls %q, want %q", c.mode, calls, want)
		}
		switch c.want {
		case typed.Append:
			if err == nil || !strings.Contains(err.Error(), "the Append output mode needs event-time windows") {
				t.Errorf("Append: %v, want the query refused", err)
			}
		case typed.Complete:
			if err != nil {
				t.Fatal(err)
			}
			// Three batches, each the whole table of 4 users, 2 shown.
			if n := strings.Count(stdout.String(), "only showing top 2 rows"); n != 3 {
				t.Errorf("Complete: %d tables cut to 2 rows, want 3:\n%s", n, &stdout)
			}
		}
	}
}
