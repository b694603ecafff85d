package typed

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// JoinTablesByForeignKey joins each row of the table left with the row of
// the table right whose key is the left row's foreign key (fk's result),
// as Kafka Streams' foreign-key KTable-KTable join: the join is a table
// under the left table's keys, and each change to a key's row of it is
// written as a TableChange, made by row.
//
//   - Inner: a left key has a row while the right table has a row under
//     its foreign key.
//   - LeftOuter: while the left table has its row (Right nil while the
//     right table lacks one).
//
// An update of a right row changes the row of every left key that refers
// to it (a removal, for Inner, when the right row is deleted), except the
// left keys whose last update of the batch refers elsewhere, whose row
// that update makes; an update of a left row changes that key's row,
// under its new foreign key. Within a batch a left key's updates count as
// one, its last (the last to come), and each input's updates are merged
// with the other's by event time as in JoinTables: so each left key's
// row after a batch is the one its last update and the right rows make,
// whatever the batches. A left row whose foreign key has a null part
// (NullKey) refers to no right row; a left update whose own key has one is
// dropped, and counted in the progress of name+"/left" (CustomMetrics
// "numNullKeyUpdatesDropped"), and so is a right update whose key has
// one, in that of name+"/right".
//
// The join keeps, under each left key, the foreign key its row refers
// to, under each right key the right row and the rows of the left keys
// that refer to it, and under each left key its row of the join: three
// stateful operators, named name+"/left", name+"/right" and name in
// reports and the checkpoint. The second is keyed by the foreign key, so
// a kafka.App must give every task the whole right table
// (Task.GlobalSource, as Kafka Streams' GlobalKTable); the left table's
// partitions may be spread. The third gives each change the row before it
// (Previous), and writes a removal only for a key that had a row (where
// Kafka Streams' foreign-key join may write a tombstone for a key that
// had none). Of the options, only UpdatesName applies.
//
// row gets the rows as the join keeps them: it may keep them, and must
// change neither.
func JoinTablesByForeignKey[K, F comparable, L, R, Out any](left UpdatesTable[K, L], right UpdatesTable[F, R], fk func(*L) F, how JoinType,
	row func(TableChange[K, L, R]) Out, opts ...UpdatesOption) Stream[Out] {
	t := newTablesPlan("JoinTablesByForeignKey", left.s.p, right.s.p, row, opts)
	switch how {
	case Inner, LeftOuter:
	default:
		t.fail("%v: a foreign-key join of two tables is Inner or LeftOuter (Kafka Streams' join and leftJoin)", how)
	}
	leftRows, rightRows := codecOf[L](t, "left rows"), codecOf[R](t, "right rows")
	// The left keys under the right ones and the foreign keys under the
	// left ones are stored as map keys and values are (a record's binary
	// encoding), which inspect reads.
	leftKeys, foreignKeys := codecOf[K](t, "left keys"), codecOf[F](t, "foreign keys")
	p, name := t.p, t.name
	timed := left.s.p.watermarked && right.s.p.watermarked
	const leftKind, rightKind, kind = "foreignKeyJoinLeft", "foreignKeyJoinRight", "foreignKeyJoin"
	return once(Stream[Out]{p: p, attach: func(c *compiler, emit func(*Out)) {
		res := &fkResultOp[K, L, R, Out]{c: c, row: row, emitDown: emit, codec: left.codec, leftRows: leftRows, rightRows: rightRows}
		res.info = runtime.OperatorInfo{
			Kind: kind, Name: name, OutputMode: Append.String(), TimeMode: runtime.EventTimeMode,
			KeyType: left.codec.typeName, LegacyKeyType: left.codec.legacyTypeName, UseKeys: left.codec.useKeys, ParseKey: left.codec.parseJSON, Key: left.codec.schema, Timeout: how.String(),
			States: []runtime.StateInfo{
				{Name: "left", Kind: "value", Encoding: runtime.EncodingTableRows, Schema: leftRows.schema, ValueType: leftRows.typeName},
				{Name: "right", Kind: "value", Encoding: runtime.EncodingTableRows, Schema: rightRows.schema, ValueType: rightRows.typeName},
			},
		}
		b := &fkRightOp[K, F, L, R]{c: c, how: how, emitDown: res.add, codec: right.codec, leftKeys: leftKeys,
			leftRows: leftRows, rightRows: rightRows, fkNull: nullCheck[F](), rightKey: right.key, rightDeleted: right.deleted, timed: timed}
		b.info = runtime.OperatorInfo{
			Kind: rightKind, Name: name + "/right", OutputMode: Append.String(), TimeMode: runtime.EventTimeMode,
			KeyType: right.codec.typeName, LegacyKeyType: right.codec.legacyTypeName, UseKeys: right.codec.useKeys, ParseKey: right.codec.parseJSON, Key: right.codec.schema, Timeout: how.String(),
			States: []runtime.StateInfo{
				{Name: "right", Kind: "value", Encoding: runtime.EncodingTableRows, Schema: rightRows.schema, ValueType: rightRows.typeName},
				{Name: "left", Kind: "map", Encoding: runtime.EncodingRecord, Schema: leftRows.schema, ValueType: leftRows.typeName, MapKeyType: leftKeys.typeName, MapKey: leftKeys.schema},
			},
		}
		a := &fkLeftOp[K, F, L]{c: c, codec: left.codec, foreignKeys: foreignKeys, rightKeys: right.codec, null: nullCheck[K](), fkNull: b.fkNull,
			key: left.key, deleted: left.deleted, fk: fk, emitDown: b.addSub}
		a.info = runtime.OperatorInfo{
			Kind: leftKind, Name: name + "/left", OutputMode: Append.String(), TimeMode: runtime.EventTimeMode,
			KeyType: left.codec.typeName, LegacyKeyType: left.codec.legacyTypeName, UseKeys: left.codec.useKeys, ParseKey: left.codec.parseJSON, Key: left.codec.schema, Timeout: how.String(),
			States: []runtime.StateInfo{
				{Name: "foreignKey", Kind: "value", Encoding: runtime.EncodingRecord, Schema: foreignKeys.schema, ValueType: foreignKeys.typeName},
			},
		}
		noTime := func(what string) error {
			return noEventTime(kind+" ("+name+")", what, "join the input before the operator, or write the operator's rows to a sink and join them in a query of their own")
		}
		res.index = c.addOperator(func() {
			b.index = c.addOperator(func() {
				a.index = c.addOperator(func() {
					if c.attachFrom(func() { left.s.attach(c, a.addLeft) }) && timed {
						c.errs = append(c.errs, noTime("its left table's updates"))
					}
				}, a, operatorInfo{kind: leftKind, function: name + "/left", mode: Append, watermarked: p.watermarked, part: true})
				if c.attachFrom(func() { right.s.attach(c, b.addRight) }) && timed {
					c.errs = append(c.errs, noTime("its right table's updates"))
				}
			}, b, operatorInfo{kind: rightKind, function: name + "/right", mode: Append, watermarked: p.watermarked, part: true})
		}, res, operatorInfo{kind: kind, function: name, mode: Append, watermarked: p.watermarked})
	}})
}

