package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// Format is how a sink encodes a row into a record's value.
type Format int

const (
	// JSON is the row's generated AppendJSON: what encoding/json writes.
	// The default.
	JSON Format = iota
	// Binary is the row's generated AppendBinary: compact, and readable
	// by later versions of the record type (see package codec).
	Binary
	// ConfluentJSON is the row's JSON in Confluent's wire format, as the
	// JSON Schema serializers of Confluent's clients write it: a zero
	// byte, the 4-byte id of the row type's JSON Schema
	// (StreamJSONSchema) in the schema registry (SinkOptions.Registry),
	// then the JSON. The schema is registered under the topic's subject
	// before the first record to each topic is written (or looked up,
	// with SinkOptions.LookUpSchema), so that Confluent's JSON Schema
	// deserializers (and Kafka Streams' serdes made of them), ksqlDB's
	// JSON_SR format and FromConfluentJSON read the records.
	ConfluentJSON
)

// String names the format.
func (f Format) String() string {
	switch f {
	case JSON:
		return "JSON"
	case Binary:
		return "Binary"
	case ConfluentJSON:
		return "ConfluentJSON"
	}
	return "Format(" + strconv.Itoa(int(f)) + ")"
}

// SinkOptions configure a Kafka sink. The zero value of each field but
// Connection and a topic is its default. The functions are called from
// the goroutine that calls Write, one row at a time.
type SinkOptions[T any] struct {
	Connection

	// Topic is the topic every row goes to, unless TopicOf is set.
	Topic string
	// TopicOf, when set, chooses each row's topic.
	TopicOf func(row *T) string
	// Key, when set, gives each row's key, which chooses its partition
	// (hashed as the Java client does, so a key goes to the same
	// partition from any client). The sink does not copy the slice: it
	// must stay unchanged until the batch's Write returns. Without Key,
	// records have no key and are spread over the partitions.
	Key func(row *T) []byte
	// Partition, when set, chooses each row's partition, as Spark's
	// partition column and Kafka Streams' StreamPartitioner do: a row
	// for which it gives a negative number goes where it would without
	// it. A partition the topic does not have fails the batch, naming
	// the row. (A
	// RecordPartitioner in ClientOptions replaces the partitioner that
	// reads it.)
	Partition func(row *T) int32
	// Headers, when set, gives headers for each row, written before
	// streamgen's (see BatchMark); the same rule as Key holds for their
	// slices.
	Headers func(row *T) []Header
	// Timestamp, when set, gives each record's timestamp: the row's event
	// time, say, as Kafka Streams gives an output record its input's
	// timestamp, so that a consumer that windows or seeks by time sees
	// when things happened. Without it (or for a zero time), the time of
	// the write. A topic whose message.timestamp.before.max.ms (or
	// .after.) refuses a record's time fails the write, and a
	// RecordDeliveryTimeout in ClientOptions, which franz-go counts from
	// a record's timestamp, fails an old one at once.
	Timestamp func(row *T) time.Time
	// Tombstone, when set, says which rows are tombstones: such a row is
	// written with its key, headers and timestamp and a null value, which
	// a compacted topic takes as the removal of its key (Kafka Streams'
	// record of a KTable's deleted row; a removal of typed.JoinTables,
	// say). It needs Key.
	Tombstone func(row *T) bool
	// Format is the value's encoding: JSON (the default), Binary or
	// ConfluentJSON.
	Format Format
	// Registry is the schema registry of the ConfluentJSON format (a
	// Confluent Schema Registry, or one that speaks its API): a client
	// made with sr.NewClient(sr.URLs(RegistryURLs()...)), with
	// sr.BasicAuth for Confluent Cloud's API key, say; or Embedded's
	// Registry.
	Registry *sr.Client
	// Subject, when set, names the registry subject of a topic's value
	// schema; by default it is the topic's name and "-value"
	// (Confluent's TopicNameStrategy).
	Subject func(topic string) string
	// LookUpSchema, when set, has the ConfluentJSON format look the row
	// type's schema up in each topic's subject instead of registering it
	// (Confluent's auto.register.schemas=false, for registries where
	// schemas are registered ahead of deployment): a subject without the
	// schema fails the write, saying so.
	LookUpSchema bool
	// WriterID, when set, is written in every record's HeaderWriter, so
	// that readers can tell apart the batches of queries that write to
	// one topic (each numbers its batches from 0).
	WriterID string
	// Transactions, when set, are the query's ExactlyOnce transactions:
	// each batch's rows are written in its transaction, and seen by
	// read_committed readers once, when the batch commits. The records
	// are then produced by the transactions' client (with its
	// Connection), not the sink's.
	Transactions *Transactions
	// ProduceTimeout bounds how long a batch's write may go without an
	// acknowledgement from Kafka (its leaders gone, too few in-sync
	// replicas): past it the batch fails, uncommitted, and the query
	// stops with the error, where the producer would retry for ever, as
	// a Spark Kafka sink fails its task once the producer's
	// delivery.timeout.ms passes. The default is DefaultProduceTimeout
	// (2 minutes). With Transactions, theirs (ChangelogOptions.
	// ProduceTimeout) bounds the write instead.
	ProduceTimeout time.Duration
}

