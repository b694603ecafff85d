package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/streamgen/streamgen/bench/joinrec"
	"github.com/streamgen/streamgen/internal/procmem"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Joins, streamgen's side by side with the floor the design can reach:
//
//   - a stream-stream inner join with a time condition (left BETWEEN
//     right - 5 s AND right + 5 s, watermarks 5 s behind each side), over
//     100k keys, against a hand-written loop over Pebble that keeps each
//     side's rows by key and time, indexes them by time to forget them as
//     the watermark passes, and commits each micro-batch with its offsets
//     in one synced write, as streamgen does;
//   - a stream-static join (each row with its key's row of a table of
//     100k keys) against a loop over a Go map.

const (
	joinKeys      = 100_000
	joinCondition = 5 * time.Second
	joinDelay     = 5 * time.Second
)

// joinBase is the first event time of the join benchmarks' input.
var joinBase = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()

// joinInput returns n rows of a side over joinKeys keys: the i-th at
// joinBase + i ms, up to 4 s out of order (less than the delay: never
// late), its value i.
func joinInput(n int, seed uint64) []joinrec.Row {
	r := rand.New(rand.NewPCG(seed, seed))
	names := make([]string, joinKeys)
	for i := range names {
		names[i] = keyName(i)
	}
	rows := make([]joinrec.Row, n)
	for i := range rows {
		rows[i] = joinrec.Row{Key: names[r.IntN(joinKeys)], Time: joinBase + int64(i)*int64(time.Millisecond) + r.Int64N(int64(4*time.Second)), Value: int64(i)}
	}
	return rows
}

// pairSink counts the joined rows and, optionally, keeps them.
type pairSink struct {
	rows int64
	keep bool
	all  []joinrec.Pair
}

func (s *pairSink) Write(_ context.Context, _ int64, rows []joinrec.Pair) error {
	s.rows += int64(len(rows))
	if s.keep {
		s.all = append(s.all, rows...)
	}
	return nil
}

func rowTime(r *joinrec.Row) time.Time { return time.Unix(0, r.Time) }

