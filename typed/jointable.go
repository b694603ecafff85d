package typed

import (
	"context"
	"fmt"

	"github.com/streamgen/streamgen/runtime"
)

// JoinTable joins each row of the stream s with the rows of the static
// table t under the same key, as Spark's join of a streaming Dataset (on
// the left) with a static one: the stream's key is key's result, and row
// makes each output row of a Joined whose Left is the stream's row and
// Right the table's.
//
// how is Inner (a row per matching table row), LeftOuter (and the stream
// rows without a match, with Right nil), LeftSemi (each stream row with a
// match, once) or LeftAnti (each stream row without one); RightOuter and
// FullOuter are refused at Start, with Spark's reason: they would have to
// write the table's rows that no stream row matches, which a stream never
// knows. A key with a null part (NullKey) matches nothing. The join keeps
// no state and needs no watermark; a batch joins all its rows with one
// version of the table (see Table).
//
// row gets pointers to the stream's row and the table's, valid during the
// call: it must copy what it keeps, and change neither.
func JoinTable[S any, K comparable, V, Out any](s Stream[S], key func(*S) K, t *Table[K, V], how JoinType, row func(Joined[K, S, V]) Out) Stream[Out] {
	p := s.p.with(func(q *plan) { q.errs = append(q.errs, t.errs...) })
	switch how {
	case Inner, LeftOuter, LeftSemi, LeftAnti:
	case RightOuter:
		p = p.failed("streamgen: JoinTable: RightOuter with the stream on the left: a stream cannot know which table rows no stream row will match; join the table on the left (JoinTableStream) for a right outer join (Spark: \"RightOuter join with a streaming DataFrame/Dataset on the left and a static DataFrame/DataSet on the right not supported\")")
	case FullOuter:
		p = p.failed("streamgen: JoinTable: FullOuter: a stream cannot know which table rows no stream row will match (Spark: \"FullOuter joins with streaming DataFrames/Datasets on the left and a static DataFrame/Dataset on the right is not supported\")")
	default:
		p = p.failed("streamgen: JoinTable: unknown join type %v", how)
	}
	name := funcName(row)
	null := nullCheck[K]()
	return Stream[Out]{p: p, attach: func(c *compiler, emit func(*Out)) {
		run := tableOf(c, t)
		var (
			out     Out // the row being written (see Map)
			k       K   // its key, which null reads through a pointer
			scratch []V // this join's rows of a key read from disk
		)
		s.attach(c, func(r *S) {
			version := run.forBatch(c.batch)
			c.stage = name
			k = key(r)
			var matches []V
			if null == nil || !null(&k) {
				matches = version.lookup(k, &scratch)
			}
			switch {
			case how == Inner || how == LeftOuter:
				for i := range matches {
					out = row(Joined[K, S, V]{Key: k, Left: r, Right: &matches[i]})
					emit(&out)
				}
				if how == LeftOuter && len(matches) == 0 {
					out = row(Joined[K, S, V]{Key: k, Left: r})
					emit(&out)
				}
			case (how == LeftSemi) == (len(matches) > 0):
				out = row(Joined[K, S, V]{Key: k, Left: r})
				emit(&out)
			}
			c.stage = ""
		})
	}}
}

// queryTable is a static table as one query uses it: one run, loaded
// once at Start however many joins read the table, and one version a
// batch, which every join of the batch's rows uses.
type queryTable[K comparable, V any] struct {
	run     *tableRun[K, V]
	version *tableVersion[K, V]
	pinned  *runtime.Batch
}

// tableOf returns t's run in the query c compiles, making it at the
// first join with t.
func tableOf[K comparable, V any](c *compiler, t *Table[K, V]) *queryTable[K, V] {
	if q, ok := c.tables[t].(*queryTable[K, V]); ok {
		return q
	}
	q := &queryTable[K, V]{run: &tableRun[K, V]{t: t}}
	if c.tables == nil {
		c.tables = map[any]any{}
	}
	c.tables[t] = q
	c.prepares = append(c.prepares, func(ctx context.Context) error {
		if err := q.run.start(ctx); err != nil {
			return fmt.Errorf("JoinTable: %w", unprefixed(err))
		}
		return nil
	})
	c.plan.Closers = append(c.plan.Closers, q.run.close)
	c.batchEnds = append(c.batchEnds, func() {
		if q.version != nil {
			q.run.release(q.version)
			q.pinned, q.version = nil, nil
		}
	})
	return q
}

// forBatch returns the version b joins its rows with: the current one
// at b's first row, held until b's end.
func (q *queryTable[K, V]) forBatch(b *runtime.Batch) *tableVersion[K, V] {
	if b != q.pinned {
		if q.version != nil {
			q.run.release(q.version)
		}
		var letters []runtime.DeadLetter
		q.pinned = b
		q.version, letters = q.run.acquire()
		b.UseTable(q.version.progress)
		for _, l := range letters {
			b.DeadLetter(l)
		}
	}
	return q.version
}

// JoinTableStream joins the static table t with each row of the stream s
// under the same key, the table on the left, as Spark's join of a static
// Dataset with a streaming one: Joined's Left is the table's row and
// Right the stream's. how is Inner, or RightOuter (and the stream rows
// without a match, with Left nil); the others are refused at Start, with
// Spark's reason. See JoinTable.
func JoinTableStream[K comparable, V, S, Out any](t *Table[K, V], s Stream[S], key func(*S) K, how JoinType, row func(Joined[K, V, S]) Out) Stream[Out] {
	var mirrored JoinType
	switch how {
	case Inner:
		mirrored = Inner
	case RightOuter:
		mirrored = LeftOuter
	default:
		what := fmt.Sprintf("%v join with a streaming DataFrame/Dataset on the right and a static DataFrame/Dataset on the left is not supported", how)
		switch how {
		case FullOuter:
			what = "FullOuter joins with streaming DataFrames/Datasets on the right and a static DataFrame/Dataset on the left is not supported"
		case LeftAnti:
			what = "LeftAnti joins with a streaming DataFrame/Dataset on the right are not supported"
		}
		s.p = s.p.failed("streamgen: JoinTableStream: %v with the stream on the right: a stream cannot know which table rows no stream row will match; put the stream on the left (JoinTable) (Spark: %q)", how, what)
		mirrored = Inner
	}
	return JoinTable(s, key, t, mirrored, func(j Joined[K, S, V]) Out {
		return row(Joined[K, V, S]{Key: j.Key, Left: j.Right, Right: j.Left, Window: j.Window})
	})
}
