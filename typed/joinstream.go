package typed

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// TimeCondition bounds the event time of a join's left rows by the event
// time of the right rows they join (Spark's range condition, as in
// "left.time BETWEEN right.time - 5 seconds AND right.time + 10
// seconds"): a pair joins only when the difference left - right meets
// its bounds. Build one with TimeBetween, LeftAfter, LeftAtOrAfter,
// LeftBefore or LeftAtOrBefore, and combine them with And. The zero
// TimeCondition bounds nothing.
//
// Bounds are also what lets a join forget rows (see Join): a lower bound
// on the left's time, with a watermark on the right, lets the left side
// drop the rows the watermark has passed by more than it; an upper bound,
// with a watermark on the left, the right side's.
type TimeCondition struct {
	lower, upper timeBound
}

// timeBound is one bound of left - right: at least (or, strict, more
// than) offset for a lower bound, at most (or less than) for an upper.
type timeBound struct {
	set, strict bool
	offset      time.Duration
}

// TimeBetween joins a left row with a right row when right + lower <=
// left <= right + upper, as SQL's BETWEEN.
func TimeBetween(lower, upper time.Duration) TimeCondition {
	return TimeCondition{lower: timeBound{set: true, offset: lower}, upper: timeBound{set: true, offset: upper}}
}

// LeftAfter joins a left row with a right row when left > right + d.
func LeftAfter(d time.Duration) TimeCondition {
	return TimeCondition{lower: timeBound{set: true, strict: true, offset: d}}
}

// LeftAtOrAfter joins a left row with a right row when left >= right + d.
func LeftAtOrAfter(d time.Duration) TimeCondition {
	return TimeCondition{lower: timeBound{set: true, offset: d}}
}

// LeftBefore joins a left row with a right row when left < right + d.
func LeftBefore(d time.Duration) TimeCondition {
	return TimeCondition{upper: timeBound{set: true, strict: true, offset: d}}
}

// LeftAtOrBefore joins a left row with a right row when left <= right + d.
func LeftAtOrBefore(d time.Duration) TimeCondition {
	return TimeCondition{upper: timeBound{set: true, offset: d}}
}

// And is the condition that both c and o hold.
func (c TimeCondition) And(o TimeCondition) TimeCondition {
	tighter := func(a, b timeBound, lower bool) timeBound {
		switch {
		case !a.set:
			return b
		case !b.set:
			return a
		case a.offset == b.offset:
			a.strict = a.strict || b.strict
			return a
		case (a.offset > b.offset) == lower:
			return a
		}
		return b
	}
	return TimeCondition{lower: tighter(c.lower, o.lower, true), upper: tighter(c.upper, o.upper, false)}
}

// holds reports whether left and right times (Unix nanoseconds) meet c.
func (c TimeCondition) holds(left, right int64) bool {
	d := left - right
	if b := c.lower; b.set && (d < int64(b.offset) || b.strict && d == int64(b.offset)) {
		return false
	}
	if b := c.upper; b.set && (d > int64(b.offset) || b.strict && d == int64(b.offset)) {
		return false
	}
	return true
}

// rightRange returns the range of the times of right rows that a left
// row at left may join: [from, to], either open (unbounded).
func (c TimeCondition) rightRange(left int64) (from, to int64, hasFrom, hasTo bool) {
	// left - right >= lower  <=>  right <= left - lower
	if c.upper.set {
		from, hasFrom = addSat(left, -int64(c.upper.offset)), true
	}
	if c.lower.set {
		to, hasTo = addSat(left, -int64(c.lower.offset)), true
	}
	return
}

// leftRange returns the range of the times of left rows that a right row
// at right may join.
func (c TimeCondition) leftRange(right int64) (from, to int64, hasFrom, hasTo bool) {
	if c.lower.set {
		from, hasFrom = addSat(right, int64(c.lower.offset)), true
	}
	if c.upper.set {
		to, hasTo = addSat(right, int64(c.upper.offset)), true
	}
	return
}

// signed is d as an offset from a time: "+5s", "-5s", or "" for none.
func signed(d time.Duration) string {
	switch {
	case d > 0:
		return "+" + d.String()
	case d < 0:
		return d.String()
	}
	return ""
}

// String says the condition as SQL would.
func (c TimeCondition) String() string {
	s := ""
	if b := c.lower; b.set {
		op := ">="
		if b.strict {
			op = ">"
		}
		s = fmt.Sprintf("left %s right%s", op, signed(b.offset))
	}
	if b := c.upper; b.set {
		op := "<="
		if b.strict {
			op = "<"
		}
		if s != "" {
			s += " AND "
		}
		s += fmt.Sprintf("left %s right%s", op, signed(b.offset))
	}
	if s == "" {
		return "true"
	}
	return s
}

// strictness is Spark's adjustment of a state watermark for a bound that
// is not strict: a millisecond.
func (b timeBound) adjustment() int64 {
	if b.strict {
		return 0
	}
	return int64(time.Millisecond)
}

// JoinOption configures Join.
type JoinOption interface{ applyJoin(*joinConfig) }

type joinOptionFunc func(*joinConfig)

func (f joinOptionFunc) applyJoin(c *joinConfig) { f(c) }

type joinConfig struct {
	cond        TimeCondition
	hasCond     bool
	windows     *Windows
	leftTime    any // func(*L) time.Time
	rightTime   any // func(*R) time.Time
	leftFilter  any // func(*L) bool
	rightFilter any // func(*R) bool
	name        string
}

// JoinWithin joins only the rows whose event times meet cond (see
// TimeCondition): each side's event time is its WithWatermark's, or the
// one JoinLeftTime or JoinRightTime gives. Where cond lets a side forget
// its rows, the join's rows are at most as far behind the watermark as
// the sides' state watermarks (for TimeBetween(lower, upper), the most
// of -lower and upper, and a millisecond): stateful operators may follow
// it, and run with the watermark that far behind, as Spark's run with a
// join's output watermark.
func JoinWithin(cond TimeCondition) JoinOption {
	return joinOptionFunc(func(c *joinConfig) { c.cond, c.hasCond = c.cond.And(cond), true })
}

