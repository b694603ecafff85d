package runtime

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// diskFullAfter fails every write from the one with index after on with
// ENOSPC, and counts the writes; with syncs, every sync (a directory's
// too) with EIO, counting the syncs.
type diskFullAfter struct {
	after  int64
	syncs  bool
	writes atomic.Int64
}

func (d *diskFullAfter) MaybeError(op errorfs.Op) error {
	if d.syncs && op.Kind != errorfs.OpFileSync && op.Kind != errorfs.OpFileSyncData && op.Kind != errorfs.OpFileSyncTo ||
		!d.syncs && op.Kind.ReadOrWrite() != errorfs.OpIsWrite {
		return nil
	}
	if d.writes.Add(1)-1 >= d.after {
		if d.syncs {
			return &os.PathError{Op: "sync", Path: op.Path, Err: syscall.EIO}
		}
		return &os.PathError{Op: "write", Path: op.Path, Err: syscall.ENOSPC}
	}
	return nil
}

func (d *diskFullAfter) String() string { return "a disk full after some writes" }

// loadTable writes a table of 24 MiB (three of the store's commits, each
// over half a memtable: each is flushed to a table file) to s, then reads
// a key of each commit back.
func loadTable(s *TableStore) error {
	value := bytes.Repeat([]byte("v"), 64<<10)
	const keys = 3 * tableStoreBatch / (64 << 10)
	for i := range keys {
		if err := s.Add(fmt.Appendf(nil, "k%08d", i), value); err != nil {
			return err
		}
	}
	if err := s.Loaded(); err != nil {
		return err
	}
	for _, i := range []int{0, keys / 2, keys - 1} {
		v, ok, err := s.Get(fmt.Appendf(nil, "k%08d", i))
		if err != nil {
			return err
		}
		if !ok || !bytes.Equal(v, value) {
			return fmt.Errorf("key %d: %d bytes, found %v", i, len(v), ok)
		}
	}
	return nil
}

// TestTableStoreDiskFull: the disk of a table store (TableOnDiskAbove)
// fills at every point of a load: every write from the n-th on fails
// with ENOSPC; and, in turn, every sync from the n-th on fails with EIO
// (a directory's sync in Open made Pebble panic). Pebble's fatal error ended the process (Logger.Fatalf
// panicked, on a flush's goroutine), or a commit waited for ever for a
// flush Pebble tried again in a loop. Each load now ends either with the
// table loaded and read back, or with an error that says the disk is
// full; Close returns and removes the directory; and once three failed
// stores are left open in the process, the next is refused, saying why.
func TestTableStoreDiskFull(t *testing.T) {
	defer stuckTableStores.Store(0)
	for _, syncs := range []bool{false, true} {
		clean := &diskFullAfter{after: 1 << 62, syncs: syncs}
		s, err := createTableStore(t.TempDir(), errorfs.Wrap(vfs.NewMem(), clean))
		if err != nil {
			t.Fatal(err)
		}
		if err := loadTable(s); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		total := clean.writes.Load()
		failed := 0
		points := int64(40)
		if testing.Short() {
			points = 8 // each load is slow under the race detector
		}
		for n := int64(0); n <= total; n += max(1, total/points) {
			stuckTableStores.Store(0)
			parent := t.TempDir()
			s, err := createTableStore(parent, errorfs.Wrap(vfs.NewMem(), &diskFullAfter{after: n, syncs: syncs}))
			if err == nil {
				err = loadTable(s)
				if cerr := s.Close(); err == nil {
					err = cerr
				}
				if left, _ := os.ReadDir(parent); len(left) != 0 {
					t.Fatalf("syncs %v, failing after %d of %d: the store's directory is left: %v", syncs, n, total, left)
				}
			}
			if err != nil {
				failed++
				if !errors.Is(err, syscall.ENOSPC) && !strings.Contains(err.Error(), "no space left on device") &&
					!(syncs && (errors.Is(err, syscall.EIO) || strings.Contains(err.Error(), "input/output error"))) {
					t.Fatalf("syncs %v, failing after %d of %d: %v", syncs, n, total, err)
				}
			}
		}
		if failed == 0 {
			t.Fatalf("syncs %v: no load failed: the test does not reach the faults", syncs)
		}
	}
	stuckTableStores.Store(maxStuckTables)
	if _, err := createTableStore(t.TempDir(), vfs.NewMem()); err == nil || !strings.Contains(err.Error(), "restart the process") {
		t.Fatalf("a store after %d failed ones: %v", maxStuckTables, err)
	}
}
