package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestCountPerUserThroughKafka runs the count per user from a
// three-partition topic to a Kafka sink, stopping the query after its
// third batch and starting it again on its checkpoint, and compares the
// counts read back from the output topic with a plain loop.
func TestCountPerUserThroughKafka(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "clicks", 3)
	createTopic(t, adm, "counts", 2)
	in := clicks(300, 1)
	produce(t, conn, clickRecords(t, "clicks", 3, in)...)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"},
		StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 40})
	defer src.Close()
	sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: conn, Topic: "counts",
		Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }})
	defer sink.Close()
	pipeline := func() *typed.Writer[fixtures.UserCount] {
		byUser := typed.GroupByKey(typed.From[fixtures.Click](src), func(c *fixtures.Click) string { return c.User })
		return typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks), sink)
	}
	ck := newCheckpoint()

	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	q, err := pipeline().Start(ctx, ck.opts(runtime.Listener(&stopAfter{n: 3, cancel: cancel}), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	first := inputRows(q)
	if len(q.RecentProgress()) != 3 || first >= int64(len(in)) {
		t.Fatalf("the first run made %d batches reading %d rows: want it stopped after 3, before the end", len(q.RecentProgress()), first)
	}
	q = runAvailableNow(t, pipeline(), ck)
	if total := first + inputRows(q); total != int64(len(in)) {
		t.Fatalf("the two runs read %d rows in all, want %d: a row read twice or skipped", total, len(in))
	}
	for _, p := range q.RecentProgress() {
		if p.NumInputRows > 40+3 {
			t.Errorf("batch %d read %d rows, more than MaxOffsetsPerTrigger allows", p.BatchID, p.NumInputRows)
		}
	}

	latest := map[string]fixtures.UserCount{}
	for _, r := range consume(t, conn, adm, "counts") {
		var u fixtures.UserCount
		if err := u.UnmarshalJSON(r.Value); err != nil {
			t.Fatalf("output %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		if string(r.Key) != u.User {
			t.Fatalf("output key %q, row %+v", r.Key, u)
		}
		latest[u.User] = u // a user's updates are in one partition, in order
	}
	sameCounts(t, latest, expectedCounts(in))
}

// failOnce fails the first write of one batch after the inner sink wrote
// it, as if the process died between the sink and the commit.
type failOnce[T any] struct {
	typed.Sink[T]
	batch  int64
	failed bool
}

var errInjected = errors.New("injected fault")

func (f *failOnce[T]) Write(ctx context.Context, id int64, rows []T) error {
	if err := f.Sink.Write(ctx, id, rows); err != nil {
		return err
	}
	if id == f.batch && !f.failed {
		f.failed = true
		return errInjected
	}
	return nil
}

// TestReplayedBatchIsMarked fails a query after its sink wrote batch 2
// and before the commit, restarts it, and checks that the batch's rows
// are in the output twice, as two writes, and that keeping the last
// write of each batch (BatchMark) leaves every input row exactly once.
func TestReplayedBatchIsMarked(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "clicks", 3)
	createTopic(t, adm, "out", 3)
	in := clicks(200, 2)
	produce(t, conn, clickRecords(t, "clicks", 3, in)...)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"},
		StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 30})
	defer src.Close()
	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "out", WriterID: "replay-test",
		Key: func(c *fixtures.Click) []byte { return []byte(c.User) }})
	defer sink.Close()
	faulty := &failOnce[fixtures.Click]{Sink: sink, batch: 2}
	ck := newCheckpoint()

	q, err := typed.WriteTo(typed.From[fixtures.Click](src), typed.Sink[fixtures.Click](faulty)).
		Start(testContext(t), ck.opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); !errors.Is(err, errInjected) {
		t.Fatalf("the first run ended with %v, want the injected fault", err)
	}
	runAvailableNow(t, typed.WriteTo(typed.From[fixtures.Click](src), typed.Sink[fixtures.Click](faulty)), ck)

	out := consume(t, conn, adm, "out")
	type write struct {
		batch   int64
		attempt string
	}
	last := map[int64]string{}
	attempts := map[write]int{}
	for _, r := range out {
		mark, ok := kafka.ReadBatchMark(r.Headers)
		if !ok || mark.Writer != "replay-test" {
			t.Fatalf("record %d@%d has no batch mark: %v", r.Partition, r.Offset, r.Headers)
		}
		attempts[write{mark.Batch, mark.Attempt}]++
		if mark.Attempt > last[mark.Batch] {
			last[mark.Batch] = mark.Attempt
		}
	}
	// Nothing new arrived between the runs, so batch 2 was planned
	// again as it was: two writes of the same size.
	var sizes []int
	for w, n := range attempts {
		if w.batch == 2 {
			sizes = append(sizes, n)
		}
	}
	if len(sizes) != 2 || sizes[0] != sizes[1] || len(out) != len(in)+sizes[0] {
		t.Fatalf("batch 2 was written %d times (%v records) and the topic holds %d records: want 2 writes of one size, and %d records and one write more", len(sizes), sizes, len(out), len(in))
	}

	// The last write of each batch holds every input row once.
	want := map[fixtures.Click]int{}
	for _, c := range in {
		want[c]++
	}
	for _, r := range out {
		mark, _ := kafka.ReadBatchMark(r.Headers)
		if mark.Attempt != last[mark.Batch] {
			continue
		}
		var c fixtures.Click
		if err := c.UnmarshalJSON(r.Value); err != nil {
			t.Fatal(err)
		}
		c.Time = c.Time.UTC()
		if want[c]--; want[c] < 0 {
			t.Fatalf("%+v is in the output more often than in the input", c)
		}
	}
	for c, n := range want {
		if n != 0 {
			t.Fatalf("%+v is missing from the output", c)
		}
	}
}

// TestSinkOptionsCheckedAtStart: a query whose Kafka sink, or dead-letter
// topic, has options that do not validate fails at Start, saying what is
// wrong, as Spark validates a Kafka sink's options when the query
// starts, not at the first batch with rows (a query whose rows are rare
// would run on, to fail hours later).
func TestSinkOptionsCheckedAtStart(t *testing.T) {
	_, conn, _ := newFakeCluster(t)
	stream := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	good := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "out"})
	defer good.Close()
	for _, tc := range []struct {
		name string
		sink *kafka.TopicSink[fixtures.Click]
		dead *kafka.DeadLetterWriter
		want string
	}{
		{"no topic", kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn}), nil,
			"sink kafka:(by row): kafka sink: options: set Topic or TopicOf"},
		{"tombstone without key", kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "out",
			Tombstone: func(*fixtures.Click) bool { return false }}), nil, "Tombstone needs Key"},
		{"dead-letter topic", good, kafka.DeadLetterTopic("no good", kafka.DeadLetterOptions{Connection: conn}),
			`dead-letter sink: kafka dead-letter topic: options: "no good" is not a legal topic name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := newCheckpoint().opts()
			if tc.dead != nil {
				defer tc.dead.Close()
				opts = append(opts, runtime.DeadLetters(tc.dead))
			}
			q, err := typed.WriteTo(typed.FromMemory(stream), tc.sink).Start(testContext(t), opts...)
			if err == nil {
				q.Stop()
				t.Fatalf("started; want it refused, saying %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want it to say %q", err, tc.want)
			}
		})
	}
}