// runJoinStreamgen joins left and right with a streamgen query over
// MemoryStreams of perBatch rows a batch per side, to the end of the input
// (then flushed), on a checkpoint in dir.
func runJoinStreamgen(left, right *typed.MemoryStream[joinrec.Row], dir string, sink typed.Sink[joinrec.Pair]) error {
	key := func(r *joinrec.Row) string { return r.Key }
	l := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(left), rowTime, joinDelay), key)
	r := typed.GroupByKey(typed.WithWatermark(typed.FromMemory(right), rowTime, joinDelay), key)
	joined := typed.Join(l, r, typed.Inner, func(j typed.Joined[string, joinrec.Row, joinrec.Row]) joinrec.Pair {
		return joinrec.Pair{Key: j.Key, Left: j.Left.Value, Right: j.Right.Value}
	}, typed.JoinWithin(typed.TimeBetween(-joinCondition, joinCondition)))
	q, err := typed.WriteTo(joined, sink).Start(context.Background(), runtime.Checkpoint(dir), sameBatches,
		runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// The hand-written join's keys: a side's rows by key and time
// (side, uvarint(len(key)), key, time(8), seq(8)), and by time
// (side+1, time(8), uvarint(len(key)), key, seq(8)), where seq numbers the
// rows of the side.
const (
	handLeft      = 'L'
	handLeftTime  = 'M'
	handRight     = 'R'
	handRightTime = 'S'
)

// handJoin is the hand-written join's store and reusable buffers.
type handJoin struct {
	db                  *pebble.DB
	maxLeft, maxRight   int64 // the largest event times seen
	watermark           int64
	seq                 uint64
	key, idx, val, from []byte
	to                  []byte
	out                 []joinrec.Pair
	batchID             int64
	it                  *pebble.Iterator         // the batch's, over the committed state
	lefts               map[string][]joinrec.Row // the batch's left rows by key
}

func readTime(b []byte) int64 { return int64(binary.BigEndian.Uint64(b) ^ 1<<63) }

// rowKey appends the key of a side's row by key and time.
func rowKey(b []byte, side byte, key string, at int64, seq uint64) []byte {
	b = append(b, side)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = appendTime(b, at)
	return binary.BigEndian.AppendUint64(b, seq)
}

// timeKey appends the key of a side's row by time.
func timeKey(b []byte, side byte, key string, at int64, seq uint64) []byte {
	b = append(b, side+1)
	b = appendTime(b, at)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return binary.BigEndian.AppendUint64(b, seq)
}

// join joins a row of one side with the other side's committed rows of
// its key within the condition, through the batch's iterator over the
// committed state, and calls emit with each other row's value.
func (h *handJoin) join(other byte, r *joinrec.Row, emit func(value int64)) error {
	h.from = rowKey(h.from[:0], other, r.Key, r.Time-int64(joinCondition), 0)
	h.to = rowKey(h.to[:0], other, r.Key, r.Time+int64(joinCondition)+1, 0)
	h.it.SetBounds(h.from, h.to)
	for h.it.First(); h.it.Valid(); h.it.Next() {
		v, _ := binary.Varint(h.it.Value())
		emit(v)
	}
	return h.it.Error()
}

// store keeps a row of side, by key and by time.
func (h *handJoin) store(b *pebble.Batch, side byte, r *joinrec.Row) error {
	h.seq++
	h.key = rowKey(h.key[:0], side, r.Key, r.Time, h.seq)
	h.val = binary.AppendVarint(h.val[:0], r.Value)
	if err := b.Set(h.key, h.val, nil); err != nil {
		return err
	}
	h.idx = timeKey(h.idx[:0], side, r.Key, r.Time, h.seq)
	return b.Set(h.idx, nil, nil)
}

// evict forgets the committed rows of side at or before bound (the
// batch's own rows are all after it): it reads their keys from the index
// by time, deletes each row, and the index's range.
func (h *handJoin) evict(b *pebble.Batch, side byte, bound int64) error {
	lower := []byte{side + 1}
	upper := appendTime([]byte{side + 1}, bound+1)
	h.it.SetBounds(lower, upper)
	for h.it.First(); h.it.Valid(); h.it.Next() {
		k := h.it.Key()[1:]
		at := readTime(k)
		n, w := binary.Uvarint(k[8:])
		key := k[8+w : 8+w+int(n)]
		seq := binary.BigEndian.Uint64(k[8+w+int(n):])
		h.key = rowKey(h.key[:0], side, string(key), at, seq)
		if err := b.Delete(h.key, nil); err != nil {
			return err
		}
	}
	if err := h.it.Error(); err != nil {
		return err
	}
	return b.DeleteRange(lower, upper, nil)
}

// batch runs one micro-batch: the left rows join the right side's
// committed rows, then the right rows join the left side's committed rows
// and the batch's left rows of their key (held in a map, so that the
// batch's writes need no index), each row is kept (a right row the
// watermark would forget at once is not), the sides forget what the
// watermark has passed, and the state commits with the offsets and the
// watermark in one synced write. One iterator over the committed state
// serves the batch's reads.
func (h *handJoin) batch(left, right []joinrec.Row, end int, sink typed.Sink[joinrec.Pair]) error {
	b := h.db.NewBatch()
	defer b.Close()
	it, err := h.db.NewIter(nil)
	if err != nil {
		return err
	}
	h.it = it
	defer it.Close()
	h.out = h.out[:0]
	if h.lefts == nil {
		h.lefts = map[string][]joinrec.Row{}
	}
	clear(h.lefts)
	wm := h.watermark
	for i := range left {
		r := &left[i]
		if r.Time <= wm {
			continue // late
		}
		if err := h.join(handRight, r, func(v int64) { h.out = append(h.out, joinrec.Pair{Key: r.Key, Left: r.Value, Right: v}) }); err != nil {
			return err
		}
		if err := h.store(b, handLeft, r); err != nil {
			return err
		}
		h.lefts[r.Key] = append(h.lefts[r.Key], *r)
		h.maxLeft = max(h.maxLeft, r.Time)
	}
	for i := range right {
		r := &right[i]
		if r.Time <= wm {
			continue
		}
		if err := h.join(handLeft, r, func(v int64) { h.out = append(h.out, joinrec.Pair{Key: r.Key, Left: v, Right: r.Value}) }); err != nil {
			return err
		}
		for _, l := range h.lefts[r.Key] {
			if d := l.Time - r.Time; d >= -int64(joinCondition) && d <= int64(joinCondition) {
				h.out = append(h.out, joinrec.Pair{Key: r.Key, Left: l.Value, Right: r.Value})
			}
		}
		if r.Time > wm-int64(joinCondition)-int64(time.Millisecond) {
			if err := h.store(b, handRight, r); err != nil {
				return err
			}
		}
		h.maxRight = max(h.maxRight, r.Time)
	}
	// Each side forgets its rows at or before W - 5 s - 1 ms.
	for _, side := range []byte{handLeft, handRight} {
		if err := h.evict(b, side, wm-int64(joinCondition)-int64(time.Millisecond)); err != nil {
			return err
		}
	}
	h.batchID++
	if err := sink.Write(context.Background(), h.batchID, h.out); err != nil {
		return err
	}
	h.val = strconv.AppendInt(h.val[:0], int64(end), 10)
	if err := b.Set(handProgressKey, h.val, nil); err != nil {
		return err
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return err
	}
	// The next batch's watermark.
	if h.maxLeft > 0 && h.maxRight > 0 {
		h.watermark = max(h.watermark, min(h.maxLeft, h.maxRight)-int64(joinDelay))
	}
	return nil
}

// runJoinHandwritten joins left and right with the hand-written loop on a
// Pebble store in dir, perBatch rows of each side per micro-batch, then a
// last batch at the end of time (the flush).
func runJoinHandwritten(left, right []joinrec.Row, perBatch int, dir string, sink typed.Sink[joinrec.Pair]) error {
	opts := &pebble.Options{CacheSize: 128 << 20, Logger: quietLogger{}}
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return err
	}
	h := &handJoin{db: db}
	for start, end := range batches(len(left), perBatch) {
		if err := h.batch(left[start:end], right[start:min(end, len(right))], end, sink); err != nil {
			db.Close()
			return err
		}
	}
	h.watermark = 1<<63 - 1 - int64(joinCondition) // the flush
	if err := h.batch(nil, nil, len(left), sink); err != nil {
		db.Close()
		return err
	}
	return db.Close()
}

