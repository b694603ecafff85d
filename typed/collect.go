package typed

import (
	"fmt"

	"github.com/streamgen/streamgen/codec"
)

// RowsAcc is the accumulator of CollectList and CollectSet, the binary
// encodings of the rows collected, in the order they were folded in;
// and of CountDistinct, the distinct values' bytes.
//
//streamgen:record
type RowsAcc struct {
	Rows [][]byte `json:"rows"`
	// seen holds Rows, for CollectSet and CountDistinct to look a row
	// up in, once a batch has indexed them (add); not stored.
	seen map[string]struct{}
}

// CollectList collects the rows, as Spark's collect_list (of a struct
// of the columns, or of one: the row function takes what it needs) and
// Flink's ARRAY_AGG: its result is every row, each decoded anew for the
// call, none without a row, in the order they came by key and over
// tumbling, sliding and cumulative windows; sessions and the windows of
// a time difference fold a batch's rows in event-time order, so there
// the order depends on how the rows fell into batches. The rows are kept
// in their binary encoding (In is a record), all of a key's or window's
// in its one state value, which every batch that brings the key rows
// reads and writes whole: for groups of thousands of rows, keep a
// bounded set (TopN) or an aggregate instead. Add may change its
// accumulator; Merge appends y's rows to x's and never changes y. The
// checkpoint keeps In's schema: a start with a type whose fields cannot
// read the stored rows (codec.Compatible) is refused, naming the field;
// a stored row that does not decode anyway fails the query, naming the
// row.
func CollectList[In any, P codec.RecordPtr[In]]() Aggregator[In, RowsAcc, []In] {
	return collectAgg[In, P]{what: "CollectList"}
}

// CollectSet collects the rows, each once, where it first came in
// CollectList's order, as Spark's collect_set: rows are alike when their binary encodings are
// (every field equal, a float's bits; a map's entries are encoded in
// order of their keys). As CollectList otherwise; a batch indexes a
// group's rows once, to find a row already in the set.
//
// Rows stored before a change of In's fields that the checkpoint takes
// (a field added, say) are encoded without it, so a row that comes
// after the change is never alike one of them: it is kept beside it.
func CollectSet[In any, P codec.RecordPtr[In]]() Aggregator[In, RowsAcc, []In] {
	return collectAgg[In, P]{what: "CollectSet", set: true}
}

// CountDistinct counts the distinct values value takes over the rows,
// exactly, as Flink's COUNT(DISTINCT x) (Spark refuses a distinct
// aggregation over a stream; ApproxCountDistinct is its estimate). The
// values are kept, each once, in the accumulator (RowsAcc, a value's
// bytes a row): all of a key's or window's in its one state value,
// which every batch that brings the key rows reads and writes whole;
// for many distinct values a group, ApproxCountDistinct keeps a few
// hundred bytes instead. Add may change its accumulator; Merge never
// changes its second.
func CountDistinct[In any](value func(*In) string) Aggregator[In, RowsAcc, int64] {
	return distinctAgg[In]{value: value}
}

type distinctAgg[In any] struct{ value func(*In) string }

func (distinctAgg[In]) Zero() RowsAcc { return RowsAcc{} }

func (d distinctAgg[In]) Add(acc RowsAcc, r *In) RowsAcc {
	if v := []byte(d.value(r)); acc.add(v) {
		acc.Rows = append(acc.Rows, v)
	}
	return acc
}

func (distinctAgg[In]) Merge(x, y RowsAcc) RowsAcc { return mergeRows(x, y, true) }

func (distinctAgg[In]) Result(acc RowsAcc) int64 { return int64(len(acc.Rows)) }

type collectAgg[In any, P codec.RecordPtr[In]] struct {
	what string
	set  bool // each row once
}

func (collectAgg[In, P]) foldsInArrivalOrder() {}

func (c collectAgg[In, P]) params() string {
	if c.set {
		return "keeps each row once" // a list's stored rows are no set
	}
	return "keeps every row"
}
func (collectAgg[In, P]) rowSchema() *codec.Schema { return P(nil).StreamSchema() }

func (collectAgg[In, P]) Zero() RowsAcc { return RowsAcc{} }

func (c collectAgg[In, P]) Add(acc RowsAcc, r *In) RowsAcc {
	enc := encodeRow[In, P](c.what, nil, r)
	if !c.set || acc.add(enc) {
		acc.Rows = append(acc.Rows, enc)
	}
	return acc
}

func (c collectAgg[In, P]) Merge(x, y RowsAcc) RowsAcc { return mergeRows(x, y, c.set) }

// mergeRows appends y's rows to x's (with set, those x has not) and
// returns x; y is not changed, and x's rows are never y's slice.
func mergeRows(x, y RowsAcc, set bool) RowsAcc {
	if len(x.Rows) == 0 {
		// A slice of x's own: appending to it leaves y's as it is.
		return RowsAcc{Rows: append([][]byte(nil), y.Rows...)}
	}
	for _, enc := range y.Rows {
		if !set || x.add(enc) {
			x.Rows = append(x.Rows, enc)
		}
	}
	return x
}

func (c collectAgg[In, P]) Result(acc RowsAcc) []In {
	if len(acc.Rows) == 0 {
		return nil
	}
	return decodeRows[In, P](c.what, acc.Rows)
}

// add adds the encoding enc to the set of a's rows, which it indexes
// first if it has not, and reports whether it was not there.
func (a *RowsAcc) add(enc []byte) bool {
	if a.seen == nil {
		a.seen = make(map[string]struct{}, len(a.Rows)+1)
		for _, r := range a.Rows {
			a.seen[string(r)] = struct{}{}
		}
	}
	if _, ok := a.seen[string(enc)]; ok {
		return false // looked up without a copy of enc
	}
	a.seen[string(enc)] = struct{}{}
	return true
}

// encodeRow appends the binary encoding of r, a row of aggregator what,
// to buf; a row that does not encode fails the query, saying so.
func encodeRow[In any, P codec.RecordPtr[In]](what string, buf []byte, r *In) []byte {
	enc, err := P(r).AppendBinary(buf)
	if err != nil {
		panic(userPanic{fmt.Errorf("streamgen: %s: a row does not encode: %w", what, unprefixed(err))})
	}
	return enc
}

// decodeRows decodes the encoded rows of aggregator what, each a value of
// its own; a row that does not decode fails the query, naming it.
func decodeRows[In any, P codec.RecordPtr[In]](what string, encoded [][]byte) []In {
	rows := make([]In, len(encoded))
	for i, b := range encoded {
		if err := P(&rows[i]).UnmarshalBinary(b); err != nil {
			panic(userPanic{fmt.Errorf("streamgen: %s: stored row %d of %d does not decode: %w", what, i+1, len(encoded), unprefixed(err))})
		}
	}
	return rows
}
