package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamgen/streamgen/runtime"
)

// Transactions commit each batch of a query exactly once, in one Kafka
// transaction: the rows its Kafka sinks write, its dead letters, and its
// changelog records, among them the progress with the sources' offsets.
// Make them with ExactlyOnce; give the query Option, and the sinks and the
// dead-letter topic that take part SinkOptions.Transactions and
// DeadLetterOptions.Transactions.
//
// A batch runs as Kafka Streams' exactly-once does:
//
//   - at the query's start the transactional ID is claimed (a producer
//     epoch of its own), which fences any other process still using it: a
//     transaction it left open is aborted, and its later commits fail;
//     then the checkpoint is restored from the changelog if the topic is
//     ahead of it (see Changelog), reading only committed transactions;
//   - the batch's first record begins a transaction; sinks and the
//     dead-letter topic produce into it, and the commit adds the batch's
//     changelog records and its progress, then commits the transaction;
//   - only then does the batch commit to the local checkpoint. A process
//     that dies between the two finds its checkpoint behind the topic at
//     its next start, and restores the batch from the changelog.
//
// So a batch that fails, or a process that dies, before the transaction
// commits leaves nothing a read_committed consumer sees, and the batch is
// run again from the same offsets; the local state never runs ahead of
// what Kafka committed. Readers of the output topics must read with
// read_committed isolation (kgo.FetchIsolationLevel(kgo.ReadCommitted()),
// isolation.level=read_committed) to see each batch once: a
// read_uncommitted reader also sees the records of aborted transactions.
//
// The Changelog option without transactions is the at-least-once
// alternative: faster (no transaction markers, no commit round trip), and
// a batch run again after a failure is written again.
//
// Transactions serve one query at a time. Their methods are safe for
// concurrent use.
type Transactions struct {
	opts ChangelogOptions
	id   string
	err  error
	// task is the input partition of the App task the transactions
	// serve, or -1.
	task int32

	mu     sync.Mutex
	client *kgo.Client // made at each query start, transactional
	// limits cap the client's record batches per topic, as the sinks
	// writing through it learn them (see batchLimits).
	limits batchLimits
	inTxn  bool
	// dirty is set when a sink or the dead-letter topic wrote into the
	// open transaction since the changelog last did: rows of a batch
	// not committed locally yet. spoiled is set when a batch failed in
	// the changelog's commit. Either makes release abort an open
	// transaction rather than commit it (AsyncProgress).
	dirty, spoiled bool
	// abandon makes release drop the client as a process that dies
	// does, neither committing nor aborting (tests); so does app's
	// abandoned.
	abandon bool
	app     *App
	// held makes neither a batch nor the commit while idle commit the
	// open transaction, whatever the time (tests).
	held bool
	// query is set while a query's committer holds the transactions.
	query  bool
	closed bool
	// lastCommit is when the last transaction committed (AsyncProgress).
	lastCommit time.Time
	// produced is one more than the id of the last batch produced into
	// the open transaction (AsyncProgress); inKafka, one more than the
	// id of the last batch a committed transaction holds (0: none), set
	// as a transaction commits.
	produced int64
	inKafka  atomic.Int64
	// last is the changelog of the last query started (tests read it).
	last *changelog
}

// defaultTransactionalPrefix prefixes the changelog topic in the default
// transactional ID.
const defaultTransactionalPrefix = "streamgen-"

// ExactlyOnce returns the transactions of a query whose changelog opts
// describe (see Transactions and Changelog). The transactional ID is
// opts.TransactionalID, by default "streamgen-" and the changelog topic:
// it must be the same at every start of the query, and no other producer's.
// Close the transactions once the query has stopped.
func ExactlyOnce(opts ChangelogOptions) *Transactions {
	opts = opts.withDefaults()
	t := &Transactions{opts: opts, id: opts.TransactionalID, err: opts.validate(), task: -1}
	if t.id == "" {
		t.id = defaultTransactionalPrefix + opts.Topic
	}
	return t
}

// Option is the query option that commits the query's batches through
// the transactions and keeps its changelog.
func (t *Transactions) Option() runtime.Option {
	return runtime.WithCommitter(func(s *runtime.Store) runtime.Committer {
		c := newChangelog(t.opts, s)
		c.txn, c.task = t, t.task
		t.mu.Lock()
		t.last = c
		t.mu.Unlock()
		return c
	})
}

// TransactionalID returns the transactional ID the transactions produce
// with.
func (t *Transactions) TransactionalID() string { return t.id }

