package kafka

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/runtime"
)

// ChangelogOptions configure a changelog topic (see Changelog).
type ChangelogOptions struct {
	Connection
	// Topic is the changelog topic. Required. It is created at the
	// query's first start, compacted (cleanup.policy=compact); an existing
	// topic must be compacted and have Partitions partitions or more. One
	// query's checkpoint per topic.
	Topic string
	// Partitions is the topic's number of partitions when it is created:
	// a state entry goes to the partition of the input partition that owns
	// it (runtime.KeyPartition), the checkpoint's progress and metadata to
	// partition 0. The default is 1, enough while a query's state is all
	// in input partition 0.
	Partitions int32
	// ReplicationFactor is the topic's replication factor when it is
	// created; the default, 0, is the cluster's default.
	ReplicationFactor int16
	// ProduceTimeout bounds how long a batch's commit waits for the
	// changelog to acknowledge its records and, with ExactlyOnce, how
	// long a write into the transaction (a sink's, the dead letters', a
	// repartition task's) may go without an acknowledgement; past it the
	// batch fails, uncommitted. The default is 30 seconds. An App without
	// ExactlyOnce bounds its repartition tasks' writes by it too, when it
	// is set (by DefaultProduceTimeout, as a sink's, when it is not).
	ProduceTimeout time.Duration
	// TransactionalID is the transactional ID of ExactlyOnce's
	// transactions; the default is "streamgen-" and Topic. Changelog
	// alone does not use it.
	TransactionalID string
	// AsyncProgress, with ExactlyOnce, commits the transaction at most
	// once per AsyncProgressInterval instead of once per batch, as
	// Spark's asynchronous progress tracking commits offsets: batches
	// commit locally at once, and their rows, changelog records and
	// offsets are produced as they come and committed to Kafka together
	// when the interval has passed since the last commit, and when the
	// query stops. A process that dies in between loses, in Kafka's view,
	// the batches since the last commit: its next start finds the local
	// checkpoint ahead of the changelog and rebuilds it from the changelog
	// (a full restore), and the query runs those batches again from the
	// offsets Kafka committed. (A process that dies after its last
	// batches were committed while it was idle loses nothing: its next
	// start reads only the changelog's records since the checkpoint last
	// recorded a commit.) At most an interval is replayed; nothing is
	// lost or doubled in state, and a read_committed reader sees each
	// batch once. Refused with the Once and AvailableNow triggers, and
	// without ExactlyOnce.
	AsyncProgress bool
	// AsyncProgressInterval is AsyncProgress's interval; the default is
	// one second.
	AsyncProgressInterval time.Duration
}

// defaultAsyncProgressInterval is AsyncProgressInterval's default, and
// maxAsyncProgressInterval the longest it may be: a transaction must
// commit well within the transaction timeout.
const (
	defaultAsyncProgressInterval = time.Second
	maxAsyncProgressInterval     = defaultTransactionTimeout * 3 / 4
)

// withDefaults fills in the defaults of the fields left zero.
func (o ChangelogOptions) withDefaults() ChangelogOptions {
	if o.Partitions == 0 {
		o.Partitions = 1
	}
	if o.ProduceTimeout == 0 {
		o.ProduceTimeout = defaultChangelogProduceTimeout
	}
	if o.AsyncProgressInterval == 0 {
		o.AsyncProgressInterval = defaultAsyncProgressInterval
	}
	return o
}

// The headers of a changelog record: the id of the batch that wrote it,
// 8 bytes big-endian.
const changelogBatchHeader = "streamgen-batch"

// defaultChangelogProduceTimeout is ChangelogOptions.ProduceTimeout's
// default.
const defaultChangelogProduceTimeout = 30 * time.Second

// changelogFetchBytes is what one fetch of a restore reads of a partition.
const changelogFetchBytes = 16 << 20

// Changelog returns the query option that keeps a copy of the query's
// checkpoint in a compacted Kafka topic, as Kafka Streams does for its
// state stores, so that the state survives the loss of its disk:
//
//   - every batch's changes (state entries, timers, expiry index, and the
//     progress: sources' offsets, batch id, watermark) are produced to the
//     topic, key the store's key and value its value, a tombstone for a
//     deletion, and acknowledged before the batch commits to the local
//     checkpoint, which records how far the topic goes;
//   - at start, a checkpoint directory that is empty, or behind the topic
//     (a batch produced but not committed locally), is restored from the
//     topic before the first batch, and the query goes on from the
//     restored progress, its sources' offsets with it;
//   - a checkpoint that holds state but no record of the topic (a restore
//     that stopped halfway, or a directory the topic was not written
//     from) is cleared and restored from the topic, with a warning;
//   - so is a checkpoint behind the topic by records written longer ago
//     than the topic's delete.retention.ms (less a quarter of it, at most
//     an hour): compaction may have removed deletions among them, which
//     it would miss;
//   - a checkpoint of a topic deleted since and made again under the same
//     name (the checkpoint's record names the topic's ID, where the
//     cluster gives IDs) is cleared and restored from the new topic when
//     that holds records (another query's, or App.Reset's mark), with a
//     warning; found empty, the new topic is given the checkpoint, as a
//     checkpoint that ran without the changelog is;
//   - a restore applies the records of the batches the topic's last
//     progress record says complete as it reads them, so its memory does
//     not grow with the state.
//
// A batch whose records are not all acknowledged fails, uncommitted; the
// query ends with the error, and its next start, which restores from the
// topic anyway, first writes back over the failed batch's records the
// values the checkpoint holds, so that the topic's last value of every key
// is the checkpoint's again.
//
// The topic is written by one query at a time (the checkpoint's lock sees
// to that on one machine, not across machines). Without transactions a
// reader of the topic may see a failed batch's records until the next
// start writes over them: restore skips them.
func Changelog(opts ChangelogOptions) runtime.Option {
	return runtime.WithCommitter(func(s *runtime.Store) runtime.Committer {
		c := newChangelog(opts, s)
		if c.err == nil && opts.AsyncProgress {
			c.err = errors.New("streamgen: kafka changelog: options: AsyncProgress needs ExactlyOnce: without transactions, a batch's records could not be told from those of batches a dead process never committed")
		}
		return c
	})
}

