package bench

import (
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/internal/procmem"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// The memory test: count per key over 10M distinct keys, each once, in
// micro-batches of 500k rows, and measure the process's peak resident
// memory. It takes minutes, so `go test ./...` skips it; run it with
//
//	STREAMGEN_BENCH_MEM=1 go test ./bench -run 'TestStateMemory/impl=streamgen' -v -timeout 60m
//
// (one implementation per process, so that each peak is its own).
// STREAMGEN_BENCH_MEM_KEYS changes the number of keys,
// STREAMGEN_BENCH_MEM_CACHE the state cache's size in bytes (-1: none).

// keySource is a replayable source of n JSON rows {"key":"user-…"}, one
// per distinct key, in a scrambled key order, at most perBatch rows per
// batch. Rows are made as they are read, so the input takes no memory:
// what the test measures is the pipeline's.
type keySource struct {
	n, perBatch int
}

// keyAt is the key number of row i: a multiplicative permutation of
// 0..n-1 (the multiplier is prime to n = 10^k), so that keys reach Pebble
// in no particular order, as real keys do.
func (s *keySource) keyAt(i int) int { return int((uint64(i)*7_368_787 + 12_345) % uint64(s.n)) }

func (s *keySource) Name() string { return "keys" }

func (s *keySource) Available(context.Context) (json.RawMessage, error) {
	return json.RawMessage(strconv.Itoa(s.n)), nil
}

func atoi(raw json.RawMessage) int {
	n, _ := strconv.Atoi(string(raw))
	return n
}

func (s *keySource) Next(_ context.Context, committed, upTo json.RawMessage, _ runtime.ReadLimit) (json.RawMessage, error) {
	from, to := atoi(committed), min(atoi(upTo), atoi(committed)+s.perBatch)
	if to <= from {
		return committed, nil
	}
	return json.RawMessage(strconv.Itoa(to)), nil
}

func (s *keySource) Read(_ context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	var buf []byte
	for i := atoi(start); i < atoi(end); i++ {
		buf = append(buf[:0], `{"key":"`...)
		buf = append(buf, keyName(s.keyAt(i))...)
		buf = append(buf, `"}`...)
		if err := fn(runtime.Record{Partition: "keys", Data: buf}); err != nil {
			return err
		}
	}
	return nil
}

// memSampler records the peak of the process's resident memory and of the
// Go runtime's memory while a test runs.
type memSampler struct {
	stop chan struct{}
	done sync.WaitGroup

	mu                          sync.Mutex
	peakRSS, goTotalAtPeak      uint64 // VmRSS and the Go runtime's memory (not released) at the RSS peak
	heapAtPeak                  uint64
	peakGoTotal, peakHeapObject uint64
}

// memMetrics: all memory the Go runtime maps, the part of it released to
// the OS (mapped but not resident), and the heap's objects.
var memMetrics = []string{"/memory/classes/total:bytes", "/memory/classes/heap/released:bytes", "/memory/classes/heap/objects:bytes"}

func startSampler() *memSampler {
	m := &memSampler{stop: make(chan struct{})}
	m.done.Add(1)
	go func() {
		defer m.done.Done()
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		samples := make([]metrics.Sample, len(memMetrics))
		for i, name := range memMetrics {
			samples[i].Name = name
		}
		for {
			rss := uint64(procmem.Status("VmRSS"))
			metrics.Read(samples)
			total := samples[0].Value.Uint64() - samples[1].Value.Uint64()
			heap := samples[2].Value.Uint64()
			m.mu.Lock()
			if rss > m.peakRSS {
				m.peakRSS, m.goTotalAtPeak, m.heapAtPeak = rss, total, heap
			}
			m.peakGoTotal = max(m.peakGoTotal, total)
			m.peakHeapObject = max(m.peakHeapObject, heap)
			m.mu.Unlock()
			select {
			case <-m.stop:
				return
			case <-t.C:
			}
		}
	}()
	return m
}

func (m *memSampler) finish() {
	close(m.stop)
	m.done.Wait()
}

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}

// batchLog logs every fourth batch of the query.
type batchLog struct{ t *testing.T }