// Close aborts a transaction left open and closes the client. A query
// started with Option afterwards fails.
func (t *Transactions) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	t.stopLocked()
}

func (t *Transactions) what() string { return fmt.Sprintf("kafka transactions %q", t.id) }

// start is called by the committer as its query starts: it makes a new
// transactional client (aborting what an earlier query of this process
// left open) and claims the transactional ID, fencing other producers.
func (t *Transactions) start(ctx context.Context) error {
	if t.err != nil {
		return t.err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return fmt.Errorf("streamgen: %s: closed", t.what())
	}
	if t.query {
		return fmt.Errorf("streamgen: %s: another query is running on them: a query's transactions serve one query at a time", t.what())
	}
	t.stopLocked()
	client, err := t.opts.Connection.newClient(
		kgo.TransactionalID(t.id),
		kgo.ProducerLinger(0),
		kgo.RecordPartitioner(changelogPartitioner{changelog: t.opts.Topic, others: rowPartitioner{defaultPartitioner()}}),
		// No RecordDeliveryTimeout: franz-go counts it from a record's
		// timestamp, which a repartitioned record keeps from its input
		// (an hour old, a year old): the produces are bounded by their
		// contexts instead.
		kgo.ProducerBatchMaxBytesFn(t.limits.fn),
	)
	if err != nil {
		return fmt.Errorf("streamgen: %s: client: %w", t.what(), err)
	}
	if err := fence(ctx, client, t.id); err != nil {
		client.Close()
		return fmt.Errorf("streamgen: %s: claim the transactional ID: %w", t.what(), err)
	}
	// The client loads its producer ID at its first transaction, with
	// an InitProducerID of its own, which bumps the epoch again: loaded
	// later, at the first batch's write, it would fence a process that
	// claimed the ID since this one's fence, and this one, restored
	// before that process committed, would commit batches again. Begun
	// and ended here (an empty transaction ends without a request), the
	// client holds the newest epoch from the start.
	if err := client.BeginTransaction(); err != nil {
		client.Close()
		return fmt.Errorf("streamgen: %s: claim the transactional ID: %w", t.what(), err)
	}
	if err := client.EndTransaction(ctx, kgo.TryAbort); err != nil {
		client.Close()
		return fmt.Errorf("streamgen: %s: claim the transactional ID: %w", t.what(), err)
	}
	t.client, t.query, t.lastCommit = client, true, time.Now()
	return nil
}

// fence claims the transactional ID with an InitProducerID request, as a
// producer's first use of it does: the coordinator aborts the
// transaction an earlier holder left open and bumps the epoch, so that
// holder's later requests are refused. It waits, within ctx, for the
// coordinator to abort what the earlier holder left open; the client's
// own claim follows (see start).
func fence(ctx context.Context, client *kgo.Client, id string) error {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &id
		req.TransactionTimeoutMillis = int32(defaultTransactionTimeout / time.Millisecond)
		resp, err := req.RequestWith(ctx, client)
		if err == nil {
			err = kerr.ErrorForCode(resp.ErrorCode)
		}
		// CONCURRENT_TRANSACTIONS: the coordinator is still aborting the
		// earlier holder's transaction.
		if err == nil || !kerr.IsRetriable(err) && !errors.Is(err, kerr.ConcurrentTransactions) {
			return err
		}
		if attempt == fenceAttempts {
			return fmt.Errorf("%d attempts, the last: %w", attempt, err)
		}
		if err := pause(ctx, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}

// fenceAttempts bounds the InitProducerID requests of a fence that the
// cluster answers with an error that may pass (about half a minute).
const fenceAttempts = 35

// defaultTransactionTimeout is franz-go's default transaction timeout,
// which fence asks for too.
const defaultTransactionTimeout = 40 * time.Second

// stopLocked aborts an open transaction and closes the client.
func (t *Transactions) stopLocked() {
	t.query = false
	if t.client == nil {
		return
	}
	if t.inTxn {
		ctx, cancel := context.WithTimeout(context.Background(), t.opts.ProduceTimeout)
		_ = t.abortLocked(ctx) // a transaction not ended is aborted by the coordinator in time, or by the next start's fence
		cancel()
	}
	t.client.Close()
	t.client = nil
}

// clientLocked returns the client in a transaction, beginning one if none
// is open.
func (t *Transactions) clientLocked(what string) (*kgo.Client, error) {
	if t.closed {
		return nil, fmt.Errorf("streamgen: %s: %s: closed", what, t.what())
	}
	if !t.query {
		return nil, fmt.Errorf("streamgen: %s: %s belong to no running query: start the query with the same transactions' Option", what, t.what())
	}
	if !t.inTxn {
		if err := t.client.BeginTransaction(); err != nil {
			return nil, fmt.Errorf("streamgen: %s: %s: begin a transaction: %w", what, t.what(), err)
		}
		t.inTxn = true
	}
	return t.client, nil
}

// produce writes records in the open transaction (beginning one) and
// waits until each is acknowledged; what names the writer in errors.
func (t *Transactions) produce(ctx context.Context, what string, records []*kgo.Record) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	client, err := t.clientLocked(what)
	if err != nil {
		return err
	}
	t.dirty = true
	return t.explain(produceWithin(ctx, client, records, t.opts.ProduceTimeout))
}

