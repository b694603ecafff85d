package runtime

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"sync"
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
//
// It returns as well the lock's file lock, which releases the lock at
// once when closed, whatever holds references to the Lock (Pebble's open
// takes one, and returns it when the DB closes); the Lock's own closes
// then release nothing more.
func lockCheckpoint(fsys vfs.FS, dir, hint string) (*pebble.Lock, io.Closer, error) {
	held := &onceLocked{}
	lock, err := pebble.LockDirectory(dir, lockOnceFS{fsys, held})
	if err == nil {
		return lock, held, nil
	}
	if lockHeld(err) {
		if why, ok := heldByWedged(fsys, dir); ok {
			return nil, nil, leftOpen{&storeError{kinds: []error{ErrStoreFailed, ErrStoreNotClosed}, dir: dir,
				cause: fmt.Errorf("a store of this process on it failed and did not close (%s): it holds the lock until the process ends", why),
				hint:  "restart the process: it resumes from the batches the checkpoint holds"}}
		}
		return nil, nil, &inUseError{dir: dir, hint: hint}
	}
	why := failedHint(err)
	if errors.Is(err, fs.ErrPermission) {
		why = "the lock file could not be taken: check the directory's permissions"
	}
	return nil, nil, &storeError{kinds: []error{ErrStoreFailed}, dir: dir, cause: err, hint: why}
}

// lockOnceFS is an FS whose Lock hands its file lock to held.
type lockOnceFS struct {
	vfs.FS
	held *onceLocked
}

func (f lockOnceFS) Lock(name string) (io.Closer, error) {
	c, err := f.FS.Lock(name)
	if err != nil {
		return nil, err
	}
	f.held.c = c
	return f.held, nil
}

// onceLocked is a file lock that its first Close releases; later ones do
// nothing.
type onceLocked struct {
	c    io.Closer
	once sync.Once
	err  error
}

func (l *onceLocked) Close() error {
	l.once.Do(func() { l.err = l.c.Close() })
	return l.err
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