// changelog is the committer Changelog makes: the store's Commit, after
// the batch's changes are in the topic. Restore and Commit are called by
// the query's goroutine, one at a time; Close may come from another.
type changelog struct {
	opts  ChangelogOptions
	store *runtime.Store
	// record names the committer's record in the store: the topic's end
	// offsets after the last committed batch (changelogRecord).
	record string
	err    error
	// ctx bounds the produces: the query's context, from Restore.
	ctx context.Context
	// txn, when set, are the transactions each batch commits through
	// (ExactlyOnce).
	txn *Transactions
	// task is the input partition the query owns, for a task of an App
	// (its records all go to that partition of the topic), or -1.
	task int32
	// standbyCopy, for a task of an App, says that the checkpoint is a
	// standby's copy: one the changelog no longer holds the records
	// after (deleted past it) is rebuilt from the topic, where the
	// task's own checkpoint is refused.
	standbyCopy bool
	// onFenced, for a task of an App, gives the task up as fenced: what
	// commitWhileIdle calls when its commit finds the producer fenced.
	onFenced func(error)

	mu     sync.Mutex
	client *kgo.Client
	closed bool

	// ends are the topic's end offsets by partition after the last
	// committed batch.
	ends map[int32]int64
	// metaSent is set once a batch carried the checkpoint's metadata.
	metaSent bool
	// startDeletions are the keys Start deleted (TakeStartDeletions),
	// until a batch carried them; startTaken is set once they are taken.
	startDeletions [][]byte
	startTaken     bool
	// failed is set when a batch's produce failed: every later commit
	// fails with it.
	failed error
	// restored counts the records the last restore applied, in
	// restoreTook.
	restored    int64
	restoreTook time.Duration
	// heldPeak is the most records the last restore held at once, until
	// it knew their batch complete.
	heldPeak int
	// restoreTotal and restoreApplied are the records the restore running
	// reads and those it has applied so far, for a progress report while
	// it runs.
	restoreTotal, restoreApplied atomic.Int64
	// rewound is set when the last restore rebuilt the store, which was
	// ahead of the topic, or too far behind it (stale).
	rewound bool
	// deleteRetention is the topic's delete.retention.ms, read at start.
	deleteRetention time.Duration
	// topicID is the topic's ID (Kafka's, a new one each time a topic of
	// the name is made), read at start; empty where the cluster gives
	// none.
	topicID string

	// With AsyncProgress: pendingEnds are the topic's end offsets after
	// the records acknowledged since the last commit (guarded by
	// pendingMu, as the acknowledgements come from the client's
	// goroutines), asyncErr the first of their failures; committed is
	// the last batch the topic holds (-1: none), uncommitted the last batch
	// committed locally; idleStop and idleDone stop and wait for the
	// goroutine that commits while no batch runs (commitIdle).
	pendingMu   sync.Mutex
	pendingEnds map[int32]int64
	asyncErr    error
	committed   int64
	uncommitted int64
	idleStop    chan struct{}
	idleDone    chan struct{}
	// recorded says that the store holds the committer's record: a
	// batch committed locally without one (AsyncProgress) writes one
	// first, saying the topic holds none of its batches, lest a restore
	// take the checkpoint, ahead of an empty topic, for one to copy to
	// it.
	recorded bool
	// txnStarted is set once Restore has started the transactions: Close
	// releases them only then (a start refused because another query
	// holds them must not release that query's).
	txnStarted bool
	// restoredProgress is the store's progress once Restore is done.
	restoredProgress    runtime.Progress
	restoredHasProgress bool
	// Buffers reused from batch to batch.
	buf     []byte
	changes []change
	records []kgo.Record
	ptrs    []*kgo.Record
}

// change is a record of a batch, its key and value in changelog.buf.
type change struct {
	partition                  int32
	keyStart, keyEnd, valueEnd int
	deleted                    bool
}

// changelogRecord is the committer's record in the store.
type changelogRecord struct {
	Topic string `json:"topic"`
	// Ends are the topic's end offsets by partition after the last
	// committed batch.
	Ends map[int32]int64 `json:"ends"`
	// Async is set by a changelog with AsyncProgress: Committed is then
	// the last batch the topic holds (-1: none yet), and the local
	// checkpoint may be ahead of it.
	Async     bool  `json:"async,omitempty"`
	Committed int64 `json:"committed,omitempty"`
	// At is a time, in Unix milliseconds, before which none of the
	// topic's records after Ends was written (0: not known, a record
	// written before it was kept): compaction may have removed the
	// deletions among them once the topic's delete.retention.ms has
	// passed since (see changelog.stale).
	At int64 `json:"at,omitempty"`
	// TopicID is the ID of the topic the offsets are of, where the
	// cluster gives one: a checkpoint of a topic since deleted and made
	// again under the same name (App.Reset, or by hand) is told from
	// one of the topic there now, whose offsets mean other records.
	TopicID string `json:"topicID,omitempty"`
}

func newChangelog(opts ChangelogOptions, s *runtime.Store) *changelog {
	opts = opts.withDefaults()
	c := &changelog{opts: opts, store: s, record: "kafka-changelog/" + opts.Topic, ends: map[int32]int64{}, pendingEnds: map[int32]int64{}, task: -1}
	c.err = opts.validate()
	return c
}

func (o ChangelogOptions) validate() error {
	var errs []error
	if err := o.Connection.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Topic == "" {
		errs = append(errs, errors.New("no Topic"))
	}
	if o.Partitions < 1 {
		errs = append(errs, fmt.Errorf("Partitions %d is not positive", o.Partitions))
	}
	if o.ReplicationFactor < 0 {
		errs = append(errs, fmt.Errorf("ReplicationFactor %d is negative", o.ReplicationFactor))
	}
	if o.ProduceTimeout < 0 {
		errs = append(errs, fmt.Errorf("ProduceTimeout %v is negative", o.ProduceTimeout))
	}
	if o.AsyncProgressInterval < 0 {
		errs = append(errs, fmt.Errorf("AsyncProgressInterval %v is negative", o.AsyncProgressInterval))
	}
	if o.AsyncProgress && o.AsyncProgressInterval >= maxAsyncProgressInterval {
		errs = append(errs, fmt.Errorf("AsyncProgressInterval %v: it must be under %v, for a transaction to commit before the cluster's transaction timeout (%v) aborts it", o.AsyncProgressInterval, maxAsyncProgressInterval, defaultTransactionTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: kafka changelog: options: %w", err)
	}
	return nil
}

// what names the changelog in errors.
func (c *changelog) what() string { return fmt.Sprintf("kafka changelog %q", c.opts.Topic) }

func (c *changelog) clientFor() (*kgo.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, fmt.Errorf("streamgen: %s: closed", c.what())
	}
	if c.client == nil {
		client, err := c.opts.Connection.newClient(
			kgo.ProducerLinger(0),
			kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.RecordDeliveryTimeout(c.opts.ProduceTimeout),
		)
		if err != nil {
			return nil, fmt.Errorf("streamgen: %s: client: %w", c.what(), err)
		}
		c.client = client
	}
	return c.client, nil
}

// Close closes the changelog's client. It is safe to call more than once,
// from any goroutine.
func (c *changelog) Close() error {
	if c.idleStop != nil {
		close(c.idleStop)
		<-c.idleDone
		c.idleStop = nil
	}
	if c.txn != nil && c.txnStarted {
		committed, err := c.txn.release(func() error {
			c.pendingMu.Lock()
			defer c.pendingMu.Unlock()
			return c.asyncErr
		})
		if committed && c.failed == nil {
			// Kafka now holds every batch committed locally: say so in
			// the store, or its next start would rebuild it.
			c.pendingMu.Lock()
			for part, end := range c.pendingEnds {
				c.ends[part] = max(c.ends[part], end)
			}
			c.pendingMu.Unlock()
			c.committed = c.uncommitted
			if serr := c.saveRecord(); err == nil {
				err = serr
			}
		}
		if err != nil {
			c.closeClient()
			return err
		}
	}
	c.closeClient()
	return nil
}

// closeClient closes the changelog's own client.
func (c *changelog) closeClient() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.client != nil {
		c.client.Close()
		c.client = nil
	}
}

