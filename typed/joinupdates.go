package typed

import (
	"cmp"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// UpdatesTable is a table that a stream keeps up to date, as Kafka Streams'
// KTable (Flink's versioned table): each row of the stream is the table's
// new row for its key, and a row that is a tombstone removes the key. Make
// one with TableUpdates and join a stream with it with JoinUpdates; the
// table is materialized in the join's state, changelogged and moved with
// its partition like any state. The zero value is not usable.
type UpdatesTable[K comparable, V any] struct {
	s       Stream[V]
	key     func(*V) K
	deleted func(*V) bool
	codec   keyCodec[K]
}

// TableUpdates is the table that the rows of s keep up to date: a row
// replaces the row of its key (key's result), and one for which deleted
// returns true (a tombstone: a compacted topic's null value, a delete
// marker) removes the key. deleted may be nil: no tombstones.
func TableUpdates[K comparable, V any](s Stream[V], key func(*V) K, deleted func(*V) bool) UpdatesTable[K, V] {
	c, err := newKeyCodec[K]()
	if err != nil {
		s.p = s.p.failed("streamgen: TableUpdates: %v", err)
	}
	return UpdatesTable[K, V]{s: s, key: key, deleted: deleted, codec: c}
}

// UpdatesOption configures JoinUpdates.
type UpdatesOption interface{ applyUpdates(*updatesConfig) }

type updatesOptionFunc func(*updatesConfig)

func (f updatesOptionFunc) applyUpdates(c *updatesConfig) { f(c) }

type updatesConfig struct {
	asOf           bool
	grace, history time.Duration
	name           string
}

// AsOf joins each stream row with the table's row as it was at the
// stream row's event time, as Kafka Streams' join with a versioned table
// (Quix's join_asof): the table keeps its rows' versions by event time.
// With a grace of 0 a stream row joins at once, with the versions its
// batch and those before it brought. With a grace, it waits until the
// watermark (the least of the inputs') is past its event time plus grace,
// so that the table's updates up to then have come; one that comes after
// that joins at once. It needs a watermark on both inputs.
func AsOf(grace time.Duration) UpdatesOption {
	return updatesOptionFunc(func(c *updatesConfig) { c.asOf, c.grace = true, grace })
}

// TableHistory keeps, with AsOf, the table's versions that stopped being
// current less than d before the watermark (less the grace), for the
// stream rows that come that late (Kafka Streams' history retention); a
// stream row later than that joins no version. The default, 0, keeps the
// versions current at the watermark less the grace, and those after. The
// older versions go as the watermark passes them, though no update of
// the key comes (a timer per update). A table update at or before the
// watermark the batch's rows are late by, less the grace and the history,
// is late: dropped and counted (numRowsDroppedByWatermark), as Kafka
// Streams' versioned table refuses a write older than its history; so a
// deleted key's tombstone goes too, once an update before it is late,
// and the key then holds no state.
func TableHistory(d time.Duration) UpdatesOption {
	return updatesOptionFunc(func(c *updatesConfig) { c.history = d })
}

// UpdatesName names the join in progress reports, messages and the
// checkpoint. The default is the name of the function that makes its
// rows.
func UpdatesName(name string) UpdatesOption {
	return updatesOptionFunc(func(c *updatesConfig) { c.name = name })
}

// The variables of a stream-table join.
const (
	updatesTable uint8 = 0 // the table: its row per key, or its versions
	updatesHeld  uint8 = 1 // stream rows waiting for the watermark (AsOf)
)

// JoinUpdates joins each row of the stream s with the row of the table t
// under the same key, as Kafka Streams' KStream-KTable join: the stream's
// row is Joined's Left, the table's its Right. A table update writes
// nothing; a stream row writes one row: with the table's row for its key
// (Inner: only when there is one; LeftOuter: with Right nil otherwise).
// Without AsOf, it is the table's row at that moment: within a batch
// each input's rows of a key are taken in the order they came (a late
// table update is applied after the earlier ones, as Kafka Streams
// applies a topic's), the two inputs merged by event time (the table's
// first at equal times) when both have one, the table's updates first
// otherwise; so the row depends on how far the batches have read each
// input (a cap of rows per batch moves each on its own). With AsOf, the
// row the table had at the stream row's event time, whatever the
// batches, of the table's updates that were not late (TableHistory).
//
// The inputs of a kafka.App must be co-partitioned (a key in the same
// partition of both topics), or the table read whole by every task (a
// global table: Task.GlobalSource; for Kafka Streams' GlobalKTable, which
// is loaded before any stream row and then read as it is, whatever the
// rows' times, give the table no event time, so that a batch's updates
// come first). A key with a null
// part (NullKey) matches nothing: a table update with one is dropped, and
// counted in the operator's progress (CustomMetrics
// "numNullKeyUpdatesDropped"); a stream row with one is written at once
// with Right nil in a LeftOuter join, and in an Inner join dropped and
// counted ("numNullKeyRowsDropped"), as Kafka Streams does. The output
// mode is Append.
//
// row gets pointers to the rows, valid during the call: it must copy what
// it keeps, and change neither.
func JoinUpdates[K comparable, S, V, Out any](s KeyedStream[K, S], t UpdatesTable[K, V], how JoinType, row func(Joined[K, S, V]) Out, opts ...UpdatesOption) Stream[Out] {
	var cfg updatesConfig
	for _, o := range opts {
		o.applyUpdates(&cfg)
	}
	name := cfg.name
	if name == "" {
		name = funcName(row)
	}
	p := s.s.p.with(func(q *plan) {
		q.errs = append(q.errs, t.s.p.errs...)
		if !s.s.p.watermarked {
			q.watermarkDelay = t.s.p.watermarkDelay
		}
		q.watermarked = s.s.p.watermarked || t.s.p.watermarked
	})
	fail := func(format string, args ...any) {
		p = p.failed("streamgen: JoinUpdates (%s): "+format, append([]any{name}, args...)...)
	}
	switch how {
	case Inner, LeftOuter:
	default:
		fail("%v: a table update writes nothing, so only Inner and LeftOuter joins of a stream with a table are defined (Kafka Streams' join and leftJoin)", how)
	}
	if cfg.asOf && !(s.s.p.watermarked && t.s.p.watermarked) {
		fail("AsOf needs the event times of both inputs, and a watermark to know when the table's updates up to a row's time have come: add WithWatermark to the stream and to the table's updates")
	}
	if cfg.grace < 0 {
		fail("AsOf(%v): a negative grace", cfg.grace)
	}
	if cfg.history < 0 {
		fail("TableHistory(%v): negative", cfg.history)
	}
	streamRows, err := newValueCodec[S]()
	if err != nil && cfg.asOf {
		fail("stream rows: %v", unprefixed(err))
	}
	tableRows, err := newValueCodec[V]()
	if err != nil {
		fail("table rows: %v", unprefixed(err))
	}
	const kind = "streamTableJoin"
	opInfo := operatorInfo{kind: kind, function: name, mode: Append, watermarked: p.watermarked, asOfJoin: cfg.asOf}
	return once(Stream[Out]{p: p, attach: func(c *compiler, emit func(*Out)) {
		op := &updatesOp[K, S, V, Out]{c: c, how: how, row: row, emitDown: emit, cfg: cfg, codec: s.codec,
			streamRows: streamRows, tableRows: tableRows, null: nullCheck[K](),
			streamKey: s.key, tableKey: t.key, deleted: t.deleted,
			timed: s.s.p.watermarked && t.s.p.watermarked}
		mode := "latest"
		if cfg.asOf {
			mode = fmt.Sprintf("asOf grace=%v history=%v", cfg.grace, cfg.history)
		}
		op.info = runtime.OperatorInfo{
			Kind: kind, Name: name, OutputMode: Append.String(), TimeMode: runtime.EventTimeMode,
			KeyType: s.codec.typeName, LegacyKeyType: s.codec.legacyTypeName, UseKeys: s.codec.useKeys, ParseKey: s.codec.parseJSON, Key: s.codec.schema, Timeout: how.String() + " " + mode,
			States: []runtime.StateInfo{
				{Name: "table", Kind: "map", Encoding: runtime.EncodingTableRows, Schema: tableRows.schema, ValueType: tableRows.typeName},
			},
		}
		if cfg.asOf {
			op.info.States = append(op.info.States, runtime.StateInfo{Name: "held", Kind: "list", Encoding: runtime.EncodingJoinBuffer, Schema: streamRows.schema, ValueType: streamRows.typeName})
			op.info.NoData = runtime.NoDataOnWatermark
		}
		op.index = c.addOperator(func() {
			if c.attachFrom(func() { s.s.attach(c, op.addStream) }) && op.timed {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its stream's rows", "join the input before the operator, or write the operator's rows to a sink and join them in a query of their own"))
			}
			if c.attachFrom(func() { t.s.attach(c, op.addTable) }) && op.timed {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its table's rows", "join the input before the operator, or write the operator's rows to a sink and join them in a query of their own"))
			}
		}, op, opInfo)
	}})
}

// updatesRow is a row of either input of a stream-table join, gathered
// for a batch.
type updatesRow[S, V any] struct {
	table bool
	at    int64 // event time, Unix nanoseconds (when timed)
	n     int32 // its number in the batch
	s     S
	v     V
}

// updatesOp is a stream-table join of one query.
type updatesOp[K comparable, S, V, Out any] struct {
	c          *compiler
	index      int
	info       runtime.OperatorInfo
	how        JoinType
	row        func(Joined[K, S, V]) Out
	emitDown   func(*Out)
	out        Out // the row being written
	cfg        updatesConfig
	codec      keyCodec[K]
	streamRows valueCodec[S]
	tableRows  valueCodec[V]
	null       func(*K) bool
	streamKey  func(*S) K
	tableKey   func(*V) K
	deleted    func(*V) bool
	// timed says both inputs have event times: a key's rows of a batch
	// are taken in their order.
	timed bool

	batch  keyedRows[K, updatesRow[S, V]]
	order  []int32
	merge  timeMerge
	buf    []byte
	suffix []byte
}

func (o *updatesOp[K, S, V, Out]) Info() runtime.OperatorInfo { return o.info }
func (o *updatesOp[K, S, V, Out]) Groups() *runtime.Groups    { return &o.batch.groups }

// EndBatch drops the batch's rows.
func (o *updatesOp[K, S, V, Out]) EndBatch() { o.batch.endBatch() }

// RowsDone adds the updates and rows the batch dropped for a null key to
// the operator's figures (nullKeyMetric, nullKeyRowsMetric).
func (o *updatesOp[K, S, V, Out]) RowsDone(_ context.Context, b *runtime.Batch) error {
	o.batch.nulls.done(b, o.index)
	return nil
}

func (o *updatesOp[K, S, V, Out]) addStream(s *S) {
	k := o.streamKey(s)
	if o.null != nil && o.null(&k) {
		if o.how == LeftOuter {
			o.emitRow(Joined[K, S, V]{Key: k, Left: s})
		} else {
			o.batch.nulls.rows++
		}
		return
	}
	o.add(k, updatesRow[S, V]{at: runtime.TimedNanos(o.c.eventTime), s: *s})
}

func (o *updatesOp[K, S, V, Out]) addTable(v *V) {
	k := o.tableKey(v)
	if o.null != nil && o.null(&k) {
		o.batch.nulls.n++
		return
	}
	o.add(k, updatesRow[S, V]{table: true, at: runtime.TimedNanos(o.c.eventTime), v: *v})
}

func (o *updatesOp[K, S, V, Out]) add(k K, r updatesRow[S, V]) {
	r.n = int32(len(o.batch.rows))
	o.batch.add(o.codec, &o.info, k, &r)
}

// versionSuffix is the suffix of a table version: its time.
func versionSuffix(b []byte, at int64) []byte { return runtime.AppendTimedKey(b, at) }

// HandleRows applies the key's table updates and joins its stream rows:
// with AsOf in order of event time, otherwise each input's in the order
// they came, the two merged by event time (timeMerge).
func (o *updatesOp[K, S, V, Out]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	key := o.batch.keys[group]
	if o.cfg.asOf {
		// Versions are by time: a key's rows in order of event time
		// (the table's first at equal times).
		o.order = append(o.order[:0], rows...)
		slices.SortStableFunc(o.order, func(a, b int32) int {
			ra, rb := &o.batch.rows[a], &o.batch.rows[b]
			if c := cmp.Compare(ra.at, rb.at); c != 0 {
				return c
			}
			switch {
			case ra.table && !rb.table:
				return -1
			case rb.table && !ra.table:
				return 1
			}
			return 0
		})
	} else {
		o.order = o.merge.merge(o.order, rows, o.timed, func(n int32) bool { return !o.batch.rows[n].table }, func(n int32) int64 { return o.batch.rows[n].at }, false)
	}
	b := k.Batch()
	wm := b.Watermark.UnixNano()
	for _, n := range o.order {
		r := &o.batch.rows[n]
		if r.table {
			if err := o.update(k, r); err != nil {
				return err
			}
			continue
		}
		if !o.cfg.asOf {
			v, ok, err := o.latest(k)
			if err != nil {
				return err
			}
			o.emit(key, &r.s, v, ok)
			continue
		}
		release := addSat(r.at, int64(o.cfg.grace))
		if o.cfg.grace == 0 || wm >= release {
			// Its table's updates have come: join at once.
			v, ok, err := o.asOf(k, r.at)
			if err != nil {
				return err
			}
			o.emit(key, &r.s, v, ok)
			continue
		}
		// Held until the watermark passes its time and the grace.
		o.suffix = rowSuffix(o.suffix[:0], r.at, b.ID, r.n)
		var err error
		if o.buf, err = o.streamRows.encode(append(o.buf[:0], 0), &r.s); err != nil {
			return k.Fail(fmt.Errorf("key %v: %w", key, unprefixed(err)))
		}
		if err := k.Put(updatesHeld, o.suffix, o.buf); err != nil {
			return err
		}
		k.Updated(true)
		if err := k.RegisterTimer(time.Unix(0, release-1).UTC()); err != nil {
			return err
		}
	}
	return nil
}

// emit writes the join's row for a stream row s, with the table's row v
// when ok.
func (o *updatesOp[K, S, V, Out]) emit(key K, s *S, v *V, ok bool) {
	switch {
	case ok:
		o.emitRow(Joined[K, S, V]{Key: key, Left: s, Right: v})
	case o.how == LeftOuter:
		o.emitRow(Joined[K, S, V]{Key: key, Left: s})
	}
}

// update applies a table update: the key's row, or, with AsOf, a version
// at the update's time; a tombstone removes the row (or is a version
// that says there is none).
func (o *updatesOp[K, S, V, Out]) update(k *runtime.KeyState, r *updatesRow[S, V]) error {
	if o.cfg.asOf && r.at <= o.lateHorizon(k.Batch()) {
		// Too late: no stream row to come asks for the table as of
		// then, and the versions it would go among may be gone (a
		// deletion too), as Kafka Streams' versioned table refuses a
		// write older than its history.
		k.Batch().DropLate(o.index)
		return nil
	}
	deleted := o.deleted != nil && o.deleted(&r.v)
	var suffix []byte
	if o.cfg.asOf {
		o.suffix = versionSuffix(o.suffix[:0], r.at)
		suffix = o.suffix
	}
	if deleted && !o.cfg.asOf {
		_, existed, err := k.Get(updatesTable, nil)
		if err != nil || !existed {
			return err
		}
		if err := k.Delete(updatesTable, nil); err != nil {
			return err
		}
		k.Removed()
		return nil
	}
	flag := byte(1)
	if deleted {
		flag = 0
	}
	var err error
	o.buf = append(o.buf[:0], flag)
	if !deleted {
		if o.buf, err = o.tableRows.encode(o.buf, &r.v); err != nil {
			return k.Fail(err)
		}
	}
	_, existed, err := k.Get(updatesTable, suffix)
	if err != nil {
		return err
	}
	if err := k.Put(updatesTable, suffix, o.buf); err != nil {
		return err
	}
	k.Updated(!existed)
	if !o.cfg.asOf {
		return nil
	}
	if err := o.dropOldVersions(k); err != nil {
		return err
	}
	// Once the watermark less the grace and the history reaches the
	// version, those before it are dropped, and it too if a tombstone
	// (HandleTimer), though no update of the key comes.
	return k.RegisterTimer(time.Unix(0, addSat(r.at, int64(o.cfg.grace)+int64(o.cfg.history))-1).UTC())
}

// latest returns the key's table row.
func (o *updatesOp[K, S, V, Out]) latest(k *runtime.KeyState) (*V, bool, error) {
	raw, ok, err := k.Get(updatesTable, nil)
	if err != nil || !ok {
		return nil, false, err
	}
	return o.decodeVersion(k, raw)
}

func (o *updatesOp[K, S, V, Out]) decodeVersion(k *runtime.KeyState, raw []byte) (*V, bool, error) {
	if len(raw) == 0 || raw[0] == 0 {
		return nil, false, nil // a tombstone
	}
	v := new(V)
	if err := o.tableRows.decode(raw[1:], v); err != nil {
		return nil, false, k.Fail(fmt.Errorf("a table row in state does not decode: %w", unprefixed(err)))
	}
	return v, true, nil
}

// asOf returns the key's table row as of at: its latest version at or
// before at; none before every version kept.
func (o *updatesOp[K, S, V, Out]) asOf(k *runtime.KeyState, at int64) (*V, bool, error) {
	var found []byte
	upper := runtime.AppendTimedKey(nil, addSat(at, 1))
	err := k.ScanRange(updatesTable, nil, upper, func(_, value []byte) error {
		found = append(found[:0], value...)
		return nil
	})
	if err != nil || found == nil {
		return nil, false, err
	}
	return o.decodeVersion(k, found)
}

// lateHorizon is, with AsOf, the time at or before which a table update
// is late: the watermark the batch's rows are late by, less the grace and
// the history.
func (o *updatesOp[K, S, V, Out]) lateHorizon(b *runtime.Batch) int64 {
	if b.LateWatermark.IsZero() {
		return math.MinInt64
	}
	return addSat(b.LateWatermark.UnixNano(), -int64(o.cfg.grace)-int64(o.cfg.history))
}

// dropOldVersions drops the key's versions older than the one current at
// the watermark less the grace and the history: no stream row to come
// joins them. That one goes too when it is a tombstone (no version
// answers the same) once an update before it is late (lateHorizon), and
// a timer is set for then. A held stream row not yet joined (its timer
// comes after the batch's rows) keeps the version current at its time.
func (o *updatesOp[K, S, V, Out]) dropOldVersions(k *runtime.KeyState) error {
	horizon := addSat(k.Batch().Watermark.UnixNano(), -int64(o.cfg.grace)-int64(o.cfg.history))
	// (A KeyState's scan cannot be stopped: the key's held rows are
	// few, those of a grace, and the first is the earliest.)
	first := true
	err := k.ScanRange(updatesHeld, nil, nil, func(suffix, _ []byte) error {
		if first {
			horizon, first = min(horizon, rowTime(suffix)), false
		}
		return nil
	})
	if err != nil {
		return err
	}
	upper := runtime.AppendTimedKey(nil, addSat(horizon, 1))
	var old [][]byte
	var tombstone bool // the last of old
	err = k.ScanRange(updatesTable, nil, upper, func(suffix, value []byte) error {
		old = append(old, append([]byte(nil), suffix...))
		tombstone = len(value) == 0 || value[0] == 0
		return nil
	})
	if err != nil || len(old) == 0 {
		return err
	}
	if last := rowTime(old[len(old)-1]); !tombstone || last > o.lateHorizon(k.Batch()) {
		old = old[:len(old)-1] // current at the horizon
		if tombstone {
			// Dropped once an update before it would be late.
			if err := k.RegisterTimer(time.Unix(0, addSat(last, int64(o.cfg.grace)+int64(o.cfg.history))).UTC()); err != nil {
				return err
			}
		}
	}
	for _, suffix := range old {
		if err := k.Delete(updatesTable, suffix); err != nil {
			return err
		}
		k.Removed()
	}
	return nil
}

// HandleTimer joins the key's held stream rows whose time and grace the
// watermark has passed, with the table's rows as of their times.
func (o *updatesOp[K, S, V, Out]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	var key K
	if err := o.codec.decode(k.Key(), &key); err != nil {
		return k.Fail(fmt.Errorf("a key in state does not decode: %w", unprefixed(err)))
	}
	wm := k.Batch().Watermark.UnixNano()
	// Held rows at or before W - grace are due.
	due := addSat(wm, -int64(o.cfg.grace))
	upper := runtime.AppendTimedKey(nil, addSat(due, 1))
	type held struct{ suffix, value []byte }
	var rows []held
	err := k.ScanRange(updatesHeld, nil, upper, func(suffix, value []byte) error {
		rows = append(rows, held{append([]byte(nil), suffix...), append([]byte(nil), value...)})
		return nil
	})
	if err != nil {
		return err
	}
	for _, h := range rows {
		var s S
		if err := o.streamRows.decode(h.value[1:], &s); err != nil {
			return k.Fail(fmt.Errorf("a held stream row does not decode: %w", unprefixed(err)))
		}
		v, ok, err := o.asOf(k, int64(binary.BigEndian.Uint64(h.suffix)^1<<63))
		if err != nil {
			return err
		}
		o.emit(key, &s, v, ok)
		if err := k.Delete(updatesHeld, h.suffix); err != nil {
			return err
		}
		k.Removed()
	}
	// (The timer goes first: dropOldVersions may set it again, for the
	// next batch.)
	if err := k.DeleteTimer(expiry); err != nil {
		return err
	}
	return o.dropOldVersions(k)
}

// emitRow writes the row of j to the stages after the join, which get a
// pointer valid during the call (see Map): one variable holds each row.
func (o *updatesOp[K, S, V, Out]) emitRow(j Joined[K, S, V]) {
	o.out = o.row(j)
	o.emitDown(&o.out)
}