// The variables of a foreign-key join: the left operator's foreign key of
// a left key (the one its row refers to, as the row was written, so that a
// changed fk function still finds the subscription to end); the right
// operator's row of a right key, and the rows of the left keys that refer
// to it, under their encoded keys.
const (
	fkForeignKeyVar uint8 = 0
	fkRightRowVar   uint8 = 0
	fkLeftsVar      uint8 = 1
)

// What a left key's batch of updates asks of the right row under a
// foreign key.
const (
	fkAdd     uint8 = iota // the left key's row refers to it now
	fkMoved                // the left key's row refers to another now
	fkDeleted              // the left key's row is gone
)

// fkSub is what the left operator of a foreign-key join hands the right
// one about a left key: its row and foreign key after a batch's updates.
type fkSub[K, F comparable, L any] struct {
	fk F
	lk K
	op uint8
	// at is the event time of the key's last update, when timeless is
	// false.
	timeless bool
	at       int64
	l        L // the row (fkAdd)
}

// fkLeftRow is an update of the left table, gathered for a batch.
type fkLeftRow[L any] struct {
	timeless bool
	at       int64
	l        L
}

// fkLeftOp keeps a foreign-key join's left rows by key, and hands the
// right operator each key's row and foreign key after a batch.
type fkLeftOp[K, F comparable, L any] struct {
	c           *compiler
	index       int
	info        runtime.OperatorInfo
	codec       keyCodec[K]
	foreignKeys valueCodec[F]
	rightKeys   keyCodec[F]
	null        func(*K) bool
	fkNull      func(*F) bool
	key         func(*L) K
	deleted     func(*L) bool
	fk          func(*L) F
	emitDown    func(*fkSub[K, F, L])
	sub         fkSub[K, F, L]

	batch keyedRows[K, fkLeftRow[L]]
	buf   []byte
}

