package observe_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// TestServe: one address serves a watched query's status page, its
// metrics with the Go runtime's and the process's, and the profiler.
func TestServe(t *testing.T) {
	srv, err := observe.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 2)
	m.Add(sessionClicks()...)
	q, err := typed.WriteTo(typed.FromMemory(m), typed.NewMemorySink[fixtures.Click]()).Start(context.Background(),
		runtime.Name("served"), runtime.WithTrigger(runtime.AvailableNow()), srv.Watch())
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(srv.URL(), "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", path, resp.Status)
		}
		return string(b)
	}
	metrics := get("/metrics")
	for _, want := range []string{`streamgen_batches_total{query="served"}`, "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
	if page := get("/"); !strings.Contains(strings.ToLower(page), "<html") {
		t.Errorf("/ is not the status page:\n%.200s", page)
	}
	if !strings.Contains(get("/api/queries"), "served") {
		t.Error("the status page does not show the query")
	}
	if !strings.Contains(get("/debug/pprof/"), "goroutine") {
		t.Error("/debug/pprof/ is not the profiler's index")
	}
}
