package typed

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/streamgen/streamgen/runtime"
)

// JoinType is the kind of a join, as Spark's join types.
type JoinType int

const (
	// Inner writes a row for each pair of rows, one of each side, whose
	// keys are equal (and that meet the join's conditions).
	Inner JoinType = iota
	// LeftOuter writes Inner's rows, and each row of the left side that
	// has no match, with no right row.
	LeftOuter
	// RightOuter writes Inner's rows, and each row of the right side that
	// has no match, with no left row.
	RightOuter
	// FullOuter writes Inner's rows, and each row of either side that has
	// no match.
	FullOuter
	// LeftSemi writes each row of the left side that has a match, once,
	// with no right row.
	LeftSemi
	// LeftAnti writes each row of the left side that has no match, with no
	// right row (stream-static joins only, as in Spark).
	LeftAnti
)

// String names the join type as Spark's JoinType does.
func (j JoinType) String() string {
	switch j {
	case Inner:
		return "Inner"
	case LeftOuter:
		return "LeftOuter"
	case RightOuter:
		return "RightOuter"
	case FullOuter:
		return "FullOuter"
	case LeftSemi:
		return "LeftSemi"
	case LeftAnti:
		return "LeftAnti"
	}
	return fmt.Sprintf("JoinType(%d)", int(j))
}

// keepsLeft reports whether rows of the left side without a match are
// written.
func (j JoinType) keepsLeft() bool { return j == LeftOuter || j == FullOuter || j == LeftAnti }

// keepsRight reports whether rows of the right side without a match are
// written.
func (j JoinType) keepsRight() bool { return j == RightOuter || j == FullOuter }

// readsLeftFlags reports whether the join reads whether a stored left row
// has had a match: to write it padded, or a LeftSemi row once.
func (j JoinType) readsLeftFlags() bool { return j.keepsLeft() || j == LeftSemi }

// Joined is a row of a join as the function that makes the join's output
// sees it: the key, the left and right rows, and, for a join on windows,
// their window.
//
// A side's row is nil where the join pads the row of the other side, as
// SQL pads it with nulls: Right in a LeftOuter join's row for a left row
// without a match, Left in a RightOuter join's, either in a FullOuter
// join's, and Right always in LeftSemi and LeftAnti. Pointers say "no row"
// where a zero value would be mistaken for one (a zero count, an empty
// name), and cost nothing when the row is there. The rows are the join's
// own: the function may keep them.
type Joined[K comparable, L, R any] struct {
	Key   K
	Left  *L
	Right *R
	// Window is the window of both rows, in a join on windows
	// (JoinOnWindows); zero otherwise.
	Window Window
}

// NullKey is implemented by a join key that may hold a null part, as a
// SQL key column may be null: a key whose HasNull reports true never
// matches, as NULL = NULL is not true in SQL (Spark's equi-joins). Such a
// row of a side whose unmatched rows are written is written at once,
// padded; otherwise it is dropped. Neither side stores it.
type NullKey interface {
	HasNull() bool
}

// The figures in the progress (CustomMetrics) of the rows a join or table
// operator drops for a key with a null part, which Kafka Streams counts
// in dropped-records: a table's updates, and a stream's rows that a join
// does not keep without a match (an Inner join's; a stream-stream join's
// side that is not padded).
const (
	nullKeyMetric     = "numNullKeyUpdatesDropped"
	nullKeyRowsMetric = "numNullKeyRowsDropped"
)

// nullKeys counts an operator's updates and rows of a batch dropped for a
// null key, and adds them to its figures when the batch's rows are done.
type nullKeys struct{ n, rows int64 }

// done adds the batch's counts to operator op's figures.
func (c *nullKeys) done(b *runtime.Batch, op int) {
	if c.n > 0 {
		b.AddMetric(op, nullKeyMetric, c.n)
	}
	if c.rows > 0 {
		b.AddMetric(op, nullKeyRowsMetric, c.rows)
	}
	*c = nullKeys{}
}

// nullCheck returns, for a key type that implements NullKey, a function
// that reports whether a key has a null part; nil for a type that does
// not (its keys are never null), decided once.
func nullCheck[K comparable]() func(*K) bool {
	var zero K
	if _, ok := any(zero).(NullKey); !ok {
		return nil
	}
	return func(k *K) bool { return any(*k).(NullKey).HasNull() }
}

// timeMerge orders a key's rows of a batch from two inputs that keep a
// table up to date: each input's rows in the order they came (a table's
// updates apply in that order, as Kafka Streams applies a topic's, so a
// late update is not put before an earlier one of its input), the two
// merged by event time, the first input's row first at equal times.
// Without event times, the first input's rows come first. Its buffers
// are reused from call to call.
type timeMerge struct{ first, second []int32 }

// merge returns rows so ordered in dst; second reports whether a row is of
// the second input, and at gives a row's event time (timed only).
// sortFirst puts the first input's rows in order of time before the
// merge (timed only), for an input whose rows are not in the order they
// came.
func (m *timeMerge) merge(dst, rows []int32, timed bool, second func(int32) bool, at func(int32) int64, sortFirst bool) []int32 {
	m.first, m.second = m.first[:0], m.second[:0]
	for _, n := range rows {
		if second(n) {
			m.second = append(m.second, n)
		} else {
			m.first = append(m.first, n)
		}
	}
	if timed && sortFirst {
		slices.SortStableFunc(m.first, func(a, b int32) int { return cmp.Compare(at(a), at(b)) })
	}
	dst = dst[:0]
	i, j := 0, 0
	for timed && i < len(m.first) && j < len(m.second) {
		if at(m.second[j]) < at(m.first[i]) {
			dst = append(dst, m.second[j])
			j++
		} else {
			dst = append(dst, m.first[i])
			i++
		}
	}
	dst = append(dst, m.first[i:]...)
	return append(dst, m.second[j:]...)
}