func (o *fkLeftOp[K, F, L]) Info() runtime.OperatorInfo { return o.info }
func (o *fkLeftOp[K, F, L]) Groups() *runtime.Groups    { return &o.batch.groups }

// EndBatch drops the batch's rows.
func (o *fkLeftOp[K, F, L]) EndBatch() { o.batch.endBatch() }

// RowsDone adds the updates the batch dropped for a null key to the
// operator's figure (nullKeyMetric).
func (o *fkLeftOp[K, F, L]) RowsDone(_ context.Context, b *runtime.Batch) error {
	o.batch.nulls.done(b, o.index)
	return nil
}

func (o *fkLeftOp[K, F, L]) addLeft(l *L) {
	k := o.key(l)
	if o.null != nil && o.null(&k) {
		o.batch.nulls.n++
		return
	}
	o.batch.add(o.codec, &o.info, k, &fkLeftRow[L]{timeless: o.c.eventTime.IsZero(), at: runtime.TimedNanos(o.c.eventTime), l: *l})
}

// HandleRows takes the key's last update of the batch (the last to come,
// as Kafka Streams applies a topic's updates in order), stores the
// foreign key it refers to, and hands the right operator what changed:
// the foreign key the row left, and the one it refers to, with the row.
func (o *fkLeftOp[K, F, L]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	u := &o.batch.rows[rows[len(rows)-1]] // the last to come
	raw, had, err := k.Get(fkForeignKeyVar, nil)
	if err != nil {
		return err
	}
	var oldFK, newFK F
	if had {
		if err := o.foreignKeys.decode(raw, &oldFK); err != nil {
			return k.Fail(fmt.Errorf("a foreign key in state does not decode: %w", unprefixed(err)))
		}
	}
	var now *L
	if o.deleted == nil || !o.deleted(&u.l) {
		now = &u.l
		newFK = o.fk(now)
		// The right operator groups by it: a foreign key that does not
		// encode fails here, naming the left key.
		if o.buf, err = o.rightKeys.encode(o.buf[:0], &newFK); err != nil {
			return k.Fail(fmt.Errorf("the foreign key %v: %w", newFK, unprefixed(err)))
		}
	}
	key := o.batch.keys[group]
	switch {
	case had && now == nil:
		o.emit(fkSub[K, F, L]{fk: oldFK, lk: key, op: fkDeleted, timeless: u.timeless, at: u.at})
	case had && oldFK != newFK:
		o.emit(fkSub[K, F, L]{fk: oldFK, lk: key, op: fkMoved, timeless: u.timeless, at: u.at})
	}
	if now == nil {
		if !had {
			return nil
		}
		if err := k.Delete(fkForeignKeyVar, nil); err != nil {
			return err
		}
		k.Removed()
		return nil
	}
	o.emit(fkSub[K, F, L]{fk: newFK, lk: key, op: fkAdd, timeless: u.timeless, at: u.at, l: *now})
	if o.buf, err = o.foreignKeys.encode(o.buf[:0], &newFK); err != nil {
		return k.Fail(err)
	}
	if err := k.Put(fkForeignKeyVar, nil, o.buf); err != nil {
		return err
	}
	k.Updated(!had)
	return nil
}

