package kafka_test

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
)

// BenchmarkChangelogRestore restores a store of 1,000,000 state entries
// (keys of 8 bytes, values of 16, in 20 batches) from a changelog topic on
// the embedded cluster into an empty checkpoint on disk, and reports
// the entries restored per second, beside the raw building blocks doing
// the least a restore can (impl=raw): a franz-go consumer reading the
// topic to its end, read_committed, with the same fetch size, each record
// set into a Pebble batch committed every 16 MiB and synced at the end.
// Run the two alternately (-count 1, a few times) before quoting a ratio.
// With STREAMGEN_KAFKA_BROKERS set it runs on those brokers instead of
// the embedded one (for example a "streamgen broker" process).
func BenchmarkChangelogRestore(b *testing.B) {
	const entries = 1_000_000
	// On the embedded broker, or on the brokers STREAMGEN_KAFKA_BROKERS
	// names (such as a "streamgen broker" process: then the broker's
	// memory is not in this process's heap), in a topic of its own.
	conn := kafka.Connection{Brokers: kafka.Brokers()}
	topic := "bench-changelog"
	if len(conn.Brokers) == 0 {
		cluster, err := kafka.Embedded(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		defer cluster.Close()
		conn = cluster.Connection()
	} else {
		topic = fmt.Sprintf("bench-changelog-%d", time.Now().UnixNano())
	}
	opts := kafka.ChangelogOptions{Connection: conn, Topic: topic}

	// The topic, written by a changelog committer (from a store in
	// memory).
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

	b.Run("impl=streamgen", func(b *testing.B) {
		var restored int64
		for range b.N {
			s, err := runtime.OpenStore(b.TempDir(), runtime.StoreOptions{})
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
		b.ReportMetric(float64(restored)/b.Elapsed().Seconds(), "entries/s")
		if restored/int64(b.N) < entries {
			b.Fatalf("restored %d records a time, want at least %d", restored/int64(b.N), entries)
		}
	})
	b.Run("impl=raw", func(b *testing.B) {
		var restored int64
		for range b.N {
			restored += rawRestore(b, conn, opts.Topic)
		}
		b.ReportMetric(float64(restored)/b.Elapsed().Seconds(), "entries/s")
		if restored/int64(b.N) < entries {
			b.Fatalf("read %d records a time, want at least %d", restored/int64(b.N), entries)
		}
	})
}

// rawRestore reads every partition of topic to its end into a new
// in-memory Pebble: the floor of a restore.
func rawRestore(b *testing.B, conn kafka.Connection, topic string) int64 {
	db, err := pebble.Open(b.TempDir(), &pebble.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	adm, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		b.Fatal(err)
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(b.Context(), topic)
	adm.Close()
	if err != nil {
		b.Fatal(err)
	}
	offsets := map[int32]kgo.Offset{}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		offsets[o.Partition] = kgo.NewOffset().AtStart()
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offsets}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxPartitionBytes(16<<20), kgo.FetchMaxBytes(64<<20))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	batch := db.NewBatch()
	var n int64
	for len(remaining) > 0 {
		fetches := client.PollFetches(b.Context())
		if err := fetches.Err0(); err != nil {
			b.Fatal(err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if r.Value == nil {
				batch.Delete(r.Key, nil)
			} else {
				batch.Set(r.Key, r.Value, nil)
			}
			n++
			if batch.Len() >= 16<<20 {
				if err := batch.Commit(pebble.NoSync); err != nil {
					b.Fatal(err)
				}
				batch = db.NewBatch()
			}
			if r.Offset+1 >= remaining[r.Partition] { // the topic has no transactions: its last offset is a record
				delete(remaining, r.Partition)
			}
		})
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		b.Fatal(err)
	}
	return n
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