// JoinOnWindows joins the rows of the same key and the same window of
// their event times, as Spark's join on the key and window(time, ...):
// each row falls in its tumbling or sliding windows of w (Joined.Window
// says which), and, with a watermark, a window's rows are forgotten once
// the watermark reaches its end.
func JoinOnWindows(w Windows) JoinOption {
	return joinOptionFunc(func(c *joinConfig) { c.windows = &w })
}

// JoinLeftTime gives the event time of the left rows, for a left side
// without a watermark (WithWatermark gives it otherwise): rows a stateful
// operator wrote, as Spark's carry the watermark of an aggregation's
// window column. The side's rows are then forgotten, and in an outer
// join written unmatched, as a watermarked side's are, by the query's
// watermark and the time condition. (Spark keeps the rows of a side
// whose input has no watermark at all for ever, and never writes them
// unmatched.)
func JoinLeftTime[L any](t func(*L) time.Time) JoinOption {
	return joinOptionFunc(func(c *joinConfig) { c.leftTime = t })
}

// JoinRightTime gives the event time of the right rows, for a right side
// without a watermark, as JoinLeftTime does for the left.
func JoinRightTime[R any](t func(*R) time.Time) JoinOption {
	return joinOptionFunc(func(c *joinConfig) { c.rightTime = t })
}

// JoinLeftFilter keeps, of the left rows, those keep accepts; in a join
// that writes the left rows without a match (LeftOuter, FullOuter), a
// left row keep refuses is written at once, padded, and not kept, as
// Spark keeps a join condition on the preserved side's columns alone
// (otherwise, put a Filter before the join: Spark pushes the condition
// there).
func JoinLeftFilter[L any](keep func(*L) bool) JoinOption {
	return joinOptionFunc(func(c *joinConfig) { c.leftFilter = keep })
}

// JoinRightFilter is JoinLeftFilter for the right rows (RightOuter,
// FullOuter).
func JoinRightFilter[R any](keep func(*R) bool) JoinOption {
	return joinOptionFunc(func(c *joinConfig) { c.rightFilter = keep })
}

// JoinName names the join in progress reports, messages and the
// checkpoint. The default is the name of the function that makes its
// rows.
func JoinName(name string) JoinOption { return joinOptionFunc(func(c *joinConfig) { c.name = name }) }

// joinSide is one side of a join: 0 left, 1 right; also the side's state
// variable.
type joinSide = uint8

const (
	leftSide  joinSide = 0
	rightSide joinSide = 1
	// joinIndex is the variable of the rows by the time they are
	// forgotten: the time, the side, uvarint(len(key)), the key and the
	// row's suffix.
	joinIndex uint8 = 2
)

