package observe_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// TestProgress: a line when the query starts, one a batch with its rows
// (each sink's, of a query of two outputs: every click, and Ann's), and
// one when it stops, under the query's name.
func TestProgress(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 3)
	m.Add(sessionClicks()...)
	var out strings.Builder
	clicks := typed.FromMemory(m)
	ann := typed.Filter(clicks, func(c *fixtures.Click) bool { return c.User == "ann" })
	q, err := typed.WriteAll(typed.WriteTo(clicks, typed.NewMemorySink[fixtures.Click]()), typed.WriteTo(ann, typed.NewMemorySink[fixtures.Click]())).Start(context.Background(),
		runtime.Name("clicks"), runtime.WithTrigger(runtime.AvailableNow()), observe.Progress(&out))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	reports := q.RecentProgress()
	if len(lines) != len(reports)+2 {
		t.Fatalf("%d lines for %d batches:\n%s", len(lines), len(reports), out.String())
	}
	if !strings.HasPrefix(lines[0], "clicks: started") || lines[len(lines)-1] != "clicks: stopped" {
		t.Errorf("first and last lines:\n%s\n%s", lines[0], lines[len(lines)-1])
	}
	for i, r := range reports {
		want := "clicks: batch " + itoa(r.BatchID) + ": " + itoa(r.NumInputRows) + " rows in"
		if len(r.OtherSinks) != 1 {
			t.Fatalf("batch %d: %d other sinks, want 1", r.BatchID, len(r.OtherSinks))
		}
		if !strings.HasPrefix(lines[i+1], want) || !strings.Contains(lines[i+1], ", "+itoa(r.Sink.NumOutputRows)+"+"+itoa(r.OtherSinks[0].NumOutputRows)+" out") {
			t.Errorf("batch line %q, want it to start %q", lines[i+1], want)
		}
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