func (l batchLog) OnQueryProgress(p runtime.QueryProgress) {
	if p.BatchID%4 == 3 {
		l.t.Logf("batch %d: %d rows in %d ms (addBatch %d, state %d, walCommit %d), state rows %d, RSS %d MiB",
			p.BatchID, p.NumInputRows, p.DurationMs["triggerExecution"], p.DurationMs["addBatch"],
			p.DurationMs["stateOperators"], p.DurationMs["walCommit"], p.StateOperators[0].NumRowsTotal, procmem.Status("VmRSS")>>20)
	}
}

func TestStateMemory(t *testing.T) {
	if os.Getenv("STREAMGEN_BENCH_MEM") == "" {
		t.Skip("takes minutes: set STREAMGEN_BENCH_MEM=1 to run it")
	}
	keys := 10_000_000
	if s := os.Getenv("STREAMGEN_BENCH_MEM_KEYS"); s != "" {
		var err error
		if keys, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	const perBatch = 500_000
	src := &keySource{n: keys, perBatch: perBatch}
	run := func(t *testing.T, body func(dir string, sink *countSink) error) {
		dir := t.TempDir()
		procmem.ResetPeak()
		t.Logf("before: RSS %d MiB, VmHWM %d MiB", procmem.Status("VmRSS")>>20, procmem.Status("VmHWM")>>20)
		m := startSampler()
		sink := &countSink{}
		started := time.Now()
		if err := body(dir, sink); err != nil {
			t.Fatal(err)
		}
		elapsed := time.Since(started)
		m.finish()
		if sink.rows != int64(keys) {
			t.Fatalf("%d output rows, want %d", sink.rows, keys)
		}
		const mib = 1 << 20
		hwm := uint64(procmem.Status("VmHWM"))
		t.Logf("%d keys in %v (%.0f events/s); store on disk %d MiB", keys, elapsed.Round(time.Second), float64(keys)/elapsed.Seconds(), dirSize(dir)/mib)
		t.Logf("peak RSS (VmHWM) %d MiB; sampled peak RSS %d MiB, of which Go runtime %d MiB (heap objects %d MiB), the rest (Pebble's C-allocated cache and memtables, C runtime) %d MiB",
			hwm/mib, m.peakRSS/mib, m.goTotalAtPeak/mib, m.heapAtPeak/mib, (m.peakRSS-min(m.peakRSS, m.goTotalAtPeak))/mib)
		t.Logf("peak Go runtime memory %d MiB, peak Go heap objects %d MiB", m.peakGoTotal/mib, m.peakHeapObject/mib)
		if hwm >= 1<<30 {
			t.Errorf("peak resident memory %d MiB is over 1 GiB", hwm/mib)
		}
	}
	t.Run("impl=streamgen", func(t *testing.T) {
		run(t, func(dir string, sink *countSink) error {
			byKey := typed.GroupByKey(typed.From[countrec.Event](src), func(e *countrec.Event) string { return e.Key })
			w := typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, countFn), typed.Sink[countrec.KeyCount](sink)).OutputMode(typed.Update)
			opts := []runtime.Option{runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow()), runtime.Listener(batchLog{t})}
			if s := os.Getenv("STREAMGEN_BENCH_MEM_CACHE"); s != "" {
				n, err := strconv.ParseInt(s, 10, 64)
				if err != nil {
					return err
				}
				opts = append(opts, runtime.StateCacheSize(n))
			}
			q, err := w.Start(context.Background(), opts...)
			if err != nil {
				return err
			}
			return q.AwaitTermination()
		})
	})
	t.Run("impl=handwritten", func(t *testing.T) {
		run(t, func(dir string, sink *countSink) error {
			h, err := openHand(dir)
			if err != nil {
				return err
			}
			rows := make([]countrec.Event, 0, perBatch)
			for start, end := range batches(keys, perBatch) {
				rows = rows[:0]
				err := src.Read(context.Background(), json.RawMessage(strconv.Itoa(start)), json.RawMessage(strconv.Itoa(end)), func(r runtime.Record) error {
					var e countrec.Event
					if err := e.UnmarshalJSON(r.Data); err != nil {
						return err
					}
					rows = append(rows, e)
					return nil
				})
				if err == nil {
					err = h.batch(rows, end, sink)
				}
				if err != nil {
					h.db.Close()
					return err
				}
				if h.batchID%4 == 0 {
					t.Logf("batch %d: RSS %d MiB", h.batchID-1, procmem.Status("VmRSS")>>20)
				}
			}
			return h.db.Close()
		})
	})
}