// Join joins two streams on their keys, as Spark's join of two streaming
// Datasets on equal keys: each side buffers its rows in state, per key,
// and each new row joins the rows of the other side's buffer with its key
// (and, with JoinWithin, whose event time meets the condition; with
// JoinOnWindows, of its window). row makes each output row of a Joined
// (see it for which side is nil when). Within a batch the left rows join
// the right side's buffer first, then the right rows join the left side's,
// this batch's rows included, so each pair is written once.
//
// how is Inner, LeftOuter, RightOuter, FullOuter or LeftSemi, with
// Spark's rules:
//
//   - A side forgets its rows once the watermark shows that no row of the
//     other side can join them any more: in a join on windows, a window's
//     rows once the watermark reaches the window's end (with a watermark
//     on either side); with a time condition, the left rows more than the
//     condition's lower bound behind the watermark (with a watermark on
//     the right side), and the right rows more than its upper bound ahead
//     of it (with one on the left), a non-strict bound keeping a
//     millisecond more, as Spark's. A side with neither keeps its rows
//     for ever.
//   - An outer join writes a row of the side it keeps that had no match,
//     padded, when the side forgets it, never before (at the end of a
//     bounded input with FlushEventTime at the latest), and never for a
//     row that had one: each buffered row carries whether it matched. So
//     LeftOuter (and LeftSemi) needs the left side to forget its rows,
//     RightOuter the right, FullOuter either; Start refuses one that
//     cannot, saying what is missing. A LeftSemi row is written once, at
//     its first match, and a row that matched on arrival is not kept.
//   - A row whose key has a null part (NullKey) joins nothing and is not
//     kept; a kept side's is written at once, padded, and another side's
//     dropped and counted, once, in the operator's progress (CustomMetrics
//     "numNullKeyRowsDropped"), as Kafka Streams does (one late for
//     every window it has counts as late instead).
//   - Rows at or before the watermark the batch before ran with (Spark's
//     late-event watermark) are late for a side with one:
//     dropped, counted in numRowsDroppedByWatermark, and sent to the
//     side's LateRows; in a join on windows, a row is late for each
//     window whose end is at or before the watermark.
//   - The query's output mode is Append.
//
// The join's state is partition-aware like every operator's: committed
// with each batch, changelogged, and moved with its partition by an App,
// whose inputs must be co-partitioned. Its progress reports name it
// symmetricHashJoin, as Spark's.
//
// row gets pointers to the join's rows, valid during the call: it must
// copy what it keeps, and change neither.
func Join[K comparable, L, R, Out any](left KeyedStream[K, L], right KeyedStream[K, R], how JoinType, row func(Joined[K, L, R]) Out, opts ...JoinOption) Stream[Out] {
	var cfg joinConfig
	for _, o := range opts {
		o.applyJoin(&cfg)
	}
	name := cfg.name
	if name == "" {
		name = funcName(row)
	}
	p := left.s.p.with(func(q *plan) {
		q.errs = append(q.errs, right.s.p.errs...)
		if !left.s.p.watermarked {
			q.watermarkDelay = right.s.p.watermarkDelay
		}
		q.watermarked = left.s.p.watermarked || right.s.p.watermarked
	})
	fail := func(format string, args ...any) {
		p = p.failed("streamgen: Join (%s): "+format, append([]any{name}, args...)...)
	}
	switch how {
	case Inner, LeftOuter, RightOuter, FullOuter, LeftSemi:
	case LeftAnti:
		fail("LeftAnti between two streams: a left row's lack of a match is never final (Spark: \"LeftAnti joins with a streaming DataFrame/Dataset on the right are not supported\")")
	default:
		fail("unknown join type %v", how)
	}
	leftTime, ok := cfg.leftTime.(func(*L) time.Time)
	if cfg.leftTime != nil && !ok {
		fail("JoinLeftTime takes a func(*%s) time.Time, not a %T", typeName[L](), cfg.leftTime)
	}
	rightTime, ok := cfg.rightTime.(func(*R) time.Time)
	if cfg.rightTime != nil && !ok {
		fail("JoinRightTime takes a func(*%s) time.Time, not a %T", typeName[R](), cfg.rightTime)
	}
	leftFilter, ok := cfg.leftFilter.(func(*L) bool)
	if cfg.leftFilter != nil && !ok {
		fail("JoinLeftFilter takes a func(*%s) bool, not a %T", typeName[L](), cfg.leftFilter)
	}
	rightFilter, ok := cfg.rightFilter.(func(*R) bool)
	if cfg.rightFilter != nil && !ok {
		fail("JoinRightFilter takes a func(*%s) bool, not a %T", typeName[R](), cfg.rightFilter)
	}
	leftMarked, rightMarked := left.s.p.watermarked, right.s.p.watermarked
	if cfg.windows != nil || cfg.hasCond {
		if !leftMarked && leftTime == nil {
			fail("the left side has no event time, which a join on windows or a time condition needs: add WithWatermark before it, or JoinLeftTime")
		}
		if !rightMarked && rightTime == nil {
			fail("the right side has no event time, which a join on windows or a time condition needs: add WithWatermark before it, or JoinRightTime")
		}
	}
	if w := cfg.windows; w != nil {
		if err := w.validate(); err != nil {
			fail("JoinOnWindows: %v", err)
		} else if w.kind == session || w.kind == timeDifference {
			fail("JoinOnWindows: %v windows are a key's own: join on tumbling or sliding windows", w)
		} else if w.kind == cumulate {
			fail("JoinOnWindows: %v: windows that share their start are not joined on: join on tumbling or sliding windows", w)
		}
	}
	// Which side forgets its rows, and by what.
	var ev joinEviction
	switch {
	case cfg.windows != nil && (leftMarked || rightMarked):
		ev.byWindow = true
		ev.left, ev.right = true, true
	case cfg.hasCond:
		ev.cond = cfg.cond
		ev.left = rightMarked && cfg.cond.lower.set
		ev.right = leftMarked && cfg.cond.upper.set
	}
	sparkWhy := fmt.Sprintf("(Spark: \"Stream-stream %v join between two streaming DataFrame/Datasets is not supported without a watermark in the join keys, or a watermark on the nullable side and an appropriate range condition\")", how)
	switch {
	case (how == LeftOuter || how == LeftSemi) && !ev.left:
		fail("%v needs the left side to forget its rows, or it would never write their padded rows: join on windows (JoinOnWindows) with a watermark, or give the right side a watermark and a time condition that bounds the left's time from below (JoinWithin with LeftAfter, LeftAtOrAfter or TimeBetween) %s", how, sparkWhy)
	case how == RightOuter && !ev.right:
		fail("RightOuter needs the right side to forget its rows, or it would never write their padded rows: join on windows (JoinOnWindows) with a watermark, or give the left side a watermark and a time condition that bounds the left's time from above (JoinWithin with LeftBefore, LeftAtOrBefore or TimeBetween) %s", sparkWhy)
	case how == FullOuter && !ev.left && !ev.right:
		fail("FullOuter needs a side that forgets its rows: join on windows (JoinOnWindows) with a watermark, or give the sides watermarks and a time condition (JoinWithin) %s", sparkWhy)
	}
	keyCodec, err := joinKeyCodec(left.codec, cfg.windows)
	if err != nil {
		fail("%v", err)
	}
	leftRows, err := newValueCodec[L]()
	if err != nil {
		fail("left rows: %v", unprefixed(err))
	}
	rightRows, err := newValueCodec[R]()
	if err != nil {
		fail("right rows: %v", unprefixed(err))
	}
	const kind = "symmetricHashJoin"
	// A join on a time condition whose sides forget their rows writes
	// rows no older than the sides' state watermarks: the operators after
	// it run that far behind (Spark's produceOutputWatermark). One whose
	// sides forget nothing may write rows of any age: nothing may follow.
	opInfo := operatorInfo{kind: kind, function: name, mode: Append, watermarked: p.watermarked, join: true,
		timeJoin: cfg.hasCond && !ev.left && !ev.right}
	if cfg.windows != nil {
		opInfo.late = cfg.windows.lateFor
	}
	return once(Stream[Out]{p: p, attach: func(c *compiler, emit func(*Out)) {
		op := &joinOp[K, L, R, Out]{c: c, how: how, row: row, emitDown: emit, ev: ev, cond: cfg.cond, windows: cfg.windows,
			keyCodec: keyCodec, leftRows: leftRows, rightRows: rightRows, null: nullCheck[K](),
			leftKey: left.key, rightKey: right.key, leftTime: leftTime, rightTime: rightTime,
			leftFilter: leftFilter, rightFilter: rightFilter,
			leftMarked: leftMarked, rightMarked: rightMarked}
		op.info = runtime.OperatorInfo{
			Kind: kind, Name: name, OutputMode: Append.String(),
			KeyType: keyCodec.typeName, LegacyKeyType: keyCodec.legacyTypeName, UseKeys: keyCodec.useKeys, ParseKey: keyCodec.parseJSON, Key: keyCodec.schema,
			Windows: keyCodec.windows, Timeout: how.String() + " " + ev.String(),
			States: []runtime.StateInfo{
				{Name: "left", Kind: "list", Encoding: runtime.EncodingJoinBuffer, Schema: leftRows.schema, ValueType: leftRows.typeName,
					NoMatchFlag: !how.readsLeftFlags()},
				{Name: "right", Kind: "list", Encoding: runtime.EncodingJoinBuffer, Schema: rightRows.schema, ValueType: rightRows.typeName,
					NoMatchFlag: !how.keepsRight()},
				// The rows of both sides by the time they are forgotten.
				{Name: "byTime", Kind: "value", Encoding: runtime.EncodingByEventTime, Index: true},
			},
			DropsLateRows: leftMarked || rightMarked,
		}
		if cfg.hasCond {
			op.info.OutputDelay = ev.outputDelay()
		}
		if ev.left || ev.right {
			op.info.NoData = runtime.NoDataOnWatermark
		}
		timed := cfg.windows != nil || cfg.hasCond
		op.index = c.addOperator(func() {
			if c.attachFrom(func() { left.s.attach(c, op.addLeft) }) && timed && leftTime == nil {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its left rows", "give their time with JoinLeftTime"))
			}
			if c.attachFrom(func() { right.s.attach(c, op.addRight) }) && timed && rightTime == nil {
				c.errs = append(c.errs, noEventTime(kind+" ("+name+")", "its right rows", "give their time with JoinRightTime"))
			}
		}, op, opInfo)
	}})
}

