package typed

import (
	"context"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// TableChange is a change to the row of a key in a join of two tables
// (JoinTables), as the function that makes the join's output sees it.
//
// Joined is the key's row of the join after the update: both tables'
// rows, or one of them padded as in Joined (Right nil in a LeftOuter
// join's row for a key the right table lacks, and so on). Removed says
// the update took the key's row out of the join (an Inner join's key lost
// one of its rows, a LeftOuter join's key its left row): Left and Right
// are then nil, and a sink that upserts by key writes a tombstone
// (kafka.SinkOptions.Tombstone). Previous is the row before the update,
// as Kafka Streams' old value and Flink's -U and -D rows carry it: what an
// aggregation of the joined table takes back before it adds the new row.
// The rows are the join's own: the function may keep them.
type TableChange[K comparable, L, R any] struct {
	Joined[K, L, R]
	// Removed says the key no longer has a row of the join.
	Removed bool
	// Previous is the key's row of the join before the update; nil when
	// it had none.
	Previous *Joined[K, L, R]
	// Time is the event time of the update that made the change, when its
	// table's updates have one (WithWatermark); zero otherwise. (Kafka
	// Streams stamps a table join's record with the latest of it and the
	// rows' times: take the latest of Time and the rows' own.)
	Time time.Time
}

// The variables of a table-table join.
const (
	tablesLeft  uint8 = 0 // the left table's row of the key
	tablesRight uint8 = 1 // the right table's row of the key
)

// JoinTables joins two tables kept up to date by streams (TableUpdates)
// on their keys, as Kafka Streams' KTable-KTable join (join, leftJoin,
// outerJoin) and Flink's regular join of two upsert tables: the join is
// itself a table, and each update of either table after which its key
// has a row of the join, or that removes the key's row, writes one row,
// the change (TableChange), made by row. (An update that leaves the row
// as it was writes it again, as Kafka Streams does.)
//
//   - Inner: a key has a row while both tables have one.
//   - LeftOuter: while the left table has one (Right nil while the right
//     lacks it); RightOuter the other way round.
//   - FullOuter: while either has one.
//
// An update that leaves the key without a row of the join writes a
// removal (TableChange.Removed) if the key had one, and nothing if it had
// none; each change carries the row before it (TableChange.Previous).
// Each table's rows are state of their key, changelogged and moved with
// their partition like any state.
//
// Within a batch each table's updates of a key are taken in the order
// they came, as Kafka Streams applies a topic's (a late update replaces
// the row all the same), and the two tables' are merged by event time
// (the left table's first at equal times) when both have one, the left
// table's first otherwise. So the changes written in between depend on
// how far the batches have read each input, while the join's row of each
// key after them does not: it is each table's last update's.
//
// The inputs of a kafka.App must be co-partitioned (a key in the same
// partition of both topics). A key with a null part (NullKey) is in
// neither table: its updates are dropped, as Kafka Streams drops a table
// record without a key, and counted in the operator's progress
// (CustomMetrics "numNullKeyUpdatesDropped"). The output mode is Append: the stream of changes,
// which a sink that upserts by key (a compacted topic, with tombstones
// for removals) turns back into the table. Of the options, only
// UpdatesName applies.
//
// row gets the rows as the join keeps them: it may keep them, and must
// change neither.
func JoinTables[K comparable, L, R, Out any](left UpdatesTable[K, L], right UpdatesTable[K, R], how JoinType, row func(TableChange[K, L, R]) Out, opts ...UpdatesOption) Stream[Out] {
	t := newTablesPlan("JoinTables", left.s.p, right.s.p, row, opts)
	switch how {
	case Inner, LeftOuter, RightOuter, FullOuter:
	default:
		t.fail("%v: a join of two tables is Inner, LeftOuter, RightOuter or FullOuter (Kafka Streams' join, leftJoin and outerJoin)", how)
	}
	leftRows, rightRows := codecOf[L](t, "left rows"), codecOf[R](t, "right rows")
	p, name := t.p, t.name
	const kind = "tableTableJoin"
	opInfo := operatorInfo{kind: kind, function: name, mode: Append, watermarked: p.watermarked}
	return once(Stream[Out]{p: p, attach: func(c *compiler, emit func(*Out)) {
		op := &tablesOp[K, L, R, Out]{c: c, how: how, row: row, emitDown: emit, codec: left.codec,
			leftRows: leftRows, rightRows: rightRows, null: nullCheck[K](),
			leftKey: left.key, rightKey: right.key, leftDeleted: left.deleted, rightDeleted: right.deleted,
			timed: left.s.p.watermarked && right.s.p.watermarked}
		op.info = runtime.OperatorInfo{
			Kind: kind, Name: name, OutputMode: Append.String(), TimeMode: runtime.EventTimeMode,
			KeyType: left.codec.typeName, LegacyKeyType: left.codec.legacyTypeName, UseKeys: left.codec.useKeys, ParseKey: left.codec.parseJSON, Key: left.codec.schema, Timeout: how.String(),
			States: []runtime.StateInfo{
				{Name: "left", Kind: "value", Encoding: runtime.EncodingTableRows, Schema: leftRows.schema, ValueType: leftRows.typeName},
				{Name: "right", Kind: "value", Encoding: runtime.EncodingTableRows, Schema: rightRows.schema, ValueType: rightRows.typeName},
			},
		}
		op.index = c.addOperator(func() {
			if c.attachFrom(func() { left.s.attach(c, op.addLeft) }) && op.timed {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its left table's updates", "join the input before the operator, or write the operator's rows to a sink and join them in a query of their own"))
			}
			if c.attachFrom(func() { right.s.attach(c, op.addRight) }) && op.timed {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its right table's updates", "join the input before the operator, or write the operator's rows to a sink and join them in a query of their own"))
			}
		}, op, opInfo)
	}})
}

// tablesRow is an update of either table of a table-table join, gathered
// for a batch.
type tablesRow[L, R any] struct {
	right bool
	// at is the event time, Unix nanoseconds, when timeless is false.
	timeless bool
	at       int64
	l        L
	r        R
}

// tablesOp is a table-table join of one query.
type tablesOp[K comparable, L, R, Out any] struct {
	c            *compiler
	index        int
	info         runtime.OperatorInfo
	how          JoinType
	row          func(TableChange[K, L, R]) Out
	emitDown     func(*Out)
	out          Out // the row being written
	codec        keyCodec[K]
	leftRows     valueCodec[L]
	rightRows    valueCodec[R]
	null         func(*K) bool
	leftKey      func(*L) K
	rightKey     func(*R) K
	leftDeleted  func(*L) bool
	rightDeleted func(*R) bool
	// timed says both inputs have event times: a key's updates of a
	// batch are taken in their order.
	timed bool

	batch keyedRows[K, tablesRow[L, R]]
	order []int32
	merge timeMerge
	buf   []byte
}

func (o *tablesOp[K, L, R, Out]) Info() runtime.OperatorInfo { return o.info }
func (o *tablesOp[K, L, R, Out]) Groups() *runtime.Groups    { return &o.batch.groups }

// EndBatch drops the batch's rows.
func (o *tablesOp[K, L, R, Out]) EndBatch() { o.batch.endBatch() }

// RowsDone adds the updates the batch dropped for a null key to the
// operator's figure (nullKeyMetric).
func (o *tablesOp[K, L, R, Out]) RowsDone(_ context.Context, b *runtime.Batch) error {
	o.batch.nulls.done(b, o.index)
	return nil
}

func (o *tablesOp[K, L, R, Out]) addLeft(l *L) {
	k := o.leftKey(l)
	if o.null != nil && o.null(&k) {
		o.batch.nulls.n++
		return
	}
	o.batch.add(o.codec, &o.info, k, &tablesRow[L, R]{timeless: o.c.eventTime.IsZero(), at: runtime.TimedNanos(o.c.eventTime), l: *l})
}

func (o *tablesOp[K, L, R, Out]) addRight(r *R) {
	k := o.rightKey(r)
	if o.null != nil && o.null(&k) {
		o.batch.nulls.n++
		return
	}
	o.batch.add(o.codec, &o.info, k, &tablesRow[L, R]{right: true, timeless: o.c.eventTime.IsZero(), at: runtime.TimedNanos(o.c.eventTime), r: *r})
}

// has reports whether the join has a row for a key whose tables have
// the rows l and r (nil: none).
func (o *tablesOp[K, L, R, Out]) has(l *L, r *R) bool {
	switch o.how {
	case Inner:
		return l != nil && r != nil
	case LeftOuter:
		return l != nil
	case RightOuter:
		return r != nil
	}
	return l != nil || r != nil
}

// HandleRows applies the key's updates of both tables in their order (see
// JoinTables), writing the change each makes to the
// key's row of the join, then stores the tables' rows the key ends with.
func (o *tablesOp[K, L, R, Out]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	key := o.batch.keys[group]
	o.order = o.merge.merge(o.order, rows, o.timed, func(n int32) bool { return o.batch.rows[n].right }, func(n int32) int64 { return o.batch.rows[n].at }, false)
	l, hadLeft, err := loadRow(k, tablesLeft, o.leftRows)
	if err != nil {
		return err
	}
	r, hadRight, err := loadRow(k, tablesRight, o.rightRows)
	if err != nil {
		return err
	}
	var leftChanged, rightChanged bool
	for _, n := range o.order {
		u := &o.batch.rows[n]
		was, wasL, wasR := o.has(l, r), l, r
		if u.right {
			if o.rightDeleted != nil && o.rightDeleted(&u.r) {
				r = nil
			} else {
				r = new(R)
				*r = u.r
			}
			rightChanged = true
		} else {
			if o.leftDeleted != nil && o.leftDeleted(&u.l) {
				l = nil
			} else {
				l = new(L)
				*l = u.l
			}
			leftChanged = true
		}
		var at time.Time
		if !u.timeless {
			at = time.Unix(0, u.at).UTC()
		}
		now := o.has(l, r)
		if !now && !was {
			continue
		}
		c := TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: key}, Removed: !now, Time: at}
		if now {
			c.Left, c.Right = l, r
		}
		if was {
			c.Previous = &Joined[K, L, R]{Key: key, Left: wasL, Right: wasR}
		}
		o.emitRow(c)
	}
	if leftChanged {
		if err := storeRow(k, tablesLeft, o.leftRows, l, hadLeft, &o.buf); err != nil {
			return err
		}
	}
	if rightChanged {
		if err := storeRow(k, tablesRight, o.rightRows, r, hadRight, &o.buf); err != nil {
			return err
		}
	}
	return nil
}

// HandleTimer is never called: the join sets no timers.
func (o *tablesOp[K, L, R, Out]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	return k.DeleteTimer(expiry)
}

// emitRow writes the row of c to the stages after the join, which get a
// pointer valid during the call (see Map): one variable holds each row.
func (o *tablesOp[K, L, R, Out]) emitRow(c TableChange[K, L, R]) {
	o.out = o.row(c)
	o.emitDown(&o.out)
}
