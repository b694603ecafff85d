// Command appcluster is one instance of a scaled-out application: run it
// as several processes (on one machine or many) against one Kafka cluster,
// and they share the work. It counts clicks per user (topic -input, JSON
// {"user", "time", "page"} keyed by user) exactly once, writing each new
// count to -output keyed by user; each partition's state is in a
// checkpoint under -dir and in the changelog topic, kept warm on
// -standbys other instances, so that a partition whose instance dies moves
// to its standby and goes on within the session timeout. Each instance
// serves, on -http, its status page, its metrics and the state of any user,
// whichever instance owns it:
//
//	go run ./cmd/streamgen broker -listen 127.0.0.1:9092 -topic clicks:8 -topic counts:4 &
//	export STREAMGEN_KAFKA_BROKERS=127.0.0.1:9092
//	go run ./examples/appcluster -dir /tmp/a1 -http 127.0.0.1:8081 -produce 100000 &
//	go run ./examples/appcluster -dir /tmp/a2 -http 127.0.0.1:8082 &
//	go run ./examples/appcluster -dir /tmp/a3 -http 127.0.0.1:8083 &
//	curl '127.0.0.1:8082/app/state/0/state?key=user-17'   # from any instance
//	curl 127.0.0.1:8081/app/state/                          # the instance's tasks, standbys, partitions
//
// The brokers come from -brokers or STREAMGEN_KAFKA_BROKERS; without
// either, it starts an in-process cluster and runs alone on it. It creates
// the topics when they are missing (-partitions each). -produce N first
// produces N sample clicks (-users users). SIGINT or SIGTERM stops the
// instance: its tasks finish their batches and it leaves the group, whose
// other instances take its partitions; with -instance-id it stays a
// member until the session timeout, and started again with the same id
// before then it takes its partitions back, and none moves. -reset, with
// every instance stopped, makes the next run start over, and exits. Exit
// status: 0 after a signal, 1 on an error, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// Click is an input record, Count an output record and the state.
//
//streamgen:record
type Click struct {
	User string    `json:"user"`
	Time time.Time `json:"time"`
	Page string    `json:"page"`
}

// Count is a user's click count.
//
//streamgen:record
type Count struct {
	User  string `json:"user"`
	Count int64  `json:"count"`
}

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	// A second signal, while the first's stop is under way, ends the
	// process at once, as Go's default does.
	go func() { <-ctx.Done(); stop() }()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "appcluster:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// count counts a user's clicks.
