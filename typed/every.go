package typed

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// AggregateEvery folds each key's rows n at a time (count windows, as
// Flink's countWindow): every n-th row of a key completes a window, and the
// row that row makes of the key and the window's aggregate is written; the
// rows since the last full window wait in state for the next batches. A
// batch's rows of a key are taken in arrival order, or by orderBy when it
// is not nil (event time, say). The rows written are final: the output
// mode is Append.
func AggregateEvery[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ks KeyedStream[K, T], n int64, orderBy func(a, b *T) int, agg Aggregator[T, Acc, Out], row func(key K, out Out) Row,
) Stream[Row] {
	p := ks.s.p
	if n <= 0 {
		p = p.failed("streamgen: AggregateEvery(%d): n must be positive", n)
	}
	name := fmt.Sprintf("%T", agg)
	opInfo := operatorInfo{kind: "aggregateEvery", function: name, mode: Append, watermarked: p.watermarked}
	return once(Stream[Row]{p: p, attach: func(c *compiler, emit func(*Row)) {
		op := &everyOp[K, T, Acc, Out, Row, PA]{gatherer: newGatherer(c, ks, "aggregateEvery ("+name+")"),
			n: n, orderBy: orderBy, agg: agg, output: row, emitDown: emit}
		op.info = runtime.OperatorInfo{
			Kind: "aggregateEvery", Name: name, OutputMode: Append.String(), KeyType: ks.codec.typeName, LegacyKeyType: ks.codec.legacyTypeName, UseKeys: ks.codec.useKeys, ParseKey: ks.codec.parseJSON, Key: ks.codec.schema,
			States: []runtime.StateInfo{{Name: "window", Schema: PA(new(Acc)).StreamSchema(), Kind: "value", Encoding: runtime.EncodingCountWindow}},
		}
		describe(&op.info, agg)
		op.index = c.addOperator(func() { ks.s.attach(c, op.add) }, op, opInfo)
	}})
}

// everyOp is a count-window aggregation of one query. A key's state is
// uvarint(rows in the open window) and the window's accumulator.
type everyOp[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]] struct {
	gatherer[K, T]
	index    int
	info     runtime.OperatorInfo
	n        int64
	orderBy  func(a, b *T) int
	agg      Aggregator[T, Acc, Out]
	output   func(K, Out) Row
	emitDown func(*Row)
	order    []int32
	buf      []byte
}

func (o *everyOp[K, T, Acc, Out, Row, PA]) Info() runtime.OperatorInfo { return o.info }
func (o *everyOp[K, T, Acc, Out, Row, PA]) Groups() *runtime.Groups    { return &o.groups }
func (o *everyOp[K, T, Acc, Out, Row, PA]) EndBatch()                  { o.gatherer.end() }

func (o *everyOp[K, T, Acc, Out, Row, PA]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	rows, err := o.rowsOf(k.Batch(), group, rows)
	if err != nil {
		return err
	}
	raw, existed, err := k.Get(0, nil)
	if err != nil {
		return err
	}
	count, acc := int64(0), o.agg.Zero()
	if existed {
		n, w := binary.Uvarint(raw)
		if w <= 0 {
			return k.Fail(fmt.Errorf("stored count window is corrupt"))
		}
		count = int64(n)
		if err := PA(&acc).UnmarshalBinary(raw[w:]); err != nil {
			return k.Fail(fmt.Errorf("stored aggregate does not decode: %w", unprefixed(err)))
		}
	}
	if o.orderBy != nil {
		o.order = append(o.order[:0], rows...)
		slices.SortStableFunc(o.order, func(a, b int32) int { return o.orderBy(&o.rows[a], &o.rows[b]) })
		rows = o.order
	}
	key := o.keys[group]
	for _, j := range rows {
		acc = o.agg.Add(acc, &o.rows[j])
		if count++; count == o.n {
			r := o.output(key, o.agg.Result(acc))
			o.emitDown(&r)
			count, acc = 0, o.agg.Zero()
		}
	}
	o.buf = binary.AppendUvarint(o.buf[:0], uint64(count))
	if o.buf, err = PA(&acc).AppendBinary(o.buf); err != nil {
		return k.Fail(fmt.Errorf("aggregate: %w", unprefixed(err)))
	}
	if err := k.Put(0, nil, o.buf); err != nil {
		return err
	}
	k.Updated(!existed)
	return nil
}

func (o *everyOp[K, T, Acc, Out, Row, PA]) HandleTimer(context.Context, *runtime.KeyState, time.Time) error {
	return nil
}
