package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// offsets are the planned offsets of a batch, by input.
type offsets struct {
	start, end []json.RawMessage
	// latest are the sources' latest offsets when the batch was planned
	// (Available), for the report's lag.
	latest []json.RawMessage
}

func (o offsets) hasData() bool {
	for i := range o.start {
		if !bytes.Equal(o.start[i], o.end[i]) {
			return true
		}
	}
	return false
}

func (q *Query) loop(ctx context.Context) (err error) {
	ctx = context.WithValue(ctx, queryKey{}, queryIdent{id: q.id, runID: q.runID})
	// A batch's commit may still be in flight when the loop ends: it
	// ends with the commit's error, or reports the batch.
	defer func() {
		if serr := q.settle(); serr != nil {
			switch {
			case err == nil:
				err = serr
			case !errors.Is(err, serr):
				err = errors.Join(serr, err)
			}
		}
	}()
	progress, committed, err := q.store.Progress()
	if err != nil {
		return err
	}
	// The batch after the last committed may have been written before,
	// by a run that failed or died: its dead letters are written again,
	// even none.
	q.rerun = 0
	if committed {
		q.rerun = progress.BatchID + 1
	}
	if err := q.rewindSinks(ctx, progress.BatchID, committed); err != nil {
		return err
	}
	progress = q.restoredProgress(progress, q.cfg.clock())
	// Windows the last run left after its last batch (WindowClosesPerBatch)
	// close first, as they would have in that run.
	if committed {
		if q.windowsLeft, err = q.windowsDue(progress); err != nil {
			return err
		}
	}
	// The batch after the last committed, if a run that failed or died
	// planned it, runs first and as planned: on the same input, at the
	// same processing time and watermark, with data or not.
	replay, err := q.plannedReplay(progress.BatchID + 1)
	if err != nil {
		return err
	}
	inputs := q.plan.Inputs
	available := func() ([]json.RawMessage, error) {
		upTo := make([]json.RawMessage, len(inputs))
		for i, in := range inputs {
			if upTo[i], err = in.Source.Available(ctx); err != nil {
				return nil, fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), unprefixed(err))
			}
		}
		return upTo, nil
	}
	// A Once or AvailableNow query works up to what is there at start.
	var upTo []json.RawMessage
	stops := q.cfg.trigger.stops()
	if stops {
		if upTo, err = available(); err != nil {
			return err
		}
	}
	// Once takes everything in one batch, as Spark's Trigger.Once: the
	// sources' per-batch limits do not apply.
	limit := Limited
	switch {
	case q.cfg.trigger.kind == triggerOnce:
		limit = AllAvailable
	case stops: // AvailableNow: nothing is held back for more
		limit = LimitedToEnd
	}
	flushed := false
	flushLeft := -1 // the timers the flush fires before its last batch (flushWatermark)
	// lastWatermark is the watermark of the last batch this start ran
	// (ran: there was one), for the operators' requests of batches
	// without data.
	var lastWatermark time.Time
	ran := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		turn := q.beginTurn()
		started := q.cfg.clock()
		q.lastTrigger, q.trigger = q.trigger, started
		if !stops {
			if upTo, err = available(); err != nil {
				return err
			}
		}
		planned := offsets{start: make([]json.RawMessage, len(inputs)), end: make([]json.RawMessage, len(inputs)), latest: upTo}
		records := q.recordCap(progress, limit)
		for i, in := range inputs {
			committed := progress.Offsets[in.Source.Name()]
			planned.start[i] = committed
			if end, found := replay.end(in.Source.Name()); found {
				// Run again as planned (below), without planning anew:
				// the input may have changed since, so that its plan
				// now would differ or fail.
				planned.end[i] = end
				if err := replay.restoreStart(in.Source, committed, end); err != nil {
					return fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), unprefixed(err))
				}
				continue
			}
			if c, ok := in.Source.(RecordCapper); ok && records > 0 {
				planned.end[i], err = c.NextCapped(ctx, committed, upTo[i], limit, records)
			} else {
				planned.end[i], err = in.Source.Next(ctx, committed, upTo[i], limit)
			}
			if err != nil {
				return fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), unprefixed(err))
			}
		}
		now, watermark := started, q.watermark(progress, started)
		q.windowCloses = q.cfg.windowCloses
		replayed := replay != nil
		if replayed {
			if !replay.Now.IsZero() {
				now, watermark = replay.Now, replay.Watermark
			}
			if replay.WindowCloses != nil {
				q.windowCloses = *replay.WindowCloses
			}
			replay = nil
		}
		hasData := planned.hasData()
		if !hasData {
			// Timers, waiting and the end read or wait for what the last
			// batch committed.
			if err := q.settle(); err != nil {
				return err
			}
		}
		latestOffset := q.cfg.clock().Sub(started)
		// A replayed batch runs whatever it holds: its first attempt ran;
		// so do the windows the last batch left (WindowClosesPerBatch),
		// which close what it began.
		due := replayed || q.windowsLeft
		// everyTrigger says the batch without data runs only because an
		// operator asks for one at every trigger: nothing is pending.
		everyTrigger := false
		if !hasData && !due && q.cfg.noDataBatches {
			if ran {
				switch q.operatorsAsk(watermark, lastWatermark) {
				case askWatermark:
					due = true
				case askEveryTrigger:
					due, everyTrigger = true, true
				}
			}
			if !due || everyTrigger {
				timers, err := q.timersDue(progress.BatchID, watermark, started)
				if err != nil {
					return err
				}
				due, everyTrigger = due || timers, everyTrigger && !timers
			}
		}
		if !hasData && !due && q.cfg.flush && stops && !flushed {
			// The input is done: batches with a watermark past every
			// event time fire every event-time timer, a bounded number
			// a batch (flushWatermark).
			if watermark, err = q.flushWatermark(watermark, &flushLeft); err != nil {
				return err
			}
			due = true
		}
		// So does a replayed batch that was that one.
		flushed = flushed || watermark.Equal(EndOfTime)
		if !hasData && !due {
			if f, ok := q.committer.(IdleFailer); ok {
				if err := f.IdleErr(); err != nil {
					return err
				}
			}
			if stops {
				q.idle(turn)
				return nil
			}
			q.tellIdle(started)
			if q.cfg.trigger.kind == triggerInterval {
				q.setStatus(statusWaitingForTrigger, false, false)
				q.idle(turn)
				err = q.cfg.sleep(ctx, started, q.cfg.trigger.interval)
			} else {
				q.setStatus(statusWaitingForData, false, false)
				q.idle(turn)
				err = q.waitForData(ctx, progress, started)
			}
			if err != nil {
				return err
			}
			continue
		}
		if everyTrigger {
			q.idle(turn) // the batch runs, but nothing of the sources or timers waits for it
		}
		if !replayed {
			if err := q.writePlan(progress.BatchID+1, planned, now, watermark); err != nil {
				return err
			}
		}
		if hasData {
			q.setStatus(statusProcessing, true, true)
		} else {
			q.setStatus(statusNoData, false, true)
		}
		next, err := q.runBatch(ctx, progress, planned, watermark, now, started)
		if err != nil {
			return err
		}
		ran, lastWatermark = true, watermark
		q.idleSince = started // the next idle trigger waits an interval to say so
		q.unreported.latestOffset = latestOffset
		progress = next
		if !q.pipelines() {
			if err := q.settle(); err != nil {
				return err
			}
		}
		if q.cfg.trigger.kind == triggerOnce && !replayed && (!q.cfg.flush || flushed) && !q.windowsLeft {
			// With FlushEventTime, one more turn flushes; after a
			// replayed batch, the run's own batch takes what came since;
			// and windows left to the next batch (WindowClosesPerBatch)
			// close in batches without data.
			return nil
		}
		if q.cfg.trigger.kind == triggerInterval && !q.windowsLeft {
			if took := q.cfg.clock().Sub(started); took > q.cfg.trigger.interval {
				// The next trigger is due already: it starts at once, as
				// Spark's ProcessingTimeExecutor starts it, warning so.
				slog.Warn("streamgen: the batch is falling behind: it took longer than the trigger interval",
					"query", q.cfg.name, "interval", q.cfg.trigger.interval, "took", took)
			}
			q.setStatus(statusWaitingForTrigger, false, false)
			if err := q.cfg.sleep(ctx, started, q.cfg.trigger.interval); err != nil {
				return err
			}
		}
	}
}