// typeName names T for messages.
func typeName[T any]() string { return fmt.Sprintf("%T", *new(T)) }

// joinEviction is when a join's sides forget their rows.
type joinEviction struct {
	// left and right say which sides forget; byWindow, that they forget
	// a window's rows at its end, otherwise by cond's bounds.
	left, right bool
	byWindow    bool
	cond        TimeCondition
}

// String says the rule, for the checkpoint.
func (e joinEviction) String() string {
	switch {
	case e.byWindow:
		return "windows"
	case e.left || e.right:
		return e.cond.String()
	}
	return "unbounded"
}

// addSat is a + b, saturated at the int64 range (the end of time plus an
// offset stays the end of time).
func addSat(a, b int64) int64 {
	c := a + b
	switch {
	case b > 0 && c < a:
		return 1<<63 - 1
	case b < 0 && c > a:
		return -1 << 63
	}
	return c
}

// outputDelay is how far behind the watermark W the rows a join on a time
// condition writes may be: W less the least of the state watermarks of
// the sides that forget their rows (W + lower less the millisecond of a
// bound that is not strict for the left, W - upper less it for the
// right; see evictAt), as Spark's output watermark is the least of the
// sides' state watermarks and the input's.
func (e joinEviction) outputDelay() time.Duration {
	var d time.Duration
	if e.left {
		d = max(d, time.Duration(e.cond.lower.adjustment())-e.cond.lower.offset)
	}
	if e.right {
		d = max(d, e.cond.upper.offset+time.Duration(e.cond.upper.adjustment()))
	}
	return d
}

// evictAt returns the instant of the timer that forgets a row of side at
// (Unix nanoseconds) in window end (byWindow), and whether the side
// forgets it at all: the timer fires once the watermark is strictly after
// it, that is, once the row is at or before the side's state watermark.
func (e joinEviction) evictAt(side joinSide, at, end int64) (int64, bool) {
	switch {
	case e.byWindow:
		return end - 1, true
	case side == leftSide && e.left:
		// Left rows at or before W + lower (less a millisecond when not
		// strict) go: W >= at - lower (+ the millisecond).
		return addSat(addSat(at, -int64(e.cond.lower.offset)), e.cond.lower.adjustment()-1), true
	case side == rightSide && e.right:
		// Right rows at or before W - upper (less a millisecond) go.
		return addSat(addSat(at, int64(e.cond.upper.offset)), e.cond.upper.adjustment()-1), true
	}
	return 0, false
}

// joinKey is the key of a join on windows: the window's start (Unix
// nanoseconds), then the rows' key.
type joinKey[K comparable] struct {
	start int64
	key   K
}

// joinKeyCodec encodes a join's keys: K's, after the window's start and
// end for a join on windows of size (the layout of a windowed
// aggregation's keys, which tools show as {"window": ..., "key": ...}).
func joinKeyCodec[K comparable](kc keyCodec[K], windows *Windows) (keyCodec[joinKey[K]], error) {
	if kc.encode == nil {
		return keyCodec[joinKey[K]]{}, fmt.Errorf("the key type %s cannot be encoded", typeName[K]())
	}
	if windows == nil {
		c := wrap(kc, "",
			func(b []byte, k *joinKey[K]) ([]byte, error) { return kc.encode(b, &k.key) },
			func(b []byte, k *joinKey[K]) error { return kc.decode(b, &k.key) })
		c.parse = kc.parseJSON
		return c, nil
	}
	size := int64(windows.size)
	c := wrap(kc, "window+",
		func(b []byte, k *joinKey[K]) ([]byte, error) {
			return kc.encode(appendWindow(b, k.start, size), &k.key)
		},
		func(b []byte, k *joinKey[K]) (err error) {
			if k.start, err = readWindow(b, size); err != nil {
				return err
			}
			return kc.decode(b[16:], &k.key)
		})
	c.windows = windows.meta()
	c.parse = windowedParse(kc, c.windows)
	return c, nil
}

