package typed

import (
	"fmt"
	"math"
	"slices"

	"github.com/streamgen/streamgen/codec"
)

// PercentileAcc is ApproxPercentile's accumulator: a Greenwald–Khanna
// quantile summary of Count values (Samples, in increasing order of
// value), within RelativeError of each rank, and the values added since
// it was last compressed (Head), not yet in it; and how many NaN values
// came (NaNs), greater than all, outside it.
//
//streamgen:record
type PercentileAcc struct {
	RelativeError float64            `json:"relative_error"`
	Count         int64              `json:"count"`
	Samples       []PercentileSample `json:"samples"`
	Head          []float64          `json:"head,omitempty"`
	NaNs          int64              `json:"nans,omitempty"`
}

// PercentileSample is a value of a quantile summary: G is how many
// values its least rank is past the sample before's, and the ranks it
// may have span G+Delta.
type PercentileSample struct {
	Value float64 `json:"value"`
	G     int64   `json:"g"`
	Delta int64   `json:"delta"`
}

// The head grows to percentileHead values before they go into the
// summary, which is then compressed. Spark's head is 50,000 values,
// and it compresses once the summary has 10,000 samples: a smaller head
// keeps a key's accumulator small where it is stored with its head (a
// key's first batch, AggregateOver's unbounded frames), and compressing
// at each flush keeps the summary small for the next flush to copy.
const percentileHead = 1000

// ApproxPercentile estimates, for each of percentages (each from 0 to
// 1), a percentile of value over the rows, as Spark's
// percentile_approx(column, percentages, accuracy): the value v among
// the rows whose rank (its place among them, from 1, least first) is
// within n/accuracy of ⌈p·n⌉ for n rows: the smallest value that no
// more than a share p of the values is below, give or take a share
// 1/accuracy of them. The result has a value for each percentage, in
// their order, and none without a row. A Greenwald–Khanna summary, as
// Spark's (QuantileSummaries), but that a value goes in with the span
// of ranks of the sample after it, as in Greenwald and Khanna's
// insertion, where Spark gives it 2·error·count: the same bound, and
// fewer samples. Of 24 bytes each: of a million values, random or in
// order, it keeps 71 or 73 samples at accuracy 100, 716 or 769 at 1,000,
// but 20,544 or 7,109 (493 or 171 kB) at Spark's default, 10,000; so an
// accuracy of 100 to 1,000 suits state kept for each key and window.
// Up to 1,000 values wait uncompressed beside the summary, and are
// stored so in a key's first batch. Summaries of any batch,
// process or restart merge within the error of each, and those of
// another accuracy (a restart with another) at the coarser. A NaN value
// counts as greater than every other, as Spark orders doubles: a
// percentage whose rank falls among the NaN values gives NaN, and so
// does every percentage of rows that are all NaN. (Spark's summary may
// also give NaN below them, where its compression drops the least
// sample that NaN does not compare with; here the rank decides.)
//
// Add and Merge may change their first accumulator (its samples and
// its head) and return it; Merge never changes its second, nor returns
// memory of it; Result changes nothing. A stored accumulator that is no summary
// (samples out of order, or not adding up to its count, an error out
// of range) fails the query, naming what is wrong. ApproxPercentile
// panics when a percentage is not between 0 and 1 or accuracy is not
// positive, as Spark's analysis refuses them.
func ApproxPercentile[In any](value func(*In) float64, percentages []float64, accuracy int) Aggregator[In, PercentileAcc, []float64] {
	if accuracy <= 0 {
		panic(fmt.Sprintf("streamgen: ApproxPercentile: accuracy %d must be positive", accuracy))
	}
	for _, p := range percentages {
		if !(p >= 0 && p <= 1) {
			panic(fmt.Sprintf("streamgen: ApproxPercentile: percentage %v must be between 0 and 1", p))
		}
	}
	return percentileAgg[In]{value: value, percentages: slices.Clone(percentages), eps: 1 / float64(accuracy)}
}

type percentileAgg[In any] struct {
	value       func(*In) float64
	percentages []float64
	eps         float64
}

func (a percentileAgg[In]) Zero() PercentileAcc { return PercentileAcc{RelativeError: a.eps} }

func (a percentileAgg[In]) Add(acc PercentileAcc, r *In) PercentileAcc {
	x := a.value(r)
	if math.IsNaN(x) {
		acc.NaNs++
		return acc
	}
	if acc.Head = append(acc.Head, x); len(acc.Head) >= percentileHead {
		// acc is Add's to change: the head goes into the samples where
		// they are (with room for the next head), and is kept for the
		// next values, with room past it for sortFloats' scratch.
		mustBeSummary(acc)
		head := acc.Head
		if cap(head) < 2*len(head) {
			head = append(make([]float64, 0, 2*percentileHead), head...)
			acc.Head = head
		}
		acc = compressSummary(acc, true, percentileHead)
		acc.Head = head[:0]
	}
	return acc
}

