package kafka

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/runtime"
)

// ErrDataLoss is wrapped by the error of a source that finds offsets gone
// before it read them, with FailOnDataLoss (see Options.OnDataLoss).
var ErrDataLoss = errors.New("streamgen: data loss")

// TopicSource reads Kafka topics as a runtime.Source. Make one with
// Source.
//
// Offsets are, per partition, the offset of the next record to read, in
// Spark's JSON form ({"events":{"0":123,"1":45}}), and a query keeps them
// in its checkpoint: the source commits nothing to Kafka and joins no
// consumer group. Available lists the partitions read (again at every
// call, so that partitions and topics created while a query runs are
// seen; a source of given Partitions every 5 seconds, or when one is
// missing or a fetch failed) and their last stable offsets, which are
// their end offsets for a read_committed reader: records of transactions
// still open are not planned (with Options.ReadUncommitted, their high
// watermarks). Where it knows where the next batch starts
// it learns those offsets from one fetch per leader from there, and the
// batch's Read begins with the records that fetch returned. An idle
// query waits for records with WaitForData (a runtime.DataWaiter), so a
// batch starts when they arrive rather than at the next poll. Next plans a batch from the committed offsets up to those,
// capped by MaxOffsetsPerTrigger. Read fetches exactly the records between
// two offsets of each partition, partition after partition in order of
// topic and partition number and each in offset order, so a batch read
// again holds the same records in the same order: it skips control
// records and the records of aborted transactions (read_committed,
// unless Options.ReadUncommitted), and
// stops at the end offset even when more is there.
//
// A new query (no committed offsets) starts at StartingOffsets, resolved
// when Next plans its first batch (which Read then reads from the same
// offsets). That batch always runs, empty or not, so that the checkpoint
// holds the starting offsets from then on: a query stopped after it
// resumes from there, not from a new "latest".
//
// Each record is a runtime.Record whose Data is the record's value,
// Partition "topic/partition" (the event-time watermark is kept per Kafka
// partition) and Position "topic/partition@offset". Use From to see the
// key, headers and timestamp as well.
//
// The source makes a franz-go client at its first call and keeps it until
// Close. Its methods are safe for concurrent use; a query calls them from
// its goroutine.
type TopicSource struct {
	opts    Options
	name    string
	pattern *regexp.Regexp
	// err, from validating the options, is returned by every method.
	err error
	// fetchBytes is the most one fetch reads of a partition; 0 means
	// partitionFetchBytes.
	fetchBytes int32
	// offsetBytes is what an offset took in the last fetch's response,
	// for sizing the next (fetchSize).
	offsetBytes atomic.Int64

	mu     sync.Mutex
	client *kgo.Client
	// waitClient makes WaitForData's fetches (see there).
	waitClient *kgo.Client
	closed     bool
	// meta is what the last listing learnt of each partition: where to
	// fetch it; listed are the partitions it found, sorted, and listedAt
	// when it was made; leaderless those it found without a leader (an
	// election under way), which it left out, and making the topics it
	// found being made (no leader for any of their partitions yet).
	meta       map[topicPartition]partitionMeta
	listed     []topicPartition
	listedAt   time.Time
	leaderless []topicPartition
	making     []string
	// missing are the topics the source names that a listing found not
	// there, each warned of once (noteMissing); dropped the partitions
	// of committed offsets that the subscription no longer names, each
	// warned of once (gone).
	missing map[string]bool
	dropped map[topicPartition]bool
	// positions are the ends Next planned last, by partition: where
	// Available fetches from; prefetched are the records Available
	// fetched, which Read begins with (see prefetch.go).
	positions  offsets
	prefetched map[topicPartition]fetched
	// plannedStarts remembers, by the offsets Next planned a batch from
	// (none, for a new query's first batch) and to, the starting offsets
	// it planned from, so that Read reads a new query's first batch from
	// the same offsets (resolving them again, a "latest" would have
	// moved); and for a later batch with partitions new to the query,
	// the earliest offsets they start at. Oldest first; at most
	// maxPlannedStarts. (Two queries on the source may plan batches that
	// end alike, a new one's first and a running one's that takes a new
	// partition: each finds its own by its start.)
	plannedStarts []plannedStart
	// lastTrigger is when Next last planned new offsets, or found
	// MaxTriggerDelay passed (zero at a query's start: CheckStart);
	// holding is set while it holds new offsets back
	// (MinOffsetsPerTrigger).
	lastTrigger time.Time
	holding     bool
	// endings are the ends of the partitions resolved so far
	// (Options.EndingOffsets).
	endings offsets
	// group commits to Options.CommitGroup (see commitgroup.go), once
	// a batch has been committed.
	group *groupCommits
}

