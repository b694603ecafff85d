package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/internal/testenv"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// rateRecords makes n records of RateRow JSON (value v for v in
// first..first+n-1) for one partition, stamped at base + v seconds.
func rateRecords(topic string, partition int32, first, n int) []*kgo.Record {
	base := time.Unix(1_700_000_000, 0).UTC()
	var out []*kgo.Record
	for v := first; v < first+n; v++ {
		at := base.Add(time.Duration(v) * time.Second)
		row := fixtures.RateRow{Timestamp: at, Value: int64(v)}
		value, _ := row.MarshalJSON()
		out = append(out, &kgo.Record{Topic: topic, Partition: partition, Value: value, Timestamp: at})
	}
	return out
}

// values returns the values of the rows read, sorted.
func values(rows []fixtures.RateRow) []int64 {
	var out []int64
	for _, r := range rows {
		out = append(out, r.Value)
	}
	slices.Sort(out)
	return out
}

func span(first, last int64) []int64 {
	var out []int64
	for v := first; v <= last; v++ {
		out = append(out, v)
	}
	return out
}

// batchSizes reads, from a batch's progress, how many offsets it took of
// each partition.
func batchSizes(t *testing.T, p runtime.QueryProgress) map[string]int64 {
	t.Helper()
	decode := func(s string) map[string]map[string]int64 {
		var o map[string]map[string]int64
		if s != "" {
			if err := json.Unmarshal([]byte(s), &o); err != nil {
				t.Fatalf("offset %s: %v", s, err)
			}
		}
		return o
	}
	start, end := decode(p.Sources[0].StartOffset), decode(p.Sources[0].EndOffset)
	sizes := map[string]int64{}
	for topic, ps := range end {
		for part, off := range ps {
			sizes[topic+"/"+part] = off - start[topic][part]
		}
	}
	return sizes
}

// TestMaxOffsetsPerTrigger checks the split of MaxOffsetsPerTrigger over
// partitions against Spark's own test (KafkaMicroBatchSourceSuite,
// "maxOffsetsPerTrigger"): 101, 11 and 1 records in three partitions and
// a limit of 10 make batches of 8+1+1, then 9+1+0 records.
func TestMaxOffsetsPerTrigger(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "spark", 3)
	var records []*kgo.Record
	records = append(records, rateRecords("spark", 0, 100, 101)...)
	records = append(records, rateRecords("spark", 1, 10, 11)...)
	records = append(records, rateRecords("spark", 2, 1, 1)...)
	produce(t, conn, records...)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"spark"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 10})
	defer src.Close()
	sink := typed.NewMemorySink[fixtures.RateRow]()
	q := runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), newCheckpoint())

	progress := q.RecentProgress()
	want := []map[string]int64{
		{"spark/0": 8, "spark/1": 1, "spark/2": 1},
		{"spark/0": 9, "spark/1": 1, "spark/2": 0},
	}
	for i, w := range want {
		if got := batchSizes(t, progress[i]); fmt.Sprint(got) != fmt.Sprint(w) {
			t.Errorf("batch %d took %v, want %v", i, got, w)
		}
	}
	// Spark's expected answers for those batches.
	batches := sink.Batches()
	if got := values(batches[0]); fmt.Sprint(got) != fmt.Sprint([]int64{1, 10, 100, 101, 102, 103, 104, 105, 106, 107}) {
		t.Errorf("batch 0 read %v", got)
	}
	if got := values(batches[1]); fmt.Sprint(got) != fmt.Sprint([]int64{11, 108, 109, 110, 111, 112, 113, 114, 115, 116}) {
		t.Errorf("batch 1 read %v", got)
	}
	var all []int64
	for _, p := range progress {
		if p.NumInputRows > 10+3 {
			t.Errorf("batch %d read %d rows", p.BatchID, p.NumInputRows)
		}
	}
	all = values(sink.Rows())
	wantAll := slices.Concat(span(1, 1), span(10, 20), span(100, 200))
	if fmt.Sprint(all) != fmt.Sprint(wantAll) {
		t.Fatalf("read %v, want %v", all, wantAll)
	}

	// A Once trigger takes everything in one batch, as Spark's does.
	produce(t, conn, rateRecords("spark", 1, 21, 30)...)
	q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), typed.NewMemorySink[fixtures.RateRow]()).
		Start(testContext(t), newCheckpoint().opts(runtime.WithTrigger(runtime.Once()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	if n := inputRows(q); n != 113+30 || len(q.RecentProgress()) != 1 {
		t.Fatalf("Once read %d rows in %d batches, want %d in 1", n, len(q.RecentProgress()), 113+30)
	}
}

// TestStartingOffsets starts new queries at the earliest and latest
// offsets, at a timestamp, and at given offsets, and checks that a
// restarted query resumes from its checkpoint whatever they say.
func TestStartingOffsets(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "rates", 2)
	produce(t, conn, rateRecords("rates", 0, 0, 10)...)
	produce(t, conn, rateRecords("rates", 1, 100, 10)...)
	base := time.Unix(1_700_000_000, 0).UTC()

	run := func(start kafka.StartingOffsets, ck *checkpoint) []int64 {
		t.Helper()
		src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"rates"}, StartingOffsets: start})
		defer src.Close()
		sink := typed.NewMemorySink[fixtures.RateRow]()
		runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
		return values(sink.Rows())
	}
	check := func(what string, got, want []int64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: read %v, want %v", what, got, want)
		}
	}

	earliest, latest, at, given := newCheckpoint(), newCheckpoint(), newCheckpoint(), newCheckpoint()
	check("earliest", run(kafka.Earliest(), earliest), slices.Concat(span(0, 9), span(100, 109)))
	check("latest", run(kafka.Latest(), latest), nil)
	// Records at or after base+5s in partition 0; none in partition 1
	// before base+105s, so it starts at base+105s there.
	check("timestamp", run(kafka.AtTimestamp(base.Add(5*time.Second)), at), slices.Concat(span(5, 9), span(100, 109)))
	check("timestamp 105s", run(kafka.AtTimestamp(base.Add(105*time.Second)), newCheckpoint()), span(105, 109))
	check("timestamp after all", run(kafka.AtTimestamp(base.Add(time.Hour)), newCheckpoint()), nil)
	check("offsets", run(kafka.AtOffsets(map[string]map[int32]int64{"rates": {0: 7, 1: kafka.EarliestOffset}}), given), slices.Concat(span(7, 9), span(100, 109)))
	check("offsets, both ends", run(kafka.AtOffsets(map[string]map[int32]int64{"rates": {0: kafka.LatestOffset, 1: 8}}), newCheckpoint()), span(108, 109))
	// A time for each partition (Spark's startingOffsetsByTimestamp).
	check("timestamps", run(kafka.AtTimestamps(map[string]map[int32]time.Time{"rates": {0: base.Add(8 * time.Second), 1: base.Add(103 * time.Second)}}), newCheckpoint()),
		slices.Concat(span(8, 9), span(103, 109)))
	check("timestamps, one after all", run(kafka.AtTimestamps(map[string]map[int32]time.Time{"rates": {0: base.Add(time.Hour), 1: base}}), newCheckpoint()),
		span(100, 109))

	// New records; every query goes on from its checkpoint, whatever
	// its starting offsets say now.
	produce(t, conn, rateRecords("rates", 0, 10, 3)...)
	produce(t, conn, rateRecords("rates", 1, 110, 2)...)
	for _, ck := range []*checkpoint{earliest, latest, at, given} {
		check("after a restart", run(kafka.Earliest(), ck), []int64{10, 11, 12, 110, 111})
	}

	// Past a partition's end is data loss.
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"rates"},
		StartingOffsets: kafka.AtOffsets(map[string]map[int32]int64{"rates": {0: 50, 1: kafka.LatestOffset}})})
	defer src.Close()
	q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), typed.NewMemorySink[fixtures.RateRow]()).
		Start(testContext(t), newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); !errors.Is(err, kafka.ErrDataLoss) || !strings.Contains(err.Error(), `topic "rates" partition 0: offset 50: the starting offset is past the partition's end 13`) {
		t.Fatalf("starting past the end: %v", err)
	}
}

