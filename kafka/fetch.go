package kafka

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Fetch sizes: a partition's response holds up to partitionFetchBytes
// (more when one record batch is larger, as Kafka always returns a whole
// first batch), and a fetch waits at most fetchWait for data that the
// planned offsets say is there.
const (
	partitionFetchBytes = 1 << 20
	fetchWait           = 500 * time.Millisecond
	// fetchAttempts bounds the fetches in a row that make no progress
	// (an error that may pass, or no data), with listBackoff doubling
	// between them.
	fetchAttempts = 10
)

var decompressor = kgo.DefaultDecompressor()

// fetchRange calls fn for each record of tp from offset from up to, not
// including, to, in offset order. It fetches from the partition's
// leader with its own fetch requests (no consumer, no group), decoded by
// kgo.ProcessFetchPartition with the source's isolation level, so
// control records (and, read_committed, aborted transactions) are
// skipped and the offset
// still moves past them: the read ends when the next offset to fetch
// reaches to, even when the last offsets before it hold no record to
// return.
//
// Offsets found gone are passed to lost: deleted records (the fetch is
// out of range below the log's start) or a log that ends before to. When
// lost returns nil the read goes on from the log's start, or ends.
//
// While fn runs on one response's records, the next response is already
// being fetched and decoded (one fetch ahead, on a goroutine fetchRange
// owns and waits for before it returns), so that the broker's work and
// the decoding overlap the caller's.
func (s *TopicSource) fetchRange(ctx context.Context, client *kgo.Client, tp topicPartition, from, to int64, lost func(lostRange) error, fn func(*kgo.Record) error) error {
	ctx, cancel := context.WithCancel(ctx)
	// ahead, when not nil, delivers the fetch of the offset after the
	// last response's records, started before fn ran on them.
	var ahead chan fetched
	defer func() {
		cancel()
		if ahead != nil {
			<-ahead
		}
	}()
	if f, ok := s.takePrefetched(tp, from); ok {
		// Available fetched the range's first records: they are the
		// loop's first fetch, as one fetched ahead.
		ahead = make(chan fetched, 1)
		ahead <- f
	}
	next := from
	stalled := 0
	// lastErr is the error of the last attempt that made no progress.
	var lastErr error
	backoff := listBackoff
	refresh := false
	for next < to {
		if stalled > 0 {
			if stalled == fetchAttempts {
				if lastErr != nil {
					return fmt.Errorf("streamgen: kafka source %q: fetch %s at offset %d: no progress after %d attempts, the last: %w", s.name, tp, next, stalled, lastErr)
				}
				return fmt.Errorf("streamgen: kafka source %q: fetch %s at offset %d: no progress after %d attempts", s.name, tp, next, stalled)
			}
			if err := pause(ctx, backoff); err != nil {
				return fmt.Errorf("streamgen: kafka source %q: fetch %s: %w", s.name, tp, err)
			}
			backoff = min(2*backoff, time.Second)
		}
		meta, ok, err := s.leaderOf(ctx, client, tp, refresh)
		if err != nil {
			return err
		}
		if !ok { // the topic is gone, or has no leader now
			refresh, stalled = true, stalled+1
			if stalled == fetchAttempts-1 {
				return lost(lostRange{tp: tp, from: next, to: to, why: "the partition is no longer listed (was its topic deleted?)"})
			}
			continue
		}
		var f fetched
		fetchedAhead := ahead != nil
		if fetchedAhead {
			f, ahead = <-ahead, nil
		}
		if !fetchedAhead || f.offset != next || f.meta != meta || f.err != nil {
			// Nothing fetched ahead, or not from this offset and
			// leader, or it failed: fetch now (a failure ahead may be
			// one that has passed).
			f = s.fetchDecoded(ctx, client, tp, meta, next, to)
		}
		if f.err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("streamgen: kafka source %q: fetch %s: %w", s.name, tp, ctx.Err())
			}
			refresh, stalled, lastErr = true, stalled+1, f.err // perhaps a broker that went away
			continue
		}
		fp, after := f.fp, f.after
		switch {
		case fp.Err == nil:
		case errors.Is(fp.Err, kerr.OffsetOutOfRange):
			resume, err := s.outOfRange(ctx, client, tp, next, to, lost)
			if err != nil {
				return err
			}
			if resume == next { // in range after all: a leader that moved
				refresh, stalled = true, stalled+1
			} else {
				next, stalled = resume, 0
			}
			continue
		case kerr.IsRetriable(fp.Err) || errors.Is(fp.Err, kerr.UnknownTopicOrPartition) || errors.Is(fp.Err, kerr.UnknownTopicID):
			refresh, stalled, lastErr = true, stalled+1, fp.Err
			continue
		default:
			return fmt.Errorf("streamgen: kafka source %q: fetch %s at offset %d: %w", s.name, tp, next, fp.Err)
		}
		refresh = false
		if after > next && after < to {
			ahead = make(chan fetched, 1)
			go func() { ahead <- s.fetchDecoded(ctx, client, tp, meta, after, to) }()
		}
		for _, r := range fp.Records {
			if r.Offset >= to {
				break
			}
			if err := fn(r); err != nil {
				return err
			}
		}
		if after > next {
			next, stalled, backoff = after, 0, listBackoff
			continue
		}
		if fp.HighWatermark >= 0 && fp.HighWatermark < to && next >= fp.HighWatermark {
			// The log ends before the planned end: truncated, or a
			// leader elected a moment ago whose high watermark has not
			// caught up with its predecessor's. Its listing says which:
			// a leader not caught up answers OFFSET_NOT_AVAILABLE, and
			// the listing tries again (KIP-207).
			ends, err := s.listOffsets(ctx, client, []topicPartition{tp}, latestTimestamp)
			if err != nil {
				return err
			}
			if end := ends[tp]; end <= next {
				return lost(lostRange{tp: tp, from: next, to: to,
					why: fmt.Sprintf("the partition now ends at offset %d", end)})
			}
			refresh = true
		}
		stalled++
	}
	return nil
}

