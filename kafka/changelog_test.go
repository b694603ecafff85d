package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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

// pagesOut is what pagesCounter emits for a user.
type pagesOut struct {
	User  string
	Count int64
	Pages []string
}

// countTTL is how long pagesCounter keeps a user's count after its last
// write.
const countTTL = time.Minute

// pagesCounter keeps per user a count with a time to live (countTTL), the
// pages visited since the last "clear" click (a list), and a processing
// time timer 30 seconds after the user's first click since the last one
// fired: state entries, an expiry index and timers.
//
// The second version (v2) deletes the list "pages" and keeps the pages in
// a new list "visits", which takes the id "pages" had in the checkpoint.
type pagesCounter struct {
	count *typed.ValueState[int64]
	pages *typed.ListState[string]
	h     *typed.Handle
	v2    bool
}

func (p *pagesCounter) Init(h *typed.Handle) error {
	p.h = h
	p.count = typed.NewValueState[int64](h, "count", typed.WithTTL(countTTL))
	if p.v2 {
		h.DeleteIfExists("pages")
		p.pages = typed.NewListState[string](h, "visits")
		return nil
	}
	p.pages = typed.NewListState[string](h, "pages")
	return nil
}

func (p *pagesCounter) HandleInputRows(ctx context.Context, user string, rows iter.Seq[fixtures.Click], tv typed.TimerValues, emit func(pagesOut)) error {
	n, _, err := p.count.Get(ctx)
	if err != nil {
		return err
	}
	for r := range rows {
		n++
		if r.Page == "clear" {
			err = p.pages.Clear(ctx)
		} else {
			err = p.pages.AppendValue(ctx, r.Page)
		}
		if err != nil {
			return err
		}
	}
	if err := p.count.Update(ctx, n); err != nil {
		return err
	}
	timers, err := p.h.ListTimers(ctx)
	if err != nil {
		return err
	}
	if len(timers) == 0 {
		if err := p.h.RegisterTimer(ctx, tv.CurrentProcessingTime().Add(30*time.Second)); err != nil {
			return err
		}
	}
	out := pagesOut{User: user, Count: n}
	list, err := p.pages.Get(ctx)
	if err != nil {
		return err
	}
	for page := range list {
		out.Pages = append(out.Pages, page)
	}
	emit(out)
	return nil
}

func (p *pagesCounter) HandleExpiredTimer(context.Context, string, typed.TimerValues, typed.ExpiredTimerInfo, func(pagesOut)) error {
	return nil
}

func (p *pagesCounter) Close() error { return nil }

// expectedPages is the independent answer for input read within countTTL
// of each user's previous click: a plain loop.
func expectedPages(in []fixtures.Click) map[string]pagesOut {
	out := map[string]pagesOut{}
	for _, c := range in {
		u := out[c.User]
		u.User = c.User
		u.Count++
		if c.Page == "clear" {
			u.Pages = nil
		} else {
			u.Pages = append(u.Pages, c.Page)
		}
		out[c.User] = u
	}
	return out
}

// pagesClicks is the input: clicks, some of them "clear".
func pagesClicks(n int, seed uint64) []fixtures.Click {
	in := clicks(n, seed)
	for i := range in {
		if i%9 == 4 {
			in[i].Page = "clear"
		}
	}
	return in
}

// pagesRun is one pipeline on its own input stream, clock, sink and
// checkpoint, run a phase at a time.
type pagesRun struct {
	stream *typed.MemoryStream[fixtures.Click]
	sink   *typed.MemorySink[pagesOut]
	clock  *runtime.ManualClock
	ck     *checkpoint
	w      *typed.Writer[pagesOut]
	more   []runtime.Option
	ids    []string
}

func newPagesRun(more ...runtime.Option) *pagesRun {
	r := &pagesRun{
		stream: typed.NewMemoryStream[fixtures.Click]("clicks", 25),
		sink:   typed.NewMemorySink[pagesOut](),
		clock:  runtime.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		ck:     newCheckpoint(),
		more:   more,
	}
	r.use(&pagesCounter{})
	return r
}

// use makes the pipeline run p.
func (r *pagesRun) use(p *pagesCounter) {
	byUser := typed.GroupByKey(typed.FromMemory(r.stream), func(c *fixtures.Click) string { return c.User })
	r.w = typed.WriteTo(typed.TransformWithState(byUser, p, typed.TimeModeProcessingTime, typed.Update), r.sink)
}

// phase adds rows, moves the clock on by d, and runs the query to the end
// of its input.
func (r *pagesRun) phase(t *testing.T, d time.Duration, rows ...fixtures.Click) error {
	t.Helper()
	r.stream.Add(rows...)
	r.clock.Advance(d)
	q, err := r.w.Start(testContext(t), r.ck.opts(append([]runtime.Option{runtime.WithManualClock(r.clock), runtime.WithTrigger(runtime.AvailableNow())}, r.more...)...)...)
	if err != nil {
		return err
	}
	r.ids = append(r.ids, q.ID())
	return q.AwaitTermination()
}

// loseDisk replaces the checkpoint's file system with an empty one.
func (r *pagesRun) loseDisk() { r.ck.fs = vfs.NewMem() }

// latest returns the last output row of each user.
func (r *pagesRun) latest() map[string]pagesOut {
	out := map[string]pagesOut{}
	for _, row := range r.sink.Rows() {
		out[row.User] = row
	}
	return out
}

