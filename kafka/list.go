package kafka

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The timestamps of a ListOffsets request that ask for an end rather than
// a time.
const (
	latestTimestamp   int64 = -1
	earliestTimestamp int64 = -2
)

// listAttempts bounds the tries of a listing whose partitions answer with
// retriable errors (a leader moving), with listBackoff doubling between
// them; availableAttempts bounds those of Available's listing, which
// leaves such partitions for the next.
const (
	listAttempts      = 8
	availableAttempts = 3
	listBackoff       = 50 * time.Millisecond
)

// listPartitions asks the cluster for the partitions the source reads and
// remembers where each is led. It asks every time, bypassing the client's
// metadata cache (which kadm's listings use, and which lags by up to the
// client's MetadataMinAge), so that a partition added is seen at the next
// trigger. A topic that does not exist yet is not an error: it has no
// partitions.
func (s *TopicSource) listPartitions(ctx context.Context, client *kgo.Client) ([]topicPartition, error) {
	req := kmsg.NewPtrMetadataRequest()
	switch {
	case len(s.opts.Topics) > 0:
		for _, t := range s.opts.Topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	case len(s.opts.Partitions) > 0:
		for t := range s.opts.Partitions {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
	default:
		req.Topics = nil // all topics, for the pattern
	}
	resp, err := req.RequestWith(ctx, client)
	if err != nil {
		return nil, fmt.Errorf("streamgen: kafka source %q: metadata: %w", s.name, s.opts.Connection.explain(err))
	}
	meta := make(map[topicPartition]partitionMeta)
	var parts, leaderless []topicPartition
	var making, missing []string
	for _, t := range resp.Topics {
		if t.Topic == nil {
			continue
		}
		topic := *t.Topic
		switch err := kerr.ErrorForCode(t.ErrorCode); {
		case errors.Is(err, kerr.UnknownTopicOrPartition):
			missing = append(missing, topic)
			continue // not there (yet, or any more)
		case errors.Is(err, kerr.LeaderNotAvailable):
			making = append(making, topic) // being made: listed once it is
			continue
		case err != nil:
			return nil, fmt.Errorf("streamgen: kafka source %q: metadata of topic %q: %w", s.name, topic, err)
		}
		if !s.opts.subscribes(topic, s.pattern) || (s.pattern != nil && t.IsInternal) {
			continue
		}
		for _, p := range t.Partitions {
			if len(s.opts.Partitions) > 0 && !slices.Contains(s.opts.Partitions[topic], p.Partition) {
				continue
			}
			tp := topicPartition{topic, p.Partition}
			if p.Leader < 0 {
				leaderless = append(leaderless, tp) // no leader this instant: listed at a later trigger
				continue
			}
			meta[tp] = partitionMeta{leader: p.Leader, topicID: t.TopicID}
			parts = append(parts, tp)
		}
	}
	slices.SortFunc(parts, compareTopicPartitions)
	s.mu.Lock()
	s.meta, s.listed, s.listedAt, s.leaderless, s.making = meta, parts, time.Now(), leaderless, making
	s.noteMissing(missing)
	s.mu.Unlock()
	return parts, nil
}

// noteMissing warns, once, of each topic the source names that the
// cluster does not have, and tells when one it warned of is there: the
// source waits for it (and reads it from its first record), where a typo
// in its name would otherwise go unnoticed. (Spark fails the query.)
// Called with s.mu held.
func (s *TopicSource) noteMissing(missing []string) {
	for _, topic := range missing {
		if !s.missing[topic] {
			if s.missing == nil {
				s.missing = map[string]bool{}
			}
			s.missing[topic] = true
			slog.Warn("streamgen: kafka source: a topic it reads does not exist: waiting for it", "source", s.name, "topic", topic)
		}
	}
	for topic := range s.missing {
		if !slices.Contains(missing, topic) {
			delete(s.missing, topic)
			slog.Info("streamgen: kafka source: a topic it waited for exists", "source", s.name, "topic", topic)
		}
	}
}

// leaderOf returns where tp is fetched from, listing the partitions again
// when refresh is set or tp is not known.
func (s *TopicSource) leaderOf(ctx context.Context, client *kgo.Client, tp topicPartition, refresh bool) (partitionMeta, bool, error) {
	if !refresh {
		s.mu.Lock()
		m, ok := s.meta[tp]
		s.mu.Unlock()
		if ok {
			return m, true, nil
		}
	}
	if _, err := s.listPartitions(ctx, client); err != nil {
		return partitionMeta{}, false, err
	}
	s.mu.Lock()
	m, ok := s.meta[tp]
	s.mu.Unlock()
	return m, ok, nil
}

// listOffsets asks each partition's leader for an offset, with the
// source's isolation level: at timestamp latestTimestamp the last stable
// offset (read_uncommitted: the high watermark), at earliestTimestamp
// the log start offset, and at a time in milliseconds the first offset
// whose timestamp is at or after it, or the end when there is none. A partition whose
// leader keeps failing is an error.
func (s *TopicSource) listOffsets(ctx context.Context, client *kgo.Client, parts []topicPartition, timestamp int64) (offsets, error) {
	return s.listOffsetsTrying(ctx, client, parts, timestamp, listAttempts, false, nil)
}

// timestampOffsets is listOffsets at a timestamp, with the partitions
// that have no record at or after it (given their ends) in noMatch.
func (s *TopicSource) timestampOffsets(ctx context.Context, client *kgo.Client, parts []topicPartition, timestamp int64, noMatch *[]topicPartition) (offsets, error) {
	return s.listOffsetsTrying(ctx, client, parts, timestamp, listAttempts, false, noMatch)
}

// availableOffsets lists the end offsets of parts for Available. A
// partition whose leader still fails after a few tries is left out, with
// a warning: it keeps its committed offset, and the next listing tries
// it again.
func (s *TopicSource) availableOffsets(ctx context.Context, client *kgo.Client, parts []topicPartition) (offsets, error) {
	return s.listOffsetsTrying(ctx, client, parts, latestTimestamp, availableAttempts, true, nil)
}

// listOffsetsTrying is listOffsets with a number of attempts, and, when
// skip is set, partitions still failing after them left out; noMatch, if
// not nil, gets the partitions with no record at or after timestamp.
func (s *TopicSource) listOffsetsTrying(ctx context.Context, client *kgo.Client, parts []topicPartition, timestamp int64, attempts int, skip bool, noMatch *[]topicPartition) (offsets, error) {
	found := make(offsets, len(parts))
	pending := parts
	backoff := listBackoff
	for attempt := 1; len(pending) > 0; attempt++ {
		var retry, noneAfter []topicPartition
		var failed error
		req := kmsg.NewPtrListOffsetsRequest()
		req.IsolationLevel = s.isolationLevel()
		byTopic := make(map[string]int)
		for _, tp := range pending {
			i, ok := byTopic[tp.topic]
			if !ok {
				i = len(req.Topics)
				byTopic[tp.topic] = i
				rt := kmsg.NewListOffsetsRequestTopic()
				rt.Topic = tp.topic
				req.Topics = append(req.Topics, rt)
			}
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition = tp.partition
			rp.Timestamp = timestamp
			req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
		}
		asked := make(map[topicPartition]bool, len(pending))
		for _, tp := range pending {
			asked[tp] = true
		}
		for _, shard := range client.RequestSharded(ctx, req) {
			if shard.Err != nil {
				if ctx.Err() != nil {
					return nil, fmt.Errorf("streamgen: kafka source %q: list offsets: %w", s.name, ctx.Err())
				}
				failed = shard.Err
				continue
			}
			resp := shard.Resp.(*kmsg.ListOffsetsResponse)
			for _, t := range resp.Topics {
				for _, p := range t.Partitions {
					tp := topicPartition{t.Topic, p.Partition}
					if !asked[tp] {
						continue
					}
					delete(asked, tp)
					switch err := kerr.ErrorForCode(p.ErrorCode); {
					case err == nil && p.Offset < 0 && timestamp >= 0:
						noneAfter = append(noneAfter, tp)
					case err == nil:
						found[tp] = p.Offset
					case kerr.IsRetriable(err) || errors.Is(err, kerr.UnknownTopicOrPartition):
						retry = append(retry, tp)
						failed = fmt.Errorf("%s: %w", tp, err)
					default:
						return nil, fmt.Errorf("streamgen: kafka source %q: list offsets of %s: %w", s.name, tp, err)
					}
				}
			}
		}
		for tp := range asked { // in a shard that failed as a whole
			retry = append(retry, tp)
		}
		if noMatch != nil {
			*noMatch = append(*noMatch, noneAfter...)
		}
		if len(noneAfter) > 0 {
			ends, err := s.listOffsets(ctx, client, noneAfter, latestTimestamp)
			if err != nil {
				return nil, err
			}
			for tp, off := range ends {
				found[tp] = off
			}
		}
		if len(retry) == 0 {
			break
		}
		if attempt == attempts && skip {
			slog.Warn("streamgen: kafka source: partitions left out of this listing, their leaders failing", "source", s.name, "partitions", len(retry), "error", failed)
			break
		}
		if attempt == attempts {
			return nil, fmt.Errorf("streamgen: kafka source %q: list offsets: %d partitions still failing after %d attempts: %w", s.name, len(retry), attempt, failed)
		}
		// The client's cached metadata may still name no leader (or an
		// old one) for them, for up to MetadataMinAge (5 s): drop it, so
		// that the next try learns the leaders again.
		var topics []string
		for _, tp := range retry {
			if !slices.Contains(topics, tp.topic) {
				topics = append(topics, tp.topic)
			}
		}
		client.PurgeTopicsFromClient(topics...)
		if err := pause(ctx, backoff); err != nil {
			return nil, fmt.Errorf("streamgen: kafka source %q: list offsets: %w", s.name, err)
		}
		backoff = min(2*backoff, time.Second)
		pending = retry
	}
	return found, nil
}

// pause waits d, or until ctx is done.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// confirmGone returns those of candidates, partitions the last listing
// did not find, that no broker of the cluster knows either: a broker
// whose metadata lags answers that a topic it has not heard of yet, or
// no more, is unknown, and one such answer is not a deletion. A broker
// that does not answer is not asked again; with none answering, nothing
// is gone (the next batch asks again).
func (s *TopicSource) confirmGone(ctx context.Context, client *kgo.Client, candidates []topicPartition) ([]topicPartition, error) {
	if len(candidates) == 0 {
		return nil, nil
	}
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range slices.Compact(slices.Sorted(func(yield func(string) bool) {
		for _, tp := range candidates {
			if !yield(tp.topic) {
				return
			}
		}
	})) {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	known := map[topicPartition]bool{}
	answered := false
	for _, broker := range client.DiscoveredBrokers() {
		resp, err := broker.Request(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			continue
		}
		answered = true
		for _, t := range resp.(*kmsg.MetadataResponse).Topics {
			if t.Topic == nil {
				continue
			}
			if errors.Is(kerr.ErrorForCode(t.ErrorCode), kerr.LeaderNotAvailable) {
				for _, tp := range candidates {
					known[tp] = known[tp] || tp.topic == *t.Topic // being made
				}
				continue
			}
			if t.ErrorCode != 0 {
				continue
			}
			for _, p := range t.Partitions {
				known[topicPartition{*t.Topic, p.Partition}] = true
			}
		}
	}
	if !answered {
		return nil, nil
	}
	return slices.DeleteFunc(candidates, func(tp topicPartition) bool { return known[tp] }), nil
}
