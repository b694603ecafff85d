package kafka

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producer is the client a sink writes with, made at its first write.
// franz-go's producer is idempotent by default (acks from all in-sync
// replicas, sequence numbers per partition), so a retry inside one write
// does not duplicate a record; a write run again does (see BatchMark).
type producer struct {
	conn Connection
	// what names the sink in errors: "kafka sink \"kafka:out\"".
	what string
	// txn, when set, are the transactions the writes go into.
	txn *Transactions
	// timeout is how long a write without txn may go without an
	// acknowledgement (SinkOptions.ProduceTimeout); with txn, the
	// transactions' ProduceTimeout is.
	timeout time.Duration

	mu     sync.Mutex
	client *kgo.Client
	closed bool
	// limits cap the client's record batches per topic (see batchLimits).
	limits batchLimits
	// topics are the topics' limits, read at a topic's first record
	// (limitsOf).
	topicsMu sync.Mutex
	topics   map[string]topicLimits
	// partitions are the topics' partition counts, read when a row's
	// chosen partition is first checked, and again when one is past
	// them (partitionsOf).
	partitions map[string]int32
}

// partitionsOf returns how many partitions topic has, as last read, or
// as read now when the count read is not more than atLeast.
func (p *producer) partitionsOf(ctx context.Context, topic string, atLeast int32) (int32, error) {
	p.topicsMu.Lock()
	n, ok := p.partitions[topic]
	p.topicsMu.Unlock()
	if ok && n > atLeast {
		return n, nil
	}
	client, _, err := p.producingClient()
	if err != nil {
		return 0, err
	}
	topics, err := kadm.NewClient(client).ListTopics(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("read the partitions of topic %s: %w", topic, err)
	}
	d, ok := topics[topic]
	if !ok || d.Err != nil {
		err := error(errors.New("not listed"))
		if ok {
			err = d.Err
		}
		return 0, fmt.Errorf("read the partitions of topic %s: %w", topic, err)
	}
	n = int32(len(d.Partitions))
	p.topicsMu.Lock()
	defer p.topicsMu.Unlock()
	if p.partitions == nil {
		p.partitions = map[string]int32{}
	}
	p.partitions[topic] = n
	return n, nil
}

// batchLimits are the most bytes a record batch of a topic may hold, as
// the sinks learn them (the topic's max.message.bytes, when below
// franz-go's default batch size): the producer builds its batches to fit,
// where a batch of small records could otherwise pass the topic's limit,
// which the broker refuses in full. Safe for concurrent use.
type batchLimits struct{ m sync.Map } // topic → int32

// fn is the client's ProducerBatchMaxBytesFn.
func (l *batchLimits) fn(topic string) int32 {
	if n, ok := l.m.Load(topic); ok {
		return n.(int32)
	}
	return producerBatchMaxBytes
}

func (l *batchLimits) set(topic string, n int) {
	l.m.Store(topic, int32(min(n, producerBatchMaxBytes)))
}

func (p *producer) clientFor() (*kgo.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, fmt.Errorf("streamgen: %s: closed", p.what)
	}
	if p.client == nil {
		// Records are acknowledged as soon as they are all sent: a
		// batch's Write waits for them anyway. A record the client
		// cannot tell written or not (a broker answered
		// NOT_ENOUGH_REPLICAS_AFTER_APPEND, or nothing) may be failed
		// when ProduceTimeout passes, where the client would retry it
		// for ever: a write without transactions is at least once
		// anyway (a failed batch is written again).
		client, err := p.conn.newClient(kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytesFn(p.limits.fn),
			kgo.RecordPartitioner(rowPartitioner{defaultPartitioner()}), kgo.AllowIdempotentProduceCancellation())
		if err != nil {
			return nil, fmt.Errorf("streamgen: %s: client: %w", p.what, err)
		}
		p.client = client
	}
	return p.client, nil
}

// producingClient returns the client the records are produced with, and
// the limits of its batches: the transactions' (which the query has
// started) or the sink's own.
func (p *producer) producingClient() (*kgo.Client, *batchLimits, error) {
	if p.txn != nil {
		p.txn.mu.Lock()
		client := p.txn.client
		p.txn.mu.Unlock()
		if client != nil {
			return client, &p.txn.limits, nil
		}
	}
	client, err := p.clientFor()
	return client, &p.limits, err
}

// produce writes records and waits until every one is acknowledged or
// failed; it returns the first failure.
func (p *producer) produce(ctx context.Context, records []*kgo.Record) error {
	if len(records) == 0 {
		return nil
	}
	if p.txn != nil {
		return p.txn.produce(ctx, p.what, records)
	}
	client, err := p.clientFor()
	if err != nil {
		return err
	}
	timeout := p.timeout
	if timeout == 0 {
		timeout = DefaultProduceTimeout
	}
	return produceWithin(ctx, client, records, timeout)
}

// DefaultProduceTimeout is the default of SinkOptions.ProduceTimeout and
// DeadLetterOptions.ProduceTimeout: the Java producer's
// delivery.timeout.ms, which ends a Spark Kafka sink's retries.
const DefaultProduceTimeout = 2 * time.Minute

func (p *producer) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.client != nil {
		p.client.Close()
		p.client = nil
	}
}
