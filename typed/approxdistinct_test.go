package typed_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// distinctValue is the value ApproxCountDistinct counts in these tests.
func distinctValue(c *fixtures.Click) string { return c.Page }

// sketch folds the clicks into one accumulator of agg.
func sketch(agg typed.Aggregator[fixtures.Click, typed.ApproxDistinctAcc, int64], clicks []fixtures.Click) typed.ApproxDistinctAcc {
	acc := agg.Zero()
	for i := range clicks {
		acc = agg.Add(acc, &clicks[i])
	}
	return acc
}

// distinctClicks returns clicks of n distinct pages, each from one to
// three times, shuffled.
func distinctClicks(n int, seed uint64) []fixtures.Click {
	r := rand.New(rand.NewPCG(seed, seed))
	var out []fixtures.Click
	for i := range n {
		for range 1 + r.IntN(3) {
			out = append(out, fixtures.Click{Page: fmt.Sprintf("page-%d-%d", seed, i)})
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// TestApproxCountDistinctAccuracy: the estimate of n distinct values, each
// seen one to three times, is within four of its relative standard
// deviations (1.04/√m for m registers) of n, from none to 300,000, at
// Spark's default rsd and at a finer one; and a few values are counted
// exactly (the small range).
func TestApproxCountDistinctAccuracy(t *testing.T) {
	for _, rsd := range []float64{0.05, 0.01} {
		agg := typed.ApproxCountDistinct(distinctValue, rsd)
		m := float64(len(agg.Add(agg.Zero(), &fixtures.Click{}).Registers))
		if sd := 1.04 / math.Sqrt(m); sd > rsd {
			t.Fatalf("rsd %v: %v registers give a standard deviation of %.4f, over rsd", rsd, m, sd)
		}
		for _, n := range []int{0, 1, 2, 7, 50, 1000, 20_000, 300_000} {
			got := agg.Result(sketch(agg, distinctClicks(n, uint64(n)+1)))
			bound := 4 * 1.04 / math.Sqrt(m) * float64(n)
			if n <= 7 {
				bound = 0.5 // a few values against many registers: exact
			}
			if math.Abs(float64(got-int64(n))) > bound {
				t.Errorf("rsd %v: %d distinct values estimated as %d (off by more than %.0f)", rsd, n, got, bound)
			}
		}
	}
}

// TestApproxCountDistinctMerge: merging the sketches of two sets of
// values gives the sketch of their union, in either order and with an
// empty one; a sketch of a finer rsd merged with one of a coarser gives
// the coarser one's sketch of the union.
func TestApproxCountDistinctMerge(t *testing.T) {
	coarse := typed.ApproxCountDistinct(distinctValue, 0.05)
	fine := typed.ApproxCountDistinct(distinctValue, 0.01)
	a, b := distinctClicks(30_000, 1), distinctClicks(20_000, 2)
	b = append(b, a[:5000]...) // overlapping
	union := sketch(coarse, slices.Concat(a, b))
	for name, got := range map[string]typed.ApproxDistinctAcc{
		"a+b":         coarse.Merge(sketch(coarse, a), sketch(coarse, b)),
		"b+a":         coarse.Merge(sketch(coarse, b), sketch(coarse, a)),
		"empty+(a+b)": coarse.Merge(coarse.Zero(), coarse.Merge(sketch(coarse, a), sketch(coarse, b))),
		"(a+b)+empty": coarse.Merge(coarse.Merge(sketch(coarse, a), sketch(coarse, b)), coarse.Zero()),
		"fine a+b":    coarse.Merge(sketch(fine, a), sketch(coarse, b)),
		"a+fine b":    fine.Merge(sketch(coarse, a), sketch(fine, b)),
	} {
		if got.P != union.P || !slices.Equal(got.Registers, union.Registers) {
			t.Errorf("%s: not the union's sketch (precision %d, want %d)", name, got.P, union.P)
		}
	}
	if fineUnion := fine.Merge(sketch(fine, a), sketch(fine, b)); fineUnion.P == union.P {
		t.Fatalf("rsd 0.01 and 0.05 give the same precision, %d", union.P)
	}
}

// TestApproxCountDistinctWindows: the distinct pages of each user and
// 1-minute window, under batch splits and a restart, are what a plain
// loop's sketch of the window's clicks estimates: sketches merge across
// batches as if one had seen every click.
func TestApproxCountDistinctWindows(t *testing.T) {
	in := orderedClicks(400)
	for i := range in {
		in[i].Page = fmt.Sprintf("p%d", i%37)
	}
	agg := typed.ApproxCountDistinct(distinctValue, 0.05)
	byWindow := map[string][]fixtures.Click{}
	for _, c := range in {
		start := c.Time.Truncate(time.Minute)
		id := windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: c.User}.id()
		byWindow[id] = append(byWindow[id], c)
	}
	want := map[string]float64{}
	for id, clicks := range byWindow {
		want[id] = float64(agg.Result(sketch(agg, clicks)))
	}
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, agg, countRow)
	}
	for _, perBatch := range []int{0, 13, 70} {
		got := latestWindows(t, in, perBatch, build)
		sameTable(t, fmt.Sprintf("%d per batch", perBatch), got, want)
	}
}

