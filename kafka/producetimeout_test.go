package kafka_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestExactlyOnceWriteOutlivesProduceTimeout: ProduceTimeout bounds how
// long a write into the transaction may go without an acknowledgement,
// not how long it may take. A sink's write of a batch that takes well
// over ProduceTimeout, its records acknowledged one by one, commits; one
// whose acknowledgement stalls past ProduceTimeout fails the batch, and
// nothing of it is committed.
func TestExactlyOnceWriteOutlivesProduceTimeout(t *testing.T) {
	const (
		timeout = time.Second
		steady  = 100 * time.Millisecond // each produce request's delay in the steady case
	)
	for _, tc := range []struct {
		name  string
		delay func(n int64) time.Duration // of the topic's nth produce request
		fails bool
	}{
		{"steady", func(int64) time.Duration { return steady }, false},
		{"stalled", func(n int64) time.Duration {
			if n == 3 {
				return 3 * timeout
			}
			return 0
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake, conn, adm := newFakeCluster(t)
			// Batches of at most 64 KiB: a record of 40 KB each.
			maxBytes := "65536"
			created, err := adm.CreateTopic(testContext(t), 1, 1, map[string]*string{"max.message.bytes": &maxBytes}, "big")
			if err == nil {
				err = created.Err
			}
			if err != nil {
				t.Fatal(err)
			}
			var in []fixtures.Click
			for i := range 20 {
				in = append(in, fixtures.Click{User: fmt.Sprint("u", i), Page: strings.Repeat(fmt.Sprint(i%10), 40_000)})
			}
			var requests atomic.Int64
			fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				for _, rt := range kreq.(*kmsg.ProduceRequest).Topics {
					if rt.Topic == "big" || rt.TopicID == created.ID {
						time.Sleep(tc.delay(requests.Add(1)))
					}
				}
				return nil, nil, false
			})
			eos := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: conn, Topic: "big-changelog", ProduceTimeout: timeout})
			defer eos.Close()
			sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "big", Transactions: eos,
				Key: func(c *fixtures.Click) []byte { return []byte(c.User) }})
			defer sink.Close()
			stream := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
			stream.Add(in...)
			q, err := typed.WriteTo(typed.FromMemory(stream), sink).Start(testContext(t), newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()), eos.Option())...)
			if err != nil {
				t.Fatal(err)
			}
			err = q.AwaitTermination()
			got := consumeWith(t, conn, adm, "big", kgo.ReadCommitted())
			if tc.fails {
				if err == nil {
					t.Fatal("a write stalled past ProduceTimeout committed")
				}
				if len(got) != 0 {
					t.Fatalf("the failed batch left %d records committed", len(got))
				}
				return
			}
			if err != nil {
				t.Fatalf("a write acknowledged all along, for %d requests %v apart: %v", requests.Load(), steady, err)
			}
			if n := requests.Load(); time.Duration(n)*steady <= timeout {
				t.Fatalf("%d produce requests of %v: the write did not outlive ProduceTimeout (%v); the test does not exercise it", n, steady, timeout)
			}
			if len(got) != len(in) {
				t.Fatalf("%d records committed, want %d", len(got), len(in))
			}
		})
	}
}

// TestSinkFailsPastProduceTimeout: a sink without transactions whose
// topic keeps refusing its records with a retriable error (too few
// in-sync replicas) fails the batch once ProduceTimeout passes without an
// acknowledgement, and the query stops with the error, uncommitted, as a
// Spark Kafka sink fails its task past the producer's
// delivery.timeout.ms; so does a dead-letter topic. (The producer alone
// retries for ever: the query ran on, "processing", with no error.)
func TestSinkFailsPastProduceTimeout(t *testing.T) {
	// Refused before the leader wrote the records, and after: the
	// client cannot tell whether those are written, and would retry
	// them for ever.
	t.Run("before-append", func(t *testing.T) { sinkFailsPastProduceTimeout(t, kerr.NotEnoughReplicas.Code) })
	t.Run("after-append", func(t *testing.T) { sinkFailsPastProduceTimeout(t, kerr.NotEnoughReplicasAfterAppend.Code) })
}

func sinkFailsPastProduceTimeout(t *testing.T, code int16) {
	const timeout = 500 * time.Millisecond
	fake, conn, adm := newFakeCluster(t)
	// The client retries a refused request once it has read the topic's
	// metadata again, which it does at most every MetadataMinAge (5 s by
	// default): the write would end at that, not at the timeout.
	conn.ClientOptions = []kgo.Opt{quickMetadata}
	createTopic(t, adm, "out", 1)
	var refused atomic.Int64
	fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		refused.Add(1)
		return refusedProduce(kreq.(*kmsg.ProduceRequest), code), nil, true
	})
	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "out", ProduceTimeout: timeout})
	defer sink.Close()
	stream := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	stream.Add(clicks(3, 1)...)
	ck := newCheckpoint()
	q, err := typed.WriteTo(typed.FromMemory(stream), sink).Start(testContext(t), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	err = q.AwaitTermination()
	t.Logf("ended after %v, %d requests refused", time.Since(began), refused.Load())
	if err == nil || !strings.Contains(err.Error(), "no acknowledgement from Kafka for ProduceTimeout (500ms)") || !strings.Contains(err.Error(), `kafka sink "kafka:out"`) {
		t.Fatalf("the query ended with %v, want the sink's write failed past ProduceTimeout", err)
	}
	if refused.Load() == 0 {
		t.Fatal("no produce request was refused: the test does not exercise the timeout")
	}
	if p, ok := q.LastProgress(); ok {
		t.Fatalf("batch %d committed", p.BatchID)
	}

	dead := kafka.DeadLetterTopic("out", kafka.DeadLetterOptions{Connection: conn, ProduceTimeout: timeout})
	defer dead.Close()
	err = dead.WriteDeadLetters(testContext(t), 0, []runtime.DeadLetter{{Source: "clicks", Position: "1", Error: "bad", Raw: "x"}})
	if err == nil || !strings.Contains(err.Error(), "ProduceTimeout (500ms)") {
		t.Fatalf("the dead letters' write ended with %v, want it failed past ProduceTimeout", err)
	}

	bad := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "out", ProduceTimeout: -time.Second})
	defer bad.Close()
	if err := bad.Write(testContext(t), 0, clicks(1, 1)); err == nil || !strings.Contains(err.Error(), "ProduceTimeout -1s is negative") {
		t.Fatalf("a negative ProduceTimeout: %v", err)
	}
}
