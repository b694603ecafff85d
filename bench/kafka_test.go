package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/lovoo/goka"
	gokacodec "github.com/lovoo/goka/codec"
	"github.com/lovoo/goka/storage"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Kafka in → count per key → Kafka out, on the in-process cluster
// (kfake), three ways over the same input topic:
//
//   - streamgen: kafka.Source → MapGroupsWithState (state in Pebble, in a
//     fresh checkpoint) → kafka.Sink, an AvailableNow query; at-least-once
//     (streamgen-changelog adds a changelog topic, streamgen-exactly-once
//     commits through kafka.ExactlyOnce). Without MaxOffsetsPerTrigger,
//     one batch takes all the input there is and writes one row per key:
//     its count.
//   - floor: a hand-written franz-go loop, poll → Go map → produce, with
//     no state store and no offsets kept anywhere: what Kafka and the
//     client cost by themselves. Each poll (all the client has buffered)
//     writes one record per key it saw, as a batch does.
//   - goka: github.com/lovoo/goka v1.1.14, a processor whose group table
//     (Persist) keeps the count per key, in its default LevelDB storage in
//     a fresh directory, with a new consumer group each time. The group
//     table's topic is its output: goka writes every update to it, one
//     record per event, and it is what goka's views and other processors
//     read. Its sarama client runs at goka's default, V2_0_0_0.
//
// The input topic's records are keyed by the counted key; their values
// (the event as JSON) are not read: all three count r.Key.

const (
	kafkaBenchKeys       = 10_000
	kafkaBenchHits       = 50 // events per key: 500k events
	kafkaBenchPartitions = 3
	kafkaBenchInput      = "events"
)

// kafkaBench is an embedded cluster holding the input topic.
type kafkaBench struct {
	cluster *kafka.EmbeddedCluster
	conn    kafka.Connection
	admin   *kadm.Client
	client  *kgo.Client
	events  int
	// topics numbers the output topics (and goka's groups), one per run.
	topics int
}

// newKafkaBench starts a cluster and produces in to its input topic, the
// key of each record being the event's key.
func newKafkaBench(tb testing.TB, in []countrec.Event) *kafkaBench {
	tb.Helper()
	cluster, err := kafka.Embedded(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(cluster.Close)
	k := &kafkaBench{cluster: cluster, conn: cluster.Connection(), events: len(in)}
	if k.client, err = kgo.NewClient(kgo.SeedBrokers(k.conn.Brokers...), kgo.ProducerLinger(5*time.Millisecond)); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(k.client.Close)
	k.admin = kadm.NewClient(k.client)
	k.createTopic(tb, kafkaBenchInput)
	var (
		mu       sync.Mutex
		firstErr error
	)
	for i := range in {
		value, _ := in[i].MarshalJSON()
		k.client.Produce(context.Background(), &kgo.Record{Topic: kafkaBenchInput, Key: []byte(in[i].Key), Value: value},
			func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = orErr(firstErr, err)
					mu.Unlock()
				}
			})
	}
	if err := k.client.Flush(context.Background()); err != nil {
		tb.Fatal(err)
	}
	if firstErr != nil {
		tb.Fatal(firstErr)
	}
	return k
}

// orErr returns a when it is set, else b.
func orErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (k *kafkaBench) createTopic(tb testing.TB, topic string) {
	tb.Helper()
	if _, err := k.admin.CreateTopic(context.Background(), kafkaBenchPartitions, 1, nil, topic); err != nil {
		tb.Fatalf("create topic %s: %v", topic, err)
	}
}

// outputRecords returns the number of records in topic.
func (k *kafkaBench) outputRecords(ctx context.Context, topic string) (int64, error) {
	ends, err := k.admin.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, err
}

// delivery is how the streamgen side commits.
type delivery int

const (
	atLeastOnce      delivery = iota // the checkpoint only
	withChangelog                    // and a changelog topic, at-least-once
	exactlyOnce                      // the changelog, sink and offsets in one transaction per batch
	exactlyOnceAsync                 // the same, a transaction per second (AsyncProgress)
)

// runStreamgenKafka counts with a streamgen query from the input topic to
// out, with its checkpoint in dir (and, with a changelog, the topic out
// and "-changelog"); it returns once every output record is acknowledged
// and the last batch committed.
func runStreamgenKafka(ctx context.Context, conn kafka.Connection, dir, out string, d delivery) error {
	return runStreamgenKafkaBatches(ctx, conn, dir, out, d, 0)
}