// defaultMaxTriggerDelay is Options.MaxTriggerDelay's default, Spark's.
const defaultMaxTriggerDelay = 15 * time.Minute

// plannedStart is where Next planned a batch's partitions to start that
// the committed offsets do not give (see TopicSource.plannedStarts).
type plannedStart struct {
	start, end string
	starting   offsets
}

// maxPlannedStarts bounds TopicSource.plannedStarts: more new queries than
// this starting at once on one source would make a Read resolve its
// starting offsets again.
const maxPlannedStarts = 64

// partitionMeta says where a partition is fetched from.
type partitionMeta struct {
	leader  int32
	topicID [16]byte
}

// Source returns a source reading the topics opts names (see TopicSource
// and Options). Options that do not validate make every method fail with
// an error saying what is wrong. Close the source once its queries have
// stopped.
func Source(opts Options) *TopicSource {
	opts.Topics = append([]string(nil), opts.Topics...)
	if opts.Partitions != nil {
		parts := make(map[string][]int32, len(opts.Partitions))
		for t, ps := range opts.Partitions {
			parts[t] = append([]int32(nil), ps...)
		}
		opts.Partitions = parts
	}
	if opts.MaxTriggerDelay == 0 {
		opts.MaxTriggerDelay = defaultMaxTriggerDelay
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	s := &TopicSource{opts: opts}
	s.pattern, s.err = s.opts.validate()
	s.name = opts.Name
	if s.name == "" {
		s.name = s.opts.defaultName()
	}
	return s
}

// Name identifies the source in progress reports and the checkpoint.
func (s *TopicSource) Name() string { return s.name }

// CheckStart is called as a query on the source starts: its first batch
// is not held back for MinOffsetsPerTrigger (as Spark's, whose source is
// made anew at each start), whatever an earlier query on the source left.
func (s *TopicSource) CheckStart() error {
	s.mu.Lock()
	s.lastTrigger, s.holding = time.Time{}, false
	s.mu.Unlock()
	return nil
}

// Close closes the source's client, after the last commit to
// Options.CommitGroup. A call after Close fails; Close itself may be
// called again.
func (s *TopicSource) Close() {
	s.mu.Lock()
	s.closed = true
	g := s.group
	s.group = nil
	s.mu.Unlock()
	if g != nil {
		g.finish() // its last commit, on the client still open
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.client.Close()
		s.client = nil
	}
	if s.waitClient != nil {
		s.waitClient.Close()
		s.waitClient = nil
	}
}

// clientFor returns the source's client, made at the first call.
func (s *TopicSource) clientFor() (*kgo.Client, error) {
	if s.err != nil {
		return nil, s.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, fmt.Errorf("streamgen: kafka source %q: closed", s.name)
	}
	if s.client == nil {
		client, err := s.opts.Connection.newClient()
		if err != nil {
			return nil, fmt.Errorf("streamgen: kafka source %q: client: %w", s.name, err)
		}
		s.client = client
	}
	return s.client, nil
}

// Available lists the partitions read and returns their end offsets.
func (s *TopicSource) Available(ctx context.Context) (json.RawMessage, error) {
	client, err := s.clientFor()
	if err != nil {
		return nil, err
	}
	parts, err := s.partitionsRead(ctx, client)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	holding := s.holding
	s.mu.Unlock()
	ends, rest := offsets{}, parts
	if !holding {
		// (A held batch's records are not fetched again at every
		// poll: the ends are listed.)
		ends, rest = s.prefetchEnds(ctx, client, parts)
	}
	if len(rest) > 0 {
		listed, err := s.availableOffsets(ctx, client, rest)
		if err != nil {
			return nil, err
		}
		maps.Copy(ends, listed)
		s.mu.Lock()
		for _, tp := range rest {
			if _, known := s.positions[tp]; known && !holding {
				// A fetch that failed: perhaps a leader that moved.
				s.listedAt = time.Time{}
			}
		}
		s.mu.Unlock()
	}
	return s.encode(ends)
}

// holdBack reports whether the batch from begin to until is held back:
// it has fewer than MinOffsetsPerTrigger new offsets and MaxTriggerDelay
// has not passed since the last batch, as Spark's rule. A new query's
// first batch, and the first batch of a start (as Spark's), are never
// held back. A batch not held back starts the delay again.
func (s *TopicSource) holdBack(begin, until offsets, first bool) bool {
	var n int64
	for tp, end := range until {
		n += max(0, end-begin[tp])
	}
	now := s.opts.Clock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n == 0 && !first {
		// Nothing new: no batch. As Spark's delayBatch, a trigger once
		// MaxTriggerDelay has passed starts it again, with data or
		// without: a record after a long quiet waits for it too.
		if now.Sub(s.lastTrigger) >= s.opts.MaxTriggerDelay {
			s.lastTrigger = now
		}
		s.holding = false
		return false
	}
	if !first && now.Sub(s.lastTrigger) < s.opts.MaxTriggerDelay && n < s.opts.MinOffsetsPerTrigger {
		s.holding = true
		return true
	}
	s.lastTrigger, s.holding = now, false
	return false
}

// partitionsRead returns the partitions the source reads: a source of
// given partitions lists them again when its last listing is older than
// listingMaxAge or misses one of them; any other lists them every time,
// so that partitions and topics made while a query runs are seen.
func (s *TopicSource) partitionsRead(ctx context.Context, client *kgo.Client) ([]topicPartition, error) {
	if len(s.opts.Partitions) > 0 {
		s.mu.Lock()
		fresh := time.Since(s.listedAt) < listingMaxAge
		if fresh {
			for topic, ps := range s.opts.Partitions {
				for _, p := range ps {
					if _, ok := s.meta[topicPartition{topic, p}]; !ok {
						fresh = false
					}
				}
			}
		}
		parts := s.listed
		s.mu.Unlock()
		if fresh {
			return parts, nil
		}
	}
	return s.listPartitions(ctx, client)
}

// Next plans the batch after committed: every partition of upTo from its
// committed offset (a new query's starting offset; the beginning, for a
// partition new to the query, its earliest offset) up to its offset in upTo, with at most
// MaxOffsetsPerTrigger offsets in all unless limit is
// runtime.AllAvailable; with runtime.Limited, a batch of fewer than
// MinOffsetsPerTrigger is held back (see holdBack).
// A partition committed but gone from the listing, of a topic the source
// still reads, is data loss (its topic was deleted: see gone); one of a
// topic the source no longer reads keeps its offset. It returns committed
// when there is nothing new, and a new query's first batch always.
func (s *TopicSource) Next(ctx context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit) (json.RawMessage, error) {
	return s.next(ctx, committed, upTo, limit, 0)
}

// NextCapped is Next with at most records offsets in all, spread over the
// partitions as MaxOffsetsPerTrigger's are (runtime.RecordCapper: a
// query's MaxBatchStateBytes).
func (s *TopicSource) NextCapped(ctx context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit, records int64) (json.RawMessage, error) {
	return s.next(ctx, committed, upTo, limit, records)
}

// next is Next, and NextCapped for records > 0.
func (s *TopicSource) next(ctx context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit, records int64) (json.RawMessage, error) {
	client, err := s.clientFor()
	if err != nil {
		return nil, err
	}
	available, err := s.decode(upTo, "upTo")
	if err != nil {
		return nil, err
	}
	var from offsets
	if len(committed) == 0 {
		// Every partition subscribed gets its starting offset, those the
		// listing left out too (no leader that instant, or a leader that
		// failed): left out of the first batch, a partition would be
		// taken later for one new to the query, and read from its
		// beginning whatever StartingOffsets says. (Their listing is
		// tried again while their leaders are elected.)
		all := maps.Clone(available)
		for _, tp := range s.leftOut(available) {
			all[tp] = 0
		}
		if from, err = s.startingOffsets(ctx, client, all); err != nil {
			return nil, err
		}
	} else if from, err = s.decode(committed, "committed"); err != nil {
		return nil, err
	}

	// A partition new to the query (a topic the pattern matches now,
	// partitions added) starts at its earliest offset, as in Spark, and
	// one whose first records were deleted before the query saw it is
	// data loss (Spark: "Added partition starts from N instead of 0").
	var fresh []topicPartition
	if len(committed) > 0 {
		for _, tp := range available.sorted() {
			if _, known := from[tp]; !known {
				fresh = append(fresh, tp)
			}
		}
	}
	gone, err := s.confirmGone(ctx, client, s.gone(committed, from, available))
	if err != nil {
		return nil, err
	}
	for _, tp := range gone {
		err := s.dataLoss(lostRange{tp: tp, from: from[tp], to: from[tp],
			why: "the partition is gone (was its topic deleted?): records after the offset the query reached may have been missed"})
		if err != nil {
			return nil, err
		}
	}
	var earliest offsets
	if len(fresh) > 0 {
		if earliest, err = s.listOffsets(ctx, client, fresh, earliestTimestamp); err != nil {
			return nil, err
		}
	}
	ends, err := s.endingsOf(ctx, client, available)
	if err != nil {
		return nil, err
	}
	begin := make(offsets, len(available))
	until := make(offsets, len(available))
	for _, tp := range available.sorted() {
		end := available[tp]
		start, known := from[tp]
		switch {
		case !known:
			start = min(earliest[tp], end)
			if start > 0 {
				if err := s.dataLoss(lostRange{tp: tp, from: 0, to: start, why: "a partition new to the query, whose first records were deleted before the query saw it"}); err != nil {
					return nil, err
				}
			}
		case end < start && len(committed) > 0:
			// The log ends before the offset reached: the topic was
			// made again, or the log was truncated. Spark's rule:
			// report, and go on from the new end.
			err := s.dataLoss(lostRange{tp: tp, from: start, to: start,
				why: "the partition now ends before the offset the query reached (was the topic deleted and made again?)"})
			if err != nil {
				return nil, err
			}
			start = end
		case end < start:
			// A new query's latest offset, resolved after the listing.
			end = start
		}
		if e, bounded := ends[tp]; bounded && e < end {
			end = max(start, e)
		}
		begin[tp], until[tp] = start, end
	}
	if limit == runtime.Limited && s.opts.MinOffsetsPerTrigger > 0 && s.holdBack(begin, until, len(committed) == 0) {
		return committed, nil
	}
	var most int64 // the offsets the batch may take, 0 for any number
	if limit != runtime.AllAvailable {
		most = s.opts.MaxOffsetsPerTrigger
	}
	if records > 0 && (most == 0 || records < most) {
		most = records
	}
	if most > 0 {
		until = rateLimit(most, begin, until)
	}
	s.planned(until)
	next := maps.Clone(from)
	if next == nil {
		next = make(offsets)
	}
	for _, tp := range gone {
		// Forgotten: made again, it is a partition new to the query,
		// read from its earliest offset (Spark's end offsets leave a
		// deleted partition out too).
		delete(next, tp)
	}
	maps.Copy(next, until)
	if len(committed) > 0 && maps.Equal(next, from) {
		return committed, nil
	}
	end, err := s.encode(next)
	if err != nil {
		return nil, err
	}
	if len(committed) == 0 || len(fresh) > 0 {
		starting := from
		if len(committed) > 0 {
			starting = make(offsets, len(fresh))
			for _, tp := range fresh {
				starting[tp] = begin[tp]
			}
		}
		s.mu.Lock()
		if len(s.plannedStarts) == maxPlannedStarts {
			s.plannedStarts = s.plannedStarts[1:]
		}
		s.plannedStarts = append(s.plannedStarts, plannedStart{start: string(committed), end: string(end), starting: starting})
		s.mu.Unlock()
	}
	return end, nil
}

// PlannedStart returns the offsets Next planned the batch from start to
// end to start at that start does not give (see plannedStarts): a new
// query's starting offsets, or those of partitions new to the query; nil
// when there are none, or Next did not plan the batch in this process.
// The runtime keeps them in the batch's plan (runtime.StartPlanner).
func (s *TopicSource) PlannedStart(start, end json.RawMessage) json.RawMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.plannedStarts) - 1; i >= 0; i-- {
		if b := s.plannedStarts[i]; b.start == string(start) && b.end == string(end) {
			raw, err := s.encode(b.starting)
			if err != nil {
				return nil
			}
			return raw
		}
	}
	return nil
}

