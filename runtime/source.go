package runtime

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Source is a replayable input of raw records: given the same offsets it
// reads the same records, which is what lets a restarted query replay the
// batch that was in flight. Offsets are opaque JSON of the source's own
// making, stored in the checkpoint with each committed batch. The query
// names the source in the errors its methods return ("source NAME: ..."),
// so they need not.
//
// The query's loop calls a Source from one goroutine at a time.
type Source interface {
	// Name identifies the source in progress reports and in the
	// checkpoint.
	Name() string
	// Available returns the offset that covers everything available now.
	Available(ctx context.Context) (json.RawMessage, error)
	// Next returns the end offset of the next batch after committed (nil
	// for a new query), going no further than upTo and, unless limit is
	// AllAvailable, than the source's own per-batch maximum (such as a
	// number of files); with Limited only, it may hold a batch back for a
	// minimum. It returns committed itself when there is nothing new, or
	// nothing it lets go yet.
	Next(ctx context.Context, committed, upTo json.RawMessage, limit ReadLimit) (json.RawMessage, error)
	// Read calls fn, in order, for each record after start up to end.
	Read(ctx context.Context, start, end json.RawMessage, fn func(Record) error) error
}

// DataWaiter is implemented by a source that can wait for new data, such
// as a Kafka source's fetch that the broker answers when records arrive.
// A query whose sources all implement it, and that found nothing to do,
// waits on them for up to its poll interval rather than sleeping, so that
// its next batch starts as soon as data arrives; with several inputs it
// waits on all at once and goes on when the first returns.
type DataWaiter interface {
	// WaitForData returns when data after committed (nil for a new query)
	// may have arrived, when d has passed, or when ctx is done. A source
	// that cannot wait, or whose wait fails, waits d (or until ctx is
	// done): the next Available reports what is wrong.
	WaitForData(ctx context.Context, committed json.RawMessage, d time.Duration)
}

// StartChecker is implemented by a source that can tell, before the query
// starts, that it cannot be read (a directory that does not exist), and
// by a sink or a dead-letter sink that can tell it cannot be written
// (options that do not validate): Start calls CheckStart and fails with
// its error, naming the source or sink, rather than at the first batch
// with rows, which may come much later.
type StartChecker interface {
	CheckStart() error
}

// CommitListener is implemented by a source that acts once the batches
// that read it are durable, as Spark's Source.commit (the files source's
// CleanSource moves or deletes the files read). Committed is called on the
// query's goroutine once for each batch committed that read the source
// (its end offset differs from its start), in order, with the offsets
// the batch started and ended at, once the batch is durable: after its
// commit, or with SyncInterval after the sync that made it durable (at
// the query's next turn, or as it stops); never for a batch that failed
// or that a crash may still take back. A batch that is run again after a
// failure is told of once it commits. A process that dies may leave the
// batches whose commit it had not told of yet untold. Committed cannot
// fail the query: it logs what goes wrong.
type CommitListener interface {
	Committed(start, end json.RawMessage)
}

// OffsetDescriber is implemented by a source whose offsets hold more than
// a progress report should show (the files source's processed-file log):
// DescribeOffset gives the offset as the report shows it.
type OffsetDescriber interface {
	DescribeOffset(offset json.RawMessage) string
}

// checkStart calls the CheckStart of the plan's sources and sinks, and of
// the dead-letter sink.
func checkStart(plan *Plan, deadLetters DeadLetterSink) error {
	for _, in := range plan.Inputs {
		if c, ok := in.Source.(StartChecker); ok {
			if err := c.CheckStart(); err != nil {
				return fmt.Errorf("streamgen: source %s: %w", in.Source.Name(), unprefixed(err))
			}
		}
	}
	for _, out := range plan.Outputs {
		if out.CheckStart != nil {
			if err := out.CheckStart(); err != nil {
				return fmt.Errorf("streamgen: sink %s: %w", out.Description, unprefixed(err))
			}
		}
	}
	if c, ok := deadLetters.(StartChecker); ok {
		if err := c.CheckStart(); err != nil {
			return fmt.Errorf("streamgen: dead-letter sink: %w", unprefixed(err))
		}
	}
	return nil
}

