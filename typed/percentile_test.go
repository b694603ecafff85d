package typed_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/typed"
)

// pageValue is the number a test click's page holds: the value these
// tests aggregate.
func pageValue(c *fixtures.Click) float64 {
	v, err := strconv.ParseFloat(c.Page, 64)
	if err != nil {
		panic(err)
	}
	return v
}

// valueClicks returns clicks whose pages are values.
func valueClicks(values []float64) []fixtures.Click {
	out := make([]fixtures.Click, len(values))
	for i, v := range values {
		out[i] = fixtures.Click{Page: strconv.FormatFloat(v, 'g', -1, 64)}
	}
	return out
}

// valuedClicks returns ordered clicks whose pages are values, and each
// user's values in each 1-minute window.
func valuedClicks() ([]fixtures.Click, map[string][]float64) {
	in := orderedClicks(400)
	for i := range in {
		in[i].Page = strconv.Itoa(i * 37 % 101)
	}
	byWindow := map[string][]float64{}
	for i := range in {
		start := in[i].Time.Truncate(time.Minute)
		id := windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: in[i].User}.id()
		byWindow[id] = append(byWindow[id], pageValue(&in[i]))
	}
	return in, byWindow
}

// percentages are the percentiles the tests ask for: the ends, those
// within an error of them, and between.
var percentages = []float64{0, 0.0005, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.9995, 1}

// exactPercentile is Spark's percentile by its definition, by a plain
// sort: the smallest value that at least ⌈p·n⌉ values are at or below.
func exactPercentile(values []float64, p float64) float64 {
	s := slices.Sorted(slices.Values(values))
	return s[max(int(math.Ceil(p*float64(len(s)))), 1)-1]
}

// checkRanks fails unless each of got is a value of values whose ranks
// (from the values below it plus one to those at or below it) come
// within eps·n (and one for rounding) of its percentage's rank, ⌈p·n⌉.
func checkRanks(t *testing.T, what string, values, got []float64, eps float64) {
	t.Helper()
	if len(got) != len(percentages) {
		t.Fatalf("%s: %d percentiles, want %d", what, len(got), len(percentages))
	}
	s := slices.Sorted(slices.Values(values))
	n := float64(len(s))
	for k, p := range percentages {
		lo, _ := slices.BinarySearch(s, got[k])
		hi := lo
		for hi < len(s) && s[hi] == got[k] {
			hi++
		}
		if hi == lo {
			t.Fatalf("%s: percentile %v is %v, not one of the values", what, p, got[k])
		}
		target := math.Max(math.Ceil(p*n), 1)
		if bound := eps*n + 1; target < float64(lo+1)-bound || target > float64(hi)+bound {
			t.Fatalf("%s: percentile %v is %v, of ranks %d to %d, more than %.0f from rank %.0f", what, p, got[k], lo+1, hi, bound, target)
		}
	}
}

// valueSets are the values the summary tests run over: random, in
// order, in reverse order, few distinct, and one repeated.
func valueSets(n int, seed uint64) map[string][]float64 {
	r := rand.New(rand.NewPCG(seed, 1))
	random, sorted, few, same := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for i := range n {
		random[i] = math.Round(r.NormFloat64()*1000) / 10
		sorted[i] = float64(i)
		few[i] = float64(r.IntN(7))
		same[i] = 42
	}
	reversed := slices.Clone(sorted)
	slices.Reverse(reversed)
	return map[string][]float64{"random": random, "sorted": sorted, "reversed": reversed, "few": few, "same": same}
}

// summarize folds values (as clicks' pages) with agg: all into one accumulator ("one"), or
// in chunks of random sizes each folded from Zero, merged one after
// another ("chained") or pairwise up a tree ("tree").
func summarize[Acc, Out any](agg typed.Aggregator[fixtures.Click, Acc, Out], values []float64, how string, seed uint64) Acc {
	clicks := valueClicks(values)
	fold := func(cs []fixtures.Click) Acc {
		acc := agg.Zero()
		for i := range cs {
			acc = agg.Add(acc, &cs[i])
		}
		return acc
	}
	if how == "one" {
		return fold(clicks)
	}
	r := rand.New(rand.NewPCG(seed, 2))
	var parts []Acc
	for len(clicks) > 0 {
		n := min(len(clicks), 1+r.IntN(3000))
		parts = append(parts, fold(clicks[:n]))
		clicks = clicks[n:]
	}
	if how == "chained" {
		acc := agg.Zero()
		for _, p := range parts {
			acc = agg.Merge(acc, p)
		}
		return acc
	}
	for len(parts) > 1 {
		var next []Acc
		for i := 0; i < len(parts); i += 2 {
			if i+1 < len(parts) {
				next = append(next, agg.Merge(parts[i], parts[i+1]))
			} else {
				next = append(next, parts[i])
			}
		}
		parts = next
	}
	if len(parts) == 0 {
		return agg.Zero()
	}
	return parts[0]
}