// TestEndingOffsets bounds what a source reads, as Spark's endingOffsets,
// endingTimestamp and endingOffsetsByTimestamp: at given offsets (the record at the end not read),
// at the first record at or after a time (a partition without one yet
// read on until one arrives), and at the ends when the source first
// listed them (a source made again, as at a restart, ends further on).
func TestEndingOffsets(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "ends", 2)
	produce(t, conn, rateRecords("ends", 0, 0, 10)...)
	produce(t, conn, rateRecords("ends", 1, 100, 10)...)
	base := time.Unix(1_700_000_000, 0).UTC()
	newSource := func(start kafka.StartingOffsets, end kafka.EndingOffsets) *kafka.TopicSource {
		src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"ends"}, StartingOffsets: start, EndingOffsets: end})
		t.Cleanup(src.Close)
		return src
	}
	run := func(src *kafka.TopicSource, ck *checkpoint) []int64 {
		t.Helper()
		sink := typed.NewMemorySink[fixtures.RateRow]()
		runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
		return values(sink.Rows())
	}
	check := func(what string, got, want []int64) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: read %v, want %v", what, got, want)
		}
	}
	earliest := kafka.Earliest()
	check("offsets", run(newSource(earliest, kafka.EndAtOffsets(map[string]map[int32]int64{"ends": {0: 5, 1: kafka.LatestOffset}})), newCheckpoint()),
		slices.Concat(span(0, 4), span(100, 109)))
	check("offsets, one partition named", run(newSource(earliest, kafka.EndAtOffsets(map[string]map[int32]int64{"ends": {1: 3}})), newCheckpoint()),
		slices.Concat(span(0, 9), span(100, 102)))
	check("start past the end", run(newSource(kafka.AtOffsets(map[string]map[int32]int64{"ends": {0: 7, 1: kafka.EarliestOffset}}),
		kafka.EndAtOffsets(map[string]map[int32]int64{"ends": {0: 3, 1: 2}})), newCheckpoint()), span(100, 101))
	// Partition 1's records are all at 100s or later: none of them.
	check("timestamp 5s", run(newSource(earliest, kafka.EndAtTimestamp(base.Add(5*time.Second))), newCheckpoint()), span(0, 4))
	// A time per partition (Spark's endingOffsetsByTimestamp); one not
	// named ends where it ends now.
	check("timestamps", run(newSource(earliest, kafka.EndAtTimestamps(map[string]map[int32]time.Time{"ends": {0: base.Add(3 * time.Second), 1: base.Add(102 * time.Second)}})), newCheckpoint()),
		slices.Concat(span(0, 2), span(100, 101)))
	check("timestamps, one partition named", run(newSource(earliest, kafka.EndAtTimestamps(map[string]map[int32]time.Time{"ends": {1: base.Add(107 * time.Second)}})), newCheckpoint()),
		slices.Concat(span(0, 9), span(100, 106)))

	// Partition 0 has no record at or after 105s: it is read on.
	open := newSource(earliest, kafka.EndAtTimestamp(base.Add(105*time.Second)))
	ck := newCheckpoint()
	check("timestamp 105s", run(open, ck), slices.Concat(span(0, 9), span(100, 104)))
	produce(t, conn, rateRecords("ends", 0, 10, 3)...)
	produce(t, conn, rateRecords("ends", 1, 110, 2)...)
	check("timestamp 105s, more records", run(open, ck), span(10, 12))
	// A record at 200s ends partition 0 there: the one after it (13s)
	// is not read.
	produce(t, conn, rateRecords("ends", 0, 200, 1)...)
	produce(t, conn, rateRecords("ends", 0, 13, 1)...)
	check("timestamp 105s, ended", run(open, ck), nil)
	check("timestamp 105s, restarted", run(newSource(earliest, kafka.EndAtTimestamp(base.Add(105*time.Second))), ck), nil)

	// Where the partitions ended when the source first listed them.
	latest := newSource(earliest, kafka.EndAtLatest())
	ck = newCheckpoint()
	check("latest", run(latest, ck), slices.Concat(span(0, 13), span(100, 111), []int64{200}))
	produce(t, conn, rateRecords("ends", 1, 112, 3)...)
	check("latest, more records", run(latest, ck), nil)
	check("latest, a new source", run(newSource(earliest, kafka.EndAtLatest()), ck), span(112, 114))

	for _, c := range []struct {
		end  kafka.EndingOffsets
		want string
	}{
		{kafka.EndAtOffsets(map[string]map[int32]int64{"ends": {0: kafka.EarliestOffset}}), "EndingOffsets: ends/0: offset -2 is neither an offset nor LatestOffset"},
		{kafka.EndAtOffsets(map[string]map[int32]int64{"other": {0: 1}}), `EndingOffsets: topic "other" is not among the topics read`},
		{kafka.EndAtTimestamp(time.Time{}), "EndAtTimestamp of the zero time"},
		{kafka.EndAtTimestamps(map[string]map[int32]time.Time{"ends": {1: {}}}), "EndAtTimestamps: ends/1: the zero time"},
		{kafka.EndAtTimestamps(map[string]map[int32]time.Time{"other": {0: base}}), `EndingOffsets: topic "other" is not among the topics read`},
	} {
		src := newSource(earliest, c.end)
		if _, err := src.Available(testContext(t)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.end, err, c.want)
		}
	}
}

// TestEndedPartitionIsNotWaitedOn: a query waiting for data does not
// fetch a partition read to its EndingOffsets, whose records after the
// end would answer the fetch at once and wake the query for nothing,
// again and again.
func TestEndedPartitionIsNotWaitedOn(t *testing.T) {
	fake, conn, adm := newFakeCluster(t)
	createTopic(t, adm, "ends", 1)
	produce(t, conn, rateRecords("ends", 0, 0, 10)...)
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"ends"}, StartingOffsets: kafka.Earliest(),
		EndingOffsets: kafka.EndAtOffsets(map[string]map[int32]int64{"ends": {0: 5}})})
	defer src.Close()
	ctx := testContext(t)
	upTo, err := src.Available(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end, err := src.Next(ctx, nil, upTo, runtime.Limited)
	if err != nil || string(end) != `{"ends":{"0":5}}` {
		t.Fatalf("the batch ends at %s, %v", end, err)
	}
	var fetches atomic.Int64
	fake.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		fetches.Add(1)
		return nil, nil, false
	})
	src.WaitForData(ctx, end, 20*time.Millisecond)
	if n := fetches.Load(); n != 0 {
		t.Fatalf("waiting at the end fetched %d times", n)
	}
}

