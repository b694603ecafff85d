package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"slices"
	"time"
)

// runBatch runs, writes and commits one batch, and returns the new
// progress; its report waits in q.unreported for settle. Nothing is
// committed when it fails. When the query pipelines, the commit is
// handed to a goroutine (Store.commitAsync) and runBatch returns before
// it ends: the next settle waits for it.
func (q *Query) runBatch(ctx context.Context, p Progress, planned offsets, watermark, now, started time.Time) (Progress, error) {
	b := q.newBatch(p, watermark, now, started)
	q.beginBatch(b, planned)
	defer q.endBatch()
	committed := false
	defer func() {
		// The operators first: a failed batch may leave an operator's
		// concurrent calls running, writing to the batch's state, which
		// EndBatch cancels and waits for.
		for _, op := range q.plan.Operators {
			op.Groups().Reset()
			op.EndBatch()
		}
		if !committed {
			b.state.Close()
		}
	}()
	durations := map[string]time.Duration{}
	if err := q.safely(b, func() error { return q.process(ctx, b, planned, durations) }); err != nil {
		return p, err
	}
	b.flushWatermark()
	q.windowsLeft = false
	for i := range b.ops {
		q.windowsLeft = q.windowsLeft || !b.ops[i].left.IsZero()
	}
	next := Progress{
		BatchID:             b.ID,
		Watermark:           watermark,
		Offsets:             copyMap(p.Offsets),
		PartitionWatermarks: b.watermarks,
		LastActive:          copyMap(p.LastActive),
		RestoredMarks:       b.restored,
		StateBytesPerRecord: q.stateBytesPerRecord(b, p.StateBytesPerRecord),
	}
	if next.Offsets == nil {
		next.Offsets = map[string]json.RawMessage{}
	}
	for i, in := range q.plan.Inputs {
		next.Offsets[in.Source.Name()] = planned.end[i]
	}
	if next.LastActive == nil {
		next.LastActive = map[string]time.Time{}
	}
	for part := range b.active {
		next.LastActive[part] = now
	}
	for i := range b.ops {
		next.StateRows = append(next.StateRows, b.ops[i].total)
		if h := b.ops[i].held; !h.IsZero() {
			if next.HeldWatermarks == nil {
				next.HeldWatermarks = make([]time.Time, len(b.ops))
			}
			next.HeldWatermarks[i] = h
		}
	}
	for i := range b.ops {
		if len(b.ops[i].metrics) > 0 {
			next.OperatorMetrics = make([]map[string]int64, len(b.ops))
			for j := range b.ops {
				next.OperatorMetrics[j] = b.ops[j].metrics
			}
			break
		}
	}
	// process settled the previous batch's commit before the sinks.
	if err := q.settle(); err != nil {
		return p, err
	}
	r := &pendingReport{b: b, planned: planned, durations: durations, commitStart: q.cfg.clock()}
	if q.pipelines() {
		q.store.commitAsync(b.state, next, q.cfg.clock)
		committed = true
		q.commitCounts(b)
		q.unreported = r
		return next, nil
	}
	if err := q.committer.Commit(b.state, next); err != nil {
		return p, err
	}
	committed = true
	q.commitCounts(b)
	r.finished = q.cfg.clock()
	q.unreported = r
	return next, nil
}

// stateBytesPerRecord measures the batch's state writes per input record
// (Progress.StateBytesPerRecord), at least 1 once a batch has read
// records; last is the measure so far, kept when the batch read nothing.
// It says so, once a start, when a batch's writes pass
// MaxBatchStateBytes (a checkpoint's first, taken at a kilobyte a record,
// or one whose records wrote more than the last's): the next batches take
// fewer records.
func (q *Query) stateBytesPerRecord(b *Batch, last int64) int64 {
	var rows int64
	for i := range b.inputs {
		rows += b.inputs[i].rows
	}
	written := int64(b.state.bytes())
	if rows == 0 {
		return last
	}
	perRecord := max(1, (written+rows-1)/rows)
	if budget := q.cfg.maxBatchState; budget > 0 && written > budget && !q.warnedBatchState {
		q.warnedBatchState = true
		slog.Info("streamgen: a batch wrote more state than MaxBatchStateBytes: the next batches take fewer records from the sources that can give fewer",
			"query", q.cfg.name, "batch", b.ID, "stateBytes", written, "maxBatchStateBytes", budget, "records", rows, "nextRecords", max(1, budget/perRecord/int64(len(q.plan.Inputs))))
	}
	return perRecord
}