// TestApproxCountDistinctTimeDifference: over the windows of a time
// difference, whose aggregate merges the accumulators it keeps for each
// instant into several windows, each window counts its own distinct
// values (Kafka Streams' example rows, and a copy of the first a batch
// later): the merges leave the stored accumulators as they were.
func TestApproxCountDistinctTimeDifference(t *testing.T) {
	testDistinctTimeDifference(t, typed.ApproxCountDistinct(distinctValue, 0.05))
}

func testDistinctTimeDifference(t *testing.T, agg typed.Aggregator[fixtures.Click, typed.ApproxDistinctAcc, int64]) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	s := typed.WithWatermark(typed.FromMemory(m), clickTime, 10*time.Second)
	ws := typed.GroupByWindow(s, clickTime, typed.TimeDifference(5*time.Second), func(c *fixtures.Click) string { return c.User })
	counts := typed.AggregateWindows(ws, agg, func(w typed.Window, _ string, n int64) string {
		return fmt.Sprintf("[%d;%d]:%d", w.Start.UnixMilli(), w.End.UnixMilli()-1, n)
	})
	sink := newSink[string]()
	w := typed.WriteTo(counts, sink).OutputMode(typed.Update)
	ck := newCheckpoint()
	click := func(ms int64, page string) fixtures.Click {
		return fixtures.Click{User: "A", Time: time.UnixMilli(ms).UTC(), Page: page}
	}
	m.Add(click(8000, "a"), click(9200, "b"), click(12400, "c"))
	if _, dropped := batchRowsToEnd(t, w, sink, func(s string) string { return s }, ck.opts()...); dropped != 0 {
		t.Fatalf("first batch: %d dropped", dropped)
	}
	// 8500 makes [3500;8500], which holds a only, and [8501;13501], b
	// and c; it joins [4200;9200], a and b, [7400;12400], a, b and c, and
	// [8001;13001], a, b and c.
	m.Add(click(8500, "a"))
	rows, _ := batchRowsToEnd(t, w, sink, func(s string) string { return s }, ck.opts()...)
	if want := []string{"[3500;8500]:1", "[4200;9200]:2", "[7400;12400]:3", "[8001;13001]:3", "[8501;13501]:2"}; !slices.Equal(rows, want) {
		t.Fatalf("second batch: %q, want %q", rows, want)
	}
}

