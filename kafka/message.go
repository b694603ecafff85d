package kafka

import (
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Header is a Kafka record header: franz-go's, so records of either
// package share them.
type Header = kgo.RecordHeader

// Message is one Kafka record as a decoder sees it. A Message and the
// slices it holds are valid only during the call they are passed to.
type Message struct {
	Topic     string
	Partition int32
	Offset    int64
	Key       []byte
	Value     []byte
	Headers   []Header
	// Timestamp is the record's timestamp: its producer's create time,
	// or the broker's append time when the topic says
	// message.timestamp.type=LogAppendTime, as TimestampType tells.
	Timestamp time.Time
	// TimestampType says which time Timestamp is (Spark's timestampType
	// column): CreateTime or LogAppendTime.
	TimestampType TimestampType
}

// TimestampType says which time a record's timestamp is, as Kafka's
// record attributes do and Spark's timestampType column (0 and 1).
type TimestampType int8

const (
	// CreateTime is the time its producer gave the record.
	CreateTime TimestampType = 0
	// LogAppendTime is the time the broker appended the record to its
	// log, for a topic of message.timestamp.type=LogAppendTime.
	LogAppendTime TimestampType = 1
)

// String names the timestamp type as Kafka does.
func (t TimestampType) String() string {
	switch t {
	case CreateTime:
		return "CreateTime"
	case LogAppendTime:
		return "LogAppendTime"
	}
	return "TimestampType(" + strconv.Itoa(int(t)) + ")"
}

// messageOf returns the Message of a record fetched.
func messageOf(r *kgo.Record) Message {
	m := Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
	if r.Attrs.TimestampType() == 1 {
		m.TimestampType = LogAppendTime
	}
	return m
}

// position is the message's runtime.Record Position,
// "topic/partition@offset".
func (m *Message) position() string {
	b := make([]byte, 0, len(m.Topic)+24)
	b = append(b, m.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(m.Partition), 10)
	b = append(b, '@')
	b = strconv.AppendInt(b, m.Offset, 10)
	return string(b)
}

// From reads rows of type T from src, each made from a whole Kafka
// record, key, headers, timestamp and all, by decode, which the query
// calls from its goroutine, one record at a time. A record decode fails
// on goes to the query's dead-letter sink with the error, its position
// and its value as the raw bytes, and the query goes on, as a record
// typed.From cannot decode does.
//
// The event time may be the record's timestamp: set the row's event-time
// field from m.Timestamp in decode, and give that field to
// typed.WithWatermark.
//
//	events := kafka.From(src, func(m *kafka.Message) (Event, error) {
//		var e Event
//		err := e.UnmarshalJSON(m.Value)
//		e.Time = m.Timestamp
//		return e, err
//	})
//
// The stream is built on typed.FromFunc, with the Message as the
// record's Meta: decode's row goes on as it is, with no second decoding.
// The offsets are src's, under src's name, so a query may move between
// typed.From(src) and From(src, decode) on one checkpoint.
func From[T any](src *TopicSource, decode func(m *Message) (T, error)) typed.Stream[T] {
	return typed.FromFunc(src, func(r runtime.Record) (T, error) {
		m, ok := r.Meta.(*Message)
		if !ok {
			var zero T
			return zero, fmt.Errorf("kafka.From: a record without its message (%T)", r.Meta)
		}
		t, err := decode(m)
		if err != nil {
			return t, fmt.Errorf("kafka.From: decode: %w", err)
		}
		return t, nil
	})
}
