package runtime

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// Reading the checkpoint of a running query from another process
// (streamgen inspect): the query's store watches a directory of requests
// in its checkpoint directory; a reader that finds the checkpoint locked
// drops a request there, and the query answers with a Pebble checkpoint
// of its store (hard links to its tables, and its log), which the reader
// opens read-only and removes when it closes it. The query is never
// stopped, and no file of its store is opened by the reader.

// snapshotDir is the directory of requests in a checkpoint directory.
const snapshotDir = "INSPECT"

// snapshotPoll is how often a running query looks for requests.
const snapshotPoll = 200 * time.Millisecond

// snapshotWait is how long OpenCheckpoint waits for a running query to
// answer.
var snapshotWait = 30 * time.Second

// snapshotKeep is how long an answer is kept that its reader did not
// remove (a reader that died).
const snapshotKeep = 10 * time.Minute

// serveSnapshots answers requests for snapshots of the store, until Close.
// Only a store on the operating system's file system (which another
// process can reach) serves them.
func (s *Store) serveSnapshots() {
	defer s.done.Done()
	t := time.NewTicker(snapshotPoll)
	defer t.Stop()
	dir := filepath.Join(s.dir, snapshotDir)
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue // none asked
		}
		for _, e := range entries {
			name := e.Name()
			id, ok := strings.CutSuffix(name, ".request")
			keep := snapshotKeep // an answer, which its reader may still read
			if ok {
				keep = 2 * snapshotWait // a request, which its reader waits for that long
			}
			if info, err := e.Info(); err == nil && time.Since(info.ModTime()) > keep {
				os.RemoveAll(filepath.Join(dir, name)) // of a reader that never came back
				continue
			}
			if !ok {
				continue
			}
			if _, err := os.Stat(filepath.Join(dir, id+".ready")); err == nil {
				continue // answered
			}
			var answer []byte
			if err := s.answerSnapshot(dir, id); err != nil {
				slog.Warn("streamgen: a snapshot of the checkpoint for a reader failed", "dir", s.dir, "error", err)
				answer = []byte(err.Error())
			}
			// Written whole, then renamed: a reader never reads half an
			// answer.
			tmp := filepath.Join(dir, id+".answer")
			if os.WriteFile(tmp, answer, 0o644) == nil {
				os.Rename(tmp, filepath.Join(dir, id+".ready"))
			}
		}
	}
}

// answerSnapshot makes the snapshot that request id asks for.
func (s *Store) answerSnapshot(dir, id string) error {
	if err := s.Err(); err != nil {
		return err
	}
	if s.readsClosed.Load() {
		return ErrStoreClosed // without waiting behind Close
	}
	s.readMu.RLock()
	defer s.readMu.RUnlock()
	if s.readsClosed.Load() {
		return ErrStoreClosed
	}
	dest := filepath.Join(dir, id)
	// The commit file first (the reader checks the store against it: the
	// store may hold more than it says, never less), then the store, and
	// the lock file a checkpoint directory has.
	commit, err := os.ReadFile(filepath.Join(s.dir, commitFileName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := s.snapshotTo(dest); err != nil {
		return err
	}
	if commit != nil {
		if err := os.WriteFile(filepath.Join(dest, commitFileName), commit, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dest, "LOCK"), nil, 0o644)
}

// snapshotTo writes a Pebble checkpoint of the store into dest. Pebble
// panics when a directory sync of the snapshot's fails (as it moves the
// snapshot's markers): that is the snapshot's error, not the process's
// end. The checkpoint first commits to the log, and may move it to a new
// log file: it runs on a goroutine of its own (onItsOwn).
func (s *Store) snapshotTo(dest string) error {
	panicked, err := s.onItsOwn(func() error { return s.db.Checkpoint(dest, pebble.WithFlushedWAL()) })
	if panicked != nil {
		return fmt.Errorf("pebble checkpoint: %v", panicked)
	}
	if err != nil {
		return fmt.Errorf("pebble checkpoint: %w", err)
	}
	return nil
}

// openRunning opens a snapshot of the checkpoint in dir, which a running
// query holds: it asks the query for one and waits for it.
func openRunning(dir string, held error) (*CheckpointReader, error) {
	requests := filepath.Join(dir, snapshotDir)
	if err := os.MkdirAll(requests, 0o755); err != nil {
		return nil, fmt.Errorf("%w (and a snapshot could not be asked of it: %v)", held, err)
	}
	var b [8]byte
	rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	request := filepath.Join(requests, id+".request")
	if err := os.WriteFile(request, nil, 0o644); err != nil {
		return nil, fmt.Errorf("%w (and a snapshot could not be asked of it: %v)", held, err)
	}
	dest := filepath.Join(requests, id)
	cleanup := func() {
		os.RemoveAll(dest)
		os.Remove(filepath.Join(requests, id+".ready"))
		os.Remove(request)
	}
	deadline := time.Now().Add(snapshotWait)
	for {
		answer, err := os.ReadFile(filepath.Join(requests, id+".ready"))
		if err == nil {
			if len(answer) > 0 {
				cleanup()
				return nil, fmt.Errorf("streamgen: checkpoint %s: the query running on it could not make a snapshot: %s", dir, answer)
			}
			break
		}
		if time.Now().After(deadline) {
			cleanup()
			return nil, fmt.Errorf("%w (a snapshot was asked of it, and it did not answer in %v: is it a query of an earlier version, or stuck?)", held, snapshotWait)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c, err := OpenCheckpointFS(vfs.Default, dest)
	if err != nil {
		cleanup()
		return nil, err
	}
	c.s.dir = dir
	c.live = true
	c.release = func() error {
		err := c.s.closeDB()
		if lerr := c.s.lock.Close(); err == nil {
			err = lerr
		}
		cleanup()
		return err
	}
	return c, nil
}