// produceWithin produces records and waits until each is acknowledged or
// failed, and returns the first failure; the write fails once timeout
// passes without an acknowledgement (a long write that goes on is not cut
// short), whatever the client's own retries would do.
func produceWithin(ctx context.Context, client *kgo.Client, records []*kgo.Record, timeout time.Duration) error {
	pctx, touch, stop := stallContext(ctx, timeout)
	defer stop()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	wg.Add(len(records))
	for _, r := range records {
		client.Produce(pctx, r, func(_ *kgo.Record, err error) {
			touch()
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
			wg.Done()
		})
	}
	wg.Wait()
	if pctx.Err() != nil && ctx.Err() == nil {
		// The stall cancelled the records' context: those the client
		// had not sent fail with it, and those it had in requests
		// already, acknowledged late, fail the write too, as the
		// timeout says.
		return noAcknowledgement(timeout, "the write", nil)
	}
	return firstErr
}

// stallContext returns a context that is cancelled when timeout passes
// without a call of touch (or when parent is done), and stop, which
// releases it.
func stallContext(parent context.Context, timeout time.Duration) (ctx context.Context, touch, stop func()) {
	ctx, cancel := context.WithCancel(parent)
	timer := time.AfterFunc(timeout, cancel)
	return ctx, func() { timer.Reset(timeout) }, func() {
		timer.Stop()
		cancel()
	}
}

// commitLocked commits the open transaction; on failure it aborts it.
func (t *Transactions) commitLocked(ctx context.Context) error {
	if !t.inTxn {
		return nil
	}
	err := t.client.Flush(ctx)
	if err == nil {
		err = t.client.EndTransaction(ctx, kgo.TryCommit)
		if err == nil {
			t.inTxn = false
			t.inKafka.Store(max(t.inKafka.Load(), t.produced))
			return nil
		}
	}
	if aerr := t.abortLocked(ctx); aerr != nil {
		// The abort's error counts only when it says the producer was
		// fenced: a retriable one must not make a commit refused for
		// good pass for one that Kafka's being slow explains
		// (kafkaUnavailable).
		if isFenced(aerr) {
			err = fmt.Errorf("%w; and its abort: %w", err, aerr)
		} else {
			err = fmt.Errorf("%w; and its abort: %v", err, aerr)
		}
	}
	return err
}

// explain adds to an error that says the producer was fenced what that
// means.
func (t *Transactions) explain(err error) error {
	if isFenced(err) {
		return fmt.Errorf("%w: another process started with transactional ID %q and fenced this one, or the transaction outlived the transaction timeout and the cluster aborted it", err, t.id)
	}
	return err
}

// isFenced reports whether err says that a producer was fenced: another
// process claimed its transactional ID, or the cluster aborted a
// transaction that outlived its timeout and bumped the producer's epoch.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) || errors.Is(err, kerr.InvalidProducerIDMapping)
}

// errNoAcknowledgement is the failure of a write that went ProduceTimeout
// without an acknowledgement from Kafka.
var errNoAcknowledgement = errors.New("no acknowledgement from Kafka")

// noAcknowledgement is the failure of a write or commit (during) that
// went timeout without an acknowledgement, cause the client's error, if
// any (the context's, which the timeout ended).
func noAcknowledgement(timeout time.Duration, during string, cause error) error {
	if cause == nil {
		return fmt.Errorf("%w for ProduceTimeout (%v) during %s", errNoAcknowledgement, timeout, during)
	}
	return fmt.Errorf("%w for ProduceTimeout (%v) during %s: %w", errNoAcknowledgement, timeout, during, cause)
}

