package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A source learns where the partitions it reads end from a fetch rather
// than a ListOffsets request when it knows where the next batch starts:
// Available fetches each such partition from the end Next last planned,
// takes the response's last stable offset as the partition's end, and
// keeps the records for Read, which begins with them. A batch then costs
// one round trip to the leader where it cost two (the listing and the
// batch's first fetch). A partition the fetch does not answer for (an
// error, or a response full before it) is listed as before.

// prefetchBytes is the most one prefetching fetch returns in all;
// prefetchTimeout bounds how long Available waits for one.
const (
	prefetchBytes   = 4 * partitionFetchBytes
	prefetchTimeout = 5 * time.Second
)

// planned records the ends Next planned, by partition: where the next
// batch of each starts, and so where Available fetches from.
func (s *TopicSource) planned(end offsets) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.positions == nil {
		s.positions = make(offsets, len(end))
	}
	maps.Copy(s.positions, end)
}

// prefetchEnds fetches the partitions of parts whose next offset is known
// from there, one request per leader, and returns their last stable
// offsets; it keeps each answer's records for Read (takePrefetched). The
// partitions it found no end for are returned in rest.
func (s *TopicSource) prefetchEnds(ctx context.Context, client *kgo.Client, parts []topicPartition) (ends offsets, rest []topicPartition) {
	s.mu.Lock()
	byLeader := make(map[int32][]topicPartition)
	for _, tp := range parts {
		position, known := s.positions[tp]
		meta, led := s.meta[tp]
		if end, bounded := s.endings[tp]; !known || !led || bounded && position >= end {
			// (A partition read to its EndingOffsets has nothing to
			// prefetch: its records after it are never read.)
			rest = append(rest, tp)
			continue
		}
		byLeader[meta.leader] = append(byLeader[meta.leader], tp)
	}
	from := make(offsets, len(parts))
	metas := make(map[topicPartition]partitionMeta, len(parts))
	for _, tps := range byLeader {
		for _, tp := range tps {
			from[tp], metas[tp] = s.positions[tp], s.meta[tp]
		}
	}
	s.mu.Unlock()
	ends = make(offsets, len(from))
	kept := make(map[topicPartition]fetched, len(from))
	// The leaders at once, each within prefetchTimeout: a leader that does
	// not answer leaves its partitions to the listing.
	pctx, cancel := context.WithTimeout(ctx, prefetchTimeout)
	defer cancel()
	type answer struct {
		tps      []topicPartition
		answered map[topicPartition]bool
		ends     offsets
		kept     map[topicPartition]fetched
	}
	answers := make(chan answer, len(byLeader))
	for leader, tps := range byLeader {
		go func() {
			a := answer{tps: tps, ends: offsets{}, kept: map[topicPartition]fetched{}}
			a.answered = s.prefetchFrom(pctx, client, leader, tps, from, metas, 0, a.ends, a.kept)
			answers <- a
		}()
	}
	for range len(byLeader) {
		a := <-answers
		maps.Copy(ends, a.ends)
		maps.Copy(kept, a.kept)
		for _, tp := range a.tps {
			if !a.answered[tp] {
				rest = append(rest, tp)
			}
		}
	}
	s.mu.Lock()
	s.prefetched = kept
	s.mu.Unlock()
	return ends, rest
}