// BenchmarkStreamJoin joins two streams of 1M rows each over 100k keys,
// 100k rows of each per micro-batch, with streamgen and with the
// hand-written loop, on fresh stores on disk (see BenchmarkCountPerKey
// for how a run is timed). The hand-written side logs the ratio of the
// two.
func BenchmarkStreamJoin(b *testing.B) {
	const rows, perBatch = 1_000_000, 100_000
	left, right := joinInput(rows, 1), joinInput(rows, 2)
	var rate [2]float64
	b.Run("impl=streamgen", func(b *testing.B) {
		l := typed.NewMemoryStream[joinrec.Row]("left", perBatch)
		r := typed.NewMemoryStream[joinrec.Row]("right", perBatch)
		l.Add(left...)
		r.Add(right...)
		rate[0] = benchPairs(b, 2*rows, func(dir string, sink *pairSink) error { return runJoinStreamgen(l, r, dir, sink) })
	})
	b.Run("impl=handwritten", func(b *testing.B) {
		// Its own copies of the rows, as the memory streams have: the same
		// heap for the collector to mark on both sides.
		left, right := slices.Clone(left), slices.Clone(right)
		rate[1] = benchPairs(b, 2*rows, func(dir string, sink *pairSink) error {
			return runJoinHandwritten(left, right, perBatch, dir, sink)
		})
		if rate[0] > 0 {
			b.Logf("streamgen takes %.2fx the time of the hand-written loop (target: at most 1.5x)", rate[1]/rate[0])
		}
	})
}

// benchPairs times b.N runs of run, each on a fresh directory, reports
// events/s and returns it.
func benchPairs(b *testing.B, events int, run func(dir string, sink *pairSink) error) float64 {
	parent := b.TempDir()
	var out int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp(parent, "run")
		if err != nil {
			b.Fatal(err)
		}
		sink := &pairSink{}
		// No collection owed by what came before (the input's copies) in
		// the time measured.
		goruntime.GC()
		b.StartTimer()
		if err := run(dir, sink); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		out = sink.rows
		os.RemoveAll(dir)
		b.StartTimer()
	}
	r := float64(events) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(r, "events/s")
	b.ReportMetric(float64(out), "outrows/run")
	return r
}

