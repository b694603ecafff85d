package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/streamgen/streamgen/bench/windowrec"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Event-time windows and deduplication, streamgen's aggregation operators
// side by side with a hand-written loop over the same micro-batches that
// keeps the batch's counts (or the keys it has seen) in a Go map and
// writes them to Pebble once per batch, with the same durability (one
// synced commit per batch holding the state, the offset and the
// watermark) and the same bounded state (what the watermark closes is
// deleted). As in stateful_test.go, the hand-written loop is the floor
// the design can reach.

const (
	// windowSize is the tumbling windows' size; windowDelay the
	// watermark's delay in the window benchmark.
	windowSize  = 10 * time.Minute
	windowDelay = 10 * time.Minute
	// dedupDelay is the watermark's delay in the deduplication benchmark:
	// a copy comes at most 1000 readings (about 36 s) after its original,
	// so none is late.
	dedupDelay = time.Minute
	// readingBatch is the rows per micro-batch of both benchmarks.
	readingBatch = 100_000
)

var (
	benchUsers      = []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"}
	benchDevices    = []string{"nexus4_1", "nexus4_2", "s3_1", "s3_2", "gear_1", "gear_2"}
	benchModels     = []string{"nexus4", "nexus4", "s3", "s3", "gear", "gear"}
	benchActivities = []string{"stand", "sit", "walk", "bike", "stairsup", "stairsdown", "null"}
)

// sensorRows returns n readings of 9 users in strictly increasing event
// time, 36 ms apart on average (1M readings span 10 hours: 60 windows of
// 10 minutes), from seed. The strings are shared between readings.
func sensorRows(n int, seed uint64) []sensor.Event {
	r := rand.New(rand.NewPCG(seed, seed))
	at := int64(1424686733000000000) // ns, the reference's data set's first day
	out := make([]sensor.Event, n)
	for i := range out {
		at += 1 + r.Int64N(72_000_000)
		d := r.IntN(len(benchDevices))
		out[i] = sensor.Event{
			ArrivalTime:  at/1e6 + r.Int64N(50),
			CreationTime: at,
			Device:       benchDevices[d],
			Index:        int64(i),
			Model:        benchModels[d],
			User:         benchUsers[r.IntN(len(benchUsers))],
			Activity:     benchActivities[r.IntN(len(benchActivities))],
			X:            r.NormFloat64() / 100,
			Y:            r.NormFloat64() / 100,
			Z:            r.NormFloat64() / 100,
		}
	}
	return out
}

// withCopies returns in with a copy of every ninth reading (a resend: the
// same reading, arrived 1.5 s later) 1 to 1000 readings after it: a tenth
// of the result are copies when len(in) is a multiple of 9.
func withCopies(in []sensor.Event, seed uint64) []sensor.Event {
	r := rand.New(rand.NewPCG(seed, seed))
	later := map[int][]sensor.Event{} // copies, by the reading they follow
	out := make([]sensor.Event, 0, len(in)+len(in)/9)
	for i, e := range in {
		out = append(out, e)
		out = append(out, later[i]...)
		delete(later, i)
		if i%9 == 4 {
			c := e
			c.ArrivalTime += 1500
			j := i + 1 + r.IntN(1000)
			later[j] = append(later[j], c)
		}
	}
	for _, j := range slices.Sorted(maps.Keys(later)) {
		out = append(out, later[j]...)
	}
	return out
}

// readingTime is a reading's event time.
func readingTime(e *sensor.Event) time.Time { return time.Unix(0, e.CreationTime) }

// userWindowCount is the window benchmark's output row.
type userWindowCount struct {
	Window typed.Window
	User   string
	Count  int64
}

// rowSink counts the rows written and hands them to keep, when set. Both
// implementations write to it.
type rowSink[T any] struct {
	rows int64
	keep func(rows []T)
}

func (s *rowSink[T]) Write(_ context.Context, _ int64, rows []T) error {
	s.rows += int64(len(rows))
	if s.keep != nil {
		s.keep(rows)
	}
	return nil
}

// startAvailableNow runs w to the end of its input on a checkpoint in dir,
// with opts.
func startAvailableNow[T any](w *typed.Writer[T], dir string, opts ...runtime.Option) error {
	opts = append([]runtime.Option{runtime.Checkpoint(dir), sameBatches, runtime.WithTrigger(runtime.AvailableNow())}, opts...)
	q, err := w.Start(context.Background(), opts...)
	if err != nil {
		return err
	}
	return q.AwaitTermination()
}

