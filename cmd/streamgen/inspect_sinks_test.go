package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// runAndInspect runs w to the end of its input into a new checkpoint and
// returns streamgen inspect's listing of it.
func runAndInspect(t *testing.T, w interface {
	Start(context.Context, ...runtime.Option) (*typed.Query, error)
}) string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "checkpoint")
	q, err := w.Start(context.Background(), runtime.Checkpoint(cp), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	listing, stderr, code := inspect(t, cp)
	if code != 0 {
		t.Fatalf("inspect exited %d: %s", code, stderr)
	}
	return listing
}

// TestInspectRowsOfSeveralSinks: the recent batches of a query of two
// outputs (typed.WriteAll) show the rows of each, the first's, then the
// other's after a "+".
func TestInspectRowsOfSeveralSinks(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, user := range []string{"ann", "bob", "ann"} {
		m.Add(fixtures.Click{User: user, Time: t0.Add(time.Duration(i) * time.Second)})
	}
	clicks := typed.FromMemory(m)
	ann := typed.Filter(clicks, func(c *fixtures.Click) bool { return c.User == "ann" })
	listing := runAndInspect(t, typed.WriteAll(typed.WriteTo(clicks, typed.NewMemorySink[fixtures.Click]()), typed.WriteTo(ann, typed.NewMemorySink[fixtures.Click]())))
	if !strings.Contains(listing, "  3+2  ") {
		t.Fatalf("the recent batches do not show 3 rows to the first sink and 2 to the second:\n%s", listing)
	}
}
