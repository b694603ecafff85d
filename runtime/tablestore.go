package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TableStore is one version of a static table kept on disk instead of in
// memory (typed.TableOnDiskAbove): a Pebble store of its own in a
// directory of its own, written once as the version loads, then read a
// key at a time, and removed when the version is no longer used. Nothing
// of it is durable: a query that starts again loads its tables again.
// Not safe for concurrent use.
type TableStore struct {
	dir   string
	db    *pebble.DB
	cache *pebble.Cache
	b     *pebble.Batch
	val   []byte
	// failure is the first storage fault Pebble met (a write that failed
	// on a full disk, a flush or a MANIFEST it could not write, corrupt
	// data), set once; failed is closed then.
	failure atomic.Pointer[error]
	failed  chan struct{}
}

// tableStoreBatch is the size at which CreateTableStore's writes are
// committed as the table loads.
const tableStoreBatch = 8 << 20

// tableStoreCache is the size of a table store's block cache.
const tableStoreCache = 32 << 20

// CreateTableStore creates an empty table store in a new directory under
// parent ("": the system's temporary directory).
func CreateTableStore(parent string) (*TableStore, error) {
	return createTableStore(parent, vfs.Default)
}

// createTableStore creates a table store on fsys, whose directory is
// parent's on the operating system's file system too (os.MkdirTemp).
//
// A storage fault of Pebble's fails the store instead of ending the
// process or hanging it, as the checkpoint's store does (storefail.go):
// Logger.Fatalf records the fault and returns; a failed flush or
// compaction (tried again at once, in a loop, by Pebble) records it, and
// once failed the store's Pebble makes no file (its next attempt waits
// for ever instead of spinning); a commit runs on a goroutine of its own,
// and one that waits for a flush that cannot come returns the failure.
func createTableStore(parent string, fsys vfs.FS) (*TableStore, error) {
	if n := stuckTableStores.Load(); n >= maxStuckTables {
		return nil, fmt.Errorf("streamgen: table store: %d table stores of this process failed on a fault of their disk and are left open, each holding its memory: fix the disk (the directory under %q) and restart the process", n, parent)
	}
	dir, err := os.MkdirTemp(parent, "streamgen-table-")
	if err != nil {
		return nil, fmt.Errorf("streamgen: table store: %w", err)
	}
	s := &TableStore{dir: dir, failed: make(chan struct{})}
	cache := pebble.NewCache(tableStoreCache)
	opts := &pebble.Options{FS: errorfs.Wrap(fsys, tableNoFilesOnceFailed{s}), Cache: cache, Logger: tableLogger{s}, DisableWAL: true,
		EventListener: &pebble.EventListener{
			BackgroundError: func(err error) { s.fail(err) },
			DataCorruption:  func(info pebble.DataCorruptionInfo) { s.fail(fmt.Errorf("%s: %w", info.Path, info.Details)) },
		}}
	db, err := openTableStore(dir, opts)
	cache.Unref() // the store holds its own reference
	if err == nil {
		err = s.err()
	}
	if err != nil {
		if db == nil {
			os.RemoveAll(dir)
		} else {
			s.db = db
			s.Close()
		}
		return nil, fmt.Errorf("streamgen: table store in %s: %w", dir, err)
	}
	s.db = db
	return s, nil
}

// openTableStore opens the Pebble of a table store. Open panics when a
// directory sync fails (atomicfs.Marker.Move: Pebble takes fsync errors
// for unrecoverable), after releasing what it opened: that is an error
// too.
func openTableStore(dir string, opts *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("pebble: open: %v", r)
		}
	}()
	return pebble.Open(dir, opts)
}

// fail records err as the store's failure, unless one was recorded.
func (s *TableStore) fail(err error) {
	if s.failure.CompareAndSwap(nil, &err) {
		close(s.failed)
	}
}

// err is the store's failure, or nil.
func (s *TableStore) err() error {
	if p := s.failure.Load(); p != nil {
		return *p
	}
	return nil
}

// Dir is the store's directory.
func (s *TableStore) Dir() string { return s.dir }

