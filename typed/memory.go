package typed

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// MemoryStream is an in-memory source of typed rows for programs and
// tests, like Spark's MemoryStream: rows added with Add are read by the
// next batches, in order. The offset is the number of rows read, so a
// query restarted on the same checkpoint and the same MemoryStream goes on
// where it stopped. Safe for concurrent use.
type MemoryStream[T any] struct {
	name string
	mu   sync.Mutex
	rows []T
	// limit caps the rows per batch (0: no cap).
	limit int
}

// NewMemoryStream returns an empty stream named name. maxRowsPerBatch
// caps the rows one batch reads; 0 means no cap.
func NewMemoryStream[T any](name string, maxRowsPerBatch int) *MemoryStream[T] {
	return &MemoryStream[T]{name: name, limit: maxRowsPerBatch}
}

// Add appends rows.
func (m *MemoryStream[T]) Add(rows ...T) {
	m.mu.Lock()
	m.rows = append(m.rows, rows...)
	m.mu.Unlock()
}

func (m *MemoryStream[T]) offset(raw json.RawMessage) int {
	n, _ := strconv.Atoi(string(raw))
	return n
}

// Name identifies the stream.
func (m *MemoryStream[T]) Name() string { return "memory:" + m.name }

// Available returns the offset after the last row added.
func (m *MemoryStream[T]) Available(context.Context) (json.RawMessage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return json.RawMessage(strconv.Itoa(len(m.rows))), nil
}

// Next returns the end of the next batch.
func (m *MemoryStream[T]) Next(ctx context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit) (json.RawMessage, error) {
	return m.NextCapped(ctx, committed, upTo, limit, 0)
}

// NextCapped returns the end of the next batch, of at most records rows
// (0: no such cap) as well (runtime.RecordCapper).
func (m *MemoryStream[T]) NextCapped(_ context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit, records int64) (json.RawMessage, error) {
	from, to := m.offset(committed), m.offset(upTo)
	if limit != runtime.AllAvailable && m.limit > 0 && to-from > m.limit {
		to = from + m.limit
	}
	if records > 0 && int64(to-from) > records {
		to = from + int(records)
	}
	if to <= from {
		return committed, nil
	}
	return json.RawMessage(strconv.Itoa(to)), nil
}

// Lag says how many rows position is behind latest (runtime.LagReporter):
// one partition, "memory".
func (m *MemoryStream[T]) Lag(position, latest json.RawMessage) ([]runtime.PartitionLag, error) {
	at, end := int64(m.offset(position)), int64(m.offset(latest))
	return []runtime.PartitionLag{{Partition: "memory", Position: at, Latest: end, Lag: max(0, end-at)}}, nil
}

// memorySource is a MemoryStream as a runtime.Source for the query loop,
// which only plans offsets with it: FromMemory reads the typed rows.
type memorySource[T any] struct{ *MemoryStream[T] }

func (memorySource[T]) Read(context.Context, json.RawMessage, json.RawMessage, func(runtime.Record) error) error {
	return nil
}

// FromMemory reads the rows of m, all in partition "memory".
func FromMemory[T any](m *MemoryStream[T]) Stream[T] {
	src := memorySource[T]{m}
	id := new(byte)
	return Stream[T]{p: &plan{}, attach: func(c *compiler, emit func(*T)) {
		f, registered := shared(c, id, emit)
		if registered {
			return
		}
		emit, f.asRead = f.emit, true
		input := len(c.plan.Inputs)
		c.plan.Inputs = append(c.plan.Inputs, runtime.Input{Source: src,
			Read: func(ctx context.Context, b *runtime.Batch, start, end json.RawMessage) (err error) {
				defer c.catch(&err)
				c.begin(ctx, b)
				from, to := m.offset(start), m.offset(end)
				m.mu.Lock()
				rows := m.rows[from:min(to, len(m.rows))]
				m.mu.Unlock()
				c.input, c.partition, c.rowBytes, c.eventTime = input, "memory", 0, time.Time{}
				c.source, c.hasRecord = m.Name(), false
				if len(rows) > 0 {
					b.MarkActive(input, "memory")
				}
				b.AddInputRows(input, int64(len(rows)))
				// The rows are handed over in place: stages read them and
				// copy what they keep, and rows added later never move
				// these.
				if len(f.emits) == 1 { // f.emit, a call fewer a row
					emit := f.emits[0]
					for i := range rows {
						emit(&rows[i])
					}
					return nil
				}
				for i := range rows {
					emit(&rows[i])
				}
				return nil
			}})
	}}
}