// TestApproxPercentileRanks: over random, ordered, reversed and repeated
// values, from one to 200,000, folded into one summary or merged from
// chunks in a chain or a tree, each percentile is a value whose rank is
// within n/accuracy of the percentage's; and no value gives no
// percentile.
func TestApproxPercentileRanks(t *testing.T) {
	for _, accuracy := range []int{100, 1000} {
		agg := typed.ApproxPercentile(pageValue, percentages, accuracy)
		if got := agg.Result(agg.Zero()); got != nil {
			t.Fatalf("accuracy %d: no value gives %v", accuracy, got)
		}
		for _, n := range []int{1, 2, 10, 1000, 200_000} {
			if n > 1000 && testing.Short() {
				continue // a computation alone: the full run has it
			}
			for name, values := range valueSets(n, uint64(n)) {
				for _, how := range []string{"one", "chained", "tree"} {
					what := fmt.Sprintf("accuracy %d, %d %s values, %s", accuracy, n, name, how)
					checkRanks(t, what, values, agg.Result(summarize(agg, values, how, uint64(accuracy))), 1/float64(accuracy))
				}
			}
		}
	}
}

// TestApproxPercentileExact: while n is under half the accuracy, the
// summary keeps every value, and each percentile is the one a sort gives
// (Spark's definition), however the values were folded and merged.
func TestApproxPercentileExact(t *testing.T) {
	agg := typed.ApproxPercentile(pageValue, percentages, 10_000)
	for _, n := range []int{1, 3, 100, 4999} {
		for name, values := range valueSets(n, 7) {
			for _, how := range []string{"one", "chained", "tree"} {
				got := agg.Result(summarize(agg, values, how, 3))
				for k, p := range percentages {
					if want := exactPercentile(values, p); got[k] != want {
						t.Fatalf("%d %s values, %s: percentile %v is %v, want %v", n, name, how, p, got[k], want)
					}
				}
			}
		}
	}
}

// TestApproxPercentileSize: a summary of a million values, random or in
// order, keeps about one sample per unit of accuracy up to 1,000, and at
// most 2.5 at 10,000, as the doc comment says; not the values.
func TestApproxPercentileSize(t *testing.T) {
	if testing.Short() {
		t.Skip("a computation over millions of values alone: the full run has it")
	}
	sets := valueSets(1_000_000, 5)
	for _, name := range []string{"random", "sorted"} {
		for _, tc := range []struct {
			accuracy int
			most     float64 // samples per unit of accuracy
		}{{100, 1.1}, {1000, 1.1}, {10_000, 2.5}} {
			agg := typed.ApproxPercentile(pageValue, percentages, tc.accuracy)
			acc := agg.Merge(summarize(agg, sets[name], "one", 1), agg.Zero())
			if most := int(tc.most * float64(tc.accuracy)); len(acc.Samples) > most || len(acc.Head) > 0 {
				t.Errorf("%s values, accuracy %d: %d samples (and %d in the head), want at most %d", name, tc.accuracy, len(acc.Samples), len(acc.Head), most)
			}
		}
	}
}

