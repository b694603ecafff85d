package runtime

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// How Pebble v2 reports storage faults, and what the Store makes of them:
//
//   - A foreground call returns an error: a read (Get, an iterator) that
//     meets an I/O error or a block whose checksum does not match, Open on
//     a damaged MANIFEST, WAL or table. The Store records it as its
//     failure (below) and returns it.
//   - A commit whose log write or sync fails does not return an error:
//     DB.Apply calls Logger.Fatalf("pebble: fatal commit error") and then
//     returns nil. A later commit into a log writer that has failed panics
//     with the error inside the commit pipeline, holding the pipeline's
//     lock, so that every later commit and DB.Close block for ever.
//   - Background work (flushes, compactions, table statistics) calls
//     EventListener.BackgroundError and tries again at once: a flush that
//     fails on a full disk is retried in a loop, nothing is made read-only,
//     and writes go on until the queue of memtables is full, when they
//     stall for ever (EventListener.WriteStallBegin). A MANIFEST that
//     cannot be written calls Logger.Fatalf and returns the error.
//   - Corrupt data read by any goroutine calls EventListener.DataCorruption
//     with the file's path, whose default calls Logger.Fatalf.
//
// So the Store records the first of these as its failure, whichever
// goroutine meets it, and from then on refuses every read and write with
// it, and refuses Pebble's own changes to the directory
// (noWritesOnceFailed); the query stops on it. Logger.Fatalf records too and returns, as the
// loggers of Pebble's own tests do (InMemLogger, the metamorphic test's
// history): Pebble's storage-fault call sites return an error after it,
// and a panic from a Pebble goroutine would end the process, while one
// unwound through Pebble's code from ours leaves its reference counts
// wrong. Pebble panics itself on three storage faults: a log write that
// fails inside a commit, which every write of the Store's recovers
// (Store.commitCall), marking the store wedged so that Close does not
// wait for the lock the panic left held; a
// directory sync that fails when it moves a marker file (fsync errors are
// unrecoverable, it says), which OpenStore recovers when it happens on
// Open's goroutine, and which elsewhere (a flush's or a compaction's
// MANIFEST rotation, Open's flush of a replayed log included) the
// store's directories turn into a sync that fails the store and waits for
// ever (dirSyncs): that goroutine changes nothing more, as a process
// that ended would not, and the query ends on the failure; and closing
// the old log (its last write or sync, or one that failed before) or
// making the new one (a reused file's stat and its directory's sync
// included) when a commit
// moves to a new log file (DB.rotateWAL: every memtable's worth of
// writes, and every batch of over half of one). That last panic is raised
// with the DB's mutex unlocked, whose deferred unlock then ends the
// process with a fatal error that no recover catches, so there the
// store's log files and directory fail the store and wait for ever
// instead (logFile), on the goroutine of its own that every commit runs
// on (Store.onItsOwn), which the query stops waiting for: the commit
// and every later one return the failure, Pebble's commit pipeline stays
// locked (Close does not wait for it), and the next start, in a new
// process, resumes from the batches the checkpoint holds. On a full disk
// the store keeps a reserve of free space (StoreOptions.DiskReserve,
// diskRoom): a commit that would eat into it fails the store with
// ErrDiskFull before Pebble sees the batch, so the move to a new log file
// finds room.

// ErrStoreFailed is wrapped by the error of every operation of a Store,
// and of the query on it, once Pebble has failed to write or read the
// checkpoint: a write or sync that failed (a full disk), a background
// flush or compaction that failed, corrupt data. The store refuses every
// later read and write; the checkpoint keeps the batches committed before,
// and a query started again once the cause is fixed resumes from them.
var ErrStoreFailed = errors.New("streamgen: checkpoint store failed")

// ErrCorruptCheckpoint is wrapped by the error of OpenStore, Start, or a
// running query, for a checkpoint whose files are damaged: a checksum
// that does not match, a truncated or missing table, a MANIFEST or log
// that cannot be read, a commit file that cannot be parsed. The message
// names the file.
var ErrCorruptCheckpoint = errors.New("streamgen: corrupt checkpoint")

// ErrDiskFull is wrapped, with ErrStoreFailed, by the error of OpenStore,
// Start, or a running query, when the checkpoint's file system has less
// free space than the store keeps in reserve (StoreOptions.DiskReserve,
// the query option DiskReserve), or than a batch's commit needs on top of
// it. The message says how much is free and how much was needed.
var ErrDiskFull = errors.New("streamgen: checkpoint disk is full")

