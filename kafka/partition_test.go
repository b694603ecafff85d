package kafka_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestSinkPartition checks that SinkOptions.Partition puts each row on
// the partition it gives, as Spark's partition column does, with and
// without transactions, and that a row it gives no partition (a negative
// one) goes where its key hashes, as the Java client would put it.
func TestSinkPartition(t *testing.T) {
	for _, eos := range []bool{false, true} {
		t.Run("exactlyOnce="+strconv.FormatBool(eos), func(t *testing.T) {
			conn, adm := newCluster(t)
			createTopic(t, adm, "clicks", 2)
			createTopic(t, adm, "out", 4)
			in := clicks(300, 17)
			produce(t, conn, clickRecords(t, "clicks", 2, in)...)
			src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 70})
			defer src.Close()
			// Pages p0 to p3 choose their partition, but ann's clicks.
			chosen := func(c *fixtures.Click) int32 {
				if c.User == "ann" {
					return -1
				}
				p, _ := strconv.Atoi(strings.TrimPrefix(c.Page, "p"))
				return int32(p)
			}
			opts := kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "out", Partition: chosen,
				Key: func(c *fixtures.Click) []byte { return []byte(c.User) }}
			var more []runtime.Option
			if eos {
				txn := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: conn, Topic: "out-changelog"})
				defer txn.Close()
				opts.Transactions = txn
				more = append(more, txn.Option())
			}
			sink := kafka.Sink[fixtures.Click](opts)
			defer sink.Close()
			runAvailableNow(t, typed.WriteTo(typed.From[fixtures.Click](src), sink), newCheckpoint(), more...)

			got := consume(t, conn, adm, "out")
			if len(got) != len(in) {
				t.Fatalf("%d records, want %d", len(got), len(in))
			}
			hash := kgo.StickyKeyPartitioner(nil).ForTopic("out")
			var byKey int
			for _, r := range got {
				var c fixtures.Click
				if err := c.UnmarshalJSON(r.Value); err != nil {
					t.Fatal(err)
				}
				want := chosen(&c)
				if want < 0 {
					want = int32(hash.Partition(&kgo.Record{Key: []byte(c.User)}, 4))
					byKey++
				}
				if r.Partition != want {
					t.Fatalf("%+v on partition %d, want %d", c, r.Partition, want)
				}
			}
			if byKey == 0 || byKey == len(got) {
				t.Fatalf("%d of %d rows placed by key", byKey, len(got))
			}
		})
	}
}

// TestSinkPartitionNotThere checks that a partition the topic does not
// have fails the write, saying so.
func TestSinkPartitionNotThere(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "out", 2)
	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "out",
		Partition: func(c *fixtures.Click) int32 { return int32(len(c.Page)) }})
	defer sink.Close()
	err := sink.Write(testContext(t), 0, []fixtures.Click{{User: "a", Page: "p"}, {User: "b", Page: "long"}})
	if err == nil || !strings.Contains(err.Error(), "partition 4 of topic out, which has 2") {
		t.Fatalf("got %v", err)
	}
}
