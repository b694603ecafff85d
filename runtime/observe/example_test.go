package observe_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// A query's metrics, served for Prometheus to scrape. A program mounts
// the handler on its own server (http.Handle("/metrics", m.Handler()));
// here a test server stands in for it.
func ExampleMetrics() {
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	words := typed.NewMemoryStream[string]("words", 2)
	words.Add("to", "be", "or", "not", "to")
	q, err := typed.WriteTo(typed.FromMemory(words), typed.NewMemorySink[string]()).Start(context.Background(),
		runtime.Name("words"), runtime.WithTrigger(runtime.AvailableNow()), runtime.Listener(m))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}

	resp, err := http.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		for _, name := range []string{"streamgen_batches_total", "streamgen_input_rows_total", "streamgen_output_rows_total", "streamgen_query_running"} {
			if strings.HasPrefix(lines.Text(), name+"{") {
				fmt.Println(lines.Text())
			}
		}
	}
	// Output:
	// streamgen_batches_total{query="words"} 3
	// streamgen_input_rows_total{query="words"} 5
	// streamgen_output_rows_total{query="words"} 5
	// streamgen_query_running{query="words"} 0
}