// windowsStreamgen counts the readings of m per 10-minute window and user
// with a streamgen query: watermark, GroupByWindow, AggregateWindows with
// Count, Update mode.
func windowsStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
	byWindow := typed.GroupByWindow(s, readingTime, typed.Tumbling(windowSize), func(e *sensor.Event) string { return e.User })
	counts := typed.AggregateWindows(byWindow, typed.Count[sensor.Event](), func(w typed.Window, user string, n int64) userWindowCount {
		return userWindowCount{Window: w, User: user, Count: n}
	})
	return startAvailableNow(typed.WriteTo(counts, sink).OutputMode(typed.Update), dir)
}

// cumulateStreamgen counts m's readings per user in the windows of
// Cumulate(windowSize/10, windowSize): each 10-minute window of
// windowsStreamgen, and the nine that end every minute before it, all
// starting with it (ten windows a reading, where the tumbling windows
// have one).
func cumulateStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
	byWindow := typed.GroupByWindow(s, readingTime, typed.Cumulate(windowSize/10, windowSize), func(e *sensor.Event) string { return e.User })
	counts := typed.AggregateWindows(byWindow, typed.Count[sensor.Event](), func(w typed.Window, user string, n int64) userWindowCount {
		return userWindowCount{Window: w, User: user, Count: n}
	})
	return startAvailableNow(typed.WriteTo(counts, sink).OutputMode(typed.Update), dir)
}

// slidingStreamgen counts m's readings per user in the windows of
// Sliding(windowSize, windowSize/10): 10-minute windows, one starting
// every minute (ten windows a reading, where the tumbling windows have
// one), in Update mode as windowsStreamgen, and in Append mode.
func slidingStreamgen(mode typed.OutputMode) func(*typed.MemoryStream[sensor.Event], string, typed.Sink[userWindowCount]) error {
	return func(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
		s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
		byWindow := typed.GroupByWindow(s, readingTime, typed.Sliding(windowSize, windowSize/10), func(e *sensor.Event) string { return e.User })
		counts := typed.AggregateWindows(byWindow, typed.Count[sensor.Event](), func(w typed.Window, user string, n int64) userWindowCount {
			return userWindowCount{Window: w, User: user, Count: n}
		})
		return startAvailableNow(typed.WriteTo(counts, sink).OutputMode(mode), dir)
	}
}

// distinctStreamgen estimates, per user and 10-minute window, how many
// distinct indexes m's readings have (ApproxCountDistinct at Spark's
// default rsd, 0.05: a sketch of 512 registers per window and user), as
// windowsStreamgen counts them.
func distinctStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
	byWindow := typed.GroupByWindow(s, readingTime, typed.Tumbling(windowSize), func(e *sensor.Event) string { return e.User })
	index := func(e *sensor.Event) string { return strconv.FormatInt(e.Index, 10) }
	counts := typed.AggregateWindows(byWindow, typed.ApproxCountDistinct(index, 0.05), func(w typed.Window, user string, n int64) userWindowCount {
		return userWindowCount{Window: w, User: user, Count: n}
	})
	return startAvailableNow(typed.WriteTo(counts, sink).OutputMode(typed.Update), dir)
}

// percentileStreamgen estimates, per user and 10-minute window, the
// median and the 99th percentile of m's readings' x (ApproxPercentile at
// accuracy 1,000: within 0.1% of each rank), as windowsStreamgen counts
// them; the row's count is the median, rounded.
func percentileStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
	byWindow := typed.GroupByWindow(s, readingTime, typed.Tumbling(windowSize), func(e *sensor.Event) string { return e.User })
	x := func(e *sensor.Event) float64 { return e.X }
	counts := typed.AggregateWindows(byWindow, typed.ApproxPercentile(x, []float64{0.5, 0.99}, 1000), func(w typed.Window, user string, p []float64) userWindowCount {
		return userWindowCount{Window: w, User: user, Count: int64(math.Round(p[0]))}
	})
	return startAvailableNow(typed.WriteTo(counts, sink).OutputMode(typed.Update), dir)
}

// reduceStreamgen keeps, per user and 10-minute window, the reading of
// the greatest x (Reduce: Kafka Streams' reduce, Spark's reduceGroups),
// its value kept encoded, decoded and encoded again at each reading.
func reduceStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
	byWindow := typed.GroupByWindow(s, readingTime, typed.Tumbling(windowSize), func(e *sensor.Event) string { return e.User })
	greatest := func(value, row sensor.Event) sensor.Event {
		if row.X > value.X {
			return row
		}
		return value
	}
	counts := typed.AggregateWindows(byWindow, typed.Reduce(greatest), func(w typed.Window, user string, e sensor.Event) userWindowCount {
		return userWindowCount{Window: w, User: user, Count: int64(math.Round(e.X))}
	})
	return startAvailableNow(typed.WriteTo(counts, sink).OutputMode(typed.Update), dir)
}