// Add writes key's value, as the table loads. A key is added once.
func (s *TableStore) Add(key, value []byte) error {
	if s.b == nil {
		s.b = s.db.NewBatch()
	}
	if err := s.b.Set(key, value, nil); err != nil {
		return fmt.Errorf("streamgen: table store: %w", err)
	}
	if s.b.Len() >= tableStoreBatch {
		return s.commit()
	}
	return nil
}

// Loaded commits what Add wrote: the store is complete.
func (s *TableStore) Loaded() error {
	if s.b == nil {
		return nil
	}
	return s.commit()
}

// commit commits s.b on a goroutine of its own, and returns when it has,
// or when the store has failed: a commit may wait for a flush that cannot
// come. Then s.b is left to Pebble.
func (s *TableStore) commit() error {
	b := s.b
	s.b = nil
	returned, err := s.call(func() error { return b.Commit(pebble.NoSync) })
	if returned {
		b.Close()
		if err == nil {
			err = s.err()
		}
	}
	if err != nil {
		return fmt.Errorf("streamgen: table store %s: write: %w", s.dir, err)
	}
	return nil
}

// call runs f, a call into Pebble, and waits for it, unless the store
// fails meanwhile (see unlessFailed): then it returns the failure. A
// panic of Pebble's is the store's failure. returned says whether f
// returned.
func (s *TableStore) call(f func() error) (returned bool, err error) {
	panicked, returned, err := unlessFailed(s.failed, f)
	switch {
	case !returned:
		return false, s.err()
	case panicked != nil:
		s.fail(fmt.Errorf("pebble: %v", panicked))
		return false, s.err()
	}
	return true, err
}

// Get returns key's value, valid until the next Get; ok is false when
// the table has no row of the key.
func (s *TableStore) Get(key []byte) (value []byte, ok bool, err error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("streamgen: table store %s: read: %w", s.dir, err)
	}
	s.val = append(s.val[:0], v...)
	closer.Close()
	return s.val, true, nil
}

// Close closes the store and removes its directory. A store that failed
// (a fault of its disk) is left open instead, its directory removed all
// the same: its files keep their space on the disk until the process
// ends, and Close returns the failure.
func (s *TableStore) Close() error {
	if s.b != nil {
		s.b.Close()
		s.b = nil
	}
	err := s.err()
	if err == nil {
		// Pebble's Close waits for a flush in flight, which, should it
		// fail now, waits for ever (tableNoFilesOnceFailed).
		_, err = s.call(s.db.Close)
	}
	if s.err() != nil {
		stuckTableStores.Add(1)
	}
	if rmErr := os.RemoveAll(s.dir); err == nil && rmErr != nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("streamgen: table store %s: close: %w", s.dir, err)
	}
	return nil
}

// tableLogger keeps a table store's informational lines out of the log,
// reports its errors as warnings, and records a fatal one as the store's
// failure: Pebble's storage-fault call sites return an error after it.
type tableLogger struct{ s *TableStore }

func (tableLogger) Infof(string, ...any) {}
func (tableLogger) Errorf(format string, args ...any) {
	slog.Warn("streamgen: table store: " + fmt.Sprintf(format, args...))
}
func (l tableLogger) Fatalf(format string, args ...any) {
	l.s.fail(fmt.Errorf("pebble: "+format, args...))
}

// tableNoFilesOnceFailed refuses to make a file once the table store has
// failed: a table file (a flush's or a compaction's, which Pebble would
// try again at once, in a loop, while the process lives) waits for ever
// instead, any other is refused with the failure.
type tableNoFilesOnceFailed struct{ s *TableStore }

func (n tableNoFilesOnceFailed) String() string { return "no files once the table store has failed" }

func (n tableNoFilesOnceFailed) MaybeError(op errorfs.Op) error {
	if op.Kind != errorfs.OpCreate {
		return nil
	}
	select {
	case <-n.s.failed:
		if strings.HasSuffix(op.Path, ".sst") {
			select {}
		}
		return fmt.Errorf("%w: no file after it", n.s.err())
	default:
		return nil
	}
}

// stuckTableStores counts the table stores of the process left open on a
// failure (TableStore.Close), each holding its memtables and the space of
// its files; maxStuckTables is how many it leaves before refusing the
// next (a table refreshed every minute on a disk that stays full would
// fill the memory). (Stores failing at once may take it a little past.)
var stuckTableStores atomic.Int32

const maxStuckTables = 3
