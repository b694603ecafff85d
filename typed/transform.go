package typed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"sync"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// TransformWithState applies a stateful processor to a keyed stream, as
// Spark's transformWithState: see StatefulProcessor. timeMode is the kind
// of time of its timers and TTLs' clock (TimeModeEventTime needs a
// watermark); mode is Append or Update, in a query of either mode (as
// Spark's UnsupportedOperationChecker allows). In TimeModeEventTime, late
// rows are dropped before the processor and counted; in the other modes
// every row reaches it, watermark or not, as in Spark 4. Options:
// Concurrency, ProcessorInitialState.
func TransformWithState[K comparable, In, Out any](
	ks KeyedStream[K, In], p StatefulProcessor[K, In, Out], timeMode TimeMode, mode OutputMode, opts ...ProcessorOption,
) Stream[Out] {
	cfg := processorConfig{concurrency: 1}
	for _, o := range opts {
		o.applyProcessor(&cfg)
	}
	var initial []initialState[K]
	var optErrs []error
	for _, i := range cfg.initial {
		init, ok := i.(initialState[K])
		if !ok {
			var k K
			optErrs = append(optErrs, fmt.Errorf("ProcessorInitialState: its keys are not of the grouping key's type %T", k))
			continue
		}
		initial = append(initial, init)
	}
	name := fmt.Sprintf("%T", p)
	if n, ok := p.(interface{ operatorName() string }); ok {
		name = n.operatorName()
	}
	opInfo := operatorInfo{kind: "transformWithState", function: name, mode: mode, watermarked: ks.s.p.watermarked,
		needsWatermark: timeMode == TimeModeEventTime}
	judge, _ := p.(lateJudge)
	if judge != nil && judge.judgesLateRows() {
		// Rows at or before the watermark reach the processor, which
		// drops the late ones itself.
		opInfo.late = func(time.Time, time.Time) int64 { return 0 }
	} else {
		judge = nil
	}
	opInfo.prepare = func(context.Context) error {
		errs := optErrs
		if err := cfg.late.check(); err != nil {
			errs = append(errs, err)
		}
		if cfg.concurrency < 1 {
			errs = append(errs, fmt.Errorf("Concurrency(%d): at least 1", cfg.concurrency))
		}
		var pairs []Pair[K, struct{}]
		for _, init := range initial {
			for _, k := range init.keys {
				pairs = append(pairs, Pair[K, struct{}]{Key: k})
			}
		}
		// A key may come more than once: each of its pairs is handed to
		// the processor in turn, as Spark 4 does (SPARK-50152).
		if err := checkInitial(ks.codec, pairs, false); err != nil {
			errs = append(errs, err)
		}
		return errors.Join(errs...)
	}
	return once(Stream[Out]{p: ks.s.p, attach: func(c *compiler, emit func(*Out)) {
		op := &processorOp[K, In, Out]{gatherer: newGatherer(c, ks, "transformWithState ("+name+")"), p: p, cfg: cfg, initial: initial, emitDown: emit}
		op.timers, _ = p.(ExpiredTimerHandler[K, Out])
		op.emitFn = op.emit
		op.seq = func(yield func(In) bool) {
			for _, j := range op.current {
				if !yield(op.rows[j]) {
					return
				}
			}
		}
		op.handle = &Handle{timeMode: timeMode, inInit: true}
		if release, err := claimProcessor(p); err != nil {
			// Neither Init nor Close: they would act on the running
			// query's processor.
			c.errs = append(c.errs, fmt.Errorf("transformWithState (%s): %w", name, unprefixed(err)))
		} else {
			if closer, ok := p.(io.Closer); ok {
				c.closers = append(c.closers, closer)
			}
			c.plan.Closers = append(c.plan.Closers, func() error { release(); return nil })
			if err := initProcessor(p, op.handle, release); err != nil {
				c.errs = append(c.errs, fmt.Errorf("transformWithState (%s): Init: %w", name, unprefixed(err)))
			}
		}
		op.handle.inInit = false
		for _, err := range op.handle.errs {
			c.errs = append(c.errs, fmt.Errorf("transformWithState (%s): Init: %w", name, unprefixed(err)))
		}
		op.info = runtime.OperatorInfo{
			Kind:       "transformWithState",
			Name:       name,
			Timeout:    timeMode.String(),
			OutputMode: mode.String(),
			TimeMode:   timeMode.runtime(),
			// A timer fires once the time reaches it, as Spark's
			// TimerStateImpl.getExpiredTimers (a GroupState timeout
			// once the time is past it).
			InclusiveTimers: true,
			KeyType:         ks.codec.typeName, LegacyKeyType: ks.codec.legacyTypeName, UseKeys: ks.codec.useKeys, ParseKey: ks.codec.parseJSON,
			Key:     ks.codec.schema,
			Deleted: op.handle.deleted,
			// Late rows are dropped in event time only, as Spark 4's
			// TransformWithStateExec does (SPARK-51758).
			DropsLateRows: timeMode == TimeModeEventTime,
			// As Spark's TransformWithStateExec.shouldRunAnotherBatch.
			NoData: runtime.NoDataOnWatermark,
		}
		if timeMode == TimeModeProcessingTime {
			op.info.NoData = runtime.NoDataEveryTrigger
		}
		if d, ok := p.(interface{ describeInfo(*runtime.OperatorInfo) }); ok {
			d.describeInfo(&op.info) // an aggregator's, in its state
		}
		for _, v := range op.handle.vars {
			op.info.States = append(op.info.States, runtime.StateInfo{Name: v.name, Schema: v.schema, Kind: v.kind, TTL: v.ttl, EventTimeTTL: v.eventTTL,
				Encoding: runtime.EncodingExpiring, ValueType: v.valueType, MapKeyType: v.mapKeyType, MapKey: v.mapKey})
			if v.eventTTL && v.ttl > 0 && !ks.s.p.watermarked {
				c.errs = append(c.errs, fmt.Errorf("transformWithState (%s): state variable %q has an event-time TTL but the input has no watermark (WithWatermark)", name, v.name))
			}
		}
		add := op.add
		if judge != nil {
			op.judge = true
			add = func(r *In) {
				op.add(r)
				if lateRow := c.lateRow; lateRow != nil {
					if et := c.eventTime; !et.After(c.batch.LateWatermarkOf(op.index)) {
						op.late.keep(op.lastGroup, et, 0, lateRow())
					}
				}
			}
		}
		op.index = c.addOperator(func() {
			if !c.attachFrom(func() { ks.s.attach(c, add) }) {
				return
			}
			// An event-time TTL counts from the latest event time of the
			// call's rows.
			for _, v := range op.handle.vars {
				if v.eventTTL && v.ttl > 0 {
					c.errs = append(c.errs, noEventTime("transformWithState ("+name+")", "its rows",
						fmt.Sprintf("state variable %q has an event-time TTL, which counts from its rows' event time: give them one with a WithWatermark after that operator, or give the variable a TTL in processing time (WithTTL)", v.name)))
				}
			}
		}, op, opInfo)
	}})
}