// kafkaUnavailable reports whether err, a task's failure, came of Kafka
// being slow or out of reach for a while rather than of the task or its
// data: a write that went its ProduceTimeout (or the client's delivery
// timeout or retries) without an acknowledgement, an error Kafka calls
// retriable that the client gave up on (but for a topic it does not
// know, which waiting does not mend), a transaction the cluster asks to
// abort (TRANSACTION_ABORTABLE). Errors that do not come of a request to
// Kafka are not among them, whatever they are (a user function's
// deadline, a file's EOF). Kafka Streams takes such an error for a
// corrupted task, which it starts again from its state
// (TaskCorruptedException), not for the end of the application.
func kafkaUnavailable(err error) bool {
	if errors.Is(err, errNoAcknowledgement) || errors.Is(err, kgo.ErrRecordTimeout) || errors.Is(err, kgo.ErrRecordRetries) ||
		errors.Is(err, kerr.TransactionAbortable) {
		return true
	}
	ke, ok := errors.AsType[*kerr.Error](err)
	return ok && ke.Retriable && ke != kerr.UnknownTopicOrPartition && ke != kerr.UnknownTopicID
}

// timedOut marks err, the failure of a commit whose requests ctx bounds
// by ProduceTimeout, as a write without an acknowledgement when that
// deadline passed (the client's own error is then the context's).
func (t *Transactions) timedOut(ctx context.Context, err error) error {
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) && !errors.Is(err, errNoAcknowledgement) {
		return noAcknowledgement(t.opts.ProduceTimeout, "the commit", err)
	}
	return err
}

// taskMigrated reports whether err, from a task's transactional writes,
// means that the task is to be given up and the instance to rejoin its
// group, as Kafka Streams takes a TaskMigratedException (its
// RecordCollector's): the producer was fenced (isFenced), or it lost its
// sequence (OUT_OF_ORDER_SEQUENCE_NUMBER, or UNKNOWN_PRODUCER_ID, the
// broker having dropped the producer's state), after which it cannot
// write on in its transaction. The task starts again with a new
// producer, from its checkpoint and changelog.
func taskMigrated(err error) bool {
	return isFenced(err) || errors.Is(err, kerr.OutOfOrderSequenceNumber) || errors.Is(err, kerr.UnknownProducerID)
}

// abortLocked aborts the open transaction: its records are never seen by
// read_committed readers.
func (t *Transactions) abortLocked(ctx context.Context) error {
	if !t.inTxn {
		return nil
	}
	err := t.client.AbortBufferedRecords(ctx)
	eerr := t.client.EndTransaction(ctx, kgo.TryAbort)
	if eerr == nil {
		t.inTxn = false // else stopLocked tries again, on a fresh context
	} else if err == nil {
		err = eerr
	}
	return err
}

// changelogPartitioner places changelog records on the partition they
// name, and other records as others does (rowPartitioner).
type changelogPartitioner struct {
	changelog string
	others    kgo.Partitioner
}

func (p changelogPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	if topic == p.changelog {
		return kgo.ManualPartitioner().ForTopic(topic)
	}
	return p.others.ForTopic(topic)
}

// commitBatch runs produce in the open transaction (beginning one), then
// commits the transaction; when either fails the transaction is aborted.
func (t *Transactions) commitBatch(ctx context.Context, produce func(*kgo.Client) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	client, err := t.clientLocked("kafka changelog " + fmt.Sprintf("%q", t.opts.Topic))
	if err != nil {
		return err
	}
	if err := produce(client); err != nil {
		err = t.timedOut(ctx, err)
		if aerr := t.abortLocked(ctx); aerr != nil {
			err = fmt.Errorf("%w; and the transaction's abort: %v", err, aerr)
		}
		return t.explain(err)
	}
	if err := t.commitLocked(ctx); err != nil {
		return t.explain(fmt.Errorf("commit the transaction: %w", t.timedOut(ctx, err)))
	}
	return nil
}

