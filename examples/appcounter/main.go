// Command appcounter is a Quix Streams Kafka application ported: it reads
// customers' purchase requests and questions from InputsTopic (three
// partitions; JSON values {"id", "name", "subject", "content"}), parses
// the requests ("<product> <quantity>" in content), numbers each key's
// requests with a counter kept in state, writes the enriched requests
// (with "app_counter") to CorpAppsTopic, keyed as their input, and sends
// every message that is not a request to DeadLettersTopic with the
// reason in its headers; processing goes on. The counter is per Kafka
// message key (the sample keys messages by customer), as state in Quix
// Streams is, so a key's numbering is 1, 2, 3, ... in the order of its
// partition; it lives in the checkpoint, so a query started again on the
// same -checkpoint goes on numbering from where it stopped.
//
//	go run ./examples/appcounter                       # in-process cluster, a sample, one run
//	go run ./examples/appcounter -checkpoint /tmp/ac   # twice: the second run numbers on
//	STREAMGEN_KAFKA_BROKERS=host:9092 go run ./examples/appcounter -trigger 1s
//
// With no broker given (-brokers, or STREAMGEN_KAFKA_BROKERS) it starts
// an in-process Kafka cluster, listening on -listen (a loopback address;
// any Kafka client on the machine may use it while the program runs),
// creates the topics, produces -sample messages of a built-in sample, runs
// the query and prints what it wrote. With -checkpoint DIR the cluster
// keeps its logs in DIR/embedded-kafka, so that a later run on the same
// checkpoint finds the topics as the last run left them: it adds the next
// part of the sample, reads only that, and numbers on. With brokers it
// creates the three topics when they are missing, produces a sample only
// when -sample is given, and reads InputsTopic from its earliest offsets
// (on a new checkpoint) or from where the checkpoint stopped.
//
// Flags: -brokers LIST, -listen ADDR, -checkpoint DIR, -sample N,
// -trigger availableNow|once|DURATION, -input-topic, -output-topic,
// -dead-letter-topic. SIGINT or SIGTERM stops the query between batches;
// the exit status is 0 when the input is done, 130 after SIGINT, 143
// after SIGTERM, 1 on an error, 2 for bad flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	var stoppedBy os.Signal // the goroutine's until it has ended
	var watching sync.WaitGroup
	done := make(chan struct{})
	watching.Go(func() {
		select {
		case stoppedBy = <-signals:
			cancel()
		case <-done:
			return
		}
		select {
		case s := <-signals:
			cli.Exit("appcounter", &cli.Interrupted{Signal: s, Forced: true})
		case <-done:
		}
	})
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	close(done)
	watching.Wait()
	if stoppedBy != nil && err == nil { // a failure stays the failure
		err = &cli.Interrupted{Signal: stoppedBy}
	}
	cancel()
	cli.Exit("appcounter", err)
}

// flags are appcounter's flags.
type flags struct {
	brokers    string
	listen     string
	checkpoint string
	sample     int
	sampleSet  bool
	trigger    runtime.Trigger
	topics     topics
}

// topics are the names of the three topics.
type topics struct {
	input, output, deadLetters string
}

// defaultSample is the number of sample messages produced per run on the
// in-process cluster.
const defaultSample = 24