// TestStreamJoinMatchesALoop checks once that both joins of the benchmark
// write the pairs of a plain loop over the input, on a smaller input.
func TestStreamJoinMatchesALoop(t *testing.T) {
	const rows, perBatch = 20_000, 3_000
	left, right := joinInput(rows, 3), joinInput(rows, 4)
	byKey := map[string][]joinrec.Row{}
	for _, r := range right {
		byKey[r.Key] = append(byKey[r.Key], r)
	}
	var want []string
	for _, l := range left {
		for _, r := range byKey[l.Key] {
			if d := l.Time - r.Time; d >= -int64(joinCondition) && d <= int64(joinCondition) {
				want = append(want, fmt.Sprintf("%s %d %d", l.Key, l.Value, r.Value))
			}
		}
	}
	slices.Sort(want)
	if len(want) < 10 {
		t.Fatalf("the input joins %d pairs", len(want))
	}
	text := func(s *pairSink) []string {
		var out []string
		for _, p := range s.all {
			out = append(out, fmt.Sprintf("%s %d %d", p.Key, p.Left, p.Right))
		}
		slices.Sort(out)
		return out
	}
	l := typed.NewMemoryStream[joinrec.Row]("left", perBatch)
	r := typed.NewMemoryStream[joinrec.Row]("right", perBatch)
	l.Add(left...)
	r.Add(right...)
	s := &pairSink{keep: true}
	if err := runJoinStreamgen(l, r, t.TempDir(), s); err != nil {
		t.Fatal(err)
	}
	if got := text(s); !slices.Equal(got, want) {
		t.Fatalf("streamgen: %d pairs, want %d", len(got), len(want))
	}
	h := &pairSink{keep: true}
	if err := runJoinHandwritten(left, right, perBatch, t.TempDir(), h); err != nil {
		t.Fatal(err)
	}
	if got := text(h); !slices.Equal(got, want) {
		t.Fatalf("hand-written: %d pairs, want %d", len(got), len(want))
	}
}

// stateRows records the largest number of state rows a query's reports
// give its first stateful operator.
type stateRows struct {
	mu  sync.Mutex
	max int64
}

func (s *stateRows) OnQueryProgress(p runtime.QueryProgress) {
	if len(p.StateOperators) == 0 {
		return
	}
	s.mu.Lock()
	s.max = max(s.max, p.StateOperators[0].NumRowsTotal)
	s.mu.Unlock()
}

// runJoinBounded joins rows rows a side (joinInput's: in time order up to
// 4 s, a row a millisecond) in batches of perBatch, on a checkpoint in
// dir, and returns the most state rows a batch left.
func runJoinBounded(rows, perBatch int, dir string, opts ...runtime.Option) (int64, error) {
	l := typed.NewMemoryStream[joinrec.Row]("left", perBatch)
	r := typed.NewMemoryStream[joinrec.Row]("right", perBatch)
	l.Add(joinInput(rows, 7)...)
	r.Add(joinInput(rows, 8)...)
	key := func(r *joinrec.Row) string { return r.Key }
	joined := typed.Join(
		typed.GroupByKey(typed.WithWatermark(typed.FromMemory(l), rowTime, joinDelay), key),
		typed.GroupByKey(typed.WithWatermark(typed.FromMemory(r), rowTime, joinDelay), key),
		typed.Inner, func(j typed.Joined[string, joinrec.Row, joinrec.Row]) joinrec.Pair {
			return joinrec.Pair{Key: j.Key, Left: j.Left.Value, Right: j.Right.Value}
		}, typed.JoinWithin(typed.TimeBetween(-joinCondition, joinCondition)))
	s := &stateRows{}
	q, err := typed.WriteTo(joined, typed.Sink[joinrec.Pair](&pairSink{})).Start(context.Background(),
		append([]runtime.Option{runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow()), runtime.Listener(s)}, opts...)...)
	if err != nil {
		return 0, err
	}
	err = q.AwaitTermination()
	return s.max, err
}

