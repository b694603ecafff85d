package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Query is a running query. Its methods are safe for concurrent use.
type Query struct {
	id, runID string
	cfg       config
	plan      *Plan
	store     *Store
	committer Committer
	cancel    context.CancelFunc
	// done is closed when the query has ended (finish): its goroutine
	// returned, or was given up on (see Stop).
	done     chan struct{}
	finished sync.Once
	// listening orders the calls of listeners: ended is set by finish,
	// after which none is called.
	listening sync.Mutex
	ended     bool

	mu       sync.Mutex
	err      error
	status   Status
	progress []QueryProgress
}

// Start opens the checkpoint, checks it against the plan, and starts the
// query's loop in a goroutine it owns. The loop stops when ctx is
// cancelled, when Stop is called, when a Once or AvailableNow trigger has
// done its work, or at the first error; AwaitTermination waits for that.
// Package typed compiles the plan; programs call typed's Start.
func Start(ctx context.Context, plan *Plan, opts ...Option) (*Query, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := validatePlan(plan); err != nil {
		return nil, err
	}
	fs, dir := cfg.fs, cfg.checkpoint
	if dir == "" {
		fs, dir = vfs.NewMem(), "checkpoint"
	}
	store, err := OpenStore(dir, StoreOptions{FS: fs, SyncInterval: cfg.syncInterval, StateCacheSize: cfg.stateCache, CloseTimeout: cfg.closeTimeout})
	if err != nil {
		return nil, err
	}
	meta := planMeta(plan)
	meta.ID = newID()
	meta, err = store.checkMeta(meta, cfg.allowChanges, func(w string) { slog.Warn("streamgen: " + w) })
	if failed := store.Err(); failed != nil {
		err = failed // the metadata's read or write met a storage fault
	}
	if err != nil {
		store.Close()
		return nil, err
	}
	id := meta.ID
	for i, op := range plan.Operators {
		if v, ok := op.(VariableIDs); ok {
			ids := make([]uint8, 0, len(op.Info().States))
			for _, s := range op.Info().States {
				ids = append(ids, meta.Operators[i].Variables[s.Name].ID)
			}
			v.SetVariableIDs(ids)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	q := &Query{id: id, runID: newID(), cfg: cfg, plan: plan, store: store, committer: store, cancel: cancel, done: make(chan struct{})}
	if cfg.committer != nil {
		q.committer = cfg.committer(store)
	}
	q.status = Status{Message: "Initializing sources"}
	for _, l := range cfg.listeners {
		if l, ok := l.(interface{ OnQueryStarted(QueryStarted) }); ok {
			l.OnQueryStarted(QueryStarted{ID: q.id, RunID: q.runID, Name: cfg.name, Time: cfg.clock()})
		}
	}
	go q.run(ctx)
	go q.watch()
	return q, nil
}

func validatePlan(p *Plan) error {
	var errs []error
	if len(p.Inputs) == 0 {
		errs = append(errs, errors.New("the pipeline has no source"))
	}
	if len(p.Outputs) == 0 {
		errs = append(errs, errors.New("the pipeline has no sink"))
	}
	if len(p.Operators) > 255 {
		errs = append(errs, fmt.Errorf("%d stateful operators: at most 255", len(p.Operators)))
	}
	seen := map[string]bool{}
	for _, in := range p.Inputs {
		name := in.Source.Name()
		if seen[name] {
			errs = append(errs, fmt.Errorf("two sources are named %q: give one another name", name))
		}
		seen[name] = true
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: cannot start the query: %w", err)
	}
	return nil
}

func isListener(l any) bool {
	_, a := l.(interface{ OnQueryStarted(QueryStarted) })
	_, b := l.(interface{ OnQueryProgress(QueryProgress) })
	_, c := l.(interface{ OnQueryTerminated(QueryTerminated) })
	return a || b || c
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the query's id: made when its checkpoint was created, the
// same at every start on that checkpoint.
func (q *Query) ID() string { return q.id }

// RunID returns the id of this run of the query: new at every Start.
func (q *Query) RunID() string { return q.runID }

// Stop stops the query and waits for its goroutine to end; a batch in
// flight is abandoned, uncommitted, and runs again at the next start. It
// waits up to the close timeout (CloseTimeout): when the goroutine has not
// ended by then (a call into the store, a source, a sink or a function
// that does not return), Stop ends the query with an error wrapping
// ErrStoreNotClosed and returns it, and the goroutine is left to end on
// its own, if it ever does.
func (q *Query) Stop() error {
	q.cancel()
	t := time.NewTimer(q.cfg.closeTimeout)
	defer t.Stop()
	select {
	case <-q.done:
	case <-t.C:
		q.finish(q.notEnded("after Stop"))
	}
	return q.Err()
}

// watch ends the query when its store fails: it cancels the loop, which
// stops at its next check, and, when the loop is stuck in Pebble (a
// write stalled behind a flush that keeps failing), gives up on it after
// the close timeout.
func (q *Query) watch() {
	select {
	case <-q.done:
		return
	case <-q.store.failed:
	}
	q.cancel()
	t := time.NewTimer(q.cfg.closeTimeout)
	defer t.Stop()
	select {
	case <-q.done:
	case <-t.C:
		q.finish(q.notEnded("after its store failed"))
	}
}

// notEnded is the error of a query whose goroutine did not end within the
// close timeout.
func (q *Query) notEnded(when string) error {
	err := fmt.Errorf("%w in %s: the query's goroutine did not end within %v %s (a call into the store, a source, a sink or a function did not return); "+
		"the store's files stay open and locked until it does",
		ErrStoreNotClosed, q.store.dir, q.cfg.closeTimeout, when)
	if f := q.store.Err(); f != nil {
		err = fmt.Errorf("%w: %w", f, err)
	}
	return err
}

// AwaitTermination waits for the query to end and returns its error (nil
// when it stopped cleanly).
func (q *Query) AwaitTermination() error {
	<-q.done
	return q.Err()
}

// Done is closed when the query has ended.
func (q *Query) Done() <-chan struct{} { return q.done }

// Err returns the error that ended the query, or nil.
func (q *Query) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// Status returns what the query is doing now.
func (q *Query) Status() Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.status
}

// RecentProgress returns the reports of the most recent batches, oldest
// first (at most 100).
func (q *Query) RecentProgress() []QueryProgress {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]QueryProgress(nil), q.progress...)
}

