package typed

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// GroupingSet says which dimensions of a key a grouping set rolls up: bit
// i is set when dimension i (the i-th function given to Cube, Rollup or
// GroupingSets) is rolled up, as SQL's GROUPING(column). The zero
// GroupingSet rolls up nothing: the key as it is.
type GroupingSet uint32

// RolledUp reports whether the set rolls up dimension i.
func (g GroupingSet) RolledUp(i int) bool { return g&(1<<i) != 0 }

// SparkID returns the set as Spark's grouping_id() of n dimensions: the
// first dimension is the highest bit.
func (g GroupingSet) SparkID(n int) int {
	return int(bits.Reverse32(uint32(g)) >> (32 - n))
}

// maxCubeDimensions bounds the dimensions of Cube (2^n sets), and
// maxDimensions those of Rollup and GroupingSets (a GroupingSet's bits).
const (
	maxCubeDimensions = 12
	maxDimensions     = 32
)

// Cube aggregates each row of ks under its key and under every key made by
// rolling up any of the dimensions (2^n grouping sets; at most 12
// dimensions, where Rollup and GroupingSets take 32), as Spark's
// cube(columns).agg(...): dims[i] rolls up dimension i of a key, setting
// it to what stands for "all" (nil for a pointer field, or a flag the key
// has). row makes each output row of a key, the set that made it, and
// the aggregate. The output modes are Complete and Update, as
// AggregateByKey's, whose rules it follows (a key is never evicted).
// A rolled-up key takes rows from the whole input, so a kafka.App runs
// these aggregations only on an input of one partition: each of its
// tasks sees only its own (GroupingSets too may run on more, with
// kafka.AppOptions.GroupingSetsKeepPartitions, when no set rolls up the
// dimension the input is partitioned by).
func Cube[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ks KeyedStream[K, T], agg Aggregator[T, Acc, Out], row func(key K, set GroupingSet, out Out) Row, dims ...func(*K),
) Stream[Row] {
	if len(dims) > maxCubeDimensions {
		return failedAggregation[Row](ks, "streamgen: cube: %d dimensions (%d grouping sets), at most %d", len(dims), uint64(1)<<len(dims), maxCubeDimensions)
	}
	var sets []GroupingSet
	for s := range GroupingSet(1) << len(dims) {
		sets = append(sets, s)
	}
	return groupingSets[K, T, Acc, Out, Row, PA](ks, agg, row, "cube", sets, dims)
}

// Rollup aggregates each row of ks under its key and under the keys made
// by rolling up its dimensions from the last, as Spark's
// rollup(columns).agg(...): for dimensions a, b, c, the sets (a, b, c),
// (a, b), (a) and (). See Cube.
func Rollup[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ks KeyedStream[K, T], agg Aggregator[T, Acc, Out], row func(key K, set GroupingSet, out Out) Row, dims ...func(*K),
) Stream[Row] {
	sets := []GroupingSet{0}
	for i := min(len(dims), maxDimensions) - 1; i >= 0; i-- {
		sets = append(sets, sets[len(sets)-1]|1<<i)
	}
	return groupingSets[K, T, Acc, Out, Row, PA](ks, agg, row, "rollup", sets, dims)
}

// GroupingSets aggregates each row of ks under the key of each of sets,
// as Spark's GROUPING SETS: each set rolls up the dimensions its bits
// name. A set given twice writes its rows twice, each with the whole
// aggregate, as Spark (since 3.0) and PostgreSQL do. See Cube.
func GroupingSets[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ks KeyedStream[K, T], agg Aggregator[T, Acc, Out], row func(key K, set GroupingSet, out Out) Row, sets []GroupingSet, dims ...func(*K),
) Stream[Row] {
	return groupingSets[K, T, Acc, Out, Row, PA](ks, agg, row, "groupingSets", sets, dims)
}

// groupingKey is a key of a grouping set's aggregation: the set, and the
// key with the set's dimensions rolled up. In the store it is the set, 4
// bytes big-endian, then the key; runtime.KeyJSON reads it so for the
// operator kinds "cube", "rollup" and "groupingSets".
type groupingKey[K comparable] struct {
	set GroupingSet
	key K
}