// ErrStoreNotClosed is wrapped by the error of Store.Close, Query.Stop and
// a query that ended on a store failure, when Pebble did not close within
// the close timeout (a call into it that never returns: a disk that hangs,
// a write stalled behind a flush that keeps failing), or when a failed
// commit left Pebble's commit pipeline locked (a log file that could not
// be written, synced or closed: ErrStoreLeftOpen). The store's files stay
// open and locked until the process ends (a store whose close timed out
// releases them if Pebble closes after all).
var ErrStoreNotClosed = errors.New("streamgen: checkpoint store did not close")

// ErrStoreLeftOpen is wrapped, with ErrStoreNotClosed, by the error of
// Store.Close, Query.Stop and a query whose store failed with Pebble's
// commit pipeline locked (a log file that failed as Pebble moved to a new
// one), and, with ErrStoreFailed, by the error of a start on that
// checkpoint in the same process: its files stay locked until the process
// ends, so only a new process can run on it. (A store whose Close timed
// out wraps ErrStoreNotClosed alone: it may close after all.)
var ErrStoreLeftOpen = errors.New("streamgen: checkpoint store left open until the process ends")

// leftOpen is err, wrapping ErrStoreLeftOpen too; its message is err's.
type leftOpen struct{ error }

func (e leftOpen) Unwrap() []error { return []error{e.error, ErrStoreLeftOpen} }

// storeError is a failure of the store in dir: it wraps the kinds it is
// (ErrStoreFailed, ErrCorruptCheckpoint) and the cause, and says what to
// do about it.
type storeError struct {
	kinds []error
	dir   string
	cause error
	// file is the damaged file, when one is known.
	file string
	hint string
}

func (e *storeError) Error() string {
	var b strings.Builder
	b.WriteString(e.kinds[len(e.kinds)-1].Error())
	b.WriteString(" in ")
	b.WriteString(e.dir)
	b.WriteString(": ")
	if e.file != "" && !strings.Contains(e.cause.Error(), e.file) {
		b.WriteString("file ")
		b.WriteString(e.file)
		b.WriteString(": ")
	}
	b.WriteString(e.cause.Error())
	if e.hint != "" {
		b.WriteString("; ")
		b.WriteString(e.hint)
	}
	return b.String()
}

func (e *storeError) Unwrap() []error { return append(e.kinds[:len(e.kinds):len(e.kinds)], e.cause) }

// The ways out the messages give.
const (
	// corruptHint says how to go on from a damaged checkpoint; see
	// "Storage faults" in the package doc.
	corruptHint = "the checkpoint cannot be used: move the directory aside and start the query from a fresh checkpoint directory (it then reads its sources from the start, with batch ids from 0, unless a changelog, kafka.Changelog, restores it from its topic)"
)

// failedHint is the way out of a store failure (ErrStoreFailed) whose
// cause is err: what to fix, when the error says.
func failedHint(err error) string {
	const kept = "the batches committed before are kept: "
	const again = " and start the query again; it resumes from the last committed batch"
	msg := err.Error() // (Pebble's fatal errors reach the store as text)
	switch {
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || strings.Contains(msg, "no space left on device") || strings.Contains(msg, "disk quota exceeded"):
		return kept + "free disk space (or move the checkpoint directory to a larger disk)" + again
	case errors.Is(err, syscall.EIO) || strings.Contains(msg, "input/output error"):
		return kept + "the device reported an I/O error: check the disk (the kernel's log, its health), copy the checkpoint directory off it if it is failing," + again
	case errors.Is(err, syscall.EROFS) || strings.Contains(msg, "read-only file system"):
		return kept + "the file system is read-only (a system may remount a disk so after errors): check the disk, make it writable" + again
	case errors.Is(err, fs.ErrPermission):
		return kept + "the program may no longer write the checkpoint's files: restore its permissions" + again
	}
	return kept + "fix the cause" + again
}

// createHint is the way out of a checkpoint directory that cannot be
// created: what is wrong with the path, when the error says.
func createHint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOTDIR):
		return "a part of the path is a file, not a directory: give the query (runtime.Checkpoint) a path under a directory"
	case errors.Is(err, fs.ErrPermission), errors.Is(err, syscall.EROFS):
		return "the program may not write there: give the query (runtime.Checkpoint) a directory it can create and write, or change the permissions"
	case errors.Is(err, syscall.ENOSPC):
		return "the disk is full: free disk space, or give the query a checkpoint directory on another disk"
	}
	return "give the query (runtime.Checkpoint) a directory it can create and write"
}

// diskFullHint is the way out of ErrDiskFull.
const diskFullHint = "the batches committed before are kept: free disk space (or lower the disk reserve) and start the query again, it resumes from the last committed batch"

