package typed

import (
	"fmt"
	"slices"

	"github.com/streamgen/streamgen/codec"
)

// TopAcc is TopN's accumulator: the binary encodings of the best rows so
// far, best first. While rows are folded in, it also holds them decoded,
// which is not stored.
//
//streamgen:record
type TopAcc struct {
	Rows [][]byte `json:"rows"`
	// decoded is Rows decoded (a []In of TopN's row type), when known.
	decoded any
}

// TopN keeps the n best rows, as Flink's Top-N (ROW_NUMBER() OVER
// (PARTITION BY key ORDER BY ...) <= n): better(a, b), a strict order,
// says that a ranks before b. Of rows that rank alike, by key and over
// tumbling, sliding and cumulative windows the one that came first
// ranks first; sessions and the windows of a time difference fold a
// batch's rows in event-time order, so which of them ranks first there
// depends on how the rows fell into batches: where it matters, break
// ties in better (by a time or an id). Its result is the rows, best
// first (at most n; none without a row), each decoded anew for the
// call, and the rank of a row is its place in them, from 0. Over
// windows (AggregateWindows) it is Flink's Window Top-N, written once a
// window closes in the Append mode; by key (AggregateByKey) its Update
// rows are each key's top n as it changes. TopN(1, ...) is Spark's
// max_by and min_by: the row of the greatest or least ordering value,
// from which the row function takes the column (of rows that tie, the
// first to come, where Spark's keeps the last it folds and calls the
// choice non-deterministic: break ties in better to choose). The
// checkpoint keeps
// n: a start with another is refused (its stored rows were cut to the
// old n) unless runtime.AllowPipelineChanges is given, and then gives at
// most the new n rows, but no row a smaller n left out before.
//
// The rows are kept in their binary encoding (In is a record), and the
// checkpoint keeps In's schema: a start with a type whose fields cannot
// read the stored rows (codec.Compatible) is refused, naming the field;
// a stored row that no longer decodes anyway fails the query, naming
// the row.
// Once a batch's partial aggregate of a key holds n rows, a row that
// ranks below them costs one call of better; one that enters them, an
// encoding and a decoding; a key's stored rows are decoded once a batch
// (over the windows of a time difference, once for each window an
// instant's rows go into). Add and Merge may change their first
// accumulator and return it; Merge never changes its second, nor
// returns memory of it that is written later. TopN panics when n is not
// positive.
func TopN[In any, P codec.RecordPtr[In]](n int, better func(a, b *In) bool) Aggregator[In, TopAcc, []In] {
	if n <= 0 {
		panic(fmt.Sprintf("streamgen: TopN: n is %d, must be positive", n))
	}
	return topAgg[In, P]{n: n, better: better}
}

type topAgg[In any, P codec.RecordPtr[In]] struct {
	n      int
	better func(a, b *In) bool
}

func (a topAgg[In, P]) params() string           { return fmt.Sprintf("keeps the %d best rows", a.n) }
func (a topAgg[In, P]) rowSchema() *codec.Schema { return P(nil).StreamSchema() }

func (topAgg[In, P]) Zero() TopAcc { return TopAcc{} }

// rows returns acc's rows decoded, decoding them into acc the first
// time.
func (t topAgg[In, P]) rows(acc *TopAcc) []In {
	if rows, ok := acc.decoded.([]In); ok && len(rows) == len(acc.Rows) {
		return rows
	}
	rows := decodeRows[In, P]("TopN", acc.Rows)
	acc.decoded = rows
	return rows
}

func (t topAgg[In, P]) Add(acc TopAcc, r *In) TopAcc {
	rows := t.rows(&acc)
	// r's place: after every row it does not rank before.
	i := len(rows)
	for i > 0 && t.better(r, &rows[i-1]) {
		i--
	}
	if i >= t.n {
		return acc // below the n kept (or more, stored by a larger n)
	}
	enc := encodeRow[In, P]("TopN", nil, r)
	// The row kept is decoded from its encoding: a value of its own, not
	// one sharing memory with the row given.
	var own In
	if err := P(&own).UnmarshalBinary(enc); err != nil {
		panic(userPanic{fmt.Errorf("streamgen: TopN: a row does not decode from its encoding: %w", unprefixed(err))})
	}
	rows = slices.Insert(rows, i, own)
	acc.Rows = slices.Insert(acc.Rows, i, enc)
	if len(rows) > t.n {
		clear(rows[t.n:])
		rows, acc.Rows = rows[:t.n], acc.Rows[:t.n]
	}
	acc.decoded = rows
	return acc
}

// Merge keeps the n best of x's rows and y's, x's first of those that
// rank alike (x holds the rows that came first: the stored ones).
func (t topAgg[In, P]) Merge(x, y TopAcc) TopAcc {
	if len(y.Rows) == 0 {
		return x
	}
	xs, ys := t.rows(&x), t.rows(&y)
	out := TopAcc{Rows: make([][]byte, 0, min(t.n, len(xs)+len(ys)))}
	rows := make([]In, 0, cap(out.Rows))
	i, j := 0, 0
	for len(rows) < t.n && (i < len(xs) || j < len(ys)) {
		if j == len(ys) || i < len(xs) && !t.better(&ys[j], &xs[i]) {
			rows, out.Rows = append(rows, xs[i]), append(out.Rows, x.Rows[i])
			i++
		} else {
			rows, out.Rows = append(rows, ys[j]), append(out.Rows, y.Rows[j])
			j++
		}
	}
	out.decoded = rows
	return out
}

func (t topAgg[In, P]) Result(acc TopAcc) []In {
	if len(acc.Rows) == 0 {
		return nil
	}
	// At most n: rows a larger n kept (before a restart) stay stored.
	return decodeRows[In, P]("TopN", acc.Rows[:min(t.n, len(acc.Rows))])
}