// DeadLetterKeeper is implemented by a source that can delete what it has
// read (the files source's CleanSource): a query without a dead-letter
// sink, which logs its dead letters without their bytes, calls
// KeepForDeadLetter with each one's position before the batch commits, and
// the source keeps the record's input (the file) where it is, so that no
// record is lost.
type DeadLetterKeeper interface {
	KeepForDeadLetter(position string)
}

// describeOffset is an offset as a progress report shows it.
func describeOffset(src Source, offset json.RawMessage) string {
	if d, ok := src.(OffsetDescriber); ok && len(offset) > 0 {
		return d.DescribeOffset(offset)
	}
	return string(offset)
}

// Skipper is implemented by a source that skips inputs it cannot read
// (the files source skips named pipes and directories): Skipped returns how
// many its last listing skipped, for the progress report.
type Skipper interface {
	Skipped() int64
}

// InputCounter is implemented by a source whose batches read a known
// number of inputs one after the other, such as the files of a files
// source: the query's Status then says how many of a running batch's
// inputs are done (RunningBatch).
type InputCounter interface {
	// PlannedInputs returns how many inputs the records after start up
	// to end come from.
	PlannedInputs(start, end json.RawMessage) (int64, error)
	// InputOf names the input record r came from; the records of one
	// input come one after the other. It is called for every record, so
	// it should not allocate.
	InputOf(r Record) string
}

// StartPlanner is implemented by a source whose batches may start where
// the committed offsets do not say: a new query's first batch, whose
// committed offsets are nil (a Kafka source's starting offsets, resolved
// against the topic as it is when the batch is planned), or partitions
// new to the query. The loop records what PlannedStart returns in the
// batch's plan, and a later run that runs the batch again after a
// failure hands it back with RestoreStart before the batch is read, so
// that it reads from where its first attempt was planned to start,
// however the input has changed since (Spark keeps a Kafka source's
// initial offsets in its metadata log for this).
type StartPlanner interface {
	// PlannedStart returns what the source needs to read the batch that
	// Next, in this process, planned from start to end as planned; nil
	// when start says it all.
	PlannedStart(start, end json.RawMessage) json.RawMessage
	// RestoreStart hands the source what PlannedStart returned for the
	// batch from start to end, before the batch is read again.
	RestoreStart(start, end, planned json.RawMessage) error
}

// RecordCapper is implemented by a source that can end a batch after a
// number of records (a Kafka topic's offsets, a memory stream's rows):
// under MaxBatchStateBytes, the loop calls NextCapped, Next with records
// (at least 1) as one more limit, in place of Next.
type RecordCapper interface {
	NextCapped(ctx context.Context, committed, upTo json.RawMessage, limit ReadLimit, records int64) (json.RawMessage, error)
}

// ReadLimit says whether a batch honours a source's per-batch limits.
type ReadLimit int

const (
	// Limited: the batch takes no more than the source's per-batch limit.
	Limited ReadLimit = iota
	// AllAvailable: the batch takes everything up to the planned end (the
	// Once trigger, as Spark's).
	AllAvailable
	// LimitedToEnd: the batch takes no more than the source's per-batch
	// limit, and is not held back to gather a minimum (the AvailableNow
	// trigger, which ends once the query has read what was there at its
	// start).
	LimitedToEnd
)

