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
	"math"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Query is a running query. Its methods are safe for concurrent use.
type Query struct {
	id     string
	cfg    config
	job    Job
	store  *Store
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	err      error
	status   Status
	progress []QueryProgress
}

// Start opens the checkpoint, checks it against the job, and starts the
// query's loop in a goroutine it owns. The loop stops when ctx is
// cancelled, when Stop is called, when a Once or AvailableNow trigger has
// done its work, or at the first error; AwaitTermination waits for that.
func Start(ctx context.Context, job Job, opts ...Option) (*Query, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o.apply(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	fs, dir := cfg.fs, cfg.checkpoint
	if dir == "" {
		fs, dir = vfs.NewMem(), "checkpoint"
	}
	store, err := OpenStore(dir, StoreOptions{FS: fs, SyncInterval: cfg.syncInterval})
	if err != nil {
		return nil, err
	}
	if err := store.CheckMeta(job.Meta()); err != nil {
		store.Close()
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	q := &Query{id: newID(), cfg: cfg, job: job, store: store, cancel: cancel, done: make(chan struct{})}
	q.status = Status{Message: "Initializing sources"}
	for _, l := range cfg.listeners {
		if l, ok := l.(interface{ OnQueryStarted(QueryStarted) }); ok {
			l.OnQueryStarted(QueryStarted{ID: q.id, Name: cfg.name, Time: cfg.clock()})
		}
	}
	go q.run(ctx)
	return q, nil
}

func newID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ID returns the query's id.
func (q *Query) ID() string { return q.id }

// Stop stops the query and waits for its goroutine to end; a batch in
// flight is abandoned, uncommitted, and runs again at the next start.
func (q *Query) Stop() error {
	q.cancel()
	<-q.done
	return q.Err()
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

func (q *Query) setStatus(msg string, data, active bool) {
	q.mu.Lock()
	q.status = Status{Message: msg, IsDataAvailable: data, IsTriggerActive: active}
	q.mu.Unlock()
}

// run is the query's loop: one micro-batch per turn.
func (q *Query) run(ctx context.Context) {
	err := q.loop(ctx)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = nil // stopped, not failed
	}
	if cerr := q.store.Close(); err == nil && cerr != nil {
		err = cerr
	}
	q.mu.Lock()
	q.err = err
	q.status = Status{Message: "Stopped"}
	q.mu.Unlock()
	for _, l := range q.cfg.listeners {
		if l, ok := l.(interface{ OnQueryTerminated(QueryTerminated) }); ok {
			l.OnQueryTerminated(QueryTerminated{ID: q.id, Err: err})
		}
	}
	q.cancel()
	close(q.done)
}

func (q *Query) loop(ctx context.Context) error {
	src := q.job.Source()
	progress, _, err := q.store.Progress()
	if err != nil {
		return err
	}
	// A Once or AvailableNow query works up to what is there at start.
	var upTo json.RawMessage
	if q.cfg.trigger.stops() {
		if upTo, err = src.Available(ctx); err != nil {
			return fmt.Errorf("streamgen: source %s: %w", src.Name(), err)
		}
	}
	flushed := false
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		started := q.cfg.clock()
		committed := progress.Offsets[src.Name()]
		if !q.cfg.trigger.stops() {
			if upTo, err = src.Available(ctx); err != nil {
				return fmt.Errorf("streamgen: source %s: %w", src.Name(), err)
			}
		}
		end := upTo
		if q.cfg.trigger.kind != triggerOnce {
			if end, err = src.Next(ctx, committed, upTo); err != nil {
				return fmt.Errorf("streamgen: source %s: %w", src.Name(), err)
			}
		}
		latestOffset := q.cfg.clock().Sub(started)
		hasData := !bytes.Equal(end, committed)
		watermark := q.watermark(progress, started)
		due, err := q.job.TimersDue(q.store, watermark, started)
		if err != nil {
			return err
		}
		if !hasData && !due && q.cfg.flush && q.cfg.trigger.stops() && !flushed {
			// The input is done: one more batch, with a watermark past
			// every event time, fires every event-time timeout.
			flushed, due, watermark = true, true, EndOfTime
		}
		if !hasData && !due {
			if q.cfg.trigger.stops() {
				return nil
			}
			q.setStatus("Waiting for data to arrive", false, false)
			if err := q.wait(ctx, started); err != nil {
				return err
			}
			continue
		}
		q.setStatus("Processing new data", hasData, true)
		next, report, err := q.runBatch(ctx, progress, committed, end, watermark, started)
		if err != nil {
			return err
		}
		report.DurationMs["latestOffset"] = latestOffset.Milliseconds()
		progress = next
		q.report(report)
		if q.cfg.trigger.kind == triggerOnce && (!q.cfg.flush || flushed) {
			return nil // with FlushEventTime, one more turn flushes
		}
		if q.cfg.trigger.kind == triggerInterval {
			if err := q.wait(ctx, started); err != nil {
				return err
			}
		}
	}
}

// EndOfTime is the watermark of a flushed query (see FlushEventTime): the
// last instant timers can hold (they are kept as Unix nanoseconds).
var EndOfTime = time.Unix(0, math.MaxInt64).UTC()

// wait sleeps until the next trigger time or poll.
func (q *Query) wait(ctx context.Context, started time.Time) error {
	d := q.cfg.pollInterval
	if q.cfg.trigger.kind == triggerInterval {
		d = q.cfg.trigger.interval - q.cfg.clock().Sub(started)
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// watermark computes the watermark in effect for the next batch from the
// committed progress: the minimum over partitions that are not idle of
// (largest event time − delay), never lower than before.
func (q *Query) watermark(p Progress, now time.Time) time.Time {
	delay, ok := q.job.WatermarkDelay()
	if !ok {
		return time.Time{}
	}
	var low time.Time
	found := false
	for part, maxT := range p.MaxEventTime {
		if q.cfg.idleTimeout > 0 {
			if last, ok := p.LastActive[part]; ok && now.Sub(last) > q.cfg.idleTimeout {
				continue
			}
		}
		if c := maxT.Add(-delay); !found || c.Before(low) {
			low, found = c, true
		}
	}
	if !found || low.Before(p.Watermark) {
		return p.Watermark
	}
	return low
}

// runBatch runs, writes and commits one batch, and returns the new
// progress and its report. Nothing is committed when it fails.
func (q *Query) runBatch(ctx context.Context, p Progress, start, end json.RawMessage, watermark, now time.Time) (Progress, QueryProgress, error) {
	src := q.job.Source()
	meta := q.job.Meta()
	nops := len(meta.Operators)
	run := &BatchRun{
		ID:           p.BatchID + 1,
		Start:        start,
		End:          end,
		Watermark:    watermark,
		Now:          now,
		Store:        q.store,
		Batch:        q.store.NewBatch(),
		MaxEventTime: copyTimes(p.MaxEventTime),
		Active:       map[string]bool{},
		StateRows:    make([]int64, nops),
		StateUpdated: make([]int64, nops),
		StateRemoved: make([]int64, nops),
		Durations:    map[string]time.Duration{},
	}
	copy(run.StateRows, p.StateRows)
	if err := q.safeRun(ctx, run); err != nil {
		run.Batch.Close()
		return p, QueryProgress{}, err
	}
	if len(run.DeadLetters) > 0 {
		if q.cfg.deadLetters != nil {
			if err := q.cfg.deadLetters.WriteDeadLetters(ctx, run.ID, run.DeadLetters); err != nil {
				run.Batch.Close()
				return p, QueryProgress{}, fmt.Errorf("streamgen: batch %d: dead-letter sink: %w", run.ID, err)
			}
		} else {
			for _, d := range run.DeadLetters {
				slog.Warn("streamgen: dead letter", "source", d.Source, "position", d.Position, "error", d.Error)
			}
		}
	}
	next := Progress{
		BatchID:      run.ID,
		Watermark:    watermark,
		Offsets:      copyOffsets(p.Offsets),
		MaxEventTime: run.MaxEventTime,
		LastActive:   copyTimes(p.LastActive),
		StateRows:    run.StateRows,
	}
	next.Offsets[src.Name()] = end
	for part := range run.Active {
		next.LastActive[part] = now
	}
	// The watermark the next batch will use is computed when it starts;
	// the committed one is the watermark this batch ran with.
	commitStart := q.cfg.clock()
	if err := run.Batch.Commit(next); err != nil {
		return p, QueryProgress{}, err
	}
	finished := q.cfg.clock()
	report := q.makeReport(run, start, end, watermark, now, finished, finished.Sub(commitStart))
	return next, report, nil
}

// safeRun runs the job's batch, turning a panic in user code into an
// error, so that nothing of the batch is committed.
func (q *Query) safeRun(ctx context.Context, run *BatchRun) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("streamgen: batch %d: panic: %v\n%s", run.ID, r, debug.Stack())
		}
	}()
	return q.job.RunBatch(ctx, run)
}

