package kafka_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"iter"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// testTimeout bounds every wait of a test: a safety net, not a pace. The
// embedded broker is in process, so nothing here waits for time to pass.
const testTimeout = 2 * time.Minute

// testContext is cancelled when the test ends or its safety net runs out.
func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// newCluster starts an embedded cluster for one test and returns a
// connection to it and an admin client.
func newCluster(t *testing.T, opts ...kafka.EmbeddedOption) (kafka.Connection, *kadm.Client) {
	t.Helper()
	_, conn, adm := newFakeCluster(t, opts...)
	return conn, adm
}

// quickMetadata lets a test's client ask for metadata again 10 ms
// after it last did, not 5 s (franz-go's MetadataMinAge): a topic that
// the App makes after the client has looked for it is otherwise
// reported missing for up to 5 s.
var quickMetadata = kgo.MetadataMinAge(10 * time.Millisecond)

// newFakeCluster is newCluster that also returns the kfake cluster under
// it, for tests that inject faults or compact topics.
func newFakeCluster(t *testing.T, opts ...kafka.EmbeddedOption) (*kfake.Cluster, kafka.Connection, *kadm.Client) {
	t.Helper()
	cluster, err := kafka.Embedded(testContext(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	conn := cluster.Connection()
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), quickMetadata)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return kafka.FakeCluster(cluster), conn, kadm.NewClient(client)
}

// newAdmin returns an admin client of its own, whose metadata no earlier
// request has cached.
func newAdmin(t *testing.T, conn kafka.Connection) *kadm.Client {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), quickMetadata)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return kadm.NewClient(client)
}