// plannedReplay returns the plan of batch id if the checkpoint holds it:
// the batch ran before, and failed or was stopped before its commit.
func (q *Query) plannedReplay(id int64) (*PlannedOffsets, error) {
	stored, ok, err := q.store.PlannedBatch()
	if err != nil || !ok || stored.BatchID != id {
		return nil, err
	}
	return &stored, nil
}

// end returns the end the plan gives the source named, if p is a plan
// (nil: none to run again).
func (p *PlannedOffsets) end(source string) (json.RawMessage, bool) {
	if p == nil {
		return nil, false
	}
	end, found := p.Ends[source]
	return end, found
}

// restoreStart hands src the start the plan recorded for it (see
// StartPlanner), if it recorded one.
func (p *PlannedOffsets) restoreStart(src Source, start, end json.RawMessage) error {
	sp, ok := src.(StartPlanner)
	planned, recorded := p.Starts[src.Name()]
	if !ok || !recorded {
		return nil
	}
	return sp.RestoreStart(start, end, planned)
}

// writePlan records batch id's plan before anything of the batch is
// seen or committed: right away or, when the previous batch's commit is
// in flight, right after that commit (the batch's sinks wait for it), so
// that a plan is durable only once the batch before it is and a restart
// replays that one with its own plan.
func (q *Query) writePlan(id int64, planned offsets, now, watermark time.Time) error {
	p := PlannedOffsets{BatchID: id, Ends: map[string]json.RawMessage{}, Now: now, Watermark: watermark, WindowCloses: &q.cfg.windowCloses}
	for i, in := range q.plan.Inputs {
		p.Ends[in.Source.Name()] = planned.end[i]
		if sp, ok := in.Source.(StartPlanner); ok {
			if start := sp.PlannedStart(planned.start[i], planned.end[i]); start != nil {
				if p.Starts == nil {
					p.Starts = map[string]json.RawMessage{}
				}
				p.Starts[in.Source.Name()] = start
			}
		}
	}
	synced := q.plansSynced()
	return q.store.after(func() error { return q.store.writePlan(p, synced) })
}