// lateJudge is a processor that judges which of its rows are late by its
// state (AggregateOver's bounded frames, as Flink's): the rows at or
// before the watermark reach it, and it drops the late ones with
// TimerValues.dropLate. It runs its calls one at a time.
type lateJudge interface{ judgesLateRows() bool }

// processorOp is a transformWithState operator of one query.
type processorOp[K comparable, In, Out any] struct {
	gatherer[K, In]
	index    int
	info     runtime.OperatorInfo
	p        StatefulProcessor[K, In, Out]
	timers   ExpiredTimerHandler[K, Out] // nil: timers do nothing
	cfg      processorConfig
	initial  []initialState[K]
	handle   *Handle
	emitDown func(*Out)
	// emitMu serialises emit of a call with one handler at a time, whose
	// goroutines may emit; emitFn is emit, made once.
	emitMu sync.Mutex
	emitFn func(Out)
	// current and seq are the rows of the call made one at a time.
	current []int32
	seq     iter.Seq[In]
	// judge says that the processor judges which rows are late
	// (lateJudge); late are the batch's rows that may be.
	judge bool
	late  lateSends

	// mu serialises the batch's state operations of concurrent calls.
	mu sync.Mutex
	// With Concurrency(n > 1): the calls of the batch in flight, in key
	// order, and the slots for them.
	calls []*processorCall[Out]
	slots chan struct{}
	wg    sync.WaitGroup
	// batchCtx is cancelled when a concurrent call of the batch fails.
	batchCtx    context.Context
	cancelBatch context.CancelFunc
	// scope and scopeCtx serve the calls made one at a time (all of them
	// without Concurrency, and timers and initial state always): one scope
	// reset for each call, and a context made once per batch.
	scope    keyScope
	scopeCtx context.Context
	scopeFor context.Context // the ctx scopeCtx was made from
	// eventExpiring says that the processor runs in event time and its
	// entries may expire in event time: a timer of a key whose rows
	// were handled in the batch runs on that call's clock (HandleTimer).
	eventExpiring bool
}

// processorCall is one concurrent call's rows and output.
type processorCall[Out any] struct {
	mu  sync.Mutex
	out []Out
	err error
}

func (o *processorOp[K, In, Out]) Info() runtime.OperatorInfo { return o.info }
func (o *processorOp[K, In, Out]) Groups() *runtime.Groups    { return &o.groups }

