package kafka_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestOneFetchABatch: a source of given partitions that knows where its
// next batch starts learns where the partitions end from one fetch per
// leader, whose records the batch then reads: after the first batch a
// batch costs no metadata or ListOffsets request and one fetch per
// leader. What each batch reads is what a plain read_committed consumer
// reads of the same offsets: committed and plain records, never those of
// an aborted transaction, nothing of a transaction still open.
func TestOneFetchABatch(t *testing.T) {
	ctx := testContext(t)
	cluster, err := kafka.Embedded(ctx, kafka.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()
	fake := kafka.FakeCluster(cluster)
	counts := map[int16]*atomic.Int64{}
	for _, key := range []int16{int16(kmsg.Metadata), int16(kmsg.ListOffsets), int16(kmsg.Fetch)} {
		n := &atomic.Int64{}
		counts[key] = n
		fake.ControlKey(key, func(kmsg.Request) (kmsg.Response, error, bool) {
			fake.KeepControl()
			n.Add(1)
			return nil, nil, false
		})
	}
	admin, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	adm := kadm.NewClient(admin)
	createTopic(t, adm, "pre", 3)
	producer, transaction := transactions(t, conn, "prefetch-test")

	src := kafka.Source(kafka.Options{Connection: conn, Partitions: map[string][]int32{"pre": {0, 1, 2}}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	var committed json.RawMessage
	var read []int64
	// batch plans and reads one batch as a query does, and returns the
	// requests it sent of each kind.
	batch := func() (metadata, listings, fetches int64) {
		t.Helper()
		for _, n := range counts {
			n.Store(0)
		}
		committed = stepSource(t, src, committed, func(r runtime.Record) error {
			var row fixtures.RateRow
			if err := row.UnmarshalJSON(r.Data); err != nil {
				return err
			}
			read = append(read, row.Value)
			return nil
		})
		return counts[int16(kmsg.Metadata)].Load(), counts[int16(kmsg.ListOffsets)].Load(), counts[int16(kmsg.Fetch)].Load()
	}
	// check compares what was read with a plain read_committed consumer.
	check := func(what string) {
		t.Helper()
		var want []int64
		for _, r := range consumeWith(t, conn, adm, "pre", kgo.ReadCommitted()) {
			var row fixtures.RateRow
			if err := row.UnmarshalJSON(r.Value); err != nil {
				t.Fatal(err)
			}
			want = append(want, row.Value)
		}
		got := slices.Clone(read)
		slices.Sort(got)
		slices.Sort(want)
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%s: read %v, want %v", what, got, want)
		}
	}

	produce(t, conn, slices.Concat(rateRecords("pre", 0, 0, 3), rateRecords("pre", 1, 100, 2))...)
	batch() // the first batch lists: it knows no position yet
	check("first batch")

	commit, abort := kgo.TryCommit, kgo.TryAbort
	transaction(&commit, rateRecords("pre", 0, 10, 2)...)
	transaction(&abort, rateRecords("pre", 1, 120, 2)...)
	produce(t, conn, rateRecords("pre", 2, 200, 4)...)
	if m, l, f := batch(); m != 0 || l != 0 || f != 1 {
		t.Errorf("a batch sent %d metadata, %d ListOffsets and %d fetch requests, want 0, 0 and 1", m, l, f)
	}
	check("after committed, aborted and plain records")

	// An open transaction holds back what follows it; once committed,
	// the next batch reads both.
	transaction(nil, rateRecords("pre", 1, 130, 2)...)
	produce(t, conn, rateRecords("pre", 1, 140, 1)...)
	batch()
	if slices.Contains(read, 130) || slices.Contains(read, 140) {
		t.Fatalf("read %v past an open transaction", read)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if m, l, f := batch(); m != 0 || l != 0 || f != 1 {
		t.Errorf("a batch sent %d metadata, %d ListOffsets and %d fetch requests, want 0, 0 and 1", m, l, f)
	}
	check("after the open transaction committed")
	if _, _, f := batch(); f != 1 {
		t.Errorf("a batch without data sent %d fetches, want 1", f)
	}
	check("after a batch without data")
}

// TestBatchStartsWhenDataArrives: a query whose poll interval is an hour
// still reads records as they arrive, since its Kafka source waits for
// them with a fetch the broker answers when they do; and it stops at
// once while waiting.
func TestBatchStartsWhenDataArrives(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "arrive", 2)
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"arrive"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	rows := typed.NewMemorySink[fixtures.RateRow]()
	sink := newSignalSink[fixtures.RateRow](rows)
	q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), typed.Sink[fixtures.RateRow](sink)).
		Start(testContext(t), newCheckpoint().opts(runtime.PollInterval(time.Hour))...)
	if err != nil {
		t.Fatal(err)
	}
	has := func(n int) func() bool { return func() bool { return len(rows.Rows()) >= n } }
	produce(t, conn, rateRecords("arrive", 0, 0, 3)...)
	sink.waitFor(t, "the first records", has(3))
	produce(t, conn, rateRecords("arrive", 1, 100, 2)...)
	sink.waitFor(t, "records of the other partition", has(5))
	produce(t, conn, rateRecords("arrive", 0, 3, 1)...)
	sink.waitFor(t, "one more record", has(6))
	if err := q.Stop(); err != nil {
		t.Fatal(err)
	}
	if got, want := values(rows.Rows()), slices.Concat(span(0, 3), span(100, 101)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