// recordCap is how many records a batch after p may take from the
// sources (each a share of it), to keep its state writes under
// MaxBatchStateBytes at the bytes a record the batches wrote so far, or,
// before any measure, at probeRecordBytes; 0 for no cap (none set, no
// state to write, or a Once trigger's batch).
func (q *Query) recordCap(p Progress, limit ReadLimit) int64 {
	budget := q.cfg.maxBatchState
	if budget <= 0 || limit == AllAvailable || len(q.plan.Inputs) == 0 || len(q.plan.Operators) == 0 {
		return 0
	}
	perRecord := p.StateBytesPerRecord
	if perRecord <= 0 {
		perRecord = probeRecordBytes
	}
	return max(1, budget/perRecord/int64(len(q.plan.Inputs)))
}

// probeRecordBytes is the state bytes a record is taken to write before a
// batch has measured it: a kilobyte, a row of a join that keeps its rows.
// (The first batch of a new checkpoint, over a backlog, would otherwise
// take it all, and hold all its writes in memory.)
const probeRecordBytes = 1 << 10

// commitCounts follows a committed batch (or one handed to its commit:
// a failed commit ends the query) in the counts of the variables ordered
// by event time.
func (q *Query) commitCounts(b *Batch) {
	for i := range q.timedVars {
		for j := range q.timedVars[i] {
			t := &q.timedVars[i][j]
			t.counts.commit(b.state, Var{Scope: b.ops[i].scope, Variable: t.id})
		}
	}
}

// pendingReport is what the report of a batch handed to its commit
// needs; the commit's end completes it (see settle).
type pendingReport struct {
	b                     *Batch
	planned               offsets
	durations             map[string]time.Duration
	commitStart, finished time.Time
	latestOffset          time.Duration
}

// pipelines reports whether a batch's commit runs alongside the next
// batch (see inflight.go): when the store is the committer (a committer
// of its own may read the store or commit elsewhere in Commit) and the
// trigger starts the next batch as soon as one ends.
func (q *Query) pipelines() bool {
	_, isStore := q.committer.(*Store)
	return isStore && (q.cfg.trigger.kind == triggerASAP || q.cfg.trigger.kind == triggerAvailableNow)
}

// settle waits for the last batch's commit, if it is in flight, and
// reports the batch once it is committed. A failed commit's error is
// returned by this and every later settle.
func (q *Query) settle() error {
	finished, err := q.store.settle()
	if err != nil {
		q.unreported = nil
		return err
	}
	r := q.unreported
	if r == nil {
		return q.tellCommitted() // what a sync has made durable since
	}
	q.unreported = nil
	if r.finished.IsZero() {
		r.finished = finished
	}
	r.durations[DurationWALCommit] = r.finished.Sub(r.commitStart)
	r.durations[DurationTriggerExecution] = r.finished.Sub(r.b.started)
	report := q.makeReport(r.b, r.planned, r.durations, r.finished)
	report.DurationMs[DurationLatestOffset] = r.latestOffset.Milliseconds()
	q.report(report)
	q.untold = append(q.untold, committedBatch{id: r.b.ID, planned: r.planned})
	return q.tellCommitted()
}

// committedBatch is a batch committed whose sources (CommitListener)
// have not been told yet: it may not be durable yet.
type committedBatch struct {
	id      int64
	planned offsets
}

// tellCommitted tells the sources that listen (CommitListener) and the
// sinks that publish (Output.Publish) of the committed batches that are
// durable: those the commit file records (a commit without SyncInterval
// records its batch before it returns; with it, the sync loop records the
// synced ones), or every one when another committer commits (its Commit
// returns once the batch is durable). A sink's failure to publish is
// returned; the batches from the one that failed stay untold.
func (q *Query) tellCommitted() error {
	if len(q.untold) == 0 {
		return nil
	}
	durable := int64(math.MaxInt64)
	if _, isStore := q.committer.(*Store); isStore {
		durable = q.store.recordedBatch()
	}
	n := 0
	defer func() { q.untold = q.untold[n:] }()
	for _, c := range q.untold {
		if c.id > durable {
			break
		}
		for _, out := range q.plan.Outputs {
			if out.Publish != nil {
				if err := out.Publish(c.id); err != nil {
					return fmt.Errorf("streamgen: sink %s: %w", out.Description, unprefixed(err))
				}
			}
		}
		n++
		for i, in := range q.plan.Inputs {
			if l, ok := in.Source.(CommitListener); ok && !bytes.Equal(c.planned.start[i], c.planned.end[i]) {
				l.Committed(c.planned.start[i], c.planned.end[i])
			}
		}
	}
	return nil
}

