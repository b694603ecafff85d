package kafka_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

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