// TestApproxCountDistinctRefusesWhatIsNoSketch: an accumulator whose
// registers are not those of its precision, or hold a value no hash
// gives, is refused with what is wrong (a panic, which fails the query
// with it), by Add, Merge and Result alike; none indexes out of range.
func TestApproxCountDistinctRefusesWhatIsNoSketch(t *testing.T) {
	agg := typed.ApproxCountDistinct(distinctValue, 0.05)
	good := sketch(agg, distinctClicks(100, 1))
	high := typed.ApproxDistinctAcc{P: 9, Registers: make([]byte, 512)}
	high.Registers[7] = 57
	for name, bad := range map[string]typed.ApproxDistinctAcc{
		"16 registers at precision 10": {P: 10, Registers: make([]byte, 16)},
		"precision 0":                  {P: 0, Registers: make([]byte, 1)},
		"precision -1":                 {P: -1, Registers: make([]byte, 1)},
		"a register past 56":           high,
	} {
		for op, call := range map[string]func(){
			"Add":         func() { agg.Add(bad, &fixtures.Click{Page: "x"}) },
			"Merge into":  func() { agg.Merge(bad, good) },
			"Merge of":    func() { agg.Merge(typed.ApproxDistinctAcc{P: 9, Registers: slices.Clone(good.Registers)}, bad) },
			"Merge empty": func() { agg.Merge(agg.Zero(), bad) },
			"Result":      func() { agg.Result(bad) },
		} {
			if name == "a register past 56" && op == "Add" {
				continue // Add reads no register's value
			}
			func() {
				defer func() {
					err, _ := recover().(error)
					if err == nil || !strings.Contains(err.Error(), "not a sketch this aggregator makes") {
						t.Errorf("%s of %s: %v, want a refusal", op, name, err)
					}
				}()
				call()
			}()
		}
	}
}

// aliasingDistinct is ApproxCountDistinct with a Merge that returns its
// second argument when the first is empty, and changes its first in
// place, as the Aggregator contract allows.
type aliasingDistinct struct {
	typed.Aggregator[fixtures.Click, typed.ApproxDistinctAcc, int64]
}

func (aliasingDistinct) Merge(x, y typed.ApproxDistinctAcc) typed.ApproxDistinctAcc {
	if x.Registers == nil {
		return y
	}
	for i, v := range y.Registers {
		x.Registers[i] = max(x.Registers[i], v)
	}
	return x
}

// TestTimeDifferenceMergesCopies: the windows of a time difference merge
// each instant's accumulator into several windows; with an aggregator
// whose Merge returns or changes its arguments, as the contract allows,
// and an accumulator of slices, each window still counts its own values.
func TestTimeDifferenceMergesCopies(t *testing.T) {
	testDistinctTimeDifference(t, aliasingDistinct{typed.ApproxCountDistinct(distinctValue, 0.05)})
}

// TestApproxCountDistinctRefusesItsRSD: an rsd that would need fewer than
// 4 bits of register address (over 39%, as Spark refuses), more than
// 18, or is no positive number panics, naming what to give; the ends of
// the range are taken.
func TestApproxCountDistinctRefusesItsRSD(t *testing.T) {
	for rsd, want := range map[float64]string{
		0.392:       "HLL++ needs at least 4: use a lower error, at most 39%",
		0.002:       "more than the 18 a sketch may have: use a higher error, at least 0.00216",
		0:           "must be a positive number",
		-1:          "must be a positive number",
		math.NaN():  "must be a positive number",
		math.Inf(1): "must be a positive number",
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), want) {
					t.Errorf("rsd %v: panic %v, want one saying %q", rsd, r, want)
				}
			}()
			typed.ApproxCountDistinct(distinctValue, rsd)
		}()
	}
	for rsd, registers := range map[float64]int{0.391: 16, 0.00217: 1 << 18} {
		agg := typed.ApproxCountDistinct(distinctValue, rsd)
		if n := len(agg.Add(agg.Zero(), &fixtures.Click{}).Registers); n != registers {
			t.Errorf("rsd %v: %d registers, want %d", rsd, n, registers)
		}
	}
}