// TestCommitGroup: with CommitGroup, each committed batch's end offsets
// are committed to the group, for tools that watch its lag; the query
// itself reads from its checkpoint, whatever the group holds.
func TestCommitGroup(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "watched", 2)
	produce(t, conn, rateRecords("watched", 0, 0, 10)...)
	produce(t, conn, rateRecords("watched", 1, 100, 5)...)
	ck := newCheckpoint()
	run := func() []int64 {
		t.Helper()
		src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"watched"}, StartingOffsets: kafka.Earliest(),
			CommitGroup: "watchers", MaxOffsetsPerTrigger: 4})
		sink := typed.NewMemorySink[fixtures.RateRow]()
		runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
		src.Close() // the last commit
		return values(sink.Rows())
	}
	committed := func() map[int32]int64 {
		t.Helper()
		fetched, err := adm.FetchOffsets(testContext(t), "watchers")
		if err != nil {
			t.Fatal(err)
		}
		out := map[int32]int64{}
		fetched.Each(func(o kadm.OffsetResponse) {
			if o.Topic == "watched" {
				out[o.Partition] = o.At
			}
		})
		return out
	}
	if got := run(); fmt.Sprint(got) != fmt.Sprint(slices.Concat(span(0, 9), span(100, 104))) {
		t.Fatalf("read %v", got)
	}
	if got, want := committed(), map[int32]int64{0: 10, 1: 5}; !maps.Equal(got, want) {
		t.Fatalf("the group holds %v, want %v", got, want)
	}
	// The group moved back by hand: the query goes on from its
	// checkpoint, and commits past it again.
	back := make(kadm.Offsets)
	back.AddOffset("watched", 0, 0, -1)
	if _, err := adm.CommitOffsets(testContext(t), "watchers", back); err != nil {
		t.Fatal(err)
	}
	produce(t, conn, rateRecords("watched", 0, 10, 2)...)
	if got := run(); fmt.Sprint(got) != fmt.Sprint(span(10, 11)) {
		t.Fatalf("after the group was moved back, read %v, want the records after the checkpoint", got)
	}
	if got, want := committed(), map[int32]int64{0: 12, 1: 5}; !maps.Equal(got, want) {
		t.Fatalf("the group holds %v, want %v", got, want)
	}
}

// TestStartingOffsetsGiveEveryPartition checks that AtOffsets must give
// every partition a source of topics reads, and no other, as Spark's
// startingOffsets must: a partition left out would start nowhere the
// user said. A source of given partitions takes its own from a map of
// more, as an App's tasks do.
func TestStartingOffsetsGiveEveryPartition(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "rates", 2)
	produce(t, conn, rateRecords("rates", 0, 0, 10)...)
	produce(t, conn, rateRecords("rates", 1, 100, 10)...)
	start := func(opts kafka.Options) (*typed.MemorySink[fixtures.RateRow], error) {
		t.Helper()
		opts.Connection = conn
		src := kafka.Source(opts)
		defer src.Close()
		sink := typed.NewMemorySink[fixtures.RateRow]()
		q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), sink).
			Start(testContext(t), newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			t.Fatal(err)
		}
		return sink, q.AwaitTermination()
	}
	for _, tc := range []struct {
		name    string
		offsets map[string]map[int32]int64
		want    string
	}{
		{"one left out", map[string]map[int32]int64{"rates": {1: 8}}, `AtOffsets gives no offset for rates/0 (give LatestOffset or EarliestOffset where any will do)`},
		{"one not there", map[string]map[int32]int64{"rates": {0: 1, 1: 8, 2: 0}}, `AtOffsets gives an offset for rates/2, not among the partitions read`},
		{"both", map[string]map[int32]int64{"rates": {0: 1, 5: 0}}, `AtOffsets gives no offset for rates/1 (give LatestOffset or EarliestOffset where any will do) and an offset for rates/5, not among the partitions read`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sink, err := start(kafka.Options{Topics: []string{"rates"}, StartingOffsets: kafka.AtOffsets(tc.offsets)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "the partitions read: rates/0, rates/1") {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
			if n := len(sink.Rows()); n != 0 {
				t.Errorf("wrote %d rows", n)
			}
		})
	}
	sink, err := start(kafka.Options{Partitions: map[string][]int32{"rates": {1}},
		StartingOffsets: kafka.AtOffsets(map[string]map[int32]int64{"rates": {0: 3, 1: 7}})})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := values(sink.Rows()), span(107, 109); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("a source of partition 1 read %v, want %v", got, want)
	}
	if _, err := start(kafka.Options{Partitions: map[string][]int32{"rates": {0, 1}},
		StartingOffsets: kafka.AtOffsets(map[string]map[int32]int64{"rates": {1: 7}})}); err == nil || !strings.Contains(err.Error(), "no offset for rates/0") {
		t.Fatalf("a source of partitions 0 and 1 given only 1: %v", err)
	}
	if _, err := start(kafka.Options{Topics: []string{"rates"},
		StartingOffsets: kafka.AtTimestamps(map[string]map[int32]time.Time{"rates": {1: time.Unix(1_700_000_000, 0)}})}); err == nil ||
		!strings.Contains(err.Error(), "AtTimestamps gives no offset for rates/0;") {
		t.Fatalf("AtTimestamps leaving partition 0 out: %v", err)
	}
}

// TestFailOnDataLoss deletes records a query has not read yet
// (DeleteRecords, as retention would): by default the query stops with
// an error naming the topic, partition and offsets lost; with
// ContinueOnDataLoss it goes on from the earliest record still there.
func TestFailOnDataLoss(t *testing.T) {
	for _, policy := range []kafka.DataLoss{kafka.FailOnDataLoss, kafka.ContinueOnDataLoss} {
		t.Run(policy.String(), func(t *testing.T) {
			conn, adm := newCluster(t)
			createTopic(t, adm, "logs", 2)
			produce(t, conn, rateRecords("logs", 0, 0, 10)...)
			produce(t, conn, rateRecords("logs", 1, 100, 10)...)
			src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"logs"}, StartingOffsets: kafka.Earliest(), OnDataLoss: policy})
			defer src.Close()
			sink := typed.NewMemorySink[fixtures.RateRow]()
			ck := newCheckpoint()
			runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)

			// Offsets 10 to 19 of partition 0 arrive; 10 to 14 are
			// deleted before the query reads them.
			produce(t, conn, rateRecords("logs", 0, 10, 10)...)
			produce(t, conn, rateRecords("logs", 1, 110, 2)...)
			var deleted kadm.Offsets
			deleted.Add(kadm.Offset{Topic: "logs", Partition: 0, At: 15})
			resp, err := adm.DeleteRecords(testContext(t), deleted)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				t.Fatal(err)
			}

			q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), sink).
				Start(testContext(t), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
			if err != nil {
				t.Fatal(err)
			}
			err = q.AwaitTermination()
			if policy == kafka.FailOnDataLoss {
				if !errors.Is(err, kafka.ErrDataLoss) || !strings.Contains(err.Error(), `topic "logs" partition 0: offsets 10 to 15 are gone`) {
					t.Fatalf("the query ended with %v, want data loss of logs/0 offsets 10 to 15", err)
				}
				// A new query starting at the earliest offsets loses
				// nothing: they are where the log starts now.
				fresh := typed.NewMemorySink[fixtures.RateRow]()
				runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), fresh), newCheckpoint())
				if got, want := values(fresh.Rows()), slices.Concat(span(15, 19), span(100, 111)); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("a new query read %v, want %v", got, want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Concat(span(0, 9), span(15, 19), span(100, 111))
			if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %v, want %v", got, want)
			}
		})
	}
}

