package kafka

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"strconv"
	"time"
)

// The headers streamgen adds to the records it writes. A sink (Sink, and
// DeadLetterTopic) without transactions cannot take back a batch it
// wrote when the query fails before committing it: the batch runs again,
// under the same batch id, and is written again. These headers let a
// reader recognise the copies: see BatchMark.
const (
	// HeaderWriter is SinkOptions.WriterID (DeadLetterOptions.WriterID),
	// when set.
	HeaderWriter = "streamgen.writer"
	// HeaderBatch is the batch id, in decimal.
	HeaderBatch = "streamgen.batch"
	// HeaderAttempt names one write of a batch: the same for all its
	// records, and later writes sort after earlier ones (see BatchMark).
	HeaderAttempt = "streamgen.attempt"
	// HeaderRow is the row's index in its batch (over all the topics the
	// batch went to), and HeaderRows the number of rows in the batch, in
	// decimal.
	HeaderRow  = "streamgen.row"
	HeaderRows = "streamgen.rows"

	// HeaderError, HeaderSource and HeaderPosition are a dead letter's
	// error, source name and position (see runtime.DeadLetter).
	HeaderError    = "streamgen.error"
	HeaderSource   = "streamgen.source"
	HeaderPosition = "streamgen.position"

	// HeaderTruncated is on a dead letter whose raw bytes were cut to fit
	// the dead-letter topic (its max.message.bytes, or the producer's
	// batch size): the record's value is their beginning, and the header
	// their whole length, in decimal.
	HeaderTruncated = "streamgen.truncated"
)

// BatchMark is what the headers of a record written by streamgen say of
// the write it came from.
//
// A batch may be written more than once (see the headers above), and a
// batch run again after a failure is planned again, so it may hold more
// rows, or other rows, than the write before. A reader that wants each
// batch once keeps, per writer and batch, the rows of the greatest
// Attempt and drops those of the others: the last write of a batch is
// the one whose batch the query committed, or a write still to be
// replaced. Attempt is the time the write started, in Unix nanoseconds
// as 16 hexadecimal digits, then 8 random ones, so attempts compare as
// strings in the order they were written (by the clock of the machine
// that wrote them; a query runs in one place at a time). Rows tells when
// a write is whole: a reader of every topic the batch went to has Rows
// records of it. Readers that see Kafka's records one by one and cannot
// take rows back need the transactional sink (SinkOptions.Transactions).
type BatchMark struct {
	Writer    string
	Batch     int64
	Attempt   string
	Row, Rows int
}

// ReadBatchMark reads the BatchMark of a record from its headers; ok is
// false when they lack one or hold one that does not parse.
func ReadBatchMark(headers []Header) (mark BatchMark, ok bool) {
	found := 0
	for _, h := range headers {
		var err error
		switch h.Key {
		case HeaderWriter:
			mark.Writer = string(h.Value)
		case HeaderBatch:
			mark.Batch, err = strconv.ParseInt(string(h.Value), 10, 64)
			found++
		case HeaderAttempt:
			mark.Attempt = string(h.Value)
			found++
		case HeaderRow:
			mark.Row, err = strconv.Atoi(string(h.Value))
			found++
		case HeaderRows:
			mark.Rows, err = strconv.Atoi(string(h.Value))
			found++
		}
		if err != nil {
			return BatchMark{}, false
		}
	}
	return mark, found == 4
}

// batchHeaders are the headers of row i of a write: the BatchMark.
type batchHeaders struct {
	writer, batch, attempt, rows []byte
}

func newBatchHeaders(writer string, batchID int64, rows int) batchHeaders {
	var attempt [12]byte
	binary.BigEndian.PutUint64(attempt[:8], uint64(time.Now().UnixNano()))
	rand.Read(attempt[8:])
	h := batchHeaders{
		batch:   strconv.AppendInt(nil, batchID, 10),
		attempt: hex.AppendEncode(nil, attempt[:]),
		rows:    strconv.AppendInt(nil, int64(rows), 10),
	}
	if writer != "" {
		h.writer = []byte(writer)
	}
	return h
}

// withRows is h for a write of n rows.
func (h batchHeaders) withRows(n int) batchHeaders {
	h.rows = strconv.AppendInt(nil, int64(n), 10)
	return h
}

// size is the most bytes the headers of a row of a write of rows rows
// take in a record (see recordSize).
func (h batchHeaders) size(rows int) int {
	n := 0
	if h.writer != nil {
		n += 10 + len(HeaderWriter) + len(h.writer)
	}
	digits := len(strconv.Itoa(rows))
	return n + 40 + len(HeaderBatch) + len(h.batch) + len(HeaderAttempt) + len(h.attempt) +
		len(HeaderRow) + digits + len(HeaderRows) + len(h.rows)
}

// append appends the headers of row i to hs.
func (h batchHeaders) append(hs []Header, i int) []Header {
	if h.writer != nil {
		hs = append(hs, Header{Key: HeaderWriter, Value: h.writer})
	}
	return append(hs,
		Header{Key: HeaderBatch, Value: h.batch},
		Header{Key: HeaderAttempt, Value: h.attempt},
		Header{Key: HeaderRow, Value: strconv.AppendInt(nil, int64(i), 10)},
		Header{Key: HeaderRows, Value: h.rows},
	)
}
