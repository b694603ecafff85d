package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/kafka"
)

// binaries are the broker and the example, built once for the
// benchmarks.
var binaries struct {
	once        sync.Once
	dir, sg, ac string
}

func buildOnce(b *testing.B) (sg, ac string) {
	binaries.once.Do(func() {
		dir, err := os.MkdirTemp("", "appcluster-bench-")
		if err != nil {
			b.Fatal(err)
		}
		binaries.dir = dir
		binaries.sg = build(b, dir, "streamgen", "../../cmd/streamgen")
		binaries.ac = build(b, dir, "appcluster", ".")
	})
	return binaries.sg, binaries.ac
}

// BenchmarkFailover measures how soon the partitions of an instance
// killed with SIGKILL give output again, with state of 1,000,000 keys
// over 8 partitions and two instances (processes, on a broker process),
// with and without a standby of each partition: from the kill to the
// first output, seen by a read_committed consumer, of a key produced to
// one of the killed instance's partitions after the kill. The group
// notices the death after the session timeout, 1 s here
// (AppOptions.SessionTimeout). It reports failover-ms and the changelog
// records the survivor's new tasks restored. Run it with -benchtime 1x.
func BenchmarkFailover(b *testing.B) {
	for _, standbys := range []int{0, 1} {
		b.Run(fmt.Sprintf("standbys=%d", standbys), func(b *testing.B) {
			for range b.N {
				took, restored := failoverRun(b, standbys)
				b.ReportMetric(float64(took)/float64(time.Millisecond), "failover-ms")
				b.ReportMetric(float64(restored), "restored-records")
			}
		})
	}
}

func failoverRun(b *testing.B, standbys int) (time.Duration, int64) {
	const keys = 1_000_000
	sg, ac := buildOnce(b)
	c := &cluster{t: b, bin: ac, dir: b.TempDir(), procs: map[int]*instance{}}
	broker := exec.Command(sg, "broker", "-listen", "127.0.0.1:0", "-min-session-timeout", "100ms", "-topic", "clicks:8", "-topic", "counts:4")
	line, brokerDone := startLine(b, broker, "brokers ")
	c.brokers = strings.Fields(line)[1]
	defer func() {
		for _, i := range c.running() {
			c.stop(i, syscall.SIGKILL)
		}
		broker.Process.Signal(syscall.SIGTERM)
		<-brokerDone
	}()
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.brokers), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	// The state: one click of each key.
	base := time.Now().UTC()
	for i := range keys {
		ck := Click{User: fmt.Sprintf("user-%d", i), Time: base, Page: "/"}
		v, _ := ck.MarshalJSON()
		client.Produce(ctx, &kgo.Record{Key: []byte(ck.User), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				b.Error(err)
			}
		})
	}
	if err := client.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	flags := []string{"-standbys", fmt.Sprint(standbys)}
	c.start(0, flags...)
	c.start(1, flags...)
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		b.Fatal(err)
	}
	status := func(i int) kafka.AppStatus {
		c.mu.Lock()
		addr := c.procs[i].addr
		c.mu.Unlock()
		var st kafka.AppStatus
		resp, err := http.Get("http://" + addr + "/app/state/")
		if err != nil {
			return st
		}
		defer resp.Body.Close()
		json.NewDecoder(resp.Body).Decode(&st)
		return st
	}
	// Every key counted, and the standbys caught up.
	for {
		offsets, err := adm.FetchOffsets(ctx, "appcluster")
		if err != nil {
			b.Fatal(err)
		}
		done := true
		ends.Each(func(o kadm.ListedOffset) {
			if at, _ := offsets.Lookup("clicks", o.Partition); at.At < o.Offset {
				done = false
			}
		})
		for i := range 2 {
			st := status(i)
			if len(st.Tasks) != 4 || len(st.Standbys) != 4*standbys {
				done = false
			}
			for _, s := range st.Standbys {
				done = done && s.Lag == 0
			}
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatal("the input was never read to its end")
		case <-time.After(200 * time.Millisecond):
		}
	}
	var victim []int32
	for _, t := range status(0).Tasks {
		victim = append(victim, t.Partition)
	}
	// A consumer of the output from its end, read_committed (it lists
	// the end offsets as it starts, before the kill).
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.brokers), kgo.ConsumeTopics("counts"), kgo.ConsumeResetOffset(kgo.NewOffset().AtEnd()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer consumer.Close()
	// Keys new to the input, in the killed instance's partitions.
	partitioner := kgo.StickyKeyPartitioner(nil).ForTopic("clicks")
	var fresh []string
	for i := 0; len(fresh) < 10_000; i++ {
		k := fmt.Sprintf("fresh-%d", i)
		if slices.Contains(victim, int32(partitioner.Partition(&kgo.Record{Key: []byte(k)}, 8))) {
			fresh = append(fresh, k)
		}
	}
	c.stop(0, syscall.SIGKILL)
	killed := time.Now()
	go func() {
		for _, k := range fresh {
			if ctx.Err() != nil {
				return
			}
			v, _ := (&Click{User: k, Time: time.Now().UTC(), Page: "/"}).MarshalJSON()
			client.Produce(ctx, &kgo.Record{Key: []byte(k), Value: v}, nil)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	var took time.Duration
	for took == 0 {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			b.Fatal("no output of the killed instance's partitions")
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if took == 0 && strings.HasPrefix(string(r.Key), "fresh-") {
				took = time.Since(killed)
			}
		})
	}
	var restored int64
	for _, t := range status(1).Tasks {
		if slices.Contains(victim, t.Partition) {
			restored += t.RestoredRecords
		}
	}
	return took, restored
}
