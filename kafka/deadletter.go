package kafka

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/runtime"
)

// DeadLetterOptions configure DeadLetterTopic.
type DeadLetterOptions struct {
	Connection
	// Originals are the Kafka sources of the query whose records are
	// looked up again to copy their key and headers (see
	// DeadLetterTopic). Letters of other sources are written without.
	Originals []*TopicSource
	// WriterID, when set, is written in every record's HeaderWriter (see
	// SinkOptions.WriterID).
	WriterID string
	// Transactions, when set, are the query's ExactlyOnce transactions:
	// each batch's dead letters are written in its transaction (see
	// SinkOptions.Transactions).
	Transactions *Transactions
	// ProduceTimeout bounds how long a batch's letters may go without an
	// acknowledgement (see SinkOptions.ProduceTimeout).
	ProduceTimeout time.Duration
}

// DeadLetterWriter writes a query's dead letters to a Kafka topic, as a
// runtime.DeadLetterSink. Make one with DeadLetterTopic. Close it once
// its queries have stopped. It is safe for concurrent use.
type DeadLetterWriter struct {
	topic string
	opts  DeadLetterOptions
	err   error
	producer
}

// DeadLetterTopic returns a dead-letter sink writing each dead letter as
// one record of topic: its value the raw bytes of the record that failed
// (for a Kafka record, its value; a tombstone's letter is a tombstone),
// and its headers HeaderError,
// HeaderSource and HeaderPosition, and a BatchMark (the sink is
// idempotent by batch id as the Kafka sink is: see TopicSink).
//
// runtime.DeadLetter carries a record's raw bytes, not its key or
// headers. For a letter from one of opts.Originals (matched by source
// name), the writer reads the record again at its position (one fetch
// per letter) and gives the dead letter the original key, and the
// original headers before streamgen's; a row that a Kafka sink's topic
// refused keeps the key and headers the sink gave it. A record that cannot be read
// again (deleted since) is written without them. A letter too large for
// the topic (its max.message.bytes, or the producer's batch size: a row a
// sink's topic refused for its size, say) has its value cut to fit, and
// the header HeaderTruncated with the whole length; the position still
// names the record. Without Transactions, a batch run again after a
// failure whose attempt has no letters writes nothing: the letters of the
// attempt before it stay the greatest attempt of the batch (a record that
// failed to read, then read, is in both the output and the dead letters);
// with Transactions, that attempt was aborted, and its letters are not
// read. Options that do not validate fail the Start of a
// query that writes to it (CheckStart), and every write, with an error
// saying what is wrong.
func DeadLetterTopic(topic string, opts DeadLetterOptions) *DeadLetterWriter {
	opts.Originals = slices.Clone(opts.Originals)
	d := &DeadLetterWriter{topic: topic, opts: opts, err: opts.validate(topic)}
	d.producer = producer{conn: opts.Connection, what: "kafka dead-letter topic " + strconv.Quote(topic), txn: opts.Transactions, timeout: opts.ProduceTimeout}
	return d
}

// CheckStart returns what is wrong with the writer's options, if
// anything, so that a query writing its dead letters to it fails at its
// start (runtime.StartChecker).
func (d *DeadLetterWriter) CheckStart() error { return d.err }

func (o *DeadLetterOptions) validate(topic string) error {
	var errs []error
	if err := o.Connection.validate(); err != nil {
		errs = append(errs, err)
	}
	if !legalTopic.MatchString(topic) {
		errs = append(errs, fmt.Errorf("%q is not a legal topic name", topic))
	}
	for i, src := range o.Originals {
		if src == nil {
			errs = append(errs, fmt.Errorf("Originals[%d] is nil", i))
		}
	}
	if o.ProduceTimeout < 0 {
		errs = append(errs, fmt.Errorf("ProduceTimeout %v is negative", o.ProduceTimeout))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: kafka dead-letter topic: options: %w", err)
	}
	return nil
}

// AtLeastOnce is true: a batch's letters written again are produced
// again, in full, or in a transaction that aborts the attempt that did
// not commit (see runtime.AtLeastOnceSink).
func (d *DeadLetterWriter) AtLeastOnce() bool { return true }

