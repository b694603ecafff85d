package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/streamgen/streamgen/bench/joinrec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// A stream-static join: each row of a stream of 1M rows with its key's row
// of a table of joinKeys keys (a left outer join: a row whose key the
// table lacks keeps zero attributes), against a loop that looks each row
// up in a Go map and commits each micro-batch's offset in one synced
// Pebble write, as streamgen does.

// tableRows returns the static table: one row per key but for every
// tenth key, which the table lacks.
func tableRows() []joinrec.Info {
	rows := make([]joinrec.Info, 0, joinKeys)
	for i := range joinKeys {
		if i%10 == 9 {
			continue
		}
		rows = append(rows, joinrec.Info{Key: keyName(i), Group: "group-" + strconv.Itoa(i%97), Score: int64(i)})
	}
	return rows
}

// streamRows returns n rows over joinKeys keys, in random key order.
func streamRows(n int, seed uint64) []joinrec.Row {
	r := rand.New(rand.NewPCG(seed, seed))
	names := make([]string, joinKeys)
	for i := range names {
		names[i] = keyName(i)
	}
	rows := make([]joinrec.Row, n)
	for i := range rows {
		rows[i] = joinrec.Row{Key: names[r.IntN(joinKeys)], Time: joinBase + int64(i)*int64(1e6), Value: int64(i)}
	}
	return rows
}

// enrichedSink counts the joined rows and, optionally, keeps them.
type enrichedSink struct {
	rows int64
	keep bool
	all  []joinrec.Enriched
}

func (s *enrichedSink) Write(_ context.Context, _ int64, rows []joinrec.Enriched) error {
	s.rows += int64(len(rows))
	if s.keep {
		s.all = append(s.all, rows...)
	}
	return nil
}

// enrich is the joined row of both joins.
func enrich(r *joinrec.Row, info *joinrec.Info) joinrec.Enriched {
	e := joinrec.Enriched{Key: r.Key, Value: r.Value}
	if info != nil {
		e.Group, e.Score = info.Group, info.Score
	}
	return e
}

// runTableJoinStreamgen joins the stream with the table in a streamgen
// query, to the end of the stream, on a checkpoint in dir.
func runTableJoinStreamgen(stream *typed.MemoryStream[joinrec.Row], table []joinrec.Info, dir string, sink typed.Sink[joinrec.Enriched]) error {
	t := typed.TableOf(table, func(i *joinrec.Info) string { return i.Key })
	joined := typed.JoinTable(typed.FromMemory(stream), func(r *joinrec.Row) string { return r.Key }, t, typed.LeftOuter,
		func(j typed.Joined[string, joinrec.Row, joinrec.Info]) joinrec.Enriched {
			return enrich(j.Left, j.Right)
		})
	q, err := typed.WriteTo(joined, sink).Start(context.Background(), runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// runTableJoinMap joins the stream with the table through a Go map,
// perBatch rows a micro-batch, each batch's rows written to sink and its
// offset committed in a synced Pebble write.
func runTableJoinMap(rows []joinrec.Row, table []joinrec.Info, perBatch int, dir string, sink typed.Sink[joinrec.Enriched]) error {
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		return err
	}
	byKey := make(map[string]*joinrec.Info, len(table))
	for i := range table {
		byKey[table[i].Key] = &table[i]
	}
	var out []joinrec.Enriched
	var offset []byte
	id := int64(0)
	for start, end := range batches(len(rows), perBatch) {
		out = out[:0]
		for i := start; i < end; i++ {
			out = append(out, enrich(&rows[i], byKey[rows[i].Key]))
		}
		if err := sink.Write(context.Background(), id, out); err != nil {
			db.Close()
			return err
		}
		id++
		offset = strconv.AppendInt(offset[:0], int64(end), 10)
		if err := db.Set(handProgressKey, offset, pebble.Sync); err != nil {
			db.Close()
			return err
		}
	}
	return db.Close()
}

// BenchmarkTableJoin joins 1M rows with a table of 100k keys, 100k rows a
// micro-batch, with streamgen and with the Go map loop, on fresh stores
// on disk. The loop's side logs the ratio of the two.
func BenchmarkTableJoin(b *testing.B) {
	const rows, perBatch = 1_000_000, 100_000
	input, table := streamRows(rows, 5), tableRows()
	var rate [2]float64
	b.Run("impl=streamgen", func(b *testing.B) {
		s := typed.NewMemoryStream[joinrec.Row]("orders", perBatch)
		s.Add(input...)
		rate[0] = benchRows(b, rows, func(dir string) (int64, error) {
			sink := &enrichedSink{}
			err := runTableJoinStreamgen(s, table, dir, sink)
			return sink.rows, err
		})
	})
	b.Run("impl=map", func(b *testing.B) {
		input := slices.Clone(input) // as BenchmarkStreamJoin
		rate[1] = benchRows(b, rows, func(dir string) (int64, error) {
			sink := &enrichedSink{}
			err := runTableJoinMap(input, table, perBatch, dir, sink)
			return sink.rows, err
		})
		if rate[0] > 0 {
			b.Logf("streamgen takes %.2fx the time of the Go map loop (target: at most 1.2x)", rate[1]/rate[0])
		}
	})
}

// benchRows times b.N runs of run, each on a fresh directory, reports
// events/s and returns it.
func benchRows(b *testing.B, events int, run func(dir string) (int64, error)) float64 {
	return benchPairs(b, events, func(dir string, _ *pairSink) error {
		n, err := run(dir)
		if err == nil && n != int64(events) {
			err = fmt.Errorf("%d rows out of %d in", n, events)
		}
		return err
	})
}

// TestTableJoinMatchesALoop checks once that both joins of the benchmark
// write the rows of a plain loop over the input, on a smaller input.
func TestTableJoinMatchesALoop(t *testing.T) {
	const rows, perBatch = 20_000, 3_000
	input, table := streamRows(rows, 6), tableRows()
	var want []joinrec.Enriched
	for i := range input {
		// The table is in key order: its row of the key, if any.
		var info *joinrec.Info
		j, found := slices.BinarySearchFunc(table, input[i].Key, func(t joinrec.Info, k string) int { return strings.Compare(t.Key, k) })
		if found {
			info = &table[j]
		}
		want = append(want, enrich(&input[i], info))
	}
	order := func(rows []joinrec.Enriched) []joinrec.Enriched {
		rows = slices.Clone(rows)
		slices.SortFunc(rows, func(a, b joinrec.Enriched) int { return int(a.Value - b.Value) })
		return rows
	}
	s := typed.NewMemoryStream[joinrec.Row]("orders", perBatch)
	s.Add(input...)
	got := &enrichedSink{keep: true}
	if err := runTableJoinStreamgen(s, table, t.TempDir(), got); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order(got.all), want) {
		t.Fatalf("streamgen: %d rows differ from the loop's %d", len(got.all), len(want))
	}
	m := &enrichedSink{keep: true}
	if err := runTableJoinMap(input, table, perBatch, t.TempDir(), m); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(order(m.all), want) {
		t.Fatalf("map loop: %d rows differ from the loop's %d", len(m.all), len(want))
	}
}