// diskRoom fails the store with ErrDiskFull, before what would write
// bytes to Pebble (what names it), when the checkpoint's file system has
// less free than the reserve plus twice bytes (see
// StoreOptions.DiskReserve). A file system that cannot report its usage
// is not checked: the check is a guard in front of Pebble's own handling
// of a full disk, not a replacement for it.
func (s *Store) diskRoom(bytes int, what string) error {
	if s.opts.DiskReserve < 0 {
		return nil
	}
	u, reserve, ok := s.diskUsage()
	if !ok {
		return nil
	}
	need := reserve + 2*uint64(bytes)
	if u.AvailBytes >= need {
		return nil
	}
	free, needed := formatBytes(u.AvailBytes), formatBytes(need)
	if free == needed {
		// Close enough to print the same: the bytes say which is less.
		free, needed = fmt.Sprintf("%d B", u.AvailBytes), fmt.Sprintf("%d B", need)
	}
	cause := fmt.Errorf("%s: %s free of %s, under the %s kept in reserve", what, free, formatBytes(u.TotalBytes), needed)
	if bytes > 0 {
		cause = fmt.Errorf("%s: %s free of %s, under the %s needed (the %s kept in reserve and twice the batch's %s)",
			what, free, formatBytes(u.TotalBytes), needed, formatBytes(reserve), formatBytes(uint64(bytes)))
	}
	return s.setFailure(&storeError{kinds: []error{ErrStoreFailed, ErrDiskFull}, dir: s.dir, cause: cause, hint: diskFullHint})
}

// diskUsage returns the usage of the checkpoint's file system and the
// reserve the store keeps on it, or false when the file system cannot
// say (Pebble's in-memory one; some FUSE ones report a size of 0).
func (s *Store) diskUsage() (u vfs.DiskUsage, reserve uint64, ok bool) {
	u, err := s.fs.GetDiskUsage(s.dir)
	if err != nil || u.TotalBytes == 0 {
		return u, 0, false
	}
	if s.opts.DiskReserve > 0 {
		// Never under what Pebble sets aside for its next log file (110%
		// of a memtable, preallocated as it moves to it): on a disk with
		// less free, the move would end the process.
		reserve = max(min(uint64(s.opts.DiskReserve), u.TotalBytes/20), walPreallocation(s.memTableSize()))
	}
	return u, reserve, true
}

// walPreallocation is the disk space Pebble preallocates for a log file
// of a store whose memtables are memTable bytes (DB.walPreallocateSize).
func walPreallocation(memTable int64) uint64 {
	return uint64(memTable + memTable/10)
}

// formatBytes writes n in the largest binary unit that keeps it at or
// above 1, with one decimal: "3.5 MiB".
func formatBytes(n uint64) string {
	const units = "KMGTPE"
	if n < 1<<10 {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n)/(1<<10), 0
	for v >= 1<<10 && i < len(units)-1 {
		v /= 1 << 10
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[i])
}

// failure is what the store keeps of its first failure.
type failure struct{ err error }

// fail records cause as the store's failure, unless one is recorded
// already, and returns the recorded one. Safe for concurrent use, from
// any goroutine, Pebble's included; it does not block.
func (s *Store) fail(cause error) error {
	if f := s.failure.Load(); f != nil {
		return f.err
	}
	e := &storeError{kinds: []error{ErrStoreFailed}, dir: s.dir, cause: cause, hint: failedHint(cause)}
	if isCorruption(cause) {
		e.kinds = append(e.kinds, ErrCorruptCheckpoint)
		e.hint = corruptHint
	}
	return s.setFailure(e)
}

// failCorrupt records corruption found in file.
func (s *Store) failCorrupt(file string, cause error) error {
	return s.setFailure(&storeError{kinds: []error{ErrStoreFailed, ErrCorruptCheckpoint}, dir: s.dir, cause: cause, file: file, hint: corruptHint})
}

func (s *Store) setFailure(e *storeError) error {
	if s.failure.CompareAndSwap(nil, &failure{err: e}) {
		close(s.failed)
	}
	return s.failure.Load().err
}

// Err returns the failure that stopped the store (wrapping ErrStoreFailed),
// or nil. Safe for concurrent use.
func (s *Store) Err() error {
	if f := s.failure.Load(); f != nil {
		return f.err
	}
	return nil
}

// isCorruption reports whether a Pebble error says that data is damaged
// rather than that an operation failed. Pebble marks checksum and format
// errors (pebble.ErrCorruption); a table of the wrong size or a missing
// file, found by the consistency check at Open, is a plain error.
func isCorruption(err error) bool {
	if pebble.IsCorruptionError(err) || errors.Is(err, fs.ErrNotExist) {
		return true
	}
	msg := err.Error()
	// Damaged metadata: a lost format marker makes Pebble take the
	// directory for another store; a damaged OPTIONS file names another
	// comparer or merger.
	for _, sign := range []string{"size mismatch", "unknown to the objstorage provider", "already exists and is not pristine",
		"merger name from file", "comparer name from file", "OPTIONS"} {
		if strings.Contains(msg, sign) {
			return true
		}
	}
	return false
}

