package runtime

import (
	"sync/atomic"
	"time"
)

// With cgo, Pebble allocates its block cache's blocks and its memtables
// with C's malloc. glibc's malloc keeps the memory of a freed block for
// the next allocation rather than return it to the system, and the block
// cache frees blocks all the time: to make room for a memtable (Pebble
// reserves its memtables' memory in the block cache, and a memtable of
// 64 MiB is a mapping of its own, not a reuse of freed blocks) and as
// blocks age out. So the process kept the most its blocks had ever taken
// plus its memtables, spread over an arena per thread that called malloc:
// in Nexmark's q9 at 100M events, glibc's arenas held about 500 MiB at
// the process's peak, for a cache of 256 MiB, memtables included. The
// stores hand the free pages back (glibc's malloc_trim) at most once a
// cHeapTrimInterval, after a batch's commit, and when a store closes.

// cHeapTrimInterval is the least time between two returns of the C
// heap's free pages. A return walks every free chunk of every arena
// (about 19 ms in q9, whose blocks are 4 KiB), and each page returned
// that is used again faults back in, so it is not done at every batch.
const cHeapTrimInterval = 5 * time.Second

// lastCHeapTrim is when the C heap's free pages were last returned, in
// nanoseconds of the monotonic clock since cHeapEpoch.
var (
	lastCHeapTrim atomic.Int64
	cHeapEpoch    = time.Now()
)

// releaseCHeap returns the C heap's free pages to the system unless
// that was done less than cHeapTrimInterval ago (by any store of the
// process), or always with force. Safe for concurrent use.
func releaseCHeap(force bool) {
	now := int64(time.Since(cHeapEpoch))
	last := lastCHeapTrim.Load()
	if !force && now-last < int64(cHeapTrimInterval) {
		return
	}
	if !lastCHeapTrim.CompareAndSwap(last, now) && !force {
		return // another store's commit is returning them
	}
	trimCHeap()
}
