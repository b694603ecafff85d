package kafka_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
)

// bigValue is record i's value: its number, padded to 1 KiB with letters
// that do not compress, so that a few thousand records take several fetch
// responses (1 MiB each).
func bigValue(i int) []byte {
	v := strconv.AppendInt(nil, int64(i), 10)
	r := rand.New(rand.NewPCG(uint64(i), 1))
	for len(v) < 1024 {
		v = append(v, byte('a'+r.IntN(26)))
	}
	return v
}

// readOffsets reads src's partition big/0 from offset from to its end,
// checking each record's value, and returns the offsets read.
func readOffsets(t *testing.T, src *kafka.TopicSource, from int64, fn func(offset int64) error) ([]int64, error) {
	t.Helper()
	ctx := testContext(t)
	end, err := src.Available(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start, _ := json.Marshal(map[string]map[string]int64{"big": {"0": from}})
	var offsets []int64
	err = src.Read(ctx, start, end, func(r runtime.Record) error {
		m := r.Meta.(*kafka.Message)
		if !bytes.Equal(r.Data, bigValue(int(m.Offset))) {
			t.Fatalf("offset %d: value %.20q, want record %d's", m.Offset, r.Data, m.Offset)
		}
		offsets = append(offsets, m.Offset)
		if fn != nil {
			return fn(m.Offset)
		}
		return nil
	})
	return offsets, err
}

// wantOffsets checks that got is from, from+1, ..., to-1.
func wantOffsets(t *testing.T, got []int64, from, to int64) {
	t.Helper()
	if int64(len(got)) != to-from {
		t.Fatalf("read %d records, want %d (offsets %d to %d)", len(got), to-from, from, to-1)
	}
	for i, o := range got {
		if o != from+int64(i) {
			t.Fatalf("record %d of the read is offset %d, want %d", i, o, from+int64(i))
		}
	}
}

// TestReadsAcrossFetches reads a partition that takes several fetch
// responses, which the source fetches one ahead of the records it hands
// on: every record once and in order; the same when a fetch made ahead
// fails (it is made again) and when the reader stops in the middle (the
// read returns the reader's error, and a read from there goes on).
func TestReadsAcrossFetches(t *testing.T) {
	cluster, err := kafka.Embedded(testContext(t))
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
	createTopic(t, kadm.NewClient(client), "big", 1)
	const n = 3000
	records := make([]*kgo.Record, n)
	for i := range records {
		records[i] = &kgo.Record{Topic: "big", Partition: 0, Value: bigValue(i)}
	}
	produce(t, conn, records...)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"big"}})
	defer src.Close()
	fake := kafka.FakeCluster(cluster)
	var fetches atomic.Int32
	fake.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		fetches.Add(1)
		fake.KeepControl()
		return nil, nil, false
	})
	got, err := readOffsets(t, src, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantOffsets(t, got, 0, n)
	if fetches.Load() < 3 {
		t.Fatalf("the read took %d fetches: want a partition that takes several", fetches.Load())
	}

	t.Run("a fetch ahead fails", func(t *testing.T) {
		// The second fetch of the read is the first one made ahead.
		var seen atomic.Int32
		fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			if seen.Add(1) != 2 {
				fake.KeepControl()
				return nil, nil, false
			}
			return fetchAnswer(kreq.(*kmsg.FetchRequest), func(rp *kmsg.FetchResponseTopicPartition) {
				rp.ErrorCode = kerr.NotLeaderForPartition.Code
			}), nil, true
		})
		got, err := readOffsets(t, src, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if seen.Load() < 3 {
			t.Fatalf("%d fetches: the fault was not injected", seen.Load())
		}
		wantOffsets(t, got, 0, n)
	})

	t.Run("the reader stops", func(t *testing.T) {
		errStop := errors.New("stop")
		got, err := readOffsets(t, src, 0, func(offset int64) error {
			if offset == n/2 {
				return fmt.Errorf("at %d: %w", offset, errStop)
			}
			return nil
		})
		if !errors.Is(err, errStop) {
			t.Fatalf("the read ended with %v, want the reader's error", err)
		}
		wantOffsets(t, got, 0, n/2+1)
		got, err = readOffsets(t, src, n/2+1, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantOffsets(t, got, n/2+1, n)
	})
}
