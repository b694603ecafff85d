package kafka

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// topicPartition names one partition of a topic.
type topicPartition struct {
	topic     string
	partition int32
}

func (tp topicPartition) String() string {
	return tp.topic + "/" + strconv.FormatInt(int64(tp.partition), 10)
}

func compareTopicPartitions(a, b topicPartition) int {
	if c := cmp.Compare(a.topic, b.topic); c != 0 {
		return c
	}
	return cmp.Compare(a.partition, b.partition)
}

// offsets are a source's offsets: for each partition, the offset of the
// next record to read (so the records up to an end offset are those
// before it). As JSON it is Spark's form, by topic and then partition
// number: {"events":{"0":123,"1":45}}.
type offsets map[topicPartition]int64

// sorted returns the partitions in order of topic, then partition.
func (o offsets) sorted() []topicPartition {
	return slices.SortedFunc(maps.Keys(o), compareTopicPartitions)
}

func (o offsets) MarshalJSON() ([]byte, error) {
	byTopic := make(map[string]map[string]int64)
	for tp, off := range o {
		ps := byTopic[tp.topic]
		if ps == nil {
			ps = make(map[string]int64)
			byTopic[tp.topic] = ps
		}
		ps[strconv.FormatInt(int64(tp.partition), 10)] = off
	}
	return json.Marshal(byTopic) // map keys sorted: the same offsets, the same bytes
}

func (o *offsets) UnmarshalJSON(b []byte) error {
	var byTopic map[string]map[string]int64
	if err := json.Unmarshal(b, &byTopic); err != nil {
		return err
	}
	*o = make(offsets)
	for topic, ps := range byTopic {
		for p, off := range ps {
			n, err := strconv.ParseInt(p, 10, 32)
			if err != nil || n < 0 {
				return fmt.Errorf("topic %q: %q is not a partition number", topic, p)
			}
			if off < 0 {
				return fmt.Errorf("%s/%d: negative offset %d", topic, n, off)
			}
			(*o)[topicPartition{topic, int32(n)}] = off
		}
	}
	return nil
}

// decodeOffsets reads an offset of the source; nil (a new query) is nil.
func decodeOffsets(raw json.RawMessage) (offsets, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var o offsets
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	return o, nil
}

// parsePosition reads a record's position, "topic/partition@offset".
// Topic names cannot hold '/' or '@', so the form is unambiguous.
func parsePosition(pos string) (topicPartition, int64, bool) {
	slash := strings.LastIndexByte(pos, '/')
	at := strings.LastIndexByte(pos, '@')
	if slash <= 0 || at < slash {
		return topicPartition{}, 0, false
	}
	p, err1 := strconv.ParseInt(pos[slash+1:at], 10, 32)
	off, err2 := strconv.ParseInt(pos[at+1:], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || off < 0 {
		return topicPartition{}, 0, false
	}
	return topicPartition{pos[:slash], int32(p)}, off, true
}

// rateLimit caps the end offsets of a batch at limit offsets in all, as
// Spark's Kafka source does: each partition with lag (end − from > 0)
// gets a share of limit proportional to its lag, rounded down, or up to
// one when the share is under one so that no partition starves; the
// total may therefore exceed limit by up to one per partition. from has
// the start of every partition in until.
func rateLimit(limit int64, from, until offsets) offsets {
	lag := make(map[topicPartition]int64)
	total := 0.0
	for tp, end := range until {
		if size := end - from[tp]; size > 0 {
			lag[tp] = size
			total += float64(size)
		}
	}
	if total <= float64(limit) {
		return until
	}
	capped := make(offsets, len(until))
	for tp, end := range until {
		size, ok := lag[tp]
		if !ok {
			capped[tp] = end
			continue
		}
		share := float64(limit) * (float64(size) / total)
		if share < 1 {
			share = math.Ceil(share)
		} else {
			share = math.Floor(share)
		}
		capped[tp] = min(end, from[tp]+int64(share))
	}
	return capped
}