// runStreamgenKafkaBatches is runStreamgenKafka with batches of at most
// perBatch events (0: no cap).
func runStreamgenKafkaBatches(ctx context.Context, conn kafka.Connection, dir, out string, d delivery, perBatch int64) error {
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{kafkaBenchInput},
		StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: perBatch})
	defer src.Close()
	opts := []runtime.Option{runtime.Checkpoint(dir), sameBatches}
	changelog := kafka.ChangelogOptions{Connection: conn, Topic: out + "-changelog"}
	var eos *kafka.Transactions
	switch d {
	case withChangelog:
		opts = append(opts, kafka.Changelog(changelog))
	case exactlyOnce, exactlyOnceAsync:
		changelog.AsyncProgress = d == exactlyOnceAsync
		eos = kafka.ExactlyOnce(changelog)
		defer eos.Close()
		opts = append(opts, eos.Option())
	}
	if d == exactlyOnceAsync {
		// AsyncProgress refuses AvailableNow: the query runs until it
		// has read every event, and commits as it stops.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		opts = append(opts, runtime.Listener(&cancelAtRows{rows: kafkaBenchKeys * kafkaBenchHits, cancel: cancel}))
	} else {
		opts = append(opts, runtime.WithTrigger(runtime.AvailableNow()))
	}
	sink := kafka.Sink[countrec.KeyCount](kafka.SinkOptions[countrec.KeyCount]{Connection: conn, Topic: out,
		Key: func(c *countrec.KeyCount) []byte { return []byte(c.Key) }, Transactions: eos})
	defer sink.Close()
	events := kafka.From(src, func(m *kafka.Message) (countrec.Event, error) {
		return countrec.Event{Key: string(m.Key)}, nil
	})
	byKey := typed.GroupByKey(events, func(e *countrec.Event) string { return e.Key })
	q, err := typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, countFn), sink).Start(ctx, opts...)
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// runFloorKafka counts with a hand-written franz-go loop: poll the input
// topic from its start (what the client has buffered, per poll), add each record to a Go map, and produce the
// count of every key the poll touched to out, until events records are
// read; it returns once every output record is acknowledged.
func runFloorKafka(ctx context.Context, conn kafka.Connection, events int, out string) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...),
		kgo.ConsumeTopics(kafkaBenchInput), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DefaultProduceTopic(out), kgo.ProducerLinger(0))
	if err != nil {
		return err
	}
	defer client.Close()
	counts := make(map[string]int64)
	touched := make(map[string]struct{})
	var (
		mu       sync.Mutex
		produced error
	)
	done := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			produced = orErr(produced, err)
			mu.Unlock()
		}
	}
	var value []byte
	for read := 0; read < events; {
		fetches := client.PollFetches(ctx)
		if err := fetches.Err0(); err != nil {
			return err
		}
		clear(touched)
		fetches.EachRecord(func(r *kgo.Record) {
			counts[string(r.Key)]++
			touched[string(r.Key)] = struct{}{}
			read++
		})
		for key := range touched {
			c := countrec.KeyCount{Key: key, Count: counts[key]}
			value, _ = c.AppendJSON(value[:0])
			client.Produce(ctx, &kgo.Record{Key: []byte(key), Value: append([]byte(nil), value...)}, done)
		}
	}
	if err := client.Flush(ctx); err != nil {
		return err
	}
	return produced
}

// gokaGroup defines goka's counting processor for group: the input
// topic's records, by key, counted in the group table.
func gokaGroup(group string) *goka.GroupGraph {
	return goka.DefineGroup(goka.Group(group),
		goka.Input(kafkaBenchInput, new(gokacodec.Bytes), func(ctx goka.Context, _ any) {
			var n int64
			if v := ctx.Value(); v != nil {
				n = v.(int64)
			}
			ctx.SetValue(n + 1)
		}),
		goka.Persist(new(gokacodec.Int64)),
	)
}

