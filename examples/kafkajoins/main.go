// Command kafkajoins runs two joins over Kafka topics, on an in-process
// cluster by default:
//
//   - a stream-table join (Kafka Streams' KStream-KTable left join): each
//     order of "orders" with its customer's record from the compacted
//     topic "customers" (the latest per customer, at the order's time; a
//     tombstone deletes the customer), to "enriched-orders";
//
//   - a stream-stream join with a time condition (left outer): each
//     impression of "impressions" with the clicks on its ad of "clicks"
//     within ten minutes after it, and each impression without one, to
//     "impression-clicks".
//
//     go run ./examples/kafkajoins                      # in-process cluster and a sample
//     STREAMGEN_KAFKA_BROKERS=host:9092 go run ./examples/kafkajoins
//
// It creates the topics (three partitions each, keyed by customer and by
// ad), produces the sample, runs each query to the end of its input (with
// the end of the input moving the watermark past every event time, so the
// impressions never clicked are written), and prints each joined row as a
// JSON line, after Kafka has acknowledged it.
//
// Flags: -brokers LIST (default $STREAMGEN_KAFKA_BROKERS, or else an
// in-process cluster), -listen ADDR (the in-process cluster's loopback
// address). The exit status is 0 when both queries are done, 1 on an
// error, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	cli.Exit("kafkajoins", run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("kafkajoins", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokerList := fs.String("brokers", "", "comma-separated `host:port` list of a Kafka cluster's brokers; default: $"+kafka.BrokersEnv+", or else an in-process cluster")
	listen := fs.String("listen", "127.0.0.1:0", "the loopback `host:port` the in-process cluster listens on")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return &cli.UsageError{Err: err}
	}
	var brokers []string
	for _, b := range strings.Split(*brokerList, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		brokers = kafka.Brokers()
	}
	if len(brokers) == 0 {
		cluster, err := kafka.Embedded(ctx, kafka.ListenAddr(*listen))
		if err != nil {
			return err
		}
		defer cluster.Close()
		brokers = cluster.Brokers()
		fmt.Fprintf(stderr, "kafkajoins: in-process Kafka cluster at %s\n", strings.Join(brokers, ","))
	}
	conn := kafka.Connection{Brokers: brokers}
	if err := setUp(ctx, conn); err != nil {
		return err
	}

	// The stream-table join.
	orders := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"orders"}, StartingOffsets: kafka.Earliest()})
	defer orders.Close()
	customers := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"customers"}, StartingOffsets: kafka.Earliest()})
	defer customers.Close()
	enriched := enrich(typed.From[Order](orders), kafka.From(customers, decodeCustomer))
	if err := runQuery[EnrichedOrder](ctx, conn, enriched, "enriched-orders", func(e *EnrichedOrder) []byte { return []byte(e.Customer) }, stdout); err != nil {
		return fmt.Errorf("orders and customers: %w", err)
	}

	// The stream-stream join.
	impressions := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"impressions"}, StartingOffsets: kafka.Earliest()})
	defer impressions.Close()
	clicks := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"}, StartingOffsets: kafka.Earliest()})
	defer clicks.Close()
	pairs := clicked(typed.From[Impression](impressions), typed.From[Click](clicks))
	if err := runQuery[ImpressionClick](ctx, conn, pairs, "impression-clicks", func(p *ImpressionClick) []byte { return []byte(p.Ad) }, stdout); err != nil {
		return fmt.Errorf("impressions and clicks: %w", err)
	}
	return nil
}

// runQuery writes s to topic, keyed by key, to the end of its input (the
// watermark then moved past every event time), and prints each row once
// Kafka has acknowledged its batch.
func runQuery[T any, P codec.RecordPtr[T]](ctx context.Context, conn kafka.Connection, s typed.Stream[T], topic string, key func(*T) []byte, stdout io.Writer) error {
	sink := kafka.Sink[T, P](kafka.SinkOptions[T]{Connection: conn, Topic: topic, Key: key, WriterID: "kafkajoins-" + topic})
	defer sink.Close()
	dir, err := os.MkdirTemp("", "kafkajoins-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	q, err := typed.WriteTo(s, typed.Sink[T](&printed[T, P]{TopicSink: sink, topic: topic, w: stdout})).Start(ctx,
		runtime.Checkpoint(dir), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// printed is a topic sink that prints each row it wrote, as a JSON line
// after the topic's name.
type printed[T any, P codec.RecordPtr[T]] struct {
	*kafka.TopicSink[T]
	topic string
	w     io.Writer
}

func (p *printed[T, P]) Write(ctx context.Context, batchID int64, rows []T) error {
	if err := p.TopicSink.Write(ctx, batchID, rows); err != nil {
		return err
	}
	for i := range rows {
		line, err := P(&rows[i]).MarshalJSON()
		if err != nil {
			return err
		}
		fmt.Fprintf(p.w, "%s %s\n", p.topic, line)
	}
	return nil
}

// setUp creates the topics and produces the sample.
func setUp(ctx context.Context, conn kafka.Connection) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	for _, topic := range []string{"orders", "customers", "enriched-orders", "impressions", "clicks", "impression-clicks"} {
		var configs map[string]*string
		if topic == "customers" {
			compact := "compact"
			configs = map[string]*string{"cleanup.policy": &compact}
		}
		if _, err := adm.CreateTopic(ctx, 3, -1, configs, topic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic, err)
		}
	}
	var records []*kgo.Record
	records = append(records, sampleCustomers("customers")...)
	records = append(records, sampleOrders("orders")...)
	records = append(records, sampleImpressions("impressions")...)
	records = append(records, sampleClicks("clicks")...)
	if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return fmt.Errorf("produce the sample: %w", err)
	}
	return nil
}
