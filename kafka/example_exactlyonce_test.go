package kafka_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"os"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Count clicks per user from one topic to another exactly once: each
// batch's counts, its changelog records and its offsets commit in one
// Kafka transaction, so a read_committed consumer of "counts" sees every
// batch once, however the query fails and starts again.
func ExampleExactlyOnce() {
	ctx := context.Background()
	cluster, err := kafka.Embedded(ctx, kafka.SeedTopics(1, "clicks", "counts"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()
	dir, err := os.MkdirTemp("", "exactly-once-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	// The input: five clicks.
	producer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	for _, u := range []string{"ann", "bob", "ann", "cy", "ann"} {
		v, _ := (&fixtures.Click{User: u, Page: "home"}).MarshalJSON()
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(u), Value: v}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	eos := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: conn, Topic: "counts-changelog"})
	defer eos.Close()
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "counts",
		Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }, Transactions: eos})
	defer sink.Close()
	byUser := typed.GroupByKey(typed.From[fixtures.Click](src), func(c *fixtures.Click) string { return c.User })
	counts := typed.MapGroupsWithState(byUser, typed.NoTimeout,
		func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
			c, _ := state.Get()
			for range rows {
				c.Count++
			}
			state.Update(c)
			return fixtures.UserCount{User: user, Count: c.Count}, nil
		})
	q, err := typed.WriteTo(counts, sink).Start(ctx, runtime.Checkpoint(dir), runtime.WithTrigger(runtime.AvailableNow()), eos.Option())
	if err != nil {
		log.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		log.Fatal(err)
	}

	// A read_committed consumer of the output.
	consumer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.ConsumeTopics("counts"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	for seen := 0; seen < 3; {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var u fixtures.UserCount
			if err := u.UnmarshalJSON(r.Value); err != nil {
				log.Fatal(err)
			}
			fmt.Printf("%s: %d\n", u.User, u.Count)
			seen++
		})
	}
	// Unordered output:
	// ann: 3
	// bob: 1
	// cy: 1
}