// state returns the checkpoint's mirrored records but its metadata (which
// holds the query's id, made at its first start): progress, state,
// timers and expiry index.
func (r *pagesRun) state(t *testing.T) map[string]string {
	t.Helper()
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: r.ck.fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	out := map[string]string{}
	if err := s.Snapshot(func(key, value []byte) error {
		if key[0] != 0x01 {
			out[string(key)] = string(value)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func samePages(t *testing.T, what string, got, want map[string]pagesOut) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func sameState(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		var diff []string
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				diff = append(diff, fmt.Sprintf("%x: %q, want %q", k, g, v))
			}
		}
		for k, v := range got {
			if _, ok := want[k]; !ok {
				diff = append(diff, fmt.Sprintf("%x: %q, want none", k, v))
			}
		}
		slices.Sort(diff)
		t.Fatalf("%s: %d records, want %d; differences:\n  %q", what, len(got), len(want), diff)
	}
}

// fetchCounter counts the fetch requests the cluster serves.
func fetchCounter(cluster *kafka.EmbeddedCluster) *atomic.Int64 {
	var n atomic.Int64
	fake := kafka.FakeCluster(cluster)
	fake.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		n.Add(1)
		return nil, nil, false
	})
	return &n
}

// TestChangelogRestoresLostCheckpoint runs the pipeline with a changelog
// and, beside it, the same pipeline without one that never loses its
// checkpoint, phase by phase. The first loses its checkpoint directory
// after the first phase and after the second, and after a last phase in
// which the counts of the first users expire (the expiry index's range
// deletion): after each restore, its output and its state equal the
// other's, its query id is kept, and the last outputs equal a plain loop.
// A restore from a restored checkpoint changes nothing; a start on an
// intact checkpoint fetches nothing from the changelog.
func TestChangelogRestoresLostCheckpoint(t *testing.T) {
	cluster, err := kafka.Embedded(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	conn := cluster.Connection()
	fetches := fetchCounter(cluster)
	ref := newPagesRun()
	got := newPagesRun(kafka.Changelog(kafka.ChangelogOptions{Connection: conn, Topic: "pages-changelog"}))
	in := pagesClicks(300, 5)
	both := func(what string, d time.Duration, rows ...fixtures.Click) {
		t.Helper()
		if err := ref.phase(t, d, rows...); err != nil {
			t.Fatalf("%s, without the changelog: %v", what, err)
		}
		if err := got.phase(t, d, rows...); err != nil {
			t.Fatalf("%s, with the changelog: %v", what, err)
		}
		samePages(t, what+": output", got.latest(), ref.latest())
		sameState(t, what+": state", got.state(t), ref.state(t))
	}
	both("phase 1", time.Second, in[:100]...)
	got.loseDisk()
	both("phase 2, restored", time.Second, in[100:200]...)
	got.loseDisk()
	both("phase 3, restored", time.Second, in[200:]...)
	samePages(t, "after phase 3", got.latest(), expectedPages(in))

	// A start on the intact checkpoint reads nothing of the changelog.
	before := fetches.Load()
	both("a start on the intact checkpoint", time.Second)
	if n := fetches.Load() - before; n != 0 {
		t.Fatalf("a start on an intact checkpoint made %d fetch requests, want none", n)
	}
	// Restored twice, from a restored checkpoint: the same.
	want := ref.state(t)
	for i := range 2 {
		got.loseDisk()
		before := fetches.Load()
		if err := got.phase(t, 0); err != nil {
			t.Fatal(err)
		}
		if fetches.Load() == before {
			t.Fatalf("restore %d fetched nothing", i+1)
		}
		sameState(t, fmt.Sprintf("restore %d without new input", i+1), got.state(t), want)
	}

	// Ten minutes on, a new user's click: every other count expires.
	withCounts := len(want)
	both("the counts expire, restored", 10*time.Minute, fixtures.Click{User: "zed", Page: "p9"})
	got.loseDisk()
	both("after the expiry, restored", 0)
	if after := len(ref.state(t)); after >= withCounts {
		t.Fatalf("%d records after the expiry, %d before: nothing expired", after, withCounts)
	}
	for _, id := range got.ids {
		if id != got.ids[0] {
			t.Fatalf("the query's ids across restores: %v, want one", got.ids)
		}
	}
}

// TestChangelogProduceFailure fails the changelog's produce requests from
// the second on, in the second phase: the batch fails, the local
// checkpoint does not take it, and some of its records are in the topic
// without its progress. A restart on the checkpoint, and a restore of a
// lost one, both give the output and state of a run that never failed.
func TestChangelogProduceFailure(t *testing.T) {
	for _, lose := range []bool{false, true} {
		t.Run(fmt.Sprintf("lose the checkpoint %v", lose), func(t *testing.T) {
			cluster, err := kafka.Embedded(testContext(t))
			if err != nil {
				t.Fatal(err)
			}
			defer cluster.Close()
			conn := cluster.Connection()
			const topic = "pages-changelog"
			ref := newPagesRun()
			got := newPagesRun(kafka.Changelog(kafka.ChangelogOptions{Connection: conn, Topic: topic}))
			in := pagesClicks(200, 8)
			if err := ref.phase(t, time.Second, in[:100]...); err != nil {
				t.Fatal(err)
			}
			if err := got.phase(t, time.Second, in[:100]...); err != nil {
				t.Fatal(err)
			}
			committed := got.state(t)
			client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
			if err != nil {
				t.Fatal(err)
			}
			defer client.Close()
			adm := kadm.NewClient(client)
			endOf := func() int64 {
				ends, err := adm.ListEndOffsets(testContext(t), topic)
				if err != nil {
					t.Fatal(err)
				}
				o, _ := ends.Lookup(topic, 0)
				return o.Offset
			}
			endBefore := endOf()

			var produces atomic.Int64
			var armed atomic.Bool
			armed.Store(true)
			fake := kafka.FakeCluster(cluster)
			fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				fake.KeepControl()
				if !armed.Load() || produces.Add(1) == 1 {
					return nil, nil, false
				}
				return failedProduce(kreq.(*kmsg.ProduceRequest)), nil, true
			})
			// One batch: its state records go in, its progress fails.
			got.stream.Add(in[100:200]...)
			if err := got.phase(t, time.Second); err == nil || !errors.Is(err, kerr.InvalidRecord) {
				t.Fatalf("the query with a failing changelog ended with %v, want the produce's error", err)
			}
			armed.Store(false)
			if produces.Load() < 2 {
				t.Fatalf("%d produce requests: the failure was not injected", produces.Load())
			}
			sameState(t, "the checkpoint after the failed batch", got.state(t), committed)
			if endOf() == endBefore {
				t.Fatal("the failed batch left no record in the changelog: the test does not exercise the write-back")
			}

			if lose {
				got.loseDisk()
			}
			if err := got.phase(t, 0); err != nil {
				t.Fatalf("the restart: %v", err)
			}
			if err := ref.phase(t, time.Second, in[100:200]...); err != nil {
				t.Fatal(err)
			}
			samePages(t, "output", got.latest(), ref.latest())
			samePages(t, "output against a plain loop", got.latest(), expectedPages(in))
			sameState(t, "state", got.state(t), ref.state(t))
			// The topic alone gives the state back too.
			got.loseDisk()
			if err := got.phase(t, 0); err != nil {
				t.Fatal(err)
			}
			sameState(t, "state restored after the write-back", got.state(t), ref.state(t))
		})
	}
}