// Commit produces the batch's changes, waits for them, then commits the
// batch to the store with the topic's new end offsets.
func (c *changelog) Commit(b *runtime.StateBatch, p runtime.Progress) error {
	if c.err != nil {
		return c.err
	}
	if c.failed != nil {
		return c.failed
	}
	// Before the batch's records: what another process writes after
	// them comes after it.
	began := time.Now()
	client, err := c.clientFor()
	if err != nil {
		return err
	}
	if !c.metaSent {
		if err := b.RewriteMeta(); err != nil {
			return err
		}
	}
	if !c.startTaken {
		var err error
		if c.startDeletions, err = c.store.TakeStartDeletions(); err != nil {
			return err
		}
		c.startTaken = true
	}
	if err := b.WriteProgress(p); err != nil {
		return err
	}
	async := c.txn != nil && c.opts.AsyncProgress
	c.buf, c.changes = c.buf[:0], c.changes[:0]
	if async {
		// The records are still in flight after Commit returns: each
		// batch's are its own.
		c.buf, c.records = nil, nil
	}
	progress := -1
	add := func(key, value []byte, deleted bool) error {
		part, err := c.topicPartition(key)
		if err != nil {
			return err
		}
		ch := change{partition: part, keyStart: len(c.buf), deleted: deleted}
		c.buf = append(c.buf, key...)
		ch.keyEnd = len(c.buf)
		c.buf = append(c.buf, value...)
		ch.valueEnd = len(c.buf)
		if runtime.IsProgressKey(key) {
			progress = len(c.changes)
		}
		c.changes = append(c.changes, ch)
		return nil
	}
	// The entries of state variables Start deleted (a pipeline change)
	// go first, with the first batch of the run.
	for _, key := range c.startDeletions {
		if err := add(key, nil, true); err != nil {
			return err
		}
	}
	if err := b.Changes(add); err != nil {
		return err
	}
	// The progress goes last, once every other record is in: a batch's
	// progress in the topic says the whole batch is there.
	if progress >= 0 {
		last := c.changes[progress]
		c.changes = append(append(c.changes[:progress], c.changes[progress+1:]...), last)
	}
	// The records share their header, which the client only reads.
	headers := []kgo.RecordHeader{{Key: changelogBatchHeader, Value: binary.BigEndian.AppendUint64(nil, uint64(p.BatchID))}}
	c.records = c.records[:0]
	for _, ch := range c.changes {
		r := kgo.Record{Topic: c.opts.Topic, Partition: ch.partition, Key: c.buf[ch.keyStart:ch.keyEnd:ch.keyEnd], Headers: headers}
		if !ch.deleted {
			r.Value = c.buf[ch.keyEnd:ch.valueEnd:ch.valueEnd]
		}
		c.records = append(c.records, r)
	}
	c.ptrs = c.ptrs[:0]
	for i := range c.records {
		c.ptrs = append(c.ptrs, &c.records[i])
	}
	ends := make(map[int32]int64, len(c.ends))
	for part, end := range c.ends {
		ends[part] = end
	}
	if async {
		return c.commitAsync(b, p, c.ptrs)
	}
	if c.txn != nil {
		// In a transaction the progress need not wait for the rest: the
		// transaction makes them visible together.
		ctx, cancel := c.commitContext()
		err := c.txn.commitBatch(ctx, func(client *kgo.Client) error { return c.produce(client, c.ptrs, ends, false) })
		cancel()
		if err != nil {
			c.failed = fmt.Errorf("streamgen: %s: batch %d: %w; the batch is not committed, and its records in Kafka are aborted: start the query again", c.what(), p.BatchID, err)
			return c.failed
		}
	} else if err := c.produce(client, c.ptrs, ends, progress >= 0); err != nil {
		c.failed = fmt.Errorf("streamgen: %s: batch %d: %w; the batch is not committed: start the query again (its start writes back the checkpoint's values over the batch's records)", c.what(), p.BatchID, err)
		return c.failed
	}
	c.metaSent, c.startDeletions = true, nil
	rec, err := json.Marshal(changelogRecord{Topic: c.opts.Topic, Ends: ends, At: began.UnixMilli(), TopicID: c.topicID})
	if err != nil {
		return fmt.Errorf("streamgen: %s: encode its offsets: %w", c.what(), err)
	}
	if err := b.SetCommitterRecord(c.record, rec); err != nil {
		return err
	}
	if err := c.store.Commit(b, p); err != nil {
		return err
	}
	c.ends = ends
	return nil
}

// commitAsync produces a batch's records in the open transaction without
// waiting for them, commits the transaction when AsyncProgressInterval
// has passed since the last commit (recording it in the batch's local
// commit), and commits the batch to the store.
func (c *changelog) commitAsync(b *runtime.StateBatch, p runtime.Progress, records []*kgo.Record) error {
	c.pendingMu.Lock()
	err := c.asyncErr
	c.pendingMu.Unlock()
	if err != nil {
		return c.fail(p.BatchID, err)
	}
	ack := func(r *kgo.Record, err error) {
		c.pendingMu.Lock()
		defer c.pendingMu.Unlock()
		if err != nil {
			if c.asyncErr == nil {
				c.asyncErr = err
			}
			return
		}
		c.pendingEnds[r.Partition] = max(c.pendingEnds[r.Partition], r.Offset+1)
	}
	ctx, cancel := c.commitContext()
	defer cancel()
	due, err := c.txn.produceBatch(ctx, p.BatchID, records, ack, c.asyncFailure)
	if err != nil {
		return c.fail(p.BatchID, err)
	}
	c.metaSent, c.startDeletions = true, nil
	if due {
		c.pendingMu.Lock()
		for part, end := range c.pendingEnds {
			c.ends[part] = max(c.ends[part], end)
		}
		c.pendingMu.Unlock()
		c.committed = p.BatchID
		if err := c.setRecord(b); err != nil {
			return err
		}
	} else if !c.recorded {
		// The topic holds none of the batches committed locally from
		// here on: c.committed is the last it holds (-1: none). (At 0:
		// the records after Ends are not known to be younger than any
		// time.)
		rec := c.currentRecord()
		rec.At = 0
		if err := c.writeRecord(b, rec); err != nil {
			return err
		}
	}
	if err := c.store.Commit(b, p); err != nil {
		return err
	}
	c.recorded = true
	c.uncommitted = p.BatchID
	return nil
}

// IdleErr returns, with AsyncProgress, the failure of a commit while
// idle (or of a record produced without waiting): the batches committed
// locally since the last commit to Kafka are not there, and the query
// stops to run them again from its next start (see runtime.IdleFailer).
func (c *changelog) IdleErr() error {
	if c.failed != nil {
		return nil // (reported by the batch that failed)
	}
	if err := c.asyncFailure(); err != nil {
		return c.fail(c.uncommitted, err)
	}
	return nil
}

// asyncFailure returns the first failure of the records produced without
// waiting (AsyncProgress).
func (c *changelog) asyncFailure() error {
	c.pendingMu.Lock()
	defer c.pendingMu.Unlock()
	return c.asyncErr
}

// commitContext bounds a commit's requests to Kafka by ProduceTimeout and
// not by the query's context: a query stopped (an App's task revoked)
// while its batch commits lets the commit finish, or time out, rather
// than leave its outcome unknown.
func (c *changelog) commitContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(c.context()), c.opts.ProduceTimeout)
}

// fail marks the changelog failed by the error of a batch: every later
// commit fails with it.
func (c *changelog) fail(batchID int64, err error) error {
	c.failed = fmt.Errorf("streamgen: %s: batch %d: %w; the batches since the last commit to Kafka are not committed there, and their records are aborted: start the query again", c.what(), batchID, err)
	if c.txn != nil {
		c.txn.spoil()
	}
	return c.failed
}

// record returns the committer's record as it stands.
func (c *changelog) currentRecord() changelogRecord {
	rec := changelogRecord{Topic: c.opts.Topic, Ends: c.ends, At: time.Now().UnixMilli(), TopicID: c.topicID}
	if c.txn != nil && c.opts.AsyncProgress {
		rec.Async, rec.Committed = true, c.committed
	}
	return rec
}

