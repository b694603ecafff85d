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

// aggregateSessions is AggregateWindows over session windows: each key's
// open sessions are one state row, with their windows and accumulators;
// a row at t extends, or merges, the sessions whose windows overlap or
// touch [t, t+gap) (Spark's rule: a row at exactly a session's end
// extends it), and a session closes once the watermark is at or past its
// end, by a timer one nanosecond before it: rows come before timers in a
// batch, so a row at that end that is not late still extends it.
func aggregateSessions[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]](
	ws WindowedStream[K, T], agg Aggregator[T, Acc, Out], row func(w Window, key K, out Out) Row,
) Stream[Row] {
	name := fmt.Sprintf("%T", agg)
	opInfo := operatorInfo{kind: "sessionAggregate", function: name, aggregation: true, windowed: true, sessions: true, watermarked: ws.s.p.watermarked}
	ks := KeyedStream[K, T]{s: ws.s, key: ws.key, codec: ws.codec}
	return once(Stream[Row]{p: ws.s.p, attach: func(c *compiler, emit func(*Row)) {
		gapOf := ws.gapOf
		if gapOf == nil {
			gap := ws.windows.gap
			gapOf = func(*T) time.Duration { return gap }
		}
		op := &sessionOp[K, T, Acc, Out, Row, PA]{gatherer: newGatherer(c, ks, "sessionAggregate ("+name+")"),
			agg: agg, eventTime: ws.eventTime, gapOf: gapOf, output: row, emitDown: emit}
		add := op.add
		op.mode = &c.outputMode
		op.info = runtime.OperatorInfo{
			Kind: "sessionAggregate", Name: name, KeyType: ws.codec.typeName, LegacyKeyType: ws.codec.legacyTypeName, UseKeys: ws.codec.useKeys, ParseKey: ws.codec.parseJSON, Key: ws.codec.schema,
			Windows:       &runtime.WindowsMeta{Gap: ws.windows.gap},
			States:        []runtime.StateInfo{{Name: "sessions", Schema: PA(new(Acc)).StreamSchema(), Kind: "value", Encoding: runtime.EncodingSessions}},
			DropsLateRows: ws.s.p.watermarked,
		}
		describe(&op.info, agg)
		info := opInfo // this query's: late reads its compiler
		if ws.s.p.watermarked {
			op.info.TimeMode = runtime.EventTimeMode
			// As Spark's session windows: a row is late when the session
			// it alone would make, [t, t+gap), ends at or before the
			// watermark; one within the gap of it may still extend a
			// session that is open. Complete mode drops nothing.
			gap := ws.windows.gap
			info.late = func(et, wm time.Time) int64 {
				if c.outputMode == Complete || et.Add(gap).After(wm) {
					return 0
				}
				return 1
			}
			if ws.gapOf != nil || ws.windows.joinOpen {
				// Each row's gap is its own, or a late row may join an
				// open session: the operator judges.
				info.late = func(time.Time, time.Time) int64 { return 0 }
			}
			// lateByItself reports whether r's own session, [t,
			// t+gap), ends at or before the batch's late watermark (a
			// row without a gap makes none).
			lateByItself := func(r *T) (t time.Time, gap time.Duration, late bool) {
				wm := c.batch.LateWatermarkOf(op.index)
				if c.outputMode == Complete || wm.IsZero() {
					return t, gap, false
				}
				t, gap = ws.eventTime(r), gapOf(r)
				return t, gap, gap > 0 && !t.Add(gap).After(wm)
			}
			switch {
			case ws.windows.joinOpen:
				// When the batch runs, by the key's sessions
				// (HandleRows), which sends a row it drops to the
				// LateRows of the WithWatermark that pushed it, if any.
				op.dropsLate = func() bool { return c.outputMode != Complete }
				op.joinOpen = true
				add = func(r *T) {
					op.add(r)
					if lateRow := c.lateRow; lateRow != nil {
						if t, gap, late := lateByItself(r); late {
							op.late.keep(op.lastGroup, t, gap, lateRow())
						}
					}
				}
			case ws.gapOf != nil:
				// As a row reaches it, by its own gap: the WithWatermark
				// pushing it sends it to LateRows.
				add = func(r *T) {
					if _, _, late := lateByItself(r); late {
						c.batch.DropLate(op.index)
						if c.lateRow != nil {
							c.lateRow()()
						}
						return
					}
					op.add(r)
				}
			}
		}
		fn := funcPointer(ws.eventTime)
		op.index = c.addOperator(func() {
			ks.s.attach(c, func(r *T) {
				// A time the WithWatermark pushing the row read was judged
				// there; one read here is judged here (see outOfRange).
				if ns, pushed := eventNanosOf(c, r, fn, ws.eventTime); !pushed && c.outOfRange(ns) {
					return
				}
				add(r)
			})
		}, op, info)
	}})
}

type sessionWindow[Acc any] struct {
	window  Window
	acc     Acc
	changed bool
}

