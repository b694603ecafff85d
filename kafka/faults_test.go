package kafka_test

import (
	"fmt"
	"maps"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
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
		return fetchAnswer(kreq.(*kmsg.FetchRequest), func(rp *kmsg.FetchResponseTopicPartition) {
			rp.ErrorCode = kerr.NotLeaderForPartition.Code
		}), nil, true
	})
	fake.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		if listFaults.Add(1) > 2 {
			return nil, nil, false
		}
		fake.KeepControl()
		return listError(kreq.(*kmsg.ListOffsetsRequest), kerr.LeaderNotAvailable), nil, true
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

// TestLeaderBehindItsPredecessor has the broker answer a few fetches as
// a leader elected a moment ago does: no records, and a high watermark
// and last stable offset below those its predecessor gave, with its
// listing of the end answering OFFSET_NOT_AVAILABLE until it has caught
// up (KIP-207). That is not data loss: the source fetches again and
// reads every record once.
func TestLeaderBehindItsPredecessor(t *testing.T) {
	fake, conn, adm := newFakeCluster(t)
	createTopic(t, adm, "moving", 1)
	produce(t, conn, rateRecords("moving", 0, 0, 20)...)

	const behind = 6 // the new leader's high watermark
	var fetchFaults, listFaults atomic.Int32
	fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 || len(req.Topics[0].Partitions) == 0 || req.Topics[0].Partitions[0].FetchOffset < behind || fetchFaults.Load() >= 3 {
			return nil, nil, false
		}
		fetchFaults.Add(1)
		listFaults.Store(0) // the listing is behind as long as the fetches
		return behindFetch(req, behind), nil, true
	})
	fake.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if fetchFaults.Load() == 0 || listFaults.Add(1) > 2 {
			return nil, nil, false
		}
		return listError(kreq.(*kmsg.ListOffsetsRequest), kerr.OffsetNotAvailable), nil, true
	})

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"moving"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 15})
	defer src.Close()
	sink := typed.NewMemorySink[fixtures.RateRow]()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), newCheckpoint())
	if fetchFaults.Load() < 3 {
		t.Fatalf("the faults were not all injected: %d fetches", fetchFaults.Load())
	}
	if got, want := values(sink.Rows()), span(0, 19); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// behindFetch answers a fetch as a leader whose offsets end at end does,
// with no records.
func behindFetch(req *kmsg.FetchRequest, end int64) *kmsg.FetchResponse {
	return fetchAnswer(req, func(rp *kmsg.FetchResponseTopicPartition) {
		rp.HighWatermark, rp.LastStableOffset = end, end
	})
}

// fetchAnswer answers a fetch with no records, each partition's answer
// set by set.
func fetchAnswer(req *kmsg.FetchRequest, set func(*kmsg.FetchResponseTopicPartition)) *kmsg.FetchResponse {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic, rt.TopicID = t.Topic, t.TopicID
		for _, p := range t.Partitions {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = p.Partition
			set(&rp)
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// listError answers a listing with err for every partition (a leader
// not caught up with its predecessor answers OFFSET_NOT_AVAILABLE:
// KIP-207).
func listError(req *kmsg.ListOffsetsRequest, err *kerr.Error) *kmsg.ListOffsetsResponse {
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewListOffsetsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewListOffsetsResponseTopicPartition()
			rp.Partition = p.Partition
			rp.ErrorCode = err.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}

// TestLeaderBehindTheNextBatch: a source learns where a partition ends
// from a fetch from where its next batch starts; a leader elected a
// moment ago answers with a last stable offset below that. The source
// lists the partition's end rather than take that one (which Next would
// judge data loss), and the listing, asked again while the leader
// answers OFFSET_NOT_AVAILABLE, says there is nothing new.
func TestLeaderBehindTheNextBatch(t *testing.T) {
	fake, conn, adm := newFakeCluster(t)
	createTopic(t, adm, "planned", 1)
	produce(t, conn, rateRecords("planned", 0, 0, 20)...)
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"planned"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	ctx := testContext(t)
	upTo, err := src.Available(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, err := src.Next(ctx, nil, upTo, runtime.Limited)
	if err != nil {
		t.Fatal(err)
	}

	var fetchFaults, listFaults atomic.Int32
	fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		fetchFaults.Add(1)
		return behindFetch(kreq.(*kmsg.FetchRequest), 6), nil, true
	})
	fake.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		if listFaults.Add(1) > 2 {
			return nil, nil, false
		}
		return listError(kreq.(*kmsg.ListOffsetsRequest), kerr.OffsetNotAvailable), nil, true
	})
	if upTo, err = src.Available(ctx); err != nil {
		t.Fatal(err)
	}
	next, err := src.Next(ctx, first, upTo, runtime.Limited)
	if err != nil {
		t.Fatalf("the batch after the leader moved: %v", err)
	}
	if fetchFaults.Load() == 0 || listFaults.Load() <= 2 {
		t.Fatalf("the faults were not all injected: %d fetches, %d listings", fetchFaults.Load(), listFaults.Load())
	}
	if string(next) != string(first) {
		t.Fatalf("the batch after the leader moved ends at %s, want %s: nothing new", next, first)
	}
}