// setRecord writes the committer's record into a batch.
func (c *changelog) setRecord(b *runtime.StateBatch) error {
	return c.writeRecord(b, c.currentRecord())
}

// writeRecord writes rec, the committer's record, into a batch.
func (c *changelog) writeRecord(b *runtime.StateBatch, rec changelogRecord) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("streamgen: %s: encode its offsets: %w", c.what(), err)
	}
	return b.SetCommitterRecord(c.record, v)
}

// produce writes records, the last one (the progress, when lastApart)
// once all the others are acknowledged, and moves ends past them.
func (c *changelog) produce(client *kgo.Client, records []*kgo.Record, ends map[int32]int64, lastApart bool) error {
	ctx, cancel := c.commitContext()
	defer cancel()
	first := records
	var last []*kgo.Record
	if lastApart && len(records) > 0 {
		first, last = records[:len(records)-1], records[len(records)-1:]
	}
	for _, rs := range [][]*kgo.Record{first, last} {
		if len(rs) == 0 {
			continue
		}
		if err := client.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			return err
		}
		for _, r := range rs {
			ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
		}
	}
	return nil
}

// context is the query's context, from Restore.
func (c *changelog) context() context.Context {
	if c.ctx == nil {
		return context.Background()
	}
	return c.ctx
}

// Restore brings the store up to the topic (see Changelog): it creates
// the topic at the first start, reads it from the offsets the store
// recorded (from its start when the store recorded none), applies the
// records of committed batches, and writes the store's values back over
// the records of a batch that failed. A store the topic does not hold yet
// (a query that ran without the changelog) is copied to it.
func (c *changelog) Restore(ctx context.Context) error {
	if err := c.restoreStore(ctx); err != nil {
		return err
	}
	p, ok, err := c.store.Progress()
	if err != nil {
		return err
	}
	c.restoredProgress, c.restoredHasProgress = p, ok
	if c.txn != nil && c.opts.AsyncProgress {
		c.idleStop, c.idleDone = make(chan struct{}), make(chan struct{})
		go c.commitWhileIdle()
	}
	return nil
}

// commitWhileIdle commits the transaction, until Close, whenever
// AsyncProgressInterval has passed with batches in it that no later batch
// has committed (see Transactions.commitIdle).
func (c *changelog) commitWhileIdle() {
	defer close(c.idleDone)
	tick := time.NewTicker(max(c.opts.AsyncProgressInterval/4, 10*time.Millisecond))
	defer tick.Stop()
	for {
		select {
		case <-c.idleStop:
			return
		case <-tick.C:
		}
		if err := c.txn.commitIdle(c.asyncFailure); err != nil {
			// Another instance has the partition: the task stops now,
			// not at its next batch, and the App rejoins the group. (A
			// transaction the coordinator no longer holds open, which
			// it aborted for the producer that claimed the ID, is
			// answered INVALID_TXN_STATE by some brokers, where Kafka
			// answers PRODUCER_FENCED.)
			if (taskMigrated(err) || errors.Is(err, kerr.InvalidTxnState)) && c.onFenced != nil {
				c.onFenced(err)
				return
			}
			// The transaction is aborted: the batches in it, committed
			// locally, are not in Kafka. The next batch fails, and the
			// query's next start rebuilds its checkpoint from the
			// changelog and runs them again; a later transaction's
			// commit must not pass for theirs.
			c.pendingMu.Lock()
			if c.asyncErr == nil {
				c.asyncErr = fmt.Errorf("the commit while idle of the batches since the last commit failed, and their transaction was aborted: %w", err)
			}
			c.pendingMu.Unlock()
			slog.Warn("streamgen: kafka changelog: commit the transaction of the batches since the last", "topic", c.opts.Topic, "error", err)
			return
		}
	}
}