// RestoreStart hands back what PlannedStart returned for the batch from
// start to end, planned by an earlier run, before it is read again: it is
// read from those offsets, not from the starting offsets resolved again
// (a "latest" or a timestamp would give others by now, records deleted
// since would go unreported as lost, and a partition added since would
// not be among those AtOffsets names).
func (s *TopicSource) RestoreStart(start, end, planned json.RawMessage) error {
	starting, err := s.decode(planned, "planned start")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.plannedStarts) == maxPlannedStarts {
		s.plannedStarts = s.plannedStarts[1:]
	}
	s.plannedStarts = append(s.plannedStarts, plannedStart{start: string(start), end: string(end), starting: starting})
	return nil
}

// endingsOf returns the ends of the partitions of available that
// Options.EndingOffsets gives (none without it), resolving those of
// partitions it has not resolved before: available's end, a given
// offset, or the first offset at or after a timestamp, which a partition
// without such a record yet does not have (it is read on, and resolved
// again at the next batch).
func (s *TopicSource) endingsOf(ctx context.Context, client *kgo.Client, available offsets) (offsets, error) {
	e := s.opts.EndingOffsets
	if e.kind == endNone {
		return nil, nil
	}
	s.mu.Lock()
	known := maps.Clone(s.endings)
	s.mu.Unlock()
	if known == nil {
		known = offsets{}
	}
	var todo []topicPartition
	for _, tp := range available.sorted() {
		if _, ok := known[tp]; !ok {
			todo = append(todo, tp)
		}
	}
	if len(todo) == 0 {
		return known, nil
	}
	resolved := make(offsets, len(todo))
	switch e.kind {
	case endLatest:
		for _, tp := range todo {
			resolved[tp] = available[tp]
		}
	case endOffsets:
		for _, tp := range todo {
			resolved[tp] = available[tp]
			if off, ok := e.offsets[tp.topic][tp.partition]; ok && off != LatestOffset {
				resolved[tp] = off
			}
		}
	case endTimestamp, endTimestamps:
		byTime := map[int64][]topicPartition{}
		for _, tp := range todo {
			at := e.at
			if e.kind == endTimestamps {
				var named bool
				if at, named = e.times[tp.topic][tp.partition]; !named {
					resolved[tp] = available[tp] // as EndAtOffsets
					continue
				}
			}
			byTime[at.UnixMilli()] = append(byTime[at.UnixMilli()], tp)
		}
		for _, ms := range slices.Sorted(maps.Keys(byTime)) {
			listed, err := s.listOffsets(ctx, client, byTime[ms], ms)
			if err != nil {
				return nil, err
			}
			for _, tp := range byTime[ms] {
				// At or past the listed end: no record at or after the
				// time yet.
				if off, ok := listed[tp]; ok && off < available[tp] {
					resolved[tp] = off
				}
			}
		}
	}
	if len(resolved) > 0 {
		slog.Info("streamgen: kafka source: ending offsets", "source", s.name, "endingOffsets", e.String(), "offsets", offsetsText(resolved))
	}
	s.mu.Lock()
	if s.endings == nil {
		s.endings = offsets{}
	}
	maps.Copy(s.endings, resolved)
	s.mu.Unlock()
	maps.Copy(known, resolved)
	return known, nil
}