// plansSynced reports whether a batch's plan must be synced before its
// sinks run although the checkpoint syncs at an interval: a sink neither
// rewinds nor is at least once (see AtLeastOnceSink). A committer (a
// Kafka transaction) does not change that: it aborts only what goes
// through it, and the plan is not among it.
func (q *Query) plansSynced() bool {
	return q.store.opts.SyncInterval > 0 && plansSynced(q.plan, q.cfg.deadLetters)
}

// plansSynced reports whether a query of plan and deadLetters with a
// SyncInterval syncs its plans (see Query.plansSynced).
func plansSynced(plan *Plan, deadLetters DeadLetterSink) bool {
	for _, out := range plan.Outputs {
		if out.Rewind == nil && !out.AtLeastOnce {
			return true
		}
	}
	// So for the dead letters.
	switch d := deadLetters.(type) {
	case nil, BatchRewinder:
		return false
	case AtLeastOnceSink:
		return !d.AtLeastOnce()
	}
	return true
}

// windowsDue reports whether an operator with one-shot event-time
// timers (a windowed aggregation) has any due at the watermark the
// committed batch p ran with: windows that batch left to the next.
func (q *Query) windowsDue(p Progress) (bool, error) {
	threshold := p.Watermark
	if p.restored {
		threshold = p.ranWith
	}
	if threshold.IsZero() {
		return false, nil
	}
	state := q.store.NewBatch()
	defer state.Close()
	for i, op := range q.plan.Operators {
		if info := op.Info(); info.OneShotTimers && info.TimeMode == EventTimeMode {
			due, err := state.HasDueTimers(Scope{Operator: uint8(i)}, q.opWatermark(i, threshold))
			if due || err != nil {
				return due, err
			}
		}
	}
	return false, nil
}

// timersDue reports whether a timer of any operator is due in the
// committed state, that of batch, at the given watermark and processing
// time.
func (q *Query) timersDue(batch int64, watermark, now time.Time) (bool, error) {
	if len(q.plan.Operators) == 0 {
		return false, nil
	}
	state := q.store.NewBatch()
	defer state.Close()
	for i, op := range q.plan.Operators {
		info := op.Info()
		watermark := q.opWatermark(i, watermark)
		if q.expiring(i, info) {
			due, err := q.expiryDue(state, i, batch, now, watermark)
			if due || err != nil {
				return due, err
			}
		}
		if !watermark.IsZero() {
			for _, t := range q.timedVars[i] {
				due, err := state.HasTimedThrough(Var{Scope: Scope{Operator: uint8(i)}, Variable: t.id}, watermark)
				if due || err != nil {
					return due, err
				}
			}
		}
		threshold, ok := timerThreshold(info, watermark, now)
		if !ok {
			continue
		}
		due, err := state.HasDueTimers(Scope{Operator: uint8(i)}, threshold)
		if due || err != nil {
			return due, err
		}
	}
	return false, nil
}

