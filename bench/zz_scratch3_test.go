package bench

import (
	"context"
	"encoding/binary"
	"github.com/cockroachdb/pebble/v2"
	"os"
	"testing"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/runtime"
)

func runStoreAPI(in []countrec.Event, perBatch int, dir string, sink *countSink) error {
	s, err := runtime.OpenStore(dir, runtime.StoreOptions{})
	if err != nil {
		return err
	}
	counts := map[string]int64{}
	var out []countrec.KeyCount
	var buf []byte
	id := int64(0)
	for start, end := range batches(len(in), perBatch) {
		clear(counts)
		for _, e := range in[start:end] {
			counts[e.Key]++
		}
		b := s.NewBatch()
		out = out[:0]
		for k, n := range counts {
			raw, ok, err := b.Get(0, "state", []byte(k))
			if err != nil {
				return err
			}
			var c countrec.Count
			if ok {
				c.UnmarshalBinary(raw)
			}
			c.N += n
			buf, _ = c.AppendBinary(buf[:0])
			b.Put(0, "state", []byte(k), buf)
			out = append(out, countrec.KeyCount{Key: k, Count: c.N})
		}
		id++
		sink.Write(context.Background(), id, out)
		if err := b.Commit(runtime.Progress{BatchID: id}); err != nil {
			return err
		}
	}
	return s.Close()
}

func BenchmarkScratch(b *testing.B) {
	if os.Getenv("SCRATCH") == "" {
		b.Skip()
	}
	in := uniformInput(10_000, 100, 1)
	b.Run("impl=storeapi", func(b *testing.B) {
		benchRuns(b, len(in), func(dir string, sink *countSink) error { return runStoreAPI(in, 100_000, dir, sink) })
	})
	b.Run("impl=handwritten", func(b *testing.B) {
		benchRuns(b, len(in), func(dir string, sink *countSink) error { return runHandwritten(in, 100_000, dir, sink) })
	})
}

func runHandIndexed(in []countrec.Event, perBatch int, dir string, sink *countSink) error {
	db, err := openPebble(dir)
	if err != nil {
		return err
	}
	counts := map[string]int64{}
	var out []countrec.KeyCount
	var key, val []byte
	for start, end := range batches(len(in), perBatch) {
		clear(counts)
		for _, e := range in[start:end] {
			counts[e.Key]++
		}
		b := db.NewIndexedBatch()
		out = out[:0]
		for k, n := range counts {
			key = handKey(key[:0], k)
			v, closer, err := b.Get(key)
			if err == nil {
				old, _ := binary.Varint(v)
				closer.Close()
				n += old
			}
			val = binary.AppendVarint(val[:0], n)
			b.Set(key, val, nil)
			out = append(out, countrec.KeyCount{Key: k, Count: n})
		}
		sink.Write(context.Background(), 0, out)
		b.Set(handProgressKey, []byte("x"), nil)
		if err := b.Commit(pebble.Sync); err != nil {
			return err
		}
		b.Close()
	}
	return db.Close()
}

func BenchmarkScratchIdx(b *testing.B) {
	if os.Getenv("SCRATCH") == "" {
		b.Skip()
	}
	in := uniformInput(10_000, 100, 1)
	benchRuns(b, len(in), func(dir string, sink *countSink) error { return runHandIndexed(in, 100_000, dir, sink) })
}
