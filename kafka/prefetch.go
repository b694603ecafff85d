package kafka

import (
	"context"
	"encoding/json"
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

// prefetchBytes is the most one prefetching fetch returns in all.
const prefetchBytes = 4 * partitionFetchBytes

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
		_, known := s.positions[tp]
		meta, led := s.meta[tp]
		if !known || !led {
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
	for leader, tps := range byLeader {
		answered := s.prefetchFrom(ctx, client, leader, tps, from, metas, 0, ends, kept)
		for _, tp := range tps {
			if !answered[tp] {
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
	req.IsolationLevel = 1 // read_committed
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
			end := p.LastStableOffset
			if end < 0 {
				end = p.HighWatermark
			}
			if end < 0 {
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
				IsolationLevel: kgo.ReadCommitted(),
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
// failed fetch): the next Available says why.
func (s *TopicSource) WaitForData(ctx context.Context, committed json.RawMessage, d time.Duration) {
	started := time.Now()
	rest := func() { _ = pause(ctx, d-time.Since(started)) }
	client, err := s.clientFor()
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
	for tp := range from {
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
	// One fetch per leader; the first answer ends the others.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan bool, len(byLeader))
	for leader, tps := range byLeader {
		go func() {
			answered := s.prefetchFrom(wctx, client, leader, tps, from, metas, d, nil, nil)
			answers <- len(answered) > 0
		}()
	}
	ok := <-answers
	cancel()
	for range len(byLeader) - 1 {
		<-answers
	}
	if !ok {
		rest()
	}
}