// flushTimers bounds the event-time timers that a batch flushing the end
// of a bounded input fires (see flushWatermark).
var flushTimers = 100_000

// flushWatermark returns the watermark of the next batch that flushes the
// end of a bounded input (FlushEventTime): EndOfTime, once at most
// flushTimers event-time timers are left; else an instant past fewer
// timers (past the earliest at least, whose instant may hold more), at
// or after watermark. A batch holds its rows until it ends, and a timer
// usually writes one (a window, a session, an auction's winner): the
// rows of a flush in one batch, millions where the watermark stood far
// behind the input, were all in memory at once. The watermark still
// only moves on, to the same end. left, -1 at the flush's first batch,
// counts the timers pending then that are still to fire: the flush steps
// through those, and the timers they set (a heartbeat that sets the
// next) fire with the last batch, so that they do not step on for ever.
func (q *Query) flushWatermark(watermark time.Time, left *int) (time.Time, error) {
	state := q.store.NewBatch()
	defer state.Close()
	if *left < 0 {
		n := 0
		for i, op := range q.plan.Operators {
			if op.Info().TimeMode == EventTimeMode {
				c, err := state.countTimers(Scope{Operator: uint8(i)})
				if err != nil {
					return time.Time{}, err
				}
				n += c
			}
		}
		*left = n
	}
	if *left <= flushTimers {
		return EndOfTime, nil
	}
	var times []int64
	for i, op := range q.plan.Operators {
		info := op.Info()
		if info.TimeMode != EventTimeMode {
			continue
		}
		from := len(times)
		var err error
		if times, err = state.timerTimes(Scope{Operator: uint8(i)}, flushTimers+1, times); err != nil {
			return time.Time{}, err
		}
		if info.InclusiveTimers {
			// A timer at t fires once the watermark reaches t: as one
			// at t less a nanosecond that fires once it is past.
			for j := from; j < len(times); j++ {
				times[j]--
			}
		}
	}
	if len(times) <= flushTimers {
		return EndOfTime, nil
	}
	slices.Sort(times)
	cut := times[flushTimers] // the timers before it fire
	if cut == times[0] {
		cut++ // every timer of the earliest instant
	}
	step := time.Unix(0, cut).UTC()
	if !step.After(watermark) {
		return EndOfTime, nil // (timers behind the watermark: they all fire)
	}
	fired, _ := slices.BinarySearch(times, cut)
	*left -= fired
	return step, nil
}

// What the operators ask for after a batch (operatorsAsk).
const (
	askNothing      = iota
	askWatermark    // the watermark moved for an operator that evicts or fires by it
	askEveryTrigger // an operator runs at every trigger (processing-time timeouts)
)

// operatorsAsk reports whether an operator asks for a batch without new
// data after a batch of watermark last, when the next would have watermark
// (see NoDataRule), as Spark's shouldRunAnotherBatch: the watermark moved
// for an operator that evicts or fires by it (askWatermark), or, with a
// ProcessingTime trigger, an operator with a processing-time timeout
// (askEveryTrigger). (Spark's trigger as soon as possible would run
// batches without data back to back for the latter; here they run when a
// timer is due, as they do after a restart.)
func (q *Query) operatorsAsk(watermark, last time.Time) int {
	ask := askNothing
	for _, op := range q.plan.Operators {
		switch op.Info().NoData {
		case NoDataEveryTrigger:
			if q.cfg.trigger.kind == triggerInterval {
				ask = askEveryTrigger
			}
			fallthrough
		case NoDataOnWatermark:
			if watermark.After(last) {
				return askWatermark
			}
		}
	}
	return ask
}

// expiriesLooked are the instants through which a trigger without data
// found nothing of an operator expiring, as batch committed its state.
type expiriesLooked struct {
	batch   int64
	through [2]time.Time // by ExpiryClock
}

