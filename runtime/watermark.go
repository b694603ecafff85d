package runtime

import (
	"strconv"
	"strings"
	"time"
)

// The query's event-time watermark follows Spark's rules exactly:
//
//   - A plan declares its watermarks (Plan.Watermarks), each one input of
//     the query's watermark (Spark's EventTimeWatermarkExec: a
//     WithWatermark). A watermark's own mark is the least, over the source
//     partitions whose rows passed through it and that are not idle, of
//     the largest event time seen less the delay; a watermark none of
//     whose rows has come yet counts as the epoch (Spark's 0), and one all
//     of whose partitions are idle is left out.
//   - The query's watermark combines the marks by the policy (the least by
//     default, as Spark's multipleWatermarkPolicy "min"; the greatest with
//     MaxWatermark), and only rises: the watermark of a batch is the
//     greatest of the one before, the combined marks and the epoch. So
//     it starts at the epoch in the first batch, and a delay longer than
//     the event times seen keeps it there rather than below it.
//   - A batch's watermark is computed from the batches before it (its own
//     rows move the next batch's).
//   - At a restart the query's watermark is kept (Spark restores its
//     global watermark, from the commit log's nextBatchWatermarkMs), and
//     the marks of each watermark start again from the rows that come
//     after it: a watermark that has had no rows since the restart counts
//     as the epoch, as Spark's, so holds the query's at the restored
//     value until its rows come, and a partition's mark is made of its
//     rows since. Under the default PartitionWatermarkPolicy (the least
//     over the partitions), a partition with no rows since the restart
//     keeps, in the least, the mark the checkpoint has for it, once its
//     watermark has rows: a partition behind the others holds the mark
//     as it did before the restart, where it would otherwise be left out
//     and its rows taken for late ones. (Spark keeps no partition's mark;
//     the marks of sources the pipeline no longer reads are dropped.)

// epoch is the least watermark of a query that has one: Spark's 0.
var epoch = time.Unix(0, 0).UTC()

// WatermarkPolicy is how a query with several watermarks combines them
// into its own, as Spark's spark.sql.streaming.multipleWatermarkPolicy.
type WatermarkPolicy int

const (
	// MinWatermark takes the least of the watermarks: no input's rows are
	// late until every input's event time has passed them (the default,
	// Spark's "min").
	MinWatermark WatermarkPolicy = iota
	// MaxWatermark takes the greatest: the fastest input moves the
	// query's watermark, and the slower ones' rows may be late (Spark's
	// "max").
	MaxWatermark
)

// String names the policy as Spark's configuration does.
func (p WatermarkPolicy) String() string {
	if p == MaxWatermark {
		return "max"
	}
	return "min"
}

// MultipleWatermarkPolicy sets how a query with several watermarks (the
// inputs of a Union or of a join, each with its own WithWatermark)
// combines them: MinWatermark, the default, or MaxWatermark. A checkpoint
// keeps the policy of the start that created it: a later start on it
// combines the watermarks by that one, and logs a warning if it asked for
// another, as Spark keeps its policy in a checkpoint's offset log.
func MultipleWatermarkPolicy(p WatermarkPolicy) Option {
	return optionFunc(func(c *config) { c.watermarkPolicy, c.watermarkPolicySet = p, true })
}

// PartitionWatermarkPolicy sets how each WithWatermark's input combines
// the marks of its source's partitions (a Kafka source's): MinWatermark,
// the default, takes their least, as Flink does, so that a partition
// behind the others (a consumer lagging, a producer whose clock is
// late) does not have its rows taken for late ones; MaxWatermark takes
// the greatest, Spark's rule (EventTimeWatermarkExec takes the largest
// event time of all the input's rows, whichever partition they come
// from), under which the busiest partition moves the watermark.
// Partitions idle past IdleTimeout are left out either way.
func PartitionWatermarkPolicy(p WatermarkPolicy) Option {
	return optionFunc(func(c *config) { c.partitionWatermarkPolicy = p })
}

// watermarkKey names a partition of a source under one of the plan's
// watermarks in the committed progress: the watermark's number, then the
// partition's key (see partitionKey).
func watermarkKey(mark int, source, partition string) string {
	return strconv.Itoa(mark) + "#" + partitionKey(source, partition)
}

// LastActiveOf returns the processing time the partition of key, a key
// of PartitionWatermarks ("0#source#partition"), last had data: LastActive
// keeps it by the partition alone, for every watermark the partition has.
func (p *Progress) LastActiveOf(key string) (time.Time, bool) {
	_, part := splitWatermarkKey(key)
	t, ok := p.LastActive[part]
	return t, ok
}

// splitWatermarkKey returns the watermark's number and the partition's key
// of a key made by watermarkKey. A key of a checkpoint written before
// watermarks were numbered is the partition's key alone: watermark 0's.
func splitWatermarkKey(key string) (mark int, partition string) {
	if n, rest, ok := strings.Cut(key, "#"); ok {
		if m, err := strconv.Atoi(n); err == nil && m >= 0 {
			return m, rest
		}
	}
	return 0, key
}

