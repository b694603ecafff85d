package kafka_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Count clicks per user from one topic into another, on an embedded
// broker, and read the counts back with a plain consumer.
func Example() {
	ctx := context.Background()
	cluster, err := kafka.Embedded(ctx, kafka.SeedTopics(3, "clicks"), kafka.SeedTopics(1, "counts"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()

	// Some clicks, keyed by user.
	producer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	base := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	for i, user := range []string{"ann", "bob", "ann", "cy", "ann", "bob"} {
		click := fixtures.Click{User: user, Time: base.Add(time.Duration(i) * time.Minute), Page: "home"}
		value, _ := click.MarshalJSON()
		if err := producer.ProduceSync(ctx, &kgo.Record{Topic: "clicks", Key: []byte(user), Value: value}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "counts",
		Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }})
	defer sink.Close()
	byUser := typed.GroupByKey(typed.From[fixtures.Click](src), func(c *fixtures.Click) string { return c.User })
	counts := typed.MapGroupsWithState(byUser, typed.NoTimeout,
		func(user string, clicks iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
			c, _ := state.Get()
			for range clicks {
				c.Count++
			}
			state.Update(c)
			return fixtures.UserCount{User: user, Count: c.Count}, nil
		})
	q, err := typed.WriteTo(counts, sink).Start(ctx, runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		log.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		log.Fatal(err)
	}

	// The last count of each user in the output topic.
	ends, err := kadm.NewClient(producer).ListEndOffsets(ctx, "counts")
	if err != nil {
		log.Fatal(err)
	}
	end, _ := ends.Lookup("counts", 0)
	consumer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.ConsumeTopics("counts"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	latest := map[string]int64{}
	for read := int64(0); read < end.Offset; {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var u fixtures.UserCount
			if err := u.UnmarshalJSON(r.Value); err != nil {
				log.Fatal(err)
			}
			latest[u.User] = u.Count
			read++
		})
	}
	for _, user := range slices.Sorted(maps.Keys(latest)) {
		fmt.Println(user, latest[user])
	}
	// Output:
	// ann 3
	// bob 2
	// cy 1
}