// wideSource is a replayable source of n JSON rows of about 100 bytes
// over distinct keys, all in one batch: a large single-batch input, as an
// available-now run over one big directory is.
type wideSource struct{ n, distinct int }

func (s *wideSource) Name() string { return "wide" }

func (s *wideSource) Available(context.Context) (json.RawMessage, error) {
	return json.RawMessage(strconv.Itoa(s.n)), nil
}

func (s *wideSource) Next(_ context.Context, committed, upTo json.RawMessage, _ runtime.ReadLimit) (json.RawMessage, error) {
	if atoi(committed) >= atoi(upTo) {
		return committed, nil
	}
	return upTo, nil
}

func (s *wideSource) Read(_ context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	var buf []byte
	for i := atoi(start); i < atoi(end); i++ {
		buf = append(buf[:0], `{"key":"`...)
		buf = append(buf, keyName(int((uint64(i)*7_368_787+12_345)%uint64(s.distinct)))...)
		buf = append(buf, `","note":"`...)
		buf = strconv.AppendInt(buf, int64(i), 10)
		for len(buf) < 98 {
			buf = append(buf, '.')
		}
		buf = append(buf, `"}`...)
		if err := fn(runtime.Record{Partition: "wide", Data: buf}); err != nil {
			return err
		}
	}
	return nil
}

// TestBatchMemory: one batch of many rows (20M rows of 100 bytes, 2 GB of
// input, by default; STREAMGEN_BENCH_MEM_ROWS changes it) over 1000 keys,
// counted per key. The operator spills past its batch memory budget, so the
// peak resident memory stays under 1 GiB whatever the input's size. Run it
// with
//
//	STREAMGEN_BENCH_MEM=1 go test ./bench -run TestBatchMemory -v -timeout 60m
func TestBatchMemory(t *testing.T) {
	if os.Getenv("STREAMGEN_BENCH_MEM") == "" {
		t.Skip("takes minutes: set STREAMGEN_BENCH_MEM=1 to run it")
	}
	rows := 20_000_000
	if s := os.Getenv("STREAMGEN_BENCH_MEM_ROWS"); s != "" {
		var err error
		if rows, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	const distinct = 1000
	src := &wideSource{n: rows, distinct: distinct}
	dir := t.TempDir()
	procmem.ResetPeak()
	m := startSampler()
	sink := &countSink{latest: map[string]int64{}}
	started := time.Now()
	byKey := typed.GroupByKey(typed.From[countrec.Event](src), func(e *countrec.Event) string { return e.Key })
	w := typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, countFn), typed.Sink[countrec.KeyCount](sink))
	q, err := w.Start(context.Background(), runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow()), runtime.SpillDirectory(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(started)
	m.finish()
	var total int64
	for _, n := range sink.latest {
		total += n
	}
	if len(sink.latest) != distinct || total != int64(rows) {
		t.Fatalf("%d keys counting %d rows, want %d keys counting %d", len(sink.latest), total, distinct, rows)
	}
	const mib = 1 << 20
	hwm := uint64(procmem.Status("VmHWM"))
	t.Logf("%d rows (%d MiB of input) in one batch in %v (%.0f rows/s)", rows, int64(rows)*100/mib, elapsed.Round(time.Second), float64(rows)/elapsed.Seconds())
	t.Logf("peak RSS (VmHWM) %d MiB, of which Go runtime %d MiB (heap objects %d MiB)", hwm/mib, m.goTotalAtPeak/mib, m.heapAtPeak/mib)
	if hwm >= 1<<30 {
		t.Errorf("peak resident memory %d MiB is over 1 GiB", hwm/mib)
	}
}
