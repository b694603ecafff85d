package runtime_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/runtime"
)

// snapshot returns a store's mirrored records.
func snapshot(t *testing.T, s *runtime.Store) map[string]string {
	t.Helper()
	out := map[string]string{}
	if err := s.Snapshot(func(key, value []byte) error {
		out[string(key)] = string(value)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestChangesMirrorTheBatch runs random batches of point writes, range
// deletions (DeleteKey, DeleteVar, DeletePartition, the expiry pass),
// timers set and fired (each deleted, then the range of those read),
// and entries with a time to live, applies each batch's Changes, in
// order, to a map (as a compacted topic keeps the last value of each
// key), and checks after each commit that the map holds exactly the
// store's mirrored records, and that no key is listed as deleted twice
// with no write between (a point deletion and then a range over it). A
// second store restored from the map holds the same records and the
// same progress.
func TestChangesMirrorTheBatch(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	r := rand.New(rand.NewPCG(9, 9))
	vars := []runtime.Var{{Variable: 0}, {Variable: 1}, {Scope: runtime.Scope{Operator: 1}}, {Scope: runtime.Scope{Partition: 3}}}
	keys := []string{"a", "ab", "b", "c\x00", "\xff"}
	expiring := vars[1]
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	copied := map[string]string{}
	var rangeDeletions, fired int
	for round := range 60 {
		b := s.NewBatch()
		now := t0.Add(time.Duration(round) * time.Second)
		for range 1 + r.IntN(12) {
			v := vars[r.IntN(len(vars))]
			key := []byte(keys[r.IntN(len(keys))])
			suffix := []byte{byte(r.IntN(3))}
			var err error
			switch op := r.IntN(22); {
			case op < 8:
				if v == expiring {
					v = vars[0]
				}
				err = b.Put(v, key, suffix, fmt.Appendf(nil, "v%d", round))
			case op < 11:
				// Entries with a time to live are all of one variable: the
				// expiry pass reads the others' values as expiring ones.
				err = b.PutExpiring(expiring, key, suffix, fmt.Appendf(nil, "e%d", round), now.Add(time.Duration(1+r.IntN(5))*time.Second), runtime.ProcessingTimeExpiry)
			case op < 13:
				err = b.Delete(v, key, suffix)
			case op < 15:
				err = b.RegisterTimer(v.Scope, key, now.Add(time.Duration(r.IntN(5))*time.Second))
			case op < 17:
				err = b.DeleteKey(v, key)
				rangeDeletions++
			case op < 18:
				err = b.DeleteVar(v)
				rangeDeletions++
			case op < 19:
				err = b.DeletePartition(v.Partition)
				rangeDeletions++
			case op < 20:
				_, err = b.ExpireState(v.Scope, now, time.Time{})
			default:
				var n int
				n, err = b.FireTimers(v.Scope, now)
				fired += n
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		p := runtime.Progress{BatchID: int64(round), Watermark: now}
		if err := b.WriteProgress(p); err != nil {
			t.Fatal(err)
		}
		gone := map[string]bool{} // the keys whose last change listed is a deletion
		if err := b.Changes(func(key, value []byte, deleted bool) error {
			if !runtime.Mirrored(key) {
				t.Fatalf("round %d: Changes listed %x, which is not mirrored", round, key)
			}
			if deleted {
				if gone[string(key)] {
					t.Fatalf("round %d: Changes listed the deletion of %q again, with no write between", round, key)
				}
				gone[string(key)] = true
				delete(copied, string(key))
			} else {
				gone[string(key)] = false
				copied[string(key)] = string(value)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(b, p); err != nil {
			t.Fatal(err)
		}
		if got := snapshot(t, s); !maps.Equal(got, copied) {
			t.Fatalf("round %d: the copy made from Changes differs from the store:\n copy  %q\n store %q", round, sortedKeys(copied), sortedKeys(got))
		}
	}
	if rangeDeletions == 0 || fired == 0 {
		t.Fatalf("%d range deletions made, %d timers fired: want some of each", rangeDeletions, fired)
	}

	restored := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer restored.Close()
	rs, err := restored.BeginRestore()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range sortedKeys(copied) {
		if err := rs.Set([]byte(k), []byte(copied[k])); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.Set([]byte("\x03origin"), nil); err == nil {
		t.Fatal("Restore.Set took a record that is not mirrored")
	}
	if err := rs.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, restored); !maps.Equal(got, copied) {
		t.Fatalf("the restored store differs from the copy")
	}
	want, _, _ := s.Progress()
	got, ok, err := restored.Progress()
	if err != nil || !ok || got.BatchID != want.BatchID || !got.Watermark.Equal(want.Watermark) {
		t.Fatalf("restored progress %+v (ok %v, %v), want %+v", got, ok, err, want)
	}
}

func sortedKeys(m map[string]string) []string { return slices.Sorted(maps.Keys(m)) }

// TestRestoreClearRewinds rebuilds a store that ran ahead of its copy:
// after Clear, a restore of the copy taken at batch 2 leaves exactly the
// copy's records (none of batches 3 to 5), the progress of batch 2, and a
// store that opens again, although its commit file had recorded batch 5.
func TestRestoreClearRewinds(t *testing.T) {
	fs := vfs.NewMem()
	s := open(t, fs, runtime.StoreOptions{})
	v := runtime.Var{Scope: runtime.Scope{Partition: 2, Operator: 1}}
	var copied map[string]string
	for id := range int64(6) {
		b := s.NewBatch()
		if err := b.Put(v, fmt.Appendf(nil, "k%d", id), nil, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if err := b.RegisterTimer(v.Scope, fmt.Appendf(nil, "k%d", id), time.Unix(100+id, 0)); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
			t.Fatal(err)
		}
		if id == 2 {
			copied = snapshot(t, s)
		}
	}
	r, err := s.BeginRestore()
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Clear(); err != nil {
		t.Fatal(err)
	}
	for _, k := range sortedKeys(copied) {
		if err := r.Set([]byte(k), []byte(copied[k])); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Finish(); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, s); !maps.Equal(got, copied) {
		t.Fatalf("the rebuilt store holds %q, want the copy's %q", sortedKeys(got), sortedKeys(copied))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, fs, runtime.StoreOptions{})
	defer s.Close()
	p, ok, err := s.Progress()
	if err != nil || !ok || p.BatchID != 2 {
		t.Fatalf("reopened, the progress is %+v (ok %v, %v), want batch 2", p, ok, err)
	}
	if got := snapshot(t, s); !maps.Equal(got, copied) {
		t.Fatalf("reopened, the store holds %q, want the copy's %q", sortedKeys(got), sortedKeys(copied))
	}
}

// TestRestoreClearedNotFinished: a store cleared for a rebuild whose
// restore never finishes (a failed fetch, a cancelled start, or a machine
// that crashes, losing what was not synced) opens again, empty, rather
// than being refused as one that lost committed batches. (The commit
// file's removal was not synced: a machine crash brought it back.)
func TestRestoreClearedNotFinished(t *testing.T) {
	for _, crash := range []bool{false, true} {
		t.Run(map[bool]string{false: "stopped", true: "machine crash"}[crash], func(t *testing.T) {
			mem := vfs.NewCrashableMem()
			s := open(t, mem, runtime.StoreOptions{})
			v := runtime.Var{Variable: 0}
			for id := range int64(3) {
				b := s.NewBatch()
				if err := b.Put(v, fmt.Appendf(nil, "k%d", id), nil, []byte("v")); err != nil {
					t.Fatal(err)
				}
				if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
					t.Fatal(err)
				}
			}
			r, err := s.BeginRestore()
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Clear(); err != nil {
				t.Fatal(err)
			}
			var fs vfs.FS = mem
			if crash {
				fs = mem.CrashClone(vfs.CrashCloneCfg{}) // nothing unsynced kept
			}
			r.Close() // the restore stops here
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, fs, runtime.StoreOptions{})
			defer s.Close()
			if _, ok, err := s.Progress(); err != nil || ok {
				t.Fatalf("the cleared store holds progress (%v, %v)", ok, err)
			}
			if got := snapshot(t, s); len(got) != 0 {
				t.Fatalf("the cleared store holds %q", sortedKeys(got))
			}
		})
	}
}