func (o *SinkOptions[T]) validate() error {
	var errs []error
	if err := o.Connection.validate(); err != nil {
		errs = append(errs, err)
	}
	switch {
	case o.Topic == "" && o.TopicOf == nil:
		errs = append(errs, errors.New("set Topic or TopicOf"))
	case o.Topic != "" && o.TopicOf != nil:
		errs = append(errs, errors.New("set one of Topic and TopicOf"))
	case o.Topic != "" && !legalTopic.MatchString(o.Topic):
		errs = append(errs, fmt.Errorf("Topic: %q is not a legal topic name", o.Topic))
	}
	switch {
	case o.Format != JSON && o.Format != Binary && o.Format != ConfluentJSON:
		errs = append(errs, fmt.Errorf("Format: unknown %v", o.Format))
	case o.Format == ConfluentJSON && o.Registry == nil:
		errs = append(errs, errors.New("Format ConfluentJSON needs Registry: the schema's id comes from it"))
	case o.Format != ConfluentJSON && (o.Registry != nil || o.Subject != nil || o.LookUpSchema):
		errs = append(errs, fmt.Errorf("Registry, Subject and LookUpSchema are for Format ConfluentJSON, and the format is %v", o.Format))
	}
	if o.Tombstone != nil && o.Key == nil {
		errs = append(errs, errors.New("Tombstone needs Key: a tombstone removes its key"))
	}
	if o.ProduceTimeout < 0 {
		errs = append(errs, fmt.Errorf("ProduceTimeout %v is negative", o.ProduceTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: kafka sink: options: %w", err)
	}
	return nil
}

// TopicSink writes the rows of each batch to Kafka, one record per row,
// as a typed.Sink. Make one with Sink. Close it once its queries have
// stopped. It is safe for concurrent use, though a query writes from one
// goroutine.
//
// Without transactions (SinkOptions.Transactions) a batch written again
// after a failure is written again: the records of the first write stay
// in the topic. Each record's headers
// say its batch, the write it came from and its row (see BatchMark), so
// that a reader can keep the last write of each batch; a plain reader
// sees the rows of both. Records of one partition are written in order,
// without duplicates within a write (the producer is idempotent), and a
// Write returns once all its records are acknowledged.
//
// A row whose record its topic refuses (larger than its
// max.message.bytes or the producer's batch size, uncompressed; or
// without a key for a compacted topic) is not produced: it goes to the
// query's dead-letter sink (runtime.DeadLetters), as Kafka Streams'
// dead-letter queue takes what its production exception handler gives
// up on, with its value in Raw; the batch's other rows are written, and
// numbered without it (see BatchMark). Without a dead-letter sink the batch fails, naming the row.
// (A dead-letter sink that is itself a Kafka topic needs room for such a
// record.)
type TopicSink[T any] struct {
	opts   SinkOptions[T]
	encode func(b []byte, row *T) ([]byte, error)
	// schemas, for ConfluentJSON, gives the id of each topic's schema.
	schemas *schemaIDs
	err     error // from validate, returned by every Write
	producer
}

// Sink returns a sink writing rows of type T to Kafka (see TopicSink and
// SinkOptions). Options that do not validate fail the Start of a query
// that writes to it (CheckStart), and every Write, with an error saying
// what is wrong.
func Sink[T any, P codec.RecordPtr[T]](opts SinkOptions[T]) *TopicSink[T] {
	s := &TopicSink[T]{opts: opts, err: opts.validate()}
	s.producer = producer{conn: opts.Connection, what: "kafka sink " + strconv.Quote(s.Description()), txn: opts.Transactions, timeout: opts.ProduceTimeout}
	if opts.Format == Binary {
		s.encode = func(b []byte, row *T) ([]byte, error) { return P(row).AppendBinary(b) }
	} else {
		if opts.Format == ConfluentJSON {
			s.schemas = &schemaIDs{
				registry: opts.Registry,
				schema:   sr.Schema{Schema: P(nil).StreamJSONSchema(), Type: sr.TypeJSON},
				subject:  opts.Subject,
				lookUp:   opts.LookUpSchema,
			}
		}
		s.encode = func(b []byte, row *T) ([]byte, error) { return P(row).AppendJSON(b) }
	}
	return s
}

// CheckStart returns what is wrong with the sink's options, if anything,
// so that a query writing to it fails at its start (runtime.StartChecker).
func (s *TopicSink[T]) CheckStart() error { return s.err }

// Description names the sink in progress reports: "kafka:" and the
// topic, or "kafka:(by row)".
func (s *TopicSink[T]) Description() string {
	if s.opts.Topic == "" {
		return "kafka:(by row)"
	}
	return "kafka:" + s.opts.Topic
}

// Write writes rows as records, with the headers of a BatchMark for
// batchID, and waits for all of them to be acknowledged.
func (s *TopicSink[T]) Write(ctx context.Context, batchID int64, rows []T) error {
	if s.err != nil {
		return s.err
	}
	if len(rows) == 0 {
		return nil
	}
	records := make([]kgo.Record, len(rows))
	ptrs := make([]*kgo.Record, len(rows))
	// The values are appended to one buffer and sliced once it has
	// stopped growing.
	var values []byte
	ends := make([]int, len(rows))
	var tombstones []bool // by row, when the sink has Tombstone
	if s.opts.Tombstone != nil {
		tombstones = make([]bool, len(rows))
	}
	var id uint32      // the schema id of idTopic's records
	var idTopic string // none yet: no topic is named ""
	for i := range rows {
		row := &rows[i]
		r := &records[i]
		r.Topic = s.opts.Topic
		if s.opts.TopicOf != nil {
			if r.Topic = s.opts.TopicOf(row); !legalTopic.MatchString(r.Topic) {
				return fmt.Errorf("streamgen: %s: batch %d: row %d: TopicOf gave %q, not a legal topic name", s.what, batchID, i, r.Topic)
			}
		}
		if s.opts.Key != nil {
			r.Key = s.opts.Key(row)
		}
		if s.opts.Partition != nil {
			if p := s.opts.Partition(row); p >= 0 {
				n, err := s.partitionsOf(ctx, r.Topic, p)
				if err != nil {
					return fmt.Errorf("streamgen: %s: batch %d: row %d: %w", s.what, batchID, i, err)
				}
				if p >= n {
					return fmt.Errorf("streamgen: %s: batch %d: row %d: Partition gave partition %d of topic %s, which has %d", s.what, batchID, i, p, r.Topic, n)
				}
				r.Partition, r.Context = p, chosenPartition
			}
		}
		if s.opts.Headers != nil {
			r.Headers = slices.Clip(s.opts.Headers(row)) // appending below must not write into the caller's array
		}
		if s.opts.Timestamp != nil {
			r.Timestamp = s.opts.Timestamp(row)
		}
		if tombstones != nil && s.opts.Tombstone(row) {
			tombstones[i] = true
		} else {
			var err error
			if s.schemas != nil {
				// The id of the row before, if of the same topic: no lock.
				if r.Topic != idTopic {
					if id, err = s.schemas.of(ctx, r.Topic); err == nil {
						idTopic = r.Topic
					}
				}
				if err == nil {
					values = AppendConfluentHeader(values, id)
				}
			}
			if err == nil {
				values, err = s.encode(values, row)
			}
			if err != nil {
				return fmt.Errorf("streamgen: %s: batch %d: row %d: %w", s.what, batchID, i, err)
			}
		}
		ends[i] = len(values)
		ptrs[i] = r
	}
	start := 0
	for i := range records {
		if tombstones == nil || !tombstones[i] {
			if records[i].Value = values[start:ends[i]:ends[i]]; records[i].Value == nil {
				records[i].Value = []byte{} // an empty value, not a null one (a tombstone)
			}
		}
		start = ends[i]
	}
	marks := newBatchHeaders(s.opts.WriterID, batchID, len(rows))
	ptrs, err := s.admit(ctx, batchID, ptrs, marks.size(len(rows)))
	if err != nil {
		return err
	}
	if len(ptrs) < len(rows) {
		marks = marks.withRows(len(ptrs))
	}
	for i, r := range ptrs {
		r.Headers = marks.append(r.Headers, i)
	}
	if err := s.produce(ctx, ptrs); err != nil {
		return fmt.Errorf("streamgen: %s: batch %d: %w", s.what, batchID, err)
	}
	return nil
}

// topicLimits are what a topic refuses: records of more than maxBytes
// (as the producer and the broker count them: in a batch of their own),
// and records without a key when it is compacted.
type topicLimits struct {
	maxBytes int
	compact  bool
	// retryAt, when set, is when limits that could not be read are read
	// again.
	retryAt time.Time
}

// limitsRetry is how long a sink keeps a topic's default limits when its
// configuration could not be read.
const limitsRetry = time.Minute

// producerBatchMaxBytes is franz-go's default ProducerBatchMaxBytes.
const producerBatchMaxBytes = 1_000_012

// limitsOf returns topic's limits, read at its first record: the
// producer's batch size for the topic (ProducerBatchMaxBytes, which the
// user's ClientOptions may set), and the topic's max.message.bytes. The
// broker counts a batch's bytes after compression, the producer before:
// a record that would fit compressed but not whole is refused too, as
// franz-go refuses it. The producer's batches of the topic are capped at
// the limit (batchLimits), if it is read before the producer first
// writes to the topic (franz-go keeps a partition's cap), and unless the
// user's ClientOptions set their own. A topic whose configuration cannot
// be read is read again a minute later.
func (s *producer) limitsOf(ctx context.Context, topic string) topicLimits {
	s.topicsMu.Lock()
	l, ok := s.topics[topic]
	s.topicsMu.Unlock()
	if ok && (l.retryAt.IsZero() || time.Now().Before(l.retryAt)) {
		return l
	}
	l = topicLimits{maxBytes: producerBatchMaxBytes}
	client, batches, err := s.producingClient()
	if err != nil {
		return l // the produce fails with it
	}
	cfg, err := describeTopic(ctx, kadm.NewClient(client), topic)
	if err != nil {
		// (Not allowed to describe it, or not made yet: the broker
		// says what it refuses.) Kept for limitsRetry, so that a sink
		// without the right to describe does not ask at every row.
		slog.Warn("streamgen: "+s.what+": read the topic's limits", "topic", topic, "error", err, "retryIn", limitsRetry)
		l.retryAt = time.Now().Add(limitsRetry)
	} else {
		topicMax := 0
		if n, err := strconv.Atoi(cfg["max.message.bytes"]); err == nil && n > 0 {
			batches.set(topic, n)
			topicMax = n
		}
		if fn, ok := client.OptValue(kgo.ProducerBatchMaxBytesFn).(func(string) int32); ok && fn != nil {
			l.maxBytes = int(fn(topic)) // the batches' cap above, or the user's
		}
		if topicMax > 0 {
			l.maxBytes = min(l.maxBytes, topicMax)
		}
		l.compact = containsCompact(cfg["cleanup.policy"])
	}
	s.topicsMu.Lock()
	defer s.topicsMu.Unlock()
	if s.topics == nil {
		s.topics = map[string]topicLimits{}
	}
	s.topics[topic] = l
	return l
}

// admit returns the records their topics take, and hands the others to
// the query's dead-letter sink (runtime.RejectRow), or fails when it has
// none. marks is the most bytes the BatchMark headers add to a record.
func (s *TopicSink[T]) admit(ctx context.Context, batchID int64, records []*kgo.Record, marks int) ([]*kgo.Record, error) {
	var kept []*kgo.Record
	var topic string
	var l topicLimits
	for i, r := range records {
		if r.Topic != topic || i == 0 {
			topic, l = r.Topic, s.limitsOf(ctx, r.Topic)
		}
		var why string
		if size := recordSize(r) + marks; size > l.maxBytes {
			why = fmt.Sprintf("a record of %d bytes, more than the %d that topic %s takes (its max.message.bytes, and the producer's batch size)", size, l.maxBytes, r.Topic)
		} else if l.compact && r.Key == nil {
			why = fmt.Sprintf("a record without a key, which topic %s refuses: it is compacted", r.Topic)
		} else if r.Value == nil && len(r.Key) == 0 {
			why = "a tombstone without a key, which would remove nothing"
		}
		if why != "" && r.Value == nil && len(r.Key) > 0 {
			why += fmt.Sprintf(" (a tombstone of key %q)", r.Key)
		}
		if why == "" {
			if kept != nil {
				kept = append(kept, r)
			}
			continue
		}
		letter := runtime.DeadLetter{Source: s.Description(), Position: fmt.Sprintf("batch %d row %d", batchID, i), Error: why, Raw: string(r.Value), NoValue: r.Value == nil, Meta: r}
		if !runtime.RejectRow(ctx, letter) {
			return nil, fmt.Errorf("streamgen: %s: batch %d: row %d: %s; give the query a dead-letter sink (runtime.DeadLetters) to write the other rows and keep this one there", s.what, batchID, i, why)
		}
		if kept == nil {
			kept = append(make([]*kgo.Record, 0, len(records)-1), records[:i]...)
		}
	}
	if kept == nil {
		return records, nil
	}
	return kept, nil
}

// recordSize is an upper bound on the bytes r takes in a record batch of
// its own, as the broker counts them against max.message.bytes: the
// batch's header, and the record with its varints at their longest.
func recordSize(r *kgo.Record) int {
	const batchHeader, recordFixed = 61, 5 + 1 + 10 + 5 + 5 + 5 + 5 // length, attributes, timestamp and offset deltas, key and value lengths, header count
	n := batchHeader + recordFixed + len(r.Key) + len(r.Value)
	for _, h := range r.Headers {
		n += 5 + len(h.Key) + 5 + len(h.Value)
	}
	return n
}

// Close closes the sink's client, waiting for nothing: call it after the
// last Write has returned. A Write after Close fails.
func (s *TopicSink[T]) Close() { s.producer.close() }

// AtLeastOnce is true: a batch run again is produced again, in full (see
// runtime.AtLeastOnceSink); with Transactions, the records of an attempt
// that did not commit are aborted, and read_committed readers see the
// last attempt's only.
func (s *TopicSink[T]) AtLeastOnce() bool { return true }
