package bench

import (
	"context"
	"encoding/binary"
	"slices"
	"strconv"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/streamgen/streamgen/bench/joinrec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// A join of two tables kept up to date by streams (typed.JoinTables,
// Kafka Streams' KTable-KTable join), Inner, over 100k keys, against a
// hand-written loop over Pebble that keeps each table's latest row per
// key, applies a micro-batch's updates (the left table's first, as a
// join without event times does), writes the change each makes, and
// commits the batch with its offsets in one synced write.

// tableInput is joinInput with every tenth row a tombstone (a negative
// value).
func tableInput(n int, seed uint64) []joinrec.Row {
	rows := joinInput(n, seed)
	for i := 0; i < n; i += 10 {
		rows[i].Value = -1
	}
	return rows
}

func rowDeleted(r *joinrec.Row) bool { return r.Value < 0 }

// removedPair is the row that says a key's row of the join is gone.
func removedPair(key string) joinrec.Pair { return joinrec.Pair{Key: key, Left: -1, Right: -1} }

// runTablesStreamgen joins the tables that left and right keep with a
// streamgen query, to the end of the input, on a checkpoint in dir.
func runTablesStreamgen(left, right *typed.MemoryStream[joinrec.Row], dir string, sink typed.Sink[joinrec.Pair]) error {
	key := func(r *joinrec.Row) string { return r.Key }
	joined := typed.JoinTables(typed.TableUpdates(typed.FromMemory(left), key, rowDeleted), typed.TableUpdates(typed.FromMemory(right), key, rowDeleted), typed.Inner,
		func(c typed.TableChange[string, joinrec.Row, joinrec.Row]) joinrec.Pair {
			if c.Removed {
				return removedPair(c.Key)
			}
			return joinrec.Pair{Key: c.Key, Left: c.Left.Value, Right: c.Right.Value}
		})
	q, err := typed.WriteTo(joined, sink).Start(context.Background(), runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// handTables is the hand-written join's store and buffers: a table's row
// of a key under (side, key), its value as 8 bytes.
type handTables struct {
	db  *pebble.DB
	key []byte
	val []byte
	out []joinrec.Pair
	// The batch's rows by side and key (has: present), read from the
	// store at their first use.
	rows [2]map[string]handRow
}

type handRow struct {
	value int64
	has   bool
	dirty bool
}

func (h *handTables) row(side int, key string) (handRow, error) {
	if r, ok := h.rows[side][key]; ok {
		return r, nil
	}
	h.key = append(append(h.key[:0], byte('L'+side)), key...)
	v, closer, err := h.db.Get(h.key)
	var r handRow
	switch {
	case err == pebble.ErrNotFound:
	case err != nil:
		return handRow{}, err
	default:
		r = handRow{value: int64(binary.BigEndian.Uint64(v)), has: true}
		closer.Close()
	}
	h.rows[side][key] = r
	return r, nil
}

func (h *handTables) update(side int, u *joinrec.Row) error {
	l, err := h.row(0, u.Key)
	if err != nil {
		return err
	}
	r, err := h.row(1, u.Key)
	if err != nil {
		return err
	}
	was := l.has && r.has
	now := handRow{value: u.Value, has: !rowDeleted(u), dirty: true}
	if side == 0 {
		l = now
	} else {
		r = now
	}
	h.rows[side][u.Key] = now
	switch {
	case l.has && r.has:
		h.out = append(h.out, joinrec.Pair{Key: u.Key, Left: l.value, Right: r.value})
	case was:
		h.out = append(h.out, removedPair(u.Key))
	}
	return nil
}

func (h *handTables) batch(id int64, left, right []joinrec.Row, end int, sink typed.Sink[joinrec.Pair]) error {
	for side := range h.rows {
		if h.rows[side] == nil {
			h.rows[side] = map[string]handRow{}
		}
		clear(h.rows[side])
	}
	h.out = h.out[:0]
	for i := range left {
		if err := h.update(0, &left[i]); err != nil {
			return err
		}
	}
	for i := range right {
		if err := h.update(1, &right[i]); err != nil {
			return err
		}
	}
	if err := sink.Write(context.Background(), id, h.out); err != nil {
		return err
	}
	b := h.db.NewBatch()
	defer b.Close()
	for side, rows := range h.rows {
		for key, r := range rows {
			if !r.dirty {
				continue
			}
			h.key = append(append(h.key[:0], byte('L'+side)), key...)
			var err error
			if r.has {
				err = b.Set(h.key, binary.BigEndian.AppendUint64(h.val[:0], uint64(r.value)), nil)
			} else {
				err = b.Delete(h.key, nil)
			}
			if err != nil {
				return err
			}
		}
	}
	h.val = strconv.AppendInt(h.val[:0], int64(end), 10)
	if err := b.Set(handProgressKey, h.val, nil); err != nil {
		return err
	}
	return b.Commit(pebble.Sync)
}

// runTablesHandwritten joins the tables with the hand-written loop on a
// Pebble store in dir, perBatch updates of each table a micro-batch.
func runTablesHandwritten(left, right []joinrec.Row, perBatch int, dir string, sink typed.Sink[joinrec.Pair]) error {
	opts := &pebble.Options{CacheSize: 128 << 20, Logger: quietLogger{}}
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open(dir, opts)
	if err != nil {
		return err
	}
	h := &handTables{db: db}
	var id int64
	for start, end := range batches(len(left), perBatch) {
		if err := h.batch(id, left[start:end], right[start:min(end, len(right))], end, sink); err != nil {
			db.Close()
			return err
		}
		id++
	}
	return db.Close()
}

// BenchmarkTablesJoin joins two tables kept up to date by 1M updates
// each over 100k keys, 100k updates of each a micro-batch, with
// streamgen and with the hand-written loop, on fresh stores on disk
// (see BenchmarkCountPerKey for how a run is timed). The hand-written
// side logs the ratio of the two.
func BenchmarkTablesJoin(b *testing.B) {
	const rows, perBatch = 1_000_000, 100_000
	left, right := tableInput(rows, 3), tableInput(rows, 4)
	var rate [2]float64
	b.Run("impl=streamgen", func(b *testing.B) {
		l := typed.NewMemoryStream[joinrec.Row]("left", perBatch)
		r := typed.NewMemoryStream[joinrec.Row]("right", perBatch)
		l.Add(left...)
		r.Add(right...)
		rate[0] = benchPairs(b, 2*rows, func(dir string, sink *pairSink) error { return runTablesStreamgen(l, r, dir, sink) })
	})
	b.Run("impl=handwritten", func(b *testing.B) {
		left, right := slices.Clone(left), slices.Clone(right)
		rate[1] = benchPairs(b, 2*rows, func(dir string, sink *pairSink) error {
			return runTablesHandwritten(left, right, perBatch, dir, sink)
		})
		if rate[0] > 0 {
			b.Logf("streamgen takes %.2fx the time of the hand-written loop", rate[1]/rate[0])
		}
	})
}

// TestTablesJoinMatchesTheLoop checks once that both joins of the
// benchmark write the same changes, key by key, in the same order, on a
// smaller input.
func TestTablesJoinMatchesTheLoop(t *testing.T) {
	const rows, perBatch = 30_000, 4_000
	left, right := tableInput(rows, 3), tableInput(rows, 4)
	l := typed.NewMemoryStream[joinrec.Row]("left", perBatch)
	r := typed.NewMemoryStream[joinrec.Row]("right", perBatch)
	l.Add(left...)
	r.Add(right...)
	got, want := &pairSink{keep: true}, &pairSink{keep: true}
	if err := runTablesStreamgen(l, r, t.TempDir(), got); err != nil {
		t.Fatal(err)
	}
	if err := runTablesHandwritten(left, right, perBatch, t.TempDir(), want); err != nil {
		t.Fatal(err)
	}
	byKey := func(pairs []joinrec.Pair) map[string][]joinrec.Pair {
		m := map[string][]joinrec.Pair{}
		for _, p := range pairs {
			m[p.Key] = append(m[p.Key], p)
		}
		return m
	}
	g, w := byKey(got.all), byKey(want.all)
	if len(got.all) != len(want.all) || len(g) != len(w) {
		t.Fatalf("%d changes of %d keys, want %d of %d", len(got.all), len(g), len(want.all), len(w))
	}
	for k, changes := range w {
		if !slices.Equal(g[k], changes) {
			t.Fatalf("key %s: changes %v, want %v", k, g[k], changes)
		}
	}
}
