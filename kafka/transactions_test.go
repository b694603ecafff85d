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
	producer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.TransactionalID("streamgen-test"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer producer.Close()
	// transaction produces records in a transaction and ends it, or
	// leaves it open without end.
	transaction := func(end *kgo.TransactionEndTry, records ...*kgo.Record) {
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
