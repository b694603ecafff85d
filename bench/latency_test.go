package bench

import (
	"context"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// BenchmarkEndToEndLatency measures how long an event takes from its
// producer to a read_committed consumer of the output, through an App of
// three instances in this process counting per key exactly once, on the
// embedded broker: a producer sends events at a steady rate (each stamped
// with its send time), the App counts them per key (10,000 keys, 8
// partitions) and writes each key's count with the send time of the
// latest event it counted, and a consumer reads the output as it is
// committed. It reports the 50th, 99th and 99.9th percentiles of the
// output records' delays (receive time less send time) after a warm-up
// second. Environment: STREAMGEN_LATENCY_RATE (events/s, default 20000),
// STREAMGEN_LATENCY_SECONDS (default 10), STREAMGEN_LATENCY_POLL_MS (the
// queries' poll interval, default 100 as the runtime's: an idle task's
// source waits for data with a fetch the broker answers when it arrives,
// so the interval bounds the wait, not the latency),
// STREAMGEN_LATENCY_ASYNC=1 for AsyncProgress, STREAMGEN_LATENCY_PHASES=1
// to print the percentiles of each batch phase and of the events' delays
// when processed. Run it with -benchtime 1x.
func BenchmarkEndToEndLatency(b *testing.B) {
	rate := envInt("STREAMGEN_LATENCY_RATE", 20000)
	seconds := envInt("STREAMGEN_LATENCY_SECONDS", 10)
	async := os.Getenv("STREAMGEN_LATENCY_ASYNC") == "1"
	poll := time.Duration(envInt("STREAMGEN_LATENCY_POLL_MS", 100)) * time.Millisecond
	for range b.N {
		phases := &phaseTimes{ms: map[string]int64{}}
		if os.Getenv("STREAMGEN_LATENCY_PHASES") == "1" {
			phases.all = map[string][]int64{}
		}
		delays := latencyRun(b, rate, time.Duration(seconds)*time.Second, poll, async, phases)
		if len(delays) == 0 {
			b.Fatal("no output was read")
		}
		slices.Sort(delays)
		pct := func(p float64) float64 {
			return float64(delays[min(len(delays)-1, int(p*float64(len(delays))))]) / float64(time.Millisecond)
		}
		b.ReportMetric(pct(0.5), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(pct(0.999), "p999-ms")
		b.ReportMetric(float64(len(delays)), "outputs")
		// Where a batch's time goes, on average over the tasks' batches.
		phases.mu.Lock()
		if os.Getenv("STREAMGEN_LATENCY_PHASES") == "1" {
			for name, all := range phases.all {
				slices.Sort(all)
				b.Logf("%s: p50 %d ms, p90 %d ms, p99 %d ms, max %d ms", name, all[len(all)/2], all[len(all)*9/10], all[len(all)*99/100], all[len(all)-1])
			}
		}
		for _, name := range []string{runtime.DurationTriggerExecution, runtime.DurationLatestOffset, runtime.DurationGetBatch, runtime.DurationSink, runtime.DurationWALCommit} {
			b.ReportMetric(float64(phases.ms[name])/float64(max(1, phases.batches)), name+"-ms/batch")
		}
		phases.mu.Unlock()
	}
}

// phaseTimes adds up the tasks' batch phases.
type phaseTimes struct {
	mu      sync.Mutex
	batches int64
	ms      map[string]int64
	all     map[string][]int64
}

// seen adds the delay of an event processed (from its send to the
// group function's call).
func (p *phaseTimes) seen(d time.Duration) {
	p.mu.Lock()
	p.all["processed"] = append(p.all["processed"], d.Milliseconds())
	p.mu.Unlock()
}

func (p *phaseTimes) OnQueryProgress(q runtime.QueryProgress) {
	if q.NumInputRows == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.batches++
	for name, ms := range q.DurationMs {
		p.ms[name] += ms
		if p.all != nil {
			p.all[name] = append(p.all[name], ms)
		}
	}
}

// latencyOptions are the tasks' query options: the poll interval, and,
// with STREAMGEN_LATENCY_SYNC_MS, a SyncInterval for the local
// checkpoint (the changelog in Kafka is the state's record; a checkpoint
// behind it is caught up at start).
func latencyOptions(poll time.Duration) []runtime.Option {
	opts := []runtime.Option{runtime.PollInterval(poll)}
	if ms := envInt("STREAMGEN_LATENCY_SYNC_MS", 0); ms > 0 {
		opts = append(opts, runtime.SyncInterval(time.Duration(ms)*time.Millisecond))
	}
	return opts
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// latencyRun runs the App for d at rate and returns the delays of the
// output records read after the first second.
func latencyRun(b *testing.B, rate int, d, poll time.Duration, async bool, phases *phaseTimes) []time.Duration {
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	cluster, err := kafka.Embedded(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.ProducerLinger(0))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	if _, err := adm.CreateTopic(ctx, 8, -1, nil, "latency-in"); err != nil {
		b.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 8, -1, nil, "latency-out"); err != nil {
		b.Fatal(err)
	}
	count := func(key string, rows iter.Seq[countrec.TimedEvent], st *typed.GroupState[countrec.Count]) (countrec.TimedCount, error) {
		c, _ := st.Get()
		var sent int64
		for r := range rows {
			c.N++
			sent = max(sent, r.Sent)
		}
		st.Update(c)
		if phases.all != nil {
			phases.seen(time.Since(time.Unix(0, sent)))
		}
		return countrec.TimedCount{Key: key, Count: c.N, Sent: sent}, nil
	}
	dir := b.TempDir()
	var apps sync.WaitGroup
	for i := range 3 {
		app := kafka.NewApp(kafka.AppOptions{
			Connection: conn, Group: "latency", Topics: []string{"latency-in"}, Dir: filepath.Join(dir, strconv.Itoa(i)),
			ExactlyOnce: true, ChangelogOptions: kafka.ChangelogOptions{AsyncProgress: async},
			Options: append(latencyOptions(poll), runtime.Listener(phases)),
		}, func(task *kafka.Task) (kafka.Starter, error) {
			src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
			sink := kafka.Sink(kafka.SinkOptions[countrec.TimedCount]{Connection: conn, Topic: "latency-out",
				Key: func(c *countrec.TimedCount) []byte { return []byte(c.Key) }, Transactions: task.Transactions()})
			task.OnClose(sink.Close)
			byKey := typed.GroupByKey(typed.From[countrec.TimedEvent](src), func(e *countrec.TimedEvent) string { return e.Key })
			return typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, count), sink).OutputMode(typed.Update), nil
		})
		apps.Go(func() {
			if err := app.Run(ctx); err != nil && ctx.Err() == nil {
				b.Error(err)
			}
		})
	}
	defer apps.Wait()
	defer cancel()

	// The consumer, from the start of the output, read_committed.
	var mu sync.Mutex
	var delays []time.Duration
	warm := time.Now().Add(2 * time.Second) // the group forms, the tasks start
	consumer, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.ConsumeTopics("latency-out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer consumer.Close()
	var readers sync.WaitGroup
	readers.Go(func() {
		for ctx.Err() == nil {
			fetches := consumer.PollFetches(ctx)
			now := time.Now()
			fetches.EachRecord(func(r *kgo.Record) {
				var c countrec.TimedCount
				if c.UnmarshalJSON(r.Value) != nil || now.Before(warm.Add(time.Second)) {
					return
				}
				mu.Lock()
				delays = append(delays, now.Sub(time.Unix(0, c.Sent)))
				mu.Unlock()
			})
		}
	})
	defer readers.Wait()

	// The producer: rate events a second, in a burst each millisecond.
	time.Sleep(time.Until(warm))
	r := rand.New(rand.NewPCG(1, 2))
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	end := time.Now().Add(d)
	sent := 0
	start := time.Now()
	for now := range tick.C {
		if now.After(end) {
			break
		}
		due := int(float64(rate) * now.Sub(start).Seconds())
		for ; sent < due; sent++ {
			e := countrec.TimedEvent{Key: fmt.Sprintf("key-%d", r.IntN(10_000)), Sent: time.Now().UnixNano()}
			v, _ := e.MarshalJSON()
			client.Produce(ctx, &kgo.Record{Topic: "latency-in", Key: []byte(e.Key), Value: v}, nil)
		}
	}
	client.Flush(ctx)
	time.Sleep(time.Second) // the last outputs
	cancel()
	readers.Wait()
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(delays)
}