// Merge merges two summaries, as Spark's QuantileSummaries.merge: each
// compressed first (x where it is), a sample of one side that falls
// among the other's taking the other's error into its span. The result
// may be x, changed; it shares no memory with y.
func (a percentileAgg[In]) Merge(x, y PercentileAcc) PercentileAcc {
	mustBeSummary(x)
	mustBeSummary(y)
	x, y = compressSummary(x, true, 0), compressSummary(y, false, 0)
	nans := x.NaNs + y.NaNs
	switch {
	case y.Count == 0:
		x.NaNs = nans
		return x
	case x.Count == 0:
		// y has no head left: its values are in its samples.
		return PercentileAcc{RelativeError: y.RelativeError, Count: y.Count, Samples: slices.Clone(y.Samples), NaNs: nans}
	}
	eps := max(x.RelativeError, y.RelativeError)
	extraX := int64(math.Floor(2 * y.RelativeError * float64(y.Count)))
	extraY := int64(math.Floor(2 * x.RelativeError * float64(x.Count)))
	merged := make([]PercentileSample, 0, len(x.Samples)+len(y.Samples))
	i, j := 0, 0
	for i < len(x.Samples) && j < len(y.Samples) {
		if s := x.Samples[i]; s.Value < y.Samples[j].Value {
			if j > 0 {
				s.Delta += extraX
			}
			merged = append(merged, s)
			i++
		} else {
			s := y.Samples[j]
			if i > 0 {
				s.Delta += extraY
			}
			merged = append(merged, s)
			j++
		}
	}
	merged = append(append(merged, x.Samples[i:]...), y.Samples[j:]...)
	count := x.Count + y.Count
	return PercentileAcc{RelativeError: eps, Count: count, Samples: compressSamples(merged, 2*eps*float64(count)), NaNs: nans}
}

// Result queries the summary for each percentage, as Spark's
// QuantileSummaries.query: the first sample whose ranks are within the
// summary's error of the target rank.
func (a percentileAgg[In]) Result(acc PercentileAcc) []float64 {
	mustBeSummary(acc)
	acc = compressSummary(acc, false, 0)
	if acc.Count == 0 && acc.NaNs == 0 {
		return nil
	}
	var spread int64 // the widest span of a sample's ranks
	for _, s := range acc.Samples {
		spread = max(spread, s.G+s.Delta)
	}
	out := make([]float64, len(a.percentages))
	for k, p := range a.percentages {
		out[k] = querySummary(acc, p, spread/2)
	}
	return out
}

// querySummary returns the value of percentage p: among acc's samples,
// or NaN where p's rank, of the values and the NaN values after them, is
// past the values.
func querySummary(acc PercentileAcc, p float64, targetError int64) float64 {
	s := acc.Samples
	total := acc.Count + acc.NaNs
	rank := int64(math.Ceil(p * float64(total)))
	switch {
	case acc.Count == 0:
		return math.NaN()
	case p <= acc.RelativeError:
		return s[0].Value
	case acc.NaNs > 0 && (p >= 1-acc.RelativeError || rank > acc.Count):
		return math.NaN()
	case p >= 1-acc.RelativeError:
		return s[len(s)-1].Value
	}
	var minRank int64
	for _, c := range s[:len(s)-1] {
		minRank += c.G
		if maxRank := minRank + c.Delta; maxRank-targetError <= rank && rank <= minRank+targetError {
			return c.Value
		}
	}
	return s[len(s)-1].Value
}

// compressSummary returns acc with its head's values inserted among its
// samples, compressed (the GK algorithm's COMPRESS). A summary without
// a head is compressed already (Add and Merge leave none uncompressed)
// and is returned as it is. With owned, acc's samples and head are
// written over; otherwise neither is changed. A copy of the samples has
// room for room more.
func compressSummary(acc PercentileAcc, owned bool, room int) PercentileAcc {
	if len(acc.Head) == 0 {
		return acc
	}
	acc = withHead(acc, owned, room)
	acc.Samples = compressSamples(acc.Samples, 2*acc.RelativeError*float64(acc.Count))
	return acc
}

