package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

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
// (for a Kafka record, its value), and its headers HeaderError,
// HeaderSource and HeaderPosition, and a BatchMark (the sink is
// idempotent by batch id as the Kafka sink is: see TopicSink).
//
// runtime.DeadLetter carries a record's raw bytes, not its key or
// headers. For a letter from one of opts.Originals (matched by source
// name), the writer reads the record again at its position (one fetch
// per letter) and gives the dead letter the original key, and the
// original headers before streamgen's. A record that cannot be read
// again (deleted since) is written without them. Options that do not
// validate make every write fail with an error saying what is wrong.
func DeadLetterTopic(topic string, opts DeadLetterOptions) *DeadLetterWriter {
	opts.Originals = slices.Clone(opts.Originals)
	d := &DeadLetterWriter{topic: topic, opts: opts, err: opts.validate(topic)}
	d.producer = producer{conn: opts.Connection, what: "kafka dead-letter topic " + strconv.Quote(topic)}
	return d
}

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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: kafka dead-letter topic: options: %w", err)
	}
	return nil
}

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
	records := make([]*kgo.Record, len(letters))
	for i, l := range letters {
		r := &kgo.Record{Topic: d.topic, Value: []byte(l.Raw)}
		original, err := d.original(ctx, l)
		if err != nil {
			return fmt.Errorf("streamgen: %s: batch %d: letter %d (%s %s): %w", d.what, batchID, i, l.Source, l.Position, err)
		}
		if original != nil {
			r.Key = original.Key
			r.Headers = slices.Clip(original.Headers)
		}
		r.Headers = append(r.Headers,
			Header{Key: HeaderError, Value: []byte(l.Error)},
			Header{Key: HeaderSource, Value: []byte(l.Source)},
			Header{Key: HeaderPosition, Value: []byte(l.Position)},
		)
		r.Headers = marks.append(r.Headers, i)
		records[i] = r
	}
	if err := d.produce(ctx, records); err != nil {
		return fmt.Errorf("streamgen: %s: batch %d: %w", d.what, batchID, err)
	}
	return nil
}

// original reads again the Kafka record a letter is about, when its
// source is one of Originals; nil when it is not, or is gone.
func (d *DeadLetterWriter) original(ctx context.Context, l runtime.DeadLetter) (*kgo.Record, error) {
	var src *TopicSource
	for _, s := range d.opts.Originals {
		if s.Name() == l.Source {
			src = s
			break
		}
	}
	if src == nil {
		return nil, nil
	}
	tp, offset, ok := parsePosition(l.Position)
	if !ok {
		return nil, nil
	}
	client, err := src.clientFor()
	if err != nil {
		return nil, err
	}
	var found *kgo.Record
	gone := func(lostRange) error { return nil } // then there is nothing to copy
	err = src.fetchRange(ctx, client, tp, offset, offset+1, gone, func(r *kgo.Record) error {
		if r.Offset == offset {
			found = r
		}
		return nil
	})
	return found, err
}

// Close closes the writer's client, waiting for nothing: call it after
// the last write has returned. A write after Close fails.
func (d *DeadLetterWriter) Close() { d.producer.close() }
