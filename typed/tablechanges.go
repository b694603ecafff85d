package typed

import (
	"context"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// Change is a change to a key's row of a table kept up to date by a
// stream (TableChanges), as Kafka Streams' KTable forwards it with its
// old value: Row is the key's row after the update (nil when Removed),
// Previous the row before (nil when the key had none). The rows are the
// operator's own: the function given them may keep them.
type Change[K comparable, V any] struct {
	Key      K
	Row      *V
	Previous *V
	// Removed says the update was a tombstone that removed the key's row.
	Removed bool
	// Time is the event time of the update, when the table's updates have
	// one (WithWatermark); zero otherwise.
	Time time.Time
}

// TableChanges writes, for each update of the table t, the change it
// makes (Change), made by row: Kafka Streams' KTable.toStream with old
// values. A tombstone of a key without a row writes nothing. With the row
// before each change, an aggregation over the table (Kafka Streams'
// KGroupedTable, with an adder and a subtractor) is a FlatMap of each
// change into the row it takes back and the one it adds, then an
// aggregation that sums: a row that moves from one group to another
// leaves the first.
//
// The table's rows are state of their key, changelogged and moved with
// their partition like any state. Within a batch a key's updates are
// taken in the order they came, as Kafka Streams applies a topic's (a
// late update too). An update whose key has a null part (NullKey) is
// dropped, and counted in the operator's progress (CustomMetrics
// "numNullKeyUpdatesDropped"). The
// output mode is Append. Of the options, only UpdatesName applies.
func TableChanges[K comparable, V, Out any](t UpdatesTable[K, V], row func(Change[K, V]) Out, opts ...UpdatesOption) Stream[Out] {
	tp := newTablesPlan("TableChanges", t.s.p, nil, row, opts)
	rows := codecOf[V](tp, "rows")
	p, name := tp.p, tp.name
	const kind = "tableChanges"
	opInfo := operatorInfo{kind: kind, function: name, mode: Append, watermarked: p.watermarked}
	return once(Stream[Out]{p: p, attach: func(c *compiler, emit func(*Out)) {
		op := &changesOp[K, V, Out]{c: c, row: row, emitDown: emit, codec: t.codec, rows: rows, null: nullCheck[K](), key: t.key, deleted: t.deleted}
		op.info = runtime.OperatorInfo{
			Kind: kind, Name: name, OutputMode: Append.String(), TimeMode: runtime.EventTimeMode,
			KeyType: t.codec.typeName, LegacyKeyType: t.codec.legacyTypeName, UseKeys: t.codec.useKeys, ParseKey: t.codec.parseJSON, Key: t.codec.schema,
			States: []runtime.StateInfo{
				{Name: "row", Kind: "value", Encoding: runtime.EncodingTableRows, Schema: rows.schema, ValueType: rows.typeName},
			},
		}
		op.index = c.addOperator(func() { t.s.attach(c, op.add) }, op, opInfo)
	}})
}

// changesRow is an update of the table, gathered for a batch.
type changesRow[V any] struct {
	timeless bool
	at       int64
	v        V
}

// changesOp keeps a table's rows and writes each update's change.
type changesOp[K comparable, V, Out any] struct {
	c        *compiler
	index    int
	info     runtime.OperatorInfo
	row      func(Change[K, V]) Out
	emitDown func(*Out)
	out      Out
	codec    keyCodec[K]
	rows     valueCodec[V]
	null     func(*K) bool
	key      func(*V) K
	deleted  func(*V) bool

	batch keyedRows[K, changesRow[V]]
	buf   []byte
}

func (o *changesOp[K, V, Out]) Info() runtime.OperatorInfo { return o.info }
func (o *changesOp[K, V, Out]) Groups() *runtime.Groups    { return &o.batch.groups }

// EndBatch drops the batch's rows.
func (o *changesOp[K, V, Out]) EndBatch() { o.batch.endBatch() }

// RowsDone adds the updates the batch dropped for a null key to the
// operator's figure (nullKeyMetric).
func (o *changesOp[K, V, Out]) RowsDone(_ context.Context, b *runtime.Batch) error {
	o.batch.nulls.done(b, o.index)
	return nil
}

func (o *changesOp[K, V, Out]) add(v *V) {
	k := o.key(v)
	if o.null != nil && o.null(&k) {
		o.batch.nulls.n++
		return
	}
	o.batch.add(o.codec, &o.info, k, &changesRow[V]{timeless: o.c.eventTime.IsZero(), at: runtime.TimedNanos(o.c.eventTime), v: *v})
}

// HandleRows applies the key's updates in the order they came, writing
// each one's change, then stores the row the key ends with.
func (o *changesOp[K, V, Out]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	key := o.batch.keys[group]
	cur, had, err := loadRow(k, 0, o.rows)
	if err != nil {
		return err
	}
	changed := false
	for _, n := range rows {
		u := &o.batch.rows[n]
		c := Change[K, V]{Key: key, Previous: cur, Time: timeOf(u.timeless, u.at)}
		if o.deleted != nil && o.deleted(&u.v) {
			if cur == nil {
				continue // a tombstone of a row that is not there
			}
			cur, c.Removed = nil, true
		} else {
			cur = new(V)
			*cur = u.v
			c.Row = cur
		}
		changed = true
		o.out = o.row(c)
		o.emitDown(&o.out)
	}
	if !changed {
		return nil
	}
	return storeRow(k, 0, o.rows, cur, had, &o.buf)
}

// HandleTimer is never called: the operator sets no timers.
func (o *changesOp[K, V, Out]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	return k.DeleteTimer(expiry)
}