// TestApproxPercentileMergeKeepsItsSecond: Merge never changes its
// second accumulator (a caller may merge a stored one into several),
// nor does what is done with the result later (more values added, more
// merged), nor does Result change its accumulator; whether or not
// either has values waiting in its head, and whether or not the first,
// which Merge may change, has room to be changed where it is; and one
// summary merged into two gives two that share nothing.
func TestApproxPercentileMergeKeepsItsSecond(t *testing.T) {
	agg := typed.ApproxPercentile(pageValue, percentages, 100)
	values := valueSets(9000, 9)["random"]
	clone := func(a typed.PercentileAcc, room int) typed.PercentileAcc {
		a.Samples = slices.Grow(slices.Clone(a.Samples), room)
		a.Head = slices.Grow(slices.Clone(a.Head), room)
		return a
	}
	same := func(a, b typed.PercentileAcc) bool {
		return a.RelativeError == b.RelativeError && a.Count == b.Count && slices.Equal(a.Samples, b.Samples) && slices.Equal(a.Head, b.Head)
	}
	type part struct {
		acc    typed.PercentileAcc
		values []float64
	}
	compressed := part{summarize(agg, values[:3000], "chained", 1), values[:3000]}
	withHead := part{summarize(agg, values[3000:4500], "one", 1), values[3000:4500]}
	empty := part{agg.Zero(), nil}
	more := valueClicks(values[4500:])
	if len(withHead.acc.Head) == 0 || len(compressed.acc.Samples) == 0 || len(compressed.acc.Head) != 0 {
		t.Fatalf("the accumulators are not what the test needs: %d in the head, %d samples", len(withHead.acc.Head), len(compressed.acc.Samples))
	}
	// Result changes no accumulator, even one whose head it sorts.
	kept := clone(withHead.acc, 0)
	checkRanks(t, "with a head", withHead.values, agg.Result(withHead.acc), 0.01)
	if !same(withHead.acc, kept) {
		t.Fatal("Result changed its accumulator")
	}
	// A summary merged into two empty ones gives two of their own: what
	// is added to one is not in the other (after a flush, a summary's
	// empty head has room that each could append to).
	flushed := summarize(agg, values[:1000], "one", 1)
	if len(flushed.Head) != 0 || cap(flushed.Head) == 0 {
		t.Fatalf("the flushed summary is not what the test needs: a head of %d, room for %d", len(flushed.Head), cap(flushed.Head))
	}
	a, b := agg.Merge(agg.Zero(), flushed), agg.Merge(agg.Zero(), flushed)
	high, low := valueClicks([]float64{1e6, 1e6 + 1}), valueClicks([]float64{-1e6, -1e6 - 1})
	for i := range high {
		a, b = agg.Add(a, &high[i]), agg.Add(b, &low[i])
	}
	checkRanks(t, "one merged into two, then one", slices.Concat(values[:1000], []float64{1e6, 1e6 + 1}), agg.Result(a), 0.01)
	checkRanks(t, "one merged into two, then the other", slices.Concat(values[:1000], []float64{-1e6, -1e6 - 1}), agg.Result(b), 0.01)
	for _, room := range []int{0, 5000} {
		for _, pair := range [][2]part{{compressed, withHead}, {withHead, compressed}, {empty, withHead}, {withHead, empty}, {compressed, empty}, {empty, compressed}} {
			what := fmt.Sprintf("room %d, %d values and %d in the head into %d and %d", room, pair[1].acc.Count, len(pair[1].acc.Head), pair[0].acc.Count, len(pair[0].acc.Head))
			y := clone(pair[1].acc, room)
			merged := agg.Merge(clone(pair[0].acc, room), y)
			checkRanks(t, what, slices.Concat(pair[0].values, pair[1].values), agg.Result(merged), 0.01)
			for i := range more {
				merged = agg.Add(merged, &more[i])
			}
			merged = agg.Merge(merged, compressed.acc)
			if !same(y, pair[1].acc) {
				t.Fatalf("%s: the second accumulator changed", what)
			}
			checkRanks(t, what+", then more", slices.Concat(pair[0].values, pair[1].values, values[4500:], compressed.values), agg.Result(merged), 0.01)
		}
	}
}

// TestApproxPercentileWindows: the median of each user's values in each
// 1-minute window, under batch splits and a restart, is the one a sort
// of the window's values gives: summaries of a few values, stored and
// merged across batches, keep every value.
func TestApproxPercentileWindows(t *testing.T) {
	in, byWindow := valuedClicks()
	want := map[string]float64{}
	for id, values := range byWindow {
		want[id] = exactPercentile(values, 0.5)
	}
	agg := typed.ApproxPercentile(pageValue, []float64{0.5}, 10_000)
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, agg, func(w typed.Window, user string, p []float64) windowCount {
			return windowCount{Window: w, User: user, Value: p[0]}
		})
	}
	for _, perBatch := range []int{0, 13, 70} {
		got := latestWindows(t, in, perBatch, build)
		sameTable(t, fmt.Sprintf("%d per batch", perBatch), got, want)
	}
}

// userPercentiles is a row of TestApproxPercentileByKey.
type userPercentiles struct {
	User   string
	Values []float64
}

