package runtime

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// keptReports is how many of its latest progress reports a checkpoint
// keeps, for tools that read it without the query (streamgen inspect).
const keptReports = 20

// reportKey is the key of batch id's progress report: reportPrefix and
// the id, big-endian, so that the reports are in batch order.
func reportKey(id int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{reportPrefix}, uint64(id))
}

// keepReport stores a committed batch's progress report, and drops the
// reports more than keptReports batches older. It is written after the
// batch's commit, without waiting for a sync: the next commit's sync, or
// Close, makes it durable, and a crash may lose it, which loses nothing
// but the report. A storage fault is the store's failure, which ends the
// query.
func (s *Store) keepReport(r QueryProgress) error {
	if err := s.Err(); err != nil || r.BatchID < 0 {
		return err
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("streamgen: encode the progress report of batch %d: %w", r.BatchID, err)
	}
	b := s.db.NewBatch()
	defer s.closeBatch(b)
	if err := b.Set(reportKey(r.BatchID), v, nil); err != nil {
		return fmt.Errorf("streamgen: keep the progress report of batch %d: %w", r.BatchID, err)
	}
	if old := r.BatchID - keptReports; old >= 0 {
		// The first report of a store drops every older one with a range
		// deletion; the next ones each drop the one report that falls out
		// with a point deletion: a range deletion a batch would pile up
		// in the memtable, and every read after a new one fragments all
		// of them again.
		var err error
		if s.reportsPruned.Load() && s.lastReport.Load() == r.BatchID-1 {
			err = b.Delete(reportKey(old), nil)
		} else {
			err = b.DeleteRange(reportKey(0), reportKey(old+1), nil)
		}
		if err != nil {
			return fmt.Errorf("streamgen: keep the progress report of batch %d: %w", r.BatchID, err)
		}
	}
	if err := s.write(fmt.Sprintf("keep the progress report of batch %d", r.BatchID), func() error { return s.db.Apply(b, pebble.NoSync) }); err != nil {
		return err
	}
	if r.BatchID >= keptReports {
		s.reportsPruned.Store(true)
	}
	s.lastReport.Store(r.BatchID)
	return s.Err()
}

// RecentProgress returns the progress reports the checkpoint keeps of its
// latest batches (at most 20), oldest first, as the query's RecentProgress
// gave them.
func (c *CheckpointReader) RecentProgress() ([]QueryProgress, error) {
	it, err := c.r.NewIter(&pebble.IterOptions{LowerBound: []byte{reportPrefix}, UpperBound: []byte{reportPrefix + 1}})
	if err != nil {
		return nil, c.s.fail(fmt.Errorf("read progress reports: %w", err))
	}
	var out []QueryProgress
	var errs []error
	for valid := it.First(); valid; valid = it.Next() {
		var r QueryProgress
		if err := json.Unmarshal(it.Value(), &r); err != nil {
			errs = append(errs, fmt.Errorf("streamgen: a progress report in the checkpoint is corrupt: %w", err))
			continue
		}
		out = append(out, r)
	}
	if err := it.Close(); err != nil {
		return out, c.s.fail(fmt.Errorf("read progress reports: %w", err))
	}
	return out, errors.Join(errs...)
}
