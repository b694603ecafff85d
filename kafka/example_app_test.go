package kafka_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"os"
	"sort"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// rowsRead cancels a context once the queries it listens to have read n
// rows in all.
type rowsRead struct {
	mu     sync.Mutex
	n      int64
	cancel context.CancelFunc
}

func (r *rowsRead) OnQueryProgress(p runtime.QueryProgress) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n -= p.NumInputRows; r.n <= 0 {
		r.cancel()
	}
}

// Count clicks per user with an application that scales out: run the
// same program on several machines with the same Group, and the input's
// partitions (and their state) are divided among them. Here one instance
// runs the tasks of both partitions, exactly once.
func ExampleApp() {
	ctx := context.Background()
	cluster, err := kafka.Embedded(ctx, kafka.SeedTopics(2, "clicks", "counts"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()
	dir, err := os.MkdirTemp("", "app-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	producer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		log.Fatal(err)
	}
	defer producer.Close()
	users := []string{"ann", "bob", "ann", "cy", "ann", "bob"}
	for _, u := range users {
		v, _ := (&fixtures.Click{User: u, Page: "home"}).MarshalJSON()
		// Keyed by user: all of a user's clicks are in one partition.
		if err := producer.ProduceSync(ctx, &kgo.Record{Key: []byte(u), Value: v}).FirstErr(); err != nil {
			log.Fatal(err)
		}
	}

	runCtx, stop := context.WithCancel(ctx)
	app := kafka.NewApp(kafka.AppOptions{
		Connection:  conn,
		Group:       "click-counter",
		Topics:      []string{"clicks"},
		Dir:         dir,
		ExactlyOnce: true,
		Options:     []runtime.Option{runtime.Listener(&rowsRead{n: int64(len(users)), cancel: stop})},
	}, func(task *kafka.Task) (kafka.Starter, error) {
		sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "counts",
			Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }, Transactions: task.Transactions()})
		task.OnClose(sink.Close)
		byUser := typed.GroupByKey(typed.From[fixtures.Click](task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})),
			func(c *fixtures.Click) string { return c.User })
		counts := typed.MapGroupsWithState(byUser, typed.NoTimeout,
			func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
				c, _ := state.Get()
				for range rows {
					c.Count++
				}
				state.Update(c)
				return fixtures.UserCount{User: user, Count: c.Count}, nil
			})
		return typed.WriteTo(counts, sink), nil
	})
	if err := app.Run(runCtx); err != nil { // until every click is counted
		log.Fatal(err)
	}

	consumer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.ConsumeTopics("counts"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close()
	latest := map[string]int64{}
	for seen := 0; seen < 3; {
		consumer.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			var u fixtures.UserCount
			if err := u.UnmarshalJSON(r.Value); err != nil {
				log.Fatal(err)
			}
			latest[u.User] = u.Count
			seen++
		})
	}
	names := make([]string, 0, len(latest))
	for u := range latest {
		names = append(names, u)
	}
	sort.Strings(names)
	for _, u := range names {
		fmt.Printf("%s: %d\n", u, latest[u])
	}
	// Output:
	// ann: 3
	// bob: 2
	// cy: 1
}