// pebbleHooks are the logger and event listener of a Store's Pebble.
type pebbleHooks struct{ s *Store }

// Infof drops Pebble's informational messages (a line per replayed log
// file at every start).
func (pebbleHooks) Infof(string, ...any) {}

func (pebbleHooks) Errorf(format string, args ...any) {
	slog.Error("streamgen: pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf records the failure and returns (see the top of this file).
func (h pebbleHooks) Fatalf(format string, args ...any) {
	if strings.HasPrefix(format, "pebble: fatal commit error") {
		h.s.commitFailed.Store(true) // the commit under way failed: see Store.apply
	}
	h.s.fail(fmt.Errorf(format, args...))
}

func (h pebbleHooks) listener() *pebble.EventListener {
	l := &pebble.EventListener{
		BackgroundError: func(err error) { h.s.fail(err) },
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			h.s.failCorrupt(info.Path, info.Details)
		},
		WriteStallBegin: func(info pebble.WriteStallBeginInfo) {
			slog.Warn("streamgen: checkpoint writes stall", "dir", h.s.dir, "reason", info.Reason)
		},
		DiskSlow: func(info pebble.DiskSlowInfo) {
			if h.s.Err() != nil {
				return // (an operation that waits for ever once failed: noWritesOnceFailed, dirSyncs)
			}
			slog.Warn("streamgen: checkpoint disk is slow", "file", info.Path, "op", info.OpType.String(), "for", info.Duration)
		},
	}
	h.s.work.listen(l)
	return l
}

// logFile is a log file of the store's Pebble (a name ending in .log).
// Pebble panics when it moves a commit to a new log file (DB.rotateWAL:
// every memtable's worth of writes, and every batch of over half of one)
// and closing the old file fails (its last write or sync; or a write that
// failed before, on the log writer's goroutine, without a sync waiting
// for it), or the new file cannot be made (a reused file's stat and its
// directory's sync included): with the DB's mutex unlocked, whose
// deferred unlock then ends the process with a fatal error no recover
// catches. There the store fails and the commit waits for ever instead
// (stick), on the goroutine of its own that Store.onItsOwn gives every
// commit (and the live snapshot): the query ends on the failure, and
// Pebble changes nothing more in the log.
type logFile struct {
	vfs.File
	s *Store
	// failed is a write's or a sync's error, off DB.rotateWAL.
	failed atomic.Pointer[error]
}

// logFile wraps file, just made as name with err, when it is a log file
// (see the type).
func (s *Store) logFile(name string, file vfs.File, err error) (vfs.File, error) {
	if !strings.HasSuffix(name, ".log") {
		return file, err
	}
	if err != nil {
		if inRotateWAL() {
			s.stick(fmt.Errorf("make the new log file %s: %w", name, err))
		}
		return nil, err
	}
	return &logFile{File: file, s: s}, nil
}

func (f *logFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	return n, f.check("write", err)
}

func (f *logFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	return n, f.check("write", err)
}

func (f *logFile) Sync() error { return f.check("sync", f.File.Sync()) }

// Stat is checked too: Pebble stats a log file it reuses for the next
// one (wal.StandaloneManager.Create).
func (f *logFile) Stat() (vfs.FileInfo, error) {
	info, err := f.File.Stat()
	return info, f.check("stat", err)
}

func (f *logFile) SyncData() error { return f.check("sync", f.File.SyncData()) }

func (f *logFile) SyncTo(length int64) (bool, error) {
	full, err := f.File.SyncTo(length)
	return full, f.check("sync", err)
}

func (f *logFile) Close() error {
	err := f.File.Close()
	if err == nil {
		if p := f.failed.Load(); p != nil && inRotateWAL() {
			err = *p
		}
	}
	return f.check("close", err)
}

// check returns err, the error of op on the file; in DB.rotateWAL it fails
// the store with it and waits for ever instead.
func (f *logFile) check(op string, err error) error {
	if err == nil {
		return nil
	}
	if inRotateWAL() {
		f.s.stick(fmt.Errorf("%s the log file as Pebble moved to a new one: %w", op, err))
	}
	f.failed.CompareAndSwap(nil, &err)
	return err
}

// stick marks the store wedged (Close does not wait for Pebble: its
// commit pipeline stays locked by the caller), fails it with cause, tells
// Store.onItsOwn, and waits for ever. Wedged comes first: a query that
// ends on the failure closes the store at once.
func (s *Store) stick(cause error) {
	s.wedged.Store(true)
	s.fail(cause)
	s.stuckOnce.Do(func() { close(s.stuck) })
	select {}
}

// inRotateWAL reports whether the caller runs in Pebble's DB.rotateWAL.
func inRotateWAL() bool { return onStack("/pebble/v2.(*DB).rotateWAL")[0] }