// TestNewPartitionsWhileRunning adds partitions to a topic and creates a
// topic matching a pattern while queries run, and checks that their
// records are read, from their first, each once.
func TestNewPartitionsWhileRunning(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "grow", 2)
	createTopic(t, adm, "np-a", 1)
	produce(t, conn, rateRecords("grow", 0, 0, 5)...)
	produce(t, conn, rateRecords("grow", 1, 100, 5)...)
	produce(t, conn, rateRecords("np-a", 0, 1000, 5)...)

	start := func(opts kafka.Options) (*signalSink[fixtures.RateRow], *typed.MemorySink[fixtures.RateRow], *runtime.Query) {
		opts.Connection, opts.StartingOffsets = conn, kafka.Earliest()
		src := kafka.Source(opts)
		t.Cleanup(src.Close)
		rows := typed.NewMemorySink[fixtures.RateRow]()
		sink := newSignalSink[fixtures.RateRow](rows)
		q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), typed.Sink[fixtures.RateRow](sink)).
			Start(testContext(t), newCheckpoint().opts()...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := q.Stop(); err != nil {
				t.Error(err)
			}
		})
		return sink, rows, q
	}
	byTopic, byTopicRows, _ := start(kafka.Options{Topics: []string{"grow"}})
	byPattern, byPatternRows, _ := start(kafka.Options{TopicPattern: "^np-"})
	has := func(rows *typed.MemorySink[fixtures.RateRow], want []int64) func() bool {
		return func() bool { return len(rows.Rows()) >= len(want) }
	}
	wantTopic := slices.Concat(span(0, 4), span(100, 104))
	byTopic.waitFor(t, "the first records of grow", has(byTopicRows, wantTopic))
	byPattern.waitFor(t, "the first records of np-a", has(byPatternRows, span(1000, 1004)))

	if _, err := adm.CreatePartitions(testContext(t), 2, "grow"); err != nil {
		t.Fatal(err)
	}
	createTopic(t, adm, "np-b", 2)
	produce(t, conn, rateRecords("grow", 2, 200, 3)...)
	produce(t, conn, rateRecords("grow", 3, 300, 3)...)
	produce(t, conn, rateRecords("np-b", 1, 2000, 4)...)
	produce(t, conn, rateRecords("np-a", 0, 1005, 1)...)

	wantTopic = slices.Concat(wantTopic, span(200, 202), span(300, 302))
	wantPattern := slices.Concat(span(1000, 1005), span(2000, 2003))
	byTopic.waitFor(t, "the records of the new partitions", has(byTopicRows, wantTopic))
	byPattern.waitFor(t, "the records of the new topic", has(byPatternRows, wantPattern))
	if got := values(byTopicRows.Rows()); fmt.Sprint(got) != fmt.Sprint(wantTopic) {
		t.Errorf("grow: read %v, want %v", got, wantTopic)
	}
	if got := values(byPatternRows.Rows()); fmt.Sprint(got) != fmt.Sprint(wantPattern) {
		t.Errorf("np-*: read %v, want %v", got, wantPattern)
	}
}

// TestAssignedPartitions reads only the partitions given, and one of
// them once it exists.
func TestAssignedPartitions(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "many", 3)
	for p := range int32(3) {
		produce(t, conn, rateRecords("many", p, int(p)*100, 3)...)
	}
	src := kafka.Source(kafka.Options{Connection: conn, Partitions: map[string][]int32{"many": {0, 2, 5}}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	if src.Name() != "kafka:assign:many/0,many/2,many/5" {
		t.Errorf("name %q", src.Name())
	}
	sink := typed.NewMemorySink[fixtures.RateRow]()
	ck := newCheckpoint()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
	if got, want := values(sink.Rows()), slices.Concat(span(0, 2), span(200, 202)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
	if _, err := adm.CreatePartitions(testContext(t), 3, "many"); err != nil {
		t.Fatal(err)
	}
	produce(t, conn, rateRecords("many", 5, 500, 2)...)
	produce(t, conn, rateRecords("many", 4, 400, 2)...)
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
	if got, want := values(sink.Rows()), slices.Concat(span(0, 2), span(200, 202), span(500, 501)); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}
}

// TestOptionsValidated checks that bad options are reported together,
// by the first call.
func TestOptionsValidated(t *testing.T) {
	src := kafka.Source(kafka.Options{Topics: []string{"a b"}, TopicPattern: "(", MaxOffsetsPerTrigger: -1, MinOffsetsPerTrigger: -2, MaxTriggerDelay: -time.Second,
		StartingOffsets: kafka.AtOffsets(map[string]map[int32]int64{"other": {0: -3}})})
	_, err := src.Available(testContext(t))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"no Brokers", "exactly one of Topics", `"a b" is not a legal topic name`, "TopicPattern", "MaxOffsetsPerTrigger -1", "MinOffsetsPerTrigger -2", "MaxTriggerDelay -1s", `topic "other" is not among`, "offset -3"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !strings.HasPrefix(err.Error(), "streamgen: kafka source") {
		t.Errorf("error %q", err)
	}
	sink := kafka.Sink[fixtures.RateRow](kafka.SinkOptions[fixtures.RateRow]{Connection: kafka.Connection{Brokers: []string{"127.0.0.1:1"}}})
	if err := sink.Write(testContext(t), 0, []fixtures.RateRow{{}}); err == nil || !strings.Contains(err.Error(), "set Topic or TopicOf") {
		t.Errorf("sink without a topic: %v", err)
	}
	if _, err := kafka.Embedded(testContext(t), kafka.ListenAddr("192.0.2.1:0")); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("embedded on a remote address: %v", err)
	}
	if _, err := kafka.Embedded(testContext(t), kafka.ListenAddr("127.0.0.1:9092"), kafka.NumBrokers(2)); err == nil || !strings.Contains(err.Error(), "a fixed port serves one broker") {
		t.Errorf("two brokers on one port: %v", err)
	}
}

// TestBrokersFromEnvironment reads STREAMGEN_KAFKA_BROKERS.
func TestBrokersFromEnvironment(t *testing.T) {
	t.Setenv(kafka.BrokersEnv, "")
	if b := kafka.Brokers(); b != nil {
		t.Errorf("unset: %v", b)
	}
	t.Setenv(kafka.BrokersEnv, " a:9092, b:9093 ,,")
	if b := kafka.Brokers(); strings.Join(b, "|") != "a:9092|b:9093" {
		t.Errorf("got %q", b)
	}
}