// gone returns the partitions of from, the offsets a query has
// committed, that available, the offsets Available listed, leaves out and
// the last listing did not find at all, of topics the source still reads:
// their topic was deleted (Spark: "... are gone. Some data may have been
// missed."). A partition without a leader, or of a topic being made, is
// not gone; a new query (committed empty) has none.
func (s *TopicSource) gone(committed json.RawMessage, from, available offsets) []topicPartition {
	if len(committed) == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out, dropped []topicPartition
	for _, tp := range from.sorted() {
		if !s.opts.subscribes(tp.topic, s.pattern) || len(s.opts.Partitions) > 0 && !slices.Contains(s.opts.Partitions[tp.topic], tp.partition) {
			if !s.dropped[tp] {
				dropped = append(dropped, tp)
			}
			continue
		}
		if _, ok := available[tp]; ok || slices.Contains(s.listed, tp) || slices.Contains(s.leaderless, tp) || slices.Contains(s.making, tp.topic) {
			continue
		}
		out = append(out, tp)
	}
	if len(dropped) > 0 {
		// Offsets the source's name kept (Options.Name) of partitions its
		// subscription no longer names: a change of subscription, which
		// Spark reports as the partitions gone. They are kept, unread,
		// and said once.
		if s.dropped == nil {
			s.dropped = map[topicPartition]bool{}
		}
		names := make([]string, len(dropped))
		for i, tp := range dropped {
			s.dropped[tp] = true
			names[i] = tp.String()
		}
		slog.Warn("streamgen: kafka source: the checkpoint holds offsets of partitions the source no longer reads (its subscription changed): they are kept, and not read",
			"source", s.name, "partitions", strings.Join(names, ","))
	}
	return out
}

