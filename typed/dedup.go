package typed

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// DropDuplicates keeps the first row of each key and drops the rows of a
// key seen before, as Spark's dropDuplicates(cols) whose columns do not
// hold the watermark's event time: every key is kept for ever, so state
// grows with the keys, and a row of a key seen long ago is still a
// duplicate. With a watermark, rows at or before it are late: dropped and
// counted, as in Spark. To forget keys as the watermark passes, use
// DropDuplicatesWithEventTime (Spark's dropDuplicates with the event
// time among the columns: the rows of one key and one event time are
// copies) or DropDuplicatesWithinWatermark (Spark's
// dropDuplicatesWithinWatermark: a key's copies come within the
// watermark's delay of its first row). The rows that pass go on in
// Append mode, so an aggregation may follow.
func DropDuplicates[T any, K comparable](s Stream[T], key func(*T) K) Stream[T] {
	return dropDuplicates(s, key, "dropDuplicates", false)
}

// DropDuplicatesWithinWatermark drops a row whose key came within the
// watermark's delay of the key's first row, as Spark 3.5's
// dropDuplicatesWithinWatermark: the event time need not be in the key; a
// key is forgotten once the watermark reaches its first row's event time
// plus the delay (later copies do not extend it), so state stays bounded;
// rows at or before the watermark are late, dropped and counted. It needs
// a watermark.
func DropDuplicatesWithinWatermark[T any, K comparable](s Stream[T], key func(*T) K) Stream[T] {
	if !s.p.watermarked {
		s.p = s.p.failed("streamgen: DropDuplicatesWithinWatermark needs a watermark (WithWatermark before it)")
	}
	return dropDuplicates(s, key, "dropDuplicatesWithinWatermark", true)
}

// DropDuplicatesWithEventTime keeps the first row of each key and event
// time, and drops the later rows of the same key and the same event time,
// as Spark's dropDuplicates with the watermark's column among its
// columns: the event time is the watermark's (WithWatermark), and the key
// need not hold it. A key and time is forgotten once the watermark
// reaches the time; rows at or before the watermark are late, dropped and
// counted. It needs a watermark.
//
// It is DropDuplicates with the event time added to the key, and cheaper:
// the state is ordered by event time, so a new row costs one write and
// the watermark forgets what it passes with one range deletion, where
// DropDuplicates keeps an index of expiries beside its keys. Use it when
// rows that repeat one another share their event time (a resent reading);
// DropDuplicates when the key alone says what repeats.
func DropDuplicatesWithEventTime[T any, K comparable](s Stream[T], key func(*T) K) Stream[T] {
	if !s.p.watermarked {
		s.p = s.p.failed("streamgen: DropDuplicatesWithEventTime needs a watermark (WithWatermark before it)")
	}
	kc, err := newKeyCodec[K]()
	if err != nil {
		s.p = s.p.failed("%v", err)
	}
	const kind = "dropDuplicatesWithEventTime"
	name := fmt.Sprintf("%T", key)
	opInfo := operatorInfo{kind: kind, function: name, mode: Append, watermarked: s.p.watermarked}
	return once(Stream[T]{p: s.p, attach: func(c *compiler, emit func(*T)) {
		// The operator's key is the row's event time, then its key: the
		// grouping key of the state ordered by event time.
		timed := wrap(kc, "",
			func(b []byte, k *timedKey[K]) ([]byte, error) {
				return kc.encode(runtime.AppendTimedKey(b, k.at), &k.key)
			},
			func(b []byte, k *timedKey[K]) error {
				if len(b) < 8 {
					return fmt.Errorf("a key of %d bytes does not begin with its event time", len(b))
				}
				k.at = int64(binary.BigEndian.Uint64(b) ^ 1<<63)
				return kc.decode(b[8:], &k.key)
			})
		ks := KeyedStream[timedKey[K], T]{s: s, codec: timed, key: func(t *T) timedKey[K] {
			return timedKey[K]{at: runtime.TimedNanos(c.eventTime), key: key(t)}
		}}
		op := &timedDedupOp[K, T]{gatherer: newGatherer(c, ks, kind), emitDown: emit}
		op.firstOnly = true // a group's later rows are copies
		op.info = runtime.OperatorInfo{
			Kind: kind, Name: name, OutputMode: Append.String(), KeyType: kc.typeName, LegacyKeyType: kc.legacyTypeName, UseKeys: kc.useKeys, ParseKey: kc.parseJSON, Key: kc.schema,
			States:        []runtime.StateInfo{{Name: "seen", Kind: "value", Encoding: runtime.EncodingByEventTime}},
			DropsLateRows: true,
			NoData:        runtime.NoDataOnWatermark,
		}
		c.addOperator(func() {
			if c.attachFrom(func() { ks.s.attach(c, op.add) }) {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its rows", "deduplicate before the operator, or by a key that holds the time (DropDuplicates)"))
			}
		}, op, opInfo)
	}})
}

// timedKey is a row's key with its event time, in Unix nanoseconds (see
// runtime.TimedNanos).
type timedKey[K comparable] struct {
	at  int64
	key K
}

