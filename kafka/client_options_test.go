package kafka_test

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/typed"
)

// TestClientOptionsSASL runs a source and a sink against an embedded
// broker that requires SASL, with the credentials given as franz-go
// client options.
func TestClientOptionsSASL(t *testing.T) {
	ctx := testContext(t)
	cluster, err := kafka.Embedded(ctx, kafka.FakeOptions(kfake.EnableSASL(), kfake.Superuser("PLAIN", "streamgen", "secret")))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	auth := kgo.SASL(plain.Auth{User: "streamgen", Pass: "secret"}.AsMechanism())
	conn := kafka.Connection{Brokers: cluster.Brokers(), ClientOptions: []kgo.Opt{auth}}

	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), auth, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	for _, topic := range []string{"in", "out"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	if err := client.ProduceSync(ctx, rateRecords("in", 0, 0, 5)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"in"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	sink := kafka.Sink[fixtures.RateRow](kafka.SinkOptions[fixtures.RateRow]{Connection: conn, Topic: "out"})
	defer sink.Close()
	q := runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), newCheckpoint())
	if n := inputRows(q); n != 5 {
		t.Fatalf("read %d rows, want 5", n)
	}
	ends, err := adm.ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := ends.Lookup("out", 0); o.Offset != 5 {
		t.Fatalf("the sink wrote %d records, want 5", o.Offset)
	}
}
