package bench

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Count per key, streamgen's MapGroupsWithState side by side with the floor
// the design can reach: a hand-written loop over the same micro-batches
// that groups in a Go map and reads and writes Pebble directly, with the
// same durability (one synced commit per batch holding the state and the
// offset).

// keyName is the key of key number i: fixed width, as user ids often are.
func keyName(i int) string { return fmt.Sprintf("user-%08d", i) }

// uniformInput returns keys*hits events in which each of keys distinct
// keys occurs exactly hits times, in a shuffled (deterministic) order.
// The key strings are shared between the events of a key.
func uniformInput(keys, hits int, seed uint64) []countrec.Event {
	names := make([]string, keys)
	for i := range names {
		names[i] = keyName(i)
	}
	in := make([]countrec.Event, keys*hits)
	for i := range in {
		in[i].Key = names[i%keys]
	}
	r := rand.New(rand.NewPCG(seed, seed))
	r.Shuffle(len(in), func(i, j int) { in[i], in[j] = in[j], in[i] })
	return in
}

// skewedInput returns n events over at most keys keys with uneven counts
// (low key numbers are more frequent), for the correctness test.
func skewedInput(n, keys int, seed uint64) []countrec.Event {
	r := rand.New(rand.NewPCG(seed, seed))
	in := make([]countrec.Event, n)
	for i := range in {
		in[i].Key = keyName(r.IntN(r.IntN(keys) + 1))
	}
	return in
}

// countFn is the stateful function: the key's count so far.
func countFn(key string, rows iter.Seq[countrec.Event], state *typed.GroupState[countrec.Count]) (countrec.KeyCount, error) {
	c, _ := state.Get()
	for range rows {
		c.N++
	}
	state.Update(c)
	return countrec.KeyCount{Key: key, Count: c.N}, nil
}

// countSink receives the output rows of each batch and keeps nothing of
// them but, optionally, the last count per key (an Update-mode table).
// Both implementations write to it.
type countSink struct {
	rows   int64
	latest map[string]int64 // nil: discard
}

func (s *countSink) Write(_ context.Context, _ int64, rows []countrec.KeyCount) error {
	s.rows += int64(len(rows))
	if s.latest != nil {
		for _, r := range rows {
			s.latest[r.Key] = r.Count
		}
	}
	return nil
}

// runStreamgen counts in with a streamgen query on a MemoryStream holding
// the input, perBatch rows per micro-batch, an AvailableNow trigger and a
// checkpoint on disk in dir.
func runStreamgen(m *typed.MemoryStream[countrec.Event], dir string, sink typed.Sink[countrec.KeyCount], opts ...runtime.Option) error {
	byKey := typed.GroupByKey(typed.FromMemory(m), func(e *countrec.Event) string { return e.Key })
	w := typed.WriteTo(typed.MapGroupsWithState(byKey, typed.NoTimeout, countFn), sink).OutputMode(typed.Update)
	q, err := w.Start(context.Background(), append([]runtime.Option{runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow())}, opts...)...)
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// The hand-written loop's keys. They are laid out as streamgen lays out
// the state of operator 0 (0x10, partition 0 in 4 bytes, op 0, variable
// 0, uvarint(len), key), so that both write the same bytes to Pebble and
// the comparison measures code, not key length; the value is the count as
// a varint (streamgen's is a flags byte, a 3-byte field tag and the same
// varint).
var (
	handPrefix      = []byte("\x10\x00\x00\x00\x00\x00\x00")
	handProgressKey = []byte("\x02progress")
)

func handKey(b []byte, key string) []byte {
	b = append(b, handPrefix...)
	b = binary.AppendUvarint(b, uint64(len(key)))
	return append(b, key...)
}

// quietLogger keeps Pebble's informational lines out of benchmark output,
// as streamgen's store does.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any) {}
func (quietLogger) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "pebble: "+format+"\n", args...)
}
func (quietLogger) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }

