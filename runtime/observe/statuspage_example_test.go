package observe_test

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// A query's status page: the page listens to the query, and a server
// mounts it (here under /status/). A program would serve mux with
// http.ListenAndServe("localhost:4040", mux) and open
// http://localhost:4040/status/ in a browser; this example reads the
// page's JSON in-process instead.
func ExampleStatusPage() {
	page := observe.NewStatusPage()
	mux := http.NewServeMux()
	mux.Handle("/status/", http.StripPrefix("/status", page))

	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2) // two rows a batch
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, user := range []string{"ann", "bob", "ann", "cat", "dan"} {
		clicks.Add(fixtures.Click{User: user, Time: at})
	}
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
	q, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), typed.NewMemorySink[fixtures.UserCount]()).
		OutputMode(typed.Update).
		Start(context.Background(), runtime.Name("clicks"), runtime.WithTrigger(runtime.AvailableNow()), runtime.Listener(page))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}

	fetch := func(path string, v any) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			fmt.Println(rec.Code, err)
		}
	}
	var list struct {
		Queries []struct {
			Name, RunID, Status string
			NumBatches          int64
		}
	}
	fetch("/status/api/queries", &list)
	for _, q := range list.Queries {
		fmt.Printf("%s: %s after %d batches\n", q.Name, q.Status, q.NumBatches)
	}
	var query struct {
		Batches []struct{ BatchID, NumInputRows, StateRows int64 }
	}
	fetch("/status/api/query?run="+list.Queries[0].RunID, &query)
	for _, b := range query.Batches {
		fmt.Printf("batch %d: %d rows in, %d users in state\n", b.BatchID, b.NumInputRows, b.StateRows)
	}
	// Output:
	// clicks: finished after 3 batches
	// batch 0: 2 rows in, 2 users in state
	// batch 1: 2 rows in, 3 users in state
	// batch 2: 1 rows in, 4 users in state
}

// ExampleServe shows a query's status page, Prometheus metrics and the Go
// profiler on one loopback address while it runs, and its progress on
// standard error.
func ExampleServe() {
	srv, err := observe.Serve("127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Close()
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(fixtures.Click{User: "ana", Page: "/"})
	q, err := typed.WriteTo(typed.FromMemory(m), typed.NewMemorySink[fixtures.Click]()).Start(context.Background(),
		runtime.Name("clicks"), runtime.WithTrigger(runtime.AvailableNow()),
		srv.Watch(), observe.Progress(os.Stderr))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("status page, /metrics and /debug/pprof/ at", strings.HasPrefix(srv.URL(), "http://127.0.0.1:"))
	fmt.Println(q.AwaitTermination())
	// Output:
	// status page, /metrics and /debug/pprof/ at true
	// <nil>
}
