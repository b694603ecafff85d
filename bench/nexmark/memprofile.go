package main

import (
	"bytes"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// peakHeapProfile writes to path, when stop is called, a heap profile
// taken near the run's largest live Go heap: every interval it reads the
// heap live at the last collection, and when that has grown by a tenth
// since the last profile taken, takes another (whose in-use figures are
// as of that same collection), so the profile kept is within a tenth of
// the largest. Not the whole of a run's resident memory: the state
// cache's arena, Pebble's block cache and memtables are outside the Go
// heap.
func peakHeapProfile(path string, interval time.Duration) (stop func() error) {
	done, finished := make(chan struct{}), make(chan struct{})
	var best bytes.Buffer
	go func() {
		defer close(finished)
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		var peak uint64
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			metrics.Read(sample)
			if heap := sample[0].Value.Uint64(); heap > peak+peak/10 {
				peak = heap
				best.Reset()
				_ = pprof.Lookup("heap").WriteTo(&best, 0)
			}
		}
	}()
	return func() error {
		close(done)
		<-finished
		if best.Len() == 0 {
			goruntime.GC()
			_ = pprof.Lookup("heap").WriteTo(&best, 0)
		}
		return os.WriteFile(path, best.Bytes(), 0o644)
	}
}
