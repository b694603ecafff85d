package bench

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// MapAsync side by side with Map, then a count per key: calls that wait
// on I/O (1 ms each), where MapAsync overlaps them, and calls that do not
// wait, where it costs a goroutine and a queue place a row.

// runLookups counts per key the rows lookup gives back, after Map
// (concurrency 0) or MapAsync with concurrency calls at once.
func runLookups(m *typed.MemoryStream[countrec.Event], dir string, sink *countSink, wait time.Duration, concurrency int) error {
	lookup := func(ctx context.Context, e countrec.Event) (countrec.Event, error) {
		if wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return e, ctx.Err()
			}
		}
		return e, nil
	}
	s := typed.FromMemory(m)
	if concurrency == 0 {
		s = typed.Map(s, func(e *countrec.Event) countrec.Event {
			out, _ := lookup(context.Background(), *e)
			return out
		})
	} else {
		s = typed.MapAsync(s, lookup, concurrency)
	}
	byKey := typed.GroupByKey(s, func(e *countrec.Event) string { return e.Key })
	w := typed.WriteTo(typed.AggregateByKey(byKey, typed.Count[countrec.Event](), func(k string, n int64) countrec.KeyCount {
		return countrec.KeyCount{Key: k, Count: n}
	}), typed.Sink[countrec.KeyCount](sink))
	q, err := w.Start(context.Background(), runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// BenchmarkMapAsync: 2,000 events (one batch) whose lookup waits 1 ms,
// by Map and by MapAsync with 64 calls at once (64× at most); and 1M
// events (batches of 100k) whose lookup does not wait, by Map and by
// MapAsync with 64, the cost of the goroutines.
func BenchmarkMapAsync(b *testing.B) {
	for _, c := range []struct {
		name     string
		events   int
		perBatch int
		wait     time.Duration
	}{
		{"wait=1ms", 2_000, 0, time.Millisecond},
		{"wait=0", 1_000_000, 100_000, 0},
	} {
		in := uniformInput(1_000, c.events/1_000, 1)
		var rate []float64
		for _, conc := range []int{0, 64} {
			name := "impl=Map"
			if conc > 0 {
				name = fmt.Sprintf("impl=MapAsync/concurrency=%d", conc)
			}
			b.Run(c.name+"/"+name, func(b *testing.B) {
				m := typed.NewMemoryStream[countrec.Event]("events", c.perBatch)
				m.Add(in...)
				rate = append(rate, benchRuns(b, len(in), func(dir string, sink *countSink) error {
					return runLookups(m, dir, sink, c.wait, conc)
				}))
				if len(rate) == 2 {
					b.Logf("MapAsync gives %.2fx the throughput of Map", rate[1]/rate[0])
				}
			})
		}
	}
}