func (o *fkLeftOp[K, F, L]) emit(s fkSub[K, F, L]) {
	o.sub = s
	o.emitDown(&o.sub)
}

// HandleTimer is never called: the operator sets no timers.
func (o *fkLeftOp[K, F, L]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	return k.DeleteTimer(expiry)
}

// fkItem is what reaches the right operator of a foreign-key join in a
// batch: a right update, or a left key's subscription.
type fkItem[K, F comparable, L, R any] struct {
	right    bool
	timeless bool
	at       int64
	r        R
	sub      fkSub[K, F, L]
}

// fkRightOp keeps a foreign-key join's right rows by key, each with the
// left keys that refer to it and their rows, and writes the join's
// changes.
type fkRightOp[K, F comparable, L, R any] struct {
	c            *compiler
	index        int
	info         runtime.OperatorInfo
	how          JoinType
	emitDown     func(*TableChange[K, L, R])
	change       TableChange[K, L, R]
	codec        keyCodec[F]
	leftKeys     keyCodec[K]
	leftRows     valueCodec[L]
	rightRows    valueCodec[R]
	fkNull       func(*F) bool
	rightKey     func(*R) F
	rightDeleted func(*R) bool
	timed        bool

	batch keyedRows[F, fkItem[K, F, L, R]]
	order []int32
	merge timeMerge
	buf   []byte
	// The key's left rows (nil: gone) by encoded left key, read as
	// needed, and lks their encoded keys in order; changed, those to
	// write; moved, the left keys that refer to another right row after
	// the batch.
	subs    map[string]*fkLeft[K, L]
	changed map[string]bool
	moved   map[string]bool
	lks     []string
}

// fkLeft is a left key and its row (nil: gone), as the right operator
// holds it.
type fkLeft[K comparable, L any] struct {
	key K
	row *L
	// stored says state holds an entry of the key.
	stored bool
}

func (o *fkRightOp[K, F, L, R]) Info() runtime.OperatorInfo { return o.info }
func (o *fkRightOp[K, F, L, R]) Groups() *runtime.Groups    { return &o.batch.groups }

// EndBatch drops the batch's rows.
func (o *fkRightOp[K, F, L, R]) EndBatch() {
	o.batch.endBatch()
	// The left rows of the batch's last key go: a popular right row's
	// would stay in memory until the next batch.
	if len(o.subs) > 1<<16 {
		o.subs, o.changed, o.moved, o.lks = nil, nil, nil, nil
	} else {
		clear(o.subs)
		clear(o.lks)
		o.lks = o.lks[:0]
	}
}

// RowsDone adds the right updates the batch dropped for a null key to
// the operator's figure (nullKeyMetric).
func (o *fkRightOp[K, F, L, R]) RowsDone(_ context.Context, b *runtime.Batch) error {
	o.batch.nulls.done(b, o.index)
	return nil
}

func (o *fkRightOp[K, F, L, R]) addRight(r *R) {
	f := o.rightKey(r)
	if o.fkNull != nil && o.fkNull(&f) {
		o.batch.nulls.n++
		return
	}
	o.add(f, fkItem[K, F, L, R]{right: true, timeless: o.c.eventTime.IsZero(), at: runtime.TimedNanos(o.c.eventTime), r: *r})
}