func (q *Query) newBatch(p Progress, watermark, now, started time.Time) *Batch {
	b := &Batch{
		ID:          p.BatchID + 1,
		Watermark:   watermark,
		Now:         now,
		started:     started,
		lastTrigger: q.lastTrigger,
		// The watermark the committed batch ran with, which every
		// checkpoint records.
		LateWatermark: lateWatermark(p, watermark),
		First:         p.BatchID < 0,
		MemoryBudget:  q.cfg.batchMemory,
		SpillDir:      q.cfg.spillDir,
		state:         q.store.newWriteBatch(),
		watermarks:    copyMap(p.PartitionWatermarks),
		restored:      copyMap(p.RestoredMarks),
		active:        map[string]bool{},
		ops:           make([]opRun, len(q.plan.Operators)),
		inputs:        make([]inputRun, len(q.plan.Inputs)),
	}
	if b.watermarks == nil {
		b.watermarks = map[string]time.Time{}
	}
	b.marked = len(b.watermarks) > 0
	for i, in := range q.plan.Inputs {
		b.inputs[i].name = in.Source.Name()
	}
	for i, h := range p.HeldWatermarks {
		if !h.IsZero() && i < len(b.ops) && !b.LateWatermark.IsZero() {
			// It ran with h, behind the watermark the batch before ran
			// with: rows after h are not late for it.
			if b.lateHeld == nil {
				b.lateHeld = make([]time.Time, len(b.ops))
			}
			b.lateHeld[i] = earliest(b.LateWatermark, h)
		}
	}
	for i := range b.ops {
		b.ops[i].scope = Scope{Operator: uint8(i)}
		if i < len(p.StateRows) {
			b.ops[i].total = p.StateRows[i]
		}
		if i < len(p.OperatorMetrics) && len(p.OperatorMetrics[i]) > 0 {
			b.ops[i].metrics = copyMap(p.OperatorMetrics[i])
		}
	}
	return b
}

// lateWatermark is the watermark rows of the batch after p are late by
// (Batch.LateWatermark): the one p ran with, never past the batch's own.
func lateWatermark(p Progress, watermark time.Time) time.Time {
	ran := p.Watermark
	if p.restored {
		ran = p.ranWith // a start's first batch, or a batch run again
	}
	if p.BatchID < 0 || watermark.IsZero() || ran.After(watermark) {
		return watermark
	}
	return ran
}