// openPebble opens a Pebble store with the default options (but for the
// logger), as streamgen's store does.
func openPebble(dir string) (*pebble.DB, error) {
	return pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
}

// batches yields the [start, end) bounds of the micro-batches of n rows,
// perBatch rows each.
func batches(n, perBatch int) iter.Seq2[int, int] {
	return func(yield func(int, int) bool) {
		for start := 0; start < n; start += perBatch {
			if !yield(start, min(start+perBatch, n)) {
				return
			}
		}
	}
}

// handState is the hand-written loop's store and its reusable buffers.
type handState struct {
	db       *pebble.DB
	counts   map[string]int64
	out      []countrec.KeyCount
	key, val []byte
	batchID  int64
}

func openHand(dir string) (*handState, error) { return openHandWith(dir, nil) }

// openHandWith opens the hand-written loop's store with opts (nil: the
// options streamgen's store uses — a 128 MiB block cache and Bloom
// filters — so that the comparison is of the code, not of the settings;
// but for L0CompactionThreshold, 8 in streamgen's store, which keeps
// Pebble's 4 here: the loop reads every key from Pebble, and reads 12%
// slower with 8).
func openHandWith(dir string, opts *pebble.Options) (*handState, error) {
	if opts == nil {
		opts = &pebble.Options{CacheSize: 128 << 20}
		opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	}
	opts.Logger = quietLogger{}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return nil, err
	}
	h := &handState{db: db, counts: map[string]int64{}}
	// Resume from the committed offset, as a query does at start.
	v, closer, err := db.Get(handProgressKey)
	switch {
	case err == nil:
		h.batchID, _ = strconv.ParseInt(string(v), 10, 64)
		closer.Close()
	case !errors.Is(err, pebble.ErrNotFound):
		db.Close()
		return nil, err
	}
	return h, nil
}