func parseFlags(args []string, stderr io.Writer) (*flags, error) {
	f := &flags{}
	fs := flag.NewFlagSet("appcounter", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&f.brokers, "brokers", "", "comma-separated `host:port` list of a Kafka cluster's brokers; default: $"+kafka.BrokersEnv+", or else an in-process cluster")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:0", "the loopback `host:port` the in-process cluster listens on (:0 for any free port)")
	fs.StringVar(&f.checkpoint, "checkpoint", "", "checkpoint `directory`; running again with the same one numbers on; default: a temporary directory removed at exit")
	fs.IntVar(&f.sample, "sample", defaultSample, "produce `N` messages of the built-in sample to the input topic before the query starts; with brokers, only when given")
	trigger := fs.String("trigger", "availableNow", "availableNow (process what is there and exit), once, or an interval such as 1s (run until SIGINT)")
	fs.StringVar(&f.topics.input, "input-topic", "InputsTopic", "the topic of the requests and questions")
	fs.StringVar(&f.topics.output, "output-topic", "CorpAppsTopic", "the topic of the numbered requests")
	fs.StringVar(&f.topics.deadLetters, "dead-letter-topic", "DeadLettersTopic", "the topic of the messages that are not requests")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &cli.UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "appcounter: unexpected arguments %q\n", fs.Args())
		fs.Usage()
		return nil, &cli.UsageError{Err: fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	fs.Visit(func(fl *flag.Flag) { f.sampleSet = f.sampleSet || fl.Name == "sample" })
	var err error
	if f.trigger, err = runtime.ParseTrigger(*trigger); err != nil {
		fmt.Fprintf(stderr, "appcounter: -trigger: %v\n", err)
		return nil, &cli.UsageError{Err: err}
	}
	if f.sample < 0 {
		fmt.Fprintln(stderr, "appcounter: -sample: at least 0")
		return nil, &cli.UsageError{Err: errors.New("-sample below 0")}
	}
	return f, nil
}

// run is the program: see the package comment. It returns when the query
// has finished by itself (availableNow, once) or ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	f, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}

	checkpoint := f.checkpoint
	if checkpoint == "" {
		dir, err := os.MkdirTemp("", "appcounter-checkpoint-")
		if err != nil {
			return fmt.Errorf("a temporary checkpoint: %w", err)
		}
		defer os.RemoveAll(dir)
		checkpoint = dir
	}

	var brokers []string
	for _, b := range strings.Split(f.brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			brokers = append(brokers, b)
		}
	}
	if len(brokers) == 0 {
		brokers = kafka.Brokers()
	}
	sample := f.sample
	if len(brokers) == 0 {
		opts := []kafka.EmbeddedOption{kafka.ListenAddr(f.listen)}
		if f.checkpoint != "" {
			opts = append(opts, kafka.FakeOptions(kfake.DataDir(filepath.Join(checkpoint, "embedded-kafka"))))
		}
		cluster, err := kafka.Embedded(ctx, opts...)
		if err != nil {
			return err
		}
		defer cluster.Close()
		brokers = cluster.Brokers()
		fmt.Fprintf(stderr, "appcounter: in-process Kafka cluster at %s\n", strings.Join(brokers, ","))
	} else if !f.sampleSet {
		sample = 0
	}
	conn := kafka.Connection{Brokers: brokers}

	if err := ensureTopics(ctx, conn, f.topics); err != nil {
		return err
	}
	if sample > 0 {
		from, to, err := produceSample(ctx, conn, f.topics.input, sample)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "appcounter: produced sample messages %d to %d to %s\n", from+1, to, f.topics.input)
	}
	return count(ctx, conn, f.topics, checkpoint, f.trigger, stdout)
}

// count runs the query until it finishes by itself or ctx is done,
// printing each batch's output to stdout once Kafka has acknowledged it.
func count(ctx context.Context, conn kafka.Connection, t topics, checkpoint string, trigger runtime.Trigger, stdout io.Writer) error {
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{t.input}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	sink := kafka.Sink[App](kafka.SinkOptions[App]{Connection: conn, Topic: t.output, WriterID: "appcounter",
		Key: func(a *App) []byte { return []byte(a.Key) }})
	defer sink.Close()
	deadLetters := kafka.DeadLetterTopic(t.deadLetters, kafka.DeadLetterOptions{Connection: conn,
		Originals: []*kafka.TopicSource{src}, WriterID: "appcounter"})
	defer deadLetters.Close()

	report := &report{w: stdout, output: t.output, deadLetters: t.deadLetters}
	apps := counterStream(kafka.From(src, parseRequest), &counter{})
	q, err := typed.WriteTo(apps, typed.Sink[App](&printedSink{TopicSink: sink, report: report})).Start(ctx,
		runtime.Checkpoint(checkpoint), runtime.WithTrigger(trigger),
		runtime.DeadLetters(&printedDeadLetters{DeadLetterWriter: deadLetters, report: report}))
	if err != nil {
		return err
	}
	err = q.AwaitTermination()
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil // stopped on purpose, between batches
	}
	if err != nil {
		return err
	}
	return report.summary()
}