// Record is one raw input record.
type Record struct {
	// Partition names the part of the source the record came from
	// (a Kafka partition; a files source is one partition). Event-time
	// watermarks are kept per partition.
	Partition string
	// Data is the record's bytes: one JSON line for a files source. It is
	// valid only during the callback.
	Data []byte
	// Position says where the record is, for dead letters: "file:line".
	Position string
	// Err, when not nil, makes the record a report of bad input at
	// Position rather than data: a file that cannot be read (Position is
	// then the file's name) or a line too long to take ("name:line"). Data
	// then holds at most a short prefix of the input, to recognise it by,
	// and is not to be decoded. The query sends such a record to its
	// dead-letter sink as one entry, with Err's message and Data as the
	// raw bytes, and goes on.
	Err error
	// Meta is what the source knows of the record beyond its bytes, for
	// a decoder that wants it (typed.FromFunc): a Kafka source gives its
	// *kafka.Message (key, headers, timestamp); a files source its
	// *FileMeta (the file, the line, the key=value directories above it).
	// Valid only during the callback.
	Meta any
}

// DeadLetter is a record that could not be decoded, or whose key or event
// time could not be read, with why; or an output row that a sink's
// destination refuses (see RejectRow), Source then naming the sink and
// Raw holding the row as the sink encoded it.
//
// In JSON (DeadLetterDir's files) Raw is a string when its bytes are
// valid UTF-8, and otherwise, base64-encoded, "rawBase64", so that a
// binary record (a Confluent value with its schema id, a binary codec's)
// is kept byte for byte; UnmarshalJSON reads either.
type DeadLetter struct {
	Source   string `json:"source"`
	Position string `json:"position"`
	Error    string `json:"error"`
	Raw      string `json:"raw"`
	// NoValue is set for a record that had no value at all, a Kafka
	// tombstone (a null value), rather than one of no bytes: Raw is then
	// empty, and kafka.DeadLetterTopic writes a tombstone. In JSON it is
	// "noValue": true, left out when false.
	NoValue bool `json:"noValue,omitempty"`
	// Meta is what the letter's writer knows of the record beyond its
	// bytes, for a dead-letter sink that keeps it: a Kafka sink's
	// refused row gives its *kgo.Record, whose key and headers
	// kafka.DeadLetterTopic writes. It is not written as JSON.
	Meta any `json:"-"`
}

// deadLetterBinary is a DeadLetter whose Raw is not valid UTF-8, as JSON.
type deadLetterBinary struct {
	Source    string `json:"source"`
	Position  string `json:"position"`
	Error     string `json:"error"`
	RawBase64 []byte `json:"rawBase64"`
}

// MarshalJSON writes l as an object of source, position, error, and raw
// or, for bytes that are not valid UTF-8, rawBase64.
func (l DeadLetter) MarshalJSON() ([]byte, error) {
	type plain DeadLetter
	var v any = plain(l)
	if !utf8.ValidString(l.Raw) {
		v = deadLetterBinary{Source: l.Source, Position: l.Position, Error: l.Error, RawBase64: []byte(l.Raw)}
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads a DeadLetter as MarshalJSON writes it: its raw
// bytes from raw or rawBase64.
func (l *DeadLetter) UnmarshalJSON(data []byte) error {
	var v struct {
		Source    string  `json:"source"`
		Position  string  `json:"position"`
		Error     string  `json:"error"`
		Raw       string  `json:"raw"`
		RawBase64 *[]byte `json:"rawBase64"`
		NoValue   bool    `json:"noValue"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*l = DeadLetter{Source: v.Source, Position: v.Position, Error: v.Error, Raw: v.Raw, NoValue: v.NoValue}
	if v.RawBase64 != nil {
		l.Raw = string(*v.RawBase64)
	}
	return nil
}

// DeadLetterSink receives the dead letters of each batch that has some.
// Like any sink it may be given a batch again after a failure, and must
// make that idempotent: the letters given replace those of the earlier
// attempt. The first batch of a start may be such a batch, so it is given
// even with no letters, which then replace the earlier ones.
type DeadLetterSink interface {
	WriteDeadLetters(ctx context.Context, batchID int64, letters []DeadLetter) error
}
