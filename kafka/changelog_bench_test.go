package kafka_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
)

// BenchmarkChangelogRestore restores a store of 500,000 state entries
// (keys of 8 bytes, values of 16) from a changelog topic on the embedded
// cluster into an empty in-memory checkpoint, and reports the entries
// restored per second.
func BenchmarkChangelogRestore(b *testing.B) {
	const entries = 500_000
	cluster, err := kafka.Embedded(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "bench-changelog"}

	// The topic, written by a changelog committer: one batch of entries.
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		b.Fatal(err)
	}
	c := kafka.NewChangelog(opts, s)
	if err := c.Restore(b.Context()); err != nil {
		b.Fatal(err)
	}
	v := runtime.Var{Variable: 0}
	const perBatch = 50_000
	for id := range int64(entries / perBatch) {
		batch := s.NewBatch()
		for i := range int64(perBatch) {
			key := binary.BigEndian.AppendUint64(nil, uint64(id*perBatch+i))
			if err := batch.Put(v, key, nil, fmt.Appendf(nil, "value-%010d", id*perBatch+i)); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Commit(batch, runtime.Progress{BatchID: id}); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	s.Close()

	b.ResetTimer()
	var restored int64
	start := time.Now()
	for range b.N {
		s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
		if err != nil {
			b.Fatal(err)
		}
		rc := kafka.NewChangelog(opts, s)
		if err := rc.Restore(b.Context()); err != nil {
			b.Fatal(err)
		}
		restored += kafka.RestoredRecords(rc)
		rc.Close()
		s.Close()
	}
	b.ReportMetric(float64(restored)/time.Since(start).Seconds(), "entries/s")
	if restored/int64(b.N) < entries {
		b.Fatalf("restored %d records a time, want at least %d", restored/int64(b.N), entries)
	}
}

// BenchmarkChangelogCommit commits batches of 1,000 state entries (keys
// of 8 bytes, values of 16) to an in-memory checkpoint, through the
// changelog on the embedded cluster or straight to the store, and
// reports the entries committed per second.
func BenchmarkChangelogCommit(b *testing.B) {
	const perBatch = 1000
	for _, withChangelog := range []bool{false, true} {
		b.Run(fmt.Sprintf("changelog=%v", withChangelog), func(b *testing.B) {
			s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var c runtime.Committer = s
			if withChangelog {
				cluster, err := kafka.Embedded(b.Context())
				if err != nil {
					b.Fatal(err)
				}
				defer cluster.Close()
				cl := kafka.NewChangelog(kafka.ChangelogOptions{Connection: cluster.Connection(), Topic: "commits"}, s)
				defer cl.Close()
				if err := cl.Restore(b.Context()); err != nil {
					b.Fatal(err)
				}
				c = cl
			}
			v := runtime.Var{Variable: 0}
			b.ResetTimer()
			for id := range int64(b.N) {
				batch := s.NewBatch()
				for i := range int64(perBatch) {
					key := binary.BigEndian.AppendUint64(nil, uint64(i))
					if err := batch.Put(v, key, nil, fmt.Appendf(nil, "value-%010d", id)); err != nil {
						b.Fatal(err)
					}
				}
				if err := c.Commit(batch, runtime.Progress{BatchID: id}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*perBatch)/b.Elapsed().Seconds(), "entries/s")
		})
	}
}