// batch runs one micro-batch: group the rows' counts in a Go map, add each
// key's committed count read from Pebble, stage the new counts in a Pebble
// batch, hand the per-key output rows to the sink, and commit the state
// with the new offset in one synced write.
func (h *handState) batch(rows []countrec.Event, end int, sink typed.Sink[countrec.KeyCount]) error {
	clear(h.counts)
	for i := range rows {
		h.counts[rows[i].Key]++
	}
	b := h.db.NewBatch()
	defer b.Close()
	h.out = h.out[:0]
	for k, n := range h.counts {
		h.key = handKey(h.key[:0], k)
		v, closer, err := h.db.Get(h.key)
		switch {
		case err == nil:
			old, _ := binary.Varint(v)
			closer.Close()
			n += old
		case !errors.Is(err, pebble.ErrNotFound):
			return err
		}
		h.val = binary.AppendVarint(h.val[:0], n)
		if err := b.Set(h.key, h.val, nil); err != nil {
			return err
		}
		h.out = append(h.out, countrec.KeyCount{Key: k, Count: n})
	}
	h.batchID++
	if err := sink.Write(context.Background(), h.batchID, h.out); err != nil {
		return err
	}
	h.val = strconv.AppendInt(h.val[:0], int64(end), 10)
	if err := b.Set(handProgressKey, h.val, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// runHandwritten counts in with the hand-written loop on a Pebble store in
// dir, perBatch rows per micro-batch.
func runHandwritten(in []countrec.Event, perBatch int, dir string, sink typed.Sink[countrec.KeyCount]) error {
	return runHandwrittenWith(in, perBatch, dir, sink, nil)
}

func runHandwrittenWith(in []countrec.Event, perBatch int, dir string, sink typed.Sink[countrec.KeyCount], opts *pebble.Options) error {
	h, err := openHandWith(dir, opts)
	if err != nil {
		return err
	}
	for start, end := range batches(len(in), perBatch) {
		if err := h.batch(in[start:end], end, sink); err != nil {
			h.db.Close()
			return err
		}
	}
	return h.db.Close()
}

// BenchmarkCountPerKey counts per key over the same pre-generated input,
// fed in micro-batches of 100k rows, with streamgen and with the
// hand-written loop, for 10k keys (1M events, each key 100 times) and 1M
// keys (2M events, each key twice: with Pebble's default options a batch
// over 1M keys is bound by point reads at ~40k events/s, so more events
// would take the run past two minutes; see README.md).
//
// Each of the b.N iterations processes the whole input once on a fresh,
// empty store in a new directory on disk (opening and closing the store is
// timed: it is part of a run, and small). The directory is made before
// and removed after the timed part. The MemoryStream is filled once,
// outside the timer: a new checkpoint starts reading it from the first
// row. b.N is 1 for most -benchtime values, since one iteration takes
// seconds; run with -benchtime 1x (or 3x for a steadier figure). The
// hand-written side logs the ratio of the two (with -count > 1, against
// the last streamgen run).
func BenchmarkCountPerKey(b *testing.B) {
	const perBatch = 100_000
	for _, c := range []struct{ keys, hits int }{{10_000, 100}, {1_000_000, 2}} {
		b.Run(fmt.Sprintf("keys=%d", c.keys), func(b *testing.B) {
			in := uniformInput(c.keys, c.hits, 1)
			var rate [2]float64
			b.Run("impl=streamgen", func(b *testing.B) {
				m := typed.NewMemoryStream[countrec.Event]("events", perBatch)
				m.Add(in...)
				rate[0] = benchRuns(b, len(in), func(dir string, sink *countSink) error {
					return runStreamgen(m, dir, sink)
				})
			})
			b.Run("impl=handwritten", func(b *testing.B) {
				rate[1] = benchRuns(b, len(in), func(dir string, sink *countSink) error {
					return runHandwritten(in, perBatch, dir, sink)
				})
				if rate[0] > 0 {
					target := "at most 1.25x its time"
					if c.keys >= 1_000_000 {
						target = "at least 3x its events/s"
					}
					b.Logf("streamgen takes %.2fx the time of the hand-written loop, %.2fx its events/s (target: %s)", rate[1]/rate[0], rate[0]/rate[1], target)
				}
			})
		})
	}
}

// benchRuns times b.N runs of run, each on a fresh directory, reports
// events/s and returns it.
func benchRuns(b *testing.B, events int, run func(dir string, sink *countSink) error) float64 {
	parent := b.TempDir()
	var outRows int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp(parent, "run")
		if err != nil {
			b.Fatal(err)
		}
		sink := &countSink{}
		b.StartTimer()
		if err := run(dir, sink); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		outRows = sink.rows
		os.RemoveAll(dir)
		b.StartTimer()
	}
	r := float64(events) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(r, "events/s")
	b.ReportMetric(float64(outRows), "outrows/run")
	return r
}

// TestCountPerKeyMatchesMap checks once that both implementations of the
// benchmark give the counts of a plain map, in their output rows and in
// their stores, and write the same number of output rows (one per key per
// batch it occurs in): with small batches, and with batches of the
// benchmark's 1M-key size (100k rows), which Pebble commits as memtables
// of their own.
func TestCountPerKeyMatchesMap(t *testing.T) {
	t.Run("batch=7000", func(t *testing.T) { countPerKeyMatchesMap(t, skewedInput(50_000, 5_000, 3), 7_000) })
	t.Run("batch=100000", func(t *testing.T) { countPerKeyMatchesMap(t, uniformInput(150_000, 2, 3), 100_000) })
}

func countPerKeyMatchesMap(t *testing.T, in []countrec.Event, perBatch int) {
	want := map[string]int64{}
	for _, e := range in {
		want[e.Key]++
	}

	// streamgen
	sgDir := t.TempDir()
	m := typed.NewMemoryStream[countrec.Event]("events", perBatch)
	m.Add(in...)
	sgSink := &countSink{latest: map[string]int64{}}
	if err := runStreamgen(m, sgDir, sgSink); err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "streamgen output", sgSink.latest, want)
	store, err := runtime.OpenStore(sgDir, runtime.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sgStored := map[string]int64{}
	sb := store.NewBatch()
	for k := range want {
		raw, ok, err := sb.Get(runtime.Var{}, []byte(k), nil)
		if err != nil || !ok || len(raw) == 0 || raw[0] != 1 {
			t.Fatalf("streamgen store: key %s: ok=%v err=%v row=%q", k, ok, err, raw)
		}
		var c countrec.Count
		if err := c.UnmarshalBinary(raw[1:]); err != nil {
			t.Fatal(err)
		}
		sgStored[k] = c.N
	}
	sb.Close()
	store.Close()
	sameCounts(t, "streamgen store", sgStored, want)

	// hand-written
	hwDir := t.TempDir()
	hwSink := &countSink{latest: map[string]int64{}}
	if err := runHandwritten(in, perBatch, hwDir, hwSink); err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "handwritten output", hwSink.latest, want)
	db, err := openPebble(hwDir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hwStored := map[string]int64{}
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: handPrefix, UpperBound: []byte("\x10\x00\x00\x00\x00\x00\x01")})
	if err != nil {
		t.Fatal(err)
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()[len(handPrefix):]
		n, w := binary.Uvarint(k)
		c, _ := binary.Varint(it.Value())
		hwStored[string(k[w:w+int(n)])] = c
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	sameCounts(t, "handwritten store", hwStored, want)
	v, closer, err := db.Get(handProgressKey)
	if err != nil || string(v) != strconv.Itoa(len(in)) {
		t.Fatalf("handwritten progress %q, %v; want %d", v, err, len(in))
	}
	closer.Close()

	// Both emit one row per key per batch the key occurs in.
	var rows int64
	for start, end := range batches(len(in), perBatch) {
		seen := map[string]bool{}
		for _, e := range in[start:end] {
			seen[e.Key] = true
		}
		rows += int64(len(seen))
	}
	if sgSink.rows != rows || hwSink.rows != rows {
		t.Fatalf("output rows: streamgen %d, handwritten %d, want %d", sgSink.rows, hwSink.rows, rows)
	}
}