// withHead returns acc with its head's values inserted among its samples
// (Spark's withHeadBufferInserted), each with the span of ranks it may
// have: G 1, and Delta the G+Delta of the sample after it less one (0
// past every sample or before them all, whose ranks are known). The
// samples are merged from the greatest down, into acc's own samples
// when owned and their capacity allows, else into a copy with room for
// room more; the head is sorted in place when owned, with the room past
// it as scratch.
func withHead(acc PercentileAcc, owned bool, room int) PercentileAcc {
	head := acc.Head
	n, h := len(acc.Samples), len(head)
	scratch := head[h:cap(head)]
	if !owned || len(scratch) < h {
		buf := make([]float64, 2*h)
		copy(buf, head)
		head, scratch = buf[:h], buf[h:]
	}
	sortFloats(head, scratch)
	s := acc.Samples
	if !owned || cap(s) < n+h {
		s = append(make([]PercentileSample, 0, n+h+room), s...)
	}
	s = s[:n+h]
	i := n - 1
	nextSpan := int64(-1) // G+Delta of the least sample past head[j]; -1 for none
	for j := h - 1; j >= 0; j-- {
		for i >= 0 && s[i].Value > head[j] {
			nextSpan = s[i].G + s[i].Delta
			s[i+j+1] = s[i]
			i--
		}
		// Between samples a and b, head[j]'s least rank is a's and its
		// place among the head's values before it; its greatest, b's
		// greatest, less the head's values after it: its span is b's,
		// less one. Past every sample or before them all, its rank is
		// known.
		var delta int64
		if i >= 0 && nextSpan >= 0 {
			delta = max(nextSpan-1, 0)
		}
		s[i+j+1] = PercentileSample{Value: head[j], G: 1, Delta: delta}
	}
	return PercentileAcc{RelativeError: acc.RelativeError, Count: acc.Count + int64(h), Samples: s, NaNs: acc.NaNs}
}

// compressSamples is Spark's compressImmut, in place: from the greatest
// sample down, a sample is folded into the one after it while their
// ranks' span stays under threshold; the least and the greatest are
// kept. The samples kept are moved to the front of s.
func compressSamples(s []PercentileSample, threshold float64) []PercentileSample {
	if len(s) == 0 {
		return s
	}
	least := s[0]
	w := len(s) // s[w:] are the samples kept, but head
	head := s[len(s)-1]
	for i := len(s) - 2; i >= 1; i-- {
		if c := s[i]; float64(c.G+head.G+head.Delta) < threshold {
			head.G += c.G
		} else {
			// w-1 > i: as many samples are kept past i as were read.
			w--
			s[w] = head
			head = c
		}
	}
	w--
	s[w] = head
	if len(s) > 1 && least.Value <= head.Value {
		w--
		s[w] = least
	}
	return s[:copy(s, s[w:])]
}

// mustBeSummary panics, with what is wrong (the query fails with it),
// unless acc is a summary this aggregator makes: an error between 0 and
// 1, samples in order whose G add up to its count, none negative.
func mustBeSummary(acc PercentileAcc) {
	if !(acc.RelativeError > 0 && acc.RelativeError <= 1) && (acc.Count > 0 || len(acc.Samples) > 0 || len(acc.Head) > 0) {
		panic(fmt.Errorf("ApproxPercentile: an accumulator of relative error %v: not a summary this aggregator makes (an error above 0, at most 1)", acc.RelativeError))
	}
	var n int64
	for i, s := range acc.Samples {
		if s.G < 0 || s.Delta < 0 || math.IsNaN(s.Value) || i > 0 && s.Value < acc.Samples[i-1].Value {
			panic(fmt.Errorf("ApproxPercentile: sample %d of an accumulator is %+v after %+v: not a summary this aggregator makes (samples in order of value, their g and delta not negative)", i, s, acc.Samples[max(i-1, 0)]))
		}
		n += s.G
	}
	if n != acc.Count {
		panic(fmt.Errorf("ApproxPercentile: an accumulator of %d values has samples of %d: not a summary this aggregator makes", acc.Count, n))
	}
}

// sortFloats sorts v, which holds no NaN, by radix on the bits of its
// values (codec.OrderedFloat64), a byte a pass, skipping the bytes all
// values share, with scratch (at least as long) between passes.
func sortFloats(v, scratch []float64) {
	if len(v) < 64 {
		slices.Sort(v)
		return
	}
	var counts [8][256]int32
	for _, x := range v {
		k := codec.OrderedFloat64(x)
		for b := range counts {
			counts[b][byte(k>>(8*b))]++
		}
	}
	src, dst := v, scratch[:len(v)]
	first := codec.OrderedFloat64(v[0])
	for b := range counts {
		c := &counts[b]
		if c[byte(first>>(8*b))] == int32(len(v)) {
			continue // every value has this byte
		}
		var sum int32
		for i, n := range c {
			c[i], sum = sum, sum+n
		}
		for _, x := range src {
			d := byte(codec.OrderedFloat64(x) >> (8 * b))
			dst[c[d]] = x
			c[d]++
		}
		src, dst = dst, src
	}
	if &src[0] != &v[0] {
		copy(v, src)
	}
}