// process runs a batch's phases in order: read, operators (keys with rows,
// then due timers, operator by operator), outputs.
func (q *Query) process(ctx context.Context, b *Batch, planned offsets, durations map[string]time.Duration) error {
	t := q.cfg.clock()
	phase := func(name string) {
		now := q.cfg.clock()
		durations[name] += now.Sub(t)
		t = now
	}
	if q.plan.Begin != nil {
		q.plan.Begin(ctx, b)
	}
	for i, in := range q.plan.Inputs {
		if bytes.Equal(planned.start[i], planned.end[i]) {
			continue
		}
		if err := in.Read(ctx, b, planned.start[i], planned.end[i]); err != nil {
			return fmt.Errorf("streamgen: batch %d: source %s: %w", b.ID, in.Source.Name(), unprefixed(err))
		}
		b.inputRead(i)
	}
	if err := q.flush(ctx, b); err != nil {
		return err
	}
	phase(DurationGetBatch)
	addStart := t
	// held is the instant of the first window an operator left to the
	// next batch (WindowClosesPerBatch): the operators after it in the
	// plan run with the watermark held there, as if it had stopped at
	// that instant. An operator whose rows may be behind the watermark
	// it ran with (OperatorInfo.OutputDelay) holds it as far behind that
	// (never before the epoch; not in a batch that runs with the epoch,
	// as Spark's propagation skips a watermark of 0).
	watermark, late := b.Watermark, b.LateWatermark
	var held time.Time
	for i, op := range q.plan.Operators {
		if !held.IsZero() && held.Before(watermark) {
			b.Watermark, b.ops[i].held = held, held
		}
		b.LateWatermark = b.LateWatermarkOf(i)
		if err := q.runOperator(ctx, b, i, op, phase); err != nil {
			// (Calls of the operator may still run, and read the batch,
			// until EndBatch.)
			return err
		}
		ran := b.Watermark
		b.Watermark, b.LateWatermark = watermark, late
		if l := b.ops[i].left; !l.IsZero() {
			held = earliest(held, l)
		}
		if d := q.outputDelay(i); d > 0 && ran.After(epoch) {
			h := ran.Add(-d)
			if h.Before(epoch) {
				h = epoch
			}
			held = earliest(held, h)
		}
		if err := q.flush(ctx, b); err != nil {
			return err
		}
	}
	// The sinks write after the previous batch's commit (in flight while
	// this batch was read and processed) is durable.
	if err := q.settle(); err != nil {
		return err
	}
	sinkCtx := q.withRejects(ctx, b)
	for i, out := range q.plan.Outputs {
		rows, err := out.Write(sinkCtx, b)
		if err != nil {
			return fmt.Errorf("streamgen: batch %d: sink %s: %w", b.ID, out.Description, err)
		}
		if i == 0 {
			b.outputRows = rows
		} else if out.Sink {
			b.otherSinkRows = append(b.otherSinkRows, rows)
		}
	}
	if len(b.deadLetters) > 0 || b.ID == q.rerun && q.cfg.deadLetters != nil {
		// (A batch written before, by a run that failed, whose letters
		// this run did not find, has them removed.)
		if q.cfg.deadLetters != nil {
			if err := q.cfg.deadLetters.WriteDeadLetters(ctx, b.ID, b.deadLetters); err != nil {
				return fmt.Errorf("streamgen: batch %d: dead-letter sink: %w", b.ID, unprefixed(err))
			}
		} else {
			for _, d := range b.deadLetters {
				slog.Warn("streamgen: dead letter", "source", d.Source, "position", d.Position, "error", d.Error)
				for _, in := range q.plan.Inputs {
					if k, ok := in.Source.(DeadLetterKeeper); ok && in.Source.Name() == d.Source {
						k.KeepForDeadLetter(d.Position)
					}
				}
			}
		}
	}
	phase(DurationSink)
	durations[DurationAddBatch] = q.cfg.clock().Sub(addStart)
	return nil
}

// earliest returns the earlier of a and b, where zero is none (the
// other).
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || !b.IsZero() && b.Before(a) {
		return b
	}
	return a
}

// flush calls the plan's Flush, if any.
func (q *Query) flush(ctx context.Context, b *Batch) error {
	if q.plan.Flush == nil {
		return nil
	}
	if err := q.plan.Flush(ctx, b); err != nil {
		return fmt.Errorf("streamgen: batch %d: %w", b.ID, unprefixed(err))
	}
	return b.failure()
}