// sideMetric names the figure of the rows a side keeps, in the join's
// progress (CustomMetrics).
var sideMetric = [2]string{"numLeftRows", "numRightRows"}

// joinRow is a row of one side gathered for a batch: its event time
// (Unix nanoseconds; 0 without one) and its window's end (a join on
// windows).
type joinRow[T any] struct {
	at, end int64
	row     T
}

// joinOp is a stream-stream join of one query.
type joinOp[K comparable, L, R, Out any] struct {
	c        *compiler
	index    int
	info     runtime.OperatorInfo
	how      JoinType
	row      func(Joined[K, L, R]) Out
	emitDown func(*Out)
	out      Out // the row being written
	ev       joinEviction
	cond     TimeCondition
	windows  *Windows
	keyCodec keyCodec[joinKey[K]]
	// leftRows and rightRows encode the sides' rows in state.
	leftRows  valueCodec[L]
	rightRows valueCodec[R]
	null      func(*K) bool
	nulls     nullKeys // the batch's rows dropped for a null key
	leftKey   func(*L) K
	rightKey  func(*R) K
	leftTime  func(*L) time.Time
	rightTime func(*R) time.Time
	// leftFilter and rightFilter are the sides' own conditions (nil:
	// none).
	leftFilter  func(*L) bool
	rightFilter func(*R) bool
	// leftMarked and rightMarked say which sides have a watermark.
	leftMarked, rightMarked bool

	// The batch's rows: groups by key, each row a reference (>= 0: into
	// lefts; < 0: -1-i into rights), in arrival order.
	groups runtime.Groups
	group  map[joinKey[K]]int32
	keys   []joinKey[K]
	keyBuf []byte
	refs   []int32
	lefts  []joinRow[L]
	rights []joinRow[R]

	// Scratch of one call.
	suffix, value, idx []byte
	found              []joinMatch
	arena              foundArena
	from, to           []byte
	due                []byte
	dueEnds            []int32
	// pending are the key's rows of the call that the buffers will hold;
	// matchedNow the committed rows the batch marked matched (by
	// matchedKey), which the committed state it reads does not show.
	pending    []pendingRow
	matchedNow map[string]struct{}
	mk         []byte
}

// joinMatch is a row of a side's buffer found by a scan: its suffix and
// value, in the op's arena.
type joinMatch struct {
	suffix, value []byte
}

// foundArena holds the bytes of the rows a scan found.
type foundArena struct {
	buf  []byte
	ends []int32 // suffix end, value end, per row
}

func (o *joinOp[K, L, R, Out]) Info() runtime.OperatorInfo { return o.info }
func (o *joinOp[K, L, R, Out]) Groups() *runtime.Groups    { return &o.groups }

// EndBatch drops the batch's rows.
func (o *joinOp[K, L, R, Out]) EndBatch() {
	o.nulls = nullKeys{}
	clear(o.matchedNow)
	clear(o.lefts)
	clear(o.rights)
	clear(o.keys)
	o.lefts, o.rights, o.keys, o.refs = o.lefts[:0], o.rights[:0], o.keys[:0], o.refs[:0]
	if len(o.group) > 1<<21 {
		o.group = nil
	} else {
		clear(o.group)
	}
}

// addLeft gathers a left row, or writes it at once, padded, when it
// fails the left side's own condition or its key is null and the join
// keeps the left rows without a match.
func (o *joinOp[K, L, R, Out]) addLeft(l *L) {
	at := o.c.eventTime
	if o.leftTime != nil {
		at = o.leftTime(l)
	}
	k := o.leftKey(l)
	null := o.null != nil && o.null(&k)
	excluded := o.leftFilter != nil && !o.leftFilter(l) || null
	ns := runtime.TimedNanos(at)
	if o.leftTime != nil && o.c.outOfRange(ns) { // (a pushed row's was judged)
		return
	}
	counted := false
	o.each(ns, o.leftMarked, func(start, end int64) {
		switch {
		case !excluded:
			o.lefts = appendDoubling(o.lefts, &joinRow[L]{at: ns, end: end, row: *l})
			o.addRef(joinKey[K]{start: start, key: k}, int32(len(o.lefts)-1))
		case o.how.keepsLeft():
			o.emitRow(Joined[K, L, R]{Key: k, Left: l, Window: o.window(&joinKey[K]{start: start})})
		case null && !counted:
			o.nulls.rows++ // once a row, however many windows it has
			counted = true
		}
	})
}

// addRight gathers a right row, or writes it at once, padded (see
// addLeft).
func (o *joinOp[K, L, R, Out]) addRight(r *R) {
	at := o.c.eventTime
	if o.rightTime != nil {
		at = o.rightTime(r)
	}
	k := o.rightKey(r)
	null := o.null != nil && o.null(&k)
	excluded := o.rightFilter != nil && !o.rightFilter(r) || null
	ns := runtime.TimedNanos(at)
	if o.rightTime != nil && o.c.outOfRange(ns) { // (a pushed row's was judged)
		return
	}
	counted := false
	o.each(ns, o.rightMarked, func(start, end int64) {
		switch {
		case !excluded:
			o.rights = appendDoubling(o.rights, &joinRow[R]{at: ns, end: end, row: *r})
			o.addRef(joinKey[K]{start: start, key: k}, -int32(len(o.rights)))
		case o.how.keepsRight():
			o.emitRow(Joined[K, L, R]{Key: k, Right: r, Window: o.window(&joinKey[K]{start: start})})
		case null && !counted:
			o.nulls.rows++
			counted = true
		}
	})
}

// each calls fn once for a row at ns, or, in a join on windows, once per
// window of it that is not late (a side with a watermark counts a row
// late for a window whose end is at or before the watermark; a row late
// for all its windows never gets here).
func (o *joinOp[K, L, R, Out]) each(ns int64, marked bool, fn func(start, end int64)) {
	if o.windows == nil {
		fn(0, 0)
		return
	}
	b := o.c.batch
	late := b.LateWatermarkOf(o.index)
	wm := late.UnixNano()
	o.windows.assign(ns, func(start, end int64) {
		if marked && !late.IsZero() && end <= wm {
			b.DropLate(o.index)
			return
		}
		fn(start, end)
	})
}