// restoreStore is Restore's work: see Restore.
func (c *changelog) restoreStore(ctx context.Context) error {
	if c.err != nil {
		return c.err
	}
	c.ctx = ctx
	client, err := c.clientFor()
	if err != nil {
		return err
	}
	if err := c.ensureTopic(ctx, client); err != nil {
		return err
	}
	if c.txn != nil {
		// Fence before reading: no earlier holder of the transactional
		// ID commits a batch after the restore has read the topic.
		if err := c.txn.start(ctx); err != nil {
			return err
		}
		c.txnStarted = true
	}
	reader := Source(Options{Connection: c.opts.Connection, Partitions: map[string][]int32{c.opts.Topic: c.partitions()}, Name: "changelog " + c.opts.Topic})
	defer reader.Close()
	reader.fetchBytes = changelogFetchBytes
	rclient, err := reader.clientFor()
	if err != nil {
		return err
	}
	parts := make([]topicPartition, 0, c.opts.Partitions)
	for _, p := range c.partitions() {
		parts = append(parts, topicPartition{c.opts.Topic, p})
	}
	starts, err := reader.listOffsets(ctx, rclient, parts, earliestTimestamp)
	if err != nil {
		return err
	}
	ends, err := reader.listOffsets(ctx, rclient, parts, latestTimestamp)
	if err != nil {
		return err
	}
	rec, hasRecord, err := c.readRecord()
	if err != nil {
		return err
	}
	recorded := rec.Ends
	local, hasProgress, err := c.store.Progress()
	if err != nil {
		return err
	}
	// (A record of a run without AsyncProgress is replaced by the first
	// batch committed locally: it says nothing of batches in Kafka.)
	c.recorded = hasRecord && rec.Async
	c.committed, c.uncommitted = -1, -1 // no batch
	if hasProgress {
		c.committed, c.uncommitted = local.BatchID, local.BatchID
	}
	topicEmpty := true
	for _, tp := range parts {
		if ends[tp] > starts[tp] {
			topicEmpty = false
		}
	}
	madeAgain := false
	if hasRecord {
		if madeAgain, err = c.ofDeletedTopic(ctx, reader, rclient, parts, starts, ends, rec); err != nil {
			return err
		}
	}
	from := map[int32]int64{}
	switch {
	case madeAgain && !topicEmpty:
		// The checkpoint's offsets are of the topic deleted: read from
		// them, the new topic's records would be applied in part, over
		// state they are not of. (Made again and still empty, the topic
		// takes the checkpoint back: see below.)
		slog.Warn("streamgen: the changelog topic was deleted and made again since the checkpoint last wrote to it, and it holds records the checkpoint is not of (App.Reset's mark, or another query's batches): replacing the checkpoint's state with the topic's",
			"topic", c.opts.Topic, "checkpointTopicID", rec.TopicID, "topicID", c.topicID, "checkpointBatch", local.BatchID)
		for _, tp := range parts {
			from[tp.partition] = starts[tp]
		}
		c.rewound = true
	case hasRecord && rec.Async && hasProgress && local.BatchID > rec.Committed:
		if topicEmpty && rec.Committed < 0 && !madeAgain {
			// No transaction of the query's committed (its first
			// aborted, the process died before its first commit): its
			// batches are in the store alone, their output aborted, and
			// run again from the start.
			slog.Warn("streamgen: the checkpoint's batches were never committed to Kafka (no transaction of the query's committed): starting it over",
				"topic", c.opts.Topic, "checkpointBatch", local.BatchID)
			for _, tp := range parts {
				from[tp.partition] = starts[tp]
			}
			c.rewound = true
			return c.restore(ctx, reader, rclient, parts, from, ends)
		}
		if topicEmpty {
			return fmt.Errorf("streamgen: %s: the checkpoint is ahead of the changelog (batch %d, the changelog's last %d), and the topic is empty: was it deleted and made again? "+
				"Delete the checkpoint directory to start the query over, or restore the topic", c.what(), local.BatchID, rec.Committed)
		}
		for _, tp := range parts {
			if at, ok := recorded[tp.partition]; ok && at > ends[tp] {
				return fmt.Errorf("streamgen: %s: partition %d ends at offset %d, and the checkpoint recorded offset %d: was the topic deleted and made again? "+
					"Delete the checkpoint directory to start the query over, or restore the topic", c.what(), tp.partition, ends[tp], at)
			}
		}
		// A commit while idle (commitWhileIdle) writes no record: the
		// checkpoint's last batches may be in the topic after all, the
		// process having died before a batch recorded their commit. The
		// topic's tail from the recorded offsets then ends with the
		// checkpoint's own last batch (its progress record the very
		// bytes the store holds: another process's batch of the same id,
		// which ran after this one's were aborted, has other offsets and
		// times), and the store, which holds the tail's records already,
		// reads just that tail: applied again, in order, they leave each
		// key as its last write left it, as the store has it.
		if own, err := c.tailEndsWithOwn(ctx, reader, rclient, parts, recorded, starts, ends); err != nil {
			return err
		} else if own {
			slog.Info("streamgen: the checkpoint's last batches were committed to its changelog while the query was idle: reading the topic from the offsets it recorded",
				"topic", c.opts.Topic, "checkpointBatch", local.BatchID, "recordedBatch", rec.Committed)
			for _, tp := range parts {
				if at, ok := recorded[tp.partition]; ok {
					from[tp.partition] = at
				} else {
					from[tp.partition] = starts[tp]
				}
			}
			return c.restore(ctx, reader, rclient, parts, from, ends)
		}
		slog.Warn("streamgen: the checkpoint is ahead of its changelog (its last batches were never committed to Kafka): rebuilding it from the changelog",
			"topic", c.opts.Topic, "checkpointBatch", local.BatchID, "changelogBatch", rec.Committed)
		for _, tp := range parts {
			from[tp.partition] = starts[tp]
		}
		c.rewound = true
		return c.restore(ctx, reader, rclient, parts, from, ends)
	case hasRecord && topicEmpty && hasProgress:
		slog.Warn("streamgen: the changelog topic is empty, and the checkpoint recorded records in it: copying the checkpoint to it again", "topic", c.opts.Topic)
		return c.seed(ctx, client)
	case hasRecord:
		behind, deleted := false, false
		for _, tp := range parts {
			at, ok := recorded[tp.partition]
			if !ok {
				at = starts[tp]
			}
			if at > ends[tp] {
				return fmt.Errorf("streamgen: %s: partition %d ends at offset %d, and the checkpoint recorded offset %d: was the topic deleted and made again? "+
					"Delete the topic to copy the checkpoint to it again, or start from a new checkpoint directory", c.what(), tp.partition, ends[tp], at)
			}
			if at < starts[tp] && !c.standbyCopy {
				return fmt.Errorf("streamgen: %s: partition %d starts at offset %d, after the offset %d the checkpoint recorded: records were deleted (DeleteRecords, or retention on a topic that is not only compacted)",
					c.what(), tp.partition, starts[tp], at)
			}
			deleted = deleted || at < starts[tp]
			from[tp.partition] = at
			behind = behind || at < ends[tp]
		}
		if deleted {
			// A standby's copy, behind what the topic keeps: rebuilt
			// from the topic, as a new instance would restore it.
			slog.Warn("streamgen: the standby's copy of the checkpoint is behind the start of its changelog (records deleted): rebuilding it from the changelog",
				"topic", c.opts.Topic, "checkpointBatch", local.BatchID)
			for _, tp := range parts {
				from[tp.partition] = starts[tp]
			}
			c.rewound = true
		} else if !behind {
			c.ends = recorded
			return nil
		} else if c.stale(rec) {
			slog.Warn("streamgen: the checkpoint is behind its changelog by records older than the topic keeps deletions (delete.retention.ms): rebuilding it from the changelog, as compaction may have removed deletions it does not hold",
				"topic", c.opts.Topic, "checkpointBatch", local.BatchID, "recordedAt", time.UnixMilli(rec.At), "deleteRetention", c.deleteRetention)
			for _, tp := range parts {
				from[tp.partition] = starts[tp]
			}
			c.rewound = true
		}
	case topicEmpty && hasProgress:
		return c.seed(ctx, client)
	case topicEmpty:
		// A new query on a new topic.
		c.ends = map[int32]int64{}
		return nil
	default:
		// No record of the topic: a new checkpoint directory, or one a
		// restore stopped in the middle of (its pieces committed, its
		// record not yet written). The topic is whole; what the store
		// holds of it may miss deletions the topic has compacted away.
		for _, tp := range parts {
			from[tp.partition] = starts[tp]
		}
		// (A restore applies a complete batch's records before its
		// progress record: one stopped halfway may leave records and no
		// progress.)
		partial, err := holdsRecords(c.store)
		if err != nil {
			return err
		}
		if hasProgress || partial {
			why := "a restore that stopped halfway, or a topic it did not write"
			if c.opts.AsyncProgress {
				why = "with AsyncProgress it is written by a batch that commits to Kafka, not by a commit while idle: no batch did since the start"
			}
			slog.Warn("streamgen: the checkpoint holds state but no record of the changelog topic ("+why+"): replacing its state with the topic's",
				"topic", c.opts.Topic, "checkpointBatch", local.BatchID)
			c.rewound = true
		}
	}
	return c.restore(ctx, reader, rclient, parts, from, ends)
}

// holdsRecords reports whether s holds a mirrored record.
func holdsRecords(s *runtime.Store) (bool, error) {
	errFound := errors.New("found")
	err := s.Snapshot(func([]byte, []byte) error { return errFound })
	if errors.Is(err, errFound) {
		return true, nil
	}
	return false, err
}

// topicPartition is the topic's partition for a mirrored record: its
// input partition's (runtime.KeyPartition), or, for a task of an App,
// which owns one input partition, that partition's.
func (c *changelog) topicPartition(key []byte) (int32, error) {
	part := runtime.KeyPartition(key)
	if c.task >= 0 {
		if part != 0 {
			return 0, fmt.Errorf("streamgen: %s: state of input partition %d in the task of partition %d", c.what(), part, c.task)
		}
		return c.task, nil
	}
	if part >= uint32(c.opts.Partitions) {
		return 0, fmt.Errorf("streamgen: %s: state of input partition %d, and the topic has %d partitions", c.what(), part, c.opts.Partitions)
	}
	return int32(part), nil
}