// dedupStreamgen drops the copies of m's readings with a streamgen query:
// watermark, DropDuplicates on the user and the event time, with opts.
func dedupStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[sensor.Event], opts ...runtime.Option) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, dedupDelay)
	distinct := typed.DropDuplicates(s, func(e *sensor.Event) windowrec.Reading {
		return windowrec.Reading{User: e.User, CreationTime: e.CreationTime}
	})
	return startAvailableNow(typed.WriteTo(distinct, sink), dir, opts...)
}

// dedupTimedStreamgen is dedupStreamgen with DropDuplicatesWithEventTime
// on the user: the same rows are copies (same user, same event time), and
// the state is ordered by event time.
func dedupTimedStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[sensor.Event], opts ...runtime.Option) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, dedupDelay)
	distinct := typed.DropDuplicatesWithEventTime(s, func(e *sensor.Event) string { return e.User })
	return startAvailableNow(typed.WriteTo(distinct, sink), dir, opts...)
}

// The hand-written loops' keys have the prefix of handKey (streamgen's
// layout of operator 0's state), then the event time or the window's
// start and end, as 8 big-endian bytes with the sign flipped (so that
// keys sort by time, as streamgen's windowed keys do), then the user.

func appendTime(b []byte, ns int64) []byte { return binary.BigEndian.AppendUint64(b, uint64(ns)^1<<63) }

func handWindowKey(b []byte, start int64, user string) []byte {
	b = append(b, handPrefix...)
	b = appendTime(b, start)
	b = appendTime(b, start+int64(windowSize))
	return append(b, user...)
}

func handReadingKey(b []byte, at int64, user string) []byte {
	b = append(b, handPrefix...)
	b = appendTime(b, at)
	return append(b, user...)
}

// handProgress stages the offset and the watermark, as a query commits
// them with the state.
func handProgress(b *pebble.Batch, buf []byte, end int, watermark int64) ([]byte, error) {
	buf = strconv.AppendInt(buf[:0], int64(end), 10)
	buf = append(buf, ' ')
	buf = strconv.AppendInt(buf, watermark, 10)
	return buf, b.Set(handProgressKey, buf, nil)
}

// windowGroup is a window (by its start) and a user: the hand-written
// loop's grouping key.
type windowGroup struct {
	start int64
	user  string
}