// sessionOp is a session-window aggregation of one query.
type sessionOp[K comparable, T, Acc, Out, Row any, PA codec.RecordPtr[Acc]] struct {
	gatherer[K, T]
	modalInfo
	index     int
	agg       Aggregator[T, Acc, Out]
	eventTime func(*T) time.Time
	gapOf     func(*T) time.Duration
	// dropsLate, set for sessions JoiningOpenSessions under a watermark,
	// reports whether the operator drops late rows itself when the batch
	// runs (those of GapBy, it drops as they reach it).
	dropsLate func() bool
	// joinOpen: a late row joins the open sessions it touches
	// (Windows.JoiningOpenSessions).
	joinOpen bool
	// late are the batch's rows that may be late (those
	// JoiningOpenSessions drops if they touch no open session).
	late     lateSends
	output   func(Window, K, Out) Row
	emitDown func(*Row)
	sessions []sessionWindow[Acc]
	byTime   []timedRow
	ends     []time.Time
	buf      []byte
}

func (o *sessionOp[K, T, Acc, Out, Row, PA]) Groups() *runtime.Groups { return &o.groups }
func (o *sessionOp[K, T, Acc, Out, Row, PA]) EndBatch() {
	o.gatherer.end()
	clear(o.late)
}

// decode reads a key's sessions into o.sessions: uvarint(n), then for each
// its start and end (varint Unix nanoseconds) and uvarint(len) and its
// accumulator's encoding.
func (o *sessionOp[K, T, Acc, Out, Row, PA]) decode(raw []byte) error {
	corrupt := fmt.Errorf("stored sessions are corrupt")
	o.sessions = o.sessions[:0]
	n, w := binary.Uvarint(raw)
	if w <= 0 {
		return corrupt
	}
	raw = raw[w:]
	for range n {
		start, w1 := binary.Varint(raw)
		if w1 <= 0 {
			return corrupt
		}
		end, w2 := binary.Varint(raw[w1:])
		if w2 <= 0 {
			return corrupt
		}
		acc, rest, err := readSizedAcc[Acc, PA](raw[w1+w2:], corrupt)
		if err != nil {
			return err
		}
		o.sessions = append(o.sessions, sessionWindow[Acc]{window: Window{Start: time.Unix(0, start).UTC(), End: time.Unix(0, end).UTC()}, acc: acc})
		raw = rest
	}
	return nil
}

func (o *sessionOp[K, T, Acc, Out, Row, PA]) encode() ([]byte, error) {
	b := binary.AppendUvarint(o.buf[:0], uint64(len(o.sessions)))
	for i := range o.sessions {
		s := &o.sessions[i]
		var err error
		b = binary.AppendVarint(b, s.window.Start.UnixNano())
		b = binary.AppendVarint(b, s.window.End.UnixNano())
		if b, err = appendSizedAcc[Acc, PA](b, &s.acc); err != nil {
			return nil, err
		}
	}
	o.buf = b
	return b, nil
}

// load reads the key's sessions; ok is false when it has none.
func (o *sessionOp[K, T, Acc, Out, Row, PA]) load(k *runtime.KeyState) (bool, error) {
	o.sessions = o.sessions[:0]
	return loadValue(k, o.decode)
}

// save writes the key's sessions (or deletes the row when none is left)
// and moves its timers from the ends before to the ends now.
func (o *sessionOp[K, T, Acc, Out, Row, PA]) save(k *runtime.KeyState, existed bool, before []time.Time) error {
	if o.info.TimeMode == runtime.EventTimeMode && *o.mode != Complete {
		now := make(map[time.Time]bool, len(o.sessions))
		for _, s := range o.sessions {
			now[s.window.End] = true
		}
		was := make(map[time.Time]bool, len(before))
		for _, end := range before {
			was[end] = true
			if !now[end] {
				if err := k.DeleteTimer(end.Add(-time.Nanosecond)); err != nil {
					return err
				}
			}
		}
		for end := range now {
			if !was[end] {
				if err := k.RegisterTimer(end.Add(-time.Nanosecond)); err != nil {
					return err
				}
			}
		}
	}
	return saveValue(k, existed, len(o.sessions) == 0, o.encode, "sessions")
}

func (o *sessionOp[K, T, Acc, Out, Row, PA]) endsOf() []time.Time {
	o.ends = o.ends[:0]
	for _, s := range o.sessions {
		o.ends = append(o.ends, s.window.End)
	}
	return slices.Clone(o.ends)
}