// LastProgress returns the report of the last batch; ok is false before
// the first.
func (q *Query) LastProgress() (p QueryProgress, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.progress) == 0 {
		return p, false
	}
	return q.progress[len(q.progress)-1], true
}

// The messages of Status, as Spark's.
const (
	statusWaitingForData    = "Waiting for data to arrive"
	statusWaitingForTrigger = "Waiting for next trigger"
	statusProcessing        = "Processing new data"
	statusNoData            = "No new data but cleaning up state"
	statusStopped           = "Stopped"
)

func (q *Query) setStatus(msg string, data, active bool) {
	q.mu.Lock()
	q.status = Status{Message: msg, IsDataAvailable: data, IsTriggerActive: active}
	q.mu.Unlock()
}

// run is the query's loop: one micro-batch per turn.
func (q *Query) run(ctx context.Context) {
	err := q.loopSafely(ctx)
	switch failed := q.store.Err(); {
	case failed != nil && (err == nil || errors.Is(err, context.Canceled)):
		err = failed // the loop was cancelled by watch
	case failed != nil && !errors.Is(err, ErrStoreFailed):
		err = errors.Join(failed, err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		err = nil // stopped, not failed
	}
	for _, op := range q.plan.Operators {
		if c, ok := op.(Closer); ok {
			if cerr := c.Close(); cerr != nil && err == nil {
				info := op.Info()
				err = fmt.Errorf("streamgen: %s (%s): close: %w", info.Kind, info.Name, cerr)
			}
		}
	}
	switch cerr := q.store.Close(); {
	case cerr == nil:
	case err == nil, errors.Is(cerr, ErrStoreNotClosed) && errors.Is(err, ErrStoreFailed):
		err = cerr // which says the failure too
	case errors.Is(cerr, ErrStoreNotClosed):
		err = errors.Join(err, cerr)
	}
	q.finish(err)
}

// loopSafely runs the loop, turning a panic outside a batch's stages
// (which safely covers) into an error.
func (q *Query) loopSafely(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("streamgen: panic: %v\n%s", r, debug.Stack())
		}
	}()
	return q.loop(ctx)
}

