package kafka_test

import (
	"fmt"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/typed"
)

// TestRetriableBrokerErrors has the broker answer the first listings of
// offsets and the first fetches with errors a moving leader gives: the
// source lists and fetches again and reads every record once.
func TestRetriableBrokerErrors(t *testing.T) {
	cluster, err := kafka.Embedded(testContext(t), kafka.NumBrokers(2))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	createTopic(t, kadm.NewClient(client), "flaky", 2)
	produce(t, conn, rateRecords("flaky", 0, 0, 20)...)
	produce(t, conn, rateRecords("flaky", 1, 100, 20)...)

	fake := kafka.FakeCluster(cluster)
	var fetchFaults, listFaults atomic.Int32
	fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if fetchFaults.Add(1) > 3 {
			return nil, nil, false
		}
		fake.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		resp := req.ResponseKind().(*kmsg.FetchResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewFetchResponseTopic()
			rt.Topic, rt.TopicID = t.Topic, t.TopicID
			for _, p := range t.Partitions {
				rp := kmsg.NewFetchResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	fake.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if listFaults.Add(1) > 2 {
			return nil, nil, false
		}
		fake.KeepControl()
		req := kreq.(*kmsg.ListOffsetsRequest)
		resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
		for _, t := range req.Topics {
			rt := kmsg.NewListOffsetsResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewListOffsetsResponseTopicPartition()
				rp.Partition = p.Partition
				rp.ErrorCode = kerr.LeaderNotAvailable.Code
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"flaky"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 15})
	defer src.Close()
	sink := typed.NewMemorySink[fixtures.RateRow]()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), newCheckpoint())
	if fetchFaults.Load() <= 3 || listFaults.Load() <= 2 {
		t.Fatalf("the faults were not all injected: %d fetches, %d listings", fetchFaults.Load(), listFaults.Load())
	}
	want := slices.Concat(span(0, 19), span(100, 119))
	if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}
