package kafka

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure a Kafka source, after Spark's Kafka source options.
// Exactly one of Topics, TopicPattern and Partitions says what is read.
// The zero value of every other field is its default.
type Options struct {
	Connection

	// Topics subscribes to these topics, all their partitions, including
	// partitions added while the query runs (Spark's subscribe).
	Topics []string
	// TopicPattern subscribes to every topic whose name the regular
	// expression (Go's syntax) matches anywhere, unanchored as Spark's
	// subscribePattern: "^events-" for a prefix. Topics created while the
	// query runs are read once they match. Internal topics are left out.
	TopicPattern string
	// Partitions reads exactly these partitions, by topic (Spark's
	// assign). A partition that does not exist yet is read once it does.
	Partitions map[string][]int32

	// StartingOffsets is where a new query starts: Latest (the default,
	// as Spark's streaming queries; Earliest in an App's task, as Kafka
	// Streams), Earliest, AtOffsets, AtTimestamp or AtTimestamps.
	// A query restarted on its checkpoint goes on from the checkpoint's
	// offsets whatever this says, and a partition that appears while a
	// query runs is read from its beginning.
	StartingOffsets StartingOffsets

	// EndingOffsets bounds what the source reads, as Spark's
	// endingOffsets, endingTimestamp and endingOffsetsByTimestamp (of a
	// batch read) and Flink's bounded Kafka source: EndAtLatest,
	// EndAtTimestamp, EndAtTimestamps or EndAtOffsets. The default reads
	// on without end. A bounded source with an AvailableNow trigger
	// reads its range and stops: a backfill, or a re-read of a window of
	// time.
	EndingOffsets EndingOffsets

	// MaxOffsetsPerTrigger caps the offsets one batch takes over all its
	// partitions, spread over them in proportion to their lag as Spark
	// does (a partition with any lag takes at least one). The default,
	// 0, takes everything available. A Once trigger ignores it.
	MaxOffsetsPerTrigger int64

	// MinOffsetsPerTrigger, as Spark's minOffsetsPerTrigger, holds a
	// batch back until its partitions have this many new offsets in all,
	// or MaxTriggerDelay has passed since the source's last batch, or its
	// last trigger that found the delay passed (with data or without, as
	// Spark's); a query's first batch after its start is never held:
	// fewer, larger batches from a trickle.
	// The default, 0, holds nothing back. Once and AvailableNow triggers
	// ignore it. The hold is the source's: a source serving several
	// queries at once holds for them together.
	MinOffsetsPerTrigger int64
	// MaxTriggerDelay bounds how long MinOffsetsPerTrigger holds new
	// offsets back (Spark's maxTriggerDelay); the default is 15 minutes.
	MaxTriggerDelay time.Duration
	// Clock tells the time MaxTriggerDelay is measured in; the default is
	// time.Now. It is called from the query's goroutine (of each query
	// the source serves).
	Clock func() time.Time

	// OnDataLoss says what to do when offsets the query has not read are
	// gone: deleted by retention or DeleteRecords, a partition whose log
	// is now shorter than the offset reached (a topic deleted and made
	// again), a partition gone from a topic the source reads (the topic
	// deleted), or a new partition whose first records were deleted
	// before the query saw it. The default, FailOnDataLoss, fails the
	// batch with an error naming the topic, partition and offsets
	// (Spark's failOnDataLoss=true); ContinueOnDataLoss logs a warning and
	// goes on from the earliest offset still there. As in Spark, a topic
	// deleted and made again is seen only through its offsets: when a
	// batch runs while it is gone, it is then read from its first record;
	// when it is made again before, with fewer records than the offset
	// reached, that is data loss and the query goes on from its end; with
	// as many or more, the query reads on from the offset it reached, and
	// the new topic's records before it are not read.
	OnDataLoss DataLoss

	// ReadUncommitted reads as a consumer with
	// isolation.level=read_uncommitted: the records of transactions still
	// open and of those aborted as well, a batch planned up to each
	// partition's high watermark, so that a transaction left open holds
	// nothing back. It is the Kafka consumer's default, and so Spark's
	// and Flink's unless kafka.isolation.level says otherwise. By default
	// (false) the source reads as read_committed, Kafka Streams' choice
	// with exactly-once: each committed record once, none of an aborted
	// transaction, a batch planned up to the last stable offset. Either
	// way a batch read again reads the same records.
	ReadUncommitted bool

	// CommitGroup, when set, commits the end offsets of each batch that
	// read the source, once the batch is durable, to this consumer
	// group, as Flink's Kafka source commits on each checkpoint: tools
	// that watch a group's lag (kafka-consumer-groups, Burrow, a lag
	// exporter) then see the query's. The offsets are for watching only:
	// a query reads from its checkpoint, never from the group. Commits
	// are made on a goroutine of the source's, the latest batch's only;
	// one that fails is logged and the next batch's tried; Close makes
	// the last. The group must have no members (not an App's group). A
	// source that serves several queries commits each one's offsets over
	// the other's: give such queries a source each.
	CommitGroup string

	// Name names the source in progress reports and in the checkpoint,
	// which keeps the offsets under it. The default is "kafka:" and the
	// topics (sorted, comma-separated), "kafka:pattern:" and the pattern,
	// or "kafka:assign:" and the partitions. Set it to keep a
	// checkpoint's offsets across a change of subscription: the offsets
	// of partitions the new subscription drops are kept, not read, and
	// logged once (Spark fails the query on them as partitions gone).
	Name string
}

