package kafka_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// eosRun is the count per user of TestCountPerUserThroughKafka committed
// through exactly-once transactions: clicks from a three-partition topic,
// counts to a two-partition topic, the changelog in a third.
type eosRun struct {
	cluster *kafka.EmbeddedCluster
	conn    kafka.Connection
	adm     *kadm.Client
	src     *kafka.TopicSource
}

func newEOSRun(t *testing.T) *eosRun {
	cluster, err := kafka.Embedded(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Close)
	conn := cluster.Connection()
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	adm := kadm.NewClient(client)
	createTopic(t, adm, "clicks", 3)
	createTopic(t, adm, "counts", 2)
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"},
		StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 40})
	t.Cleanup(src.Close)
	return &eosRun{cluster: cluster, conn: conn, adm: adm, src: src}
}

// transactions returns transactions of the query, closed with the test:
// each call stands for a process of its own, with the same
// transactional ID.
func (r *eosRun) transactions(t *testing.T) *kafka.Transactions {
	eos := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog"})
	t.Cleanup(eos.Close)
	return eos
}

// sink returns the Kafka sink of counts, in the transactions eos; wrap
// may wrap it (to inject a fault).
func (r *eosRun) pipeline(t *testing.T, eos *kafka.Transactions, wrap func(typed.Sink[fixtures.UserCount]) typed.Sink[fixtures.UserCount]) *typed.Writer[fixtures.UserCount] {
	sink := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: r.conn, Topic: "counts",
		Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }, Transactions: eos})
	t.Cleanup(sink.Close)
	var s typed.Sink[fixtures.UserCount] = sink
	if wrap != nil {
		s = wrap(s)
	}
	byUser := typed.GroupByKey(typed.From[fixtures.Click](r.src), func(c *fixtures.Click) string { return c.User })
	return typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks), s)
}

// counts reads the output topic with the isolation level given: each
// user's counts in the order written.
func (r *eosRun) counts(t *testing.T, isolation kgo.IsolationLevel) map[string][]int64 {
	t.Helper()
	return userCounts(t, r.conn, r.adm, isolation)
}

// userCounts reads the topic "counts" with the isolation level given:
// each user's counts in the order written.
func userCounts(t *testing.T, conn kafka.Connection, adm *kadm.Client, isolation kgo.IsolationLevel) map[string][]int64 {
	t.Helper()
	out := map[string][]int64{}
	for _, rec := range consumeWith(t, conn, adm, "counts", isolation) {
		var u fixtures.UserCount
		if err := u.UnmarshalJSON(rec.Value); err != nil {
			t.Fatalf("output %s/%d@%d: %v", rec.Topic, rec.Partition, rec.Offset, err)
		}
		out[u.User] = append(out[u.User], u.Count) // a user's updates are in one partition, in order
	}
	return out
}

// onceEach checks that each user's counts, as a read_committed consumer
// sees them, rise at every update (a batch written twice would repeat
// one) and end at the plain loop's count over in.
func onceEach(t *testing.T, got map[string][]int64, in []fixtures.Click) {
	t.Helper()
	want := expectedCounts(in)
	if len(got) != len(want) {
		t.Fatalf("counts of %d users, want %d", len(got), len(want))
	}
	for user, w := range want {
		counts := got[user]
		for i := 1; i < len(counts); i++ {
			if counts[i] <= counts[i-1] {
				t.Fatalf("user %s: counts %v: update %d repeats or goes back (a batch seen twice)", user, counts, i)
			}
		}
		if len(counts) == 0 || counts[len(counts)-1] != w.Count {
			t.Fatalf("user %s: counts %v, want them to end at %d", user, counts, w.Count)
		}
	}
}

// repeats says whether some user's counts repeat one.
func repeats(counts map[string][]int64) bool {
	for _, cs := range counts {
		for i := 1; i < len(cs); i++ {
			if cs[i] <= cs[i-1] {
				return true
			}
		}
	}
	return false
}