// prefetchFrom sends one fetch for tps to leader, each from its offset in
// from, which the leader answers when it has a record to return or wait
// has passed, and records the ends and records of the partitions it
// answered for without an error (in ends and kept, when not nil). It
// returns those partitions; it fails only when the request does.
func (s *TopicSource) prefetchFrom(ctx context.Context, client *kgo.Client, leader int32, tps []topicPartition, from offsets, metas map[topicPartition]partitionMeta, wait time.Duration, ends offsets, kept map[topicPartition]fetched) map[topicPartition]bool {
	size := s.fetchSize(0)
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = int32(wait / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = max(size, int32(min(len(tps)*int(size), prefetchBytes)))
	req.IsolationLevel = s.isolationLevel()
	byTopic := make(map[string]int)
	for _, tp := range tps {
		i, ok := byTopic[tp.topic]
		if !ok {
			i = len(req.Topics)
			byTopic[tp.topic] = i
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = tp.topic, metas[tp].topicID
			req.Topics = append(req.Topics, rt)
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = tp.partition
		rp.FetchOffset = from[tp]
		rp.PartitionMaxBytes = size
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	answered := make(map[topicPartition]bool, len(tps))
	kresp, err := client.Broker(int(leader)).RetriableRequest(ctx, req)
	if err != nil {
		return answered
	}
	resp := kresp.(*kmsg.FetchResponse)
	if kerr.ErrorForCode(resp.ErrorCode) != nil {
		return answered
	}
	names := make(map[[16]byte]string, len(req.Topics))
	for _, t := range req.Topics {
		names[t.TopicID] = t.Topic
	}
	for i := range resp.Topics {
		t := &resp.Topics[i]
		topic := t.Topic
		if topic == "" {
			topic = names[t.TopicID]
		}
		for j := range t.Partitions {
			p := &t.Partitions[j]
			tp := topicPartition{topic, p.Partition}
			offset, asked := from[tp]
			if !asked || answered[tp] || p.ErrorCode != 0 {
				continue
			}
			// The reader's end (the last stable offset, read_committed;
			// the high watermark, read_uncommitted); a broker that does
			// not say leaves the partition to the listing.
			end := p.LastStableOffset
			if s.opts.ReadUncommitted {
				end = p.HighWatermark
			}
			if end < 0 {
				continue
			}
			if end < offset {
				// Below where the next batch starts: a leader elected a
				// moment ago whose offsets have not caught up with its
				// predecessor's, or a log truncated. The listing tells
				// them apart (a leader not caught up answers
				// OFFSET_NOT_AVAILABLE, and is asked again: KIP-207).
				continue
			}
			answered[tp] = true
			if ends != nil {
				ends[tp] = end
			}
			if kept == nil || len(p.RecordBatches) == 0 {
				continue
			}
			size := len(p.RecordBatches)
			fp, after := kgo.ProcessFetchPartition(kgo.ProcessFetchPartitionOpts{
				Offset:         offset,
				IsolationLevel: s.isolation(),
				Topic:          tp.topic,
				Partition:      tp.partition,
			}, p, decompressor, nil)
			if fp.Err != nil || after <= offset {
				continue // Read fetches it again, and judges the error
			}
			s.offsetBytes.Store(int64(size) / (after - offset))
			kept[tp] = fetched{offset: offset, meta: metas[tp], fp: fp, after: after}
		}
	}
	return answered
}

// takePrefetched returns the records Available fetched of tp from offset,
// if it did, and forgets them.
func (s *TopicSource) takePrefetched(tp topicPartition, offset int64) (fetched, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.prefetched[tp]
	if !ok || f.offset != offset {
		return fetched{}, false
	}
	delete(s.prefetched, tp)
	return f, true
}

// listingMaxAge is how long a source of given partitions trusts its last
// listing of them: a leader that moved is found sooner, by a fetch or a
// listing that fails.
const listingMaxAge = 5 * time.Second

// WaitForData waits until a partition of committed (the offsets a query
// committed) has records after them, d has passed, or ctx is done: it
// sends each partition's leader a fetch from there, which the leader
// answers when records arrive or after d (a runtime.DataWaiter). It
// waits d when it cannot fetch (a new query, a partition not listed, a
// failed fetch): the next Available says why. The fetches go through a
// client of their own: ending a wait the broker holds closes its
// connection, which must not fail the reads.
func (s *TopicSource) WaitForData(ctx context.Context, committed json.RawMessage, d time.Duration) {
	started := time.Now()
	rest := func() { _ = pause(ctx, d-time.Since(started)) }
	s.mu.Lock()
	holding := s.holding
	s.mu.Unlock()
	if holding {
		// The data is there, held back (MinOffsetsPerTrigger): a fetch
		// would answer at once.
		rest()
		return
	}
	client, err := s.waitClientFor()
	if err != nil || len(committed) == 0 {
		rest()
		return
	}
	from, err := s.decode(committed, "committed")
	if err != nil || len(from) == 0 {
		rest()
		return
	}
	byLeader := make(map[int32][]topicPartition)
	metas := make(map[topicPartition]partitionMeta, len(from))
	s.mu.Lock()
	for tp, position := range from {
		if end, bounded := s.endings[tp]; bounded && position >= end {
			continue // read to its EndingOffsets: its records after are not data
		}
		if meta, ok := s.meta[tp]; ok {
			byLeader[meta.leader] = append(byLeader[meta.leader], tp)
			metas[tp] = meta
		}
	}
	s.mu.Unlock()
	if len(byLeader) == 0 {
		rest()
		return
	}
	// One fetch per leader, none longer than d and a margin (a leader
	// that is gone is retried by the client); the first that answers
	// ends the others, a failure only once all have answered.
	wctx, cancel := context.WithTimeout(ctx, d+time.Second)
	defer cancel()
	answers := make(chan bool, len(byLeader))
	for leader, tps := range byLeader {
		go func() {
			answered := s.prefetchFrom(wctx, client, leader, tps, from, metas, d, nil, nil)
			answers <- len(answered) > 0
		}()
	}
	ok, got := false, 0
	for !ok && got < len(byLeader) {
		ok = <-answers
		got++
	}
	cancel()
	for ; got < len(byLeader); got++ {
		<-answers
	}
	if !ok {
		rest()
	}
}

// waitClientFor returns the client of WaitForData's fetches, made at the
// first call and closed with the source.
func (s *TopicSource) waitClientFor() (*kgo.Client, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("streamgen: kafka source %q: closed", s.name)
	}
	if s.waitClient == nil {
		client, err := s.opts.Connection.newClient()
		if err != nil {
			return nil, fmt.Errorf("streamgen: kafka source %q: client: %w", s.name, err)
		}
		s.waitClient = client
	}
	return s.waitClient, nil
}