// runOperator runs operator i's calls: its initial state in the first
// batch, a call per key with rows, then a call per due timer.
func (q *Query) runOperator(ctx context.Context, b *Batch, i int, op Operator, phase func(string)) error {
	info := op.Info()
	b.ops[i].oneShot = info.OneShotTimers
	fail := func(err error) error {
		return fmt.Errorf("streamgen: batch %d: %s (%s): %w", b.ID, info.Kind, info.Name, err)
	}
	if is, ok := op.(InitialStater); ok && b.First {
		if err := is.InitialState(ctx, b, i); err != nil {
			return fail(err)
		}
		if err := b.failure(); err != nil {
			return fail(err)
		}
	}
	for j := range q.timedVars[i] {
		// The count of the variable's entries by time starts from the
		// store, before the query's first batch writes any.
		t := &q.timedVars[i][j]
		if err := t.counts.begin(b.state, Var{Scope: b.ops[i].scope, Variable: t.id}); err != nil {
			return fail(b.fail(err))
		}
	}
	groups := op.Groups()
	groups.sort()
	if n := groups.Len(); n > len(b.ops[i].dirty) {
		b.ops[i].dirty = slices.Grow(b.ops[i].dirty, n-len(b.ops[i].dirty))[:n]
	}
	k := &b.ops[i].keyState
	// The keys' first state variable, which most operators read first, is
	// read ahead through the state cache, some keys at a time.
	warm := len(info.States) > 0 && info.States[0].Encoding != EncodingJoinBuffer && info.States[0].Encoding != EncodingByEventTime
	warmed := 0
	var warmKeys [cacheWarmMax][]byte
	rw, _ := op.(RowsWarmer)
	rowsWarmed := 0
	for g := range groups.Len() {
		if g%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if warm && g == warmed {
			warmed = min(g+cacheWarmMax, groups.Len())
			for j := g; j < warmed; j++ {
				warmKeys[j-g] = groups.Key(int32(j))
			}
			b.state.warm(Var{Scope: b.ops[i].scope}, warmKeys[:warmed-g])
		}
		if rw != nil && g == rowsWarmed {
			rowsWarmed = min(g+cacheWarmMax, groups.Len())
			rows := groups.rowsBetween(g, rowsWarmed)
			rw.WarmRows(rows[:min(len(rows), rowsWarmMax)])
		}
		k.reset(b, i, groups.Key(int32(g)), int32(g))
		if err := op.HandleRows(ctx, k, int32(g), groups.rowsOf(g)); err != nil {
			return fail(err)
		}
		if err := b.failure(); err != nil {
			return fail(err)
		}
	}
	if d, ok := op.(RowsDoner); ok {
		if err := d.RowsDone(ctx, b); err != nil {
			return fail(err)
		}
		if err := b.failure(); err != nil {
			return fail(err)
		}
	}
	phase(DurationStateOperators)
	if err := q.runTimers(ctx, b, i, op, info, phase); err != nil {
		return err
	}
	// Then state past its time to live goes, also in a batch without
	// data: in event time, up to the first window the operator left to
	// the next batch, if it left one.
	watermark := earliest(b.Watermark, b.ops[i].left)
	if q.expiring(i, info) {
		n, err := b.state.ExpireState(b.ops[i].scope, b.Now, watermark)
		if err != nil {
			return fail(b.fail(err))
		}
		b.ops[i].removed += n
		b.ops[i].total -= n
	}
	// And the entries of variables ordered by event time that the
	// watermark has reached, one range each.
	if !watermark.IsZero() {
		for j := range q.timedVars[i] {
			t := &q.timedVars[i][j]
			n, err := b.state.deleteTimedThrough(Var{Scope: b.ops[i].scope, Variable: t.id}, watermark, &t.counts)
			if err != nil {
				return fail(b.fail(err))
			}
			if !t.index {
				b.ops[i].removed += n
				b.ops[i].total -= n
			}
		}
	}
	return nil
}