// finish ends the query with err, once: the first call wins, from the
// query's goroutine at its end, or from Stop or watch when it did not end
// in time. It calls OnQueryTerminated on the calling goroutine.
func (q *Query) finish(err error) {
	q.finished.Do(func() {
		q.mu.Lock()
		q.err = err
		q.status = Status{Message: statusStopped}
		q.mu.Unlock()
		q.listening.Lock()
		q.ended = true
		for _, l := range q.cfg.listeners {
			if l, ok := l.(interface{ OnQueryTerminated(QueryTerminated) }); ok {
				l.OnQueryTerminated(QueryTerminated{ID: q.id, RunID: q.runID, Err: err})
			}
		}
		q.listening.Unlock()
		q.cancel()
		close(q.done)
	})
}

// offsets are the planned offsets of a batch, by input.
type offsets struct {
	start, end []json.RawMessage
}

func (o offsets) hasData() bool {
	for i := range o.start {
		if !bytes.Equal(o.start[i], o.end[i]) {
			return true
		}
	}
	return false
}

func (q *Query) loop(ctx context.Context) error {
	progress, _, err := q.store.Progress()
	if err != nil {
		return err
	}
	inputs := q.plan.Inputs
	available := func() ([]json.RawMessage, error) {
		upTo := make([]json.RawMessage, len(inputs))
		for i, in := range inputs {
			if upTo[i], err = in.Source.Available(ctx); err != nil {
				return nil, fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), err)
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
	if q.cfg.trigger.kind == triggerOnce {
		limit = AllAvailable
	}
	flushed := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		started := q.cfg.clock()
		if !stops {
			if upTo, err = available(); err != nil {
				return err
			}
		}
		planned := offsets{start: make([]json.RawMessage, len(inputs)), end: make([]json.RawMessage, len(inputs))}
		for i, in := range inputs {
			committed := progress.Offsets[in.Source.Name()]
			planned.start[i] = committed
			if planned.end[i], err = in.Source.Next(ctx, committed, upTo[i], limit); err != nil {
				return fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), err)
			}
		}
		latestOffset := q.cfg.clock().Sub(started)
		hasData := planned.hasData()
		watermark := q.watermark(progress, started)
		due := false
		if !hasData && q.cfg.noDataBatches {
			if due, err = q.timersDue(watermark, started); err != nil {
				return err
			}
		}
		if !hasData && !due && q.cfg.flush && stops && !flushed {
			// The input is done: one more batch, with a watermark past
			// every event time, fires every event-time timer.
			flushed, due, watermark = true, true, EndOfTime
		}
		if !hasData && !due {
			if stops {
				return nil
			}
			if q.cfg.trigger.kind == triggerInterval {
				q.setStatus(statusWaitingForTrigger, false, false)
				err = q.cfg.sleep(ctx, started, q.cfg.trigger.interval)
			} else {
				q.setStatus(statusWaitingForData, false, false)
				err = q.cfg.sleep(ctx, started, q.cfg.pollInterval)
			}
			if err != nil {
				return err
			}
			continue
		}
		if hasData {
			q.setStatus(statusProcessing, true, true)
		} else {
			q.setStatus(statusNoData, false, true)
		}
		next, report, err := q.runBatch(ctx, progress, planned, watermark, started)
		if err != nil {
			return err
		}
		report.DurationMs[DurationLatestOffset] = latestOffset.Milliseconds()
		progress = next
		q.report(report)
		if q.cfg.trigger.kind == triggerOnce && (!q.cfg.flush || flushed) {
			return nil // with FlushEventTime, one more turn flushes
		}
		if q.cfg.trigger.kind == triggerInterval {
			q.setStatus(statusWaitingForTrigger, false, false)
			if err := q.cfg.sleep(ctx, started, q.cfg.trigger.interval); err != nil {
				return err
			}
		}
	}
}

