package runtime_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	goruntime "runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
)

func open(t *testing.T, fs vfs.FS, opts runtime.StoreOptions) *runtime.Store {
	t.Helper()
	opts.FS = fs
	s, err := runtime.OpenStore("ckpt", opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func u64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// TestCrashKeepsStateAndProgressTogether runs batches that each add to a
// per-key counter and record the batch id, crashes the file system at
// random points (losing some or all writes that were not synced), and
// checks after each restart that state and progress describe the same
// batch: a crash loses whole batches or nothing, never half of one, and
// replaying from the progress never counts a batch twice.
func TestCrashKeepsStateAndProgressTogether(t *testing.T) {
	for _, interval := range []time.Duration{0, time.Hour} {
		r := rand.New(rand.NewPCG(1, uint64(interval)))
		fs := vfs.NewCrashableMem()
		s := open(t, fs, runtime.StoreOptions{SyncInterval: interval})
		// The oracle: the sum of each batch's additions, per batch id.
		sums := map[int64]int64{-1: 0}
		lost := 0
		for round := range 20 {
			p, _, err := s.Progress()
			if err != nil {
				t.Fatal(err)
			}
			last := p.BatchID
			for id := p.BatchID + 1; id < p.BatchID+1+int64(r.IntN(5)); id++ {
				b := s.NewBatch()
				v, ok, err := b.Get(0, "sum", []byte("k"))
				if err != nil {
					t.Fatal(err)
				}
				var sum int64
				if ok {
					sum = int64(binary.BigEndian.Uint64(v))
				}
				if sum != sums[id-1] {
					t.Fatalf("round %d, batch %d reads sum %d, the batches before it add to %d", round, id, sum, sums[id-1])
				}
				sum += id + 1
				sums[id] = sum
				b.Put(0, "sum", []byte("k"), u64(sum))
				if r.IntN(4) == 0 {
					b.Close() // a batch that fails is dropped whole
					break
				}
				if err := b.Commit(runtime.Progress{BatchID: id}); err != nil {
					t.Fatal(err)
				}
				last = id
			}
			// Crash: keep a random share of the unsynced writes.
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: r.IntN(101), RNG: rand.New(rand.NewPCG(uint64(round), 9))})
			s.Close()
			fs = crashed
			s = open(t, fs, runtime.StoreOptions{SyncInterval: interval})
			p, _, err = s.Progress()
			if err != nil {
				t.Fatal(err)
			}
			b := s.NewBatch()
			v, ok, _ := b.Get(0, "sum", []byte("k"))
			b.Close()
			var sum int64
			if ok {
				sum = int64(binary.BigEndian.Uint64(v))
			}
			if sum != sums[p.BatchID] {
				t.Fatalf("after crash %d (sync interval %v): progress says batch %d, whose sum is %d, state holds %d", round, interval, p.BatchID, sums[p.BatchID], sum)
			}
			if p.BatchID < last {
				lost++
			}
			if interval == 0 && p.BatchID != last {
				t.Fatalf("after crash %d: batch %d was committed with sync, progress says %d", round, last, p.BatchID)
			}
		}
		s.Close()
		if interval > 0 && lost == 0 {
			t.Fatal("no crash lost an unsynced batch: the test does not reach the case it is for")
		}
	}
}

