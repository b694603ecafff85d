package runtime_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/runtime"
)

// TestCloseStopsSyncLoop runs a store with a sync interval in a bubble of
// virtual time: the sync loop ticks while time passes, and after Close no
// goroutine of the store is left (synctest.Test fails when one is).
func TestCloseStopsSyncLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := open(t, vfs.NewMem(), runtime.StoreOptions{SyncInterval: time.Second})
		for id := range int64(3) {
			b := s.NewBatch()
			b.Put(runtime.Var{}, []byte("k"), nil, []byte{byte(id)})
			if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(1500 * time.Millisecond) // a tick of the sync loop
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	})
}