// TestChangelogRangeDeletions commits, through the changelog, batches
// that delete a key's entries, a variable and a partition with range
// deletions, and restores a new store from the topic: the deleted entries
// are absent, the others are there, as in the store that wrote them.
func TestChangelogRangeDeletions(t *testing.T) {
	conn, _ := newCluster(t)
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "ranges", Partitions: 2}
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := kafka.NewChangelog(opts, s)
	defer c.Close()
	if err := c.Restore(testContext(t)); err != nil {
		t.Fatal(err)
	}
	v0, v1 := runtime.Var{Variable: 0}, runtime.Var{Variable: 1}
	p1 := runtime.Var{Scope: runtime.Scope{Partition: 1}}
	steps := []func(b *runtime.StateBatch) error{
		func(b *runtime.StateBatch) error {
			for _, v := range []runtime.Var{v0, v1, p1} {
				for _, k := range []string{"a", "b", "c"} {
					for _, sfx := range []string{"", "x", "y"} {
						if err := b.Put(v, []byte(k), []byte(sfx), []byte(k+sfx)); err != nil {
							return err
						}
					}
				}
			}
			return b.RegisterTimer(p1.Scope, []byte("a"), time.Unix(100, 0))
		},
		func(b *runtime.StateBatch) error {
			if err := b.Put(v0, []byte("b"), []byte("z"), []byte("new")); err != nil {
				return err
			}
			return b.DeleteKey(v0, []byte("b")) // the committed entries and the batch's own
		},
		func(b *runtime.StateBatch) error { return b.DeleteVar(v1) },
		func(b *runtime.StateBatch) error {
			if err := b.DeletePartition(1); err != nil {
				return err
			}
			return b.Put(p1, []byte("d"), nil, []byte("after")) // written after the deletion: kept
		},
	}
	for i, step := range steps {
		b := s.NewBatch()
		if err := step(b); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(b, runtime.Progress{BatchID: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	want := snapshotOf(t, s)
	for _, k := range []string{"a", "c"} {
		if !hasEntry(want, k) {
			t.Fatalf("the store lost key %q, which was not deleted", k)
		}
	}
	if len(want) != 1+2*3+1 { // progress, v0's a and c, partition 1's d
		t.Fatalf("the store holds %d records after the deletions, want 8: %q", len(want), slices.Sorted(maps.Keys(want)))
	}

	restored, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Close()
	rc := kafka.NewChangelog(opts, restored)
	defer rc.Close()
	if err := rc.Restore(testContext(t)); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored", snapshotOf(t, restored), want)
	n := kafka.RestoredRecords(rc)
	if n == 0 {
		t.Fatal("the restore applied no record")
	}
	// Its progress, as a report while it runs tells it: every record
	// read, of those there were to read.
	total, applied := kafka.RestoreProgress(rc)
	if applied != n || total < n {
		t.Fatalf("restore progress: %d applied of %d, and the restore applied %d", applied, total, n)
	}
}

func snapshotOf(t *testing.T, s *runtime.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.Snapshot(func(key, value []byte) error {
		out[string(key)] = string(value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func hasEntry(m map[string]string, value string) bool {
	for _, v := range m {
		if v == value {
			return true
		}
	}
	return false
}

// TestChangelogWritesBackAFailedBatch puts in the topic, after a
// committed batch, records of a batch that never committed (no progress
// follows them): a restore leaves them out, and writes the restored
// values back over them, so that the topic's last record of each key is
// the checkpoint's again and a later restore, after more batches, still
// leaves them out.
func TestChangelogWritesBackAFailedBatch(t *testing.T) {
	conn, adm := newCluster(t)
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "failed"}
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := kafka.NewChangelog(opts, s)
	defer c.Close()
	if err := c.Restore(testContext(t)); err != nil {
		t.Fatal(err)
	}
	v := runtime.Var{Variable: 0}
	commit := func(c runtime.Committer, s *runtime.Store, id int64, key, value string) {
		t.Helper()
		b := s.NewBatch()
		if err := b.Put(v, []byte(key), nil, []byte(value)); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(b, runtime.Progress{BatchID: id}); err != nil {
			t.Fatal(err)
		}
	}
	commit(c, s, 0, "kept", "0")
	// Batch 1's records, as a commit that failed before its progress
	// would leave them: the kept key changed, and a key no batch writes.
	var stray []*kgo.Record
	b := s.NewBatch()
	b.Put(v, []byte("kept"), nil, []byte("failed"))
	b.Put(v, []byte("stray"), nil, []byte("failed"))
	if err := b.Changes(func(key, value []byte, _ bool) error {
		stray = append(stray, &kgo.Record{Topic: "failed", Key: slices.Clone(key), Value: slices.Clone(value),
			Headers: []kgo.RecordHeader{{Key: "streamgen-batch", Value: []byte{0, 0, 0, 0, 0, 0, 0, 1}}}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	produce(t, conn, stray...)
	want := snapshotOf(t, s)
	c.Close()

	restore := func(what string) (*runtime.Store, interface {
		runtime.Committer
		Close() error
	}) {
		t.Helper()
		r, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		rc := kafka.NewChangelog(opts, r)
		t.Cleanup(func() { rc.Close() })
		if err := rc.Restore(testContext(t)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return r, rc
	}
	r, rc := restore("the first restore")
	sameState(t, "restored with a failed batch in the topic", snapshotOf(t, r), want)
	last := map[string][]byte{}
	for _, rec := range consume(t, conn, adm, "failed") {
		last[string(rec.Key)] = rec.Value
	}
	for k, v := range last {
		if w, ok := want[k]; (ok && string(v) != w) || (!ok && v != nil) {
			t.Fatalf("after the restore, the topic's last record of %x is %q, want the checkpoint's %q (present %v)", k, v, w, ok)
		}
	}
	commit(rc, r, 1, "other", "1")
	want = snapshotOf(t, r)
	r2, _ := restore("the second restore")
	sameState(t, "restored after a later batch", snapshotOf(t, r2), want)
}

// openChangelog opens the store "ckpt" on fs with the changelog opts
// describe, and restores it; both are closed with the test.
func openChangelog(t *testing.T, opts kafka.ChangelogOptions, fs vfs.FS) (*runtime.Store, interface {
	runtime.Committer
	Close() error
}) {
	t.Helper()
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	c := kafka.NewChangelog(opts, s)
	t.Cleanup(func() { c.Close() })
	if err := c.Restore(testContext(t)); err != nil {
		t.Fatal(err)
	}
	return s, c
}

// TestChangelogRestoresACompactedTopicAsItReads: compaction keeps one
// record of each key, so only the newest progress record is left, after
// nearly every other record. A restore into an empty store applies the
// records of the batches that record says complete as it reads them, and
// holds only those of a batch that failed after it (held until a
// progress record, every record of the topic was in memory at once); the
// state is the checkpoint's, the failed batch left out.
func TestChangelogRestoresACompactedTopicAsItReads(t *testing.T) {
	fake, conn, _ := newFakeCluster(t)
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "compacted"}
	s, c := openChangelog(t, opts, vfs.NewMem())
	v := runtime.Var{Variable: 0}
	const batches, keys = 30, 40
	for id := range int64(batches) {
		b := s.NewBatch()
		for k := range keys {
			key := fmt.Appendf(nil, "k%d", k)
			var err error
			if (k+int(id))%7 == 0 {
				err = b.Delete(v, key, nil)
			} else {
				err = b.Put(v, key, nil, fmt.Appendf(nil, "%d", id))
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Commit(b, runtime.Progress{BatchID: id}); err != nil {
			t.Fatal(err)
		}
	}
	want := snapshotOf(t, s)
	c.Close()
	// A batch that failed after the last progress record: its records
	// and no progress.
	var stray []*kgo.Record
	b := s.NewBatch()
	for k := range 3 {
		b.Put(v, fmt.Appendf(nil, "k%d", k), nil, []byte("failed"))
	}
	if err := b.Changes(func(key, value []byte, _ bool) error {
		stray = append(stray, &kgo.Record{Topic: "compacted", Key: slices.Clone(key), Value: slices.Clone(value),
			Headers: []kgo.RecordHeader{{Key: "streamgen-batch", Value: []byte{0, 0, 0, 0, 0, 0, 0, batches}}}})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	b.Close()
	fake.Compact()
	produce(t, conn, stray...)

	r, rc := openChangelog(t, opts, vfs.NewMem())
	sameState(t, "restored from the compacted topic", snapshotOf(t, r), want)
	if n := kafka.RestoredRecords(rc); n >= batches*keys {
		t.Fatalf("the restore applied %d records, no fewer than the %d the batches wrote: the topic was not compacted", n, batches*(keys+1))
	}
	if held := kafka.RestoreHeldPeak(rc); held > len(stray) {
		t.Fatalf("the restore held %d records at once, want at most the failed batch's %d", held, len(stray))
	}
}

// TestChangelogCopiesAnExistingCheckpoint runs a phase without the
// changelog, then adds it: its first start copies the checkpoint to the
// empty topic, so that a checkpoint lost afterwards comes back whole.
func TestChangelogCopiesAnExistingCheckpoint(t *testing.T) {
	conn, _ := newCluster(t)
	ref := newPagesRun()
	got := newPagesRun()
	in := pagesClicks(150, 3)
	for _, r := range []*pagesRun{ref, got} {
		if err := r.phase(t, time.Second, in[:50]...); err != nil {
			t.Fatal(err)
		}
	}
	got.more = []runtime.Option{kafka.Changelog(kafka.ChangelogOptions{Connection: conn, Topic: "added"})}
	for _, chunk := range [][2]int{{50, 100}, {100, 150}} {
		for _, r := range []*pagesRun{ref, got} {
			if err := r.phase(t, time.Second, in[chunk[0]:chunk[1]]...); err != nil {
				t.Fatal(err)
			}
		}
		got.loseDisk()
	}
	if err := got.phase(t, 0); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored", got.state(t), ref.state(t))
	samePages(t, "output", got.latest(), expectedPages(in))
	if got.ids[0] != got.ids[len(got.ids)-1] {
		t.Fatalf("the query's id changed: %v", got.ids)
	}
}

// TestChangelogDeletedVariable changes the pipeline to delete a state
// variable and declare a new one, which takes the deleted one's id: the
// deleted variable's entries, which the start deletes from the checkpoint,
// are deleted from the changelog too, so that a restore does not give
// them to the new variable.
func TestChangelogDeletedVariable(t *testing.T) {
	conn, _ := newCluster(t)
	ref := newPagesRun()
	got := newPagesRun(kafka.Changelog(kafka.ChangelogOptions{Connection: conn, Topic: "changed"}))
	in := pagesClicks(120, 4)
	for _, r := range []*pagesRun{ref, got} {
		if err := r.phase(t, time.Second, in[:60]...); err != nil {
			t.Fatal(err)
		}
		r.use(&pagesCounter{v2: true})
		r.more = append(r.more, runtime.AllowPipelineChanges())
		if err := r.phase(t, time.Second, in[60:]...); err != nil {
			t.Fatal(err)
		}
	}
	got.loseDisk()
	if err := got.phase(t, 0); err != nil {
		t.Fatal(err)
	}
	sameState(t, "restored after the change", got.state(t), ref.state(t))
	// The new list holds only the pages since the change.
	want := expectedPages(in[60:])
	for u, w := range want {
		w.Count = expectedPages(in)[u].Count
		want[u] = w
	}
	samePages(t, "output after the change", got.latest(), ref.latest())
	last := map[string]pagesOut{}
	for _, row := range ref.sink.Rows() {
		last[row.User] = row
	}
	for u, w := range want {
		if fmt.Sprint(last[u].Pages) != fmt.Sprint(w.Pages) {
			t.Fatalf("user %s: pages %v after the change, want %v", u, last[u].Pages, w.Pages)
		}
	}
}

// TestChangelogDeletedVariableFirstBatchFails: the deleted variable's
// entries are deleted from the changelog though the first batch after the
// change fails before it commits (a sink that fails once, or the
// changelog's produce, after the batch took the keys to delete): the next
// run's first batch deletes them, and a restore from the changelog does
// not give them to the new variable.
func TestChangelogDeletedVariableFirstBatchFails(t *testing.T) {
	for _, eos := range []bool{false, true} {
		for _, failing := range []string{"sink", "produce"} {
			t.Run(fmt.Sprintf("%s/%s", map[bool]string{false: "Changelog", true: "ExactlyOnce"}[eos], failing), func(t *testing.T) {
				fake, conn, _ := newFakeCluster(t)
				copts := kafka.ChangelogOptions{Connection: conn, Topic: "changed"}
				opt := kafka.Changelog(copts)
				if eos {
					txn := kafka.ExactlyOnce(copts)
					defer txn.Close()
					opt = txn.Option()
				}
				ref := newPagesRun()
				got := newPagesRun(opt)
				all := pagesClicks(140, 4)
				in, later := all[:120], all[120:]
				for _, r := range []*pagesRun{ref, got} {
					if err := r.phase(t, time.Second, in[:60]...); err != nil {
						t.Fatal(err)
					}
				}
				ref.use(&pagesCounter{v2: true})
				ref.more = append(ref.more, runtime.AllowPipelineChanges())
				if err := ref.phase(t, time.Second, in[60:]...); err != nil {
					t.Fatal(err)
				}
				// The changed pipeline's first batch fails once, before it
				// commits.
				fs := &failOnceSink[pagesOut]{Sink: got.sink}
				var armed atomic.Bool
				if failing == "sink" {
					fs.fail.Store(true)
				} else {
					armed.Store(true)
					fake.ControlKey(int16(kmsg.Produce), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
						fake.KeepControl()
						if !armed.Load() {
							return nil, nil, false
						}
						return failedProduce(kreq.(*kmsg.ProduceRequest)), nil, true
					})
				}
				byUser := typed.GroupByKey(typed.FromMemory(got.stream), func(c *fixtures.Click) string { return c.User })
				got.w = typed.WriteTo(typed.TransformWithState(byUser, &pagesCounter{v2: true}, typed.TimeModeProcessingTime, typed.Update), typed.Sink[pagesOut](fs))
				got.more = append(got.more, runtime.AllowPipelineChanges())
				if err := got.phase(t, time.Second, in[60:]...); err == nil {
					t.Fatal("the failure did not fail the batch")
				}
				armed.Store(false)
				if err := got.phase(t, 0); err != nil { // the batch runs again, and commits
					t.Fatal(err)
				}
				sameState(t, "the checkpoint", got.state(t), ref.state(t))
				got.loseDisk()
				for _, r := range []*pagesRun{ref, got} {
					if err := r.phase(t, time.Second, later...); err != nil {
						t.Fatal(err)
					}
				}
				samePages(t, "output after the restore", got.latest(), ref.latest())
				sameState(t, "restored after the change", got.state(t), ref.state(t))
			})
		}
	}
}

// failedProduce is the response to req that refuses every record (an
// error the client does not retry).
func failedProduce(req *kmsg.ProduceRequest) *kmsg.ProduceResponse {
	return refusedProduce(req, kerr.InvalidRecord.Code)
}

// refusedProduce is the response to req that refuses every record with
// the error code.
func refusedProduce(req *kmsg.ProduceRequest, code int16) *kmsg.ProduceResponse {
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = code
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// failOnceSink fails its next write while fail is set, and clears it.
type failOnceSink[T any] struct {
	typed.Sink[T]
	fail atomic.Bool
}

func (s *failOnceSink[T]) Write(ctx context.Context, id int64, rows []T) error {
	if s.fail.CompareAndSwap(true, false) {
		return errors.New("the sink is down for a moment")
	}
	return s.Sink.Write(ctx, id, rows)
}

// TestChangelogCatchesUpABehindCheckpoint restores a second store from
// the topic, then commits more batches through the first: a restore of
// the second, whose checkpoint is intact but behind the topic, reads only
// the records after the offsets it recorded, and ends equal to the first.
func TestChangelogCatchesUpABehindCheckpoint(t *testing.T) {
	conn, _ := newCluster(t)
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "behind"}
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := kafka.NewChangelog(opts, s)
	defer c.Close()
	if err := c.Restore(testContext(t)); err != nil {
		t.Fatal(err)
	}
	v := runtime.Var{Variable: 0}
	batch := func(id int64, keys int) {
		t.Helper()
		b := s.NewBatch()
		for k := range keys {
			if err := b.Put(v, fmt.Appendf(nil, "k%d", k), nil, fmt.Appendf(nil, "%d", id)); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Commit(b, runtime.Progress{BatchID: id}); err != nil {
			t.Fatal(err)
		}
	}
	batch(0, 50)
	batch(1, 50)
	fs := vfs.NewMem()
	restoreOn := func() (int64, map[string]string) {
		t.Helper()
		r, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rc := kafka.NewChangelog(opts, r)
		defer rc.Close()
		if err := rc.Restore(testContext(t)); err != nil {
			t.Fatal(err)
		}
		return kafka.RestoredRecords(rc), snapshotOf(t, r)
	}
	n, got := restoreOn()
	sameState(t, "the first restore", got, snapshotOf(t, s))
	if n != 2*(50+1) {
		t.Fatalf("the first restore applied %d records, want 102 (two batches of 50 entries and a progress)", n)
	}
	batch(2, 5)
	n, got = restoreOn()
	sameState(t, "the restore of the checkpoint behind", got, snapshotOf(t, s))
	if n != 5+1 {
		t.Fatalf("the restore of a checkpoint one batch of 5 entries behind applied %d records, want 6 (the batch and its progress)", n)
	}
	n, _ = restoreOn()
	if n != 0 {
		t.Fatalf("a restore of a checkpoint up to date applied %d records, want 0", n)
	}
}

// TestChangelogRebuildsACheckpointOlderThanItsDeletions: a checkpoint
// behind its changelog by records older than the topic keeps deletions
// (delete.retention.ms, here 0) may miss deletions that compaction has
// removed since: read from its offsets, the topic would leave a deleted
// key's value in it. It is rebuilt from the topic instead, and ends equal
// to the store the topic was written from. (A checkpoint behind by
// records newer than that reads only them: see
// TestChangelogCatchesUpABehindCheckpoint.)
func TestChangelogRebuildsACheckpointOlderThanItsDeletions(t *testing.T) {
	fake, conn, adm := newFakeCluster(t)
	compact, now := "compact", "0"
	if _, err := adm.CreateTopic(testContext(t), 1, 1,
		map[string]*string{"cleanup.policy": &compact, "delete.retention.ms": &now}, "forgets"); err != nil {
		t.Fatal(err)
	}
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "forgets"}
	fs := vfs.NewMem()
	s, c := openChangelog(t, opts, fs)
	v := runtime.Var{Variable: 0}
	batch := func(id int64, f func(b *runtime.StateBatch) error) {
		t.Helper()
		b := s.NewBatch()
		if err := f(b); err != nil {
			t.Fatal(err)
		}
		if err := c.Commit(b, runtime.Progress{BatchID: id}); err != nil {
			t.Fatal(err)
		}
	}
	for id := range int64(2) {
		batch(id, func(b *runtime.StateBatch) error {
			for k := range 10 {
				if err := b.Put(v, fmt.Appendf(nil, "k%d", k), nil, fmt.Appendf(nil, "%d", id)); err != nil {
					return err
				}
			}
			return nil
		})
	}
	behind := vfs.NewMem()
	copyFS(t, fs, behind, "ckpt")
	batch(2, func(b *runtime.StateBatch) error { return b.Delete(v, []byte("k3"), nil) })
	batch(3, func(b *runtime.StateBatch) error { return b.Put(v, []byte("k5"), nil, []byte("3")) })
	want := snapshotOf(t, s)
	// The deletion of k3, and the values it deleted, are gone from the
	// topic.
	fake.Compact()

	r, _ := openChangelog(t, opts, behind)
	sameState(t, "the checkpoint behind by a deletion compaction removed", snapshotOf(t, r), want)
}

// TestChangelogOptionsRefused: options that do not validate fail Start
// with what is wrong, and a topic that is not compacted, or deletes by
// time too, is refused.
func TestChangelogOptionsRefused(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "plain", 1)
	both := "compact,delete"
	if _, err := adm.CreateTopic(testContext(t), 1, 1, map[string]*string{"cleanup.policy": &both}, "both"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		opts kafka.ChangelogOptions
		want string
	}{
		{kafka.ChangelogOptions{Connection: conn}, "no Topic"},
		{kafka.ChangelogOptions{Topic: "x"}, "no Brokers"},
		{kafka.ChangelogOptions{Connection: conn, Topic: "x", Partitions: -1}, "Partitions -1"},
		{kafka.ChangelogOptions{Connection: conn, Topic: "plain"}, "cleanup.policy"},
		{kafka.ChangelogOptions{Connection: conn, Topic: "both"}, `cleanup.policy is "compact,delete": it must be compact alone`},
	} {
		r := newPagesRun(kafka.Changelog(tc.opts))
		err := r.phase(t, time.Second, fixtures.Click{User: "ann"})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: Start returned %v, want an error saying %q", tc.opts, err, tc.want)
		}
	}
}

// TestChangelogRestoreInterrupted fails a restore in its middle (the
// fetches of the changelog past the first batch refused, so part of the
// restore is committed), then restores
// again: the second restore ends equal to the store the topic was written
// from, the first's part replaced, not mixed in.
func TestChangelogRestoreInterrupted(t *testing.T) {
	cluster, err := kafka.Embedded(testContext(t))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	opts := kafka.ChangelogOptions{Connection: cluster.Connection(), Topic: "interrupted"}
	src, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: vfs.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	c := kafka.NewChangelog(opts, src)
	defer c.Close()
	if err := c.Restore(testContext(t)); err != nil {
		t.Fatal(err)
	}
	// 36 MiB of state in a batch, and a second batch that deletes a
	// tenth of its keys and changes half: the restore is made to fail
	// inside the second batch, after it has applied (and committed in
	// pieces) the first.
	v := runtime.Var{Variable: 0}
	value := make([]byte, 300)
	random := rand.NewChaCha8([32]byte{1})
	for id := range int64(2) {
		b := src.NewBatch()
		for k := range 120_000 {
			key := fmt.Appendf(nil, "k%06d", k)
			switch {
			case id == 0:
				random.Read(value) // values that do not compress away
				err = b.Put(v, key, nil, value)
			case k%10 == 0:
				err = b.Delete(v, key, nil)
			case k%2 == 1:
				random.Read(value)
				err = b.Put(v, key, nil, value)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Commit(b, runtime.Progress{BatchID: id}); err != nil {
			t.Fatal(err)
		}
	}
	want := snapshotOf(t, src)

	fake := kafka.FakeCluster(cluster)
	var fetches atomic.Int64
	var armed atomic.Bool
	armed.Store(true)
	fake.ControlKey(int16(kmsg.Fetch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		fake.KeepControl()
		req := kreq.(*kmsg.FetchRequest)
		// (The restore reads the topic's last records first, for the
		// last progress record: those fetches are let through.)
		if !armed.Load() || len(req.Topics) == 0 || len(req.Topics[0].Partitions) == 0 || req.Topics[0].Partitions[0].FetchOffset < 130_000 || req.Topics[0].Partitions[0].FetchOffset > 190_000 {
			return nil, nil, false
		}
		fetches.Add(1)
		return fetchAnswer(req, func(rp *kmsg.FetchResponseTopicPartition) { rp.ErrorCode = kerr.UnknownServerError.Code }), nil, true
	})
	fs := vfs.NewMem()
	restore := func() (map[string]string, error) {
		s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		rc := kafka.NewChangelog(opts, s)
		defer rc.Close()
		if err := rc.Restore(testContext(t)); err != nil {
			return snapshotOf(t, s), err
		}
		return snapshotOf(t, s), nil
	}
	partial, err := restore()
	if !errors.Is(err, kerr.UnknownServerError) {
		t.Fatalf("the restore with a failing fetch gave %v, want the fetch's error (fetches %d)", err, fetches.Load())
	}
	if len(partial) == 0 || len(partial) >= len(want) {
		t.Fatalf("the interrupted restore left %d records, want some of the %d: the test does not interrupt it in the middle (%v, %d fetches)", len(partial), len(want), err, fetches.Load())
	}
	armed.Store(false)
	got, err := restore()
	if err != nil {
		t.Fatal(err)
	}
	sameState(t, "the restore after an interrupted one", got, want)
}

// TestChangelogTopicMadeAgain: a checkpoint whose changelog topic was
// deleted and made again since its last batch. Where the new topic holds
// another checkpoint's batches, further than the old offsets, the
// checkpoint takes the topic's state: read from its old offsets, it kept
// its own values and took only the new topic's later records. Where the
// new topic is empty, the checkpoint is copied into it, and a restore of
// an empty store from it gives the checkpoint back.
func TestChangelogTopicMadeAgain(t *testing.T) {
	conn, adm := newCluster(t)
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "again"}
	v := runtime.Var{Variable: 0}
	write := func(s *runtime.Store, c runtime.Committer, batches int64, value string) {
		t.Helper()
		for id := range batches {
			b := s.NewBatch()
			for k := range 10 {
				if err := b.Put(v, fmt.Appendf(nil, "k%d", (int(id)*3+k)%20), nil, fmt.Appendf(nil, "%s%d", value, id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Commit(b, runtime.Progress{BatchID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	remake := func() {
		t.Helper()
		ctx := testContext(t)
		if _, err := adm.DeleteTopics(ctx, "again"); err != nil {
			t.Fatal(err)
		}
		for {
			// (A new client each time: one caches the topic's metadata.)
			if listed, err := newAdmin(t, conn).ListTopics(ctx, "again"); err != nil {
				t.Fatal(err)
			} else if !listed.Has("again") {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatal(ctx.Err())
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	old := vfs.NewMem()
	s, c := openChangelog(t, opts, old)
	write(s, c, 2, "old")
	oldState := snapshotOf(t, s)
	c.Close()
	s.Close()
	kept := vfs.NewMem()
	copyFS(t, old, kept, "ckpt")

	remake()
	s2, c2 := openChangelog(t, opts, vfs.NewMem())
	write(s2, c2, 5, "new")
	want := snapshotOf(t, s2)
	c2.Close()
	s2.Close()
	r, _ := openChangelog(t, opts, old)
	sameState(t, "a checkpoint of the deleted topic", snapshotOf(t, r), want)

	remake()
	back, _ := openChangelog(t, opts, kept)
	sameState(t, "a checkpoint of the deleted topic, the new one empty", snapshotOf(t, back), oldState)
	fresh, _ := openChangelog(t, opts, vfs.NewMem())
	sameState(t, "a restore from the topic the checkpoint was copied into", snapshotOf(t, fresh), oldState)
}

// TestChangelogResetWithoutTopicIDs: on a cluster that gives no topic
// IDs (or for a checkpoint written before they were kept), a checkpoint
// of a changelog topic that App.Reset deleted and made again is told by
// the Reset's record at the start of the new topic, written after the
// checkpoint's last batch: the checkpoint's state gives way to the
// topic's (none), where it used to fail the start (the topic ends before
// the offset it recorded). A checkpoint written since the Reset is not.
func TestChangelogResetWithoutTopicIDs(t *testing.T) {
	defer kafka.WithoutTopicIDs()()
	conn, adm := newCluster(t)
	opts := kafka.ChangelogOptions{Connection: conn, Topic: "reset"}
	v := runtime.Var{Variable: 0}
	write := func(s *runtime.Store, c runtime.Committer, from, batches int64) {
		t.Helper()
		for id := from; id < from+batches; id++ {
			b := s.NewBatch()
			for k := range 5 {
				if err := b.Put(v, fmt.Appendf(nil, "k%d", k), nil, fmt.Appendf(nil, "%d", id)); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Commit(b, runtime.Progress{BatchID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	old := vfs.NewMem()
	s, c := openChangelog(t, opts, old)
	write(s, c, 0, 3)
	// The Reset runs in the millisecond of the checkpoint's last commit,
	// as it may on a fast machine: still a reset after it.
	at, err := kafka.RecordedAt(c)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	s.Close()
	ctx := testContext(t)
	if _, err := adm.DeleteTopics(ctx, "reset"); err != nil {
		t.Fatal(err)
	}
	if err := kafka.MarkResetAt(ctx, opts, at, "reset"); err != nil {
		t.Fatal(err)
	}
	r, rc := openChangelog(t, opts, old)
	if got := snapshotOf(t, r); len(got) != 0 {
		t.Fatalf("a checkpoint of the topic before the Reset holds %d records after its restore, want none", len(got))
	}
	write(r, rc, 0, 2)
	want := snapshotOf(t, r)
	rc.Close()
	r.Close()
	again, _ := openChangelog(t, opts, old)
	sameState(t, "a checkpoint written since the Reset", snapshotOf(t, again), want)
}