func sameCounts(t *testing.T, what string, got, want map[string]int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d keys, want %d", what, len(got), len(want))
	}
	for k, w := range want {
		if got[k] != w {
			t.Fatalf("%s: key %s: %d, want %d", what, k, got[k], w)
		}
	}
}

// BenchmarkCountPerKeyLayers splits the gap between the two sides of
// BenchmarkCountPerKey into its layers, for the notes in README.md. With
// 10k keys: impl=store is the hand-written loop on streamgen's
// runtime.Store (an indexed Pebble batch read through, the value a
// countrec.Count, the progress as JSON) without the typed operator;
// impl=indexed is the hand-written loop on Pebble with an indexed batch
// read through, as runtime.Store does, instead of reads of the committed
// state and a write-only batch. With 10k and 1M keys, impl=cache128MB is
// the hand-written loop with a 128 MB Pebble block cache instead of the
// default 8 MB (which the memtables' reservations leave empty).
func BenchmarkCountPerKeyLayers(b *testing.B) {
	const perBatch = 100_000
	in := uniformInput(10_000, 100, 1)
	b.Run("keys=10000/impl=store", func(b *testing.B) {
		benchRuns(b, len(in), func(dir string, sink *countSink) error {
			return runOnStore(in, perBatch, dir, sink)
		})
	})
	b.Run("keys=10000/impl=indexed", func(b *testing.B) {
		benchRuns(b, len(in), func(dir string, sink *countSink) error {
			return runIndexed(in, perBatch, dir, sink)
		})
	})
	b.Run("keys=10000/impl=cache128MB", func(b *testing.B) {
		benchRuns(b, len(in), func(dir string, sink *countSink) error {
			return runHandwrittenWith(in, perBatch, dir, sink, &pebble.Options{CacheSize: 128 << 20})
		})
	})
	in1M := uniformInput(1_000_000, 2, 1)
	b.Run("keys=1000000/impl=cache128MB", func(b *testing.B) {
		benchRuns(b, len(in1M), func(dir string, sink *countSink) error {
			return runHandwrittenWith(in1M, perBatch, dir, sink, &pebble.Options{CacheSize: 128 << 20})
		})
	})
}

