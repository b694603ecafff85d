package runtime

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	goruntime "runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
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
	// releaseKeys end the query's use of its operators' key encodings
	// (OperatorInfo.UseKeys), once its store has closed.
	releaseKeys []func()
	// done is closed when the query has ended (finish): its goroutine
	// returned, or was given up on (see Stop).
	done     chan struct{}
	finished sync.Once
	// listening orders the calls of listeners: ended is set by finish,
	// after which none is called.
	listening sync.Mutex
	ended     bool
	// loopGoroutine is the id of the query's goroutine, and
	// listenerGoroutine that of a goroutine that gave up on it while it
	// calls OnQueryTerminated: Stop and AwaitTermination called there
	// would wait for their own caller (see calledByQuery).
	loopGoroutine, listenerGoroutine atomic.Uint64
	// finishing is set once finish has set the query's error.
	finishing atomic.Bool
	// rerun is the batch after the last committed at the loop's start,
	// which a run before may have written (the loop's).
	rerun int64

	mu       sync.Mutex
	err      error
	status   Status
	progress []QueryProgress
	// live counts the running batch's reading, for Status.
	live liveBatch
	// unreported is the last batch run, until its commit has ended and
	// it is reported (settle); used by the query's goroutine only.
	unreported *pendingReport
	// untold are the batches committed that the sources have not been
	// told of (tellCommitted): not yet durable.
	untold []committedBatch
	// timedVars are, per operator, its variables ordered by event time
	// (EncodingByEventTime), which the loop evicts.
	timedVars [][]timedState
	// keyed are, per operator, its variables of one entry a key (a
	// value, with no suffix), whose entries runTimers reads ahead for
	// the keys of the timers about to fire (see StateBatch.prefetch).
	keyed [][]uint8
	// storedExpiries marks, per operator, the ones with a variable whose
	// stored entries may carry expiries though it has no time to live
	// now (VariableMeta.Expiries): their expired entries are still swept.
	storedExpiries []bool
	// expiriesLooked are, per operator, the instants (by ExpiryClock)
	// through which a trigger without data found nothing expiring, in the
	// state as batch committed it: the next trigger looks past them, so
	// that an idle query reads each stale expiry once (see
	// StateBatch.expiryDue). Used by the query's goroutine only.
	expiriesLooked []expiriesLooked
	// keyIndexDropped marks the scopes of operators with one-shot timers
	// whose index of timers by key this run has deleted (see runTimers),
	// touched by the batch loop alone.
	keyIndexDropped map[Scope]bool
	// windowsLeft is true when the last batch run left due windows to
	// the next (WindowClosesPerBatch); windowCloses is the bound the
	// batch running has (its plan's, when it runs again).
	windowsLeft bool
	// trigger is when the loop's current trigger started, and
	// lastTrigger when the one before it did (zero: none yet this
	// start), with data or without, as Spark's trigger timestamps, for
	// inputRowsPerSecond; touched by the batch loop alone.
	trigger, lastTrigger time.Time
	// idleSince is when the query last told its listeners it was idle,
	// or ran a batch (zero: neither yet this start; see tellIdle).
	idleSince time.Time
	// warnedBatchState is set once a batch of this start has written
	// more state than MaxBatchStateBytes, and the loop said so.
	warnedBatchState bool
	windowCloses     int
	// outputDelays are the operators' OutputDelay, and watermarkOffsets
	// how far behind the query's watermark each runs for them (see
	// watermarkOffsets).
	outputDelays, watermarkOffsets []time.Duration

	// turns counts the loop's turns (a trigger: a look at the sources,
	// then a batch or a wait), and idleTurn is the last turn that found
	// nothing to run, everything before it committed; idleMoved is closed
	// when idleTurn moves (see ProcessAllAvailable).
	turnMu    sync.Mutex
	turns     int64
	idleTurn  int64
	idleMoved chan struct{}
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
	if len(cfg.operatorChecks) > 0 {
		infos := make([]OperatorInfo, len(plan.Operators))
		for i, op := range plan.Operators {
			infos[i] = op.Info()
		}
		for _, check := range cfg.operatorChecks {
			if err := check(infos); err != nil {
				return nil, err
			}
		}
	}
	if err := checkStart(plan, cfg.deadLetters); err != nil {
		return nil, err
	}
	fs, dir := cfg.fs, cfg.checkpoint
	if dir == "" {
		fs, dir = vfs.NewMem(), "checkpoint"
	}
	stateCache := cfg.stateCache
	if len(plan.Operators) == 0 {
		stateCache = -1 // no state to cache (nor a share of a budget to take)
	}
	store, err := OpenStore(dir, StoreOptions{FS: fs, SyncInterval: cfg.syncInterval, SyncAtOnce: cfg.syncInterval > 0 && plansSynced(plan, cfg.deadLetters),
		StateCacheSize: stateCache, CloseTimeout: cfg.closeTimeout,
		DiskReserve: cfg.diskReserve, CacheSize: cfg.blockCache, MemTableSize: cfg.memTable, Shared: cfg.shared, RangeReads: readsRanges(plan)})
	if err != nil {
		return nil, err
	}
	var committer Committer = store
	if cfg.committer != nil {
		committer = cfg.committer(store)
		if c, ok := committer.(TriggerChecker); ok {
			if err := c.CheckTrigger(cfg.trigger); err != nil {
				closeCommitter(committer)
				store.Close()
				return nil, err
			}
		}
		if r, ok := committer.(Restorer); ok {
			store.keepDeleted = true
			if err := r.Restore(ctx); err != nil {
				closeCommitter(committer)
				store.Close()
				return nil, fmt.Errorf("streamgen: restore the checkpoint: %w", err)
			}
		}
	}
	if err := store.chooseLayouts(plan); err != nil {
		closeCommitter(committer)
		store.Close()
		return nil, err
	}
	meta := planMeta(plan)
	meta.ID = newID()
	meta.WatermarkPolicy = cfg.watermarkPolicy.String()
	meta, err = store.checkMeta(meta, metaChanges{pipeline: cfg.allowChanges, fieldLoss: cfg.allowFieldLoss, restored: store.keepDeleted, policyAsked: cfg.watermarkPolicySet}, func(w string) { slog.Warn("streamgen: " + w) })
	if failed := store.Err(); failed != nil {
		err = failed // the metadata's read or write met a storage fault
	}
	if err == nil {
		// The plan of a batch to run again is read at once, so that a
		// damaged one is refused here rather than by the loop.
		_, _, err = store.PlannedBatch()
	}
	if err != nil {
		closeCommitter(committer)
		store.Close()
		return nil, err
	}
	id := meta.ID
	if meta.WatermarkPolicy == MaxWatermark.String() { // the checkpoint's (see Meta.WatermarkPolicy)
		cfg.watermarkPolicy = MaxWatermark
	} else {
		cfg.watermarkPolicy = MinWatermark
	}
	timedVars := make([][]timedState, len(plan.Operators))
	keyed := make([][]uint8, len(plan.Operators))
	storedExpiries := make([]bool, len(plan.Operators))
	var releases []func() // of the operators' key encodings, when the query ends
	for i, op := range plan.Operators {
		for _, s := range op.Info().States {
			if s.Encoding == EncodingJoinBuffer && store.state != nil {
				// Scanned, never read by key: the cache would only follow
				// its writes.
				store.state.skip(uint8(i), meta.Operators[i].Variables[s.Name].ID)
			}
			if (s.Encoding == EncodingJoinBuffer || s.Kind == "list" || s.Kind == "map") && store.state != nil {
				// Read by scans of a key's entries: the cache notes which
				// keys have had one.
				store.state.scan(uint8(i), meta.Operators[i].Variables[s.Name].ID)
			}
			if (s.Kind == "value" || s.Kind == "") && s.Encoding != EncodingByEventTime && s.Encoding != EncodingJoinBuffer {
				keyed[i] = append(keyed[i], meta.Operators[i].Variables[s.Name].ID)
			}
			if s.Encoding == EncodingByEventTime {
				vid := meta.Operators[i].Variables[s.Name].ID
				timedVars[i] = append(timedVars[i], timedState{id: vid, index: s.Index})
				if store.state != nil {
					store.state.skip(uint8(i), vid)
				}
			}
		}
		if info := op.Info(); info.LegacyKeyType != "" && info.UseKeys != nil {
			// checkMeta kept a checkpoint's legacy key type.
			release, err := info.UseKeys(meta.Operators[i].KeyType == info.LegacyKeyType)
			if err != nil {
				for _, r := range releases {
					r()
				}
				closeCommitter(committer)
				store.Close()
				return nil, fmt.Errorf("streamgen: operator %d (%s %q): %w", i, info.Kind, info.Name, err)
			}
			releases = append(releases, release)
		}
		if v, ok := op.(VariableIDs); ok {
			ids := make([]uint8, 0, len(op.Info().States))
			for _, s := range op.Info().States {
				ids = append(ids, meta.Operators[i].Variables[s.Name].ID)
			}
			v.SetVariableIDs(ids)
		}
		for _, v := range meta.Operators[i].Variables {
			if v.Expiries != "" {
				storedExpiries[i] = true
			}
		}
		if v, ok := op.(VariableExpiries); ok {
			event := make([]bool, 0, len(op.Info().States))
			for _, s := range op.Info().States {
				event = append(event, meta.Operators[i].Variables[s.Name].Expiries == "event time")
			}
			v.SetVariableExpiries(event)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	q := &Query{id: id, runID: newID(), cfg: cfg, plan: plan, store: store, committer: committer, cancel: cancel, done: make(chan struct{}), timedVars: timedVars, keyed: keyed, storedExpiries: storedExpiries, releaseKeys: releases}
	q.outputDelays, q.watermarkOffsets = watermarkOffsets(plan)
	q.status = Status{Message: "Initializing sources"}
	for _, l := range cfg.listeners {
		if l, ok := l.(interface{ OnQueryStarted(QueryStarted) }); ok {
			tellListener("OnQueryStarted", func() {
				l.OnQueryStarted(QueryStarted{ID: q.id, RunID: q.runID, Name: cfg.name, Time: cfg.clock(), Query: q})
			})
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
	_, d := l.(interface{ OnQueryIdle(QueryIdle) })
	return a || b || c || d
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the query's id: made when its checkpoint was created, the
// same at every start on that checkpoint.
func (q *Query) ID() string { return q.id }

// Name returns the query's name (the Name option), or its id when it
// has none.
func (q *Query) Name() string {
	if q.cfg.name != "" {
		return q.cfg.name
	}
	return q.id
}

// RunID returns the id of this run of the query: new at every Start.
func (q *Query) RunID() string { return q.runID }

// Stop stops the query and waits for its goroutine to end; a batch in
// flight is abandoned, uncommitted, and runs again at the next start. It
// waits up to the close timeout (CloseTimeout): when the goroutine has not
// ended by then (a call into the store, a source, a sink or a function
// that does not return), Stop ends the query with an error wrapping
// ErrStoreNotClosed and returns it, and the goroutine is left to end on
// its own, if it ever does.
//
// Called by the query's own goroutine (a listener, or a function of the
// pipeline, on the query's goroutine or on one of a processor's
// concurrent handlers), Stop cancels the query and returns nil at once:
// the query ends once that call has returned. (A goroutine that a
// handler starts itself is not told apart: Stop waits there until the
// close timeout.)
func (q *Query) Stop() error {
	q.cancel()
	if q.calledByQuery() {
		return nil
	}
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
//
// Called by the query's own goroutine (a listener, or a function of the
// pipeline, on the query's goroutine or on one of a processor's
// concurrent handlers), which the query's end waits for, it returns
// ErrAwaitedByQuery at once (from OnQueryTerminated, the query's error).
// (A goroutine that a handler starts itself and waits for is not told
// apart: AwaitTermination never returns there.)
func (q *Query) AwaitTermination() error {
	if q.calledByQuery() {
		if q.finishing.Load() {
			return q.Err()
		}
		return ErrAwaitedByQuery
	}
	<-q.done
	return q.Err()
}

// ErrAwaitedByQuery is returned by AwaitTermination (and wrapped by
// ProcessAllAvailable) called by the query's own goroutine (a listener,
// or a function of the pipeline), whose return the query waits for
// before it ends.
var ErrAwaitedByQuery = errors.New("streamgen: called by the query's own goroutine (a listener, or a function of the pipeline), which the query waits for: call Stop there, or wait for the query from another goroutine")

// calledByQuery reports whether the calling goroutine is the query's,
// one that Batch.Go started from it, or one calling its listeners as it
// gives up on the query.
func (q *Query) calledByQuery() bool {
	id, creator := goroutineIDs()
	loop := q.loopGoroutine.Load()
	return id == loop || id == q.listenerGoroutine.Load() || creator != 0 && creator == loop
}

// goroutineIDs returns the calling goroutine's id, read from the first
// line of its stack ("goroutine 18 [running]:"), and, when Batch.Go
// started it, the id of the goroutine that called Go, read from the
// stack's last ("created by .../runtime.(*Batch).Go in goroutine 7"); 0
// when another started it. Only Stop, AwaitTermination and
// ProcessAllAvailable ask, and the query's goroutine once.
func goroutineIDs() (id, creator uint64) {
	buf := make([]byte, 4096)
	for {
		n := goruntime.Stack(buf, false)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	id = leadingNumber(bytes.TrimPrefix(buf, []byte("goroutine ")))
	createdBy := createdByBatchGo()
	if i := bytes.LastIndex(buf, createdBy); i >= 0 {
		creator = leadingNumber(buf[i+len(createdBy):])
	}
	return id, creator
}

// createdByBatchGo is how a stack's last line begins for a goroutine that
// Batch.Go started: "\ncreated by " and Go's name as the traceback
// prints it, read from the function itself (whatever the module's
// path), then " in goroutine ".
var createdByBatchGo = sync.OnceValue(func() []byte {
	name := goruntime.FuncForPC(reflect.ValueOf((*Batch).Go).Pointer()).Name()
	return []byte("\ncreated by " + name + " in goroutine ")
})

// leadingNumber returns the decimal number b begins with.
func leadingNumber(b []byte) uint64 {
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + uint64(c-'0')
	}
	return n
}

// ProcessAllAvailable waits until the query has run and committed every
// batch that what its sources held at the call makes due, with the
// batches without data that those ask for and the timers then due: it
// returns once a turn of the query's loop that began after the call
// finds nothing to run (or only the batch without data that an operator
// with processing-time timeouts asks for at every trigger). It is Spark's
// processAllAvailable, meant for tests: add rows to a MemoryStream, call
// it, and read the sink. With data that keeps coming it may wait for
// ever; with a manual clock (WithManualClock), the clock must be moved
// on for the query to look again after its poll interval or trigger.
// What a source holds back (a Kafka source's MinOffsetsPerTrigger) is
// not available yet.
//
// It returns the query's error if the query ends first, and nil when it
// stopped cleanly or a Once or AvailableNow query ended (such a query
// reads only what its sources held at its start); ctx's error if ctx
// ends first. Called by the query's own goroutine (a listener, or a
// function of the pipeline), which it would wait for, it returns an
// error wrapping ErrAwaitedByQuery at once (a handler's own goroutines
// are not told apart: there it waits until ctx ends).
// It is safe for concurrent use.
func (q *Query) ProcessAllAvailable(ctx context.Context) error {
	if q.calledByQuery() {
		return fmt.Errorf("streamgen: ProcessAllAvailable: %w", ErrAwaitedByQuery)
	}
	q.turnMu.Lock()
	want := q.turns + 1 // the next turn to begin
	q.turnMu.Unlock()
	for {
		q.turnMu.Lock()
		if q.idleTurn >= want {
			q.turnMu.Unlock()
			return nil
		}
		if q.idleMoved == nil {
			q.idleMoved = make(chan struct{})
		}
		moved := q.idleMoved
		q.turnMu.Unlock()
		select {
		case <-moved:
		case <-q.done:
			return q.Err()
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// beginTurn counts a turn of the loop and returns its number.
func (q *Query) beginTurn() int64 {
	q.turnMu.Lock()
	defer q.turnMu.Unlock()
	q.turns++
	return q.turns
}

// idle records that turn found nothing to run, with every batch before
// it committed.
func (q *Query) idle(turn int64) {
	q.turnMu.Lock()
	defer q.turnMu.Unlock()
	q.idleTurn = turn
	if q.idleMoved != nil {
		close(q.idleMoved)
		q.idleMoved = nil
	}
}

// Done is closed when the query has ended.
func (q *Query) Done() <-chan struct{} { return q.done }

// Err returns the error that ended the query, or nil.
func (q *Query) Err() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// Status returns what the query is doing now, with how far the running
// batch has gone. It never waits for a batch: call it as often as wanted,
// from any goroutine.
func (q *Query) Status() Status {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.status
	if s.Batch != (RunningBatch{}) {
		s.Batch.NumInputRows = q.live.rows.Load()
		s.Batch.InputsDone = q.live.inputsDone.Load()
	}
	return s
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
	id, _ := goroutineIDs()
	q.loopGoroutine.Store(id)
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
	for _, close := range q.plan.Closers {
		if cerr := close(); cerr != nil && err == nil {
			err = fmt.Errorf("streamgen: close: %w", cerr)
		}
	}
	if cerr := closeCommitter(q.committer); cerr != nil && err == nil {
		err = fmt.Errorf("streamgen: close the committer: %w", cerr)
	}
	cerr := q.store.Close()
	if cerr == nil {
		// Close synced and recorded the last batches.
		if perr := q.tellCommitted(); perr != nil && err == nil {
			err = perr
		}
	}
	for _, release := range q.releaseKeys {
		release()
	}
	switch {
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
		q.finishing.Store(true)
		q.listening.Lock()
		q.ended = true
		id, _ := goroutineIDs()
		q.listenerGoroutine.Store(id)
		for _, l := range q.cfg.listeners {
			if l, ok := l.(interface{ OnQueryTerminated(QueryTerminated) }); ok {
				tellListener("OnQueryTerminated", func() { l.OnQueryTerminated(QueryTerminated{ID: q.id, RunID: q.runID, Err: err}) })
			}
		}
		q.listenerGoroutine.Store(0)
		q.listening.Unlock()
		q.cancel()
		close(q.done)
	})
}

// closeCommitter closes a committer that is a Closer (not the store,
// which the query closes itself).
func closeCommitter(c Committer) error {
	if _, isStore := c.(*Store); isStore {
		return nil
	}
	if c, ok := c.(Closer); ok {
		return c.Close()
	}
	return nil
}

// readsRanges reports whether an operator of the plan reads its state by
// range scans (see StoreOptions.RangeReads).
func readsRanges(plan *Plan) bool {
	for _, op := range plan.Operators {
		for _, s := range op.Info().States {
			if s.Encoding == EncodingJoinBuffer || s.Encoding == EncodingTableRows && s.Kind == "map" {
				return true
			}
		}
	}
	return false
}

// tellListener calls a listener's method, recovering a panic in it and
// logging it: a listener's fault stops neither the query nor the
// listeners after it, as Spark's listener bus catches and logs one.
func tellListener(event string, call func()) {
	defer func() {
		if r := recover(); r != nil {
			slog.Error("streamgen: a query listener panicked; the query goes on", "event", event, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	call()
}
