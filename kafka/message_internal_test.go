package kafka

import (
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestTimestampType: a record of a batch whose broker set its time (a
// topic of message.timestamp.type=LogAppendTime, which the embedded
// cluster does not keep) reads as LogAppendTime in Message.TimestampType,
// as Spark's timestampType column; a producer's time as CreateTime. The
// batches are decoded as a fetch decodes them.
func TestTimestampType(t *testing.T) {
	at := time.Unix(1_700_000_000, 0).UTC()
	batch := func(offset int64, attributes int16) []byte {
		rec := kmsg.Record{Value: []byte(`{}`)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		b := kmsg.RecordBatch{FirstOffset: offset, PartitionLeaderEpoch: -1, Magic: 2, Attributes: attributes,
			FirstTimestamp: at.UnixMilli(), MaxTimestamp: at.UnixMilli(), ProducerID: -1, ProducerEpoch: -1,
			FirstSequence: -1, NumRecords: 1, Records: rec.AppendTo(nil)}
		b.Length = int32(len(b.AppendTo(nil)) - 12) // after FirstOffset and Length
		raw := b.AppendTo(nil)
		binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
		return raw
	}
	part := kmsg.NewFetchResponseTopicPartition()
	part.HighWatermark, part.LastStableOffset = 2, 2
	part.RecordBatches = append(batch(0, 0), batch(1, 0x08)...)
	fp, _ := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{Topic: "t", IsolationLevel: kgo.ReadCommitted()}, &part, decompressor, nil)
	if fp.Err != nil || len(fp.Records) != 2 {
		t.Fatalf("decoded %d records, %v", len(fp.Records), fp.Err)
	}
	for i, want := range []TimestampType{CreateTime, LogAppendTime} {
		m := messageOf(fp.Records[i])
		if m.TimestampType != want || !m.Timestamp.Equal(at) || m.Offset != int64(i) {
			t.Errorf("record %d: %v at %v, offset %d; want %v at %v", i, m.TimestampType, m.Timestamp, m.Offset, want, at)
		}
	}
}