// addRef adds a row reference to its key's group.
func (o *joinOp[K, L, R, Out]) addRef(k joinKey[K], ref int32) {
	g, ok := o.group[k]
	if !ok {
		o.keys = appendDoubling(o.keys, &k)
		var err error
		if o.keyBuf, err = o.keyCodec.encode(o.keyBuf[:0], &o.keys[len(o.keys)-1]); err != nil {
			panic(userPanic{fmt.Errorf("streamgen: symmetricHashJoin (%s): key %v: %w", o.info.Name, k.key, unprefixed(err))})
		}
		if o.group == nil {
			o.group = make(map[joinKey[K]]int32)
		}
		var added bool
		if g, added = o.keyCodec.group(&o.groups, o.keyBuf); !added {
			o.keys = o.keys[:len(o.keys)-1]
		}
		if k == k {
			o.group[k] = g
		}
	}
	o.groups.AddRow(g)
	o.refs = append(o.refs, ref)
}

// window returns the window of a key of a join on windows (zero
// otherwise).
func (o *joinOp[K, L, R, Out]) window(k *joinKey[K]) Window {
	if o.windows == nil {
		return Window{}
	}
	return Window{Start: time.Unix(0, k.start).UTC(), End: time.Unix(0, k.start+int64(o.windows.size)).UTC()}
}