// runTimers calls operator i for each of its timers due in the batch.
func (q *Query) runTimers(ctx context.Context, b *Batch, i int, op Operator, info OperatorInfo, phase func(string)) error {
	fail := func(err error) error {
		return fmt.Errorf("streamgen: batch %d: %s (%s): %w", b.ID, info.Kind, info.Name, err)
	}
	k := &b.ops[i].keyState
	threshold, ok := timerThreshold(info, b.Watermark, b.Now)
	if !ok {
		return nil
	}
	cursor := b.state.DueTimers(b.ops[i].scope, threshold)
	_, dueEnd := dueRange(b.ops[i].scope, threshold)
	fired := false
	// One-shot timers in event time (a window's keys, closing) stop past
	// WindowClosesPerBatch, and the next batch goes on from the first
	// left.
	bound := -1
	if info.OneShotTimers && info.TimeMode == EventTimeMode && q.windowCloses > 0 {
		bound = q.windowCloses
	}
	var left []byte // the index entry of the first timer left, if any
	from := b.state.timerWrites()
	for left == nil {
		due, err := cursor.Next()
		if err != nil {
			return fail(b.fail(err))
		}
		if len(due) == 0 {
			break
		}
		if bound >= 0 && len(due) > bound {
			t := due[bound]
			b.ops[i].left = t.At
			left = expiryKey(nil, b.ops[i].scope, t.At, t.Key)
			due = due[:bound]
		}
		bound -= len(due)
		fired = fired || len(due) > 0
		b.state.prefetch(b.ops[i].scope, q.keyed[i], due)
		// A timer that a call before it in this chunk deleted does not
		// fire (a later chunk's cursor sees the deletion itself): the
		// index entries written since the chunk was read are noted, and
		// a due timer among them is looked up again.
		// (Writes at or past the threshold are of no timer due.)
		written, touched := b.state.timerWrites(), map[string]struct{}{}
		var scratch []byte
		for _, t := range due {
			if n := b.state.timerWrites(); n > written {
				b.state.timerKeysWritten(touched, written, n, dueEnd)
				written = n
			}
			if len(touched) > 0 {
				live, err := b.state.timerLive(b.ops[i].scope, t, touched, &scratch)
				if err != nil {
					return fail(b.fail(err))
				}
				if !live {
					continue
				}
			}
			k.reset(b, i, t.Key, -1)
			if err := op.HandleTimer(ctx, k, t.At); err != nil {
				return fail(err)
			}
			if err := b.failure(); err != nil {
				return fail(err)
			}
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if !info.OneShotTimers && fired {
		// The fired timers' entries by expiry go in one range deletion.
		if err := cursor.deleteRead(from); err != nil {
			return fail(b.fail(err))
		}
	}
	if info.OneShotTimers && fired {
		// The fired timers go in one range deletion; and, once a run, the
		// index by key that a checkpoint from before they were one-shot
		// may hold.
		scope := b.ops[i].scope
		if err := b.state.deleteFired(scope, threshold, left); err != nil {
			return fail(b.fail(err))
		}
		if !q.keyIndexDropped[scope] {
			if err := b.state.dropKeyIndex(scope); err != nil {
				return fail(b.fail(err))
			}
			if q.keyIndexDropped == nil {
				q.keyIndexDropped = map[Scope]bool{}
			}
			q.keyIndexDropped[scope] = true
		}
	}
	phase(DurationTimers)
	return nil
}

// safely runs fn, turning a panic that no stage caught into an error,
// with its stack, so that nothing of the batch is committed.
func (q *Query) safely(b *Batch, fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("streamgen: batch %d: panic: %v\n%s", b.ID, r, debug.Stack())
		}
	}()
	return fn()
}

func (q *Query) makeReport(b *Batch, planned offsets, durations map[string]time.Duration, finished time.Time) QueryProgress {
	total := finished.Sub(b.started)
	var inputRows int64
	for _, in := range b.inputs {
		inputRows += in.rows
	}
	rate := func(rows int64) float64 {
		// At least a millisecond, as Spark's processingTimeMills.
		return float64(rows) / max(total, time.Millisecond).Seconds()
	}
	r := QueryProgress{
		ID:                     q.id,
		RunID:                  q.runID,
		Name:                   q.cfg.name,
		Timestamp:              b.started.UTC(),
		BatchID:                b.ID,
		BatchDuration:          total.Milliseconds(),
		NumInputRows:           inputRows,
		InputRowsPerSecond:     inputRate(inputRows, b),
		ProcessedRowsPerSecond: rate(inputRows),
		DurationMs:             map[string]int64{},
		Sink:                   SinkProgress{Description: q.plan.Outputs[0].Description, NumOutputRows: b.outputRows},
		NumDeadLetters:         int64(len(b.deadLetters)),
		StateStore:             q.store.Metrics(),
		Tables:                 b.tables,
	}
	others := b.otherSinkRows
	for _, out := range q.plan.Outputs[1:] {
		if out.Sink && len(others) > 0 {
			r.OtherSinks = append(r.OtherSinks, SinkProgress{Description: out.Description, NumOutputRows: others[0]})
			others = others[1:]
		}
	}
	for name, d := range durations {
		r.DurationMs[name] = d.Milliseconds()
	}
	for i, in := range q.plan.Inputs {
		var skipped int64
		if sk, ok := in.Source.(Skipper); ok {
			skipped = sk.Skipped()
		}
		sp := SourceProgress{
			NumSkippedInputs:       skipped,
			Description:            in.Source.Name(),
			StartOffset:            describeOffset(in.Source, planned.start[i]),
			EndOffset:              describeOffset(in.Source, planned.end[i]),
			NumInputRows:           b.inputs[i].rows,
			InputRowsPerSecond:     inputRate(b.inputs[i].rows, b),
			ProcessedRowsPerSecond: rate(b.inputs[i].rows),
		}
		if i < len(planned.latest) && planned.latest[i] != nil {
			sp.LatestOffset = describeOffset(in.Source, planned.latest[i])
			if lr, ok := in.Source.(LagReporter); ok {
				lag, err := lr.Lag(planned.end[i], planned.latest[i])
				if err != nil {
					slog.Warn("streamgen: the source's lag is not known", "source", in.Source.Name(), "error", err)
				} else {
					sp.setLag(lag)
				}
			}
		}
		r.Sources = append(r.Sources, sp)
	}
	if q.plan.Watermarks > 0 && (b.marked || b.Watermark.After(epoch) || b.eventTimes.n > 0) {
		// As Spark's: the watermark in effect (absent while it is the
		// epoch it starts at and no batch before had an event time), and
		// the statistics of the rows' event times.
		r.EventTime = map[string]string{}
		if b.marked || b.Watermark.After(epoch) {
			r.EventTime["watermark"] = b.Watermark.UTC().Format(time.RFC3339Nano)
		}
		if s := b.eventTimes; s.n > 0 {
			r.EventTime["min"] = time.Unix(0, s.min).UTC().Format(time.RFC3339Nano)
			r.EventTime["max"] = time.Unix(0, s.max).UTC().Format(time.RFC3339Nano)
			r.EventTime["avg"] = time.Unix(0, s.mean()).UTC().Format(time.RFC3339Nano)
		}
	}
	for i, op := range q.plan.Operators {
		info := op.Info()
		o := &b.ops[i]
		sp := StateOperatorProgress{
			OperatorName:              info.Kind,
			Name:                      info.Name,
			NumRowsTotal:              o.total,
			NumRowsUpdated:            o.updated,
			NumRowsRemoved:            o.removed,
			NumRowsDroppedByWatermark: o.late,
			CustomMetrics:             copyMap(o.metrics),
		}
		if !o.held.IsZero() {
			sp.HeldWatermark = o.held.UTC().Format(time.RFC3339Nano)
		}
		r.StateOperators = append(r.StateOperators, sp)
	}
	return r
}