// TestEmbeddedOnALoopbackPort runs a cluster of three brokers and one on
// a chosen port, and reaches them with a plain client.
func TestEmbeddedOnALoopbackPort(t *testing.T) {
	conn, adm := newCluster(t, kafka.NumBrokers(3), kafka.SeedTopics(6, "seeded"))
	if len(conn.Brokers) != 3 {
		t.Fatalf("brokers %v", conn.Brokers)
	}
	topics, err := adm.ListTopics(testContext(t), "seeded")
	if err != nil || len(topics["seeded"].Partitions) != 6 {
		t.Fatalf("seeded topic: %v %v", topics, err)
	}
	// Records spread over partitions led by three brokers read back.
	for p := range int32(6) {
		produce(t, conn, rateRecords("seeded", p, int(p)*10, 2)...)
	}
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"seeded"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	sink := typed.NewMemorySink[fixtures.RateRow]()
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), newCheckpoint())
	var want []int64
	for p := range int64(6) {
		want = append(want, p*10, p*10+1)
	}
	if got := values(sink.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read %v, want %v", got, want)
	}

	conn, _ = newCluster(t, kafka.ListenAddr("127.0.0.1:0"))
	if host, port, ok := strings.Cut(conn.Brokers[0], ":"); !ok || host != "127.0.0.1" || port == "0" {
		t.Fatalf("broker %q", conn.Brokers[0])
	} else if _, err := strconv.Atoi(port); err != nil {
		t.Fatalf("broker %q", conn.Brokers[0])
	}
}

// TestMinOffsetsPerTrigger: with MinOffsetsPerTrigger, a trickle of
// records is held back until the partitions have that many new offsets
// in all (8 are held, 11 make a batch), or MaxTriggerDelay has passed
// since the last batch (2 go once the source's clock has moved a
// minute on), as Spark's minOffsetsPerTrigger and maxTriggerDelay. An
// AvailableNow query holds nothing back: it ends with what was there.
func TestMinOffsetsPerTrigger(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "trickle", 2)
	ctx := testContext(t)
	clock := runtime.NewManualClock(time.Unix(1_800_000_000, 0))
	opts := kafka.Options{Connection: conn, Topics: []string{"trickle"}, StartingOffsets: kafka.Earliest(),
		MinOffsetsPerTrigger: 10, MaxTriggerDelay: time.Minute, Clock: clock.Now}
	src := kafka.Source(opts)
	defer src.Close()
	sink := typed.NewMemorySink[fixtures.RateRow]()
	q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), sink).Start(ctx, newCheckpoint().opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	poll(t, "the first batch", func() bool { return len(q.RecentProgress()) > 0 })
	read := func() int { return len(sink.Rows()) }
	produce(t, conn, rateRecords("trickle", 0, 0, 4)...)
	produce(t, conn, rateRecords("trickle", 1, 4, 4)...)
	produce(t, conn, rateRecords("trickle", 0, 8, 3)...)
	poll(t, "11 rows", func() bool { return read() == 11 })
	produce(t, conn, rateRecords("trickle", 1, 11, 2)...)
	poll(t, "13 rows", func() bool {
		if read() == 13 {
			return true
		}
		// MaxTriggerDelay passes. (Again at each look: a listing that
		// had not seen the two records yet when the minute passed found
		// nothing new, and started the delay again, as Spark's
		// delayBatch does.)
		clock.Advance(time.Minute)
		return false
	})
	q.Stop()
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	var sizes []int64
	for _, p := range q.RecentProgress() {
		if p.NumInputRows > 0 {
			sizes = append(sizes, p.NumInputRows)
		}
	}
	if !slices.Equal(sizes, []int64{11, 2}) {
		t.Fatalf("batches of %v rows, want 11 then 2", sizes)
	}

	opts.MinOffsetsPerTrigger = 1000
	all := kafka.Source(opts)
	defer all.Close()
	now := runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](all), typed.NewMemorySink[fixtures.RateRow]()), newCheckpoint())
	if n := inputRows(now); n != 13 {
		t.Fatalf("AvailableNow read %d rows, want the 13 there", n)
	}
}

// stepSource runs one trigger on src directly, as the query's loop does
// (Available, Next, Read, fn called for each record), and returns the
// batch's end.
func stepSource(t *testing.T, src *kafka.TopicSource, committed json.RawMessage, fn func(runtime.Record) error) json.RawMessage {
	t.Helper()
	end, err := planBatch(t, src, committed)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Read(testContext(t), committed, end, fn); err != nil {
		t.Fatal(err)
	}
	return end
}

// planBatch plans the batch after committed as a query does: the
// offsets available, then Next's end offsets, or Next's error.
func planBatch(t *testing.T, src *kafka.TopicSource, committed json.RawMessage) (json.RawMessage, error) {
	t.Helper()
	ctx := testContext(t)
	upTo, err := src.Available(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return src.Next(ctx, committed, upTo, runtime.Limited)
}

// TestNewPartitionStartsAtItsEarliestOffset: a topic the pattern matches
// while the query runs, whose first 990 records were deleted before the
// query saw it, starts at its earliest offset, as in Spark: its lag, and
// so its share of MaxOffsetsPerTrigger, is its 10 records, not 1000
// offsets counted from 0 (with which it took nearly every batch's share,
// reading nothing, and the other topic crawled along at a record a
// batch). The deletion is data loss (Spark: "Added partition starts from
// 990 instead of 0"): reported once, then the query goes on, with
// ContinueOnDataLoss; the default fails the batch.
func TestNewPartitionStartsAtItsEarliestOffset(t *testing.T) {
	for _, onLoss := range []kafka.DataLoss{kafka.ContinueOnDataLoss, kafka.FailOnDataLoss} {
		t.Run(map[kafka.DataLoss]string{kafka.ContinueOnDataLoss: "continue", kafka.FailOnDataLoss: "fail"}[onLoss], func(t *testing.T) {
			log := testenv.CaptureLog(t)
			conn, adm := newCluster(t)
			createTopic(t, adm, "rv-a", 1)
			src := kafka.Source(kafka.Options{Connection: conn, TopicPattern: "^rv-", StartingOffsets: kafka.Earliest(),
				MaxOffsetsPerTrigger: 20, OnDataLoss: onLoss})
			defer src.Close()
			committed := stepSource(t, src, nil, func(runtime.Record) error { return nil })

			createTopic(t, adm, "rv-b", 1)
			produce(t, conn, rateRecords("rv-b", 0, 0, 1000)...)
			var del kadm.Offsets
			del.Add(kadm.Offset{Topic: "rv-b", Partition: 0, At: 990})
			if resp, err := adm.DeleteRecords(testContext(t), del); err != nil || resp.Error() != nil {
				t.Fatal(err, resp.Error())
			}
			produce(t, conn, rateRecords("rv-a", 0, 0, 100)...)
			if onLoss == kafka.FailOnDataLoss {
				if _, err := planBatch(t, src, committed); !errors.Is(err, kafka.ErrDataLoss) {
					t.Fatalf("a new partition whose first 990 records are gone: %v, want ErrDataLoss", err)
				}
				return
			}
			// Six batches at most of 20 offsets, shared by lag, read the
			// 110 records there are.
			read := map[string]int{}
			for batch := 0; read["rv-a/0"] < 100 || read["rv-b/0"] < 10; batch++ {
				if batch == 6 {
					t.Fatalf("after %d batches of at most 20 offsets, read %v of 100 and 10 records (at %s)", batch, read, committed)
				}
				committed = stepSource(t, src, committed, func(r runtime.Record) error { read[r.Partition]++; return nil })
			}
			if n := strings.Count(log.String(), "data loss"); n != 1 {
				t.Errorf("%d reports of data loss, want 1:\n%s", n, log.String())
			}
		})
	}
}

// collectValues returns a function that appends the value of each
// record, RateRow JSON, to read.
func collectValues(read *[]int64) func(runtime.Record) error {
	return func(r runtime.Record) error {
		var row fixtures.RateRow
		if err := row.UnmarshalJSON(r.Data); err != nil {
			return err
		}
		*read = append(*read, row.Value)
		return nil
	}
}

// TestDeletedTopicIsDataLoss: a topic the query reads is deleted. As in
// Spark ("... are gone. Some data may have been missed."), that is data
// loss: the default fails the batch; ContinueOnDataLoss reports it once
// and forgets the partition, so that the topic, made again, is read from
// its first record, as a partition new to the query, not from the offset
// the deleted one had reached (which skipped the new topic's first ten
// records without a word).
func TestDeletedTopicIsDataLoss(t *testing.T) {
	for _, onLoss := range []kafka.DataLoss{kafka.ContinueOnDataLoss, kafka.FailOnDataLoss} {
		t.Run(onLoss.String(), func(t *testing.T) {
			log := testenv.CaptureLog(t)
			conn, adm := newCluster(t)
			createTopic(t, adm, "del", 1)
			createTopic(t, adm, "keep", 1)
			produce(t, conn, rateRecords("del", 0, 0, 10)...)
			produce(t, conn, rateRecords("keep", 0, 100, 5)...)
			src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"del", "keep"}, StartingOffsets: kafka.Earliest(), OnDataLoss: onLoss})
			defer src.Close()
			var read []int64
			collect := collectValues(&read)
			committed := stepSource(t, src, nil, collect)

			if _, err := adm.DeleteTopics(testContext(t), "del"); err != nil {
				t.Fatal(err)
			}
			produce(t, conn, rateRecords("keep", 0, 105, 1)...)
			if onLoss == kafka.FailOnDataLoss {
				_, err := planBatch(t, src, committed)
				if !errors.Is(err, kafka.ErrDataLoss) || !strings.Contains(err.Error(), `topic "del" partition 0: offset 10: the partition is gone`) {
					t.Fatalf("the batch after the topic's deletion: %v, want data loss of del/0 after offset 10", err)
				}
				return
			}
			committed = stepSource(t, src, committed, collect)
			createTopic(t, adm, "del", 1)
			produce(t, conn, rateRecords("del", 0, 1000, 20)...)
			for batch := 0; len(read) < 36; batch++ {
				if batch == 10 {
					t.Fatalf("after %d batches, read %v", batch, read)
				}
				committed = stepSource(t, src, committed, collect)
			}
			slices.Sort(read)
			if want := slices.Concat(span(0, 9), span(100, 105), span(1000, 1019)); fmt.Sprint(read) != fmt.Sprint(want) {
				t.Errorf("read %v, want %v", read, want)
			}
			if n := strings.Count(log.String(), "data loss"); n != 1 {
				t.Errorf("%d reports of data loss, want 1:\n%s", n, log.String())
			}
		})
	}
}

