package typed_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestBlockCacheSize: runtime.BlockCacheSize bounds what Pebble's block
// cache holds, as the progress reports show it, on a state read from
// Pebble's tables (the state cache off, and memtables of 4 MiB, which
// the state outgrows) that fills more than that bound by default.
func TestBlockCacheSize(t *testing.T) {
	const limit = 4 << 20
	largest := func(opts ...runtime.Option) int64 {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 6)
		m.Add(clicks(120, 11)...)
		byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		w := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, bigCount), newSink[fixtures.UserCount]()).OutputMode(typed.Update)
		q, err := w.Start(context.Background(), append(opts, runtime.Checkpoint("ckpt"), runtime.FileSystem(vfs.NewMem()),
			runtime.WithTrigger(runtime.AvailableNow()), runtime.CloseTimeout(5*time.Second), runtime.StateCacheSize(-1), runtime.MemTableSize(4<<20))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := await(t, q); err != nil {
			t.Fatal(err)
		}
		var most int64
		for _, p := range q.RecentProgress() {
			most = max(most, p.StateStore.BlockCacheBytes)
		}
		return most
	}
	if got := largest(); got <= limit {
		t.Fatalf("by default the block cache held at most %d bytes: the test does not fill %d", got, limit)
	}
	if got := largest(runtime.BlockCacheSize(limit)); got > limit {
		t.Fatalf("with BlockCacheSize(%d) the block cache held %d bytes", limit, got)
	}
	if _, err := typed.WriteTo(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("c", 0)), newSink[fixtures.Click]()).
		Start(context.Background(), runtime.BlockCacheSize(-1)); err == nil || !strings.Contains(err.Error(), "BlockCacheSize -1 is negative") {
		t.Fatalf("a negative BlockCacheSize: %v", err)
	}
	if _, err := typed.WriteTo(typed.FromMemory(typed.NewMemoryStream[fixtures.Click]("c", 0)), newSink[fixtures.Click]()).
		Start(context.Background(), runtime.MemTableSize(-1)); err == nil || !strings.Contains(err.Error(), "MemTableSize -1 is negative") {
		t.Fatalf("a negative MemTableSize: %v", err)
	}
}