// DataLoss is what a source does about offsets that are gone before it
// read them: see Options.OnDataLoss.
type DataLoss int

const (
	// FailOnDataLoss fails the batch, naming the topic, partition and
	// offsets lost. The default.
	FailOnDataLoss DataLoss = iota
	// ContinueOnDataLoss logs a warning and goes on from the earliest
	// offset still there.
	ContinueOnDataLoss
)

// String names the policy.
func (d DataLoss) String() string {
	switch d {
	case FailOnDataLoss:
		return "FailOnDataLoss"
	case ContinueOnDataLoss:
		return "ContinueOnDataLoss"
	}
	return "DataLoss(" + strconv.Itoa(int(d)) + ")"
}

// The special offsets AtOffsets takes, as Spark's startingOffsets JSON.
const (
	// EarliestOffset starts a partition at its first record still there.
	EarliestOffset int64 = -2
	// LatestOffset starts a partition after its last committed record.
	LatestOffset int64 = -1
)

type startKind int

const (
	// startDefault is the zero value: Latest, but Earliest for a source
	// an App's task makes.
	startDefault startKind = iota
	startLatest
	startEarliest
	startOffsets
	startTimestamp
	startTimestamps
)

// StartingOffsets is where a new query starts reading. The zero value is
// Latest, as Spark's streaming queries start, but Earliest for the
// sources of an App's task (Task.Source, SourceOf, GlobalSource), as
// Kafka Streams' auto.offset.reset is: a new App (or one Reset) reads its
// input from the start. Make one with Latest, Earliest, AtOffsets,
// AtTimestamp or AtTimestamps. It is immutable, so safe to share.
type StartingOffsets struct {
	kind    startKind
	offsets map[string]map[int32]int64
	at      time.Time
	times   map[string]map[int32]time.Time
	// failWithoutMatch: see FailWithoutMatch.
	failWithoutMatch bool
}

// Latest starts each partition after its last committed record (the last
// stable offset): only records produced after the query starts are read.
func Latest() StartingOffsets { return StartingOffsets{kind: startLatest} }

// Earliest starts each partition at its first record still there.
func Earliest() StartingOffsets { return StartingOffsets{kind: startEarliest} }

// AtOffsets starts each partition at its offset, by topic and partition;
// EarliestOffset and LatestOffset stand for those ends. As Spark's
// startingOffsets, it must give every partition the query reads when it
// starts, and, for a source of Topics or TopicPattern, no other: the
// query's first batch stops it with an error naming the partitions left
// out or not there. (A source of Partitions, as an App's task reads, uses
// the offsets of its own partitions and leaves the others, so its tasks
// may share one map.) An offset past a partition's end is data loss (see
// Options.OnDataLoss); one before its first record too, once the query
// reads it.
func AtOffsets(offsets map[string]map[int32]int64) StartingOffsets {
	return StartingOffsets{kind: startOffsets, offsets: cloneOffsets(offsets)}
}