// fetched is one fetch of a partition from offset, from the leader meta
// names, decoded: its records and the offset after them, or the error of
// the request.
type fetched struct {
	offset int64
	meta   partitionMeta
	fp     kgo.FetchPartition
	after  int64
	err    error
}

// isolationLevel is the isolation level of the source's fetches and
// listings, as Kafka's protocol numbers it: 1, read_committed, or 0,
// read_uncommitted (Options.ReadUncommitted).
func (s *TopicSource) isolationLevel() int8 {
	if s.opts.ReadUncommitted {
		return 0
	}
	return 1
}

// isolation is isolationLevel for decoding a fetch.
func (s *TopicSource) isolation() kgo.IsolationLevel {
	if s.opts.ReadUncommitted {
		return kgo.ReadUncommitted()
	}
	return kgo.ReadCommitted()
}

// fetchDecoded fetches tp at offset and decodes the response as a
// consumer of the source's isolation level does, up to the record batch that holds the
// offset before to: the batches after it are not decoded, since the read
// stops at to.
func (s *TopicSource) fetchDecoded(ctx context.Context, client *kgo.Client, tp topicPartition, meta partitionMeta, offset, to int64) fetched {
	part, err := s.fetchOnce(ctx, client, tp, meta, offset, s.fetchSize(to-offset))
	if err != nil {
		return fetched{offset: offset, meta: meta, err: err}
	}
	part.RecordBatches = batchesBefore(part.RecordBatches, to)
	size := len(part.RecordBatches)
	fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
		Offset:         offset,
		IsolationLevel: s.isolation(),
		Topic:          tp.topic,
		Partition:      tp.partition,
	}, part, decompressor, nil)
	if after > offset && size > 0 {
		s.offsetBytes.Store(int64(size) / (after - offset))
	}
	return fetched{offset: offset, meta: meta, fp: fp, after: after}
}

