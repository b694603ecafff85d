//go:build linux && cgo && !race

package runtime

import (
	"fmt"
	"math/rand/v2"
	"runtime/debug"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/internal/procmem"
)

// TestTrimReturnsBlocksTheCacheFreed fills a Pebble block cache, then
// reserves most of it as Pebble does for a memtable, which frees the
// blocks it evicts: the C heap keeps their pages until trimCHeap hands
// them back. (Not with the race detector, under which Pebble takes some
// of its blocks from the Go heap.)
func TestTrimReturnsBlocksTheCacheFreed(t *testing.T) {
	if !haveTrim() {
		t.Skip("the C library does not return its free pages on request")
	}
	cache := pebble.NewCache(64 << 20)
	defer cache.Unref()
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Cache: cache, Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// 96 MiB of values that do not compress, in tables.
	rng := rand.New(rand.NewPCG(1, 2))
	value := make([]byte, 1024)
	for i := range 96 * 1024 {
		for j := 0; j < len(value); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				value[j+k] = byte(v >> (8 * k))
			}
		}
		if err := db.Set(fmt.Appendf(nil, "key%08d", i), value, pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	// Their blocks, read, fill the cache.
	it, err := db.NewIter(nil)
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		_ = it.Value()
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	if size := cache.Size(); size < 48<<20 {
		t.Fatalf("the cache holds %d MiB of blocks, want the most of its 64", size>>20)
	}
	// Room for memtables: the blocks evicted for it are freed.
	defer cache.Reserve(48 << 20)()
	debug.FreeOSMemory() // what the Go heap would return, first
	before := rssAnon(t)
	trimCHeap()
	after := rssAnon(t)
	t.Logf("resident anonymous memory %d MiB before the trim, %d MiB after", before>>20, after>>20)
	if before-after < 24<<20 {
		t.Errorf("the trim returned %d MiB of the 48 MiB of blocks freed", (before-after)>>20)
	}
}

// rssAnon returns the process's resident anonymous memory in bytes.
func rssAnon(t *testing.T) int64 {
	t.Helper()
	n := procmem.Status("RssAnon")
	if n == 0 {
		t.Fatal("no RssAnon in /proc/self/status")
	}
	return n
}