func TestBatchCommitsWholeOrNothing(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	b := s.NewBatch()
	b.Put(1, "count", []byte("a"), []byte("1"))
	if _, ok, _ := b.Get(1, "count", []byte("a")); ok {
		t.Fatal("an uncommitted write is visible")
	}
	if err := b.Commit(runtime.Progress{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	if v, ok, _ := b.Get(1, "count", []byte("a")); !ok || string(v) != "1" {
		t.Fatalf("a committed write is not visible: %q %v", v, ok)
	}
	if _, ok, _ := b.Get(1, "other", []byte("a")); ok {
		t.Fatal("state names are not separate")
	}
	if _, ok, _ := b.Get(2, "count", []byte("a")); ok {
		t.Fatal("operators are not separate")
	}
	b.Put(1, "count", []byte("b"), []byte("2"))
	b.Close()
	b = s.NewBatch()
	defer b.Close()
	if _, ok, _ := b.Get(1, "count", []byte("b")); ok {
		t.Fatal("a dropped batch left a write behind")
	}
	if p, _, _ := s.Progress(); p.BatchID != 0 {
		t.Fatal("a dropped batch left progress behind")
	}
}

// TestTimers checks the timer index against a plain list: due timers come
// out in expiry order, exactly those at or before the bound, and deleted
// timers are gone.
func TestTimers(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	r := rand.New(rand.NewPCG(2, 2))
	type timer struct {
		key string
		at  time.Time
	}
	var all []timer
	b := s.NewBatch()
	base := time.Unix(1_700_000_000, 0)
	for range 300 {
		tm := timer{key: string(rune('a' + r.IntN(20))), at: base.Add(time.Duration(r.IntN(2000)-1000) * time.Millisecond)}
		if slices.Contains(all, tm) {
			continue
		}
		all = append(all, tm)
		b.SetTimer(3, []byte(tm.key), tm.at)
	}
	b.SetTimer(4, []byte("other operator"), base)
	if err := b.Commit(runtime.Progress{}); err != nil {
		t.Fatal(err)
	}
	// Delete every timer of key "c".
	b = s.NewBatch()
	deleted := 0
	for _, tm := range all {
		if tm.key == "c" {
			b.DeleteTimer(3, []byte("c"), tm.at)
			deleted++
		}
	}
	if deleted == 0 {
		t.Fatal("key c has no timers: the test deletes nothing")
	}
	if err := b.Commit(runtime.Progress{}); err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(tm timer) bool { return tm.key == "c" })
	for _, until := range []time.Time{base.Add(-2 * time.Second), base, base.Add(300 * time.Millisecond), base.Add(time.Hour)} {
		var want []timer
		for _, tm := range all {
			if !tm.at.After(until) {
				want = append(want, tm)
			}
		}
		slices.SortFunc(want, func(a, b timer) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return strings.Compare(a.key, b.key)
		})
		var got []timer
		err := s.DueTimers(3, until, func(key []byte, at time.Time) error {
			got = append(got, timer{string(key), at})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("until %v: %d timers due, want %d", until, len(got), len(want))
		}
		for i := range got {
			if got[i].key != want[i].key || !got[i].at.Equal(want[i].at) {
				t.Fatalf("until %v: timer %d is %v, want %v", until, i, got[i], want[i])
			}
		}
	}
	stop := errors.New("stop")
	n := 0
	if err := s.DueTimers(3, base.Add(time.Hour), func([]byte, time.Time) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("DueTimers did not stop at the callback's error: %v after %d", err, n)
	}
}

func meta(states map[string]*codec.Schema) runtime.Meta {
	return runtime.Meta{Operators: []runtime.OperatorMeta{{Kind: "flatMapGroupsWithState", Name: "sessions", KeyType: "string", States: states}}}
}

func TestCheckMeta(t *testing.T) {
	v1 := (&fixtures.StateV1{}).StreamSchema()
	v2 := (&fixtures.StateV2{}).StreamSchema()
	v3 := (&fixtures.StateV3{}).StreamSchema()
	fs := vfs.NewMem()
	s := open(t, fs, runtime.StoreOptions{})
	if err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v1})); err != nil {
		t.Fatalf("new checkpoint: %v", err)
	}
	s.Close()

	// Reopened: the same pipeline, and one whose state gained and lost
	// fields, continue.
	s = open(t, fs, runtime.StoreOptions{})
	defer s.Close()
	if err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v1})); err != nil {
		t.Fatalf("same pipeline: %v", err)
	}
	if err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v2})); err != nil {
		t.Fatalf("fields added and removed: %v", err)
	}
	// A field whose type changed is refused, naming the field.
	err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v3}))
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `state "state"`) || !strings.Contains(err.Error(), "field Count") {
		t.Fatalf("changed field type: %v", err)
	}
	// Other operators are refused.
	other := meta(map[string]*codec.Schema{"state": v2})
	other.Operators[0].Kind = "mapGroupsWithState"
	err = s.CheckMeta(other)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `was flatMapGroupsWithState "sessions", is now mapGroupsWithState "sessions"`) {
		t.Fatalf("other operator: %v", err)
	}
	two := meta(map[string]*codec.Schema{"state": v2})
	two.Operators = append(two.Operators, two.Operators[0])
	if err := s.CheckMeta(two); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "1 stateful operators") {
		t.Fatalf("an operator more: %v", err)
	}
	key := meta(map[string]*codec.Schema{"state": v2})
	key.Operators[0].KeyType = "int64"
	if err := s.CheckMeta(key); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "key type was string, is now int64") {
		t.Fatalf("other key type: %v", err)
	}
}

func TestCloseStopsSyncLoop(t *testing.T) {
	before := goruntime.NumGoroutine()
	s := open(t, vfs.NewMem(), runtime.StoreOptions{SyncInterval: time.Millisecond})
	b := s.NewBatch()
	b.Put(0, "x", []byte("k"), bytes.Repeat([]byte("v"), 10))
	if err := b.Commit(runtime.Progress{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Millisecond)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for goruntime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := goruntime.NumGoroutine(); n > before {
		t.Fatalf("%d goroutines after Close, %d before", n, before)
	}
}