// runGoka counts with a goka processor of a new group, its storage in
// dir, until its group table's topic holds one update per event; then it
// calls counted and stops the processor.
func runGoka(ctx context.Context, k *kafkaBench, dir, group string, counted func()) error {
	config := goka.DefaultConfig() // sarama's protocol version V2_0_0_0
	config.Consumer.Offsets.Initial = sarama.OffsetOldest
	topics := goka.NewTopicManagerConfig()
	topics.Table.Replication, topics.Stream.Replication = 1, 1
	p, err := goka.NewProcessor(k.conn.Brokers, gokaGroup(group),
		goka.WithConsumerGroupBuilder(goka.ConsumerGroupBuilderWithConfig(config)),
		goka.WithConsumerSaramaBuilder(goka.SaramaConsumerBuilderWithConfig(config)),
		goka.WithProducerBuilder(goka.ProducerBuilderWithConfig(config)),
		goka.WithTopicManagerBuilder(goka.TopicManagerBuilderWithConfig(config, topics)),
		goka.WithStorageBuilder(storage.DefaultBuilder(dir)),
		goka.WithLogger(log.New(io.Discard, "", 0)))
	if err != nil {
		return err
	}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- p.Run(runCtx) }()
	table := string(goka.GroupTable(goka.Group(group)))
	for {
		n, err := k.outputRecords(ctx, table)
		if err != nil && !errors.Is(err, kerr.UnknownTopicOrPartition) { // the table topic not made yet
			stop()
			<-ran
			return err
		}
		if n >= int64(k.events) {
			break
		}
		select {
		case err := <-ran:
			return fmt.Errorf("goka processor stopped with %d of %d updates written: %v", n, k.events, err)
		case <-ctx.Done():
			stop()
			<-ran
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	counted()
	stop()
	if err := <-ran; err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// kafkaImpls are the three sides, each run on a fresh output topic and a
// fresh directory (checkpoint, goka's storage), calling counted once all
// its output is in Kafka.
var kafkaImpls = []struct {
	name string
	run  func(ctx context.Context, k *kafkaBench, dir, out string, counted func()) error
}{
	{"streamgen", func(ctx context.Context, k *kafkaBench, dir, out string, counted func()) error {
		err := runStreamgenKafka(ctx, k.conn, dir, out, atLeastOnce)
		counted()
		return err
	}},
	{"streamgen-changelog", func(ctx context.Context, k *kafkaBench, dir, out string, counted func()) error {
		err := runStreamgenKafka(ctx, k.conn, dir, out, withChangelog)
		counted()
		return err
	}},
	{"streamgen-exactly-once", func(ctx context.Context, k *kafkaBench, dir, out string, counted func()) error {
		err := runStreamgenKafka(ctx, k.conn, dir, out, exactlyOnce)
		counted()
		return err
	}},
	{"floor", func(ctx context.Context, k *kafkaBench, _, out string, counted func()) error {
		err := runFloorKafka(ctx, k.conn, k.events, out)
		counted()
		return err
	}},
	{"goka", func(ctx context.Context, k *kafkaBench, dir, out string, counted func()) error {
		return runGoka(ctx, k, dir, out, counted)
	}},
}

// BenchmarkKafkaCountPerKey counts the events of 10k keys (500k events,
// each key 50 times, shuffled, in a three-partition topic of the embedded
// cluster) from Kafka to Kafka with streamgen, the hand-written floor and
// goka (see above). The input is produced once, outside the timer; each
// of the b.N iterations reads all of it on a fresh checkpoint (a fresh
// group and storage, for goka) into a new output topic, timed from the
// start until every output record is acknowledged. Run it with
// -benchtime 1x and alternate the sides with repeated -count 1 runs (see
// README.md); goka's side logs the ratios against the runs before it in
// the same process.
func BenchmarkKafkaCountPerKey(b *testing.B) {
	k := newKafkaBench(b, uniformInput(kafkaBenchKeys, kafkaBenchHits, 1))
	rates := map[string]float64{}
	for _, impl := range kafkaImpls {
		b.Run("impl="+impl.name, func(b *testing.B) {
			parent := b.TempDir()
			var outRows int64
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				k.topics++
				out := fmt.Sprintf("out-%s-%d", impl.name, k.topics)
				if impl.name != "goka" { // goka makes its table topic itself
					k.createTopic(b, out)
				}
				dir, err := os.MkdirTemp(parent, "run")
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := impl.run(context.Background(), k, dir, out, b.StopTimer); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if impl.name == "goka" {
					out = string(goka.GroupTable(goka.Group(out)))
				}
				if outRows, err = k.outputRecords(context.Background(), out); err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(dir)
				if _, err := k.admin.DeleteTopics(context.Background(), out); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			rate := float64(k.events) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "events/s")
			b.ReportMetric(float64(outRows), "outrows/run")
			rates[impl.name] = rate
		})
	}
	if rates["streamgen"] > 0 && rates["streamgen-exactly-once"] > 0 {
		b.Logf("exactly-once: %.2fx the time of at-least-once (target: at most 1.5x); the changelog alone %.2fx",
			rates["streamgen"]/rates["streamgen-exactly-once"], rates["streamgen"]/max(rates["streamgen-changelog"], 1))
	}
	if rates["goka"] > 0 && rates["streamgen"] > 0 && rates["floor"] > 0 {
		b.Logf("streamgen: %.1fx goka's events/s (target: at least 15x), %.2fx the floor's (target: at least 0.6x)",
			rates["streamgen"]/rates["goka"], rates["streamgen"]/rates["floor"])
	}
}

// cancelAtRows cancels a query's context once its batches have read rows
// rows.
type cancelAtRows struct {
	rows, read int64
	cancel     context.CancelFunc
}

func (c *cancelAtRows) OnQueryProgress(p runtime.QueryProgress) {
	if c.read += p.NumInputRows; c.read >= c.rows {
		c.cancel()
	}
}

// BenchmarkKafkaDelivery is BenchmarkKafkaCountPerKey's streamgen side in
// batches of 10k events (50 batches, each its own commit and, exactly
// once, its own transaction), with the three ways to commit: the
// checkpoint alone (at-least-once), with a changelog (at-least-once), and
// exactly-once. Alternate the sides with repeated -count 1 runs.
func BenchmarkKafkaDelivery(b *testing.B) {
	k := newKafkaBench(b, uniformInput(kafkaBenchKeys, kafkaBenchHits, 1))
	rates := map[delivery]float64{}
	for _, d := range []struct {
		name string
		d    delivery
	}{{"at-least-once", atLeastOnce}, {"changelog", withChangelog}, {"exactly-once", exactlyOnce}, {"exactly-once-async", exactlyOnceAsync}} {
		b.Run("delivery="+d.name, func(b *testing.B) {
			parent := b.TempDir()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				k.topics++
				out := fmt.Sprintf("out-delivery-%d", k.topics)
				k.createTopic(b, out)
				dir, err := os.MkdirTemp(parent, "run")
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := runStreamgenKafkaBatches(context.Background(), k.conn, dir, out, d.d, 10_000); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				os.RemoveAll(dir)
				if _, err := k.admin.DeleteTopics(context.Background(), out, out+"-changelog"); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			rates[d.d] = float64(k.events) * float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rates[d.d], "events/s")
		})
	}
	if rates[exactlyOnce] > 0 && rates[atLeastOnce] > 0 {
		b.Logf("exactly-once: %.2fx the time of at-least-once (target: at most 1.5x); with AsyncProgress %.2fx; the changelog at-least-once %.2fx",
			rates[atLeastOnce]/rates[exactlyOnce], rates[atLeastOnce]/max(rates[exactlyOnceAsync], 1), rates[atLeastOnce]/max(rates[withChangelog], 1))
	}
}