// fetchSize is how many bytes a fetch of n offsets asks for: the bytes an
// offset took in the last fetch, times n, with a margin, between
// minFetchBytes and the most a fetch takes. A fetch that gets less than
// the range is followed by another, so the estimate only saves the
// broker (and, in process, the embedded cluster) building and the source
// decoding a response much larger than the batch.
func (s *TopicSource) fetchSize(n int64) int32 {
	most := int64(partitionFetchBytes)
	if s.fetchBytes > 0 {
		most = int64(s.fetchBytes)
	}
	per := s.offsetBytes.Load()
	if per <= 0 || n <= 0 {
		return int32(most)
	}
	return int32(min(most, max(minFetchBytes, n*per*5/4)))
}

// minFetchBytes is the least a fetch asks for.
const minFetchBytes = 64 << 10

// batchesBefore cuts the record batches of a fetch response after the
// first one whose offset is at or past to. Each batch (and each message
// set entry of the older formats) begins with an offset and a length
// (8 and 4 bytes); for a record batch the offset is its first record's,
// for an older compressed message set its last's, so the batch that
// holds the offset before to is never cut off. What does not parse is
// left whole, for the decoder to judge.
func batchesBefore(raw []byte, to int64) []byte {
	for at := 0; at+12 <= len(raw); {
		offset := int64(binary.BigEndian.Uint64(raw[at:]))
		length := int(int32(binary.BigEndian.Uint32(raw[at+8:])))
		if length < 0 {
			return raw
		}
		next := at + 12 + length
		if offset >= to || next >= len(raw) {
			return raw[:min(next, len(raw))]
		}
		at = next
	}
	return raw
}

// fetchOnce sends one fetch request for tp at offset to its leader and
// returns the partition's part of the response.
func (s *TopicSource) fetchOnce(ctx context.Context, client *kgo.Client, tp topicPartition, meta partitionMeta, offset int64, size int32) (*kmsg.FetchResponseTopicPartition, error) {
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(fetchWait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = size
	req.IsolationLevel = s.isolationLevel()
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = tp.topic, meta.topicID
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition = tp.partition
	rp.FetchOffset = offset
	rp.PartitionMaxBytes = size
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := client.Broker(int(meta.leader)).RetriableRequest(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != tp.topic && t.TopicID != meta.topicID {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == tp.partition {
				return &t.Partitions[j], nil
			}
		}
	}
	return nil, fmt.Errorf("no data for %s in the fetch response", tp)
}

// outOfRange handles a fetch of tp at next out of range: it asks where
// the log starts and ends, reports the offsets lost, and returns where
// the read resumes (to, when nothing before it is left).
func (s *TopicSource) outOfRange(ctx context.Context, client *kgo.Client, tp topicPartition, next, to int64, lost func(lostRange) error) (int64, error) {
	starts, err := s.listOffsets(ctx, client, []topicPartition{tp}, earliestTimestamp)
	if err != nil {
		return 0, err
	}
	ends, err := s.listOffsets(ctx, client, []topicPartition{tp}, latestTimestamp)
	if err != nil {
		return 0, err
	}
	logStart, logEnd := starts[tp], ends[tp]
	switch {
	case next < logStart:
		gone := min(logStart, to)
		err := lost(lostRange{tp: tp, from: next, to: gone,
			why: fmt.Sprintf("deleted before the query read them (retention or DeleteRecords); the log now starts at offset %d", logStart)})
		return gone, err
	case next >= logEnd:
		err := lost(lostRange{tp: tp, from: next, to: to,
			why: fmt.Sprintf("the partition now ends at offset %d (was the topic deleted and made again?)", logEnd)})
		return to, err
	}
	return next, nil // in range after all: fetch again
}