// TestLaggingBrokerIsNotDataLoss: a broker whose metadata lags (one just
// restarted, or that has not yet learnt of a topic made a moment ago)
// answers that a topic the query reads is unknown. That is not the
// topic's deletion while another broker knows it: the listing that got
// the answer is checked with every broker. (Taken for a deletion, with
// ContinueOnDataLoss, the partition was forgotten, and read again from
// its first record at the next batch.)
func TestLaggingBrokerIsNotDataLoss(t *testing.T) {
	fake, conn, adm := newFakeCluster(t, kafka.NumBrokers(3))
	createTopic(t, adm, "t", 1)
	produce(t, conn, rateRecords("t", 0, 0, 10)...)
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"t"}, StartingOffsets: kafka.Earliest(), OnDataLoss: kafka.ContinueOnDataLoss})
	defer src.Close()
	var read []int64
	collect := collectValues(&read)
	committed := stepSource(t, src, nil, collect)

	brokers, err := adm.BrokerMetadata(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	var armed atomic.Bool
	var served atomic.Int64
	fake.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		req := kreq.(*kmsg.MetadataRequest)
		if !armed.Load() || len(req.Topics) != 1 || req.Topics[0].Topic == nil || *req.Topics[0].Topic != "t" {
			fake.KeepControl()
			return nil, nil, false
		}
		fake.KeepControl()
		if served.Load() > 0 && fake.CurrentNode() != brokers.Brokers[0].NodeID {
			return nil, nil, false // (the first answer lags, wherever it comes from; then the first broker's)
		}
		served.Add(1)
		resp := req.ResponseKind().(*kmsg.MetadataResponse)
		resp.Version = req.Version
		for _, b := range brokers.Brokers {
			rb := kmsg.NewMetadataResponseBroker()
			rb.NodeID, rb.Host, rb.Port, rb.Rack = b.NodeID, b.Host, b.Port, b.Rack
			resp.Brokers = append(resp.Brokers, rb)
		}
		resp.ControllerID = brokers.Controller
		rt := kmsg.NewMetadataResponseTopic()
		rt.Topic = kmsg.StringPtr("t")
		rt.ErrorCode = kerr.UnknownTopicOrPartition.Code
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
	produce(t, conn, rateRecords("t", 0, 10, 1)...)
	// The broker lags for the listing of one batch.
	armed.Store(true)
	end, err := planBatch(t, src, committed)
	armed.Store(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Read(testContext(t), committed, end, collect); err != nil {
		t.Fatal(err)
	}
	committed = end
	for range 3 {
		committed = stepSource(t, src, committed, collect)
	}
	if served.Load() == 0 {
		t.Fatal("no metadata answer lagged")
	}
	slices.Sort(read)
	if want := span(0, 10); fmt.Sprint(read) != fmt.Sprint(want) {
		t.Errorf("read %v, want %v (each record once)", read, want)
	}
}

// TestTwoQueriesPlanAlike: a running query's batch that takes a partition
// new to it and a new query's first batch, planned on one source to the
// same end offsets, each read from their own starts, in either order of
// planning: the running query reads the new partition from its first
// record, and the new query (from the latest offsets) reads nothing.
func TestTwoQueriesPlanAlike(t *testing.T) {
	for _, newFirst := range []bool{false, true} {
		t.Run(map[bool]string{false: "running query first", true: "new query first"}[newFirst], func(t *testing.T) {
			conn, adm := newCluster(t)
			createTopic(t, adm, "sh", 1)
			produce(t, conn, rateRecords("sh", 0, 0, 5)...)
			src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"sh"}})
			defer src.Close()
			running := stepSource(t, src, nil, func(runtime.Record) error { return nil })
			if _, err := adm.CreatePartitions(testContext(t), 1, "sh"); err != nil {
				t.Fatal(err)
			}
			produce(t, conn, rateRecords("sh", 1, 100, 3)...)
			ctx := testContext(t)
			upTo, err := src.Available(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var runningEnd, newEnd json.RawMessage
			plan := func(committed json.RawMessage) json.RawMessage {
				end, err := src.Next(ctx, committed, upTo, runtime.Limited)
				if err != nil {
					t.Fatal(err)
				}
				return end
			}
			if newFirst {
				newEnd, runningEnd = plan(nil), plan(running)
			} else {
				runningEnd, newEnd = plan(running), plan(nil)
			}
			if string(runningEnd) != string(newEnd) {
				t.Fatalf("the two batches end at %s and %s: this test needs them alike", runningEnd, newEnd)
			}
			var readNew, readRunning []int64
			if err := src.Read(ctx, nil, newEnd, collectValues(&readNew)); err != nil {
				t.Fatal(err)
			}
			if err := src.Read(ctx, running, runningEnd, collectValues(&readRunning)); err != nil {
				t.Fatal(err)
			}
			if len(readNew) != 0 {
				t.Errorf("the new query, from the latest offsets, read %v", readNew)
			}
			if !slices.Equal(readRunning, []int64{100, 101, 102}) {
				t.Errorf("the running query read %v from the new partition, want [100 101 102]", readRunning)
			}
		})
	}
}