// TestLeaderlessAtStartKeepsStartingOffsets: a new query starting at the
// latest offsets lists a partition without a leader (an election under
// way) when it plans its first batch. That partition starts at its latest
// offset too, as Spark resolves the starting offsets of every partition:
// the next batch reads the records produced since, not those from before
// the query started (left out of the first batch, the partition was taken
// later for one new to the query, and read from its beginning).
func TestLeaderlessAtStartKeepsStartingOffsets(t *testing.T) {
	fake, conn, adm := newFakeCluster(t)
	createTopic(t, adm, "rl", 2)
	produce(t, conn, rateRecords("rl", 0, 0, 5)...)
	produce(t, conn, rateRecords("rl", 1, 100, 5)...)
	cl, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	mreq := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr("rl")
	mreq.Topics = append(mreq.Topics, rt)
	real, err := mreq.RequestWith(testContext(t), cl)
	if err != nil {
		t.Fatal(err)
	}
	// While electing, the metadata of topic rl says partition 1 has no
	// leader.
	var electing atomic.Bool
	electing.Store(true)
	fake.ControlKey(int16(kmsg.Metadata), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kr.(*kmsg.MetadataRequest)
		if !electing.Load() || len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != "rl" {
			return nil, nil, false
		}
		resp := *real
		resp.Version = req.Version
		resp.Topics = []kmsg.MetadataResponseTopic{real.Topics[0]}
		resp.Topics[0].Partitions = slices.Clone(real.Topics[0].Partitions)
		for i := range resp.Topics[0].Partitions {
			if resp.Topics[0].Partitions[i].Partition == 1 {
				resp.Topics[0].Partitions[i].Leader = -1
			}
		}
		return &resp, nil, true
	})
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"rl"}}) // Latest
	defer src.Close()
	ctx := testContext(t)
	upTo, err := src.Available(ctx)
	if err != nil {
		t.Fatal(err)
	}
	electing.Store(false) // elected
	first, err := src.Next(ctx, nil, upTo, runtime.Limited)
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	if err := src.Read(ctx, nil, first, func(runtime.Record) error { read++; return nil }); err != nil {
		t.Fatal(err)
	}
	if read != 0 {
		t.Fatalf("the first batch of a query starting at the latest offsets read %d records (ends %s)", read, first)
	}
	produce(t, conn, rateRecords("rl", 0, 5, 1)...)
	produce(t, conn, rateRecords("rl", 1, 105, 1)...)
	got := map[string]int{}
	stepSource(t, src, first, func(r runtime.Record) error { got[r.Partition]++; return nil })
	if !maps.Equal(got, map[string]int{"rl/0": 1, "rl/1": 1}) {
		t.Errorf("after a record more in each partition, the query started at the latest offsets (first batch ending %s) read %v, want one of each", first, got)
	}
}