// rowSuffix is the suffix of a buffered row: its time, then the batch id
// and its number in the batch.
func rowSuffix(b []byte, at, batch int64, n int32) []byte {
	b = runtime.AppendTimedKey(b, at)
	b = binary.BigEndian.AppendUint64(b, uint64(batch))
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

// rowTime reads the time of a buffered row from its suffix.
func rowTime(suffix []byte) int64 { return int64(binary.BigEndian.Uint64(suffix) ^ 1<<63) }

// scan collects the committed rows of side's buffer for key k whose time
// may join a row: all, or those in [from, to] (ns, either end open), into
// o.found. The batch's own rows of the key are the call's (pending), and
// the committed rows it marked matched are in o.matchedNow.
func (o *joinOp[K, L, R, Out]) scan(k *runtime.KeyState, side joinSide, from, to int64, hasFrom, hasTo bool) error {
	o.found = o.found[:0]
	var lo, hi []byte
	if hasFrom {
		o.from = runtime.AppendTimedKey(o.from[:0], from)
		lo = o.from
	}
	if hasTo && to != 1<<63-1 {
		o.to = runtime.AppendTimedKey(o.to[:0], to+1) // exclusive
		hi = o.to
	}
	a := &o.arena
	a.buf, a.ends = a.buf[:0], a.ends[:0]
	err := k.ScanCommitted(side, lo, hi, func(suffix, value []byte) error {
		if len(suffix) != 20 || len(value) == 0 {
			return fmt.Errorf("a join row of %d bytes under a %d-byte suffix", len(value), len(suffix))
		}
		a.buf = append(a.buf, suffix...)
		a.ends = append(a.ends, int32(len(a.buf)))
		a.buf = append(a.buf, value...)
		a.ends = append(a.ends, int32(len(a.buf)))
		return nil
	})
	if err != nil {
		return err
	}
	// The rows as slices of the arena, once it has stopped growing.
	start := int32(0)
	for i := 0; i < len(a.ends); i += 2 {
		s, v := a.ends[i], a.ends[i+1]
		o.found = append(o.found, joinMatch{suffix: a.buf[start:s:s], value: a.buf[s:v:v]})
		start = v
	}
	return nil
}

// pendingRow is a row of the key's call that the buffers will hold: the
// side, the row's number in the batch, whether it matched.
type pendingRow struct {
	side    joinSide
	n       int32 // its number in the batch
	ref     int32 // into lefts or rights
	matched bool
}

// matchedKey names a committed row the batch marked matched: the side,
// the encoded key and the row's suffix.
func matchedKey(b []byte, side joinSide, key, suffix []byte) []byte {
	b = append(b, side)
	b = binary.AppendUvarint(b, uint64(len(key)))
	return append(append(b, key...), suffix...)
}

// wasMatched reports whether a committed row had a match, before the batch
// or in it.
func (o *joinOp[K, L, R, Out]) wasMatched(side joinSide, key []byte, m joinMatch) bool {
	if m.value[0]&runtime.JoinRowMatched != 0 {
		return true
	}
	if len(o.matchedNow) == 0 {
		return false
	}
	o.mk = matchedKey(o.mk[:0], side, key, m.suffix)
	_, ok := o.matchedNow[string(o.mk)]
	return ok
}

// markMatched marks a committed row matched, when the join reads the
// flag (tracked: a side whose unmatched rows are written, or the left of
// a LeftSemi join): in the batch's writes, and in o.matchedNow for the
// batch's later reads of the committed state. Spark rewrites a row to
// flag it whatever the join's type; where nothing reads the flag (an
// inner join), that rewrite nearly doubled the join's state writes in
// q23, whose rows mostly meet their match after they came
// (StateInfo.NoMatchFlag).
func (o *joinOp[K, L, R, Out]) markMatched(k *runtime.KeyState, side joinSide, m joinMatch, tracked bool) error {
	if !tracked {
		return nil
	}
	m.value[0] |= runtime.JoinRowMatched
	if err := k.Put(side, m.suffix, m.value); err != nil {
		return err
	}
	if o.matchedNow == nil {
		o.matchedNow = map[string]struct{}{}
	}
	o.mk = matchedKey(o.mk[:0], side, k.Key(), m.suffix)
	o.matchedNow[string(o.mk)] = struct{}{}
	return nil
}

// HandleRows joins the key's rows of the batch, as Spark does: the left
// rows with the right side's buffer, then the right rows with the left
// side's, which then holds the batch's left rows; then the buffers take
// the rows that may still join (the batch's rows that the watermark
// already forgets are counted as kept and forgotten, and written padded
// when their side is kept and they had no match, without a write).
//
// The committed buffers are read as committed, and the batch's own rows
// of the key are the call's (pending): so the batch's writes need no index
// for its reads.
func (o *joinOp[K, L, R, Out]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	b := k.Batch()
	key := o.keys[group]
	win := o.window(&key)
	wm := b.Watermark.UnixNano()
	o.pending = o.pending[:0]
	for _, n := range rows {
		if ref := o.refs[n]; ref >= 0 {
			if err := o.joinLeft(k, &key, win, n, ref); err != nil {
				return err
			}
		}
	}
	for _, n := range rows {
		if ref := o.refs[n]; ref < 0 {
			if err := o.joinRight(k, &key, win, n, -1-ref, wm); err != nil {
				return err
			}
		}
	}
	for i := range o.pending {
		if err := o.keep(k, b, &key, win, &o.pending[i], wm); err != nil {
			return err
		}
	}
	return nil
}

// joinLeft joins a left row with the right side's buffer.
func (o *joinOp[K, L, R, Out]) joinLeft(k *runtime.KeyState, key *joinKey[K], win Window, n, ref int32) error {
	l := &o.lefts[ref]
	from, to, hasFrom, hasTo := o.cond.rightRange(l.at)
	if err := o.scan(k, rightSide, from, to, hasFrom, hasTo); err != nil {
		return err
	}
	matched := false
	for _, m := range o.found {
		if !o.cond.holds(l.at, rowTime(m.suffix)) {
			continue
		}
		matched = true
		if o.how == LeftSemi {
			break
		}
		var r R
		if err := o.rightRows.decode(m.value[1:], &r); err != nil {
			return k.Fail(fmt.Errorf("a right row in state does not decode: %w", unprefixed(err)))
		}
		o.emitRow(Joined[K, L, R]{Key: key.key, Left: &l.row, Right: &r, Window: win})
		if !o.wasMatched(rightSide, k.Key(), m) {
			if err := o.markMatched(k, rightSide, m, o.how.keepsRight()); err != nil {
				return err
			}
		}
	}
	if o.how == LeftSemi && matched {
		o.emitRow(Joined[K, L, R]{Key: key.key, Left: &l.row, Window: win})
		return nil // written once: not kept
	}
	o.pending = append(o.pending, pendingRow{side: leftSide, n: n, ref: ref, matched: matched})
	return nil
}

// joinRight joins a right row with the left side's buffer: its committed
// rows, then the batch's (pending).
func (o *joinOp[K, L, R, Out]) joinRight(k *runtime.KeyState, key *joinKey[K], win Window, n, ref int32, wm int64) error {
	r := &o.rights[ref]
	from, to, hasFrom, hasTo := o.cond.leftRange(r.at)
	if err := o.scan(k, leftSide, from, to, hasFrom, hasTo); err != nil {
		return err
	}
	matched := false
	for _, m := range o.found {
		if !o.cond.holds(rowTime(m.suffix), r.at) {
			continue
		}
		matched = true
		wasMatched := o.wasMatched(leftSide, k.Key(), m)
		if o.how == LeftSemi && wasMatched {
			continue // written at its first match
		}
		var l L
		if err := o.leftRows.decode(m.value[1:], &l); err != nil {
			return k.Fail(fmt.Errorf("a left row in state does not decode: %w", unprefixed(err)))
		}
		o.emitJoined(key, &l, &r.row, win)
		if !wasMatched {
			if err := o.markMatched(k, leftSide, m, o.how.readsLeftFlags()); err != nil {
				return err
			}
		}
	}
	for i := range o.pending {
		p := &o.pending[i]
		if p.side != leftSide || !o.cond.holds(o.lefts[p.ref].at, r.at) {
			continue
		}
		matched = true
		if o.how == LeftSemi && p.matched {
			continue
		}
		o.emitJoined(key, &o.lefts[p.ref].row, &r.row, win)
		p.matched = true
	}
	if at, ok := o.ev.evictAt(rightSide, r.at, r.end); ok && wm > at && !(o.how.keepsRight() && !matched) {
		return nil // forgotten in this batch: not kept
	}
	o.pending = append(o.pending, pendingRow{side: rightSide, n: n, ref: ref, matched: matched})
	return nil
}

// emitJoined writes the row of a left and a right row (the left alone, in
// a LeftSemi join).
func (o *joinOp[K, L, R, Out]) emitJoined(key *joinKey[K], l *L, r *R, win Window) {
	j := Joined[K, L, R]{Key: key.key, Left: l, Right: r, Window: win}
	if o.how == LeftSemi {
		j.Right = nil
	}
	o.emitRow(j)
}

// keep puts a row of the batch in its side's buffer, indexed by the time
// it is forgotten; one the watermark already forgets is counted as kept
// and forgotten, and written padded when its side is kept and it had no
// match.
func (o *joinOp[K, L, R, Out]) keep(k *runtime.KeyState, b *runtime.Batch, key *joinKey[K], win Window, p *pendingRow, wm int64) error {
	var at, end int64
	if p.side == leftSide {
		at, end = o.lefts[p.ref].at, o.lefts[p.ref].end
	} else {
		at, end = o.rights[p.ref].at, o.rights[p.ref].end
	}
	k.Updated(true)
	t, forgets := o.ev.evictAt(p.side, at, end)
	if forgets && wm > t {
		if o.removalCounted(p.side) {
			k.Removed()
		} else {
			k.Dropped()
		}
		if !p.matched && (p.side == leftSide && o.how.keepsLeft() || p.side == rightSide && o.how.keepsRight()) {
			j := Joined[K, L, R]{Key: key.key, Window: win}
			if p.side == leftSide {
				j.Left = &o.lefts[p.ref].row
			} else {
				j.Right = &o.rights[p.ref].row
			}
			o.emitRow(j)
		}
		return nil
	}
	o.suffix = rowSuffix(o.suffix[:0], at, b.ID, p.n)
	flag := byte(0)
	if p.matched {
		flag = runtime.JoinRowMatched
	}
	var err error
	o.value = append(o.value[:0], flag)
	if p.side == leftSide {
		o.value, err = o.leftRows.encode(o.value, &o.lefts[p.ref].row)
	} else {
		o.value, err = o.rightRows.encode(o.value, &o.rights[p.ref].row)
	}
	if err != nil {
		return k.Fail(fmt.Errorf("key %v: %w", key.key, unprefixed(err)))
	}
	if err := k.Put(p.side, o.suffix, o.value); err != nil {
		return err
	}
	k.AddMetric(sideMetric[p.side], 1)
	if !forgets {
		return nil
	}
	// Indexed by the time it is forgotten: once the watermark reaches it
	// (evictAt's instant is a timer's, a nanosecond before).
	o.idx = runtime.AppendTimedKey(o.idx[:0], addSat(t, 1))
	o.idx = append(o.idx, p.side)
	o.idx = binary.AppendUvarint(o.idx, uint64(len(k.Key())))
	o.idx = append(append(o.idx, k.Key()...), o.suffix...)
	return b.PutTimed(o.index, joinIndex, o.idx)
}

// RowsDone forgets, after the batch's rows, the committed rows of each
// side that the watermark has passed, read from the index of rows by the
// time they are forgotten (which the loop then removes, one range): those
// of a kept side that had no match are written, padded. It first adds
// the rows the batch dropped for a null key to the operator's figure.
func (o *joinOp[K, L, R, Out]) RowsDone(ctx context.Context, b *runtime.Batch) error {
	o.nulls.done(b, o.index)
	if !o.ev.left && !o.ev.right || b.Watermark.IsZero() {
		return nil
	}
	// The index entries due, each past its time: the side, uvarint(len
	// (key)), the key and the row's suffix, one after another.
	o.due, o.dueEnds = o.due[:0], o.dueEnds[:0]
	err := b.ScanTimedThrough(o.index, joinIndex, b.Watermark, func(k []byte) error {
		if len(k) < 9 {
			return fmt.Errorf("a join index entry of %d bytes", len(k))
		}
		o.due = append(o.due, k[8:]...)
		o.dueEnds = append(o.dueEnds, int32(len(o.due)))
		return nil
	})
	if err != nil {
		return err
	}
	start := int32(0)
	for i, end := range o.dueEnds {
		if i%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		e := o.due[start:end]
		start = end
		side := e[0]
		n, w := binary.Uvarint(e[1:])
		if w <= 0 || uint64(len(e)-1-w) < n+20 {
			return fmt.Errorf("a join index entry with a bad key length")
		}
		if err := o.forget(b, side, e[1+w:1+w+int(n)], e[1+w+int(n):]); err != nil {
			return err
		}
	}
	return nil
}

// forget removes a committed row of side of the encoded key, writing it
// padded when its side is kept and it had no match (before the batch, or
// in it).
func (o *joinOp[K, L, R, Out]) forget(b *runtime.Batch, side joinSide, key, suffix []byte) error {
	k := b.KeyFor(o.index, key)
	if side == leftSide && o.how.keepsLeft() || side == rightSide && o.how.keepsRight() {
		raw, ok, err := k.GetCommitted(side, suffix)
		if err != nil || !ok {
			return err
		}
		if !o.wasMatched(side, key, joinMatch{suffix: suffix, value: raw}) {
			var jk joinKey[K]
			if err := o.keyCodec.decode(key, &jk); err != nil {
				return k.Fail(fmt.Errorf("a join key in state does not decode: %w", unprefixed(err)))
			}
			j := Joined[K, L, R]{Key: jk.key, Window: o.window(&jk)}
			if side == leftSide {
				var l L
				if err := o.leftRows.decode(raw[1:], &l); err != nil {
					return k.Fail(fmt.Errorf("a left row in state does not decode: %w", unprefixed(err)))
				}
				j.Left = &l
			} else {
				var r R
				if err := o.rightRows.decode(raw[1:], &r); err != nil {
					return k.Fail(fmt.Errorf("a right row in state does not decode: %w", unprefixed(err)))
				}
				j.Right = &r
			}
			o.emitRow(j)
		}
	}
	// Every row indexed is in its side's buffer until forgotten here: a
	// blind delete.
	if err := k.Delete(side, suffix); err != nil {
		return err
	}
	k.AddMetric(sideMetric[side], -1)
	if o.removalCounted(side) {
		k.Removed()
	} else {
		k.Dropped()
	}
	return nil
}

// HandleTimer is not called: the join sets no timers.
func (o *joinOp[K, L, R, Out]) HandleTimer(context.Context, *runtime.KeyState, time.Time) error {
	return nil
}

// removalCounted says whether the rows side forgets count as removed in
// the progress report, as Spark counts them: those it removes in its last
// step only, not those it removes as it writes them padded.
func (o *joinOp[K, L, R, Out]) removalCounted(side joinSide) bool {
	switch o.how {
	case Inner, LeftSemi:
		return true
	case LeftOuter:
		return side == rightSide
	case RightOuter:
		return side == leftSide
	}
	return false
}

// emitRow writes the row of j to the stages after the join, which get a
// pointer valid during the call (see Map): one variable holds each row.
func (o *joinOp[K, L, R, Out]) emitRow(j Joined[K, L, R]) {
	o.out = o.row(j)
	o.emitDown(&o.out)
}