// TestKafkaCountPerKeyMatchesMap runs the three sides once on a skewed
// input and checks that the last count of each key in each one's output
// topic, read back with a read_committed consumer, is a plain map's.
func TestKafkaCountPerKeyMatchesMap(t *testing.T) {
	in := skewedInput(30_000, 2_000, 5)
	want := map[string]int64{}
	for _, e := range in {
		want[e.Key]++
	}
	k := newKafkaBench(t, in)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a safety net
	defer cancel()
	for _, impl := range kafkaImpls {
		t.Run(impl.name, func(t *testing.T) {
			out := "out-" + impl.name
			if impl.name != "goka" {
				k.createTopic(t, out)
			}
			if err := impl.run(ctx, k, t.TempDir(), out, func() {}); err != nil {
				t.Fatal(err)
			}
			if impl.name == "goka" {
				out = string(goka.GroupTable(goka.Group(out)))
			}
			latest := map[string]int64{}
			for _, r := range readBack(t, ctx, k, out) {
				var n int64
				if impl.name == "goka" { // goka's Int64 codec: decimal text
					v, err := strconv.ParseInt(string(r.Value), 10, 64)
					if err != nil {
						t.Fatalf("%s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
					}
					n = v
				} else {
					var c countrec.KeyCount
					if err := c.UnmarshalJSON(r.Value); err != nil {
						t.Fatalf("%s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
					}
					if c.Key != string(r.Key) {
						t.Fatalf("%s/%d@%d: key %q, row %+v", r.Topic, r.Partition, r.Offset, r.Key, c)
					}
					n = c.Count
				}
				latest[string(r.Key)] = n // a key's updates are in one partition, in order
			}
			sameCounts(t, impl.name+" output", latest, want)
		})
	}
}

// readBack reads every record of topic up to its end offsets now, with a
// read_committed consumer, in offset order per partition.
func readBack(t *testing.T, ctx context.Context, k *kafkaBench, topic string) []*kgo.Record {
	t.Helper()
	ends, err := k.admin.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	client, err := kgo.NewClient(kgo.SeedBrokers(k.conn.Brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords()) // a transaction's marker may be a partition's last offset
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var out []*kgo.Record
	for len(remaining) > 0 {
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %v (still waiting for %v)", topic, err, remaining)
		}
		if err := fetches.Err0(); err != nil {
			t.Fatalf("read %s: %v", topic, err)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset+1 >= remaining[r.Partition] {
				delete(remaining, r.Partition)
			}
		})
	}
	return out
}