// timersDue reports whether a timer of any operator is due in the
// committed state at the given watermark and processing time.
func (q *Query) timersDue(watermark, now time.Time) (bool, error) {
	if len(q.plan.Operators) == 0 {
		return false, nil
	}
	state := q.store.NewBatch()
	defer state.Close()
	for i, op := range q.plan.Operators {
		info := op.Info()
		if hasTTL(info) {
			due, err := state.HasExpiringState(Scope{Operator: uint8(i)}, now, watermark)
			if due || err != nil {
				return due, err
			}
		}
		threshold, ok := timerThreshold(info.TimeMode, watermark, now)
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
// watermark).
func timerThreshold(mode TimeMode, watermark, now time.Time) (time.Time, bool) {
	switch mode {
	case ProcessingTimeMode:
		return now, true
	case EventTimeMode:
		return watermark, !watermark.IsZero()
	}
	return time.Time{}, false
}

// watermark computes the watermark in effect for the next batch from the
// committed progress: the minimum over the partitions that are not idle of
// their watermarks (largest event time − delay), never lower than before.
func (q *Query) watermark(p Progress, now time.Time) time.Time {
	if !q.plan.Watermark {
		return time.Time{}
	}
	var low time.Time
	found := false
	for part, w := range p.PartitionWatermarks {
		if q.cfg.idleTimeout > 0 {
			if last, ok := p.LastActive[part]; ok && now.Sub(last) > q.cfg.idleTimeout {
				continue
			}
		}
		if !found || w.Before(low) {
			low, found = w, true
		}
	}
	if !found || low.Before(p.Watermark) {
		return p.Watermark
	}
	return low
}

// runBatch runs, writes and commits one batch, and returns the new
// progress and its report. Nothing is committed when it fails.
func (q *Query) runBatch(ctx context.Context, p Progress, planned offsets, watermark, now time.Time) (Progress, QueryProgress, error) {
	b := q.newBatch(p, watermark, now)
	committed := false
	defer func() {
		if !committed {
			b.state.Close()
		}
		for _, op := range q.plan.Operators {
			op.Groups().Reset()
			op.EndBatch()
		}
	}()
	durations := map[string]time.Duration{}
	if err := q.safely(b, func() error { return q.process(ctx, b, planned, durations) }); err != nil {
		return p, QueryProgress{}, err
	}
	next := Progress{
		BatchID:             b.ID,
		Watermark:           watermark,
		Offsets:             copyMap(p.Offsets),
		PartitionWatermarks: b.watermarks,
		LastActive:          copyMap(p.LastActive),
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
	}
	commitStart := q.cfg.clock()
	if err := q.committer.Commit(b.state, next); err != nil {
		return p, QueryProgress{}, err
	}
	committed = true
	finished := q.cfg.clock()
	durations[DurationWALCommit] = finished.Sub(commitStart)
	durations[DurationTriggerExecution] = finished.Sub(now)
	return next, q.makeReport(b, planned, durations, finished), nil
}

func (q *Query) newBatch(p Progress, watermark, now time.Time) *Batch {
	b := &Batch{
		ID:           p.BatchID + 1,
		Watermark:    watermark,
		Now:          now,
		First:        p.BatchID < 0,
		MemoryBudget: q.cfg.batchMemory,
		SpillDir:     q.cfg.spillDir,
		state:        q.store.NewBatch(),
		watermarks:   copyMap(p.PartitionWatermarks),
		active:       map[string]bool{},
		ops:          make([]opRun, len(q.plan.Operators)),
		inputs:       make([]inputRun, len(q.plan.Inputs)),
	}
	if b.watermarks == nil {
		b.watermarks = map[string]time.Time{}
	}
	for i, in := range q.plan.Inputs {
		b.inputs[i].name = in.Source.Name()
	}
	for i := range b.ops {
		b.ops[i].scope = Scope{Operator: uint8(i)}
		if i < len(p.StateRows) {
			b.ops[i].total = p.StateRows[i]
		}
	}
	return b
}

// The phases of a batch, as keys of QueryProgress.DurationMs.
const (
	// DurationLatestOffset: planning the batch's offsets.
	DurationLatestOffset = "latestOffset"
	// DurationGetBatch: reading and decoding the input, and the stages
	// before the first stateful operator.
	DurationGetBatch = "getBatch"
	// DurationStateOperators: the stateful operators' calls for keys
	// with rows, and the stages between and after them.
	DurationStateOperators = "stateOperators"
	// DurationTimers: the calls for due timers.
	DurationTimers = "timers"
	// DurationSink: writing the outputs and dead letters.
	DurationSink = "sink"
	// DurationAddBatch: everything after reading up to the commit:
	// operators, timers and sinks (Spark's addBatch).
	DurationAddBatch = "addBatch"
	// DurationWALCommit: committing state and progress.
	DurationWALCommit = "walCommit"
	// DurationTriggerExecution: the whole batch.
	DurationTriggerExecution = "triggerExecution"
)

// process runs a batch's phases in order: read, operators (keys with rows,
// then due timers, operator by operator), outputs.
func (q *Query) process(ctx context.Context, b *Batch, planned offsets, durations map[string]time.Duration) error {
	t := q.cfg.clock()
	phase := func(name string) {
		now := q.cfg.clock()
		durations[name] += now.Sub(t)
		t = now
	}
	for i, in := range q.plan.Inputs {
		if bytes.Equal(planned.start[i], planned.end[i]) {
			continue
		}
		if err := in.Read(ctx, b, planned.start[i], planned.end[i]); err != nil {
			return fmt.Errorf("streamgen: batch %d: source %s: %w", b.ID, in.Source.Name(), err)
		}
	}
	phase(DurationGetBatch)
	addStart := t
	for i, op := range q.plan.Operators {
		if err := q.runOperator(ctx, b, i, op, phase); err != nil {
			return err
		}
	}
	for i, out := range q.plan.Outputs {
		rows, err := out.Write(ctx, b)
		if err != nil {
			return fmt.Errorf("streamgen: batch %d: sink %s: %w", b.ID, out.Description, err)
		}
		if i == 0 {
			b.outputRows = rows
		}
	}
	if len(b.deadLetters) > 0 {
		if q.cfg.deadLetters != nil {
			if err := q.cfg.deadLetters.WriteDeadLetters(ctx, b.ID, b.deadLetters); err != nil {
				return fmt.Errorf("streamgen: batch %d: dead-letter sink: %w", b.ID, err)
			}
		} else {
			for _, d := range b.deadLetters {
				slog.Warn("streamgen: dead letter", "source", d.Source, "position", d.Position, "error", d.Error)
			}
		}
	}
	phase(DurationSink)
	durations[DurationAddBatch] = q.cfg.clock().Sub(addStart)
	return nil
}

// runOperator runs operator i's calls: its initial state in the first
// batch, a call per key with rows, then a call per due timer.
func (q *Query) runOperator(ctx context.Context, b *Batch, i int, op Operator, phase func(string)) error {
	info := op.Info()
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
	groups := op.Groups()
	groups.sort()
	if n := groups.Len(); n > len(b.ops[i].dirty) {
		b.ops[i].dirty = slices.Grow(b.ops[i].dirty, n-len(b.ops[i].dirty))[:n]
	}
	k := &b.ops[i].keyState
	for g := range groups.Len() {
		if g%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return err
			}
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
	// data.
	if hasTTL(info) {
		n, err := b.state.ExpireState(b.ops[i].scope, b.Now, b.Watermark)
		if err != nil {
			return fail(b.fail(err))
		}
		b.ops[i].removed += n
		b.ops[i].total -= n
	}
	return nil
}

// runTimers calls operator i for each of its timers due in the batch.
func (q *Query) runTimers(ctx context.Context, b *Batch, i int, op Operator, info OperatorInfo, phase func(string)) error {
	fail := func(err error) error {
		return fmt.Errorf("streamgen: batch %d: %s (%s): %w", b.ID, info.Kind, info.Name, err)
	}
	k := &b.ops[i].keyState
	threshold, ok := timerThreshold(info.TimeMode, b.Watermark, b.Now)
	if !ok {
		return nil
	}
	cursor := b.state.DueTimers(b.ops[i].scope, threshold)
	for {
		due, err := cursor.Next()
		if err != nil {
			return fail(b.fail(err))
		}
		if len(due) == 0 {
			break
		}
		for _, t := range due {
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
	total := finished.Sub(b.Now)
	var inputRows int64
	for _, in := range b.inputs {
		inputRows += in.rows
	}
	rate := func(rows int64) float64 {
		if secs := total.Seconds(); secs > 0 {
			return float64(rows) / secs
		}
		return 0
	}
	r := QueryProgress{
		ID:                     q.id,
		RunID:                  q.runID,
		Name:                   q.cfg.name,
		Timestamp:              b.Now,
		BatchID:                b.ID,
		NumInputRows:           inputRows,
		InputRowsPerSecond:     q.inputRate(inputRows, b.Now),
		ProcessedRowsPerSecond: rate(inputRows),
		DurationMs:             map[string]int64{},
		Sink:                   SinkProgress{Description: q.plan.Outputs[0].Description, NumOutputRows: b.outputRows},
		NumDeadLetters:         int64(len(b.deadLetters)),
	}
	for name, d := range durations {
		r.DurationMs[name] = d.Milliseconds()
	}
	for i, in := range q.plan.Inputs {
		r.Sources = append(r.Sources, SourceProgress{
			Description:            in.Source.Name(),
			StartOffset:            string(planned.start[i]),
			EndOffset:              string(planned.end[i]),
			NumInputRows:           b.inputs[i].rows,
			InputRowsPerSecond:     q.inputRate(b.inputs[i].rows, b.Now),
			ProcessedRowsPerSecond: rate(b.inputs[i].rows),
		})
	}
	if q.plan.Watermark && !b.Watermark.IsZero() {
		r.EventTime = map[string]string{"watermark": b.Watermark.UTC().Format(time.RFC3339Nano)}
	}
	for i, op := range q.plan.Operators {
		info := op.Info()
		o := &b.ops[i]
		r.StateOperators = append(r.StateOperators, StateOperatorProgress{
			OperatorName:              info.Kind,
			NumRowsTotal:              o.total,
			NumRowsUpdated:            o.updated,
			NumRowsRemoved:            o.removed,
			NumRowsDroppedByWatermark: o.late,
		})
	}
	return r
}

// inputRate is rows over the time since the previous batch started, as
// Spark's inputRowsPerSecond.
func (q *Query) inputRate(rows int64, now time.Time) float64 {
	last, ok := q.LastProgress()
	if !ok {
		return 0
	}
	if secs := now.Sub(last.Timestamp).Seconds(); secs > 0 {
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
	// A query given up on (finish) tells its listeners nothing more.
	q.listening.Lock()
	defer q.listening.Unlock()
	if q.ended {
		return
	}
	for _, l := range q.cfg.listeners {
		if l, ok := l.(interface{ OnQueryProgress(QueryProgress) }); ok {
			l.OnQueryProgress(r)
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