// TestJoinStateBounded checks that a stream-stream join with watermarks
// and a time condition keeps state for the rows the condition can still
// join, whatever the input's length: over an input 10 times longer, the
// most rows its state holds after a batch stays within a quarter of the
// shorter input's (both run well past the first eviction). A row a
// millisecond a side, each kept until the watermark (5 s behind) passes
// it by 5 s and a batch: about 2 × (10 s + a batch) of rows.
func TestJoinStateBounded(t *testing.T) {
	const perBatch = 5_000
	short, err := runJoinBounded(30_000, perBatch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	long, err := runJoinBounded(300_000, perBatch, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("most state rows: %d over 30k rows a side, %d over 300k", short, long)
	if bound := int64(2 * (10_000 + 2*perBatch)); short > bound || short < 10_000 {
		t.Errorf("the shorter input's state peaked at %d rows; want about 2 × (10 s + a batch) of rows, at most %d", short, bound)
	}
	if long > short*5/4 {
		t.Errorf("state grew with the input: %d rows at most over 300k rows a side, against %d over 30k", long, short)
	}
}

// rowSource is a replayable source of n JSON rows of a join's side, made
// as they are read (so the input takes no memory), perBatch a batch: row
// i has key number i·7368787 mod joinKeys and time joinBase + i ms, up to
// 4 s later (never late with joinDelay).
type rowSource struct {
	name        string
	n, perBatch int
}

func (s *rowSource) Name() string { return s.name }

func (s *rowSource) Available(context.Context) (json.RawMessage, error) {
	return json.RawMessage(strconv.Itoa(s.n)), nil
}

func (s *rowSource) Next(_ context.Context, committed, upTo json.RawMessage, _ runtime.ReadLimit) (json.RawMessage, error) {
	from, to := atoi(committed), min(atoi(upTo), atoi(committed)+s.perBatch)
	if to <= from {
		return committed, nil
	}
	return json.RawMessage(strconv.Itoa(to)), nil
}

func (s *rowSource) Read(_ context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	var buf []byte
	for i := atoi(start); i < atoi(end); i++ {
		mix := uint64(i)*7_368_787 + uint64(len(s.name))
		r := joinrec.Row{Key: keyName(int(mix % joinKeys)), Time: joinBase + int64(i)*int64(time.Millisecond) + int64(mix%4000)*int64(time.Millisecond), Value: int64(i)}
		var err error
		if buf, err = r.AppendJSON(buf[:0]); err != nil {
			return err
		}
		if err := fn(runtime.Record{Partition: s.name, Data: buf}); err != nil {
			return err
		}
	}
	return nil
}

// TestJoinMemory measures the peak resident memory of a stream-stream
// join (TestJoinStateBounded's) over 500k and 5M rows a side, read from
// sources that make them as they are read, and checks that the longer
// input's stays within a quarter of the shorter's. It takes a minute or two; run
// it with
//
//	STREAMGEN_BENCH_MEM=1 go test ./bench -run TestJoinMemory -v
func TestJoinMemory(t *testing.T) {
	if os.Getenv("STREAMGEN_BENCH_MEM") == "" {
		t.Skip("takes minutes: set STREAMGEN_BENCH_MEM=1 to run it")
	}
	peak := func(rows int) uint64 {
		procmem.ResetPeak()
		key := func(r *joinrec.Row) string { return r.Key }
		side := func(name string) typed.KeyedStream[string, joinrec.Row] {
			return typed.GroupByKey(typed.WithWatermark(typed.From[joinrec.Row](&rowSource{name: name, n: rows, perBatch: 20_000}), rowTime, joinDelay), key)
		}
		joined := typed.Join(side("left"), side("right"), typed.Inner, func(j typed.Joined[string, joinrec.Row, joinrec.Row]) joinrec.Pair {
			return joinrec.Pair{Key: j.Key, Left: j.Left.Value, Right: j.Right.Value}
		}, typed.JoinWithin(typed.TimeBetween(-joinCondition, joinCondition)))
		s := &stateRows{}
		q, err := typed.WriteTo(joined, typed.Sink[joinrec.Pair](&pairSink{})).Start(context.Background(),
			runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()), runtime.Listener(s))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		hwm := uint64(procmem.Status("VmHWM"))
		t.Logf("%d rows a side: peak RSS %d MiB, at most %d state rows", rows, hwm>>20, s.max)
		return hwm
	}
	short, long := peak(500_000), peak(5_000_000)
	if long > short*5/4 {
		t.Errorf("peak resident memory grew with the input: %d MiB over 5M rows a side, %d MiB over 500k", long>>20, short>>20)
	}
}
