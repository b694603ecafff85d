package kafka_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/typed"
)

// transactions returns a transactional producer to the cluster, records
// partitioned by hand, and transaction, which produces records in a
// transaction and ends it (kgo.TryCommit or kgo.TryAbort), or with end
// nil leaves it open.
func transactions(t *testing.T, conn kafka.Connection, id string) (producer *kgo.Client, transaction func(end *kgo.TransactionEndTry, records ...*kgo.Record)) {
	t.Helper()
	ctx := testContext(t)
	producer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.TransactionalID(id),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)
	return producer, func(end *kgo.TransactionEndTry, records ...*kgo.Record) {
		t.Helper()
		if err := producer.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := producer.ProduceSync(ctx, records...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if end != nil {
			if err := producer.EndTransaction(ctx, *end); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestReadCommitted writes a committed transaction, plain records, an
// aborted transaction (so the partition's last offsets before its end
// hold no record to return), then leaves a transaction open: a query
// reads the committed and plain records, ends its batch at the end
// without waiting for records that will never come, and reads the open
// transaction's records once it commits, never the aborted ones.
func TestReadCommitted(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "txn", 1)
	ctx := testContext(t)
	producer, transaction := transactions(t, conn, "streamgen-test")
	commit, abort := kgo.TryCommit, kgo.TryAbort
	transaction(&commit, rateRecords("txn", 0, 0, 3)...)
	produce(t, conn, rateRecords("txn", 0, 10, 2)...)
	transaction(&abort, rateRecords("txn", 0, 20, 2)...)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"txn"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	sink := typed.NewMemorySink[fixtures.RateRow]()
	ck := newCheckpoint()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
	want := []int64{0, 1, 2, 10, 11}
	if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}

	// A transaction left open holds back what follows it.
	transaction(nil, rateRecords("txn", 0, 30, 2)...)
	produce(t, conn, rateRecords("txn", 0, 40, 1)...)
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
	if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("with a transaction open, read %v, want %v", got, want)
	}
	if err := producer.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
	want = slices.Concat(want, []int64{30, 31, 40})
	if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("once it committed, read %v, want %v", got, want)
	}
}

// TestReadUncommitted reads what TestReadCommitted writes with
// ReadUncommitted, as a consumer with isolation.level=read_uncommitted
// (Spark's and Flink's default): the aborted transaction's records too,
// and those of a transaction still open without waiting for it, and a
// query of the same checkpoint read again from its start reads the same.
func TestReadUncommitted(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "txn", 1)
	ctx := testContext(t)
	producer, transaction := transactions(t, conn, "streamgen-test")
	commit, abort := kgo.TryCommit, kgo.TryAbort
	transaction(&commit, rateRecords("txn", 0, 0, 3)...)
	produce(t, conn, rateRecords("txn", 0, 10, 2)...)
	transaction(&abort, rateRecords("txn", 0, 20, 2)...)
	transaction(nil, rateRecords("txn", 0, 30, 2)...)
	produce(t, conn, rateRecords("txn", 0, 40, 1)...)

	opts := kafka.Options{Connection: conn, Topics: []string{"txn"}, StartingOffsets: kafka.Earliest(), ReadUncommitted: true}
	src := kafka.Source(opts)
	defer src.Close()
	sink := typed.NewMemorySink[fixtures.RateRow]()
	ck := newCheckpoint()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
	want := []int64{0, 1, 2, 10, 11, 20, 21, 30, 31, 40}
	if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	if err := producer.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	produce(t, conn, rateRecords("txn", 0, 50, 1)...)
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
	want = append(want, 50)
	if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("once the open transaction aborted, read %v, want %v", got, want)
	}

	again := kafka.Source(opts)
	defer again.Close()
	replay := typed.NewMemorySink[fixtures.RateRow]()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](again), replay), newCheckpoint())
	if got := values(replay.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read again from the start, read %v, want %v", got, want)
	}
}