// cloneOffsets copies offsets given by topic and partition.
func cloneOffsets(offsets map[string]map[int32]int64) map[string]map[int32]int64 {
	copied := make(map[string]map[int32]int64, len(offsets))
	for t, ps := range offsets {
		copied[t] = maps.Clone(ps)
	}
	return copied
}

// AtTimestamp starts each partition at its first record whose timestamp
// is at or after t (Spark's startingTimestamp); a partition with no such
// record starts at its end (Spark's startingOffsetsByTimestampStrategy
// "latest"), unless FailWithoutMatch says to stop the query (Spark's
// default strategy, "error").
func AtTimestamp(t time.Time) StartingOffsets { return StartingOffsets{kind: startTimestamp, at: t} }

// AtTimestamps starts each partition at its first record whose timestamp
// is at or after the partition's time, by topic and partition (Spark's
// startingOffsetsByTimestamp); a partition with no such record starts at
// its end, as with AtTimestamp (or stops the query: FailWithoutMatch). As
// AtOffsets, it must give every partition the query reads when it starts.
func AtTimestamps(times map[string]map[int32]time.Time) StartingOffsets {
	copied := make(map[string]map[int32]time.Time, len(times))
	for t, ps := range times {
		copied[t] = maps.Clone(ps)
	}
	return StartingOffsets{kind: startTimestamps, times: copied}
}

// FailWithoutMatch returns AtTimestamp's or AtTimestamps' starting
// offsets made to stop a new query at its first batch, with an error
// naming them, when a partition has no record at or after its time,
// where it would otherwise start at its end: Spark's
// startingOffsetsByTimestampStrategy "error", its default. Other starting
// offsets are returned unchanged.
func (s StartingOffsets) FailWithoutMatch() StartingOffsets {
	if s.kind == startTimestamp || s.kind == startTimestamps {
		s.failWithoutMatch = true
	}
	return s
}

// String describes the starting offsets.
func (s StartingOffsets) String() string {
	switch s.kind {
	case startEarliest:
		return "earliest"
	case startOffsets:
		return fmt.Sprint(s.offsets)
	case startTimestamp, startTimestamps:
		text := fmt.Sprint(s.times)
		if s.kind == startTimestamp {
			text = "at " + s.at.Format(time.RFC3339Nano)
		}
		if s.failWithoutMatch {
			text += ", failing without a match"
		}
		return text
	}
	return "latest"
}

type endKind int

const (
	endNone endKind = iota
	endLatest
	endOffsets
	endTimestamp
	endTimestamps
)

// EndingOffsets is where a source stops reading each partition
// (Options.EndingOffsets): the records before it are read, none from it
// on. The zero value reads on without end. Make one with EndAtLatest,
// EndAtTimestamp, EndAtTimestamps or EndAtOffsets. A query restarted on its checkpoint
// resolves it again (EndAtLatest then ends where the partitions end at
// the restart). It is immutable, so safe to share.
type EndingOffsets struct {
	kind    endKind
	offsets map[string]map[int32]int64
	at      time.Time
	times   map[string]map[int32]time.Time
}

// EndAtLatest ends each partition where it ended when the source first
// listed it: what was there when the query started, for a partition
// there then; a partition that appears later, where it ended then.
func EndAtLatest() EndingOffsets { return EndingOffsets{kind: endLatest} }

// EndAtTimestamp ends each partition at its first record whose timestamp
// is at or after t (Spark's endingTimestamp): the records before it are
// read. A partition with no such record yet is read on, to where one
// arrives.
func EndAtTimestamp(t time.Time) EndingOffsets { return EndingOffsets{kind: endTimestamp, at: t} }