func (o *sessionOp[K, T, Acc, Out, Row, PA]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	rows, err := o.rowsOf(k.Batch(), group, rows)
	if err != nil {
		return err
	}
	existed, err := o.load(k)
	if err != nil {
		return err
	}
	before := o.endsOf()
	b := k.Batch()
	late := o.dropsLate != nil && o.dropsLate() && !b.LateWatermark.IsZero()
	// Each row's time, read once; the rows that are not late first, in
	// event-time order: a late row joins the sessions they made
	// (JoiningOpenSessions), the late rows in the order they came, as
	// Flink takes them (a late row may join a session a late row before
	// it extended).
	byTime := o.byTime[:0]
	for _, j := range rows {
		r := &o.rows[j]
		t, gap := o.eventTime(r), o.gapOf(r)
		byTime = append(byTime, timedRow{j: j, t: t, gap: gap, late: late && !t.Add(gap).After(b.LateWatermark)})
	}
	slices.SortStableFunc(byTime, func(x, y timedRow) int {
		switch {
		case o.joinOpen && x.late && y.late:
			return 0 // in the order they came
		case o.joinOpen && x.late != y.late:
			if x.late {
				return 1
			}
			return -1
		}
		return x.t.Compare(y.t)
	})
	o.byTime = byTime
	added := false
	for _, tr := range byTime {
		r, t, gap := &o.rows[tr.j], tr.t, tr.gap
		if gap <= 0 {
			continue // as Spark: a row without a session
		}
		end := t.Add(gap)
		if tr.late && !(o.joinOpen && o.touchesOpen(t, end)) {
			b.DropLate(o.index)
			o.late.send(group, t, gap)
			continue
		}
		o.sessions = append(o.sessions, sessionWindow[Acc]{window: Window{Start: t, End: end}, acc: o.agg.Add(o.agg.Zero(), r), changed: true})
		o.sessions = o.mergeSessions(o.sessions)
		added = true
	}
	if !added {
		return nil // every row late or without a gap: the key's sessions stay as they are
	}
	if *o.mode == Update {
		key := o.keys[group]
		for _, s := range o.sessions {
			if s.changed {
				r := o.output(s.window, key, o.agg.Result(s.acc))
				o.emitDown(&r)
			}
		}
	}
	return o.save(k, existed, before)
}

// timedRow is a row of a key's batch (its index), its event time and
// gap, and whether it is late.
type timedRow struct {
	j    int32
	t    time.Time
	gap  time.Duration
	late bool
}

// touchesOpen says [start, end) overlaps or touches one of the key's
// open sessions (those it has after the rows before).
func (o *sessionOp[K, T, Acc, Out, Row, PA]) touchesOpen(start, end time.Time) bool {
	for _, s := range o.sessions {
		if !s.window.Start.After(end) && !start.After(s.window.End) {
			return true
		}
	}
	return false
}

// mergeSessions sorts sessions by start and merges those that overlap or
// touch, as Spark's session windows do (a row at exactly a session's end
// extends it, and so does Flink's SESSION): each merge adds the later
// session's accumulator to the earlier's.
func (o *sessionOp[K, T, Acc, Out, Row, PA]) mergeSessions(sessions []sessionWindow[Acc]) []sessionWindow[Acc] {
	slices.SortStableFunc(sessions, func(a, b sessionWindow[Acc]) int { return a.window.Start.Compare(b.window.Start) })
	merged := sessions[:0]
	for _, s := range sessions {
		if n := len(merged); n > 0 && !s.window.Start.After(merged[n-1].window.End) {
			last := &merged[n-1]
			last.window.End = maxTime(last.window.End, s.window.End)
			last.acc = o.agg.Merge(last.acc, s.acc)
			// A merged session's window is neither's: Update writes it
			// (two stored sessions that touch, of an older checkpoint,
			// merge beside a row of their key elsewhere).
			last.changed = true
			continue
		}
		merged = append(merged, s)
	}
	return merged
}

// RowsDone writes, in Complete mode, every session of every key.
func (o *sessionOp[K, T, Acc, Out, Row, PA]) RowsDone(ctx context.Context, b *runtime.Batch) error {
	if *o.mode != Complete {
		return nil
	}
	var key K
	return b.ScanState(o.index, 0, func(k, value []byte) error {
		if err := o.codec.decode(k, &key); err != nil {
			return fmt.Errorf("a stored key does not decode: %w", unprefixed(err))
		}
		if err := o.decode(value); err != nil {
			return err
		}
		for _, s := range o.sessions {
			r := o.output(s.window, key, o.agg.Result(s.acc))
			o.emitDown(&r)
		}
		return nil
	})
}

// HandleTimer closes the key's sessions whose end the watermark has
// reached: in Append mode each is written, then evicted.
func (o *sessionOp[K, T, Acc, Out, Row, PA]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	var key K
	if err := o.codec.decode(k.Key(), &key); err != nil {
		return fmt.Errorf("a timer's key does not decode: %w", unprefixed(err))
	}
	existed, err := o.load(k)
	if err != nil {
		return err
	}
	before := o.endsOf()
	// Sessions that touch, as an older checkpoint may hold, close as one.
	o.sessions = o.mergeSessions(o.sessions)
	watermark := k.Batch().Watermark
	open := o.sessions[:0]
	for _, s := range o.sessions {
		if s.window.End.After(watermark) {
			open = append(open, s)
			continue
		}
		if *o.mode == Append {
			r := o.output(s.window, key, o.agg.Result(s.acc))
			o.emitDown(&r)
		}
	}
	o.sessions = open
	if err := o.save(k, existed, before); err != nil {
		return err
	}
	return k.DeleteTimer(expiry)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
