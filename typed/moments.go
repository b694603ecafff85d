package typed

import "math"

// MomentsAcc is the accumulator of the variances and standard
// deviations: how many values, their mean, and the sum of their squared
// differences from it (Welford's), which merge without the loss of
// precision a sum of squares suffers.
//
//streamgen:record
type MomentsAcc struct {
	N    int64   `json:"n"`
	Mean float64 `json:"mean"`
	M2   float64 `json:"m2"`
}

// NullIfNaN is v as an optional value: nil for NaN, the NaN that the
// aggregates give where Spark's give NULL (VarSamp and StddevSamp of one
// row; Avg, Min and Max of none), else a pointer to v. A JSON sink refuses
// NaN, as encoding/json does; a *float64 field tagged omitempty, given
// NullIfNaN's result, leaves the member out, as Spark's JSON writer leaves
// out a NULL. (Where the rows hold a NaN, Spark's sample statistics are
// NaN, not NULL; NullIfNaN cannot tell the two apart.) Safe for
// concurrent use.
func NullIfNaN(v float64) *float64 {
	if math.IsNaN(v) {
		return nil
	}
	return &v
}

// VarPop is the population variance of value over the rows, as Spark's
// and Flink's var_pop: the mean squared difference from the mean (NaN
// for none, as their NULL).
func VarPop[In any](value func(*In) float64) Aggregator[In, MomentsAcc, float64] {
	return momentsAgg[In]{value: value, result: func(a MomentsAcc) float64 { return a.M2 / float64(a.N) }}
}

// VarSamp is the sample variance of value over the rows, as Spark's
// var_samp and variance and Flink's VAR_SAMP: the squared differences
// from the mean over one less than the rows (NaN for fewer than two
// rows, as their NULL: a group of one row is common, and a JSON sink
// refuses NaN; write the result through NullIfNaN).
func VarSamp[In any](value func(*In) float64) Aggregator[In, MomentsAcc, float64] {
	return momentsAgg[In]{value: value, result: func(a MomentsAcc) float64 { return a.M2 / float64(a.N-1) }}
}

// StddevPop is the population standard deviation of value over the
// rows, as Spark's and Flink's stddev_pop: VarPop's square root.
func StddevPop[In any](value func(*In) float64) Aggregator[In, MomentsAcc, float64] {
	return momentsAgg[In]{value: value, result: func(a MomentsAcc) float64 { return math.Sqrt(a.M2 / float64(a.N)) }}
}

// StddevSamp is the sample standard deviation of value over the rows,
// as Spark's stddev_samp and stddev and Flink's STDDEV_SAMP: VarSamp's
// square root (NaN for fewer than two rows: see NullIfNaN).
func StddevSamp[In any](value func(*In) float64) Aggregator[In, MomentsAcc, float64] {
	return momentsAgg[In]{value: value, result: func(a MomentsAcc) float64 { return math.Sqrt(a.M2 / float64(a.N-1)) }}
}

// momentsAgg is the variances' and standard deviations' aggregator.
// NaN for no row is Result's; for one row a sample's result gives it:
// M2 is 0, which it divides by 0.
type momentsAgg[In any] struct {
	value  func(*In) float64
	result func(MomentsAcc) float64
}

func (momentsAgg[In]) Zero() MomentsAcc { return MomentsAcc{} }

// Add folds x in as Spark's CentralMomentAgg does.
func (m momentsAgg[In]) Add(a MomentsAcc, r *In) MomentsAcc {
	x := m.value(r)
	a.N++
	delta := x - a.Mean
	deltaN := delta / float64(a.N)
	a.Mean += deltaN
	a.M2 += delta * (delta - deltaN)
	return a
}

// Merge combines two sets' moments (Chan, Golub and LeVeque).
func (momentsAgg[In]) Merge(a, b MomentsAcc) MomentsAcc {
	switch {
	case b.N == 0:
		return a
	case a.N == 0:
		return b
	}
	n := a.N + b.N
	delta := b.Mean - a.Mean
	deltaN := delta / float64(n)
	return MomentsAcc{
		N:    n,
		Mean: a.Mean + deltaN*float64(b.N),
		M2:   a.M2 + b.M2 + delta*deltaN*float64(a.N)*float64(b.N),
	}
}

func (m momentsAgg[In]) Result(a MomentsAcc) float64 {
	if a.N == 0 {
		return math.NaN()
	}
	return m.result(a)
}