func createTopic(t *testing.T, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	if _, err := adm.CreateTopic(testContext(t), partitions, 1, nil, topic); err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// produce writes records to the partitions they name and waits for them.
func produce(t *testing.T, conn kafka.Connection, records ...*kgo.Record) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.ProduceSync(testContext(t), records...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consume reads every record of topic up to its end offsets now, with a
// plain franz-go consumer (read_committed), not the source under test,
// and returns them by partition, then offset.
func consume(t *testing.T, conn kafka.Connection, adm *kadm.Client, topic string) []*kgo.Record {
	t.Helper()
	return consumeWith(t, conn, adm, topic, kgo.ReadCommitted())
}

// consumeWith reads a topic to its end with the isolation level given:
// read_committed skips the records of aborted transactions,
// read_uncommitted returns them too. Control records (transaction
// markers) are read, so that a partition ending with one is read to its
// end, and left out of the result.
func consumeWith(t *testing.T, conn kafka.Connection, adm *kadm.Client, topic string, isolation kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	ctx := testContext(t)
	// A read_committed reader reads to the last stable offset: not into a
	// transaction still open.
	list := adm.ListEndOffsets
	if isolation == kgo.ReadCommitted() {
		list = adm.ListCommittedOffsets
	}
	ends, err := list(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			t.Fatalf("end offsets of %s: %v", topic, o.Err)
		}
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(want) == 0 {
		return nil
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(isolation), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var out []*kgo.Record
	for len(want) > 0 {
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: %v (still waiting for %v)", topic, err, want)
		}
		fetches.EachError(func(topic string, p int32, err error) { t.Fatalf("consume %s/%d: %v", topic, p, err) })
		fetches.EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset+1 >= want[r.Partition] {
				delete(want, r.Partition)
			}
		})
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}

// checkpoint is an in-memory checkpoint that outlives the queries run on
// it.
type checkpoint struct{ fs vfs.FS }

func newCheckpoint() *checkpoint { return &checkpoint{fs: vfs.NewMem()} }

func (c *checkpoint) opts(more ...runtime.Option) []runtime.Option {
	return append([]runtime.Option{runtime.Checkpoint("ckpt"), runtime.FileSystem(c.fs), runtime.PollInterval(time.Millisecond)}, more...)
}

// runAvailableNow runs w on ck with an AvailableNow trigger to its end and
// returns the query, or fails the test.
func runAvailableNow(t *testing.T, w kafka.Starter, ck *checkpoint, more ...runtime.Option) *runtime.Query {
	t.Helper()
	q, err := w.Start(testContext(t), ck.opts(append(more, runtime.WithTrigger(runtime.AvailableNow()))...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	return q
}

// inputRows adds up the rows the batches of a query read.
func inputRows(q *runtime.Query) int64 {
	var n int64
	for _, p := range q.RecentProgress() {
		n += p.NumInputRows
	}
	return n
}

// clicks makes a deterministic input: users clicking at increasing times.
func clicks(n int, seed uint64) []fixtures.Click {
	r := rand.New(rand.NewPCG(seed, seed))
	users := []string{"ann", "bob", "cy", "dee", "eve", "fay", "gus"}
	base := time.Unix(1_700_000_000, 0).UTC()
	out := make([]fixtures.Click, n)
	for i := range out {
		out[i] = fixtures.Click{User: users[r.IntN(len(users))], Time: base.Add(time.Duration(i) * time.Second), Page: fmt.Sprint("p", r.IntN(4))}
	}
	return out
}

// userPartition is where a test puts a user's clicks: one partition per
// user, so that a user's clicks are read in the order produced.
func userPartition(user string, partitions int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(user))
	return int32(h.Sum32() % uint32(partitions))
}

// clickRecords makes records of clicks, as JSON, keyed and partitioned
// by user, stamped with the click's time.
func clickRecords(t *testing.T, topic string, partitions int32, in []fixtures.Click) []*kgo.Record {
	t.Helper()
	out := make([]*kgo.Record, len(in))
	for i := range in {
		value, err := in[i].MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = &kgo.Record{Topic: topic, Partition: userPartition(in[i].User, partitions),
			Key: []byte(in[i].User), Value: value, Timestamp: in[i].Time}
	}
	return out
}

// countClicks counts per user: the stateful function of the tests.
func countClicks(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
	c, _ := state.Get()
	for r := range rows {
		if c.Count == 0 {
			c.First = r.Time
		}
		c.Count++
		c.Last = r.Time
	}
	state.Update(c)
	return fixtures.UserCount{User: user, Count: c.Count, First: c.First, Last: c.Last}, nil
}

// expectedCounts is the independent answer: a plain loop.
func expectedCounts(in []fixtures.Click) map[string]fixtures.UserCount {
	out := map[string]fixtures.UserCount{}
	for _, c := range in {
		u := out[c.User]
		if u.Count == 0 {
			u.User, u.First = c.User, c.Time
		}
		u.Count++
		u.Last = c.Time
		out[c.User] = u
	}
	return out
}

func sameCounts(t *testing.T, got, want map[string]fixtures.UserCount) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d users, want %d: %v", len(got), len(want), got)
	}
	for u, w := range want {
		g := got[u]
		if g.Count != w.Count || !g.First.Equal(w.First) || !g.Last.Equal(w.Last) {
			t.Fatalf("user %s: got %+v, want %+v", u, g, w)
		}
	}
}

// stopAfter is a listener that cancels a query's context after its n-th
// batch.
type stopAfter struct {
	n      int
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   int
}

func (s *stopAfter) OnQueryProgress(runtime.QueryProgress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen++; s.seen == s.n {
		s.cancel()
	}
}

// signalSink hands on each batch to a sink and signals that it wrote.
type signalSink[T any] struct {
	typed.Sink[T]
	wrote chan struct{}
}

func newSignalSink[T any](inner typed.Sink[T]) *signalSink[T] {
	return &signalSink[T]{Sink: inner, wrote: make(chan struct{}, 1)}
}

func (s *signalSink[T]) Write(ctx context.Context, id int64, rows []T) error {
	err := s.Sink.Write(ctx, id, rows)
	select {
	case s.wrote <- struct{}{}:
	default:
	}
	return err
}

// waitFor waits until done returns true, checking after each write of s.
func (s *signalSink[T]) waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	ctx := testContext(t)
	for !done() {
		select {
		case <-s.wrote:
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}