// partitions are the topic's partitions the changelog writes and
// restores.
func (c *changelog) partitions() []int32 {
	if c.task >= 0 {
		return []int32{c.task}
	}
	parts := make([]int32, c.opts.Partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	return parts
}

// readRecord reads the committer's record; ok is false when the store has
// none.
func (c *changelog) readRecord() (rec changelogRecord, ok bool, err error) {
	v, ok, err := c.store.CommitterRecord(c.record)
	if err != nil || !ok {
		return changelogRecord{}, false, err
	}
	if err := json.Unmarshal(v, &rec); err != nil {
		return changelogRecord{}, false, fmt.Errorf("streamgen: %s: the checkpoint's record of the topic's offsets is corrupt: %w", c.what(), err)
	}
	if rec.Ends == nil {
		rec.Ends = map[int32]int64{}
	}
	return rec, true, nil
}

// ensureTopic creates the topic, compacted, or checks the one there.
func (c *changelog) ensureTopic(ctx context.Context, client *kgo.Client) error {
	adm := kadm.NewClient(client)
	rf := c.opts.ReplicationFactor
	if rf == 0 {
		rf = -1
	}
	compact := "compact"
	resp, err := adm.CreateTopic(ctx, c.opts.Partitions, rf, map[string]*string{"cleanup.policy": &compact}, c.opts.Topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		c.topicID = topicIDString(resp.ID)
		return c.readDeleteRetention(ctx, adm)
	case !errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("streamgen: %s: create the topic: %w", c.what(), err)
	}
	detail, err := c.readTopic(ctx, adm)
	if err != nil {
		return err
	}
	if n := len(detail.Partitions); n < int(c.opts.Partitions) {
		return fmt.Errorf("streamgen: %s: the topic has %d partitions, fewer than the %d of ChangelogOptions.Partitions", c.what(), n, c.opts.Partitions)
	}
	cfg, err := describeTopic(ctx, adm, c.opts.Topic)
	if err != nil {
		return fmt.Errorf("streamgen: %s: %w", c.what(), err)
	}
	if policy, ok := cfg["cleanup.policy"]; ok && (!containsCompact(policy) || policyHas(policy, "delete")) {
		return fmt.Errorf("streamgen: %s: the topic's cleanup.policy is %q: it must be compact alone, or its old records, the state of keys not written lately, are deleted", c.what(), policy)
	}
	return c.setDeleteRetention(cfg)
}

// noTopicIDs makes topicIDString see none, as on a cluster that gives
// none (tests).
var noTopicIDs bool

// topicIDString is id as the changelog's record keeps it: empty for the
// zero ID of a cluster that gives none.
func topicIDString(id kadm.TopicID) string {
	if id == (kadm.TopicID{}) || noTopicIDs {
		return ""
	}
	return id.String()
}

// readTopic describes the topic, and keeps its ID in c.topicID.
func (c *changelog) readTopic(ctx context.Context, adm *kadm.Client) (kadm.TopicDetail, error) {
	details, err := adm.ListTopics(ctx, c.opts.Topic)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		return kadm.TopicDetail{}, fmt.Errorf("streamgen: %s: describe the topic: %w", c.what(), err)
	}
	c.topicID = topicIDString(details[c.opts.Topic].ID)
	return details[c.opts.Topic], nil
}

// madeAgain reports whether rec, the checkpoint's record, is of another
// topic than the one of the name now: one deleted since and made again.
// A record written before records kept the ID, or a cluster that gives
// none, says nothing.
func (c *changelog) madeAgain(rec changelogRecord) bool { return otherTopic(rec.TopicID, c.topicID) }

// otherTopic reports whether a record of the topic of ID recorded is of
// another topic than the one of ID now; an empty ID says nothing.
func otherTopic(recorded, now string) bool { return recorded != "" && now != "" && recorded != now }

// ofDeletedTopic reports whether rec, the checkpoint's record, is of a
// topic deleted and made again since: by the topic's ID, or, where the
// record or the cluster has none, by App.Reset's record, newer than rec,
// at the start of one of parts.
func (c *changelog) ofDeletedTopic(ctx context.Context, reader *TopicSource, client *kgo.Client, parts []topicPartition, starts, ends offsets, rec changelogRecord) (bool, error) {
	if rec.TopicID != "" && c.topicID != "" {
		return c.madeAgain(rec), nil
	}
	madeAgain, err := resetAfter(ctx, reader, client, parts, starts, ends, rec.At)
	if err != nil {
		return false, fmt.Errorf("streamgen: %s: %w", c.what(), err)
	}
	return madeAgain, nil
}

// readDeleteRetention reads the topic's delete.retention.ms into
// c.deleteRetention.
func (c *changelog) readDeleteRetention(ctx context.Context, adm *kadm.Client) error {
	cfg, err := describeTopic(ctx, adm, c.opts.Topic)
	if err != nil {
		return fmt.Errorf("streamgen: %s: %w", c.what(), err)
	}
	return c.setDeleteRetention(cfg)
}

// setDeleteRetention sets c.deleteRetention from the topic's
// configuration: its delete.retention.ms, how long compaction keeps a
// deletion (Kafka's default, a day, when the broker does not say).
func (c *changelog) setDeleteRetention(cfg map[string]string) error {
	c.deleteRetention = 24 * time.Hour
	v, ok := cfg["delete.retention.ms"]
	if !ok || v == "" {
		return nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return fmt.Errorf("streamgen: %s: the topic's delete.retention.ms %q: %w", c.what(), v, err)
	}
	c.deleteRetention = time.Duration(ms) * time.Millisecond
	return nil
}

// describeTopic returns the topic's configuration, by key.
func describeTopic(ctx context.Context, adm *kadm.Client, topic string) (map[string]string, error) {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("describe the topic's configuration: %w", err)
	}
	out := map[string]string{}
	for _, rc := range configs {
		if rc.Err != nil {
			return nil, fmt.Errorf("describe the topic's configuration: %w", rc.Err)
		}
		for _, cfg := range rc.Configs {
			if cfg.Value != nil {
				out[cfg.Key] = *cfg.Value
			}
		}
	}
	return out, nil
}

// stale reports whether compaction may have removed deletions the
// checkpoint recorded by rec does not hold: records after its offsets
// were written before the topic's delete.retention.ms ago (or when, is
// not known). Read from its offsets, the topic would leave the values
// they deleted in the checkpoint, so it is rebuilt from the topic's
// start instead. A margin of a quarter of the retention, at most an
// hour, covers the time a commit takes and clocks apart.
func (c *changelog) stale(rec changelogRecord) bool {
	if rec.At == 0 {
		return true
	}
	margin := min(c.deleteRetention/4, time.Hour)
	return time.Since(time.UnixMilli(rec.At))+margin >= c.deleteRetention
}

func containsCompact(policy string) bool { return policyHas(policy, "compact") }

// policyHas reports whether the cleanup.policy list policy names one.
func policyHas(policy, one string) bool {
	for p := range strings.SplitSeq(policy, ",") {
		if strings.TrimSpace(p) == one {
			return true
		}
	}
	return false
}

// lastProgress returns the batch of the last progress record in the
// offsets [from, end) of the changelog's partition tp (-1: none). It
// reads back from end, a range at a time, each range four times the one
// after it: the last progress record is followed only by the records of
// a batch that failed, if any.
func lastProgress(ctx context.Context, reader *TopicSource, client *kgo.Client, tp topicPartition, from, end int64, lost func(lostRange) error) (int64, error) {
	return lastProgressRecord(ctx, reader, client, tp, from, end, lost, nil)
}

// lastProgressRecord is lastProgress, also setting *record, when record
// is not nil, to the progress record of the batch it returns (the last
// such when several).
func lastProgressRecord(ctx context.Context, reader *TopicSource, client *kgo.Client, tp topicPartition, from, end int64, lost func(lostRange) error, record **kgo.Record) (int64, error) {
	n := int64(256)
	for to := end; to > from; n *= 4 {
		start := max(from, to-n)
		last := int64(-1)
		err := reader.fetchRange(ctx, client, tp, start, to, lost, func(rec *kgo.Record) error {
			if !runtime.IsProgressKey(rec.Key) {
				return nil
			}
			batch, err := recordBatch(rec)
			if err != nil {
				return fmt.Errorf("partition %d offset %d: %w", rec.Partition, rec.Offset, err)
			}
			if batch >= last && record != nil {
				*record = rec
			}
			last = max(last, batch)
			return nil
		})
		if err != nil || last >= 0 {
			return last, err
		}
		to = start
	}
	return -1, nil
}

