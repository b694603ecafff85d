package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamgen/streamgen/kafka"
)

const brokerUsage = `usage: streamgen broker [-listen ADDR] [-topic NAME:PARTITIONS]... [-min-session-timeout D] [-dir DIR]

broker runs a Kafka broker in this process (franz-go's kfake: produce,
fetch, transactions, consumer groups, admin) on a loopback address, until
SIGINT or SIGTERM, for several processes of an App to share on one machine
without a Kafka installation. It prints "brokers ADDR" once it listens.
It is for tests and demonstrations: it has no authentication, and it keeps
its logs in memory unless -dir is given.

Flags:
`

// runBroker is streamgen broker.
func runBroker(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("streamgen broker", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:9092", "the loopback `host:port` to listen on (port 0: any free one)")
	minSession := fs.Duration("min-session-timeout", 0, "the shortest session timeout the group coordinator accepts (Kafka's group.min.session.timeout.ms; default 6s)")
	dir := fs.String("dir", "", "keep the logs in `DIR`, so that a broker started again on it has the topics as they were")
	var topics []string
	fs.Func("topic", "create topic `NAME:PARTITIONS` at start (may be given more than once)", func(v string) error {
		name, n, ok := strings.Cut(v, ":")
		if _, err := strconv.ParseInt(n, 10, 32); !ok || name == "" || err != nil {
			return fmt.Errorf("%q is not NAME:PARTITIONS", v)
		}
		topics = append(topics, v)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(stderr, brokerUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "streamgen broker: unexpected arguments %q\n", fs.Args())
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// A second signal, while the first's stop is under way, ends the
	// process at once, as Go's default does.
	go func() { <-ctx.Done(); stop() }()
	opts := []kafka.EmbeddedOption{kafka.ListenAddr(*listen)}
	var fake []kfake.Opt
	if *minSession > 0 {
		fake = append(fake, kfake.GroupMinSessionTimeout(*minSession))
	}
	if *dir != "" {
		if err := os.MkdirAll(*dir, 0o755); err != nil {
			fmt.Fprintf(stderr, "streamgen broker: %v\n", err)
			return 1
		}
		fake = append(fake, kfake.DataDir(*dir))
	}
	opts = append(opts, kafka.FakeOptions(fake...))
	for _, t := range topics {
		name, n, _ := strings.Cut(t, ":")
		p, _ := strconv.ParseInt(n, 10, 32)
		opts = append(opts, kafka.SeedTopics(int32(p), name))
	}
	cluster, err := kafka.Embedded(ctx, opts...)
	if err != nil {
		fmt.Fprintf(stderr, "streamgen broker: %v\n", err)
		return 1
	}
	defer cluster.Close()
	fmt.Fprintf(stdout, "brokers %s\n", strings.Join(cluster.Brokers(), ","))
	if f, ok := stdout.(*os.File); ok {
		f.Sync()
	}
	<-ctx.Done()
	// A moment for the clients' last requests, then the logs go.
	time.Sleep(10 * time.Millisecond)
	return 0
}
