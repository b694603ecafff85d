package runtime

import (
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
)

// TestSnapshotFaultIsTheSnapshots: a directory sync of a snapshot
// (streamgen inspect's, of a running query) that fails, at any of its
// syncs, the one Pebble panics on as it moves the snapshot's marker
// included, fails that snapshot alone: the store goes on committing.
func TestSnapshotFaultIsTheSnapshots(t *testing.T) {
	root := t.TempDir()
	var failAt, syncs atomic.Int32 // the sync of a snapshot's directory that fails (from 1), and those seen
	var dest atomic.Pointer[string]
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if d := dest.Load(); d != nil && op.Kind == errorfs.OpFileSync && filepath.Clean(op.Path) == *d && syncs.Add(1) == failAt.Load() {
			return errorfs.ErrInjected
		}
		return nil
	}))
	s, err := OpenStore(filepath.Join(root, "ckpt"), StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	commit := func(id int64) {
		t.Helper()
		b := s.NewBatch()
		b.Put(Var{Variable: 3}, []byte("k"), nil, []byte{byte(id)})
		if err := s.Commit(b, Progress{BatchID: id}); err != nil {
			t.Fatalf("batch %d: %v", id, err)
		}
	}
	commit(0)
	for k := int32(1); ; k++ {
		id := "snap" + string(rune('a'+k))
		d := filepath.Join(root, "snaps", id)
		dest.Store(&d)
		failAt.Store(k)
		syncs.Store(0)
		err := s.answerSnapshot(filepath.Join(root, "snaps"), id)
		if syncs.Load() < k {
			if err != nil {
				t.Fatalf("a snapshot with no fault: %v", err)
			}
			if k == 1 {
				t.Fatal("a snapshot syncs no directory")
			}
			break
		}
		if err == nil || !strings.Contains(err.Error(), errorfs.ErrInjected.Error()) {
			t.Errorf("the snapshot whose directory's sync %d failed: %v", k, err)
		}
		if err := s.Err(); err != nil {
			t.Fatalf("the snapshot whose directory's sync %d failed failed the store: %v", k, err)
		}
		commit(int64(k))
	}
}