// produceBatch produces a batch's changelog records into the open
// transaction (beginning one) without waiting for them, ack being called
// for each as it is acknowledged or fails; with commit, it then waits for
// them all and commits the transaction, unless failed (ack's first
// failure) says one failed: the transaction is then aborted.
// (AsyncProgress.)
func (t *Transactions) produceBatch(ctx context.Context, batch int64, records []*kgo.Record, ack func(*kgo.Record, error), failed func() error) (committed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.produced = batch + 1
	client, err := t.clientLocked("kafka changelog " + fmt.Sprintf("%q", t.opts.Topic))
	if err != nil {
		return false, err
	}
	// Not ctx: the records outlive this call, and a query stopped (its
	// context cancelled) commits them as it closes. They fail once
	// ProduceTimeout passes without an acknowledgement.
	pctx, touch, stop := stallContext(context.Background(), t.opts.ProduceTimeout)
	release := sync.OnceFunc(stop) // once the last record is acknowledged
	var left atomic.Int64
	left.Store(int64(len(records)))
	if len(records) == 0 {
		release()
	}
	for _, r := range records {
		client.Produce(pctx, r, func(r *kgo.Record, err error) {
			touch()
			if err != nil && pctx.Err() != nil {
				// The stall cancelled the record (its error is the
				// context's).
				err = noAcknowledgement(t.opts.ProduceTimeout, "the write", err)
			}
			ack(r, err)
			if left.Add(-1) == 0 {
				release()
			}
		})
	}
	t.dirty = false
	if t.held || time.Since(t.lastCommit) < t.opts.AsyncProgressInterval {
		return false, nil
	}
	return true, t.commitPendingLocked(ctx, failed)
}

// commitPendingLocked waits for the records produced into the open
// transaction and commits it, unless failed says one of them failed:
// the transaction is then aborted.
func (t *Transactions) commitPendingLocked(ctx context.Context, failed func() error) error {
	err := t.timedOut(ctx, t.client.Flush(ctx))
	if err == nil {
		err = failed()
	}
	if err != nil {
		if aerr := t.abortLocked(ctx); aerr != nil {
			err = fmt.Errorf("%w; and the transaction's abort: %v", err, aerr)
		}
		return t.explain(err)
	}
	if err := t.commitLocked(ctx); err != nil {
		return t.explain(fmt.Errorf("commit the transaction: %w", t.timedOut(ctx, err)))
	}
	t.lastCommit = time.Now()
	return nil
}

// commitIdle commits the open transaction when AsyncProgressInterval has
// passed since the last commit and it holds only batches committed
// locally: a query without new input runs no batch that would, and an
// open transaction holds back read_committed readers and would outlive
// the transaction timeout. (AsyncProgress.)
func (t *Transactions) commitIdle(failed func() error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.inTxn || t.dirty || t.spoiled || t.held || t.client == nil || time.Since(t.lastCommit) < t.opts.AsyncProgressInterval {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), t.opts.ProduceTimeout)
	defer cancel()
	if err := t.commitPendingLocked(ctx, failed); err != nil {
		t.spoiled = true
		return err
	}
	return nil
}

// spoil marks the open transaction as holding a failed batch's records:
// release aborts it.
func (t *Transactions) spoil() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.spoiled = true
}

// release is called by the committer as its query stops. A transaction
// left open is committed when it holds only batches committed locally
// (AsyncProgress, a query stopped between commits), and committed
// reports that, or that none was open; otherwise (a batch that failed)
// it is aborted.
func (t *Transactions) release(failed func() error) (committed bool, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { t.dirty, t.spoiled = false, false }()
	if t.abandon || t.app != nil && t.app.abandoned.Load() {
		if t.client != nil {
			t.client.Close() // a transaction left open: the next start's fence aborts it
			t.client, t.inTxn = nil, false
		}
		t.query = false
		return false, nil
	}
	if t.inTxn && !t.dirty && !t.spoiled && t.client != nil {
		ctx, cancel := context.WithTimeout(context.Background(), t.opts.ProduceTimeout)
		defer cancel()
		err := t.client.Flush(ctx)
		if err == nil {
			err = failed()
		}
		if err == nil {
			if err = t.commitLocked(ctx); err == nil {
				t.stopLocked()
				return true, nil
			}
		}
		t.stopLocked()
		return false, t.explain(fmt.Errorf("streamgen: %s: commit the batches since the last commit as the query stops: %w", t.what(), err))
	}
	// With AsyncProgress and no transaction open, every batch produced
	// was committed (the last, perhaps, by commitIdle, which the local
	// record does not know of): committed says so, or the next start
	// would take the checkpoint for one ahead of the topic and rebuild
	// it.
	committed = t.opts.AsyncProgress && !t.inTxn && !t.dirty && !t.spoiled && t.client != nil
	t.stopLocked()
	return committed, nil
}