// windowsHandwritten counts in per window and user with the hand-written
// loop on a Pebble store in dir. Per batch: the watermark is the newest
// event time of the batches before less the delay; rows at or before it
// are dropped; each other row adds one to its window's count in a Go map;
// each window of the batch reads its committed count, adds, stages the new
// count and an output row (Update mode); the windows whose end the
// watermark has reached are deleted (a range deletion: the keys sort by
// window); the sink gets the rows, and the state, offset and watermark
// commit in one synced write.
func windowsHandwritten(in []sensor.Event, perBatch int, dir string, sink typed.Sink[userWindowCount]) error {
	h, err := openHandWith(dir, nil)
	if err != nil {
		return err
	}
	defer h.db.Close()
	size := int64(windowSize)
	counts := map[windowGroup]int64{}
	var out []userWindowCount
	var key, low, high []byte
	// The batch's watermark, and the one the batch before ran with, which
	// rows are late by (0: none yet).
	newest, watermark, lateBy := int64(0), int64(0), int64(0)
	for start, end := range batches(len(in), perBatch) {
		clear(counts)
		for i := range in[start:end] {
			e := &in[start+i]
			t := e.CreationTime
			newest = max(newest, t)
			if lateBy != 0 && t <= lateBy {
				continue // late
			}
			counts[windowGroup{t - t%size, e.User}]++ // t > 0: % is the modulus
		}
		b := h.db.NewBatch()
		out = out[:0]
		for g, n := range counts {
			key = handWindowKey(key[:0], g.start, g.user)
			v, closer, err := h.db.Get(key)
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
			if err := b.Set(key, h.val, nil); err != nil {
				b.Close()
				return err
			}
			out = append(out, userWindowCount{
				Window: typed.Window{Start: time.Unix(0, g.start).UTC(), End: time.Unix(0, g.start+size).UTC()},
				User:   g.user, Count: n})
		}
		if watermark != 0 {
			// Windows with end <= watermark, that is start < watermark -
			// size + 1.
			low = handWindowKey(low[:0], -1<<63, "")
			high = handWindowKey(high[:0], watermark-size+1, "")
			if err := b.DeleteRange(low, high, nil); err != nil {
				b.Close()
				return err
			}
		}
		h.batchID++
		if err := sink.Write(context.Background(), h.batchID, out); err != nil {
			b.Close()
			return err
		}
		lateBy, watermark = watermark, newest-int64(windowDelay)
		if h.val, err = handProgress(b, h.val, end, watermark); err != nil {
			b.Close()
			return err
		}
		err = b.Commit(pebble.Sync)
		b.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// readingGroup is a reading's key in the hand-written loop's map.
type readingGroup struct {
	at   int64
	user string
}

// dedupHandwritten drops the copies in in with the hand-written loop on a
// Pebble store in dir. Per batch: rows at or before the watermark are
// dropped; a row whose key the batch has seen (a Go map) is a copy; a row
// whose event time is not past the newest of the batches before may copy
// a reading of an earlier batch, and is looked up in Pebble (a later one
// cannot: its key holds its time); the others are written to the sink and
// their keys staged; the keys the watermark has reached are deleted (a
// range deletion: the keys sort by time), and the keys, offset and
// watermark commit in one synced write.
func dedupHandwritten(in []sensor.Event, perBatch int, dir string, sink typed.Sink[sensor.Event]) error {
	h, err := openHandWith(dir, nil)
	if err != nil {
		return err
	}
	defer h.db.Close()
	seen := map[readingGroup]struct{}{}
	var out []sensor.Event
	var key, low, high []byte
	// The batch's watermark, and the one the batch before ran with, which
	// rows are late by (0: none yet).
	newest, watermark, lateBy := int64(0), int64(0), int64(0)
	for start, end := range batches(len(in), perBatch) {
		clear(seen)
		b := h.db.NewBatch()
		out = out[:0]
		before := newest // the newest event time of the batches before
		for i := range in[start:end] {
			e := &in[start+i]
			t := e.CreationTime
			newest = max(newest, t)
			if lateBy != 0 && t <= lateBy {
				continue // late
			}
			g := readingGroup{t, e.User}
			if _, dup := seen[g]; dup {
				continue
			}
			seen[g] = struct{}{}
			key = handReadingKey(key[:0], t, e.User)
			if t <= before {
				_, closer, err := h.db.Get(key)
				if err == nil {
					closer.Close()
					continue // a copy of a reading of an earlier batch
				}
				if !errors.Is(err, pebble.ErrNotFound) {
					b.Close()
					return err
				}
			}
			if err := b.Set(key, nil, nil); err != nil {
				b.Close()
				return err
			}
			out = append(out, *e)
		}
		if watermark != 0 {
			low = handReadingKey(low[:0], -1<<63, "")
			high = handReadingKey(high[:0], watermark+1, "")
			if err := b.DeleteRange(low, high, nil); err != nil {
				b.Close()
				return err
			}
		}
		h.batchID++
		if err := sink.Write(context.Background(), h.batchID, out); err != nil {
			b.Close()
			return err
		}
		lateBy, watermark = watermark, newest-int64(dedupDelay)
		if h.val, err = handProgress(b, h.val, end, watermark); err != nil {
			b.Close()
			return err
		}
		err = b.Commit(pebble.Sync)
		b.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkWindowCounts counts 1M sensor readings (9 users, increasing
// event time over 10 hours) per tumbling 10-minute window and user, in
// micro-batches of 100k rows, with streamgen (a 10-minute watermark,
// GroupByWindow, AggregateWindows with Count, Update mode, AvailableNow,
// a checkpoint on disk) and with the hand-written loop. As in
// BenchmarkCountPerKey, each iteration runs the whole input on a fresh
// store; run with -benchtime 1x or 3x, and alternate the two sides by
// running the test binary repeatedly with -test.count 1 (see README.md).
// The hand-written side logs the ratio.
func BenchmarkWindowCounts(b *testing.B) {
	in := sensorRows(1_000_000, 1)
	var rate [2]float64
	b.Run("impl=streamgen", func(b *testing.B) {
		m := typed.NewMemoryStream[sensor.Event]("readings", readingBatch)
		m.Add(in...)
		rate[0] = benchTimed(b, len(in), func(dir string) (int64, error) {
			sink := &rowSink[userWindowCount]{}
			err := windowsStreamgen(m, dir, sink)
			return sink.rows, err
		})
	})
	b.Run("impl=handwritten", func(b *testing.B) {
		// Its own copy of the rows, as the memory stream has: the same
		// heap for the collector to mark on both sides.
		rows := slices.Clone(in)
		rate[1] = benchTimed(b, len(in), func(dir string) (int64, error) {
			sink := &rowSink[userWindowCount]{}
			err := windowsHandwritten(rows, readingBatch, dir, sink)
			return sink.rows, err
		})
		if rate[0] > 0 {
			b.Logf("streamgen takes %.2fx the time of the hand-written loop (target: at most 1.5x)", rate[1]/rate[0])
		}
	})
}

// timeDifferenceStreamgen counts the readings of m per user in the
// windows of a time difference of 1 s (Kafka Streams' sliding windows:
// about three readings of a user within one), with the watermark's
// delay of windowDelay, in Append mode: each window written once, when
// the watermark closes it.
func timeDifferenceStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
	byWindow := typed.GroupByWindow(s, readingTime, typed.TimeDifference(time.Second), func(e *sensor.Event) string { return e.User })
	counts := typed.AggregateWindows(byWindow, typed.Count[sensor.Event](), func(w typed.Window, user string, n int64) userWindowCount {
		return userWindowCount{Window: w, User: user, Count: n}
	})
	return startAvailableNow(typed.WriteTo(counts, sink).OutputMode(typed.Append), dir)
}

// BenchmarkTimeDifferenceCounts counts BenchmarkWindowCounts' 1M readings
// per user in the windows of a time difference of 1 s, with streamgen,
// side by side with streamgen's count in 10-minute tumbling windows on
// the same readings: what Kafka Streams' sliding windows cost beside the
// windows Spark has. A window is made for each distinct set of a user's
// readings within 1 s of one another, about two a reading, so the
// sliding side writes about 2M rows where the tumbling one writes 540.
// As BenchmarkWindowCounts, run with -benchtime 1x or 3x; the second
// side logs the ratio.
func BenchmarkTimeDifferenceCounts(b *testing.B) {
	benchReadingsTwoWays(b, readingsSide{"windows=tumbling", windowsStreamgen}, readingsSide{"windows=timedifference", timeDifferenceStreamgen},
		func(first, second float64) string {
			return fmt.Sprintf("windows of a time difference take %.2fx the time of tumbling windows", first/second)
		})
}

// BenchmarkCumulateCounts counts BenchmarkWindowCounts' 1M readings per
// user in cumulative windows (Flink's CUMULATE: 10-minute periods, a
// window ending every minute, ten windows a reading), side by side with
// the 10-minute tumbling windows (one a reading) on the same readings. As
// BenchmarkWindowCounts, run with -benchtime 1x or 3x; the second side
// logs the ratio.
func BenchmarkCumulateCounts(b *testing.B) {
	benchReadingsTwoWays(b, readingsSide{"windows=tumbling", windowsStreamgen}, readingsSide{"windows=cumulate", cumulateStreamgen},
		func(first, second float64) string {
			return fmt.Sprintf("cumulative windows take %.2fx the time of tumbling windows", first/second)
		})
}

// BenchmarkSlidingCounts counts BenchmarkWindowCounts' 1M readings per
// user in sliding windows (10 minutes long, one starting every minute:
// ten windows a reading, kept by slices of a minute), side by side with
// the 10-minute tumbling windows (one a reading) on the same readings,
// in Update mode, and in Append mode (mode=append: each window written
// once, as it closes). As BenchmarkWindowCounts, run with -benchtime 1x
// or 3x; the second side logs the ratio.
func BenchmarkSlidingCounts(b *testing.B) {
	for _, mode := range []typed.OutputMode{typed.Update, typed.Append} {
		b.Run("mode="+strings.ToLower(mode.String()), func(b *testing.B) {
			benchReadingsTwoWays(b, readingsSide{"windows=tumbling", windowsStreamgen}, readingsSide{"windows=sliding", slidingStreamgen(mode)},
				func(first, second float64) string {
					return fmt.Sprintf("sliding windows take %.2fx the time of tumbling windows", first/second)
				})
		})
	}
}

// BenchmarkApproxDistinctCounts estimates the distinct readings per user
// and 10-minute window (ApproxCountDistinct, a HyperLogLog sketch of 512
// registers each), side by side with BenchmarkWindowCounts' count in the
// same windows: what a sketch costs beside a count. As
// BenchmarkWindowCounts, run with -benchtime 1x or 3x; the second side
// logs the ratio.
func BenchmarkApproxDistinctCounts(b *testing.B) {
	benchReadingsTwoWays(b, readingsSide{"agg=count", windowsStreamgen}, readingsSide{"agg=approx_count_distinct", distinctStreamgen},
		func(first, second float64) string {
			return fmt.Sprintf("approximate distinct counts take %.2fx the time of counts", first/second)
		})
}

// BenchmarkApproxPercentileCounts estimates the median and the 99th
// percentile of the readings' x per user and 10-minute window
// (ApproxPercentile at accuracy 1,000), side by side with
// BenchmarkWindowCounts' count in the same windows: what a quantile
// summary costs beside a count. As BenchmarkWindowCounts, run with
// -benchtime 1x or 3x; the second side logs the ratio.
func BenchmarkApproxPercentileCounts(b *testing.B) {
	benchReadingsTwoWays(b, readingsSide{"agg=count", windowsStreamgen}, readingsSide{"agg=percentile_approx", percentileStreamgen},
		func(first, second float64) string {
			return fmt.Sprintf("approximate percentiles take %.2fx the time of counts", first/second)
		})
}

// BenchmarkReduceCounts: Reduce (the reading of the greatest x) per user
// and 10-minute window, beside a count in the same windows: what keeping
// a record's encoding as the value costs.
func BenchmarkReduceCounts(b *testing.B) {
	benchReadingsTwoWays(b, readingsSide{"agg=count", windowsStreamgen}, readingsSide{"agg=reduce", reduceStreamgen},
		func(first, second float64) string {
			return fmt.Sprintf("reduce takes %.2fx the time of counts", first/second)
		})
}

// readingsSide is a pipeline over the benchmarks' readings, by name.
type readingsSide struct {
	name string
	run  func(*typed.MemoryStream[sensor.Event], string, typed.Sink[userWindowCount]) error
}

// benchReadingsTwoWays runs BenchmarkWindowCounts' 1M readings through
// two pipelines, each a sub-benchmark; the second logs what ratio makes
// of the two sides' rates.
func benchReadingsTwoWays(b *testing.B, first, second readingsSide, ratio func(first, second float64) string) {
	in := sensorRows(1_000_000, 1)
	var rate [2]float64
	for i, c := range []readingsSide{first, second} {
		b.Run(c.name, func(b *testing.B) {
			m := typed.NewMemoryStream[sensor.Event]("readings", readingBatch)
			m.Add(in...)
			rate[i] = benchTimed(b, len(in), func(dir string) (int64, error) {
				sink := &rowSink[userWindowCount]{}
				err := c.run(m, dir, sink)
				return sink.rows, err
			})
			if i == 1 && rate[0] > 0 {
				b.Log(ratio(rate[0], rate[1]))
			}
		})
	}
}

// overStreamgen counts, for each of m's readings, its user's readings in
// the second up to it (AggregateOver, RangePreceding(1 s): Flink's
// COUNT(*) OVER (PARTITION BY user ORDER BY time RANGE BETWEEN INTERVAL
// '1' SECOND PRECEDING AND CURRENT ROW)), each written once the
// watermark, windowDelay behind, passes it.
func overStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount]) error {
	return overFrameStreamgen(m, dir, sink, typed.RangePreceding(time.Second))
}

// overFrameStreamgen counts, for each of m's readings, its user's
// readings in frame, as overStreamgen does.
func overFrameStreamgen(m *typed.MemoryStream[sensor.Event], dir string, sink typed.Sink[userWindowCount], frame typed.Over) error {
	s := typed.WithWatermark(typed.FromMemory(m), readingTime, windowDelay)
	counts := typed.AggregateOver(typed.GroupByKey(s, func(e *sensor.Event) string { return e.User }), readingTime, frame,
		typed.Count[sensor.Event](), func(user string, e *sensor.Event, n int64) userWindowCount {
			return userWindowCount{Window: typed.Window{End: readingTime(e)}, User: user, Count: n}
		})
	return startAvailableNow(typed.WriteTo(counts, sink), dir)
}

// BenchmarkOverCounts counts BenchmarkWindowCounts' 1M readings over the
// second before each (AggregateOver, a row a reading), side by side with
// the windows of a time difference of 1 s (Kafka Streams' sliding
// windows, about two rows a reading) on the same readings; as
// BenchmarkWindowCounts, run with -benchtime 1x or 3x; the second side
// logs the ratio.
func BenchmarkOverCounts(b *testing.B) {
	benchReadingsTwoWays(b, readingsSide{"frames=over", overStreamgen}, readingsSide{"windows=timedifference", timeDifferenceStreamgen},
		func(first, second float64) string {
			return fmt.Sprintf("OVER frames take %.2fx the time of windows of a time difference", second/first)
		})
}

// BenchmarkOverLongFrames counts BenchmarkWindowCounts' 1M readings over
// the 10 minutes before each (RangePreceding(10 min): about 1,850
// readings of a user) and over the 2,000 readings of its user before
// each (RowsPreceding(2000)), side by side with BenchmarkOverCounts'
// frame of 1 s (about three readings): what a long frame costs. As
// BenchmarkWindowCounts, run with -benchtime 1x or 3x; the long sides
// log their ratio to the short one.
func BenchmarkOverLongFrames(b *testing.B) {
	in := sensorRows(1_000_000, 1)
	var short float64
	for i, frame := range []typed.Over{typed.RangePreceding(time.Second), typed.RangePreceding(10 * time.Minute), typed.RowsPreceding(2000)} {
		b.Run("frame="+frame.String(), func(b *testing.B) {
			m := typed.NewMemoryStream[sensor.Event]("readings", readingBatch)
			m.Add(in...)
			rate := benchTimed(b, len(in), func(dir string) (int64, error) {
				sink := &rowSink[userWindowCount]{}
				err := overFrameStreamgen(m, dir, sink, frame)
				return sink.rows, err
			})
			if i == 0 {
				short = rate
			} else if short > 0 {
				b.Logf("%v takes %.2fx the time of RangePreceding(1s)", frame, short/rate)
			}
		})
	}
}

// BenchmarkDropDuplicates drops the copies from 1M sensor readings (900k
// readings and a copy of every ninth, 1 to 1000 readings after it), in
// micro-batches of 100k rows, with streamgen (a 1-minute watermark,
// deduplication on the user and the event time, AvailableNow, a
// checkpoint on disk) and with the hand-written loop; as
// BenchmarkWindowCounts.
//
// impl=streamgen runs DropDuplicatesWithEventTime on the user (the rows
// of one user and event time are copies: state ordered by event time),
// the side the ratio is taken against; impl=streamgen-keyonly runs
// DropDuplicates on the user and the event time as its key (every key
// kept, as Spark's dropDuplicates on columns without the watermark's),
// and impl=streamgen-keyonly-nocache the same with the state cache off (runtime.StateCacheSize(-1)). Each must write every
// reading once.
func BenchmarkDropDuplicates(b *testing.B) {
	const readings = 900_000
	in := withCopies(sensorRows(readings, 2), 2)
	var rate [2]float64
	for _, c := range []struct {
		name string
		run  func(*typed.MemoryStream[sensor.Event], string, typed.Sink[sensor.Event], ...runtime.Option) error
		opts []runtime.Option
	}{
		{"impl=streamgen", dedupTimedStreamgen, nil},
		{"impl=streamgen-keyonly", dedupStreamgen, nil},
		{"impl=streamgen-keyonly-nocache", dedupStreamgen, []runtime.Option{runtime.StateCacheSize(-1)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			m := typed.NewMemoryStream[sensor.Event]("readings", readingBatch)
			m.Add(in...)
			var rows int64
			r := benchTimed(b, len(in), func(dir string) (int64, error) {
				sink := &rowSink[sensor.Event]{}
				err := c.run(m, dir, sink, c.opts...)
				rows = sink.rows
				return sink.rows, err
			})
			if rows != readings {
				b.Fatalf("wrote %d rows, want %d", rows, readings)
			}
			if c.name == "impl=streamgen" {
				rate[0] = r
			}
		})
	}
	b.Run("impl=handwritten", func(b *testing.B) {
		rows := slices.Clone(in) // as BenchmarkWindowCounts
		rate[1] = benchTimed(b, len(in), func(dir string) (int64, error) {
			sink := &rowSink[sensor.Event]{}
			err := dedupHandwritten(rows, readingBatch, dir, sink)
			if err == nil && sink.rows != readings {
				err = fmt.Errorf("wrote %d rows, want %d", sink.rows, readings)
			}
			return sink.rows, err
		})
		if rate[0] > 0 {
			b.Logf("streamgen takes %.2fx the time of the hand-written loop (target: at most 1.5x)", rate[1]/rate[0])
		}
	})
}

// benchTimed is benchRuns for any sink: it times b.N runs of run, each on
// a fresh directory, reports events/s and the output rows of a run, and
// returns the events/s.
func benchTimed(b *testing.B, events int, run func(dir string) (outRows int64, err error)) float64 {
	parent := b.TempDir()
	var outRows int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		dir, err := os.MkdirTemp(parent, "run")
		if err != nil {
			b.Fatal(err)
		}
		// No collection owed by what came before (the input's copy) in
		// the time measured.
		goruntime.GC()
		b.StartTimer()
		n, err := run(dir)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		outRows = n
		os.RemoveAll(dir)
		b.StartTimer()
	}
	r := float64(events) * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(r, "events/s")
	b.ReportMetric(float64(outRows), "outrows/run")
	return r
}

// TestWindowCountsMatchMap checks once that both sides of
// BenchmarkWindowCounts give a plain map's counts per window and user (the
// latest row of each, Update mode) and write the same rows, on a smaller
// input with a few late readings added.
func TestWindowCountsMatchMap(t *testing.T) {
	const perBatch = 7_000
	in := sensorRows(60_000, 3)
	// Late readings: one 2 hours behind in each batch after the first.
	for i := perBatch + 10; i < len(in); i += perBatch {
		in[i].CreationTime -= int64(2 * time.Hour)
	}
	// A reading is late at or before the watermark of the batch before.
	want := map[windowGroup]int64{}
	newest, watermark, lateBy := int64(0), int64(0), int64(0)
	for start, end := range batches(len(in), perBatch) {
		for _, e := range in[start:end] {
			newest = max(newest, e.CreationTime)
			if lateBy == 0 || e.CreationTime > lateBy {
				want[windowGroup{e.CreationTime - e.CreationTime%int64(windowSize), e.User}]++
			}
		}
		lateBy, watermark = watermark, newest-int64(windowDelay)
	}
	latest := func(got map[windowGroup]int64) func([]userWindowCount) {
		return func(rows []userWindowCount) {
			for _, r := range rows {
				got[windowGroup{r.Window.Start.UnixNano(), r.User}] = r.Count
			}
		}
	}

	m := typed.NewMemoryStream[sensor.Event]("readings", perBatch)
	m.Add(in...)
	sg := map[windowGroup]int64{}
	sgSink := &rowSink[userWindowCount]{keep: latest(sg)}
	if err := windowsStreamgen(m, t.TempDir(), sgSink); err != nil {
		t.Fatal(err)
	}
	hw := map[windowGroup]int64{}
	hwSink := &rowSink[userWindowCount]{keep: latest(hw)}
	if err := windowsHandwritten(in, perBatch, t.TempDir(), hwSink); err != nil {
		t.Fatal(err)
	}
	for what, got := range map[string]map[windowGroup]int64{"streamgen": sg, "handwritten": hw} {
		if len(got) != len(want) {
			t.Errorf("%s: %d windows, want %d", what, len(got), len(want))
		}
		for g, n := range want {
			if got[g] != n {
				t.Errorf("%s: window %v: %d, want %d", what, g, got[g], n)
			}
		}
	}
	if sgSink.rows != hwSink.rows {
		t.Errorf("output rows: streamgen %d, handwritten %d", sgSink.rows, hwSink.rows)
	}
}

// TestDropDuplicatesMatchesFirst checks once that every side of
// BenchmarkDropDuplicates writes every reading once and no copy, on a
// smaller input.
func TestDropDuplicatesMatchesFirst(t *testing.T) {
	const perBatch = 7_000
	originals := sensorRows(45_000, 4)
	in := withCopies(originals, 4)
	if len(in) != 50_000 {
		t.Fatalf("%d readings with copies, want 50000", len(in))
	}
	want := make([]int64, len(originals))
	for i, e := range originals {
		want[i] = e.Index
	}
	indexes := func(got *[]int64) func([]sensor.Event) {
		return func(rows []sensor.Event) {
			for _, r := range rows {
				*got = append(*got, r.Index)
			}
		}
	}
	m := typed.NewMemoryStream[sensor.Event]("readings", perBatch)
	m.Add(in...)
	got := map[string]*[]int64{}
	for _, c := range []struct {
		name string
		run  func(*typed.MemoryStream[sensor.Event], string, typed.Sink[sensor.Event], ...runtime.Option) error
		opts []runtime.Option
	}{
		{"streamgen", dedupTimedStreamgen, nil},
		{"streamgen-keyonly", dedupStreamgen, nil},
		{"streamgen-keyonly-nocache", dedupStreamgen, []runtime.Option{runtime.StateCacheSize(-1)}},
	} {
		got[c.name] = new([]int64)
		if err := c.run(m, t.TempDir(), &rowSink[sensor.Event]{keep: indexes(got[c.name])}, c.opts...); err != nil {
			t.Fatal(err)
		}
	}
	got["handwritten"] = new([]int64)
	if err := dedupHandwritten(in, perBatch, t.TempDir(), &rowSink[sensor.Event]{keep: indexes(got["handwritten"])}); err != nil {
		t.Fatal(err)
	}
	for what, rows := range got {
		got := *rows
		// Within a batch streamgen writes rows by key, so compare as sets.
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s: %d readings written, want each of the %d once", what, len(got), len(want))
		}
	}
}