// tailEndsWithOwn reports whether the topic's records after the offsets
// recorded end with the store's own last batch: whether the last progress
// record among them is, byte for byte, the progress the store holds. It
// is false when a partition no longer holds the records after its
// recorded offset (DeleteRecords), or the progress partition has no
// record after it.
func (c *changelog) tailEndsWithOwn(ctx context.Context, reader *TopicSource, client *kgo.Client, parts []topicPartition, recorded map[int32]int64, starts, ends offsets) (bool, error) {
	if len(parts) == 0 {
		return false, nil
	}
	for _, tp := range parts {
		if at, ok := recorded[tp.partition]; ok && at < starts[tp] {
			return false, nil
		}
	}
	tp := parts[0]
	if part, err := c.topicPartition(nil); err == nil {
		if i := slices.IndexFunc(parts, func(tp topicPartition) bool { return tp.partition == part }); i >= 0 {
			tp = parts[i]
		}
	}
	from, ok := recorded[tp.partition]
	if !ok {
		from = starts[tp]
	}
	if from >= ends[tp] {
		return false, nil
	}
	var last *kgo.Record
	_, err := lastProgressRecord(ctx, reader, client, tp, from, ends[tp], func(l lostRange) error {
		return fmt.Errorf("streamgen: %s: %v", c.what(), l)
	}, &last)
	if err != nil {
		return false, fmt.Errorf("streamgen: %s: find the last batch in the topic: %w", c.what(), err)
	}
	if last == nil {
		return false, nil
	}
	local, ok, err := c.store.Read(last.Key)
	if err != nil {
		return false, err
	}
	return ok && bytes.Equal(local, last.Value), nil
}

// pendingRecord is a restored record held until its batch is known to be
// complete.
type pendingRecord struct {
	key, value []byte
	deleted    bool
	batch      int64
}

// restore applies the topic's records from from to ends. A record is
// applied once its batch is known complete: at or before the batch of
// the last progress record (produced last of its batch, and found
// first), as it is read. The records after the last progress are a batch
// that failed, held, whose keys are written back with the restored
// values.
func (c *changelog) restore(ctx context.Context, reader *TopicSource, rclient *kgo.Client, parts []topicPartition, from map[int32]int64, ends offsets) error {
	r, err := c.store.BeginBulkRestore()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.DeleteCommitterRecord(c.record); err != nil {
		return err
	}
	if c.rewound {
		if err := r.Clear(); err != nil {
			return err
		}
		c.committed, c.uncommitted = -1, -1 // the topic's progress, if any, sets them (saveEnds)
	}
	started := time.Now()
	// The id of the last batch whose progress was read: records of later
	// batches wait, in order per partition, in held.
	progress := int64(-1)
	if p, ok, err := c.store.Progress(); err != nil {
		return err
	} else if ok {
		progress = p.BatchID
	}
	held := map[int32][]pendingRecord{}
	heldNow := 0 // of every partition
	c.heldPeak = 0
	var total int64
	for _, tp := range parts {
		total += max(0, ends[tp]-from[tp.partition])
	}
	c.restoreTotal.Store(total)
	c.restoreApplied.Store(0)
	apply := func(key, value []byte, deleted bool) error {
		c.restoreApplied.Add(1)
		if deleted {
			return r.Delete(key)
		}
		return r.Set(key, value)
	}
	release := func() error {
		for part, recs := range held {
			i := 0
			for ; i < len(recs) && recs[i].batch <= progress; i++ {
				if err := apply(recs[i].key, recs[i].value, recs[i].deleted); err != nil {
					return err
				}
			}
			// What is left moves to the front, keeping the slice's room
			// for the next batch's records.
			n := copy(recs, recs[i:])
			clear(recs[n:])
			held[part] = recs[:n]
			heldNow -= i
		}
		return nil
	}
	lost := func(l lostRange) error {
		return fmt.Errorf("streamgen: %s: %v", c.what(), l)
	}
	// The partition of the progress records is read first: the records
	// of the other partitions are then applied as they are read, rather
	// than held until a progress record says their batch is complete
	// (which held every record read before it, all of them in memory).
	// (runtime.KeyPartition puts the progress record, as any key that
	// is not a state entry's, in input partition 0.)
	if part, err := c.topicPartition(nil); err == nil {
		parts = slices.Clone(parts)
		if i := slices.IndexFunc(parts, func(tp topicPartition) bool { return tp.partition == part }); i > 0 {
			first := parts[i]
			copy(parts[1:i+1], parts[:i])
			parts[0] = first
		}
	}
	// The last progress record says which batches are complete: their
	// records are applied as they are read, and only those of later
	// batches (a batch that failed) are held. Found first, from the
	// end: in a compacted topic it is the only progress record left,
	// after nearly every other record, which were otherwise all held.
	if len(parts) > 0 && from[parts[0].partition] < ends[parts[0]] {
		last, err := lastProgress(ctx, reader, rclient, parts[0], from[parts[0].partition], ends[parts[0]], lost)
		if err != nil {
			return fmt.Errorf("streamgen: %s: restore: %w", c.what(), err)
		}
		progress = max(progress, last)
	}
	for _, tp := range parts {
		if from[tp.partition] >= ends[tp] {
			continue
		}
		err := reader.fetchRange(ctx, rclient, tp, from[tp.partition], ends[tp], lost, func(rec *kgo.Record) error {
			if isResetMark(rec) {
				return nil
			}
			batch, err := recordBatch(rec)
			if err != nil {
				return fmt.Errorf("streamgen: %s: partition %d offset %d: %w", c.what(), rec.Partition, rec.Offset, err)
			}
			deleted := rec.Value == nil
			if runtime.IsProgressKey(rec.Key) {
				if batch > progress {
					progress = batch
				}
				if err := release(); err != nil {
					return err
				}
				return apply(rec.Key, rec.Value, deleted)
			}
			if batch > progress || len(held[rec.Partition]) > 0 {
				held[rec.Partition] = append(held[rec.Partition], pendingRecord{key: rec.Key, value: rec.Value, deleted: deleted, batch: batch})
				heldNow++
				c.heldPeak = max(c.heldPeak, heldNow)
				return nil
			}
			return apply(rec.Key, rec.Value, deleted)
		})
		if err != nil {
			return fmt.Errorf("streamgen: %s: restore: %w", c.what(), err)
		}
	}
	if err := release(); err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	newEnds := map[int32]int64{}
	for _, tp := range parts {
		newEnds[tp.partition] = ends[tp]
	}
	// What is still held is a failed batch: its keys get the restored
	// values back, and the progress is written again after them.
	var failed []pendingRecord
	for _, recs := range held {
		failed = append(failed, recs...)
	}
	if len(failed) > 0 {
		if err := c.writeBack(ctx, failed, progress, newEnds); err != nil {
			return err
		}
	}
	if err := c.saveEnds(newEnds); err != nil {
		return err
	}
	c.ends = newEnds
	c.restored = r.Records()
	took := time.Since(started)
	c.restoreTook = took
	log := slog.Info
	if r.Records() == 0 && len(failed) == 0 {
		// Nothing but the markers of committed transactions.
		log = slog.Debug
	}
	log("streamgen: restored the checkpoint from its changelog", "topic", c.opts.Topic, "records", r.Records(),
		"took", took, "recordsPerSecond", int64(float64(r.Records())/max(took.Seconds(), 1e-9)), "failedBatchRecords", len(failed))
	return nil
}