// TestMaxTriggerDelayStartsAgain: as Spark's delayBatch, a trigger that
// finds MaxTriggerDelay passed starts the delay again, with data or
// without: after a batch and five quiet minutes of triggers, a record
// waits for the delay from the last of them (held a second after it,
// taken a minute after it). And a query's first batch after its start is
// never held, though an earlier query on the same source left a hold.
func TestMaxTriggerDelayStartsAgain(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "quiet", 1)
	clock := runtime.NewManualClock(time.Unix(1_800_000_000, 0))
	opts := kafka.Options{Connection: conn, Topics: []string{"quiet"}, StartingOffsets: kafka.Earliest(),
		MinOffsetsPerTrigger: 10, MaxTriggerDelay: time.Minute, Clock: clock.Now}
	src := kafka.Source(opts)
	defer src.Close()
	committed := stepSource(t, src, nil, func(runtime.Record) error { return nil })
	produce(t, conn, rateRecords("quiet", 0, 0, 10)...)
	committed = stepSource(t, src, committed, func(runtime.Record) error { return nil })
	for range 5 {
		clock.Advance(time.Minute)
		if end, err := planBatch(t, src, committed); err != nil || string(end) != string(committed) {
			t.Fatalf("a quiet trigger planned %s (%v), want nothing new", end, err)
		}
	}
	clock.Advance(time.Second)
	produce(t, conn, rateRecords("quiet", 0, 10, 1)...)
	if end, err := planBatch(t, src, committed); err != nil || string(end) != string(committed) {
		t.Fatalf("a record a second after the delay started again went at once (%s, %v): want it held", end, err)
	}
	clock.Advance(time.Minute)
	var read []int64
	if end := stepSource(t, src, committed, collectValues(&read)); string(end) == string(committed) || !slices.Equal(read, []int64{10}) {
		t.Fatalf("a minute on, the batch read %v, want [10]", read)
	}

	// A hold left by a query, then a query started on the same source
	// and checkpoint: its first batch takes the held records at once.
	sink := typed.NewMemorySink[fixtures.RateRow]()
	w := typed.WriteTo(typed.From[fixtures.RateRow](src), sink)
	ck := newCheckpoint()
	runAvailableNow(t, w, ck)
	q, err := w.Start(testContext(t), ck.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	produce(t, conn, rateRecords("quiet", 0, 11, 3)...)
	poll(t, "the hold", func() bool { return kafka.Holding(src) })
	q.Stop()
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	before := len(sink.Rows())
	q, err = w.Start(testContext(t), ck.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Stop()
	poll(t, "the 3 held rows", func() bool { return len(sink.Rows()) == before+3 })
}

// captureLogs sends the default logger's records to the returned
// builder until the test ends. (Not for parallel tests.)
func captureLogs(t *testing.T) *strings.Builder {
	var logs strings.Builder
	before := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	t.Cleanup(func() { slog.SetDefault(before) })
	return &logs
}

// TestSourceWarnsOfAMissingTopic: a source of a topic the cluster does not
// have waits for it, saying so once (a typo in a name would otherwise go
// unnoticed: Spark fails the query), and says when it is there.
func TestSourceWarnsOfAMissingTopic(t *testing.T) {
	logs := captureLogs(t)
	_, conn, adm := newFakeCluster(t)
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"later"}})
	defer src.Close()
	ctx := testContext(t)
	for range 3 {
		if _, err := src.Available(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "a topic it reads does not exist: waiting for it"); n != 1 || !strings.Contains(logs.String(), "topic=later") {
		t.Fatalf("%d warnings of the missing topic in three listings, want 1 naming it:\n%s", n, logs.String())
	}
	createTopic(t, adm, "later", 1)
	if _, err := src.Available(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "a topic it waited for exists") {
		t.Fatalf("no word of the topic made:\n%s", logs.String())
	}
}

// TestSourceNextCapped: a batch cut by a query's MaxBatchStateBytes
// (runtime.RecordCapper) takes at most the records given, spread over the
// partitions by lag as MaxOffsetsPerTrigger's, and no more than
// MaxOffsetsPerTrigger either; a Once trigger's batch is not cut by
// MaxOffsetsPerTrigger, but is by the cap the loop gives.
func TestSourceNextCapped(t *testing.T) {
	_, conn, adm := newFakeCluster(t)
	createTopic(t, adm, "capped", 2)
	var records []*kgo.Record
	for i := range 30 {
		p := int32(0)
		if i%3 == 0 {
			p = 1 // 10 in partition 1, 20 in partition 0
		}
		records = append(records, &kgo.Record{Topic: "capped", Partition: p, Value: []byte(`{}`)})
	}
	produce(t, conn, records...)
	ctx := testContext(t)
	for _, tc := range []struct {
		most    int64
		limit   runtime.ReadLimit
		records int64
		want    string
	}{
		{0, runtime.Limited, 6, `{"capped":{"0":4,"1":2}}`},
		{3, runtime.Limited, 6, `{"capped":{"0":2,"1":1}}`},
		{3, runtime.AllAvailable, 6, `{"capped":{"0":4,"1":2}}`},
		{0, runtime.Limited, 100, `{"capped":{"0":20,"1":10}}`},
	} {
		src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"capped"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: tc.most})
		upTo, err := src.Available(ctx)
		if err != nil {
			t.Fatal(err)
		}
		end, err := src.NextCapped(ctx, nil, upTo, tc.limit, tc.records)
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
		if string(end) != tc.want {
			t.Errorf("MaxOffsetsPerTrigger %d, limit %v, %d records: planned %s, want %s", tc.most, tc.limit, tc.records, end, tc.want)
		}
	}
}

// failFirstBatch fails the first write of batch 0, as a sink whose
// process dies there would.
type failFirstBatch[T any] struct {
	typed.Sink[T]
	failed bool
}

func (f *failFirstBatch[T]) Write(ctx context.Context, id int64, rows []T) error {
	if id == 0 && !f.failed {
		f.failed = true
		return errInjected
	}
	return f.Sink.Write(ctx, id, rows)
}