// TestLargeBatchReachesStateCache: a DropDuplicates of 5,000 readings in
// one batch (large enough that Pebble commits it as a memtable of its own
// and empties it), then a copy of one of them in the next: the copy is
// dropped with the state cache on or off. Before the store gave the cache
// a batch's changes ahead of Pebble's commit, the cache never learnt them
// and the copy passed.
func TestLargeBatchReachesStateCache(t *testing.T) {
	const n = 5_000
	rows := sensorRows(n+1, 5)
	again := rows[n-100] // a reading of the first batch, sent again
	again.ArrivalTime += 1500
	in := append(rows[:n:n], again, rows[n])
	for _, cache := range []int64{-1, 0} {
		for name, run := range map[string]func(*typed.MemoryStream[sensor.Event], string, typed.Sink[sensor.Event], ...runtime.Option) error{
			"DropDuplicates": dedupStreamgen, "DropDuplicatesWithEventTime": dedupTimedStreamgen,
		} {
			m := typed.NewMemoryStream[sensor.Event]("readings", n) // the copy comes in the second batch
			m.Add(in...)
			sink := &rowSink[sensor.Event]{}
			if err := run(m, t.TempDir(), sink, runtime.StateCacheSize(cache)); err != nil {
				t.Fatal(err)
			}
			if sink.rows != n+1 {
				t.Errorf("%s, state cache size %d: %d rows written, want %d (the copy dropped)", name, cache, sink.rows, n+1)
			}
		}
	}
}
