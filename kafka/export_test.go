package kafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/streamgen/streamgen/runtime"
)

// FakeCluster gives tests the kfake cluster under an EmbeddedCluster, to
// inject faults.
func FakeCluster(e *EmbeddedCluster) *kfake.Cluster { return e.cluster }

// NewChangelog returns the committer Changelog makes for s, for tests
// that drive a store without a query.
func NewChangelog(opts ChangelogOptions, s *runtime.Store) interface {
	runtime.Committer
	runtime.Restorer
	Close() error
} {
	return newChangelog(opts, s)
}

// RestoredRecords returns how many records a changelog's last restore
// applied.
func RestoredRecords(c runtime.Committer) int64 { return c.(*changelog).restored }

// RestoreHeldPeak returns the most records a changelog's last restore
// held in memory at once, until it knew their batch complete.
func RestoreHeldPeak(c runtime.Committer) int { return c.(*changelog).heldPeak }

// StandbyHeldPeak returns the most records any standby of the App has
// held in memory at once, until it knew their batch complete.
func StandbyHeldPeak(a *App) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.standbyHeldPeak
}

// TransactionsRestoredRecords returns how many records the restore of the
// last query started on t applied.
func TransactionsRestoredRecords(t *Transactions) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.last.restored
}

// AbandonTransactions makes the transactions' query stop as a process
// that dies does: its open transaction is neither committed nor aborted.
func AbandonTransactions(t *Transactions) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.abandon = true
}

// AbandonApp makes the tasks of an App stop, from now on, as those of a
// process that dies do: their open transactions neither committed nor
// aborted.
func AbandonApp(a *App) { a.abandoned.Store(true) }

// RestoreProgress returns the records a changelog's restore reads and
// those it has applied (as it runs, its progress report).
func RestoreProgress(c runtime.Committer) (total, applied int64) {
	cl := c.(*changelog)
	return cl.restoreTotal.Load(), cl.restoreApplied.Load()
}

// CleanStateDirs runs one pass of the App's removal of unused
// checkpoints at time now.
func CleanStateDirs(a *App, now time.Time) { a.cleanStateDirs(now) }

// MarkReset makes topics again with opts and writes App.Reset's record
// into each partition, as App.Reset does after deleting them.
func MarkReset(ctx context.Context, opts ChangelogOptions, topics ...string) error {
	return markReset(ctx, opts.withDefaults(), topics, time.Now())
}

// MarkResetAt is MarkReset with the reset's time at.
func MarkResetAt(ctx context.Context, opts ChangelogOptions, at time.Time, topics ...string) error {
	return markReset(ctx, opts.withDefaults(), topics, at)
}

// RecordedAt returns the time of the changelog's record of its offsets
// in its checkpoint (that of the last batch committed).
func RecordedAt(c runtime.Committer) (time.Time, error) {
	rec, ok, err := c.(*changelog).readRecord()
	if err != nil || !ok {
		return time.Time{}, fmt.Errorf("no record of the changelog's offsets (%v)", err)
	}
	return time.UnixMilli(rec.At), nil
}

// WithoutTopicIDs makes the changelogs see no topic IDs, as on a cluster
// that gives none, until the returned function is called.
func WithoutTopicIDs() (restore func()) {
	noTopicIDs = true
	return func() { noTopicIDs = false }
}

// LocalPositions returns the positions of the checkpoints under a's Dir
// that a would offer the group if it ran now.
func LocalPositions(ctx context.Context, a *App) (map[int32]int64, error) {
	partitions, err := a.checkTopics(ctx)
	if err != nil {
		return nil, err
	}
	a.partitions = partitions
	return a.localPositions(a.changelogTopicID(ctx)), nil
}

// HoldCommits makes the transactions' open transaction wait (from any
// query's start on): neither a batch nor the commit while idle commits
// it, until CommitWhenIdle. A query's stop still does.
func HoldCommits(t *Transactions) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held = true
}

// CommitWhenIdle makes the interval of AsyncProgress passed: the commit
// while idle commits the open transaction at its next look.
func CommitWhenIdle(t *Transactions) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.held, t.lastCommit = false, time.Time{}
}

// CommitLooks returns how many times the App has looked for offsets to
// commit to the group (each wake of its committing goroutine).
func CommitLooks(a *App) int64 { return a.commitLooks.Load() }

// PurgePasses returns how many times the App has looked for records of
// its repartition topic to delete.
func PurgePasses(a *App) int64 { return a.purgePasses.Load() }

// SetRepartitionPurgeInterval sets how often Apps purge their
// repartition topics, until the test ends.
func SetRepartitionPurgeInterval(t interface{ Cleanup(func()) }, d time.Duration) {
	old := repartitionPurgeInterval
	repartitionPurgeInterval = d
	t.Cleanup(func() { repartitionPurgeInterval = old })
}

// SetProbeInterval sets the least time between two rebalances an App
// asks for as its warm-up copies catch up, until the test ends.
func SetProbeInterval(t interface{ Cleanup(func()) }, d time.Duration) {
	old := minProbeInterval
	minProbeInterval = d
	t.Cleanup(func() { minProbeInterval = old })
}

// Holding reports whether the source holds new offsets back for
// MinOffsetsPerTrigger.
func Holding(s *TopicSource) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding
}

// StaleReadFrom reads req of partition p as a stale read would on an
// instance whose only copy of p is a standby with store (a not running
// App), and reports whether that standby answered.
func StaleReadFrom(a *App, p int32, store *runtime.Store, req runtime.StateRequest) (answered bool, err error) {
	a.mu.Lock()
	if a.standbys == nil {
		a.standbys = map[int32]*runningTask{}
	}
	a.standbys[p] = &runningTask{store: store}
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.standbys, p)
		a.mu.Unlock()
	}()
	_, answered, err = a.readLocal(p, req, true)
	return answered, err
}
