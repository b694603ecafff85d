package typed_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// A line per batch in the program's log. The rate and the duration are
// left out here, where the output must be the same at every run.
func ExampleQuery_logProgress() {
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, runtime.LogRowsPerSecond, runtime.LogDuration:
				return slog.Attr{}
			}
			return a
		},
	}))
	words := typed.NewMemoryStream[string]("words", 3)
	words.Add("to", "be", "or", "not", "to")
	q, err := typed.WriteTo(typed.FromMemory(words), typed.NewMemorySink[string]()).Start(context.Background(),
		runtime.Name("words"), runtime.WithTrigger(runtime.AvailableNow()), runtime.LogProgress(logger))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
	}
	// Output:
	// level=INFO msg="streamgen: batch committed" query=words batch=0 rowsIn=3 rowsOut=3 stateRows=0 lateRows=0 deadLetters=0
	// level=INFO msg="streamgen: batch committed" query=words batch=1 rowsIn=2 rowsOut=2 stateRows=0 lateRows=0 deadLetters=0
}

// A test of a running query, as Spark's tests use processAllAvailable:
// add rows to a MemoryStream, wait until the query has run and committed
// them, read the sink, and go on.
func ExampleQuery_ProcessAllAvailable() {
	words := typed.NewMemoryStream[string]("words", 2)
	lengths := typed.Map(typed.FromMemory(words), func(w *string) int { return len(*w) })
	sink := typed.NewMemorySink[int]()
	q, err := typed.WriteTo(lengths, sink).Start(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer q.Stop()
	words.Add("to", "be", "or")
	if err := q.ProcessAllAvailable(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sink.Rows())
	words.Add("not")
	if err := q.ProcessAllAvailable(context.Background()); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sink.Rows())
	// Output:
	// [2 2 2]
	// [2 2 2 3]
}
