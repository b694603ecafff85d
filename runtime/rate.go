package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"
)

// RateOptions tune a Rate source. The zero value is the default.
type RateOptions struct {
	// RowsPerSecond is how many rows each second of the clock makes
	// available, at most 1e9. The default is 1.
	RowsPerSecond int
	// Start is the timestamp of row 0. The default is the clock's time at
	// the first call to Available. Either way it is stored in the offset,
	// and a query restarted from a checkpoint continues the sequence of
	// the checkpoint, whatever Start says.
	Start time.Time
	// Partitions is the number of partitions the rows are dealt to. The
	// default is 1.
	Partitions int
	// Clock tells the time, for tests. The default is time.Now.
	Clock func() time.Time
}

// maxRowsPerSecond keeps the arithmetic on row timestamps within int64
// nanoseconds: a row is at most one nanosecond apart from the next.
const maxRowsPerSecond = 1_000_000_000

// rateOffset is the offset of a Rate source: the sequence's start and the
// number of rows up to the offset (rows 0 to Rows-1).
type rateOffset struct {
	Start time.Time `json:"start"`
	Rows  int64     `json:"rows"`
}

// RateSource returns a source that makes up rows at a steady rate, like Spark's
// rate source, for tests, demonstrations and benchmarks. Row N is the JSON
// line
//
//	{"timestamp":"<Start + N/RowsPerSecond seconds, RFC 3339>","value":N}
//
// in partition "rate-<N mod Partitions>", at Position "rate:<N>". A row is
// available once the clock has reached its timestamp, and Read produces the
// same rows for the same offsets, so the source is deterministic given the
// clock. There is no per-batch limit: a batch takes every row available.
//
// A Rate source is safe for concurrent use.
func RateSource(opts RateOptions) Source {
	if opts.RowsPerSecond == 0 {
		opts.RowsPerSecond = 1
	}
	if opts.Partitions == 0 {
		opts.Partitions = 1
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	s := &rateSource{opts: opts}
	// The start is kept in UTC without a monotonic reading, exactly as it
	// reads back from an offset.
	if !opts.Start.IsZero() {
		s.start = opts.Start.UTC()
	}
	return s
}

type rateSource struct {
	opts RateOptions

	mu sync.Mutex
	// start is the timestamp of row 0: Start, or the clock's time at the
	// first Available, or the start of the last committed offset seen,
	// which takes precedence. Zero until known.
	start time.Time
}

func (s *rateSource) Name() string { return "rate" }

func (s *rateSource) validate() error {
	var errs []error
	if s.opts.RowsPerSecond < 0 || s.opts.RowsPerSecond > maxRowsPerSecond {
		errs = append(errs, fmt.Errorf("RowsPerSecond %d is not in [1, %d]", s.opts.RowsPerSecond, maxRowsPerSecond))
	}
	if s.opts.Partitions < 0 {
		errs = append(errs, fmt.Errorf("Partitions %d is negative", s.opts.Partitions))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: rate source: options: %w", err)
	}
	return nil
}

// Available returns the offset of the rows whose timestamp is not after the
// clock's time.
func (s *rateSource) Available(ctx context.Context) (json.RawMessage, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	now := s.opts.Clock()
	s.mu.Lock()
	if s.start.IsZero() {
		s.start = now.UTC()
	}
	start := s.start
	s.mu.Unlock()
	return encodeRateOffset(rateOffset{Start: start, Rows: s.rowsUntil(start, now)})
}

// Next returns upTo, or committed when upTo has no more rows.
//
// A restarted source learns its start from committed. The upTo of its first
// Available may have been counted from another start (the clock's time at
// that call): its rows are then recounted from committed's start, up to the
// timestamp of its last row, which the clock had reached.
func (s *rateSource) Next(ctx context.Context, committed, upTo json.RawMessage, _ ReadLimit) (json.RawMessage, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	limit, err := decodeRateOffset(upTo, "upTo")
	if err != nil {
		return nil, err
	}
	if len(committed) == 0 {
		if limit.Rows == 0 {
			return committed, nil
		}
		return upTo, nil
	}
	done, err := decodeRateOffset(committed, "committed")
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.start = done.Start
	s.mu.Unlock()
	if !limit.Start.Equal(done.Start) {
		rows := int64(0)
		if limit.Rows > 0 {
			last := s.timestamp(limit.Start, limit.Rows-1)
			rows = s.rowsUntil(done.Start, last)
		}
		limit = rateOffset{Start: done.Start, Rows: rows}
	}
	if limit.Rows <= done.Rows {
		return committed, nil
	}
	return encodeRateOffset(limit)
}

// Read produces the rows from start's count up to end's.
func (s *rateSource) Read(ctx context.Context, start, end json.RawMessage, fn func(Record) error) error {
	if err := s.validate(); err != nil {
		return err
	}
	to, err := decodeRateOffset(end, "end")
	if err != nil {
		return err
	}
	from := rateOffset{Start: to.Start}
	if len(start) > 0 {
		if from, err = decodeRateOffset(start, "start"); err != nil {
			return err
		}
		if !from.Start.Equal(to.Start) {
			return fmt.Errorf("streamgen: rate source: offsets of different sequences (start %v, end %v)", from.Start, to.Start)
		}
	}
	if from.Rows > to.Rows {
		return fmt.Errorf("streamgen: rate source: start offset (%d rows) is after end offset (%d rows)", from.Rows, to.Rows)
	}
	partitions := make([]string, s.opts.Partitions)
	for i := range partitions {
		partitions[i] = "rate-" + strconv.Itoa(i)
	}
	var line []byte
	for value := from.Rows; value < to.Rows; value++ {
		if value%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("streamgen: rate source: %w", err)
			}
		}
		line = append(line[:0], `{"timestamp":"`...)
		line = s.timestamp(to.Start, value).AppendFormat(line, time.RFC3339Nano)
		line = append(line, `","value":`...)
		line = strconv.AppendInt(line, value, 10)
		line = append(line, '}')
		rec := Record{
			Partition: partitions[value%int64(s.opts.Partitions)],
			Data:      line,
			Position:  "rate:" + strconv.FormatInt(value, 10),
		}
		if err := fn(rec); err != nil {
			return err
		}
	}
	return nil
}