// UnmarshalJSON reads a key as runtime.KeyJSON writes it, {"set": the
// set, "key": the key}: how a read of a running query's state names one
// (Query.LookupState).
func (g *groupingKey[K]) UnmarshalJSON(b []byte) error {
	set, key, err := runtime.GroupingSetKeyJSON(b)
	if err != nil {
		return err
	}
	g.set = GroupingSet(set)
	return unmarshalKey(key, &g.key)
}

// setRow is a row of the input under one grouping set's key: the key and
// the row, valid while the row is pushed.
type setRow[K comparable, T any] struct {
	key groupingKey[K]
	row *T
}

// failedAggregation is a grouping-sets aggregation refused before it is
// built: a stream whose query fails to start with the error.
func failedAggregation[Row any, K comparable, T any](ks KeyedStream[K, T], format string, args ...any) Stream[Row] {
	return Stream[Row]{p: ks.s.p.failed(format, args...), attach: func(*compiler, func(*Row)) {}}
}

// setRows is an output row of a grouping set, and how many times the set
// was given.
type setRows[Row any] struct {
	row   Row
	times int
}

func groupingSets[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ks KeyedStream[K, T], agg Aggregator[T, Acc, Out], row func(key K, set GroupingSet, out Out) Row, kind string, sets []GroupingSet, dims []func(*K),
) Stream[Row] {
	p := ks.s.p
	if len(dims) == 0 {
		p = p.failed("streamgen: %s: no dimensions: give at least one function that rolls up a dimension of the key (without, aggregate by key)", kind)
	}
	if len(dims) > maxDimensions {
		p = p.failed("streamgen: %s: %d dimensions, at most %d", kind, len(dims), maxDimensions)
	}
	if len(sets) == 0 {
		p = p.failed("streamgen: %s: no grouping sets", kind)
	}
	// A set given twice is aggregated once and written twice.
	times := map[GroupingSet]int{}
	var distinct []GroupingSet
	for _, s := range sets {
		if len(dims) < 32 && s>>len(dims) != 0 {
			p = p.failed("streamgen: %s: grouping set %d (%b) names a dimension past the %d given", kind, s, s, len(dims))
		}
		if times[s]++; times[s] == 1 {
			distinct = append(distinct, s)
		}
	}
	sets = distinct
	kc := ks.codec
	codec := wrap(kc, "",
		func(b []byte, k *groupingKey[K]) ([]byte, error) {
			return kc.encode(binary.BigEndian.AppendUint32(b, uint32(k.set)), &k.key)
		},
		func(b []byte, k *groupingKey[K]) error {
			if len(b) < 4 {
				return fmt.Errorf("a key of %d bytes does not begin with its grouping set", len(b))
			}
			k.set = GroupingSet(binary.BigEndian.Uint32(b))
			return kc.decode(b[4:], &k.key)
		})
	if kc.encode == nil {
		codec.encode = nil
	}
	expanded := Stream[setRow[K, T]]{p: p, attach: func(c *compiler, emit func(*setRow[K, T])) {
		ks.s.attach(c, func(t *T) {
			k := ks.key(t)
			for _, set := range sets {
				r := setRow[K, T]{key: groupingKey[K]{set: set, key: k}, row: t}
				for i, roll := range dims {
					if set.RolledUp(i) {
						roll(&r.key.key)
					}
				}
				emit(&r)
			}
		})
	}}
	grouped := KeyedStream[groupingKey[K], setRow[K, T]]{s: expanded, key: func(r *setRow[K, T]) groupingKey[K] { return r.key }, codec: codec}
	recorded := make([]uint32, len(sets))
	for i, s := range sets {
		recorded[i] = uint32(s)
	}
	return once(Stream[Row]{p: p, attach: func(c *compiler, emit func(*Row)) {
		op, add, info := newAggregate[groupingKey[K], setRow[K, T], T, Acc, Out, setRows[Row], PA](c, grouped, agg,
			func(r *setRow[K, T]) *T { return r.row }, nil, nil,
			func(groupingKey[K]) (Window, bool) { return Window{}, false },
			func(g groupingKey[K], out Out) setRows[Row] {
				return setRows[Row]{row(g.key, g.set, out), times[g.set]}
			}, kind, nil,
			func(r *setRows[Row]) {
				for range r.times {
					emit(&r.row)
				}
			})
		op.info.GroupingSets, op.info.Dimensions = recorded, len(dims)
		op.index = c.addOperator(func() { grouped.s.attach(c, add) }, op, info)
	}})
}
