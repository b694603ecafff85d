package main

import (
	"bytes"
	"os"
	goruntime "runtime"
	"runtime/metrics"
	"runtime/pprof"
	"time"
)

// peakHeapProfile writes to path, when stop is called, the heap profile
// taken when the live Go heap was at its largest during the run: every
// interval it reads the heap's size, and when it has grown by a tenth
// since the last profile taken, takes another (the profile's in-use
// figures are as of the last collection). Not the whole of a run's
// resident memory: the state cache's arena, Pebble's block cache and
// memtables are outside the Go heap.
func peakHeapProfile(path string, interval time.Duration) (stop func() error) {
	done, finished := make(chan struct{}), make(chan struct{})
	var best bytes.Buffer
	go func() {
		defer close(finished)
		sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
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