// nextWatermark computes the watermark of the batch after the committed
// progress p, for a plan with marks watermarks (at least one), under the
// policy, each mark's partitions combined under partitions; idle reports
// a partition (by partitionKey) left out for having had no data for too
// long.
func nextWatermark(p Progress, marks int, policy, partitions WatermarkPolicy, idle func(partition string) bool) time.Time {
	const (
		noRows = iota
		live
		allIdle
	)
	lows := make([]time.Time, marks)
	states := make([]uint8, marks)
	// kept are, by watermark, the least of the restored marks of
	// partitions without rows since the restart (see the rules above).
	var kept []time.Time
	for key, w := range p.PartitionWatermarks {
		mark, part := splitWatermarkKey(key)
		if mark >= marks {
			continue // a watermark the pipeline no longer has
		}
		if p.RestoredMarks[key] {
			if partitions != MaxWatermark && (idle == nil || !idle(part)) {
				if kept == nil {
					kept = make([]time.Time, marks)
				}
				if kept[mark].IsZero() || w.Before(kept[mark]) {
					kept[mark] = w
				}
			}
			continue
		}
		if idle != nil && idle(part) {
			if states[mark] == noRows {
				states[mark] = allIdle
			}
			continue
		}
		if states[mark] != live || (partitions == MaxWatermark && w.After(lows[mark])) || (partitions != MaxWatermark && w.Before(lows[mark])) {
			lows[mark] = w
		}
		states[mark] = live
	}
	var chosen time.Time
	found := false
	for mark, low := range lows {
		switch states[mark] {
		case allIdle:
			continue
		case noRows:
			low = epoch
		case live:
			if kept != nil && !kept[mark].IsZero() && kept[mark].Before(low) {
				low = kept[mark]
			}
		}
		if !found || (policy == MaxWatermark && low.After(chosen)) || (policy != MaxWatermark && low.Before(chosen)) {
			chosen, found = low, true
		}
	}
	w := p.Watermark
	if w.Before(epoch) { // the zero time too: no watermark before
		w = epoch
	}
	if found && chosen.After(w) {
		w = chosen
	}
	return w
}

// watermark computes the watermark in effect for the next batch from the
// committed progress (see nextWatermark); the zero time when the plan has
// none.
func (q *Query) watermark(p Progress, now time.Time) time.Time {
	if q.plan.Watermarks == 0 {
		return time.Time{}
	}
	var idle func(string) bool
	if q.cfg.idleTimeout > 0 {
		idle = func(part string) bool {
			last, ok := p.LastActive[part]
			return ok && now.Sub(last) > q.cfg.idleTimeout
		}
	}
	return nextWatermark(p, q.plan.Watermarks, q.cfg.watermarkPolicy, q.cfg.partitionWatermarkPolicy, idle)
}

// restoredProgress is the committed progress as a query started on it
// continues from: with a watermark, the one its next batch would have
// had (the marks the run that committed it had restored, and had no rows
// for since, held as that run held them: a mark it left out does not
// move the watermark at the next start), and the marks of the partitions
// of the sources it reads, each restored (see the rules above).
func (q *Query) restoredProgress(p Progress, now time.Time) Progress {
	if q.plan.Watermarks == 0 {
		return p
	}
	p.ranWith, p.restored = p.Watermark, true
	p.Watermark = q.watermark(p, now)
	kept := map[string]time.Time{}
	p.RestoredMarks = map[string]bool{}
	for key, w := range p.PartitionWatermarks {
		mark, part := splitWatermarkKey(key)
		for _, in := range q.plan.Inputs {
			if mark < q.plan.Watermarks && strings.HasPrefix(part, partitionKey(in.Source.Name(), "")) {
				kept[key], p.RestoredMarks[key] = w, true
			}
		}
	}
	p.PartitionWatermarks = kept
	return p
}

// watermarkOffsets returns the operators' OutputDelay and, by operator,
// how far behind the query's watermark the operators before it hold the
// one it runs with: the most, over the operators before it with an
// OutputDelay, of the delay and the offset they ran with.
func watermarkOffsets(plan *Plan) (delays, offsets []time.Duration) {
	delays = make([]time.Duration, len(plan.Operators))
	offsets = make([]time.Duration, len(plan.Operators))
	var off time.Duration
	for i, op := range plan.Operators {
		offsets[i] = off
		if d := op.Info().OutputDelay; d > 0 {
			delays[i] = d
			off = max(off, offsets[i]+d)
		}
	}
	return delays, offsets
}

// opWatermark is the watermark operator i runs with where the query's is
// w (see watermarkOffsets): w, or w less its offset but not before the
// epoch, as the batch loop holds it.
func (q *Query) opWatermark(i int, w time.Time) time.Time {
	if i >= len(q.watermarkOffsets) || q.watermarkOffsets[i] == 0 || !w.After(epoch) {
		return w
	}
	if h := w.Add(-q.watermarkOffsets[i]); h.After(epoch) {
		return h
	}
	return epoch
}

// outputDelay is operator i's OutputDelay.
func (q *Query) outputDelay(i int) time.Duration {
	if i < len(q.outputDelays) {
		return q.outputDelays[i]
	}
	return 0
}