// timestamp returns the timestamp of row value: start plus value/rate
// seconds, rounded down to the nanosecond. The division is done in whole
// seconds and a remainder so that no product leaves int64.
func (s *rateSource) timestamp(start time.Time, value int64) time.Time {
	rate := int64(s.opts.RowsPerSecond)
	seconds, rest := value/rate, value%rate
	return start.Add(time.Duration(seconds)*time.Second + time.Duration(rest*int64(time.Second)/rate))
}

// rowsUntil counts the rows whose timestamp is not after now: the values v
// with floor(v·1e9/rate) <= e, e being the nanoseconds from start to now,
// that is v·1e9 < (e+1)·rate. Writing e+1 as q seconds and r nanoseconds,
// their number is q·rate + ceil(r·rate/1e9).
func (s *rateSource) rowsUntil(start, now time.Time) int64 {
	elapsed := now.Sub(start)
	if elapsed < 0 {
		return 0
	}
	if elapsed == math.MaxInt64 { // Sub saturated; keep e+1 in range
		elapsed--
	}
	rate := int64(s.opts.RowsPerSecond)
	q, r := int64(elapsed+1)/int64(time.Second), int64(elapsed+1)%int64(time.Second)
	return q*rate + (r*rate+int64(time.Second)-1)/int64(time.Second)
}

func encodeRateOffset(o rateOffset) (json.RawMessage, error) {
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("streamgen: rate source: offset: %w", err)
	}
	return b, nil
}

func decodeRateOffset(b json.RawMessage, what string) (rateOffset, error) {
	var o rateOffset
	if err := json.Unmarshal(b, &o); err != nil {
		return o, fmt.Errorf("streamgen: rate source: %s offset: %w", what, err)
	}
	if o.Rows < 0 {
		return o, fmt.Errorf("streamgen: rate source: %s offset: negative row count %d", what, o.Rows)
	}
	return o, nil
}
