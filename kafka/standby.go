package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/runtime"
)

// Standby replicas: a standby of partition p keeps the state of p's task
// warm on an instance that does not own p, by following p's changelog
// partition into its own checkpoint (Dir/p), as Kafka Streams' standby
// tasks do; it never reads the input nor writes anything to Kafka. When
// the group gives p to the instance, the standby stops and the task
// starts on the same checkpoint: its restore reads only the changelog's
// tail since the standby's position.

// standbyStats is what a standby tells of itself.
type standbyStats struct {
	// Position is the changelog offset its checkpoint holds up to; Lag
	// how many records it is behind the changelog's end (at the last
	// fetch; with ExactlyOnce, not counting the last transaction's
	// commit marker).
	Position, Lag int64
	// Records counts the changelog records it has applied.
	Records int64
	// BatchID is the last batch its checkpoint holds.
	BatchID int64
	// lagKnown is set once Lag was measured from the changelog's end.
	lagKnown bool
	// heldPeak is the most records it has held at once, until it knew
	// their batch complete.
	heldPeak int
}

// runStandby follows partition p's changelog into its checkpoint until
// ctx is done.
func (a *App) runStandby(ctx context.Context, p int32, sb *runningTask) error {
	dir := filepath.Join(a.opts.Dir, strconv.Itoa(int(p)))
	var store *runtime.Store
	for {
		var err error
		// Pebble's 4 MiB memtables, as the tasks' stores (which share
		// caches) have by default.
		store, err = runtime.OpenStore(dir, runtime.StoreOptions{FS: runtime.FileSystemOf(a.opts.Options...), StateCacheSize: -1, CacheSize: 8 << 20, MemTableSize: 4 << 20})
		if err == nil {
			break
		}
		if !errors.Is(err, runtime.ErrCheckpointInUse) {
			return fmt.Errorf("open the checkpoint: %w", err)
		}
		// The partition's task, which the group just moved away, is
		// still stopping.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	a.mu.Lock()
	sb.store = store
	a.mu.Unlock()
	defer func() {
		// Stale reads take the store under mu, and Close waits for
		// theirs.
		a.mu.Lock()
		sb.store = nil
		a.mu.Unlock()
		store.Close()
	}()
	copts := a.opts.ChangelogOptions
	copts.Connection, copts.Topic, copts.Partitions = a.opts.Connection, a.opts.Changelog, a.partitions
	c := newChangelog(copts, store)
	c.task = p
	if c.err != nil {
		return c.err
	}
	// An offset out of range (records deleted, a topic made again) fails
	// the fetch rather than starting over silently: the standby starts
	// again, and rebuilds its copy (see the poll below).
	client, err := a.opts.Connection.newClient(kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	defer client.Close()
	tp := topicPartition{a.opts.Changelog, p}
	reader := Source(Options{Connection: a.opts.Connection, Partitions: map[string][]int32{a.opts.Changelog: {p}}, Name: "standby " + a.opts.Changelog})
	defer reader.Close()
	rclient, err := reader.clientFor()
	if err != nil {
		return err
	}
	starts, err := reader.listOffsets(ctx, rclient, []topicPartition{tp}, earliestTimestamp)
	if err != nil {
		return err
	}
	ends, err := reader.listOffsets(ctx, rclient, []topicPartition{tp}, latestTimestamp)
	if err != nil {
		return err
	}
	rec, hasRecord, err := c.readRecord()
	if err != nil {
		return err
	}
	local, hasProgress, err := store.Progress()
	if err != nil {
		return err
	}
	if err := c.readDeleteRetention(ctx, kadm.NewClient(rclient)); err != nil {
		return err
	}
	if _, err := c.readTopic(ctx, kadm.NewClient(rclient)); err != nil {
		return err
	}
	madeAgain := false
	if hasRecord {
		if madeAgain, err = c.ofDeletedTopic(ctx, reader, rclient, []topicPartition{tp}, starts, ends, rec); err != nil {
			return err
		}
	}
	from, known := rec.Ends[p]
	rebuild := false
	at := int64(0) // of the position (see changelogRecord.At)
	switch {
	case madeAgain:
		// A copy of a topic deleted since (App.Reset): its offsets mean
		// nothing in the new one.
		rebuild, from = true, starts[tp]
	case hasRecord && rec.Async && hasProgress && local.BatchID > rec.Committed:
		rebuild = true // batches the topic never got: only its copy replaces them
	case hasRecord && known && from >= starts[tp] && from <= ends[tp] && (from == ends[tp] || !c.stale(rec)):
		at = rec.At
	// (A copy behind by records older than the topic keeps deletions is
	// rebuilt: compaction may have removed deletions it does not hold.)
	// (A recorded offset past the topic's end is of a topic deleted and
	// made again: its copy is rebuilt.)
	default:
		// State without a record of the topic, or records deleted
		// since, or a copy stopped before its first progress record
		// (which holds the records of complete batches before it) is
		// rebuilt.
		partial, err := holdsRecords(store)
		if err != nil {
			return err
		}
		rebuild = hasProgress || partial
		from = starts[tp]
	}
	r, err := store.BeginRestore()
	if err != nil {
		return err
	}
	defer func() { r.Close() }()
	if err := r.DeleteCommitterRecord(c.record); err != nil {
		return err
	}
	if rebuild {
		if err := r.Clear(); err != nil {
			return err
		}
		from = starts[tp]
	}
	// Until the first records are applied, the checkpoint is where its
	// record said (with the record deleted, a restart reads from there
	// again, or from the start).
	position := from
	if err := a.saveStandby(store, c, r, p, position, at); err != nil {
		return err
	}
	if r, err = store.BeginRestore(); err != nil {
		return err
	}
	a.setStandby(p, standbyStats{Position: position, BatchID: local.BatchID})
	client.AddConsumePartitions(map[string]map[int32]kgo.Offset{a.opts.Changelog: {p: kgo.NewOffset().At(from)}})
	progress := local.BatchID
	if !hasProgress || rebuild {
		progress = -1
	}
	// The batches known complete, whose records are applied as they are
	// read (see changelog.restore): those up to the last progress record
	// in the changelog now, then each progress record's.
	complete, err := lastProgress(ctx, reader, rclient, tp, from, ends[tp], func(l lostRange) error { return errors.New(l.String()) })
	if err != nil {
		return err
	}
	complete = max(complete, progress)
	var held []pendingRecord
	var applied int64
	heldPeak := 0
	for {
		// A poll waits for records at most a second: then the standby
		// reports its lag from the changelog's end.
		pollCtx, cancelPoll := context.WithTimeout(ctx, time.Second)
		fetches := client.PollFetches(pollCtx)
		cancelPoll()
		if ctx.Err() != nil {
			return nil
		}
		// An offset out of range (records deleted past the position, a
		// log that now ends before it) or a topic made again comes as a
		// partition's error in a fetch without records, which the client
		// fetches again and again from the same offset: the standby
		// starts again instead, and its start rebuilds the copy from the
		// topic (as Kafka Streams' standby does).
		var gone error
		fetches.EachError(func(_ string, _ int32, err error) {
			if errors.Is(err, kerr.OffsetOutOfRange) || errors.Is(err, kerr.UnknownTopicID) {
				gone = err
			}
		})
		if gone != nil {
			return fmt.Errorf("fetch the changelog at offset %d: %w", position, gone)
		}
		if fetches.Empty() && (fetches.Err0() == nil || errors.Is(fetches.Err0(), context.DeadlineExceeded)) {
			if ends, err := reader.listOffsets(ctx, rclient, []topicPartition{tp}, latestTimestamp); err == nil {
				a.setStandby(p, standbyStats{Position: position, Records: applied, BatchID: progress, Lag: a.standbyLag(ends[tp], position, len(held)), lagKnown: true, heldPeak: heldPeak})
			}
			continue
		}
		if err := fetches.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			slog.Warn("streamgen: kafka app: standby: fetch the changelog", "group", a.opts.Group, "partition", p, "error", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		moved := false
		var end int64 = -1
		var ferr error
		fetches.EachPartition(func(f kgo.FetchTopicPartition) {
			// The end a read_committed reader can reach: the last stable
			// offset (records of the owner's transaction in flight are
			// not lag yet), or the high watermark where it is not told.
			if f.LastStableOffset >= 0 {
				end = max(end, f.LastStableOffset)
			} else {
				end = max(end, f.HighWatermark)
			}
			for _, record := range f.Records {
				if ferr != nil {
					return
				}
				if isResetMark(record) {
					continue
				}
				batch, err := recordBatch(record)
				if err != nil {
					ferr = fmt.Errorf("changelog partition %d offset %d: %w", p, record.Offset, err)
					return
				}
				deleted := record.Value == nil
				apply := func(key, value []byte, deleted bool) error {
					applied++
					if deleted {
						return r.Delete(key)
					}
					return r.Set(key, value)
				}
				if runtime.IsProgressKey(record.Key) {
					progress = max(progress, batch)
					complete = max(complete, batch)
					i := 0
					for ; i < len(held) && held[i].batch <= complete; i++ {
						if ferr = apply(held[i].key, held[i].value, held[i].deleted); ferr != nil {
							return
						}
					}
					held = held[i:]
					if ferr = apply(record.Key, record.Value, deleted); ferr != nil {
						return
					}
					position, moved = record.Offset+1, true
					// The records after the progress were written after it.
					at = record.Timestamp.UnixMilli()
					continue
				}
				if batch > complete || len(held) > 0 {
					held = append(held, pendingRecord{key: record.Key, value: record.Value, deleted: deleted, batch: batch})
					heldPeak = max(heldPeak, len(held))
					continue
				}
				ferr = apply(record.Key, record.Value, deleted)
			}
		})
		if ferr != nil {
			return ferr
		}
		if moved {
			if err := a.saveStandby(store, c, r, p, position, at); err != nil {
				return err
			}
			if r, err = store.BeginRestore(); err != nil {
				return err
			}
		}
		st := standbyStats{Position: position, Records: applied, BatchID: progress, heldPeak: heldPeak}
		if end >= 0 {
			st.Lag, st.lagKnown = a.standbyLag(end, position, len(held)), true
		}
		a.setStandby(p, st)
	}
}

// standbyLag is how many records a standby at position is behind the
// changelog's end: with ExactlyOnce, not counting the commit marker that
// follows the last transaction's progress.
func (a *App) standbyLag(end, position int64, held int) int64 {
	lag := max(0, end-position)
	if a.opts.ExactlyOnce && lag > 0 && held == 0 {
		lag--
	}
	return lag
}

// saveStandby commits the standby's restored records with its record of
// the changelog: the offset after the last batch's progress it applied,
// where its task, or the standby again, goes on reading; at is the
// changelogRecord.At of that position.
func (a *App) saveStandby(store *runtime.Store, c *changelog, r *runtime.Restore, p int32, position, at int64) error {
	rec := changelogRecord{Topic: c.opts.Topic, Ends: map[int32]int64{p: position}, At: at, TopicID: c.topicID}
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := r.SetCommitterRecord(c.record, v); err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	a.setPosition(p, position)
	return nil
}

// localPositions reads, for each partition's checkpoint under Dir, the
// changelog offset it holds up to: what this instance tells the group of
// its copies at its first join.
//
// A checkpoint of a changelog topic since deleted (its record names
// another ID than topicID: one a Reset left on this machine) has no
// position: it holds nothing of the topic there now, and its old offsets,
// likely the highest, would make the group give its partition here.
func (a *App) localPositions(topicID string) map[int32]int64 {
	out := map[int32]int64{}
	fsys := runtime.FileSystemOf(a.opts.Options...)
	entries, err := fsys.List(a.opts.Dir)
	if err != nil {
		return out
	}
	for _, name := range entries {
		p, ok := partitionDir(name)
		if !ok || p >= a.partitions {
			continue
		}
		// One in use (inspect, another tool) is left out: no query of
		// this instance runs yet, and its holder may not answer.
		cr, err := runtime.OpenIdleCheckpointFS(fsys, fsys.PathJoin(a.opts.Dir, name))
		if err != nil {
			continue
		}
		v, ok, err := cr.CommitterRecord("kafka-changelog/" + a.opts.Changelog)
		cr.Close()
		if err != nil || !ok {
			continue
		}
		var rec changelogRecord
		if json.Unmarshal(v, &rec) == nil && !otherTopic(rec.TopicID, topicID) {
			if at, ok := rec.Ends[p]; ok {
				out[p] = at
			}
		}
	}
	return out
}

// changelogTopicID returns the ID of the App's changelog topic, or ""
// when it cannot be read (no topic yet, or a cluster without IDs).
func (a *App) changelogTopicID(ctx context.Context) string {
	client, err := a.opts.Connection.newClient()
	if err != nil {
		return ""
	}
	defer client.Close()
	details, err := kadm.NewClient(client).ListTopics(ctx, a.opts.Changelog)
	if err != nil || details.Error() != nil {
		return ""
	}
	return topicIDString(details[a.opts.Changelog].ID)
}

// memberInfo is this instance's join metadata: its address and the
// positions of its copies.
func (a *App) memberInfo() memberInfo {
	a.mu.Lock()
	defer a.mu.Unlock()
	info := memberInfo{Addr: a.opts.AdvertisedAddr, Tags: a.opts.Tags, StandbyTags: a.opts.StandbyTags, Positions: make(map[int32]int64, len(a.positions)), Lags: map[int32]int64{}}
	for p, at := range a.positions {
		info.Positions[p] = at
	}
	for p := range a.tasks {
		info.Lags[p] = 0
	}
	for p, st := range a.standbyStats {
		if st.lagKnown {
			info.Lags[p] = st.Lag
		}
	}
	return info
}

// setAssignment keeps the group's new assignment and wakes the standbys'
// manager; called from the group's goroutine.
func (a *App) setAssignment(info assignmentInfo) {
	a.assignment.Store(&info)
	select {
	case a.reassigned <- struct{}{}:
	default:
	}
}

// setPosition records the changelog offset the checkpoint of partition p
// holds up to.
func (a *App) setPosition(p int32, at int64) {
	a.mu.Lock()
	a.positions[p] = at
	a.mu.Unlock()
}

// setStandby records what the standby of p last told.
func (a *App) setStandby(p int32, st standbyStats) {
	a.mu.Lock()
	if sb, running := a.standbys[p]; running && !sb.stopping {
		a.standbyStats[p] = st
	}
	a.standbyHeldPeak = max(a.standbyHeldPeak, st.heldPeak)
	// A warm-up copy that has caught up asks for a rebalance, once per
	// assignment, which gives this instance the partition (a probing
	// rebalance, in Kafka Streams' words).
	// The leader's lag limit decides (the instances may be configured
	// apart), and probes are spaced by minProbeInterval, so that a lag
	// hovering about the limit cannot make a rebalance a second.
	var probe *kgo.Client
	if info := a.assignment.Load(); info != nil && st.lagKnown && st.Lag <= info.AcceptableLag &&
		slices.Contains(info.Warmups, p) && a.probed != info && a.group != nil && time.Since(a.probedAt) >= minProbeInterval {
		a.probed, a.probedAt, probe = info, time.Now(), a.group
	}
	a.mu.Unlock()
	if probe != nil {
		slog.Info("streamgen: kafka app: a warm-up copy caught up; asking the group to rebalance", "group", a.opts.Group, "partition", p, "lag", st.Lag)
		probe.ForceRebalance()
	}
}

// manageStandbys starts and stops the instance's standbys as the group's
// assignments say, until ctx is done; then it stops them all. A standby
// stays in a.standbys until it has closed its checkpoint, so that a task
// starting on the partition waits for it (see start).
func (a *App) manageStandbys(ctx context.Context) {
	defer func() {
		a.mu.Lock()
		var running []*runningTask
		for _, sb := range a.standbys {
			sb.stopping = true
			sb.cancel()
			running = append(running, sb)
		}
		a.mu.Unlock()
		for _, sb := range running {
			<-sb.done
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.reassigned:
		}
		info := a.assignment.Load()
		want := map[int32]bool{}
		if info != nil {
			for _, p := range info.Standbys {
				want[p] = true
			}
		}
		a.mu.Lock()
		for p, sb := range a.standbys {
			if !want[p] && !sb.stopping {
				sb.stopping = true
				sb.cancel()
			}
		}
		for p := range want {
			if _, task := a.tasks[p]; task {
				continue // the task has the checkpoint
			}
			if _, running := a.standbys[p]; running {
				continue // running, or stopping: it signals when it is done
			}
			sctx, cancel := context.WithCancel(ctx)
			sb := &runningTask{cancel: cancel, done: make(chan struct{})}
			a.standbys[p] = sb
			a.hold(p)
			go a.standby(sctx, p, sb)
		}
		a.mu.Unlock()
	}
}

// standby runs the standby sb of partition p until ctx is done.
func (a *App) standby(ctx context.Context, p int32, sb *runningTask) {
	defer func() {
		a.mu.Lock()
		if a.standbys[p] == sb {
			delete(a.standbys, p)
			delete(a.standbyStats, p)
		}
		// The checkpoint it leaves is a standby's copy, for the task
		// that starts on it.
		a.handedOver[p] = true
		a.mu.Unlock()
		a.release(p)
		close(sb.done)
		// The partition may be wanted again meanwhile.
		select {
		case a.reassigned <- struct{}{}:
		default:
		}
	}()
	// A standby that fails costs a warm copy, not the App (the task
	// restores from the changelog anyway): it starts again after a
	// pause, as the changelog may not exist yet (the first tasks make
	// it).
	for failures := 0; ; failures++ {
		err := a.runStandby(ctx, p, sb)
		if ctx.Err() != nil {
			return
		}
		log := slog.Debug
		if failures >= 3 {
			log = slog.Warn
		}
		log("streamgen: kafka app: standby stopped; starting it again", "group", a.opts.Group, "partition", p, "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(min(time.Duration(failures+1)*200*time.Millisecond, 5*time.Second)):
		}
	}
}
