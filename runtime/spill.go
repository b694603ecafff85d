package runtime

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Spill keeps the rows of a batch that do not fit in its memory budget in
// sorted runs on disk, as Spark's external sort does: the operator writes a
// run whenever its rows pass the budget, each run sorted by group and, within
// a group, by arrival; Merge then yields all the rows of all runs in that
// order, so an operator sees the same rows in the same order whatever the
// budget. A run is a file of records
//
//	uvarint(group) uvarint(seq) uvarint(len(row)) row
//
// in a temporary directory, removed by Close. Not safe for concurrent use.
type Spill struct {
	dir  string
	runs []string
	buf  []byte
}

// NewSpill returns a Spill that writes its runs under dir ("" means the
// operating system's temporary directory).
func NewSpill(dir string) *Spill { return &Spill{dir: dir} }

// Runs returns the number of runs written.
func (s *Spill) Runs() int { return len(s.runs) }

// WriteRun writes a run of n rows; row(i) gives the i-th in order of
// (group, seq), appending its encoding to buf.
func (s *Spill) WriteRun(n int, row func(i int, buf []byte) (group int32, seq int64, data []byte, err error)) (err error) {
	f, err := os.CreateTemp(s.dir, "streamgen-spill-*.run")
	if err != nil {
		return fmt.Errorf("streamgen: spill rows: %w", err)
	}
	s.runs = append(s.runs, f.Name())
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("streamgen: spill rows: %w", cerr)
		}
	}()
	w := bufio.NewWriterSize(f, 256<<10)
	var head [3 * binary.MaxVarintLen64]byte
	for i := range n {
		group, seq, data, err := row(i, s.buf[:0])
		if err != nil {
			return fmt.Errorf("streamgen: spill rows: %w", err)
		}
		s.buf = data
		h := binary.AppendUvarint(head[:0], uint64(group))
		h = binary.AppendUvarint(h, uint64(seq))
		h = binary.AppendUvarint(h, uint64(len(data)))
		if _, err := w.Write(h); err != nil {
			return fmt.Errorf("streamgen: spill rows: %w", err)
		}
		if _, err := w.Write(data); err != nil {
			return fmt.Errorf("streamgen: spill rows: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("streamgen: spill rows: %w", err)
	}
	return nil
}

// Close removes the runs.
func (s *Spill) Close() error {
	var errs []error
	for _, name := range s.runs {
		if err := os.Remove(name); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	s.runs = nil
	return errors.Join(errs...)
}

// SpillMerge reads the rows of all runs in order of (group, seq). It is
// not safe for concurrent use.
type SpillMerge struct {
	heap  runHeap
	files []*os.File
	buf   []byte
}

// Merge opens the runs for reading in order. Close the SpillMerge when
// done.
func (s *Spill) Merge() (*SpillMerge, error) {
	m := &SpillMerge{}
	for _, name := range s.runs {
		f, err := os.Open(name)
		if err != nil {
			m.Close()
			return nil, fmt.Errorf("streamgen: read spilled rows: %w", err)
		}
		m.files = append(m.files, f)
		r := &runReader{r: bufio.NewReaderSize(f, 64<<10)}
		ok, err := r.next()
		if err != nil {
			m.Close()
			return nil, err
		}
		if ok {
			m.heap = append(m.heap, r)
		}
	}
	heap.Init(&m.heap)
	return m, nil
}

// Peek returns the group of the next row; ok is false at the end.
func (m *SpillMerge) Peek() (group int32, ok bool) {
	if len(m.heap) == 0 {
		return 0, false
	}
	return m.heap[0].group, true
}

// Next returns the next row, valid until the next call; ok is false at the
// end.
func (m *SpillMerge) Next() (group int32, data []byte, ok bool, err error) {
	if len(m.heap) == 0 {
		return 0, nil, false, nil
	}
	r := m.heap[0]
	group = r.group
	m.buf = append(m.buf[:0], r.data...)
	data = m.buf
	more, err := r.next()
	if err != nil {
		return 0, nil, false, err
	}
	if more {
		heap.Fix(&m.heap, 0)
	} else {
		heap.Pop(&m.heap)
	}
	return group, data, true, nil
}

// Close closes the run files.
func (m *SpillMerge) Close() error {
	var errs []error
	for _, f := range m.files {
		errs = append(errs, f.Close())
	}
	m.files, m.heap = nil, nil
	return errors.Join(errs...)
}

type runReader struct {
	r     *bufio.Reader
	group int32
	seq   int64
	data  []byte
}

func (r *runReader) next() (bool, error) {
	group, err := binary.ReadUvarint(r.r)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("streamgen: read spilled rows: %w", err)
	}
	seq, err := binary.ReadUvarint(r.r)
	if err != nil {
		return false, fmt.Errorf("streamgen: read spilled rows: %w", err)
	}
	n, err := binary.ReadUvarint(r.r)
	if err != nil {
		return false, fmt.Errorf("streamgen: read spilled rows: %w", err)
	}
	if cap(r.data) < int(n) {
		r.data = make([]byte, n)
	}
	r.data = r.data[:n]
	if _, err := io.ReadFull(r.r, r.data); err != nil {
		return false, fmt.Errorf("streamgen: read spilled rows: %w", err)
	}
	r.group, r.seq = int32(group), int64(seq)
	return true, nil
}

type runHeap []*runReader

func (h runHeap) Len() int { return len(h) }
func (h runHeap) Less(i, j int) bool {
	if h[i].group != h[j].group {
		return h[i].group < h[j].group
	}
	return h[i].seq < h[j].seq
}
func (h runHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)   { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	r := old[len(old)-1]
	*h = old[:len(old)-1]
	return r
}
