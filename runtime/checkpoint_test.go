package runtime_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/runtime"
)

// TestCheckpointScans writes entries and timers of three operators in three
// partitions and reads each operator's back through a CheckpointReader:
// exactly its own, in every partition, in the store's order.
func TestCheckpointScans(t *testing.T) {
	fs := vfs.NewMem()
	s, err := runtime.OpenStore("cp", runtime.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	type entry struct {
		part     uint32
		variable uint8
		key      string
	}
	want := map[uint8][]entry{}
	wantTimers := map[uint8][]string{}
	for part := range uint32(3) {
		for op := range uint8(3) {
			for variable := range uint8(2) {
				for _, key := range []string{"k1", "k2"} {
					v := runtime.Var{Scope: runtime.Scope{Partition: part, Operator: op}, Variable: variable}
					if err := b.Put(v, []byte(key), nil, []byte(fmt.Sprint(part, op, variable, key))); err != nil {
						t.Fatal(err)
					}
					want[op] = append(want[op], entry{part, variable, key})
				}
			}
			key := fmt.Sprintf("p%d", part)
			if err := b.RegisterTimer(runtime.Scope{Partition: part, Operator: op}, []byte(key), at.Add(time.Duration(op)*time.Hour)); err != nil {
				t.Fatal(err)
			}
			wantTimers[op] = append(wantTimers[op], key)
		}
	}
	if err := s.Commit(b, runtime.Progress{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	c, err := runtime.OpenCheckpointFS(fs, "cp")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for op := range uint8(4) {
		var got []entry
		err := c.ScanState(op, func(e runtime.Entry) error {
			if e.Operator != op {
				t.Errorf("ScanState(%d) gave an entry of operator %d", op, e.Operator)
			}
			if v := fmt.Sprint(e.Partition, op, e.Variable, string(e.Key)); string(e.Value) != v {
				t.Errorf("entry %v holds %q, want %q", e, e.Value, v)
			}
			got = append(got, entry{e.Partition, e.Variable, string(e.Key)})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want[op]) {
			t.Errorf("ScanState(%d) = %v, want %v", op, got, want[op])
		}
		var timers []string
		err = c.Timers(op, func(tm runtime.StoredTimer) error {
			if !tm.At.Equal(at.Add(time.Duration(op) * time.Hour)) {
				t.Errorf("operator %d: timer at %v", op, tm.At)
			}
			timers = append(timers, string(tm.Key))
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(timers, wantTimers[op]) {
			t.Errorf("Timers(%d) = %q, want %q", op, timers, wantTimers[op])
		}
	}
	// fn's error stops a scan and comes back as is.
	stop := errors.New("stop")
	if err := c.ScanState(1, func(runtime.Entry) error { return stop }); err != stop {
		t.Errorf("ScanState with a failing fn: %v", err)
	}
}
