package bench

import (
	"context"
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// transformWithState, side by side with mapGroupsWithState and with
// itself at several concurrencies.

// countProcessor is the count per key as a stateful processor with one
// value state.
type countProcessor struct{ count *typed.ValueState[int64] }

func (p *countProcessor) Init(h *typed.Handle) error {
	p.count = typed.NewValueState[int64](h, "count")
	return nil
}

func (p *countProcessor) HandleInputRows(ctx context.Context, key string, rows iter.Seq[countrec.Event], _ typed.TimerValues, emit func(countrec.KeyCount)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	for range rows {
		n++
	}
	if err := p.count.Update(ctx, n); err != nil {
		return err
	}
	emit(countrec.KeyCount{Key: key, Count: n})
	return nil
}

func (p *countProcessor) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(countrec.KeyCount)) error {
	return nil
}

func (p *countProcessor) Close() error { return nil }

// threeStates keeps a count (value), the last few keys' row numbers
// (list) and a count per row parity (map) per key.
type threeStates struct {
	count  *typed.ValueState[int64]
	recent *typed.ListState[int64]
	parity *typed.MapState[int64, int64]
}

func (p *threeStates) Init(h *typed.Handle) error {
	p.count = typed.NewValueState[int64](h, "count")
	p.recent = typed.NewListState[int64](h, "recent")
	p.parity = typed.NewMapState[int64, int64](h, "parity")
	return nil
}

func (p *threeStates) HandleInputRows(ctx context.Context, key string, rows iter.Seq[countrec.Event], _ typed.TimerValues, emit func(countrec.KeyCount)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	for range rows {
		n++
		if err := p.recent.AppendValue(ctx, n); err != nil {
			return err
		}
		c, _, err := p.parity.GetValue(ctx, n%2)
		if err != nil {
			return err
		}
		if err := p.parity.UpdateValue(ctx, n%2, c+1); err != nil {
			return err
		}
	}
	if err := p.count.Update(ctx, n); err != nil {
		return err
	}
	emit(countrec.KeyCount{Key: key, Count: n})
	return nil
}

func (p *threeStates) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(countrec.KeyCount)) error {
	return nil
}

func (p *threeStates) Close() error { return nil }

// waitingProcessor counts per key after waiting on I/O (a sleep of wait)
// once per call: a handler bound by a remote call.
type waitingProcessor struct {
	countProcessor
	wait time.Duration
}

func (p *waitingProcessor) HandleInputRows(ctx context.Context, key string, rows iter.Seq[countrec.Event], timers typed.TimerValues, emit func(countrec.KeyCount)) error {
	select {
	case <-time.After(p.wait):
	case <-ctx.Done():
		return ctx.Err()
	}
	return p.countProcessor.HandleInputRows(ctx, key, rows, timers, emit)
}

func runProcessor(m *typed.MemoryStream[countrec.Event], dir string, sink typed.Sink[countrec.KeyCount], p typed.StatefulProcessor[string, countrec.Event, countrec.KeyCount], concurrency int) error {
	byKey := typed.GroupByKey(typed.FromMemory(m), func(e *countrec.Event) string { return e.Key })
	w := typed.WriteTo(typed.TransformWithState(byKey, p, typed.TimeModeNone, typed.Update, typed.Concurrency(concurrency)), sink)
	q, err := w.Start(context.Background(), runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// BenchmarkProcessorCountPerKey is the count per key at 10k keys (1M
// events, batches of 100k) with MapGroupsWithState and as a processor with
// one value state (target: within 1.2x), and as a processor with a value,
// a list and a map state.
func BenchmarkProcessorCountPerKey(b *testing.B) {
	const perBatch = 100_000
	in := uniformInput(10_000, 100, 1)
	var rate [2]float64
	b.Run("impl=mapGroupsWithState", func(b *testing.B) {
		m := typed.NewMemoryStream[countrec.Event]("events", perBatch)
		m.Add(in...)
		rate[0] = benchRuns(b, len(in), func(dir string, sink *countSink) error { return runStreamgen(m, dir, sink) })
	})
	b.Run("impl=processor", func(b *testing.B) {
		m := typed.NewMemoryStream[countrec.Event]("events", perBatch)
		m.Add(in...)
		rate[1] = benchRuns(b, len(in), func(dir string, sink *countSink) error {
			return runProcessor(m, dir, sink, &countProcessor{}, 1)
		})
		if rate[0] > 0 {
			b.Logf("the processor takes %.2fx the time of mapGroupsWithState (target: at most 1.2x)", rate[0]/rate[1])
		}
	})
	b.Run("impl=processor-value-list-map", func(b *testing.B) {
		m := typed.NewMemoryStream[countrec.Event]("events", perBatch)
		m.Add(in...)
		benchRuns(b, len(in), func(dir string, sink *countSink) error {
			return runProcessor(m, dir, sink, &threeStates{}, 1)
		})
	})
}

// BenchmarkProcessorConcurrency: handlers that wait 1 ms on I/O per key,
// one batch of 10k keys, with Concurrency(1) and Concurrency(64) (target:
// at least 40x the throughput; 64x is the limit). Concurrency(1) takes
// about 10 s a run: use -benchtime 1x.
func BenchmarkProcessorConcurrency(b *testing.B) {
	in := uniformInput(10_000, 1, 1)
	var rate []float64
	for _, conc := range []int{1, 64} {
		b.Run(fmt.Sprintf("concurrency=%d", conc), func(b *testing.B) {
			m := typed.NewMemoryStream[countrec.Event]("events", 0)
			m.Add(in...)
			r := benchRuns(b, len(in), func(dir string, sink *countSink) error {
				return runProcessor(m, dir, sink, &waitingProcessor{wait: time.Millisecond}, conc)
			})
			rate = append(rate, r)
			if len(rate) == 2 {
				b.Logf("Concurrency(64) gives %.1fx the throughput of Concurrency(1) (target: at least 40x)", rate[1]/rate[0])
			}
		})
	}
}