func count(user string, rows iter.Seq[Click], state *typed.GroupState[Count]) (Count, error) {
	c, _ := state.Get()
	c.User = user
	for range rows {
		c.Count++
	}
	state.Update(c)
	return c, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("appcluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	brokers := fs.String("brokers", "", "comma-separated `host:port` list of the Kafka brokers; default $"+kafka.BrokersEnv+", or else an in-process cluster")
	group := fs.String("group", "appcluster", "the application's consumer group (and prefix of its changelog topic and transactional ids)")
	input := fs.String("input", "clicks", "the input `topic`")
	output := fs.String("output", "counts", "the output `topic`")
	dir := fs.String("dir", "", "the `directory` of this instance's checkpoints (required)")
	addr := fs.String("http", "127.0.0.1:0", "serve the status page, /metrics and /app/state/ on `host:port`; other instances forward reads of state here")
	standbys := fs.Int("standbys", 1, "standby replicas of each partition's state on other instances")
	session := fs.Duration("session-timeout", 6*time.Second, "how long the group waits for a silent instance before it moves its partitions")
	rebalance := fs.Duration("rebalance-timeout", 0, "how long the group waits for its instances to rejoin once a rebalance begins (0: the client's 60 s)")
	instance := fs.String("instance-id", "", "a static group membership `id`, the same at every start of this instance: a restart within the session timeout moves no partition")
	reset := fs.Bool("reset", false, "reset the application instead of running it, for reprocessing: delete its changelog topic, its group and the checkpoints under -dir (every instance stopped), then exit")
	partitions := fs.Int("partitions", 8, "partitions of the topics it creates")
	produce := fs.Int("produce", 0, "produce `N` sample clicks to the input first")
	users := fs.Int("users", 1000, "users of the sample clicks")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "appcluster: -dir is required, and there are no arguments")
		return errUsage
	}
	conn := kafka.Connection{Brokers: kafka.Brokers()}
	if *brokers != "" {
		conn.Brokers = strings.Split(*brokers, ",")
	}
	if len(conn.Brokers) == 0 {
		cluster, err := kafka.Embedded(ctx)
		if err != nil {
			return err
		}
		defer cluster.Close()
		conn = cluster.Connection()
		fmt.Fprintf(stderr, "appcluster: an in-process Kafka cluster at %s\n", strings.Join(conn.Brokers, ","))
	}
	opts := kafka.AppOptions{
		Connection:       conn,
		Group:            *group,
		Topics:           []string{*input},
		Dir:              *dir,
		ExactlyOnce:      true,
		StandbyReplicas:  *standbys,
		SessionTimeout:   *session,
		RebalanceTimeout: *rebalance,
		InstanceID:       *instance,
	}
	build := func(task *kafka.Task) (kafka.Starter, error) {
		src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
		sink := kafka.Sink(kafka.SinkOptions[Count]{Connection: conn, Topic: *output,
			Key: func(c *Count) []byte { return []byte(c.User) }, Transactions: task.Transactions()})
		task.OnClose(sink.Close)
		byUser := typed.GroupByKey(typed.From[Click](src), func(c *Click) string { return c.User })
		return typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), sink).OutputMode(typed.Update), nil
	}
	if *reset {
		if err := kafka.NewApp(opts, build).Reset(ctx); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "appcluster: reset group %s: its next run reads the input from the start\n", *group)
		return nil
	}
	if err := ensureTopics(ctx, conn, int32(*partitions), *input, *output); err != nil {
		return err
	}
	if *produce > 0 {
		if err := produceSample(ctx, conn, *input, *produce, *users); err != nil {
			return err
		}
	}
	srv, err := observe.Serve(*addr)
	if err != nil {
		return err
	}
	defer srv.Close()
	opts.AdvertisedAddr = srv.Addr().String()
	opts.Options = []runtime.Option{srv.Watch(), runtime.WithTrigger(runtime.ProcessingTime(50 * time.Millisecond))}
	app := kafka.NewApp(opts, build)
	srv.Handle("/app/", app.StateHandler())
	srv.Page.AddPanel("Application "+*group, func() any { return app.Status() })
	if err := srv.Metrics.Register(app.Collector()); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "appcluster: serving on http://%s/ (state: /app/state/)\n", opts.AdvertisedAddr)
	if f, ok := stdout.(*os.File); ok {
		f.Sync()
	}
	slog.Info("appcluster: joining", "group", *group, "brokers", conn.Brokers, "dir", *dir)
	return app.Run(ctx)
}

// ensureTopics creates the topics that are missing.
func ensureTopics(ctx context.Context, conn kafka.Connection, partitions int32, topics ...string) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		return err
	}
	defer client.Close()
	resp, err := kadm.NewClient(client).CreateTopics(ctx, partitions, -1, nil, topics...)
	if err != nil {
		return fmt.Errorf("create the topics: %w", err)
	}
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

// produceSample produces n clicks of users users, keyed by user.
func produceSample(ctx context.Context, conn kafka.Connection, topic string, n, users int) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer client.Close()
	r := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	now := time.Now().UTC()
	for i := range n {
		c := Click{User: fmt.Sprintf("user-%d", r.IntN(users)), Time: now.Add(time.Duration(i) * time.Millisecond), Page: pages[r.IntN(len(pages))]}
		v, err := c.MarshalJSON()
		if err != nil {
			return err
		}
		client.Produce(ctx, &kgo.Record{Key: []byte(c.User), Value: v}, nil)
	}
	return client.Flush(ctx)
}

// pages are the sample's pages.
var pages = []string{"/", "/search", "/item", "/cart", "/checkout"}