func (q *Query) makeReport(run *BatchRun, start, end json.RawMessage, watermark, now, finished time.Time, commit time.Duration) QueryProgress {
	total := finished.Sub(now)
	secs := total.Seconds()
	rate := 0.0
	if secs > 0 {
		rate = float64(run.InputRows) / secs
	}
	r := QueryProgress{
		ID:                     q.id,
		Name:                   q.cfg.name,
		Timestamp:              now,
		BatchID:                run.ID,
		NumInputRows:           run.InputRows,
		InputRowsPerSecond:     q.inputRate(run.InputRows, now),
		ProcessedRowsPerSecond: rate,
		DurationMs:             map[string]int64{"triggerExecution": total.Milliseconds(), "walCommit": commit.Milliseconds()},
		Sources: []SourceProgress{{
			Description:            q.job.Source().Name(),
			StartOffset:            string(start),
			EndOffset:              string(end),
			NumInputRows:           run.InputRows,
			InputRowsPerSecond:     q.inputRate(run.InputRows, now),
			ProcessedRowsPerSecond: rate,
		}},
		Sink:           SinkProgress{NumOutputRows: run.OutputRows},
		NumDeadLetters: int64(len(run.DeadLetters)),
	}
	for name, d := range run.Durations {
		r.DurationMs[name] = d.Milliseconds()
	}
	if _, ok := q.job.WatermarkDelay(); ok {
		r.EventTime = map[string]string{"watermark": watermark.UTC().Format(time.RFC3339Nano)}
	}
	for i, op := range q.job.Meta().Operators {
		r.StateOperators = append(r.StateOperators, StateOperatorProgress{
			OperatorName:              op.Kind,
			NumRowsTotal:              run.StateRows[i],
			NumRowsUpdated:            run.StateUpdated[i],
			NumRowsRemoved:            run.StateRemoved[i],
			NumRowsDroppedByWatermark: run.LateRows,
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
	for _, l := range q.cfg.listeners {
		if l, ok := l.(interface{ OnQueryProgress(QueryProgress) }); ok {
			l.OnQueryProgress(r)
		}
	}
}

func copyTimes(m map[string]time.Time) map[string]time.Time {
	out := make(map[string]time.Time, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyOffsets(m map[string]json.RawMessage) map[string]json.RawMessage {
	out := make(map[string]json.RawMessage, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}