// EndAtTimestamps ends each partition at its first record whose timestamp
// is at or after the partition's time, by topic and partition (Spark's
// endingOffsetsByTimestamp), as EndAtTimestamp does for one time. A
// partition the map does not name ends where it ended when the source
// first listed it, as with EndAtOffsets.
func EndAtTimestamps(times map[string]map[int32]time.Time) EndingOffsets {
	copied := make(map[string]map[int32]time.Time, len(times))
	for t, ps := range times {
		copied[t] = maps.Clone(ps)
	}
	return EndingOffsets{kind: endTimestamps, times: copied}
}

// EndAtOffsets ends each partition at its offset, by topic and partition
// (Spark's endingOffsets): the record at the offset is not read.
// LatestOffset stands for the partition's end when the source first
// lists it, and so does a partition the map does not name.
func EndAtOffsets(offsets map[string]map[int32]int64) EndingOffsets {
	return EndingOffsets{kind: endOffsets, offsets: cloneOffsets(offsets)}
}

// String describes the ending offsets.
func (e EndingOffsets) String() string {
	switch e.kind {
	case endLatest:
		return "latest"
	case endOffsets:
		return fmt.Sprint(e.offsets)
	case endTimestamp:
		return "at " + e.at.Format(time.RFC3339Nano)
	case endTimestamps:
		return fmt.Sprint(e.times)
	}
	return "none"
}