// expiryDue reports whether an entry of operator i's state, as batch
// committed it, expires by now (processing time) or watermark (event
// time), looking only past the instants an earlier trigger looked
// through in the same state.
func (q *Query) expiryDue(state *StateBatch, i int, batch int64, now, watermark time.Time) (bool, error) {
	if q.expiriesLooked == nil {
		q.expiriesLooked = make([]expiriesLooked, len(q.plan.Operators))
	}
	looked := &q.expiriesLooked[i]
	if looked.batch != batch {
		*looked = expiriesLooked{batch: batch}
	}
	for clock, until := range [2]time.Time{ProcessingTimeExpiry: now, EventTimeExpiry: watermark} {
		if until.IsZero() || !until.After(looked.through[clock]) {
			continue
		}
		due, err := state.expiryDue(Scope{Operator: uint8(i)}, ExpiryClock(clock), looked.through[clock], until)
		if due || err != nil {
			return due, err
		}
		looked.through[clock] = until
	}
	return false, nil
}

// expiring reports whether operator i's state may hold entries that
// expire: a variable with a time to live, or one whose entries written
// with one keep their expiries after a restart took it away.
func (q *Query) expiring(i int, info OperatorInfo) bool {
	return hasTTL(info) || i < len(q.storedExpiries) && q.storedExpiries[i]
}

// hasTTL reports whether an operator has state that expires.
func hasTTL(info OperatorInfo) bool {
	for _, s := range info.States {
		if s.TTL > 0 {
			return true
		}
	}
	return false
}

// timerThreshold is the instant a timer must be strictly before to fire:
// the batch's processing time, or the watermark (none before the first
// watermark), a nanosecond after it for an operator whose timers fire at
// the time (OperatorInfo.InclusiveTimers).
func timerThreshold(info OperatorInfo, watermark, now time.Time) (time.Time, bool) {
	var at time.Time
	switch info.TimeMode {
	case ProcessingTimeMode:
		at = now
	case EventTimeMode:
		if watermark.IsZero() {
			return time.Time{}, false
		}
		at = watermark
	default:
		return time.Time{}, false
	}
	if info.InclusiveTimers && at.Before(EndOfTime) {
		at = at.Add(time.Nanosecond) // the timers at the time too
	}
	return at, true
}

// waitForData waits, when a batch found nothing to do, for the poll
// interval, or less when every input is a DataWaiter and one of them
// sees data arrive.
func (q *Query) waitForData(ctx context.Context, progress Progress, started time.Time) error {
	waiters := make([]DataWaiter, 0, len(q.plan.Inputs))
	for _, in := range q.plan.Inputs {
		w, ok := in.Source.(DataWaiter)
		if !ok || q.cfg.manualClock != nil {
			return q.cfg.sleep(ctx, started, q.cfg.pollInterval)
		}
		waiters = append(waiters, w)
	}
	// The whole interval, whatever planning took: a wait ends as soon
	// as data arrives, and an idle query never polls back to back.
	d := q.cfg.pollInterval
	if len(waiters) == 1 {
		waiters[0].WaitForData(ctx, progress.Offsets[q.plan.Inputs[0].Source.Name()], d)
		return ctx.Err()
	}
	// Several inputs: the first to see data (or its time up) ends the
	// others' waits.
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, w := range waiters {
		committed := progress.Offsets[q.plan.Inputs[i].Source.Name()]
		wg.Go(func() {
			defer cancel()
			w.WaitForData(wctx, committed, d)
		})
	}
	wg.Wait()
	cancel()
	return ctx.Err()
}

// rewindSinks has the sinks that keep batches apart remove what they hold
// of the batches after the last committed (see BatchRewinder): batches
// whose commits a machine crash lost while their output stayed (with
// SyncInterval, or a run with it before this one), or that a checkpoint
// rebuilt from a changelog behind it no longer holds (AsyncProgress);
// with nothing committed, what they hold of this query's.
func (q *Query) rewindSinks(ctx context.Context, last int64, anyCommitted bool) error {
	committed := last
	if !anyCommitted {
		committed = -1
	}
	for _, out := range q.plan.Outputs {
		if out.Rewind == nil {
			continue
		}
		if err := out.Rewind(ctx, committed); err != nil {
			return fmt.Errorf("streamgen: sink %s: %w", out.Description, unprefixed(err))
		}
	}
	if r, ok := q.cfg.deadLetters.(BatchRewinder); ok {
		if err := r.RewindAfter(ctx, committed); err != nil {
			return fmt.Errorf("streamgen: dead-letter sink: %w", unprefixed(err))
		}
	}
	return nil
}