// TestFirstBatchRunAgainFromItsPlannedStart: a new query's first batch
// that fails is run again, by the next start, from the starting offsets
// its first attempt was planned from, kept in its plan, as Spark keeps a
// Kafka source's initial offsets in its metadata log; not from the
// starting offsets resolved again against the topics as they are by then.
//   - earliest, records deleted since: they are reported lost
//     (FailOnDataLoss), not skipped;
//   - AtOffsets, a partition added since (which AtOffsets does not name):
//     the batch reads what was planned, and the next reads the new
//     partition from its first record.
func TestFirstBatchRunAgainFromItsPlannedStart(t *testing.T) {
	conn, adm := newCluster(t)
	ctx := testContext(t)
	run := func(opts kafka.Options, ck *checkpoint, sink typed.Sink[fixtures.RateRow]) error {
		t.Helper()
		opts.Connection = conn
		src := kafka.Source(opts)
		defer src.Close()
		q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), sink).
			Start(ctx, ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
		if err != nil {
			return err
		}
		return q.AwaitTermination()
	}
	t.Run("deleted", func(t *testing.T) {
		createTopic(t, adm, "first-deleted", 1)
		produce(t, conn, rateRecords("first-deleted", 0, 0, 20)...)
		opts := kafka.Options{Topics: []string{"first-deleted"}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 5}
		ck, rows := newCheckpoint(), typed.NewMemorySink[fixtures.RateRow]()
		if err := run(opts, ck, &failFirstBatch[fixtures.RateRow]{Sink: rows}); !errors.Is(err, errInjected) {
			t.Fatalf("the first start ended with %v, want the sink's fault", err)
		}
		var deleted kadm.Offsets
		deleted.Add(kadm.Offset{Topic: "first-deleted", Partition: 0, At: 3})
		if resp, err := adm.DeleteRecords(ctx, deleted); err != nil || resp.Error() != nil {
			t.Fatal(err, resp.Error())
		}
		err := run(opts, ck, rows)
		if !errors.Is(err, kafka.ErrDataLoss) || !strings.Contains(err.Error(), `topic "first-deleted" partition 0: offsets 0 to 3 are gone`) {
			t.Fatalf("the batch run again ended with %v (read %v), want data loss of offsets 0 to 3", err, values(rows.Rows()))
		}
	})
	t.Run("partition added", func(t *testing.T) {
		createTopic(t, adm, "first-grown", 2)
		produce(t, conn, rateRecords("first-grown", 0, 0, 5)...)
		produce(t, conn, rateRecords("first-grown", 1, 100, 5)...)
		opts := kafka.Options{Topics: []string{"first-grown"}, StartingOffsets: kafka.AtOffsets(map[string]map[int32]int64{"first-grown": {0: 2, 1: 3}})}
		ck, rows := newCheckpoint(), typed.NewMemorySink[fixtures.RateRow]()
		if err := run(opts, ck, &failFirstBatch[fixtures.RateRow]{Sink: rows}); !errors.Is(err, errInjected) {
			t.Fatalf("the first start ended with %v, want the sink's fault", err)
		}
		if _, err := adm.CreatePartitions(ctx, 1, "first-grown"); err != nil {
			t.Fatal(err)
		}
		produce(t, conn, rateRecords("first-grown", 2, 200, 3)...)
		if err := run(opts, ck, rows); err != nil {
			t.Fatalf("the batch run again: %v", err)
		}
		want := slices.Concat(span(2, 4), span(103, 104), span(200, 202))
		if got := values(rows.Rows()); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("read %v, want %v", got, want)
		}
	})
}

// TestStartingTimestampWithoutMatch: AtTimestamp and AtTimestamps start a
// partition with no record at or after the time at its end (Spark's
// startingOffsetsByTimestampStrategy "latest"), so that it reads what is
// produced after; FailWithoutMatch stops the query instead, naming the
// partitions (Spark's "error").
func TestStartingTimestampWithoutMatch(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "stamped", 2)
	produce(t, conn, rateRecords("stamped", 0, 0, 5)...)   // at base+0 s to base+4 s
	produce(t, conn, rateRecords("stamped", 1, 100, 5)...) // at base+100 s to base+104 s
	at := time.Unix(1_700_000_000, 0).Add(50 * time.Second)
	for _, tc := range []struct {
		name     string
		starting kafka.StartingOffsets
	}{
		{"AtTimestamp", kafka.AtTimestamp(at)},
		{"AtTimestamps", kafka.AtTimestamps(map[string]map[int32]time.Time{"stamped": {0: at, 1: at}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"stamped"}, StartingOffsets: tc.starting.FailWithoutMatch()})
			defer src.Close()
			q, err := typed.WriteTo(typed.From[fixtures.RateRow](src), typed.NewMemorySink[fixtures.RateRow]()).
				Start(testContext(t), newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
			if err == nil {
				err = q.AwaitTermination()
			}
			if err == nil || !strings.Contains(err.Error(), "no record at or after the time given in stamped/0 (") {
				t.Fatalf("FailWithoutMatch: %v, want an error naming stamped/0", err)
			}

			src = kafka.Source(kafka.Options{Connection: conn, Topics: []string{"stamped"}, StartingOffsets: tc.starting})
			defer src.Close()
			ck, sink := newCheckpoint(), typed.NewMemorySink[fixtures.RateRow]()
			w := typed.WriteTo(typed.From[fixtures.RateRow](src), sink)
			runAvailableNow(t, w, ck)
			if got, want := values(sink.Rows()), span(100, 104); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %v, want %v", got, want)
			}
			produce(t, conn, rateRecords("stamped", 0, 5, 2)...)
			runAvailableNow(t, w, ck)
			if got, want := values(sink.Rows()), slices.Concat(span(5, 6), span(100, 104)); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %v, want %v: what stamped/0 has after its end at the start", got, want)
			}
		})
	}
}

// TestSourceWarnsOfADroppedTopic: a checkpoint's offsets of a topic the
// source no longer subscribes to (its Name kept across a change of
// subscription) are kept and not read, and the source says so once,
// where Spark fails the query with the partitions "gone"; the topic it
// still reads goes on from its offsets.
func TestSourceWarnsOfADroppedTopic(t *testing.T) {
	logs := captureLogs(t)
	_, conn, adm := newFakeCluster(t)
	createTopic(t, adm, "kept", 1)
	createTopic(t, adm, "dropped", 1)
	produce(t, conn, append(rateRecords("kept", 0, 0, 2), rateRecords("dropped", 0, 10, 2)...)...)
	ck := newCheckpoint()
	run := func(topics ...string) []int64 {
		src := kafka.Source(kafka.Options{Connection: conn, Topics: topics, StartingOffsets: kafka.Earliest(), Name: "events"})
		defer src.Close()
		sink := typed.NewMemorySink[fixtures.RateRow]()
		runAvailableNow(t, typed.WriteTo(typed.From[fixtures.RateRow](src), sink), ck)
		return values(sink.Rows())
	}
	if got := run("kept", "dropped"); len(got) != 4 {
		t.Fatalf("read %v, want the 4 records of both topics", got)
	}
	produce(t, conn, append(rateRecords("kept", 0, 2, 2), rateRecords("dropped", 0, 12, 2)...)...)
	if got := run("kept"); fmt.Sprint(got) != "[2 3]" {
		t.Fatalf("with one topic dropped, read %v, want the kept topic's new records [2 3]", got)
	}
	const warning = "the checkpoint holds offsets of partitions the source no longer reads"
	if n := strings.Count(logs.String(), warning); n != 1 || !strings.Contains(logs.String(), "partitions=dropped/0") {
		t.Fatalf("%d warnings of the dropped topic, want 1 naming dropped/0:\n%s", n, logs.String())
	}
}