// addSub takes what the left operator hands on. A foreign key with a
// null part refers to no right row: the left key's change is written at
// once.
func (o *fkRightOp[K, F, L, R]) addSub(s *fkSub[K, F, L]) {
	if o.fkNull != nil && o.fkNull(&s.fk) {
		at := timeOf(s.timeless, s.at)
		switch {
		case s.op == fkAdd && o.how == LeftOuter:
			l := new(L)
			*l = s.l
			o.emitRow(TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: s.lk, Left: l}, Time: at})
		case s.op == fkAdd, s.op == fkDeleted && o.how == LeftOuter:
			// (An Inner join's key without a row: the result operator
			// writes nothing for it.)
			o.emitRow(TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: s.lk}, Removed: true, Time: at})
		}
		return
	}
	o.add(s.fk, fkItem[K, F, L, R]{timeless: s.timeless, at: s.at, sub: *s})
}

func (o *fkRightOp[K, F, L, R]) add(f F, it fkItem[K, F, L, R]) {
	o.batch.add(o.codec, &o.info, f, &it)
}

// timeOf is the event time at, or zero when timeless.
func timeOf(timeless bool, at int64) time.Time {
	if timeless {
		return time.Time{}
	}
	return time.Unix(0, at).UTC()
}

// HandleRows applies the foreign key's right updates and its left keys'
// subscriptions, each in the order they came, the two merged by event
// time (the left keys' first at equal times, and without times), handing
// on each change to a left key's row, then stores what changed.
func (o *fkRightOp[K, F, L, R]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	// The left keys' subscriptions come in the order of the left
	// operator's keys, each at its key's last update: they are put in
	// order of time first (a left key has one a batch).
	o.order = o.merge.merge(o.order, rows, o.timed, func(n int32) bool { return o.batch.rows[n].right }, func(n int32) int64 { return o.batch.rows[n].at }, true)
	if o.subs == nil {
		o.subs, o.changed, o.moved = map[string]*fkLeft[K, L]{}, map[string]bool{}, map[string]bool{}
	}
	clear(o.subs)
	clear(o.changed)
	clear(o.moved)
	o.lks = o.lks[:0]
	var err error
	for _, n := range o.order {
		if it := &o.batch.rows[n]; !it.right && it.sub.op == fkMoved {
			if o.buf, err = o.leftKeys.encode(o.buf[:0], &it.sub.lk); err != nil {
				return k.Fail(err)
			}
			o.moved[string(o.buf)] = true
		}
	}
	r, hadRight, err := loadRow(k, fkRightRowVar, o.rightRows)
	if err != nil {
		return err
	}
	rightChanged, all := false, false
	for _, n := range o.order {
		it := &o.batch.rows[n]
		at := timeOf(it.timeless, it.at)
		if it.right {
			was := r
			if o.rightDeleted != nil && o.rightDeleted(&it.r) {
				if r == nil {
					continue // a tombstone of a row that is not there
				}
				r = nil
			} else {
				r = new(R)
				*r = it.r
			}
			rightChanged = true
			if !all {
				if err := o.readAll(k); err != nil {
					return err
				}
				all = true
			}
			for _, lk := range o.lks {
				s := o.subs[lk]
				if s.row == nil || o.moved[lk] {
					continue // gone, or its row is another right row's now
				}
				switch {
				case r != nil || o.how == LeftOuter:
					o.emitRow(TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: s.key, Left: s.row, Right: r}, Time: at})
				case was != nil:
					o.emitRow(TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: s.key}, Removed: true, Time: at})
				}
			}
			continue
		}
		if o.buf, err = o.leftKeys.encode(o.buf[:0], &it.sub.lk); err != nil {
			return k.Fail(err)
		}
		lk := string(o.buf)
		s, err := o.left(k, lk, it.sub.lk)
		if err != nil {
			return err
		}
		had := s.row != nil
		o.changed[lk] = true
		switch it.sub.op {
		case fkMoved:
			s.row = nil
		case fkDeleted:
			s.row = nil
			if had && (r != nil || o.how == LeftOuter) {
				o.emitRow(TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: s.key}, Removed: true, Time: at})
			}
		case fkAdd:
			s.row = new(L)
			*s.row = it.sub.l
			switch {
			case r != nil || o.how == LeftOuter:
				o.emitRow(TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: s.key, Left: s.row, Right: r}, Time: at})
			case !had:
				// It may have had a row under the right row it left; the
				// result operator writes nothing for a key that had none.
				o.emitRow(TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: s.key}, Removed: true, Time: at})
			}
		}
	}
	if rightChanged {
		if err := storeRow(k, fkRightRowVar, o.rightRows, r, hadRight, &o.buf); err != nil {
			return err
		}
	}
	for _, lk := range o.lks { // in order: a batch run again writes as it did
		if !o.changed[lk] {
			continue
		}
		s := o.subs[lk]
		if s.row == nil {
			if s.stored {
				if err := k.Delete(fkLeftsVar, []byte(lk)); err != nil {
					return err
				}
				k.Removed()
			}
			continue
		}
		if o.buf, err = o.leftRows.encode(o.buf[:0], s.row); err != nil {
			return k.Fail(err)
		}
		if err := k.Put(fkLeftsVar, []byte(lk), o.buf); err != nil {
			return err
		}
		k.Updated(!s.stored)
	}
	return nil
}