// timedDedupOp is a DropDuplicatesWithEventTime of one query: a key and
// time's state is an entry of a variable ordered by event time, which
// the loop removes once the watermark reaches the time.
type timedDedupOp[K comparable, T any] struct {
	gatherer[timedKey[K], T]
	info     runtime.OperatorInfo
	emitDown func(*T)
}

func (o *timedDedupOp[K, T]) Info() runtime.OperatorInfo { return o.info }
func (o *timedDedupOp[K, T]) Groups() *runtime.Groups    { return &o.groups }
func (o *timedDedupOp[K, T]) EndBatch()                  { o.gatherer.end() }

func (o *timedDedupOp[K, T]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	rows, err := o.rowsOf(k.Batch(), group, rows)
	if err != nil || len(rows) == 0 {
		return err
	}
	seen, err := k.SeenTimed(0)
	if err != nil || seen {
		return err // a copy of a row of an earlier batch
	}
	o.emitDown(&o.rows[rows[0]])
	if err := k.PutTimed(0); err != nil {
		return err
	}
	k.Updated(true)
	return nil
}

func (o *timedDedupOp[K, T]) HandleTimer(context.Context, *runtime.KeyState, time.Time) error {
	return nil
}

func dropDuplicates[T any, K comparable](s Stream[T], key func(*T) K, kind string, withinDelay bool) Stream[T] {
	kc, err := newKeyCodec[K]()
	if err != nil {
		s.p = s.p.failed("%v", err)
	}
	ks := KeyedStream[K, T]{s: s, key: key, codec: kc}
	name := fmt.Sprintf("%T", key)
	opInfo := operatorInfo{kind: kind, function: name, mode: Append, watermarked: s.p.watermarked}
	return once(Stream[T]{p: s.p, attach: func(c *compiler, emit func(*T)) {
		op := &dedupOp[K, T]{gatherer: newGatherer(c, ks, kind), emitDown: emit, withinDelay: withinDelay, delay: s.p.watermarkDelay}
		op.trackFirstTimes = withinDelay
		op.info = runtime.OperatorInfo{
			Kind: kind, Name: name, OutputMode: Append.String(), KeyType: kc.typeName, LegacyKeyType: kc.legacyTypeName, UseKeys: kc.useKeys, ParseKey: kc.parseJSON, Key: kc.schema,
			States:        []runtime.StateInfo{{Name: "seen", Kind: "value", Encoding: runtime.EncodingExpiring}},
			DropsLateRows: s.p.watermarked,
			// As Spark's, whether the key holds the event time or not.
			NoData: runtime.NoDataOnWatermark,
		}
		if withinDelay {
			// Keys expire in event time: the runtime removes them once the
			// watermark reaches them.
			op.info.States[0].TTL, op.info.States[0].EventTimeTTL = time.Nanosecond, true
		}
		op.index = c.addOperator(func() {
			if c.attachFrom(func() { ks.s.attach(c, op.add) }) && withinDelay {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its rows", "deduplicate before the operator"))
			}
		}, op, opInfo)
	}})
}

// dedupOp is a deduplication of one query: a key's state is an empty
// entry, expiring in event time when there is a watermark.
type dedupOp[K comparable, T any] struct {
	gatherer[K, T]
	index       int
	info        runtime.OperatorInfo
	emitDown    func(*T)
	withinDelay bool
	// delay is, for withinDelay, that of the watermark of the rows.
	delay time.Duration
}

func (o *dedupOp[K, T]) Info() runtime.OperatorInfo { return o.info }
func (o *dedupOp[K, T]) Groups() *runtime.Groups    { return &o.groups }
func (o *dedupOp[K, T]) EndBatch()                  { o.gatherer.end() }

func (o *dedupOp[K, T]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	rows, err := o.rowsOf(k.Batch(), group, rows)
	if err != nil || len(rows) == 0 {
		return err
	}
	b := k.Batch()
	raw, existed, err := k.Get(0, nil)
	if err != nil {
		return err
	}
	if existed {
		at, _, err := runtime.ReadExpiring(raw)
		if err != nil {
			return k.Fail(err)
		}
		// A key the batches before forgot is gone; one that this batch's
		// watermark forgets (after its rows) is still remembered: a row
		// not late for the batch before is its copy.
		if at.IsZero() || b.LateWatermark.IsZero() || !runtime.Expired(at, b.LateWatermark) {
			return nil // a duplicate of a key still remembered
		}
	}
	first := &o.rows[rows[0]]
	o.emitDown(first)
	var at time.Time // DropDuplicates keeps its keys: no expiry
	if o.withinDelay {
		at = runtime.TimerInstant(o.firstTime(group).Add(o.delay))
	}
	if err := k.PutExpiring(0, nil, nil, at, runtime.EventTimeExpiry); err != nil {
		return err
	}
	k.Updated(!existed)
	return nil
}

func (o *dedupOp[K, T]) HandleTimer(context.Context, *runtime.KeyState, time.Time) error { return nil }
