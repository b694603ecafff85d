package typed

import (
	"fmt"

	"github.com/streamgen/streamgen/codec"
)

// ReduceAcc is Reduce's accumulator: the value reduced so far, in its
// binary encoding (nil before the first row).
//
//streamgen:record
type ReduceAcc struct {
	Row []byte `json:"row"`
	// owned says that Row was made by Add or Merge for this accumulator
	// alone, so that the next Add may write over it; not stored.
	owned bool
}

// Reduce combines the rows with f, as Kafka Streams' reduce and Spark's
// reduceGroups: the first row of a group is its value, and each later
// one is folded in as f(value, row); its result is the value (In's zero
// value for a group of no row). Rows are folded in the order they came
// by key and over tumbling, sliding and cumulative windows, and the value
// of the rows of a batch is combined with the stored one as f(stored,
// batch's), so f must be associative (f(f(a, b), c) = f(a, f(b, c))) for
// the result not to depend on how the rows fell into batches; over
// sessions and the windows of a time difference, which fold a batch's
// rows in event-time order, it must be commutative too, as Spark asks of
// reduceGroups. f gets the value decoded for the call, its own to
// change and return, and the row as Add is given it: f must not write
// into the row's slices or maps. The value is kept in its binary encoding
// (In is a record): each row costs a decoding, f and an encoding; the
// checkpoint keeps In's schema, and a start with a type whose fields
// cannot read the stored values (codec.Compatible) is refused, naming
// the field. Add writes the new encoding over the one it was given when
// an earlier Add or Merge made it; Merge never changes its second
// accumulator, nor returns memory of it that is written later.
func Reduce[In any, P codec.RecordPtr[In]](f func(value, row In) In) Aggregator[In, ReduceAcc, In] {
	return reduceAgg[In, P]{f: f}
}

type reduceAgg[In any, P codec.RecordPtr[In]] struct {
	f func(value, row In) In
}

func (reduceAgg[In, P]) params() string           { return "" }
func (reduceAgg[In, P]) foldsInArrivalOrder()     {}
func (reduceAgg[In, P]) rowSchema() *codec.Schema { return P(nil).StreamSchema() }

func (reduceAgg[In, P]) Zero() ReduceAcc { return ReduceAcc{} }

func (a reduceAgg[In, P]) Add(acc ReduceAcc, r *In) ReduceAcc {
	var buf []byte
	if acc.owned {
		buf = acc.Row[:0] // the value is decoded out of it first
	}
	if acc.Row == nil {
		return ReduceAcc{Row: encodeReduced[In, P](buf, *r), owned: true}
	}
	return ReduceAcc{Row: encodeReduced[In, P](buf, a.f(decodeReduced[In, P](acc.Row), *r)), owned: true}
}

func (a reduceAgg[In, P]) Merge(x, y ReduceAcc) ReduceAcc {
	switch {
	case y.Row == nil:
		return x
	case x.Row == nil:
		return ReduceAcc{Row: y.Row} // not owned: an Add encodes anew
	}
	return ReduceAcc{Row: encodeReduced[In, P](nil, a.f(decodeReduced[In, P](x.Row), decodeReduced[In, P](y.Row))), owned: true}
}

func (reduceAgg[In, P]) Result(acc ReduceAcc) In {
	if acc.Row == nil {
		var zero In
		return zero
	}
	return decodeReduced[In, P](acc.Row)
}

// encodeReduced encodes a value of Reduce into buf's memory, or a new
// slice.
func encodeReduced[In any, P codec.RecordPtr[In]](buf []byte, v In) []byte {
	enc := encodeRow[In, P]("Reduce", buf, &v)
	if enc == nil {
		enc = []byte{} // a record of no field: still a value
	}
	return enc
}

// decodeReduced decodes a value of Reduce, failing the query, with what
// is wrong, when the stored bytes are no value of In.
func decodeReduced[In any, P codec.RecordPtr[In]](enc []byte) In {
	var v In
	if err := P(&v).UnmarshalBinary(enc); err != nil {
		panic(userPanic{fmt.Errorf("streamgen: Reduce: the stored value does not decode: %w", unprefixed(err))})
	}
	return v
}