// TestExactlyOnceAbortsAFailedBatch fails the query after the sink wrote
// batch 2 in its transaction, before the commit, and starts it again: a
// read_committed reader sees every batch once, while a read_uncommitted
// reader also sees the aborted first write of batch 2.
func TestExactlyOnceAbortsAFailedBatch(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(300, 3)
	produce(t, r.conn, clickRecords(t, "clicks", 3, in)...)
	eos := r.transactions(t)
	faulty := &failOnce[fixtures.UserCount]{batch: 2}
	wrap := func(s typed.Sink[fixtures.UserCount]) typed.Sink[fixtures.UserCount] { faulty.Sink = s; return faulty }
	ck := newCheckpoint()

	q, err := r.pipeline(t, eos, wrap).Start(testContext(t), ck.opts(eos.Option(), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); !errors.Is(err, errInjected) {
		t.Fatalf("the first run ended with %v, want the injected fault", err)
	}
	runAvailableNow(t, r.pipeline(t, eos, wrap), ck, eos.Option())

	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
	if !repeats(r.counts(t, kgo.ReadUncommitted())) {
		t.Fatal("a read_uncommitted reader sees no batch twice: the failed batch wrote nothing, and this test tests nothing")
	}
}

// TestExactlyOnceCommitFailure fails the request that commits batch 2's
// transaction: the transaction is aborted, the query ends with the error,
// and a start on the same checkpoint runs the batch again, seen once.
func TestExactlyOnceCommitFailure(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(300, 8)
	produce(t, r.conn, clickRecords(t, "clicks", 3, in)...)
	eos := r.transactions(t)
	var ends atomic.Int64
	var armed atomic.Bool
	armed.Store(true)
	fake := kafka.FakeCluster(r.cluster)
	fake.ControlKey(int16(kmsg.EndTxn), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kreq.(*kmsg.EndTxnRequest)
		// Commits of batches 0 and 1 pass; the third commit fails.
		if !armed.Load() || !req.Commit || ends.Add(1) != 3 {
			return nil, nil, false
		}
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ErrorCode = kerr.InvalidTxnState.Code
		return resp, nil, true
	})
	ck := newCheckpoint()
	q, err := r.pipeline(t, eos, nil).Start(testContext(t), ck.opts(eos.Option(), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("the first run ended with %v, want the commit's error", err)
	}
	if n := len(q.RecentProgress()); n != 2 {
		t.Fatalf("the first run committed %d batches, want 2", n)
	}
	armed.Store(false)
	runAvailableNow(t, r.pipeline(t, eos, nil), ck, eos.Option())
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
	if !repeats(r.counts(t, kgo.ReadUncommitted())) {
		t.Fatal("a read_uncommitted reader sees no batch twice: the failed commit's batch wrote nothing, and this test tests nothing")
	}
}

// stallSink holds the write of one batch, after the inner sink wrote it,
// until released: a process stalled (a long pause, a partition from the
// cluster) in the middle of its transaction.
type stallSink[T any] struct {
	typed.Sink[T]
	batch            int64
	reached, release chan struct{}
	// before stalls before the batch's rows are written (before its
	// transaction has a record).
	before bool
}

func (s *stallSink[T]) Write(ctx context.Context, id int64, rows []T) error {
	if !s.before {
		if err := s.Sink.Write(ctx, id, rows); err != nil {
			return err
		}
	}
	if id == s.batch {
		close(s.reached)
		select {
		case <-s.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if s.before {
		return s.Sink.Write(ctx, id, rows)
	}
	return nil
}

// TestExactlyOnceFencesAStalledProcess stalls one process in the middle
// of batch 2's transaction, and starts the same query in a second
// process with a new disk (the changelog restores it). The stalled one
// goes on as soon as the second has restored, before the second's first
// batch: its commit fails, saying it was fenced, since the second claimed
// the transactional ID before it read the changelog (had the first
// committed, the second would run batch 2 again on the state before it).
// Each batch is seen once.
func TestExactlyOnceFencesAStalledProcess(t *testing.T) {
	fencesAStalledProcess(t, 2, false)
}

// TestExactlyOnceFencesAProcessStalledBeforeItsFirstWrite: as
// TestExactlyOnceFencesAStalledProcess, but the first process stalls in
// its first batch before it has written anything, so that its producer
// has not yet begun a transaction. The second process's claim of the
// transactional ID must still fence it: had the first process's producer
// claimed the ID again at its first write, it would commit batch 0, and
// the second, restored before that commit, would write batch 0 again.
func TestExactlyOnceFencesAProcessStalledBeforeItsFirstWrite(t *testing.T) {
	fencesAStalledProcess(t, 0, true)
}

// fencesAStalledProcess stalls a first process in batch (before its
// rows are written, or after), starts a second process on a new disk,
// and releases the first once the second has restored: the first ends
// fenced, the second begins at batch, and each batch is seen once.
func fencesAStalledProcess(t *testing.T, batch int64, before bool) {
	r := newEOSRun(t)
	in := clicks(300, 4)
	produce(t, r.conn, clickRecords(t, "clicks", 3, in)...)

	first := r.transactions(t)
	stall := &stallSink[fixtures.UserCount]{batch: batch, before: before, reached: make(chan struct{}), release: make(chan struct{})}
	wrap := func(s typed.Sink[fixtures.UserCount]) typed.Sink[fixtures.UserCount] { stall.Sink = s; return stall }
	q1, err := r.pipeline(t, first, wrap).Start(testContext(t), newCheckpoint().opts(first.Option(), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-stall.reached:
	case <-testContext(t).Done():
		t.Fatalf("the first process never reached batch %d", batch)
	}

	second := r.transactions(t)
	resume := &resumeOnStart{release: stall.release, stalled: q1}
	q2 := runAvailableNow(t, r.pipeline(t, second, nil), newCheckpoint(), second.Option(), runtime.Listener(resume))
	if got := q2.RecentProgress()[0].BatchID; got != batch {
		t.Fatalf("the second process began at batch %d, want %d: the changelog held the batches before it", got, batch)
	}
	if resume.err == nil || !strings.Contains(resume.err.Error(), "fenced") {
		t.Fatalf("the stalled process ended with %v, want an error saying it was fenced", resume.err)
	}
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// resumeOnStart releases a stalled query when its listener's query has
// started (its restore done, its first batch not begun), and waits for
// the stalled one to end.
type resumeOnStart struct {
	release chan struct{}
	stalled *runtime.Query
	err     error
}

func (r *resumeOnStart) OnQueryStarted(runtime.QueryStarted) {
	close(r.release)
	r.err = r.stalled.AwaitTermination()
}

// copyFS copies the files under dir of from to to.
func copyFS(t *testing.T, from, to vfs.FS, dir string) {
	t.Helper()
	if err := to.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := from.List(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		path := filepath.Join(dir, name)
		info, err := from.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			copyFS(t, from, to, path)
			continue
		}
		if err := vfs.CopyAcrossFS(from, path, to, path); err != nil {
			t.Fatal(err)
		}
	}
}

// TestExactlyOnceCheckpointBehindKafka starts the query on a copy of its
// checkpoint taken before its last run (as a process that died after its
// transaction committed and before its local commit leaves it): the
// start restores the batches Kafka committed from the changelog, and
// does not run them again.
func TestExactlyOnceCheckpointBehindKafka(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(450, 5)
	eos := r.transactions(t)
	ck := newCheckpoint()
	var lastBatch int64
	run := func(ck *checkpoint, part []fixtures.Click) {
		t.Helper()
		produce(t, r.conn, clickRecords(t, "clicks", 3, part)...)
		q := runAvailableNow(t, r.pipeline(t, eos, nil), ck, eos.Option())
		progress := q.RecentProgress()
		var rows int64
		for _, p := range progress {
			rows += p.NumInputRows
		}
		if rows != int64(len(part)) || progress[0].BatchID != lastBatch+1 {
			t.Fatalf("a run read %d rows from batch %d, want the %d new rows from batch %d", rows, progress[0].BatchID, len(part), lastBatch+1)
		}
		lastBatch = progress[len(progress)-1].BatchID
	}
	lastBatch = -1
	run(ck, in[:150])
	behind := newCheckpoint()
	copyFS(t, ck.fs, behind.fs, "ckpt")
	run(ck, in[150:300])
	run(behind, in[300:])
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// TestExactlyOnceSinkNeedsItsQuery: a sink in transactions that no
// running query commits fails its write saying so, rather than leave a
// transaction open that nothing commits.
func TestExactlyOnceSinkNeedsItsQuery(t *testing.T) {
	r := newEOSRun(t)
	produce(t, r.conn, clickRecords(t, "clicks", 3, clicks(10, 6))...)
	eos := r.transactions(t)
	q, err := r.pipeline(t, eos, nil).Start(testContext(t), newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	err = q.AwaitTermination()
	if err == nil || !strings.Contains(err.Error(), "Option") {
		t.Fatalf("a query without the transactions' Option ended with %v, want an error naming Option", err)
	}
	if got := r.counts(t, kgo.ReadUncommitted()); len(got) != 0 {
		t.Fatalf("the sink wrote %v", got)
	}
}

// TestExactlyOnceDeadLetters fails a batch after its dead letters were
// written in its transaction: a read_committed reader of the dead-letter
// topic sees each bad record once, after the batch is run again.
func TestExactlyOnceDeadLetters(t *testing.T) {
	r := newEOSRun(t)
	createTopic(t, r.adm, "bad", 1)
	in := clicks(120, 7)
	records := clickRecords(t, "clicks", 3, in)
	garbage := []string{"{not json", "[1,2", "\"x\""}
	for i, g := range garbage {
		records = slices.Insert(records, 20+30*i, &kgo.Record{Topic: "clicks", Partition: int32(i), Value: []byte(g)})
	}
	produce(t, r.conn, records...)
	eos := r.transactions(t)
	dlq := &failingLetters{DeadLetterWriter: kafka.DeadLetterTopic("bad", kafka.DeadLetterOptions{Connection: r.conn, Transactions: eos})}
	defer dlq.Close()
	ck := newCheckpoint()
	q, err := r.pipeline(t, eos, nil).Start(testContext(t), ck.opts(eos.Option(), runtime.DeadLetters(dlq), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); !errors.Is(err, errInjected) {
		t.Fatalf("the first run ended with %v, want the injected fault", err)
	}
	runAvailableNow(t, r.pipeline(t, eos, nil), ck, eos.Option(), runtime.DeadLetters(dlq))

	var got []string
	for _, rec := range consumeWith(t, r.conn, r.adm, "bad", kgo.ReadCommitted()) {
		got = append(got, string(rec.Value))
	}
	slices.Sort(got)
	slices.Sort(garbage)
	if !slices.Equal(got, garbage) {
		t.Fatalf("the dead-letter topic holds %q for read_committed readers, want each bad record once: %q", got, garbage)
	}
	if n := len(consumeWith(t, r.conn, r.adm, "bad", kgo.ReadUncommitted())); n <= len(garbage) {
		t.Fatalf("a read_uncommitted reader sees %d dead letters: the failed first run wrote none, and this test tests nothing", n)
	}
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// failingLetters fails its first write of dead letters after writing
// them.
type failingLetters struct {
	*kafka.DeadLetterWriter
	failed bool
}

func (f *failingLetters) WriteDeadLetters(ctx context.Context, batchID int64, letters []runtime.DeadLetter) error {
	if err := f.DeadLetterWriter.WriteDeadLetters(ctx, batchID, letters); err != nil || f.failed {
		return err
	}
	f.failed = true
	return errInjected
}

// stopAtRows stops a query (cancels its context) once its batches have
// read rows rows, calling before first.
type stopAtRows struct {
	rows   int64
	before func()
	cancel context.CancelFunc
	mu     sync.Mutex
	read   int64
}

func (s *stopAtRows) OnQueryProgress(p runtime.QueryProgress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.read += p.NumInputRows; s.read >= s.rows {
		if s.before != nil {
			s.before()
		}
		s.cancel()
	}
}

// TestExactlyOnceAsyncProgress commits the transaction at most once
// every 20 seconds (AsyncProgress), longer than the test: a query stopped
// commits what it ran as it stops;
// a process that dies leaves its batches uncommitted in Kafka and its
// checkpoint ahead of the changelog, and the next start rebuilds the
// checkpoint from the changelog and runs those batches again, so the
// output (read_committed) and the state are those of one pass over the
// input.
func TestExactlyOnceAsyncProgress(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(450, 9)
	opts := kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog", AsyncProgress: true, AsyncProgressInterval: 20 * time.Second}
	ck := newCheckpoint()
	// run starts a process on the checkpoint and stops it once it read
	// rows rows; with die, the process dies then.
	run := func(rows int, die bool) {
		t.Helper()
		eos := kafka.ExactlyOnce(opts)
		defer eos.Close()
		ctx, cancel := context.WithTimeout(testContext(t), 30*time.Second)
		defer cancel()
		stop := &stopAtRows{rows: int64(rows), cancel: cancel}
		if die {
			stop.before = func() { kafka.AbandonTransactions(eos) }
		}
		q, err := r.pipeline(t, eos, nil).Start(ctx, ck.opts(eos.Option(), runtime.Listener(stop))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		if ctx.Err() == context.DeadlineExceeded {
			t.Fatalf("the query read %d rows in 30 s, want %d", stop.read, rows)
		}
	}
	produce(t, r.conn, clickRecords(t, "clicks", 3, in[:150])...)
	run(150, false)
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in[:150])

	produce(t, r.conn, clickRecords(t, "clicks", 3, in[150:300])...)
	run(150, true)
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in[:150]) // nothing of the second run committed
	// The third process reads the second's rows again, then the new ones.
	produce(t, r.conn, clickRecords(t, "clicks", 3, in[300:])...)
	run(300, false)
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// TestAsyncProgressRefused: AsyncProgress fails Start with a trigger that
// stops, and without ExactlyOnce.
func TestAsyncProgressRefused(t *testing.T) {
	r := newEOSRun(t)
	opts := kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog", AsyncProgress: true}
	eos := kafka.ExactlyOnce(opts)
	defer eos.Close()
	for _, trigger := range []runtime.Trigger{runtime.AvailableNow(), runtime.Once()} {
		_, err := r.pipeline(t, eos, nil).Start(testContext(t), newCheckpoint().opts(eos.Option(), runtime.WithTrigger(trigger))...)
		if err == nil || !strings.Contains(err.Error(), "AsyncProgress does not work with the "+trigger.String()) {
			t.Errorf("AsyncProgress with %v: Start gave %v", trigger, err)
		}
	}
	_, err := r.pipeline(t, nil, nil).Start(testContext(t), newCheckpoint().opts(kafka.Changelog(opts))...)
	if err == nil || !strings.Contains(err.Error(), "AsyncProgress needs ExactlyOnce") {
		t.Errorf("AsyncProgress without ExactlyOnce: Start gave %v", err)
	}
}

// TestExactlyOnceAsyncProgressCommitsWhileIdle: with AsyncProgress, the
// batches of a query that has read all its input and waits for more are
// committed once the interval has passed, without another batch: a
// read_committed reader sees them while the query still runs. The local
// checkpoint records that commit: a start on it reads nothing from the
// changelog (it rebuilt itself from the whole topic, as a checkpoint ahead
// of it).
func TestExactlyOnceAsyncProgressCommitsWhileIdle(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(150, 14)
	produce(t, r.conn, clickRecords(t, "clicks", 3, in)...)
	eos := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog", AsyncProgress: true, AsyncProgressInterval: 50 * time.Millisecond})
	defer eos.Close()
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	ck := newCheckpoint()
	q, err := r.pipeline(t, eos, nil).Start(ctx, ck.opts(eos.Option())...)
	if err != nil {
		t.Fatal(err)
	}
	want := expectedCounts(in)
	for {
		got := r.counts(t, kgo.ReadCommitted())
		done := len(got) == len(want)
		for user, w := range want {
			if c := got[user]; len(c) == 0 || c[len(c)-1] != w.Count {
				done = false
			}
		}
		if done {
			onceEach(t, got, in)
			break
		}
		select {
		case <-q.Done():
			t.Fatalf("the query ended: %v", q.Err())
		case <-ctx.Done():
			t.Fatalf("the idle query's batches were never committed: %v", ctx.Err())
		case <-time.After(10 * time.Millisecond): // the next look at the topic
		}
	}
	cancel()
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(testContext(t))
	defer cancel()
	if q, err = r.pipeline(t, eos, nil).Start(ctx, ck.opts(eos.Option())...); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	if n := kafka.TransactionsRestoredRecords(eos); n != 0 {
		t.Errorf("the start after the idle commit restored %d records from the changelog, want none", n)
	}
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// runProcess starts r's pipeline on eos and ck, calls during, and stops
// it, as a process that dies when die is set (its open transaction
// neither committed nor aborted); it returns the query's last batch id.
func (r *eosRun) runProcess(t *testing.T, eos *kafka.Transactions, ck *checkpoint, die bool, during func(q *runtime.Query)) int64 {
	t.Helper()
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	q, err := r.pipeline(t, eos, nil).Start(ctx, ck.opts(eos.Option())...)
	if err != nil {
		t.Fatal(err)
	}
	during(q)
	if die {
		kafka.AbandonTransactions(eos)
	}
	cancel()
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	p, _ := q.LastProgress()
	return p.BatchID
}

// awaitQuery looks every few milliseconds until done holds, failing the
// test if q ends first.
func awaitQuery(t *testing.T, q *runtime.Query, what string, done func() bool) {
	t.Helper()
	ctx := testContext(t)
	for !done() {
		select {
		case <-q.Done():
			t.Fatalf("%s: the query ended: %v", what, q.Err())
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(10 * time.Millisecond): // the next look
		}
	}
}

// readAll says whether q has read n rows since it started.
func readAll(q *runtime.Query, n int) func() bool {
	return func() bool {
		var read int64
		for _, p := range q.RecentProgress() {
			read += p.NumInputRows
		}
		return read == int64(n)
	}
}

// TestExactlyOnceAsyncProgressIdleCommitThenDeath: with AsyncProgress, a
// process that dies after its last batches were committed to Kafka while
// it was idle (no batch recorded that commit in the checkpoint) starts
// again by reading only the changelog's tail after the offsets its
// checkpoint recorded, not by rebuilding the checkpoint from the whole
// topic, and goes on with every count once.
func TestExactlyOnceAsyncProgressIdleCommitThenDeath(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(200, 16)
	first, second := in[:120], in[120:]
	eos := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog", AsyncProgress: true, AsyncProgressInterval: 50 * time.Millisecond})
	defer eos.Close()
	ck := newCheckpoint()
	// The first rows, and a stop that records their commit.
	r.runProcess(t, eos, ck, false, func(q *runtime.Query) {
		produce(t, r.conn, clickRecords(t, "clicks", 3, first)...)
		awaitQuery(t, q, "the first rows", readAll(q, len(first)))
	})
	// The second rows' batches commit locally, not to Kafka; then, with
	// no batch to come, the commit while idle commits them, and the
	// process dies.
	r.runProcess(t, eos, ck, true, func(q *runtime.Query) {
		kafka.HoldCommits(eos)
		produce(t, r.conn, clickRecords(t, "clicks", 3, second)...)
		awaitQuery(t, q, "the second rows", readAll(q, len(second)))
		if sameLast(r.counts(t, kgo.ReadCommitted()), in) {
			t.Fatal("the second rows were committed to Kafka while commits were held")
		}
		kafka.CommitWhenIdle(eos)
		awaitQuery(t, q, "the commit while idle", func() bool { return sameLast(r.counts(t, kgo.ReadCommitted()), in) })
	})
	topic := len(consumeWith(t, r.conn, r.adm, "counts-changelog", kgo.ReadCommitted()))
	r.runProcess(t, eos, ck, false, func(*runtime.Query) {})
	if n := kafka.TransactionsRestoredRecords(eos); n == 0 || n >= int64(topic) {
		t.Errorf("the start after the death restored %d records from the changelog, want the tail after the checkpoint's record: more than none, fewer than the topic's %d", n, topic)
	}
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// TestExactlyOnceAsyncProgressAbortedThenReplaced: with AsyncProgress, a
// process whose last batches were never committed to Kafka dies; another
// process, on a checkpoint of its own, runs the same input again in
// batches of the same ids and commits them. When the first process
// starts again, the topic's tail ends with a batch of its checkpoint's
// id, but another's: it rebuilds its checkpoint from the whole topic,
// rather than patch its own batches with the other's records.
func TestExactlyOnceAsyncProgressAbortedThenReplaced(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(200, 17)
	first, second := in[:120], in[120:]
	opts := kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog", AsyncProgress: true, AsyncProgressInterval: time.Second}
	eos := kafka.ExactlyOnce(opts)
	defer eos.Close()
	ck := newCheckpoint()
	produce(t, r.conn, clickRecords(t, "clicks", 3, first)...)
	r.runProcess(t, eos, ck, false, func(q *runtime.Query) { awaitQuery(t, q, "the first rows", readAll(q, len(first))) })
	// The second rows' batches commit locally only; the process dies.
	produce(t, r.conn, clickRecords(t, "clicks", 3, second)...)
	died := r.runProcess(t, eos, ck, true, func(q *runtime.Query) {
		kafka.HoldCommits(eos)
		awaitQuery(t, q, "the second rows", readAll(q, len(second)))
	})
	// Another process, on a checkpoint of its own restored from the
	// topic, runs them again and commits.
	other := kafka.ExactlyOnce(opts)
	defer other.Close()
	replaced := r.runProcess(t, other, newCheckpoint(), false, func(q *runtime.Query) {
		awaitQuery(t, q, "the second rows again", readAll(q, len(second)))
	})
	if replaced != died {
		t.Fatalf("the other process's last batch is %d, the dead one's %d: the test needs them the same", replaced, died)
	}
	topic := len(consumeWith(t, r.conn, r.adm, "counts-changelog", kgo.ReadCommitted()))
	r.runProcess(t, eos, ck, false, func(*runtime.Query) {})
	if n := kafka.TransactionsRestoredRecords(eos); n != int64(topic) {
		t.Errorf("the start on the checkpoint whose batches were replaced restored %d records, want the whole topic's %d", n, topic)
	}
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// TestExactlyOnceAsyncProgressAfterSyncRuns: a checkpoint that ran
// without AsyncProgress (its record of the topic level with it) runs
// with it; its batches commit locally only, and the process dies. Its
// next start runs them again (the record the first batch with
// AsyncProgress wrote says the topic holds none of them), rather than
// take the checkpoint for level with the topic: every count once.
func TestExactlyOnceAsyncProgressAfterSyncRuns(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(200, 18)
	first, second := in[:120], in[120:]
	sync := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog"})
	defer sync.Close()
	ck := newCheckpoint()
	produce(t, r.conn, clickRecords(t, "clicks", 3, first)...)
	r.runProcess(t, sync, ck, false, func(q *runtime.Query) { awaitQuery(t, q, "the first rows", readAll(q, len(first))) })
	r.runProcess(t, sync, ck, false, func(*runtime.Query) {}) // a start with nothing to read
	async := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: r.conn, Topic: "counts-changelog", AsyncProgress: true, AsyncProgressInterval: time.Second})
	defer async.Close()
	r.runProcess(t, async, ck, true, func(q *runtime.Query) {
		kafka.HoldCommits(async)
		produce(t, r.conn, clickRecords(t, "clicks", 3, second)...)
		awaitQuery(t, q, "the second rows", readAll(q, len(second)))
	})
	kafka.CommitWhenIdle(async)
	r.runProcess(t, async, ck, false, func(q *runtime.Query) {
		awaitQuery(t, q, "the second rows again", func() bool { return sameLast(r.counts(t, kgo.ReadCommitted()), in) })
	})
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// sameLast says whether each user's last count in got is the plain
// loop's over in.
func sameLast(got map[string][]int64, in []fixtures.Click) bool {
	want := expectedCounts(in)
	if len(got) != len(want) {
		return false
	}
	for user, w := range want {
		if c := got[user]; len(c) == 0 || c[len(c)-1] != w.Count {
			return false
		}
	}
	return true
}

// TestExactlyOnceServesOneQuery: a second query started on transactions
// that a running query holds is refused, and the first goes on
// committing.
func TestExactlyOnceServesOneQuery(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(120, 15)
	eos := r.transactions(t)
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()
	stop := &stopAtRows{rows: int64(len(in)), cancel: cancel}
	first, err := r.pipeline(t, eos, nil).Start(ctx, newCheckpoint().opts(eos.Option(), runtime.Listener(stop))...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = r.pipeline(t, eos, nil).Start(testContext(t), newCheckpoint().opts(eos.Option(), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err == nil || !strings.Contains(err.Error(), "another query is running on them") {
		t.Fatalf("a second query on the transactions: Start gave %v", err)
	}
	produce(t, r.conn, clickRecords(t, "clicks", 3, in)...)
	if err := first.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	onceEach(t, r.counts(t, kgo.ReadCommitted()), in)
}

// TestExactlyOnceWriteAll: one query writes each user's count to the
// topic "counts" and every count that is a multiple of 5 to the topic
// "fives", both in the batch's transaction. The second sink fails batch
// 2 after the first has written it: the transaction is aborted, so the
// run again writes batch 2 once to each topic, as a read_committed
// reader sees (a read_uncommitted one sees the first sink's aborted
// write too), and "fives" holds exactly the multiples of 5 among the
// counts committed, user by user, in order.
func TestExactlyOnceWriteAll(t *testing.T) {
	r := newEOSRun(t)
	createTopic(t, r.adm, "fives", 2)
	in := clicks(300, 5)
	produce(t, r.conn, clickRecords(t, "clicks", 3, in)...)
	faulty := &failOnce[fixtures.UserCount]{batch: 2}
	pipeline := func(eos *kafka.Transactions) *typed.Writers {
		sink := func(topic string) typed.Sink[fixtures.UserCount] {
			s := kafka.Sink[fixtures.UserCount](kafka.SinkOptions[fixtures.UserCount]{Connection: r.conn, Topic: topic,
				Key: func(u *fixtures.UserCount) []byte { return []byte(u.User) }, Transactions: eos})
			t.Cleanup(s.Close)
			return s
		}
		faulty.Sink = sink("fives")
		byUser := typed.GroupByKey(typed.From[fixtures.Click](r.src), func(c *fixtures.Click) string { return c.User })
		counts := typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks)
		return typed.WriteAll(typed.WriteTo(counts, sink("counts")),
			typed.WriteTo(typed.Filter(counts, func(u *fixtures.UserCount) bool { return u.Count%5 == 0 }), faulty))
	}
	ck := newCheckpoint()
	eos := r.transactions(t)
	q, err := pipeline(eos).Start(testContext(t), ck.opts(eos.Option(), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); !errors.Is(err, errInjected) {
		t.Fatalf("the first run ended with %v, want the injected fault", err)
	}
	eos = r.transactions(t)
	runAvailableNow(t, pipeline(eos), ck, eos.Option())

	counts := r.counts(t, kgo.ReadCommitted())
	onceEach(t, counts, in)
	if !repeats(r.counts(t, kgo.ReadUncommitted())) {
		t.Fatal("a read_uncommitted reader sees no batch twice in counts: the first sink did not write batch 2 before the second failed, and this test tests nothing")
	}
	got := map[string][]int64{}
	for _, rec := range consumeWith(t, r.conn, r.adm, "fives", kgo.ReadCommitted()) {
		var u fixtures.UserCount
		if err := u.UnmarshalJSON(rec.Value); err != nil {
			t.Fatal(err)
		}
		got[u.User] = append(got[u.User], u.Count)
	}
	for user, cs := range counts {
		var want []int64
		for _, c := range cs {
			if c%5 == 0 {
				want = append(want, c)
			}
		}
		if !slices.Equal(got[user], want) {
			t.Fatalf("user %s: fives %v, want the multiples of 5 of the counts committed %v: %v", user, got[user], cs, want)
		}
	}
}

// TestExactlyOnceAsyncProgressRewindsFileSinks: with AsyncProgress, a
// process that dies between transaction commits has its checkpoint
// rebuilt from the changelog at the next start, behind the batches its
// files sink wrote; the start removes those files, and the batches run
// again (planned anew): each row is in the files once. (The files of the
// lost batches stayed beside the new ones: rewinding ran only with a
// SyncInterval.)
func TestExactlyOnceAsyncProgressRewindsFileSinks(t *testing.T) {
	r := newEOSRun(t)
	in := clicks(450, 9)
	dir := t.TempDir()
	opts := kafka.ChangelogOptions{Connection: r.conn, Topic: "clicks-changelog", AsyncProgress: true, AsyncProgressInterval: 20 * time.Second}
	ck := newCheckpoint()
	run := func(maxPerTrigger int64, rows int, die bool) {
		t.Helper()
		src := kafka.Source(kafka.Options{Connection: r.conn, Topics: []string{"clicks"},
			StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: maxPerTrigger})
		defer src.Close()
		eos := kafka.ExactlyOnce(opts)
		defer eos.Close()
		ctx, cancel := context.WithCancel(testContext(t))
		defer cancel()
		stop := &stopAtRows{rows: int64(rows), cancel: cancel}
		if die {
			stop.before = func() { kafka.AbandonTransactions(eos) }
		}
		q, err := typed.WriteTo(typed.From[fixtures.Click](src), typed.FilesSink[fixtures.Click](dir)).Start(ctx, ck.opts(eos.Option(), runtime.Listener(stop))...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
	}
	produce(t, r.conn, clickRecords(t, "clicks", 3, in[:150])...)
	run(40, 150, false) // batches 0-3, committed to Kafka as the query stops
	produce(t, r.conn, clickRecords(t, "clicks", 3, in[150:300])...)
	run(40, 150, true) // batches 4-7 in the files; Kafka never commits them
	produce(t, r.conn, clickRecords(t, "clicks", 3, in[300:])...)
	run(0, 1, false) // rebuilt to batch 3; batch 4 planned anew: in[150:]

	var got []string
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			got = append(got, line)
		}
	}
	var want []string
	for _, c := range in {
		b, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, string(b))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("the files hold %d rows, want each of the %d clicks once", len(got), len(want))
	}
}
