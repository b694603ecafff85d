package typed

import (
	"math"
	"reflect"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// Aggregator folds rows into an accumulator and gives a result, as
// Spark's typed Aggregator and Flink's AggregateFunction. Zero is the
// accumulator of no row; Add folds a row in; Merge combines two
// accumulators (a batch's rows, folded as they arrive, into the stored
// accumulator, and session windows that merge), so it must give what
// adding b's rows to a would; Result gives the output. The
// accumulator is kept in state with its generated codec, so Acc must be a
// record (//streamgen:record). Add, Merge and Result may return their
// argument changed.
type Aggregator[In, Acc, Out any] interface {
	Zero() Acc
	Add(acc Acc, row *In) Acc
	Merge(a, b Acc) Acc
	Result(acc Acc) Out
}

// describedAggregator is an Aggregator whose stored accumulators depend
// on more than their type: its parameters (TopN's n) and the type of the
// rows it keeps encoded in them. The operator's checkpoint keeps both
// (runtime.OperatorInfo's Params and Rows), so that a start with another
// n is refused unless the pipeline's changes are allowed, and one with
// rows that cannot read the stored ones is refused.
type describedAggregator interface {
	// params says what the accumulators keep, as "keeps the 3 best
	// rows", or "".
	params() string
	// rowSchema is the schema of the rows kept, or nil.
	rowSchema() *codec.Schema
}

// describe sets the Params and Rows of info from agg, when it is a
// describedAggregator.
func describe(info *runtime.OperatorInfo, agg any) {
	if d, ok := agg.(describedAggregator); ok {
		info.Params, info.Rows = d.params(), d.rowSchema()
	}
}

// CountAcc is Count's accumulator.
//
//streamgen:record
type CountAcc struct {
	N int64 `json:"n"`
}

// SumAcc is the accumulator of Sum and Avg.
//
//streamgen:record
type SumAcc struct {
	Sum float64 `json:"sum"`
	N   int64   `json:"n"`
}

// ExtremeAcc is the accumulator of Min and Max.
//
//streamgen:record
type ExtremeAcc struct {
	Value float64 `json:"value"`
	Set   bool    `json:"set"`
}

// Count counts the rows.
func Count[In any]() Aggregator[In, CountAcc, int64] { return countAgg[In]{} }

type countAgg[In any] struct{}

func (countAgg[In]) Zero() CountAcc                 { return CountAcc{} }
func (countAgg[In]) Add(a CountAcc, _ *In) CountAcc { a.N++; return a }
func (countAgg[In]) Merge(a, b CountAcc) CountAcc   { return CountAcc{N: a.N + b.N} }
func (countAgg[In]) Result(a CountAcc) int64        { return a.N }

// Sum adds up value over the rows.
func Sum[In any](value func(*In) float64) Aggregator[In, SumAcc, float64] {
	return sumAgg[In]{value: value}
}

type sumAgg[In any] struct{ value func(*In) float64 }

func (sumAgg[In]) Zero() SumAcc { return SumAcc{} }
func (s sumAgg[In]) Add(a SumAcc, r *In) SumAcc {
	a.Sum += s.value(r)
	a.N++
	return a
}
func (sumAgg[In]) Merge(a, b SumAcc) SumAcc { return SumAcc{Sum: a.Sum + b.Sum, N: a.N + b.N} }
func (sumAgg[In]) Result(a SumAcc) float64  { return a.Sum }

// Avg averages value over the rows (NaN for none).
func Avg[In any](value func(*In) float64) Aggregator[In, SumAcc, float64] {
	return avgAgg[In]{sumAgg[In]{value: value}}
}

type avgAgg[In any] struct{ sumAgg[In] }

func (avgAgg[In]) Result(a SumAcc) float64 {
	if a.N == 0 {
		return math.NaN()
	}
	return a.Sum / float64(a.N)
}

// Min is the least value over the rows (NaN for none). NaN is greater
// than any other value, as in Spark's and Flink's min: it is the least
// only of rows that are all NaN, in whatever order the rows come.
func Min[In any](value func(*In) float64) Aggregator[In, ExtremeAcc, float64] {
	return extremeAgg[In]{value: value, less: func(a, b float64) bool { return a < b || math.IsNaN(b) && !math.IsNaN(a) }, rule: "keeps the least value"}
}

// Max is the greatest value over the rows (NaN for none). NaN is greater
// than any other value, as in Spark's and Flink's max: one NaN makes the
// greatest NaN, in whatever order the rows come.
func Max[In any](value func(*In) float64) Aggregator[In, ExtremeAcc, float64] {
	return extremeAgg[In]{value: value, less: func(a, b float64) bool { return a > b || math.IsNaN(a) && !math.IsNaN(b) }, rule: "keeps the greatest value"}
}

type extremeAgg[In any] struct {
	value func(*In) float64
	less  func(a, b float64) bool // a is more extreme than b
	// rule says which extreme it keeps, for the checkpoint: Min and Max
	// keep one accumulator type, and one's stored state is no start for
	// the other.
	rule string
}

func (e extremeAgg[In]) params() string         { return e.rule }
func (extremeAgg[In]) rowSchema() *codec.Schema { return nil }

func (extremeAgg[In]) Zero() ExtremeAcc { return ExtremeAcc{} }
func (e extremeAgg[In]) Add(a ExtremeAcc, r *In) ExtremeAcc {
	if v := e.value(r); !a.Set || e.less(v, a.Value) {
		a.Value, a.Set = v, true
	}
	return a
}
func (e extremeAgg[In]) Merge(a, b ExtremeAcc) ExtremeAcc {
	if !a.Set || b.Set && e.less(b.Value, a.Value) {
		return b
	}
	return a
}
func (extremeAgg[In]) Result(a ExtremeAcc) float64 {
	if !a.Set {
		return math.NaN()
	}
	return a.Value
}

// holdsNoReferences reports whether a value of t holds no memory that a
// copy of it shares (pointers, slices, maps, interfaces and the like),
// times and strings aside, which do not change: a copy of such a value
// is a value of its own. Called once, when a pipeline is built.
func holdsNoReferences(t reflect.Type) bool {
	if t == reflect.TypeFor[time.Time]() {
		return true
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128, reflect.String:
		return true
	case reflect.Array:
		return holdsNoReferences(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if !holdsNoReferences(t.Field(i).Type) {
				return false
			}
		}
		return true
	}
	return false
}
