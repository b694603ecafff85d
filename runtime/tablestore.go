package runtime

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
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
}

// tableStoreBatch is the size at which CreateTableStore's writes are
// committed as the table loads.
const tableStoreBatch = 8 << 20

// tableStoreCache is the size of a table store's block cache.
const tableStoreCache = 32 << 20

// CreateTableStore creates an empty table store in a new directory under
// parent ("": the system's temporary directory).
func CreateTableStore(parent string) (*TableStore, error) {
	dir, err := os.MkdirTemp(parent, "streamgen-table-")
	if err != nil {
		return nil, fmt.Errorf("streamgen: table store: %w", err)
	}
	cache := pebble.NewCache(tableStoreCache)
	opts := &pebble.Options{FS: vfs.Default, Cache: cache, Logger: quietPebble{}, DisableWAL: true}
	db, err := pebble.Open(dir, opts)
	cache.Unref() // the store holds its own reference
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("streamgen: table store in %s: %w", dir, err)
	}
	return &TableStore{dir: dir, db: db}, nil
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

func (s *TableStore) commit() error {
	err := s.b.Commit(pebble.NoSync)
	s.b.Close()
	s.b = nil
	if err != nil {
		return fmt.Errorf("streamgen: table store %s: write: %w", s.dir, err)
	}
	return nil
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

// Close closes the store and removes its directory.
func (s *TableStore) Close() error {
	if s.b != nil {
		s.b.Close()
		s.b = nil
	}
	err := s.db.Close()
	if rmErr := os.RemoveAll(s.dir); err == nil && rmErr != nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("streamgen: table store %s: close: %w", s.dir, err)
	}
	return nil
}

// quietPebble keeps a table store's informational lines out of the log,
// and reports its errors as warnings.
type quietPebble struct{}

func (quietPebble) Infof(string, ...any) {}
func (quietPebble) Errorf(format string, args ...any) {
	slog.Warn("streamgen: table store: " + fmt.Sprintf(format, args...))
}
func (quietPebble) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("streamgen: table store: "+format, args...))
}