// WriteDeadLetters writes letters as records of the topic and waits for
// all of them to be acknowledged.
func (d *DeadLetterWriter) WriteDeadLetters(ctx context.Context, batchID int64, letters []runtime.DeadLetter) error {
	if d.err != nil {
		return d.err
	}
	if len(letters) == 0 {
		return nil
	}
	marks := newBatchHeaders(d.opts.WriterID, batchID, len(letters))
	originals, err := d.originals(ctx, letters)
	if err != nil {
		return fmt.Errorf("streamgen: %s: batch %d: %w", d.what, batchID, err)
	}
	records := make([]*kgo.Record, len(letters))
	for i, l := range letters {
		r := &kgo.Record{Topic: d.topic, Value: []byte(l.Raw)}
		if l.NoValue { // a tombstone's letter is one
			r.Value = nil
		}
		if original := originals[i]; original != nil {
			r.Key = original.Key
			r.Headers = slices.Clip(original.Headers)
		} else if refused, ok := l.Meta.(*kgo.Record); ok {
			// A row a sink's topic refused: its key and headers.
			r.Key = refused.Key
			r.Headers = slices.Clip(refused.Headers)
		}
		r.Headers = append(r.Headers,
			Header{Key: HeaderError, Value: []byte(l.Error)},
			Header{Key: HeaderSource, Value: []byte(l.Source)},
			Header{Key: HeaderPosition, Value: []byte(l.Position)},
		)
		r.Headers = marks.append(r.Headers, i)
		fitDeadLetter(r, d.limitsOf(ctx, d.topic).maxBytes)
		records[i] = r
	}
	if err := d.produce(ctx, records); err != nil {
		return fmt.Errorf("streamgen: %s: batch %d: %w", d.what, batchID, err)
	}
	return nil
}

// fitDeadLetter cuts the value of r, a dead letter, to fit a topic that
// takes records of at most maxBytes, and says so in a HeaderTruncated
// header, rather than fail the batch: a row refused for its size by one
// topic (a sink's) would otherwise be refused again by a dead-letter topic
// with the same limit. A record whose key and headers alone pass the
// limit is left for the broker to refuse.
func fitDeadLetter(r *kgo.Record, maxBytes int) {
	size := recordSize(r)
	if size <= maxBytes {
		return
	}
	whole := strconv.Itoa(len(r.Value))
	over := size - maxBytes + 5 + len(HeaderTruncated) + 5 + len(whole)
	if over > len(r.Value) {
		return
	}
	r.Value = r.Value[:len(r.Value)-over]
	r.Headers = append(r.Headers, Header{Key: HeaderTruncated, Value: []byte(whole)})
}

// originalGap is the widest run of offsets between two letters of one
// partition that originals reads through rather than fetch again from.
const originalGap = 1024

// originals reads again the Kafka records the letters are about, those
// whose source is one of Originals: by partition, each run of letters no
// more than originalGap offsets apart in one fetch of the range, so that
// a flood of bad records costs a fetch per run, not per record. A letter
// whose record is not one of those, or is gone, has nil.
func (d *DeadLetterWriter) originals(ctx context.Context, letters []runtime.DeadLetter) ([]*kgo.Record, error) {
	found := make([]*kgo.Record, len(letters))
	type place struct {
		src *TopicSource
		tp  topicPartition
	}
	wanted := map[place][]int{} // the letters of each partition
	var places []place          // in order of first letter
	for i, l := range letters {
		var src *TopicSource
		for _, s := range d.opts.Originals {
			if s.Name() == l.Source {
				src = s
				break
			}
		}
		if src == nil {
			continue
		}
		tp, _, ok := parsePosition(l.Position)
		if !ok {
			continue
		}
		p := place{src, tp}
		if _, seen := wanted[p]; !seen {
			places = append(places, p)
		}
		wanted[p] = append(wanted[p], i)
	}
	for _, p := range places {
		idx := wanted[p]
		offsetOf := func(i int) int64 {
			_, off, _ := parsePosition(letters[i].Position)
			return off
		}
		slices.SortFunc(idx, func(a, b int) int { return cmp.Compare(offsetOf(a), offsetOf(b)) })
		client, err := p.src.clientFor()
		if err != nil {
			return nil, fmt.Errorf("letter %d (%s %s): %w", idx[0], letters[idx[0]].Source, letters[idx[0]].Position, err)
		}
		for start := 0; start < len(idx); {
			end := start + 1
			for end < len(idx) && offsetOf(idx[end])-offsetOf(idx[end-1]) <= originalGap {
				end++
			}
			run := idx[start:end]
			byOffset := make(map[int64][]int, len(run))
			for _, i := range run {
				byOffset[offsetOf(i)] = append(byOffset[offsetOf(i)], i)
			}
			from, to := offsetOf(run[0]), offsetOf(run[len(run)-1])+1
			gone := func(lostRange) error { return nil } // then there is nothing to copy
			err := p.src.fetchRange(ctx, client, p.tp, from, to, gone, func(r *kgo.Record) error {
				for _, i := range byOffset[r.Offset] {
					found[i] = r
				}
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("letters %d to %d (%s %s to %s): %w", run[0], run[len(run)-1], letters[run[0]].Source,
					letters[run[0]].Position, letters[run[len(run)-1]].Position, err)
			}
			start = end
		}
	}
	return found, nil
}

// Close closes the writer's client, waiting for nothing: call it after
// the last write has returned. A write after Close fails.
func (d *DeadLetterWriter) Close() { d.producer.close() }