// SetVariableIDs gives the declared variables their ids in the store.
func (o *processorOp[K, In, Out]) SetVariableIDs(ids []uint8) {
	for i, v := range o.handle.vars {
		v.id = ids[i]
	}
}

// SetVariableExpiries tells the declared variables whether their stored
// entries may carry expiries in event time.
func (o *processorOp[K, In, Out]) SetVariableExpiries(eventTime []bool) {
	o.eventExpiring = false
	for i, v := range o.handle.vars {
		v.eventExpiries = eventTime[i]
		if o.info.TimeMode == runtime.EventTimeMode && (v.eventExpiries || v.eventTTL && v.ttl > 0) {
			o.eventExpiring = true
		}
	}
}

// EndBatch drops the batch's rows.
func (o *processorOp[K, In, Out]) EndBatch() {
	if o.cancelBatch != nil {
		o.cancelBatch() // a failed batch may leave calls running
	}
	o.wg.Wait()
	o.calls, o.batchCtx, o.cancelBatch = o.calls[:0], nil, nil
	o.scopeCtx, o.scopeFor = nil, nil
	o.gatherer.end()
	clear(o.late)
}

// Close closes the processor, if it has a Close method.
func (o *processorOp[K, In, Out]) Close() error {
	if c, ok := o.p.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// InitialState hands each key of the initial state to the processor.
func (o *processorOp[K, In, Out]) InitialState(ctx context.Context, b *runtime.Batch, op int) error {
	timers := TimerValues{processingTime: b.Now, watermark: b.Watermark}
	for _, init := range o.initial {
		err := init.each(o.p, func(key K, handle func(context.Context, TimerValues) error) error {
			var err error
			if o.keyBuf, err = o.codec.encode(o.keyBuf[:0], &key); err != nil {
				return fmt.Errorf("initial state: key %v: %w", key, unprefixed(err))
			}
			k := b.KeyStateOf(op, o.keyBuf)
			// An initial state has no rows to take an event time from:
			// its values' event-time TTLs count from the batch's
			// processing time, taken for one (from the watermark, the
			// epoch in a query's first batch, they would be gone at its
			// first move).
			return o.guard(key, func() error { return handle(o.scoped(ctx, k, b, b.Now), timers) })
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// scoped returns ctx scoped to k's state for a call made one at a time;
// eventTime is the latest event time of the call's rows (zero: none).
func (o *processorOp[K, In, Out]) scoped(ctx context.Context, k *runtime.KeyState, b *runtime.Batch, eventTime time.Time) context.Context {
	if o.scopeCtx == nil || o.scopeFor != ctx {
		o.scope.mu = &o.mu
		o.scopeCtx, o.scopeFor = context.WithValue(ctx, scopeKey{}, &o.scope), ctx
	}
	o.scope.reset(k, b, eventBase(eventTime, b))
	return o.scopeCtx
}

// scopedCall returns ctx scoped to k's state for a concurrent call: a
// scope of its own.
func (o *processorOp[K, In, Out]) scopedCall(ctx context.Context, k *runtime.KeyState, b *runtime.Batch, eventTime time.Time) context.Context {
	s := &keyScope{mu: &o.mu}
	s.reset(k, b, eventBase(eventTime, b))
	return context.WithValue(ctx, scopeKey{}, s)
}

// eventBase is the base of event-time TTLs: the call's latest event time,
// or the watermark when that is later or there is none.
func eventBase(eventTime time.Time, b *runtime.Batch) time.Time {
	if eventTime.IsZero() || eventTime.Before(b.Watermark) {
		return b.Watermark
	}
	return eventTime
}

// guard runs a handler, turning a panic into an error with the key and
// the stack, and wrapping its error with the key.
func (o *processorOp[K, In, Out]) guard(key K, call func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if up, ok := r.(userPanic); ok {
				err = up
				return
			}
			err = userPanic{fmt.Errorf("key %v: panic: %v (in %s)\n%s", key, r, o.info.Name, stack())}
		}
	}()
	if err := call(); err != nil {
		return fmt.Errorf("key %v: %w", key, unprefixed(err))
	}
	return nil
}

func (o *processorOp[K, In, Out]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	b := k.Batch()
	rows, err := o.rowsOf(b, group, rows)
	if err != nil {
		return err
	}
	key := o.keys[group]
	timers := TimerValues{processingTime: b.Now, watermark: b.Watermark}
	if o.cfg.concurrency <= 1 {
		o.current = rows
		if o.judge {
			timers.lateWatermark = b.LateWatermark
			timers.dropLate = func(t time.Time) {
				b.DropLate(o.index)
				o.late.send(group, t, 0)
			}
		}
		return o.guard(key, func() error {
			return o.p.HandleInputRows(o.scoped(ctx, k, b, o.latest(group)), key, o.seq, timers, o.emitFn)
		})
	}
	// Concurrently: the call gets its own copy of the rows and its own
	// KeyState, waits for a slot, and keeps its output for RowsDone.
	own := make([]In, len(rows))
	for i, j := range rows {
		own[i] = o.rows[j]
	}
	call := &processorCall[Out]{}
	o.calls = append(o.calls, call)
	if o.slots == nil {
		o.slots = make(chan struct{}, o.cfg.concurrency)
	}
	if o.batchCtx == nil {
		o.batchCtx, o.cancelBatch = context.WithCancel(ctx)
	}
	select {
	case o.slots <- struct{}{}:
	case <-o.batchCtx.Done():
		// A call failed (RowsDone reports it), or the query stops.
		call.err = o.batchCtx.Err()
		return nil
	}
	callCtx := o.batchCtx
	ks := b.NewKeyState(o.index, &o.groups, group)
	o.wg.Add(1)
	b.Go(func() {
		defer o.wg.Done()
		defer func() { <-o.slots }()
		emit := func(out Out) {
			call.mu.Lock()
			call.out = append(call.out, out)
			call.mu.Unlock()
		}
		call.err = o.guard(key, func() error {
			return o.p.HandleInputRows(o.scopedCall(callCtx, ks, b, o.latest(group)), key, seqOf(own), timers, emit)
		})
		if call.err != nil {
			o.cancelBatch()
		}
	})
	return nil
}

// emit passes a row on, one at a time.
func (o *processorOp[K, In, Out]) emit(out Out) {
	o.emitMu.Lock()
	o.emitDown(&out)
	o.emitMu.Unlock()
}

func seqOf[T any](rows []T) iter.Seq[T] {
	return func(yield func(T) bool) {
		for _, r := range rows {
			if !yield(r) {
				return
			}
		}
	}
}

// RowsDone waits for the concurrent calls of the batch and passes their
// output on in key order; the first error, in key order, fails the batch
// (an error of a call cancelled because another failed is not the cause:
// the other's is reported).
func (o *processorOp[K, In, Out]) RowsDone(ctx context.Context, b *runtime.Batch) error {
	o.wg.Wait()
	var cancelled error
	for _, call := range o.calls {
		switch {
		case call.err == nil:
		case errors.Is(call.err, context.Canceled) && ctx.Err() == nil:
			if cancelled == nil {
				cancelled = call.err
			}
		default:
			return call.err
		}
	}
	if cancelled != nil {
		return cancelled
	}
	for _, call := range o.calls {
		for i := range call.out {
			o.emitDown(&call.out[i])
		}
	}
	o.calls = o.calls[:0]
	return nil
}

// rowsGroup returns the group of a timer's key, when the processor's
// entries may expire in event time and the batch had rows of the key.
func (o *processorOp[K, In, Out]) rowsGroup(key K, encoded []byte) (int32, bool) {
	if !o.eventExpiring {
		return 0, false
	}
	return o.groupOf(key, encoded)
}

// HandleTimer calls the processor for a timer due, then deletes the timer
// (so that, during the call, ListTimers still lists it).
func (o *processorOp[K, In, Out]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	var key K
	if err := o.codec.decode(k.Key(), &key); err != nil {
		return fmt.Errorf("a timer's key does not decode: %w", unprefixed(err))
	}
	b := k.Batch()
	if o.timers != nil {
		timers := TimerValues{processingTime: b.Now, watermark: b.Watermark}
		scoped := o.scoped(ctx, k, b, time.Time{})
		if o.info.TimeMode == runtime.EventTimeMode {
			if group, ok := o.rowsGroup(key, k.Key()); ok {
				// The key's rows were handled earlier in the batch, on the
				// watermark's clock: the timer goes on from there, seeing
				// what that call saw and left, and what it writes lives as
				// long as what that call wrote. At its own instant, it
				// would see entries that call found gone, and write values
				// that expire before that call's, in place of them.
				o.scope.after(eventBase(o.latest(group), b))
			} else {
				// Time-ordered within the batch: an event-time timer runs
				// at its instant, before the entries that expire at or
				// after it, so that what it sees does not depend on how
				// far one batch moves the watermark (see WithEventTimeTTL).
				o.scope.at(expiry)
			}
		}
		err := o.guard(key, func() error {
			return o.timers.HandleExpiredTimer(scoped, key, timers, ExpiredTimerInfo{expiry: expiry}, o.emitFn)
		})
		if err != nil {
			return err
		}
	}
	return k.DeleteTimer(expiry)
}
