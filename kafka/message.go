package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/codec"
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
	// message.timestamp.type=LogAppendTime.
	Timestamp time.Time
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
// The stream is built on typed.From, which decodes JSON: each row decode
// returns is written with its generated AppendJSON and read back by its
// UnmarshalJSON, which costs a second decoding, and a field that JSON
// leaves out (tagged json:"-") arrives empty. The offsets are src's,
// under src's name, so a query may move between typed.From(src) and
// From(src, decode) on one checkpoint.
func From[T any, P codec.RecordPtr[T]](src *TopicSource, decode func(m *Message) (T, error)) typed.Stream[T] {
	return typed.From[T, P](decodingSource[T, P]{TopicSource: src, decode: decode})
}

// decodingSource is a TopicSource whose records are rows made by decode,
// as JSON, or dead letters.
type decodingSource[T any, P codec.RecordPtr[T]] struct {
	*TopicSource
	decode func(*Message) (T, error)
}

func (d decodingSource[T, P]) Read(ctx context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	var line []byte
	return d.readMessages(ctx, start, end, func(r runtime.Record, m *Message) error {
		// On error r.Data stays the value: the dead letter's raw bytes.
		row, err := d.decode(m)
		if err != nil {
			r.Err = fmt.Errorf("kafka.From: decode: %w", err)
			return fn(r)
		}
		if line, err = P(&row).AppendJSON(line[:0]); err != nil {
			r.Err = fmt.Errorf("kafka.From: the decoded row: %w", err)
			return fn(r)
		}
		r.Data = line
		return fn(r)
	})
}
