package runtime

import (
	"os"
	"time"
)

// CheckMeta exposes the checkpoint check to the tests of package
// runtime_test: it returns the checkpoint's query id and the warnings.
func (s *Store) CheckMeta(m Meta, allowChanges bool) (id string, warnings []string, err error) {
	return s.CheckMetaAllowing(m, allowChanges, false)
}

// CheckMetaAllowing is CheckMeta, with the loss of renamed-looking fields
// allowed or not.
func (s *Store) CheckMetaAllowing(m Meta, allowChanges, allowFieldLoss bool) (id string, warnings []string, err error) {
	m.Format = FormatVersion
	if m.ID == "" {
		m.ID = "new-id"
	}
	m, err = s.checkMeta(m, metaChanges{pipeline: allowChanges, fieldLoss: allowFieldLoss}, func(w string) { warnings = append(warnings, w) })
	return m.ID, warnings, err
}

// HoldsSpareBatch reports whether the store keeps a committed batch's
// memory for the next: it does after committing a batch in key order.
func HoldsSpareBatch(s *Store) bool { return s.spare.Load() != nil }

// RegisterOneShot, DeleteFired and DropKeyIndex expose the one-shot
// timers' writes (OperatorInfo.OneShotTimers) to the tests.
func (b *StateBatch) RegisterOneShot(s Scope, key []byte, at time.Time) error {
	return b.setByExpiry(s, key, at)
}
func (b *StateBatch) DeleteFired(s Scope, threshold time.Time) error {
	return b.deleteFired(s, threshold, nil)
}
func (b *StateBatch) DropKeyIndex(s Scope) error { return b.dropKeyIndex(s) }

// FireTimers fires s's timers due below threshold as a batch does:
// each deleted as its handler deletes it, then the entries by expiry
// read deleted in one range (TimerCursor.deleteRead). It returns how
// many fired.
func (b *StateBatch) FireTimers(s Scope, threshold time.Time) (int, error) {
	from := b.timerWrites()
	cursor := b.DueTimers(s, threshold)
	n := 0
	for {
		due, err := cursor.Next()
		if err != nil {
			return n, err
		}
		if len(due) == 0 {
			return n, cursor.deleteRead(from)
		}
		for _, d := range due {
			if err := b.DeleteTimer(s, d.Key, d.At); err != nil {
				return n, err
			}
			n++
		}
	}
}

// FailOpens makes the files sources' opens of files fail with the error
// fail returns for their path (nil: opened), until the test ends.
func FailOpens(t interface{ Cleanup(func()) }, fail func(path string) error) {
	old := openFile
	openFile = func(path string, flag int, perm os.FileMode) (*os.File, error) {
		if err := fail(path); err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		return old(path, flag, perm)
	}
	t.Cleanup(func() { openFile = old })
}

// SetFlushTimers sets how many event-time timers a batch flushing the end
// of the input fires, for the rest of the test.
func SetFlushTimers(t interface{ Cleanup(func()) }, n int) {
	old := flushTimers
	flushTimers = n
	t.Cleanup(func() { flushTimers = old })
}

// SetKeepDecompressed sets the most of a compressed file's content that
// the files source keeps from its check, and returns a function that
// puts it back.
func SetKeepDecompressed(n int) func() {
	old := keepDecompressed
	keepDecompressed = n
	return func() { keepDecompressed = old }
}

// SetLineBuffer sets the size of the buffer the files source reads a
// file's lines through (at least 16), and returns a function that puts
// it back.
func SetLineBuffer(n int) func() {
	old := lineBuffer
	lineBuffer = n
	return func() { lineBuffer = old }
}

// MarkedManifest returns the MANIFEST the commit file marks and the size
// it marks, after waiting for Pebble's flushes and compactions to end.
func (s *Store) MarkedManifest() (name string, size int64) {
	s.work.waitIdle()
	s.recording.Lock()
	defer s.recording.Unlock()
	if s.mark == nil {
		return "", 0
	}
	return s.mark.Name, s.mark.Size
}

// Flush flushes the store's memtables to tables and waits for it.
func (s *Store) Flush() error { return s.db.Flush() }
