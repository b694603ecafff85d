package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/streamgen/streamgen/bench/countrec"
)


func TestScratchIndexed(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	in := uniformInput(10_000, 100, 1)
	for _, indexed := range []bool{false, true} {
		db, err := openPebble(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		counts := map[string]int64{}
		var key, val []byte
		st := time.Now()
		sink := &countSink{}
		var out []countrec.KeyCount
		for start, end := range batches(len(in), 100_000) {
			clear(counts)
			for _, e := range in[start:end] {
				counts[e.Key]++
			}
			var b *pebble.Batch
			if indexed {
				b = db.NewIndexedBatch()
			} else {
				b = db.NewBatch()
			}
			out = out[:0]
			for k, n := range counts {
				key = handKey(key[:0], k)
				var v []byte
				var closer io.Closer
				var err error
				if indexed {
					v, closer, err = b.Get(key)
				} else {
					v, closer, err = db.Get(key)
				}
				if err == nil {
					old, _ := binary.Varint(v)
					closer.Close()
					n += old
				} else if !errors.Is(err, pebble.ErrNotFound) {
					t.Fatal(err)
				}
				val = binary.AppendVarint(val[:0], n)
				b.Set(key, val, nil)
				out = append(out, countrec.KeyCount{Key: k, Count: n})
			}
			sink.Write(context.Background(), 0, out)
			b.Set(handProgressKey, []byte("x"), nil)
			if err := b.Commit(pebble.Sync); err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		m := db.Metrics()
		t.Logf("indexed=%v %v L0files=%d cache=%d/%d hits=%d miss=%d flushes=%d ingestAsFlushable=%d memtables=%d", indexed, time.Since(st), m.Levels[0].TablesCount, m.BlockCache.Size, m.BlockCache.Count, m.BlockCache.Hits, m.BlockCache.Misses, m.Flush.Count, m.Flush.AsIngestCount, m.MemTable.Count)
		db.Close()
	}
}