// TestApproxPercentileByKey: each user's percentiles over thousands of
// values, stored as a compressed summary and merged batch after batch
// across a restart, are within the accuracy's error of the ranks a sort
// of the user's values gives.
func TestApproxPercentileByKey(t *testing.T) {
	users := []string{"ann", "bob", "cy"}
	r := rand.New(rand.NewPCG(4, 4))
	var in []fixtures.Click
	byUser := map[string][]float64{}
	for i := range 9000 {
		u := users[r.IntN(len(users))]
		v := math.Round(r.ExpFloat64()*1e4) / 100
		if u == "cy" {
			v = float64(i) // in order
		}
		in = append(in, fixtures.Click{User: u, Page: strconv.FormatFloat(v, 'g', -1, 64)})
		byUser[u] = append(byUser[u], v)
	}
	const accuracy = 100
	for _, perBatch := range []int{0, 700, 2500} {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
		keyed := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		sink := newSink[userPercentiles]()
		w := typed.WriteTo(typed.AggregateByKey(keyed, typed.ApproxPercentile(pageValue, percentages, accuracy),
			func(u string, p []float64) userPercentiles { return userPercentiles{u, p} }), sink)
		ck := newCheckpoint()
		for _, part := range [][]fixtures.Click{in[:4000], in[4000:]} {
			m.Add(part...)
			if err := runToEnd(t, w, ck.opts()...); err != nil {
				t.Fatal(err)
			}
		}
		got := map[string][]float64{}
		for _, rows := range sortedBatches(sink.snapshot()) {
			for _, row := range rows {
				got[row.User] = row.Values
			}
		}
		for _, u := range users {
			checkRanks(t, fmt.Sprintf("%d per batch, %s", perBatch, u), byUser[u], got[u], 1.0/accuracy)
		}
	}
}

// TestApproxPercentileRefusesWhatIsNoSummary: an accumulator whose
// samples are out of order, do not add up to its count, or have a
// negative span, or whose error is out of range, is refused with what is
// wrong (a panic, which fails the query with it) by Merge and Result.
func TestApproxPercentileRefusesWhatIsNoSummary(t *testing.T) {
	agg := typed.ApproxPercentile(pageValue, percentages, 100)
	good := agg.Merge(summarize(agg, valueSets(3000, 1)["random"], "one", 1), agg.Zero())
	swapped := good
	swapped.Samples = slices.Clone(good.Samples)
	swapped.Samples[3], swapped.Samples[4] = swapped.Samples[4], swapped.Samples[3]
	short := good
	short.Count++
	negative := good
	negative.Samples = slices.Clone(good.Samples)
	negative.Samples[2].Delta = -1
	noError := good
	noError.RelativeError = 0
	for name, bad := range map[string]typed.PercentileAcc{
		"samples out of order":      swapped,
		"a count past the samples'": short,
		"a negative delta":          negative,
		"no error":                  noError,
	} {
		for op, call := range map[string]func(){
			"Merge into": func() { agg.Merge(bad, good) },
			"Merge of":   func() { agg.Merge(good, bad) },
			"Result":     func() { agg.Result(bad) },
		} {
			func() {
				defer func() {
					err, _ := recover().(error)
					if err == nil || !strings.Contains(err.Error(), "not a summary this aggregator makes") {
						t.Errorf("%s of %s: %v, want a refusal", op, name, err)
					}
				}()
				call()
			}()
		}
	}
	for name, make := range map[string]func(){
		"accuracy 0":      func() { typed.ApproxPercentile(pageValue, percentages, 0) },
		"percentage 1.5":  func() { typed.ApproxPercentile(pageValue, []float64{0.5, 1.5}, 100) },
		"percentage -0.1": func() { typed.ApproxPercentile(pageValue, []float64{-0.1}, 100) },
		"percentage NaN":  func() { typed.ApproxPercentile(pageValue, []float64{math.NaN()}, 100) },
	} {
		func() {
			defer func() {
				if msg, _ := recover().(string); !strings.Contains(msg, "ApproxPercentile") {
					t.Errorf("%s: %q, want a panic naming ApproxPercentile", name, msg)
				}
			}()
			make()
		}()
	}
}