// inputRate is the rows of batch b over the time from the start of the
// trigger before b's to the start of b's, as Spark's inputRowsPerSecond:
// a trigger that found nothing to do counts (with ProcessingTime(d), a
// batch after an idle spell takes its rows over d, not over the spell),
// and the first batch of a start, after no trigger, has 0.
func inputRate(rows int64, b *Batch) float64 {
	if b.lastTrigger.IsZero() {
		return 0
	}
	if secs := b.started.Sub(b.lastTrigger).Seconds(); secs > 0 {
		return float64(rows) / secs
	}
	return 0
}

func (q *Query) report(r QueryProgress) {
	q.mu.Lock()
	q.progress = append(q.progress, r)
	if len(q.progress) > q.cfg.progressKeep {
		q.progress = q.progress[len(q.progress)-q.cfg.progressKeep:]
	}
	q.mu.Unlock()
	// The checkpoint keeps the latest reports for tools; a storage fault
	// is the store's failure, which ends the query.
	if err := q.store.keepReport(r); err != nil && q.store.Err() == nil {
		slog.Warn("streamgen: progress report not kept in the checkpoint", "batch", r.BatchID, "error", err)
	}
	// A query given up on (finish) tells its listeners nothing more.
	q.listening.Lock()
	defer q.listening.Unlock()
	if q.ended {
		return
	}
	for _, l := range q.cfg.listeners {
		if l, ok := l.(interface{ OnQueryProgress(QueryProgress) }); ok {
			tellListener("OnQueryProgress", func() { l.OnQueryProgress(r) })
		}
	}
	q.logProgress(r)
}

// tellIdle tells the listeners that the trigger started at started found
// nothing to do, at the first such trigger after a batch or the start and
// then once an IdleEventInterval (Spark's finishNoExecutionTrigger).
func (q *Query) tellIdle(started time.Time) {
	if !q.idleSince.IsZero() && started.Sub(q.idleSince) < q.cfg.idleEvents {
		return
	}
	q.idleSince = started
	e := QueryIdle{ID: q.id, RunID: q.runID, Name: q.cfg.name, Time: started.UTC()}
	q.listening.Lock()
	defer q.listening.Unlock()
	if q.ended {
		return
	}
	for _, l := range q.cfg.listeners {
		if l, ok := l.(interface{ OnQueryIdle(QueryIdle) }); ok {
			tellListener("OnQueryIdle", func() { l.OnQueryIdle(e) })
		}
	}
}

func copyMap[V any](m map[string]V) map[string]V {
	if m == nil {
		return nil
	}
	out := make(map[string]V, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