// leftOut returns the partitions the last listing found (with a leader
// or without) that available, the offsets Available listed, leaves out.
func (s *TopicSource) leftOut(available offsets) []topicPartition {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []topicPartition
	for _, tp := range append(slices.Clone(s.listed), s.leaderless...) {
		if _, ok := available[tp]; !ok {
			out = append(out, tp)
		}
	}
	return out
}

// Read calls fn for each record after start up to end (see TopicSource):
// Data is the message's value and Meta the *Message, valid during the
// call.
func (s *TopicSource) Read(ctx context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	client, err := s.clientFor()
	if err != nil {
		return err
	}
	to, err := s.decode(end, "end")
	if err != nil {
		return err
	}
	// The offsets Next planned the batch from, if this process planned
	// it: a new query's starting offsets, or where partitions new to the
	// query start.
	var planned offsets
	s.mu.Lock()
	for _, b := range s.plannedStarts {
		if b.start == string(start) && b.end == string(end) {
			planned = b.starting
		}
	}
	s.mu.Unlock()
	var from offsets
	if len(start) == 0 {
		// A new query's first batch, from the offsets Next planned it
		// from; or a read outside a query (runtime.ReadAll), from the
		// starting offsets as they are now.
		if from = planned; from == nil {
			if from, err = s.startingOffsets(ctx, client, to); err != nil {
				return err
			}
		}
	} else if from, err = s.decode(start, "start"); err != nil {
		return err
	}
	var m Message
	for _, tp := range to.sorted() {
		first, ok := from[tp]
		if !ok {
			// New to the query: where Next planned it from, or (a batch
			// replayed by another process) its beginning, records deleted
			// since reported as Next reported them.
			first = planned[tp]
		}
		if first >= to[tp] {
			continue
		}
		partition := tp.String()
		err := s.fetchRange(ctx, client, tp, first, to[tp], s.dataLoss, func(r *kgo.Record) error {
			m = messageOf(r)
			return fn(runtime.Record{Partition: partition, Data: r.Value, Position: m.position(), Meta: &m})
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// startingOffsets resolves StartingOffsets for the partitions of
// available.
func (s *TopicSource) startingOffsets(ctx context.Context, client *kgo.Client, available offsets) (offsets, error) {
	parts := available.sorted()
	var (
		starting offsets
		noMatch  []topicPartition
		err      error
	)
	so := s.opts.StartingOffsets
	switch so.kind {
	case startDefault, startLatest:
		starting, err = s.listOffsets(ctx, client, parts, latestTimestamp)
	case startEarliest:
		starting, err = s.listOffsets(ctx, client, parts, earliestTimestamp)
	case startTimestamp:
		starting, err = s.timestampOffsets(ctx, client, parts, so.at.UnixMilli(), &noMatch)
	case startOffsets:
		starting, err = s.explicitOffsets(ctx, client, parts, so.offsets)
	case startTimestamps:
		starting, err = s.offsetsAtTimes(ctx, client, parts, so.times, &noMatch)
	}
	if err != nil {
		return nil, err
	}
	if len(noMatch) > 0 && so.failWithoutMatch {
		slices.SortFunc(noMatch, compareTopicPartitions)
		names := make([]string, len(noMatch))
		for i, tp := range noMatch {
			names[i] = tp.String()
		}
		return nil, fmt.Errorf("streamgen: kafka source %q: StartingOffsets %s: no record at or after the time given in %s (Spark's startingOffsetsByTimestampStrategy \"error\"; without FailWithoutMatch such a partition starts at its end)",
			s.name, so, strings.Join(names, ", "))
	}
	slog.Info("streamgen: kafka source: starting offsets", "source", s.name, "startingOffsets", s.opts.StartingOffsets.String(), "offsets", offsetsText(starting))
	return starting, nil
}

// explicitOffsets resolves AtOffsets for parts: the given offsets and
// the ends they name. Every partition of parts must be given, and, for a
// source that subscribes to topics, every partition given must be one of
// parts, as Spark asks of startingOffsets. An offset past a partition's
// end is data loss.
func (s *TopicSource) explicitOffsets(ctx context.Context, client *kgo.Client, parts []topicPartition, given map[string]map[int32]int64) (offsets, error) {
	if err := s.checkGiven(parts, given, "AtOffsets"); err != nil {
		return nil, err
	}
	latest, err := s.listOffsets(ctx, client, parts, latestTimestamp)
	if err != nil {
		return nil, err
	}
	var needEarliest []topicPartition
	starting := make(offsets, len(parts))
	for _, tp := range parts {
		off, ok := given[tp.topic][tp.partition]
		switch {
		case !ok || off == LatestOffset: // !ok: none, checkGiven saw to it
			starting[tp] = latest[tp]
		case off == EarliestOffset:
			needEarliest = append(needEarliest, tp)
		case off > latest[tp]:
			err := s.dataLoss(lostRange{tp: tp, from: off, to: off,
				why: fmt.Sprintf("the starting offset is past the partition's end %d", latest[tp])})
			if err != nil {
				return nil, err
			}
			starting[tp] = latest[tp]
		default:
			starting[tp] = off
		}
	}
	if len(needEarliest) > 0 {
		earliest, err := s.listOffsets(ctx, client, needEarliest, earliestTimestamp)
		if err != nil {
			return nil, err
		}
		maps.Copy(starting, earliest)
	}
	return starting, nil
}

// offsetsAtTimes resolves AtTimestamps for parts: each partition's first
// offset at or after its time. Every partition of parts must be given a
// time, as explicitOffsets asks.
func (s *TopicSource) offsetsAtTimes(ctx context.Context, client *kgo.Client, parts []topicPartition, times map[string]map[int32]time.Time, noMatch *[]topicPartition) (offsets, error) {
	given := make(map[string]map[int32]int64, len(times))
	byTime := map[int64][]topicPartition{}
	for t, ps := range times {
		given[t] = make(map[int32]int64, len(ps))
		for p := range ps {
			given[t][p] = 0
		}
	}
	if err := s.checkGiven(parts, given, "AtTimestamps"); err != nil {
		return nil, err
	}
	for _, tp := range parts {
		ms := times[tp.topic][tp.partition].UnixMilli()
		byTime[ms] = append(byTime[ms], tp)
	}
	starting := make(offsets, len(parts))
	for _, ms := range slices.Sorted(maps.Keys(byTime)) {
		found, err := s.timestampOffsets(ctx, client, byTime[ms], ms, noMatch)
		if err != nil {
			return nil, err
		}
		maps.Copy(starting, found)
	}
	return starting, nil
}

// checkGiven reports the partitions of parts that given leaves out and,
// unless the source reads given Partitions (an App's task reads one of a
// topic's, and may be given them all), those given that are not among
// parts.
func (s *TopicSource) checkGiven(parts []topicPartition, given map[string]map[int32]int64, what string) error {
	var missing, unknown []string
	read := make(map[topicPartition]bool, len(parts))
	for _, tp := range parts {
		read[tp] = true
		if _, ok := given[tp.topic][tp.partition]; !ok {
			missing = append(missing, tp.String())
		}
	}
	if len(s.opts.Partitions) == 0 {
		for _, t := range slices.Sorted(maps.Keys(given)) {
			for _, p := range slices.Sorted(maps.Keys(given[t])) {
				if tp := (topicPartition{topic: t, partition: p}); !read[tp] {
					unknown = append(unknown, tp.String())
				}
			}
		}
	}
	if len(missing) == 0 && len(unknown) == 0 {
		return nil
	}
	var why []string
	if len(missing) > 0 {
		hint := " (give LatestOffset or EarliestOffset where any will do)"
		if what != "AtOffsets" {
			hint = ""
		}
		why = append(why, "no offset for "+strings.Join(missing, ", ")+hint)
	}
	if len(unknown) > 0 {
		why = append(why, "an offset for "+strings.Join(unknown, ", ")+", not among the partitions read")
	}
	var all []string
	for _, tp := range parts {
		all = append(all, tp.String())
	}
	return fmt.Errorf("kafka source %q: StartingOffsets: %s gives %s; it must give every partition read an offset, as Spark's startingOffsets must (the partitions read: %s)",
		s.name, what, strings.Join(why, " and "), strings.Join(all, ", "))
}

// lostRange describes offsets found gone: from up to, not including, to
// (one offset when they are equal), and why.
type lostRange struct {
	tp       topicPartition
	from, to int64
	why      string
}

func (l lostRange) String() string {
	s := fmt.Sprintf("topic %q partition %d: offsets %d to %d are gone: %s", l.tp.topic, l.tp.partition, l.from, l.to, l.why)
	if l.from == l.to {
		s = fmt.Sprintf("topic %q partition %d: offset %d: %s", l.tp.topic, l.tp.partition, l.from, l.why)
	}
	return s
}

// dataLoss reports lost offsets as Options.OnDataLoss says: an error
// wrapping ErrDataLoss, or a warning and nil.
func (s *TopicSource) dataLoss(l lostRange) error {
	if s.opts.OnDataLoss == ContinueOnDataLoss {
		slog.Warn("streamgen: kafka source: data loss; going on as ContinueOnDataLoss says", "source", s.name, "loss", l.String())
		return nil
	}
	return fmt.Errorf("%w: kafka source %q: %s (set OnDataLoss to ContinueOnDataLoss to go on from the earliest offset still there)", ErrDataLoss, s.name, l)
}

func (s *TopicSource) decode(raw json.RawMessage, what string) (offsets, error) {
	o, err := decodeOffsets(raw)
	if err != nil {
		return nil, fmt.Errorf("streamgen: kafka source %q: %s offset %s: %w", s.name, what, raw, err)
	}
	return o, nil
}

func (s *TopicSource) encode(o offsets) (json.RawMessage, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("streamgen: kafka source %q: offset: %w", s.name, err)
	}
	return b, nil
}

// offsetsText is offsets as their JSON, for logs.
func offsetsText(o offsets) string {
	b, _ := json.Marshal(o)
	return string(b)
}

// Lag returns, for each partition of latest, how many offsets position is
// behind it (runtime.LagReporter): Spark's offsets behind latest, which
// count the transaction markers of a transactional input as Kafka's
// consumer lag does. A partition position does not hold yet is behind
// from its beginning.
func (s *TopicSource) Lag(position, latest json.RawMessage) ([]runtime.PartitionLag, error) {
	at, err := s.decode(position, "position")
	if err != nil {
		return nil, err
	}
	ends, err := s.decode(latest, "latest")
	if err != nil {
		return nil, err
	}
	lag := make([]runtime.PartitionLag, 0, len(ends))
	for _, tp := range ends.sorted() {
		l := runtime.PartitionLag{Partition: tp.String(), Position: at[tp], Latest: ends[tp]}
		l.Lag = max(0, l.Latest-l.Position)
		lag = append(lag, l)
	}
	return lag, nil
}