// left returns the left key's entry, read from state at its first use in
// the call.
func (o *fkRightOp[K, F, L, R]) left(k *runtime.KeyState, lk string, key K) (*fkLeft[K, L], error) {
	if s, ok := o.subs[lk]; ok {
		return s, nil
	}
	s := &fkLeft[K, L]{key: key}
	raw, ok, err := k.Get(fkLeftsVar, []byte(lk))
	if err != nil {
		return nil, err
	}
	if ok {
		s.row, s.stored = new(L), true
		if err := o.leftRows.decode(raw, s.row); err != nil {
			return nil, k.Fail(fmt.Errorf("a left row in state does not decode: %w", unprefixed(err)))
		}
	}
	o.subs[lk] = s
	o.lks = append(o.lks, lk)
	return s, nil
}

// readAll reads every left key that refers to the right row, in the order
// of their encodings, into subs and lks.
func (o *fkRightOp[K, F, L, R]) readAll(k *runtime.KeyState) error {
	err := k.Scan(fkLeftsVar, func(suffix, value []byte) error {
		if _, ok := o.subs[string(suffix)]; ok {
			return nil
		}
		s := &fkLeft[K, L]{row: new(L), stored: true}
		if err := o.leftKeys.decode(suffix, &s.key); err != nil {
			return k.Fail(fmt.Errorf("a left key in state does not decode: %w", unprefixed(err)))
		}
		if err := o.leftRows.decode(value, s.row); err != nil {
			return k.Fail(fmt.Errorf("a left row in state does not decode: %w", unprefixed(err)))
		}
		o.subs[string(suffix)] = s
		return nil
	})
	if err != nil {
		return err
	}
	o.lks = o.lks[:0]
	for lk := range o.subs {
		o.lks = append(o.lks, lk)
	}
	slices.Sort(o.lks)
	return nil
}

// HandleTimer is never called: the operator sets no timers.
func (o *fkRightOp[K, F, L, R]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	return k.DeleteTimer(expiry)
}

// emitRow hands c to the operator that keeps each left key's row of the
// join.
func (o *fkRightOp[K, F, L, R]) emitRow(c TableChange[K, L, R]) {
	o.change = c
	o.emitDown(&o.change)
}

// loadRow returns a table's row of the key under variable (EncodingTableRows),
// and whether state has an entry.
func loadRow[V any](k *runtime.KeyState, variable uint8, c valueCodec[V]) (*V, bool, error) {
	raw, ok, err := k.Get(variable, nil)
	if err != nil || !ok {
		return nil, false, err
	}
	if len(raw) == 0 || raw[0] == 0 {
		return nil, true, nil
	}
	v := new(V)
	if err := c.decode(raw[1:], v); err != nil {
		return nil, true, k.Fail(fmt.Errorf("a table row in state does not decode: %w", unprefixed(err)))
	}
	return v, true, nil
}