// runOnStore is runHandwritten on runtime.Store.
func runOnStore(in []countrec.Event, perBatch int, dir string, sink typed.Sink[countrec.KeyCount]) error {
	s, err := runtime.OpenStore(dir, runtime.StoreOptions{})
	if err != nil {
		return err
	}
	p, _, err := s.Progress()
	if err != nil {
		s.Close()
		return err
	}
	counts := map[string]int64{}
	var out []countrec.KeyCount
	var key, val []byte
	for start, end := range batches(len(in), perBatch) {
		clear(counts)
		for i := range in[start:end] {
			counts[in[start+i].Key]++
		}
		b := s.NewBatch()
		out = out[:0]
		for k, n := range counts {
			key = append(key[:0], k...)
			raw, ok, err := b.Get(runtime.Var{}, key, nil)
			if err != nil {
				b.Close()
				s.Close()
				return err
			}
			var c countrec.Count
			if ok {
				if err := c.UnmarshalBinary(raw); err != nil {
					b.Close()
					s.Close()
					return err
				}
			}
			c.N += n
			val, _ = c.AppendBinary(val[:0])
			if err := b.Put(runtime.Var{}, key, nil, val); err != nil {
				b.Close()
				s.Close()
				return err
			}
			out = append(out, countrec.KeyCount{Key: k, Count: c.N})
		}
		p.BatchID++
		if err := sink.Write(context.Background(), p.BatchID, out); err != nil {
			b.Close()
			s.Close()
			return err
		}
		p.Offsets = map[string]json.RawMessage{"memory:events": json.RawMessage(strconv.Itoa(end))}
		if err := s.Commit(b, p); err != nil {
			s.Close()
			return err
		}
	}
	return s.Close()
}

// runIndexed is runHandwritten with an indexed batch, read through.
func runIndexed(in []countrec.Event, perBatch int, dir string, sink typed.Sink[countrec.KeyCount]) error {
	h, err := openHand(dir)
	if err != nil {
		return err
	}
	defer h.db.Close()
	for start, end := range batches(len(in), perBatch) {
		clear(h.counts)
		for i := range in[start:end] {
			h.counts[in[start+i].Key]++
		}
		b := h.db.NewIndexedBatch()
		h.out = h.out[:0]
		for k, n := range h.counts {
			h.key = handKey(h.key[:0], k)
			v, closer, err := b.Get(h.key)
			switch {
			case err == nil:
				old, _ := binary.Varint(v)
				closer.Close()
				n += old
			case !errors.Is(err, pebble.ErrNotFound):
				b.Close()
				return err
			}
			h.val = binary.AppendVarint(h.val[:0], n)
			if err := b.Set(h.key, h.val, nil); err != nil {
				b.Close()
				return err
			}
			h.out = append(h.out, countrec.KeyCount{Key: k, Count: n})
		}
		h.batchID++
		if err := sink.Write(context.Background(), h.batchID, h.out); err != nil {
			b.Close()
			return err
		}
		h.val = strconv.AppendInt(h.val[:0], int64(end), 10)
		b.Set(handProgressKey, h.val, nil)
		err = b.Commit(pebble.Sync)
		b.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// sameBatches keeps a query's batches those its source plans
// (MaxBatchStateBytes off), so that it runs the batches of the
// hand-written loop it is measured beside.
var sameBatches = runtime.MaxBatchStateBytes(-1)