// changelogResetKey is the key of the record App.Reset writes into each
// partition of a changelog topic it makes again. No store key is this
// one (runtime.Mirrored), and restores pass over it; it is there so that
// the topic is not empty, which would make a checkpoint of the deleted
// topic, on a machine Reset did not clear, copy itself back into it
// (see restoreStore).
const changelogResetKey = "\x03streamgen-reset"

// isResetMark reports whether rec is App.Reset's record.
func isResetMark(rec *kgo.Record) bool { return string(rec.Key) == changelogResetKey }

// resetMark is the value of App.Reset's record.
type resetMark struct {
	// At is when the Reset ran, in Unix milliseconds.
	At int64 `json:"resetAt"`
}

// resetAfter reports whether one of parts begins with App.Reset's record
// of a reset at or after at (Unix milliseconds; 0, not known: any
// reset): a checkpoint whose record is of at is of the topic the Reset
// deleted. A reset in the millisecond of the checkpoint's last commit
// counts: taken for one before the commit, a checkpoint the commit
// wrote after the reset is rebuilt from the topic it wrote (the same
// state, only slower), where the other way a checkpoint of the deleted
// topic would be refused.
func resetAfter(ctx context.Context, reader *TopicSource, client *kgo.Client, parts []topicPartition, starts, ends offsets, at int64) (bool, error) {
	for _, tp := range parts {
		if ends[tp] <= starts[tp] {
			continue
		}
		var found bool
		err := reader.fetchRange(ctx, client, tp, starts[tp], starts[tp]+1, func(lostRange) error { return nil }, func(r *kgo.Record) error {
			var mark resetMark
			if isResetMark(r) && json.Unmarshal(r.Value, &mark) == nil && (at == 0 || mark.At >= at) {
				found = true
			}
			return nil
		})
		if err != nil {
			return false, fmt.Errorf("read partition %d's first record: %w", tp.partition, err)
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// recordBatch reads a changelog record's batch id.
func recordBatch(rec *kgo.Record) (int64, error) {
	for _, h := range rec.Headers {
		if h.Key == changelogBatchHeader {
			if len(h.Value) != 8 {
				return 0, fmt.Errorf("header %s has %d bytes, not 8", changelogBatchHeader, len(h.Value))
			}
			return int64(binary.BigEndian.Uint64(h.Value)), nil
		}
	}
	return 0, fmt.Errorf("no %s header: not a streamgen changelog record", changelogBatchHeader)
}

// writeBack produces, for each key of a failed batch's records, the
// value the restored store holds (a tombstone when none), then the
// store's progress, as records of batch progress.
func (c *changelog) writeBack(ctx context.Context, failed []pendingRecord, progress int64, ends map[int32]int64) error {
	client, err := c.clientFor()
	if err != nil {
		return err
	}
	var batchID [8]byte
	binary.BigEndian.PutUint64(batchID[:], uint64(progress))
	seen := map[string]bool{}
	var records []*kgo.Record
	add := func(key []byte) error {
		value, ok, err := c.store.Read(key)
		if err != nil {
			return err
		}
		if !ok {
			value = nil
		} else if value == nil {
			value = []byte{}
		}
		part, err := c.topicPartition(key)
		if err != nil {
			return err
		}
		records = append(records, &kgo.Record{Topic: c.opts.Topic, Partition: part, Key: key, Value: value,
			Headers: []kgo.RecordHeader{{Key: changelogBatchHeader, Value: batchID[:]}}})
		return nil
	}
	var progressKey []byte
	for _, f := range failed {
		if runtime.IsProgressKey(f.key) {
			progressKey = f.key
			continue
		}
		if seen[string(f.key)] {
			continue
		}
		seen[string(f.key)] = true
		if err := add(f.key); err != nil {
			return err
		}
	}
	if progressKey != nil {
		if err := add(progressKey); err != nil {
			return err
		}
	}
	if err := c.produce(client, records, ends, false); err != nil {
		return fmt.Errorf("streamgen: %s: write back the values of a failed batch's keys: %w", c.what(), err)
	}
	return nil
}

// saveRecord records the committer's record in the store, as it stands.
func (c *changelog) saveRecord() error { return c.saveEnds(c.ends) }

// saveEnds records the topic's end offsets in the store, with the
// store's progress as the last batch the topic holds.
func (c *changelog) saveEnds(ends map[int32]int64) error {
	c.ends = ends
	if p, ok, err := c.store.Progress(); err != nil {
		return err
	} else if ok {
		c.committed, c.uncommitted = p.BatchID, p.BatchID
	}
	rec, err := json.Marshal(c.currentRecord())
	if err != nil {
		return fmt.Errorf("streamgen: %s: encode its offsets: %w", c.what(), err)
	}
	r, err := c.store.BeginRestore()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.SetCommitterRecord(c.record, rec); err != nil {
		return err
	}
	if err := r.Finish(); err != nil {
		return err
	}
	c.recorded = true
	return nil
}

// seedChunk is how many records seed produces at a time.
const seedChunk = 10_000

// seed copies the store to the empty topic: every mirrored record, the
// progress last.
func (c *changelog) seed(ctx context.Context, client *kgo.Client) error {
	p, _, err := c.store.Progress()
	if err != nil {
		return err
	}
	var batchID [8]byte
	binary.BigEndian.PutUint64(batchID[:], uint64(p.BatchID))
	var records []*kgo.Record
	var progress *kgo.Record
	ends := map[int32]int64{}
	err = c.store.Snapshot(func(key, value []byte) error {
		if len(records) == seedChunk {
			if err := c.produce(client, records, ends, false); err != nil {
				return fmt.Errorf("streamgen: %s: copy the checkpoint to the topic: %w", c.what(), err)
			}
			records = records[:0]
		}
		part, err := c.topicPartition(key)
		if err != nil {
			return err
		}
		r := &kgo.Record{Topic: c.opts.Topic, Partition: part, Key: append([]byte(nil), key...), Value: append([]byte{}, value...),
			Headers: []kgo.RecordHeader{{Key: changelogBatchHeader, Value: batchID[:]}}}
		if runtime.IsProgressKey(key) {
			progress = r
			return nil
		}
		records = append(records, r)
		return nil
	})
	if err != nil {
		return err
	}
	if progress != nil {
		records = append(records, progress)
	}
	if err := c.produce(client, records, ends, progress != nil); err != nil {
		return fmt.Errorf("streamgen: %s: copy the checkpoint to the topic: %w", c.what(), err)
	}
	if err := c.saveEnds(ends); err != nil {
		return err
	}
	c.ends = ends
	c.metaSent = true
	return nil
}

// CheckTrigger refuses AsyncProgress with a trigger that stops (Once,
// AvailableNow), as Spark refuses asynchronous progress tracking with
// them.
func (c *changelog) CheckTrigger(t runtime.Trigger) error {
	if c.txn != nil && c.opts.AsyncProgress && t.Stops() {
		return fmt.Errorf("streamgen: %s: AsyncProgress does not work with the %v trigger, which must record every batch's progress: use ProcessingTime or AsSoonAsPossible, or turn AsyncProgress off", c.what(), t)
	}
	return nil
}