// storeRow writes a table's row of the key under variable, or removes it
// (v nil); buf is the encoding's buffer.
func storeRow[V any](k *runtime.KeyState, variable uint8, c valueCodec[V], v *V, had bool, buf *[]byte) error {
	if v == nil {
		if !had {
			return nil
		}
		if err := k.Delete(variable, nil); err != nil {
			return err
		}
		k.Removed()
		return nil
	}
	var err error
	if *buf, err = c.encode(append((*buf)[:0], 1), v); err != nil {
		return k.Fail(err)
	}
	if err := k.Put(variable, nil, *buf); err != nil {
		return err
	}
	k.Updated(!had)
	return nil
}

// fkChange is a change to a left key's row of a foreign-key join as the
// right operator writes it, gathered for a batch.
type fkChange[L, R any] struct {
	removed  bool
	timeless bool
	at       int64
	l        *L
	r        *R
}

// fkResultOp keeps each left key's row of a foreign-key join, so that a
// change carries the row before it and a removal comes only for a key
// that had a row; it writes the changes with the user's function.
type fkResultOp[K comparable, L, R, Out any] struct {
	c         *compiler
	index     int
	info      runtime.OperatorInfo
	row       func(TableChange[K, L, R]) Out
	emitDown  func(*Out)
	out       Out
	codec     keyCodec[K]
	leftRows  valueCodec[L]
	rightRows valueCodec[R]

	batch keyedRows[K, fkChange[L, R]]
	buf   []byte
}

// The variables of the operator that keeps a foreign-key join's rows.
const (
	fkResultLeftVar  uint8 = 0
	fkResultRightVar uint8 = 1
)

func (o *fkResultOp[K, L, R, Out]) Info() runtime.OperatorInfo { return o.info }
func (o *fkResultOp[K, L, R, Out]) Groups() *runtime.Groups    { return &o.batch.groups }

// EndBatch drops the batch's changes.
func (o *fkResultOp[K, L, R, Out]) EndBatch() { o.batch.endBatch() }

func (o *fkResultOp[K, L, R, Out]) add(c *TableChange[K, L, R]) {
	ch := fkChange[L, R]{removed: c.Removed, timeless: c.Time.IsZero(), l: c.Left, r: c.Right}
	if !ch.timeless {
		ch.at = c.Time.UnixNano()
	}
	o.batch.add(o.codec, &o.info, c.Key, &ch)
}

// HandleRows applies the key's changes in the order they came (one right
// row's, in order of time), writing each with the row before it; a
// removal of a key without a row writes nothing.
func (o *fkResultOp[K, L, R, Out]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	key := o.batch.keys[group]
	l, hadLeft, err := loadRow(k, fkResultLeftVar, o.leftRows)
	if err != nil {
		return err
	}
	r, hadRight, err := loadRow(k, fkResultRightVar, o.rightRows)
	if err != nil {
		return err
	}
	changed := false
	for _, n := range rows {
		ch := &o.batch.rows[n]
		c := TableChange[K, L, R]{Joined: Joined[K, L, R]{Key: key}, Removed: ch.removed, Time: timeOf(ch.timeless, ch.at)}
		if l != nil {
			c.Previous = &Joined[K, L, R]{Key: key, Left: l, Right: r}
		}
		if ch.removed {
			if l == nil {
				continue // it had no row
			}
			l, r = nil, nil
		} else {
			l, r = ch.l, ch.r
			c.Left, c.Right = l, r
		}
		changed = true
		o.out = o.row(c)
		o.emitDown(&o.out)
	}
	if !changed {
		return nil
	}
	if err := storeRow(k, fkResultLeftVar, o.leftRows, l, hadLeft, &o.buf); err != nil {
		return err
	}
	return storeRow(k, fkResultRightVar, o.rightRows, r, hadRight, &o.buf)
}

// HandleTimer is never called: the operator sets no timers.
func (o *fkResultOp[K, L, R, Out]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	return k.DeleteTimer(expiry)
}
