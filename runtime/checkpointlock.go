package runtime

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrCheckpointInUse is wrapped by the error of Start, OpenStore and
// OpenCheckpoint for a checkpoint directory whose lock another open store
// holds: a query running on it, in this process or another.
var ErrCheckpointInUse = errors.New("streamgen: checkpoint in use")

// inUseError is the error of a checkpoint whose lock is held.
type inUseError struct {
	dir string
	// hint says what to do about it, for the caller at hand.
	hint string
}

func (e *inUseError) Error() string {
	return "streamgen: checkpoint " + e.dir + " is in use by another query (lock held); " + e.hint
}

func (e *inUseError) Is(target error) bool { return target == ErrCheckpointInUse }

// The ways out of a checkpoint in use.
const (
	inUseQueryHint   = "stop that query first, or give this one a checkpoint directory of its own"
	inUseInspectHint = "stop the query to inspect its checkpoint"
)

// lockCheckpoint takes the lock of the checkpoint in dir, which must
// exist: Pebble's LOCK file, which every open of the store, read-only or
// not, takes too, and which is held until the store closes. Taking it
// before Pebble opens tells a checkpoint that another query holds
// (ErrCheckpointInUse) from any other failure to open it: the lock is
// an fcntl lock, which another process holding it makes fail with
// EAGAIN or EACCES, and Pebble refuses a second lock within a process by
// name.
func lockCheckpoint(fsys vfs.FS, dir, hint string) (*pebble.Lock, error) {
	lock, err := pebble.LockDirectory(dir, fsys)
	if err == nil {
		return lock, nil
	}
	if lockHeld(err) {
		return nil, &inUseError{dir: dir, hint: hint}
	}
	return nil, &storeError{kinds: []error{ErrStoreFailed}, dir: dir, cause: err, hint: "the lock file could not be taken: check the directory's permissions"}
}

// lockHeld reports whether err, from pebble.LockDirectory, says that the
// lock is held rather than that its file could not be made.
func lockHeld(err error) bool {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return false // creating the LOCK file failed
	}
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EWOULDBLOCK) ||
		strings.Contains(err.Error(), "lock held by current process")
}