// legalTopic matches the names Kafka accepts for topics.
var legalTopic = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// validate checks the options, all in one place, and returns the pattern
// compiled. Every error is reported, joined.
func (o *Options) validate() (*regexp.Regexp, error) {
	var errs []error
	if err := o.Connection.validate(); err != nil {
		errs = append(errs, err)
	}
	ways := 0
	for _, set := range []bool{len(o.Topics) > 0, o.TopicPattern != "", len(o.Partitions) > 0} {
		if set {
			ways++
		}
	}
	if ways != 1 {
		errs = append(errs, errors.New("set exactly one of Topics, TopicPattern and Partitions"))
	}
	for _, t := range o.Topics {
		if !legalTopic.MatchString(t) || t == "." || t == ".." {
			errs = append(errs, fmt.Errorf("Topics: %q is not a legal topic name", t))
		}
	}
	var pattern *regexp.Regexp
	if o.TopicPattern != "" {
		var err error
		if pattern, err = regexp.Compile(o.TopicPattern); err != nil {
			errs = append(errs, fmt.Errorf("TopicPattern: %w", err))
		}
	}
	for _, t := range slices.Sorted(maps.Keys(o.Partitions)) {
		if !legalTopic.MatchString(t) {
			errs = append(errs, fmt.Errorf("Partitions: %q is not a legal topic name", t))
		}
		for _, p := range o.Partitions[t] {
			if p < 0 {
				errs = append(errs, fmt.Errorf("Partitions: topic %q: negative partition %d", t, p))
			}
		}
	}
	if o.MaxOffsetsPerTrigger < 0 {
		errs = append(errs, fmt.Errorf("MaxOffsetsPerTrigger %d is negative", o.MaxOffsetsPerTrigger))
	}
	if o.MinOffsetsPerTrigger < 0 {
		errs = append(errs, fmt.Errorf("MinOffsetsPerTrigger %d is negative", o.MinOffsetsPerTrigger))
	}
	if o.MaxOffsetsPerTrigger > 0 && o.MinOffsetsPerTrigger > o.MaxOffsetsPerTrigger {
		errs = append(errs, fmt.Errorf("MinOffsetsPerTrigger %d is more than MaxOffsetsPerTrigger %d", o.MinOffsetsPerTrigger, o.MaxOffsetsPerTrigger))
	}
	if o.MaxTriggerDelay < 0 {
		errs = append(errs, fmt.Errorf("MaxTriggerDelay %v is negative", o.MaxTriggerDelay))
	}
	if o.OnDataLoss != FailOnDataLoss && o.OnDataLoss != ContinueOnDataLoss {
		errs = append(errs, fmt.Errorf("OnDataLoss: unknown %v", o.OnDataLoss))
	}
	switch s := o.StartingOffsets; s.kind {
	case startTimestamp:
		if s.at.IsZero() {
			errs = append(errs, errors.New("StartingOffsets: AtTimestamp of the zero time"))
		}
	case startOffsets:
		errs = append(errs, o.checkOffsets("StartingOffsets", s.offsets, EarliestOffset, "EarliestOffset or LatestOffset", pattern)...)
	case startTimestamps:
		errs = append(errs, o.checkTimes("StartingOffsets: AtTimestamps", s.times, pattern)...)
	}
	switch e := o.EndingOffsets; e.kind {
	case endTimestamp:
		if e.at.IsZero() {
			errs = append(errs, errors.New("EndingOffsets: EndAtTimestamp of the zero time"))
		}
	case endOffsets:
		errs = append(errs, o.checkOffsets("EndingOffsets", e.offsets, LatestOffset, "LatestOffset (EarliestOffset is not an end, as in Spark)", pattern)...)
	case endTimestamps:
		errs = append(errs, o.checkTimes("EndingOffsets: EndAtTimestamps", e.times, pattern)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("streamgen: kafka source %q: options: %w", o.Name, err)
	}
	return pattern, nil
}

// checkTimes checks the times given by topic and partition for what
// ("StartingOffsets: AtTimestamps", ...): none the zero time, and the
// partitions as checkOffsets checks them.
func (o *Options) checkTimes(what string, times map[string]map[int32]time.Time, pattern *regexp.Regexp) []error {
	var errs []error
	asOffsets := make(map[string]map[int32]int64, len(times))
	for t, ps := range times {
		asOffsets[t] = make(map[int32]int64, len(ps))
		for p, at := range ps {
			if at.IsZero() {
				errs = append(errs, fmt.Errorf("%s: %s/%d: the zero time", what, t, p))
			}
			asOffsets[t][p] = 0
		}
	}
	option, _, _ := strings.Cut(what, ":")
	return append(errs, o.checkOffsets(option, asOffsets, 0, "", pattern)...)
}

// checkOffsets checks the offsets given for what (StartingOffsets or
// EndingOffsets): topics read, partitions not negative, offsets no less
// than least (the special offsets it may be, named by special).
func (o *Options) checkOffsets(what string, given map[string]map[int32]int64, least int64, special string, pattern *regexp.Regexp) []error {
	var errs []error
	for _, t := range slices.Sorted(maps.Keys(given)) {
		if !o.subscribes(t, pattern) {
			errs = append(errs, fmt.Errorf("%s: topic %q is not among the topics read", what, t))
		}
		for _, p := range slices.Sorted(maps.Keys(given[t])) {
			if p < 0 {
				errs = append(errs, fmt.Errorf("%s: topic %q: negative partition %d", what, t, p))
			}
			if off := given[t][p]; off < least {
				errs = append(errs, fmt.Errorf("%s: %s/%d: offset %d is neither an offset nor %s", what, t, p, off, special))
			}
		}
	}
	return errs
}

// subscribes reports whether the options read topic (pattern is the
// compiled TopicPattern, nil without one).
func (o *Options) subscribes(topic string, pattern *regexp.Regexp) bool {
	switch {
	case len(o.Topics) > 0:
		return slices.Contains(o.Topics, topic)
	case pattern != nil:
		return pattern.MatchString(topic)
	default:
		_, ok := o.Partitions[topic]
		return ok
	}
}

// defaultName is the source's name when Options.Name is empty.
func (o *Options) defaultName() string {
	switch {
	case len(o.Topics) > 0:
		topics := slices.Clone(o.Topics)
		slices.Sort(topics)
		return "kafka:" + strings.Join(slices.Compact(topics), ",")
	case o.TopicPattern != "":
		return "kafka:pattern:" + o.TopicPattern
	default:
		var parts []string
		for _, t := range slices.Sorted(maps.Keys(o.Partitions)) {
			ps := slices.Clone(o.Partitions[t])
			slices.Sort(ps)
			for _, p := range slices.Compact(ps) {
				parts = append(parts, t+"/"+strconv.Itoa(int(p)))
			}
		}
		return "kafka:assign:" + strings.Join(parts, ",")
	}
}