// TestApproxPercentileMixedAccuracies: a summary of one accuracy merged
// with one of another (a restart that changed it) is a summary of the
// coarser, within its error, in either order.
func TestApproxPercentileMixedAccuracies(t *testing.T) {
	fine := typed.ApproxPercentile(pageValue, percentages, 1000)
	coarse := typed.ApproxPercentile(pageValue, percentages, 100)
	values := valueSets(20_000, 11)["random"]
	a, b := summarize(fine, values[:12_000], "chained", 1), summarize(coarse, values[12_000:], "chained", 2)
	for name, merged := range map[string]typed.PercentileAcc{
		"fine into coarse": coarse.Merge(a, b),
		"coarse into fine": fine.Merge(b, a),
	} {
		if merged.RelativeError != 0.01 {
			t.Errorf("%s: relative error %v, want the coarser, 0.01", name, merged.RelativeError)
		}
		checkRanks(t, name, values, fine.Result(merged), 0.01)
	}
}

// nanLastPercentile is the percentile a sort that puts NaN after every
// other value gives: Spark's ordering of doubles.
func nanLastPercentile(values []float64, p float64) float64 {
	var s, nans []float64
	for _, v := range values {
		if math.IsNaN(v) {
			nans = append(nans, v)
		} else {
			s = append(s, v)
		}
	}
	slices.Sort(s)
	s = append(s, nans...)
	return s[max(int(math.Ceil(p*float64(len(s)))), 1)-1]
}

// sameValue is a == b, NaN equal to NaN.
func sameValue(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }

// TestApproxPercentileNaN: a NaN value counts as greater than every
// other, as Spark orders doubles: while the summary keeps every value,
// each percentile is the one a sort with NaN last gives, NaN where its
// rank falls among them; values all NaN give NaN for each percentage
// (not no result); however the values were folded and merged.
func TestApproxPercentileNaN(t *testing.T) {
	agg := typed.ApproxPercentile(pageValue, percentages, 10_000)
	for _, n := range []int{1, 2, 3, 100, 4999} {
		for name, values := range valueSets(n, 9) {
			for _, every := range []int{1, 2, 3, 50} {
				values := slices.Clone(values)
				for i := range values {
					if i%every == 0 {
						values[i] = math.NaN()
					}
				}
				for _, how := range []string{"one", "chained", "tree"} {
					got := agg.Result(summarize(agg, values, how, 3))
					if len(got) != len(percentages) {
						t.Fatalf("%d %s values, every %d NaN, %s: %d percentiles", n, name, every, how, len(got))
					}
					for k, p := range percentages {
						if want := nanLastPercentile(values, p); !sameValue(got[k], want) {
							t.Fatalf("%d %s values, every %d NaN, %s: percentile %v is %v, want %v", n, name, every, how, p, got[k], want)
						}
					}
				}
			}
		}
	}
}

// TestApproxPercentileNaNWindows: the median of each user's values in
// each 1-minute window, a quarter of them NaN, under batch splits and a
// restart, is the one a sort with NaN last gives; a window of NaN alone
// has one (NaN), so the row function may read it.
func TestApproxPercentileNaNWindows(t *testing.T) {
	in := orderedClicks(400)
	byWindow := map[string][]float64{}
	for i := range in {
		in[i].Page = strconv.Itoa(i * 37 % 101)
		if i%4 == 0 {
			in[i].Page = "NaN"
		}
		start := in[i].Time.Truncate(time.Minute)
		id := windowCount{Window: typed.Window{Start: start, End: start.Add(time.Minute)}, User: in[i].User}.id()
		byWindow[id] = append(byWindow[id], pageValue(&in[i]))
	}
	const nan = -1 // a NaN median, in the table
	want := map[string]float64{}
	nans := 0
	for id, values := range byWindow {
		if want[id] = nanLastPercentile(values, 0.5); math.IsNaN(want[id]) {
			want[id] = nan
			nans++
		}
	}
	if nans == 0 {
		t.Fatal("no window's median is NaN: the test tests nothing")
	}
	agg := typed.ApproxPercentile(pageValue, []float64{0.5}, 10_000)
	build := func(s typed.Stream[fixtures.Click]) typed.Stream[windowCount] {
		ws := typed.GroupByWindow(s, clickTime, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
		return typed.AggregateWindows(ws, agg, func(w typed.Window, user string, p []float64) windowCount {
			v := p[0]
			if math.IsNaN(v) {
				v = nan
			}
			return windowCount{Window: w, User: user, Value: v}
		})
	}
	for _, perBatch := range []int{0, 13, 70} {
		got := latestWindows(t, in, perBatch, build)
		sameTable(t, fmt.Sprintf("%d per batch", perBatch), got, want)
	}
}
