package runtime_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
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
				v, ok, err := b.Get(sumVar, []byte("k"), nil)
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
				b.Put(sumVar, []byte("k"), nil, u64(sum))
				if r.IntN(4) == 0 {
					b.Close() // a batch that fails is dropped whole
					break
				}
				if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
					t.Fatal(err)
				}
				last = id
			}
			// Crash: keep a random share of the unsynced writes.
			fs, s, p = crashAndReopen(t, fs, s, runtime.StoreOptions{SyncInterval: interval}, r, uint64(round))
			b := s.NewBatch()
			v, ok, _ := b.Get(sumVar, []byte("k"), nil)
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

var sumVar = runtime.Var{Variable: 3}

// crashAndReopen crashes fs, keeping a random share of the writes not
// synced, closes s and opens the store again on what the crash left, and
// returns its progress.
func crashAndReopen(t *testing.T, fs *vfs.MemFS, s *runtime.Store, opts runtime.StoreOptions, r *rand.Rand, round uint64) (*vfs.MemFS, *runtime.Store, runtime.Progress) {
	t.Helper()
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: r.IntN(101), RNG: rand.New(rand.NewPCG(round, 9))})
	s.Close()
	s = open(t, crashed, opts)
	p, _, err := s.Progress()
	if err != nil {
		t.Fatal(err)
	}
	return crashed, s, p
}

// TestBatchCommitsWholeOrNothing: a batch's reads see its own writes and
// the committed state, other batches see only what was committed, and a
// dropped batch leaves nothing behind.
func TestBatchCommitsWholeOrNothing(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	count := runtime.Var{Scope: runtime.Scope{Operator: 1}, Variable: 0}
	b := s.NewBatch()
	b.Put(count, []byte("a"), nil, []byte("1"))
	if v, ok, _ := b.Get(count, []byte("a"), nil); !ok || string(v) != "1" {
		t.Fatalf("a batch does not read its own write: %q %v", v, ok)
	}
	other := s.NewBatch()
	if _, ok, _ := other.Get(count, []byte("a"), nil); ok {
		t.Fatal("an uncommitted write is visible to another batch")
	}
	other.Close()
	if err := s.Commit(b, runtime.Progress{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	b = s.NewBatch()
	if v, ok, _ := b.Get(count, []byte("a"), nil); !ok || string(v) != "1" {
		t.Fatalf("a committed write is not visible: %q %v", v, ok)
	}
	for _, v := range []runtime.Var{
		{Scope: runtime.Scope{Operator: 1}, Variable: 1},
		{Scope: runtime.Scope{Operator: 2}, Variable: 0},
		{Scope: runtime.Scope{Partition: 1, Operator: 1}, Variable: 0},
	} {
		if _, ok, _ := b.Get(v, []byte("a"), nil); ok {
			t.Fatalf("%+v reads the entry of %+v: variables, operators and partitions are not separate", v, count)
		}
	}
	b.Put(count, []byte("b"), nil, []byte("2"))
	b.Delete(count, []byte("a"), nil)
	if _, ok, _ := b.Get(count, []byte("a"), nil); ok {
		t.Fatal("a batch reads an entry it deleted")
	}
	b.Close()
	b = s.NewBatch()
	defer b.Close()
	if _, ok, _ := b.Get(count, []byte("b"), nil); ok {
		t.Fatal("a dropped batch left a write behind")
	}
	if _, ok, _ := b.Get(count, []byte("a"), nil); !ok {
		t.Fatal("a dropped batch's delete took effect")
	}
	if p, _, _ := s.Progress(); p.BatchID != 0 {
		t.Fatal("a dropped batch left progress behind")
	}
}

// TestScanAndDeletes checks prefix scans and range deletions against a
// plain map, through batches that mix committed entries with their own
// writes: a scan returns a key's entries in suffix order as the batch sees
// them, and no entry of another key, variable, operator or partition.
func TestScanAndDeletes(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	r := rand.New(rand.NewPCG(4, 4))
	type entry struct{ v, key, suffix string }
	vars := []runtime.Var{
		{Variable: 0}, {Variable: 1}, {Scope: runtime.Scope{Operator: 1}}, {Scope: runtime.Scope{Partition: 7}},
	}
	keys := []string{"", "a", "ab", "b", "a\x00", "\xff"}
	model := map[entry]string{}
	vname := func(v runtime.Var) string { return fmt.Sprintf("%d/%d/%d", v.Partition, v.Operator, v.Variable) }
	check := func(b *runtime.StateBatch, round int) {
		t.Helper()
		for _, v := range vars {
			for _, key := range keys {
				var want []string
				for e, val := range model {
					if e.v == vname(v) && e.key == key {
						want = append(want, e.suffix+"="+val)
					}
				}
				slices.Sort(want)
				var got []string
				if err := b.Scan(v, []byte(key), func(suffix, value []byte) error {
					got = append(got, string(suffix)+"="+string(value))
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("round %d: scan of %s key %q: %q, want %q", round, vname(v), key, got, want)
				}
			}
		}
	}
	for round := range 30 {
		b := s.NewBatch()
		for range 20 {
			v := vars[r.IntN(len(vars))]
			key := keys[r.IntN(len(keys))]
			suffix := string(rune('a' + r.IntN(5)))
			if r.IntN(3) == 0 {
				suffix = "" // a point value
			}
			e := entry{vname(v), key, suffix}
			switch r.IntN(10) {
			case 0:
				b.DeleteKey(v, []byte(key))
				for m := range model {
					if m.v == e.v && m.key == key {
						delete(model, m)
					}
				}
			case 1, 2:
				b.Delete(v, []byte(key), []byte(suffix))
				delete(model, e)
			default:
				val := fmt.Sprint(r.IntN(1000))
				b.Put(v, []byte(key), []byte(suffix), []byte(val))
				model[e] = val
			}
		}
		check(b, round)
		if err := s.Commit(b, runtime.Progress{BatchID: int64(round)}); err != nil {
			t.Fatal(err)
		}
		b = s.NewBatch()
		check(b, round)
		b.Close()
	}
	// Deleting a variable, then a partition.
	b := s.NewBatch()
	b.DeleteVar(vars[1])
	b.RegisterTimer(vars[3].Scope, []byte("a"), time.Unix(10, 0))
	b.DeletePartition(vars[3].Partition)
	for m := range model {
		if m.v == vname(vars[1]) || m.v == vname(vars[3]) {
			delete(model, m)
		}
	}
	check(b, -1)
	if due, _ := b.HasDueTimers(vars[3].Scope, runtime.EndOfTime); due {
		t.Fatal("DeletePartition left a timer")
	}
	if err := s.Commit(b, runtime.Progress{}); err != nil {
		t.Fatal(err)
	}
}

// TestTimers checks the timer service against a plain list: due timers
// come out in expiry order, exactly those strictly before the threshold;
// a key's timers are listed in order; deleted timers are gone; and an
// instant beyond the range of Unix nanoseconds is kept, deleted and fired
// like any other.
func TestTimers(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	r := rand.New(rand.NewPCG(2, 2))
	type timer struct {
		key string
		at  time.Time
	}
	scope := runtime.Scope{Operator: 3}
	var all []timer
	b := s.NewBatch()
	base := time.Unix(1_700_000_000, 0).UTC()
	for range 300 {
		tm := timer{key: string(rune('a' + r.IntN(20))), at: base.Add(time.Duration(r.IntN(2000)-1000) * time.Millisecond)}
		if slices.Contains(all, tm) {
			continue
		}
		all = append(all, tm)
		b.RegisterTimer(scope, []byte(tm.key), tm.at)
	}
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) // past 2262
	b.RegisterTimer(scope, []byte("far"), far)
	all = append(all, timer{"far", runtime.TimerInstant(far)})
	b.RegisterTimer(runtime.Scope{Operator: 4}, []byte("other operator"), base)
	b.RegisterTimer(runtime.Scope{Partition: 1, Operator: 3}, []byte("other partition"), base)
	if err := s.Commit(b, runtime.Progress{}); err != nil {
		t.Fatal(err)
	}
	// Delete every timer of key "c", through the by-key index.
	b = s.NewBatch()
	var listed []time.Time
	if err := b.KeyTimers(scope, []byte("c"), func(at time.Time) error { listed = append(listed, at); return nil }); err != nil {
		t.Fatal(err)
	}
	var want []time.Time
	for _, tm := range all {
		if tm.key == "c" {
			want = append(want, tm.at)
		}
	}
	slices.SortFunc(want, time.Time.Compare)
	if len(want) == 0 || !slices.EqualFunc(listed, want, time.Time.Equal) {
		t.Fatalf("timers of c: %v, want %v", listed, want)
	}
	if err := b.DeleteKeyTimers(scope, []byte("c")); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(b, runtime.Progress{}); err != nil {
		t.Fatal(err)
	}
	all = slices.DeleteFunc(all, func(tm timer) bool { return tm.key == "c" })
	b = s.NewBatch()
	defer b.Close()
	for _, threshold := range []time.Time{base.Add(-2 * time.Second), base, base.Add(300 * time.Millisecond), base.Add(time.Hour), far, runtime.EndOfTime} {
		var want []timer
		for _, tm := range all {
			if tm.at.Before(threshold) {
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
		for _, d := range dueTimers(t, b, scope, threshold) {
			got = append(got, timer{string(d.Key), d.At})
		}
		if len(got) != len(want) {
			t.Fatalf("before %v: %d timers due, want %d", threshold, len(got), len(want))
		}
		for i := range got {
			if got[i].key != want[i].key || !got[i].at.Equal(want[i].at) {
				t.Fatalf("before %v: timer %d is %v, want %v", threshold, i, got[i], want[i])
			}
		}
		if due, err := b.HasDueTimers(scope, threshold); err != nil || due != (len(want) > 0) {
			t.Fatalf("before %v: HasDueTimers = %v, %v; %d are due", threshold, due, err, len(want))
		}
	}
	// The far timer is deleted by the instant it was registered with.
	if err := b.DeleteTimer(scope, []byte("far"), far); err != nil {
		t.Fatal(err)
	}
	n := 0
	b.KeyTimers(scope, []byte("far"), func(time.Time) error { n++; return nil })
	if n != 0 {
		t.Fatal("the far timer is still listed after its deletion")
	}
}

// dueTimers returns the timers of s due before threshold, as b's cursor
// reads them, in order.
func dueTimers(t *testing.T, b *runtime.StateBatch, s runtime.Scope, threshold time.Time) []runtime.Timer {
	t.Helper()
	var all []runtime.Timer
	cursor := b.DueTimers(s, threshold)
	for {
		due, err := cursor.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			return all
		}
		all = append(all, due...)
	}
}

// TestTimerCursorSeesNewTimers: while a cursor walks the due timers, a
// timer registered ahead of it is reached and one deleted ahead of it is
// not.
func TestTimerCursorSeesNewTimers(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	b := s.NewBatch()
	defer b.Close()
	scope := runtime.Scope{}
	for i := range 600 {
		b.RegisterTimer(scope, []byte(fmt.Sprintf("k%04d", i)), time.Unix(int64(i), 0))
	}
	cursor := b.DueTimers(scope, time.Unix(10_000, 0))
	seen := map[string]bool{}
	first := true
	for {
		due, err := cursor.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		for _, d := range due {
			seen[string(d.Key)] = true
			b.DeleteTimer(scope, d.Key, d.At) // as a handler does
		}
		if first {
			first = false
			b.RegisterTimer(scope, []byte("late"), time.Unix(5000, 0))
			b.DeleteTimer(scope, []byte("k0599"), time.Unix(599, 0))
		}
	}
	if len(seen) != 600 || !seen["late"] || seen["k0599"] {
		t.Fatalf("%d timers seen (late: %v, deleted k0599: %v), want 600 with late and without k0599", len(seen), seen["late"], seen["k0599"])
	}
}

// TestOneShotTimers: one-shot timers (OperatorInfo.OneShotTimers) are
// one entry each, in the index by expiry; the runtime's range deletion
// after they fire removes exactly those before the threshold (one-shot
// and, from a checkpoint written before, two-index timers alike), a timer
// set after the deletion stays, the index by key of the scope goes, and
// other operators' and partitions' timers are untouched. Checked against
// a plain list of the timers, with enough of them that the batch is
// committed in key order.
func TestOneShotTimers(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	type timer struct {
		key string
		at  time.Time
	}
	scope := runtime.Scope{Operator: 2}
	others := []runtime.Scope{{Operator: 3}, {Partition: 1, Operator: 2}}
	base := time.Unix(1_700_000_000, 0).UTC()
	var all []timer
	// A checkpoint of before: timers in both indexes.
	b := s.NewBatch()
	for i := range 500 {
		tm := timer{fmt.Sprintf("old%03d", i), base.Add(time.Duration(i*7%1000) * time.Millisecond)}
		all = append(all, tm)
		b.RegisterTimer(scope, []byte(tm.key), tm.at)
	}
	for _, o := range others {
		b.RegisterTimer(o, []byte("other"), base)
	}
	if err := s.Commit(b, runtime.Progress{}); err != nil {
		t.Fatal(err)
	}
	// A batch sets one-shot timers, fires those before the threshold,
	// deletes them, and sets one more before the threshold.
	threshold := base.Add(500 * time.Millisecond)
	b = s.NewBatch()
	for i := range 5000 {
		tm := timer{fmt.Sprintf("new%04d", i), base.Add(time.Duration(i*13%1000) * time.Millisecond)}
		all = append(all, tm)
		if err := b.RegisterOneShot(scope, []byte(tm.key), tm.at); err != nil {
			t.Fatal(err)
		}
	}
	fired := map[timer]bool{}
	for _, d := range dueTimers(t, b, scope, threshold) {
		fired[timer{string(d.Key), d.At}] = true
	}
	if err := b.DeleteFired(scope, threshold); err != nil {
		t.Fatal(err)
	}
	if err := b.DropKeyIndex(scope); err != nil {
		t.Fatal(err)
	}
	after := timer{"after", base.Add(time.Millisecond)}
	if err := b.RegisterOneShot(scope, []byte(after.key), after.at); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(b, runtime.Progress{}); err != nil {
		t.Fatal(err)
	}
	var wantLeft []timer
	for _, tm := range all {
		if tm.at.Before(threshold) != fired[tm] {
			t.Fatalf("timer %v at %v: fired %v, threshold %v", tm.key, tm.at, fired[tm], threshold)
		}
		if !fired[tm] {
			wantLeft = append(wantLeft, tm)
		}
	}
	wantLeft = append(wantLeft, after)
	if len(fired) == 0 || len(wantLeft) < 2 {
		t.Fatalf("%d fired, %d left: the test needs both", len(fired), len(wantLeft))
	}
	b = s.NewBatch()
	defer b.Close()
	left := map[timer]bool{}
	for _, d := range dueTimers(t, b, scope, runtime.EndOfTime) {
		left[timer{string(d.Key), d.At}] = true
	}
	if len(left) != len(wantLeft) {
		t.Fatalf("%d timers left, want %d", len(left), len(wantLeft))
	}
	for _, tm := range wantLeft {
		if !left[tm] {
			t.Fatalf("timer %v at %v is gone, want it left", tm.key, tm.at)
		}
	}
	for _, tm := range all[:500] {
		if err := b.KeyTimers(scope, []byte(tm.key), func(at time.Time) error {
			return fmt.Errorf("timer of %s at %v still in the index by key", tm.key, at)
		}); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range others {
		n := 0
		b.KeyTimers(o, []byte("other"), func(time.Time) error { n++; return nil })
		if due, err := b.HasDueTimers(o, runtime.EndOfTime); err != nil || !due || n != 1 {
			t.Fatalf("scope %+v: due %v (%v), %d in the index by key; want its one timer in both", o, due, err, n)
		}
	}
}

func meta(states map[string]*codec.Schema) runtime.Meta {
	return runtime.Meta{
		Sources:   []string{"memory:in"},
		Operators: []runtime.OperatorMeta{{Kind: "flatMapGroupsWithState", Name: "sessions", Timeout: "EventTimeTimeout", OutputMode: "Append", KeyType: "string", States: states}},
	}
}

// TestCheckMetaRefusesOtherEncoding: a state variable stored in one
// layout and declared in another (deduplication's keys, once with an
// expiry index, then ordered by event time) is refused, even with
// AllowPipelineChanges, with the two layouts named: its entries would
// be misread.
func TestCheckMetaRefusesOtherEncoding(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	dedup := func(encoding string) runtime.Meta {
		return runtime.Meta{
			Sources: []string{"memory:in"},
			Operators: []runtime.OperatorMeta{{Kind: "dropDuplicates", Name: "byUser", OutputMode: "Append", KeyType: "string",
				States:    map[string]*codec.Schema{"seen": nil},
				Variables: map[string]runtime.VariableMeta{"seen": {Kind: "value", Encoding: encoding}}}},
		}
	}
	if _, _, err := s.CheckMeta(dedup(runtime.EncodingExpiring), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CheckMeta(dedup(runtime.EncodingExpiring), false); err != nil {
		t.Fatalf("the same layout: %v", err)
	}
	for _, allow := range []bool{false, true} {
		_, _, err := s.CheckMeta(dedup(runtime.EncodingByEventTime), allow)
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `state variable "seen" was stored as "expiring", is now "byEventTime"`) {
			t.Fatalf("another layout (allow %v): %v", allow, err)
		}
	}
}

func TestCheckMeta(t *testing.T) {
	v1 := (&fixtures.StateV1{}).StreamSchema()
	v2 := (&fixtures.StateV2{}).StreamSchema()
	v3 := (&fixtures.StateV3{}).StreamSchema()
	fs := vfs.NewMem()
	s := open(t, fs, runtime.StoreOptions{})
	m := meta(map[string]*codec.Schema{"state": v1})
	m.ID = "first"
	if id, _, err := s.CheckMeta(m, false); err != nil || id != "first" {
		t.Fatalf("new checkpoint: id %q, %v", id, err)
	}
	s.Close()

	// Reopened: the same pipeline, and one whose state gained and lost
	// fields, continue, with the checkpoint's query id.
	s = open(t, fs, runtime.StoreOptions{})
	defer s.Close()
	if id, _, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v1}), false); err != nil || id != "first" {
		t.Fatalf("same pipeline: id %q, %v", id, err)
	}
	// (StateV2 is StateV1 with fields added and removed; being another
	// type of the fixtures, its name differs, which needs the option.)
	if _, _, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v2}), true); err != nil {
		t.Fatalf("fields added and removed: %v", err)
	}
	// A field whose type changed is refused, naming the field, even with
	// AllowPipelineChanges.
	for _, allow := range []bool{false, true} {
		_, _, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v3}), allow)
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `state "state"`) || !strings.Contains(err.Error(), "field Count") {
			t.Fatalf("changed field type (allow %v): %v", allow, err)
		}
	}
	// Other operators are refused.
	other := meta(map[string]*codec.Schema{"state": v2})
	other.Operators[0].Kind = "mapGroupsWithState"
	_, _, err := s.CheckMeta(other, true)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `was flatMapGroupsWithState "sessions", is now mapGroupsWithState "sessions"`) {
		t.Fatalf("other operator: %v", err)
	}
	two := meta(map[string]*codec.Schema{"state": v2})
	two.Operators = append(two.Operators, two.Operators[0])
	if _, _, err := s.CheckMeta(two, true); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "1 stateful operators") {
		t.Fatalf("an operator more: %v", err)
	}
	key := meta(map[string]*codec.Schema{"state": v2})
	key.Operators[0].KeyType = "int64"
	if _, _, err := s.CheckMeta(key, true); !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "key type was string, is now int64") {
		t.Fatalf("other key type: %v", err)
	}
	// The pipeline's identity: names, timeouts, output modes and sources
	// are refused unless the change is allowed.
	for _, tc := range []struct {
		change func(*runtime.Meta)
		want   string
	}{
		{func(m *runtime.Meta) { m.Operators[0].Name = "other" }, `operator 0 was flatMapGroupsWithState "sessions", is now flatMapGroupsWithState "other"`},
		{func(m *runtime.Meta) { m.Operators[0].Timeout = "ProcessingTimeTimeout" }, "timeout was EventTimeTimeout, is now ProcessingTimeTimeout"},
		{func(m *runtime.Meta) { m.Operators[0].OutputMode = "Update" }, "output mode was Append, is now Update"},
		{func(m *runtime.Meta) { m.Sources = []string{"files:/data/in"} }, `sources were ["memory:in"], are now ["files:/data/in"]`},
		{func(m *runtime.Meta) { m.Operators[0].States["state"] = (&fixtures.Counter{}).StreamSchema() }, "is now of type github.com/streamgen/streamgen/generated/fixtures.Counter"},
		{func(m *runtime.Meta) {
			m.Operators[0].States["state"] = &codec.Schema{Name: v2.Name, Fields: []codec.Field{{Name: "Other", ID: 99, Type: &codec.Type{Kind: codec.KindString, Go: "string"}}}}
		}, "has no field in common with the stored one"},
	} {
		m := meta(map[string]*codec.Schema{"state": v2})
		tc.change(&m)
		_, _, err := s.CheckMeta(m, false)
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "AllowPipelineChanges") {
			t.Errorf("%s: err = %v", tc.want, err)
		}
		if _, _, err := s.CheckMeta(m, true); err != nil {
			t.Errorf("%s, allowed: %v", tc.want, err)
		}
		if _, _, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": v2}), true); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRenamedFieldRefused: a state field that disappears while a field of
// the same type appears is refused at start, naming both and the tag that
// keeps the data; AllowStateFieldLoss (or AllowPipelineChanges) starts,
// with a warning, and the new description is then the checkpoint's.
func TestRenamedFieldRefused(t *testing.T) {
	was := &codec.Schema{Name: "x.S", Fields: []codec.Field{
		{Name: "Count", ID: 11, Type: &codec.Type{Kind: codec.KindInt, Go: "int64", Bits: 64}},
		{Name: "Keep", ID: 12, Type: &codec.Type{Kind: codec.KindString, Go: "string"}},
	}}
	now := &codec.Schema{Name: "x.S", Fields: []codec.Field{
		{Name: "Total", ID: 13, Type: &codec.Type{Kind: codec.KindInt, Go: "int64", Bits: 64}},
		{Name: "Keep", ID: 12, Type: &codec.Type{Kind: codec.KindString, Go: "string"}},
	}}
	const gone = "field Count (int64) is gone and field Total of the same type is new"
	for _, allow := range []struct{ changes, loss bool }{{true, false}, {false, true}} {
		s := open(t, vfs.NewMem(), runtime.StoreOptions{})
		if _, w, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": was}), false); err != nil || len(w) != 0 {
			t.Fatal(w, err)
		}
		_, _, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": now}), false)
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), gone) ||
			!strings.Contains(err.Error(), "tag Total `stream:\"id=11\"` to keep them") || !strings.Contains(err.Error(), "AllowStateFieldLoss") {
			t.Fatalf("err = %v", err)
		}
		_, w, err := s.CheckMetaAllowing(meta(map[string]*codec.Schema{"state": now}), allow.changes, allow.loss)
		if err != nil {
			t.Fatalf("allowed %+v: %v", allow, err)
		}
		if len(w) != 1 || !strings.Contains(w[0], gone) {
			t.Fatalf("allowed %+v: warnings %q", allow, w)
		}
		// The loss is done: the next start is not refused.
		if _, w, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": now}), false); err != nil || len(w) != 0 {
			t.Fatalf("after the allowed start: %q, %v", w, err)
		}
		s.Close()
	}
}

// TestKeptRowsChanges: the rows an operator keeps encoded in its state
// values (OperatorMeta.Rows) are compared as its states are: fields
// added or removed start, a field that looks renamed is refused unless
// its loss is allowed, a field of another type is refused even with
// AllowPipelineChanges; other Params are refused unless the pipeline's
// changes are allowed; a checkpoint written without Rows or Params
// starts, and keeps them from then on.
func TestKeptRowsChanges(t *testing.T) {
	field := func(name string, id uint32, kind codec.Kind, goType string) codec.Field {
		return codec.Field{Name: name, ID: id, Type: &codec.Type{Kind: kind, Go: goType, Bits: 64}}
	}
	rows := func(fields ...codec.Field) *codec.Schema { return &codec.Schema{Name: "x.Row", Fields: fields} }
	top := func(params string, r *codec.Schema) runtime.Meta {
		m := meta(map[string]*codec.Schema{"aggregate": nil})
		m.Operators[0].Kind, m.Operators[0].Params, m.Operators[0].Rows = "aggregate", params, r
		return m
	}
	count, user := field("Count", 11, codec.KindInt, "int64"), field("User", 12, codec.KindString, "string")
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	if _, _, err := s.CheckMeta(top("", nil), false); err != nil {
		t.Fatal(err)
	}
	if _, w, err := s.CheckMeta(top("keeps the 3 best rows", rows(count, user)), false); err != nil || len(w) != 0 {
		t.Fatalf("a checkpoint written without Rows and Params: %q, %v", w, err)
	}
	added := rows(count, user, field("Page", 13, codec.KindString, "string"))
	if _, w, err := s.CheckMeta(top("keeps the 3 best rows", added), false); err != nil || len(w) != 0 {
		t.Fatalf("a field added: %q, %v", w, err)
	}
	_, _, err := s.CheckMeta(top("keeps the 5 best rows", added), false)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "it keeps the 3 best rows, and now keeps the 5 best rows") {
		t.Fatalf("other params: %v", err)
	}
	renamed := rows(count, field("Name", 14, codec.KindString, "string"), field("Page", 13, codec.KindString, "string"))
	_, _, err = s.CheckMeta(top("keeps the 3 best rows", renamed), false)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "kept rows: field User (string) is gone and field Name of the same type is new") {
		t.Fatalf("a field renamed: %v", err)
	}
	other := rows(field("Count", 11, codec.KindString, "string"), user)
	_, _, err = s.CheckMetaAllowing(top("keeps the 3 best rows", other), true, true)
	if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "kept rows:") || !strings.Contains(err.Error(), "field Count") {
		t.Fatalf("a field of another type, all allowed: %v", err)
	}
}

// TestLargeBatchReachesTheStateCache: a batch far larger than the
// store's memtable (4 MiB here) is committed as a memtable of its own; every value it wrote
// must still be read back, through the state cache, by the next batch,
// whether the store started empty (the cache answers misses) or not.
func TestLargeBatchReachesTheStateCache(t *testing.T) {
	const keys = 60000 // about 8 MB of entries
	value := func(round, i int) []byte {
		return fmt.Appendf(nil, "%d-%d-%s", round, i, strings.Repeat("v", 100))
	}
	s := open(t, vfs.NewMem(), runtime.StoreOptions{MemTableSize: 4 << 20})
	defer s.Close()
	for round := range 3 {
		commitKeys(t, s, round, keys, value)
		b := s.NewBatch()
		for i := range keys {
			v, ok, err := b.Get(sumVar, fmt.Appendf(nil, "key-%06d", i), nil)
			if err != nil {
				t.Fatal(err)
			}
			if !ok || string(v) != string(value(round, i)) {
				b.Close()
				t.Fatalf("round %d: key-%06d = %.20q (%v) after the commit, want %.20q", round, i, v, ok, value(round, i))
			}
		}
		b.Close()
	}
}

// TestLargeBatchesCommitTheirWrites commits batches large enough that
// commit gives Pebble a copy of their writes in key order and the next
// batch writes into the memory of the one before: each batch reads the
// keys it writes (through the state cache, or Pebble with the cache off),
// writes some keys twice and deletes some, and the reads of each batch,
// and the state after the last and after reopening the store, equal a
// plain map's.
func TestLargeBatchesCommitTheirWrites(t *testing.T) {
	cases := []struct {
		name string
		opts runtime.StoreOptions
	}{
		{"cache", runtime.StoreOptions{}},
		{"no cache", runtime.StoreOptions{StateCacheSize: -1}},
		{"sync interval", runtime.StoreOptions{SyncInterval: time.Hour}},
	}
	v := runtime.Var{Variable: 1}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := vfs.NewMem()
			s := open(t, fs, tc.opts)
			model := map[string]int64{}
			r := rand.New(rand.NewPCG(3, 4))
			for id := range int64(6) {
				// The batch reads its keys first, as an operator reads a
				// key's state before writing it (a read after the batch's
				// first write would index the batch, which is then
				// committed as it is), then writes them.
				b := s.NewBatch()
				keys := make([][]byte, 12_000)
				for i := range keys {
					keys[i] = fmt.Appendf(nil, "key-%06d", r.IntN(30_000))
					val, ok, err := b.Get(v, keys[i], nil)
					if err != nil {
						t.Fatal(err)
					}
					want, inModel := model[string(keys[i])]
					if ok != inModel || ok && int64(binary.BigEndian.Uint64(val)) != want {
						t.Fatalf("batch %d reads %s = %x (present %v), want %d (present %v)", id, keys[i], val, ok, want, inModel)
					}
				}
				for _, key := range keys {
					if r.IntN(10) == 0 {
						if err := b.Delete(v, key, nil); err != nil {
							t.Fatal(err)
						}
						delete(model, string(key))
						continue
					}
					// A key drawn twice is written twice: the last write wins.
					model[string(key)]++
					if err := b.Put(v, key, nil, u64(model[string(key)])); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
					t.Fatal(err)
				}
				if !runtime.HoldsSpareBatch(s) {
					t.Fatalf("batch %d was not committed in key order: the test does not reach the case", id)
				}
			}
			// A batch that only reads takes the memory kept, and gives
			// it back when it is dropped.
			ro := s.NewBatch()
			if runtime.HoldsSpareBatch(s) {
				t.Fatal("a new batch did not take the memory of the batch before")
			}
			ro.Close()
			if !runtime.HoldsSpareBatch(s) {
				t.Fatal("a batch dropped did not give its memory back")
			}
			check := func(s *runtime.Store) {
				t.Helper()
				b := s.NewBatch()
				defer b.Close()
				n := 0
				err := b.ScanVar(v, func(key, _, value []byte) error {
					n++
					if want, ok := model[string(key)]; !ok || int64(binary.BigEndian.Uint64(value)) != want {
						return fmt.Errorf("the store holds %s = %x, want %d (present %v)", key, value, want, ok)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if n != len(model) {
					t.Fatalf("the store holds %d keys, want %d", n, len(model))
				}
			}
			check(s)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, fs, tc.opts)
			defer s.Close()
			check(s)
		})
	}
}

// TestCrashKeepsLargeBatchesWhole is TestCrashKeepsStateAndProgressTogether
// for batches that commit in key order (thousands of writes, some of a
// key twice, into the memory of the batch before): after crashes that
// keep a random share of the unsynced writes, every key holds the value
// of the last batch up to the one the progress names that wrote it, and
// nothing of a later batch.
func TestCrashKeepsLargeBatchesWhole(t *testing.T) {
	v := runtime.Var{Variable: 2}
	const keys = 4_000
	for _, interval := range []time.Duration{0, time.Hour} {
		r := rand.New(rand.NewPCG(11, uint64(interval)))
		fs := vfs.NewCrashableMem()
		s := open(t, fs, runtime.StoreOptions{SyncInterval: interval})
		// written[id][k] is the value batch id wrote to key k, if any.
		written := map[int64]map[int]int64{}
		lost := 0
		for round := range 8 {
			p, _, err := s.Progress()
			if err != nil {
				t.Fatal(err)
			}
			last := p.BatchID
			for id := p.BatchID + 1; id < p.BatchID+1+int64(1+r.IntN(3)); id++ {
				b := s.NewBatch()
				w := map[int]int64{}
				for range 3_000 {
					k := r.IntN(keys)
					w[k] = id*10_000 + int64(r.IntN(10_000)) // a key drawn twice: the last write wins
					if err := b.Put(v, fmt.Appendf(nil, "k%05d", k), nil, u64(w[k])); err != nil {
						t.Fatal(err)
					}
				}
				written[id] = w
				if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
					t.Fatal(err)
				}
				if !runtime.HoldsSpareBatch(s) {
					t.Fatalf("batch %d was not committed in key order: the test does not reach the case", id)
				}
				last = id
			}
			fs, s, p = crashAndReopen(t, fs, s, runtime.StoreOptions{SyncInterval: interval}, r, uint64(round))
			if p.BatchID < last {
				lost++
				for id := p.BatchID + 1; id <= last; id++ {
					delete(written, id) // lost whole: rewritten by the next round
				}
			}
			if interval == 0 && p.BatchID != last {
				t.Fatalf("after crash %d: batch %d was committed with sync, progress says %d", round, last, p.BatchID)
			}
			b := s.NewBatch()
			for k := range keys {
				var want int64
				found := false
				for id := p.BatchID; id >= 0 && !found; id-- {
					want, found = written[id][k]
				}
				got, ok, err := b.Get(v, fmt.Appendf(nil, "k%05d", k), nil)
				if err != nil {
					t.Fatal(err)
				}
				if ok != found || ok && int64(binary.BigEndian.Uint64(got)) != want {
					t.Fatalf("after crash %d (sync interval %v, progress at batch %d): key %d holds %x (present %v), want %d (present %v)", round, interval, p.BatchID, k, got, ok, want, found)
				}
			}
			b.Close()
		}
		s.Close()
		if interval > 0 && lost == 0 {
			t.Fatal("no crash lost an unsynced batch: the test does not reach the case it is for")
		}
	}
}

// TestCloseWithASnapshotOpen: a snapshot still open when the store closes
// holds Close no longer than its close timeout: Close says the store did
// not close rather than waiting for the snapshot, and a snapshot asked
// for after Close began is refused.
func TestCloseWithASnapshotOpen(t *testing.T) {
	fs := vfs.NewMem()
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs, CloseTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Put(runtime.Var{}, []byte("k"), nil, []byte("v"))
	if err := s.Commit(b, runtime.Progress{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.ReadSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err == nil || !strings.Contains(err.Error(), "did not close") {
		t.Fatalf("Close with a snapshot open: %v, want an error saying the store did not close", err)
	}
	if _, err := s.ReadSnapshot(); !errors.Is(err, runtime.ErrStoreClosed) {
		t.Fatalf("a snapshot asked for after Close: %v, want ErrStoreClosed", err)
	}
	// Once the snapshot is closed, the store finishes closing and gives
	// its directory back: it opens again.
	if err := snap.Close(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		again, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
		if err == nil {
			if err := again.Close(); err != nil {
				t.Fatal(err)
			}
			break
		}
		if !errors.Is(err, runtime.ErrCheckpointInUse) || time.Now().After(deadline) {
			t.Fatalf("the store's directory after its snapshot closed: %v", err)
		}
		time.Sleep(time.Millisecond) // the store's own goroutine releases it
	}
}

// TestCheckMetaOfStoredWindows: a checkpoint written before it described
// its windows is compared with the pipeline's windows through a window
// it stores: another length is refused whatever the options, another
// start unless changes are allowed, cumulative windows (which came
// after) whatever the options; the same windows start, and the
// checkpoint then describes them. With no window stored, any windows
// start.
func TestCheckMetaOfStoredWindows(t *testing.T) {
	windowed := func(w *runtime.WindowsMeta) runtime.Meta {
		return runtime.Meta{Sources: []string{"memory:in"}, Operators: []runtime.OperatorMeta{{
			Kind: "windowedAggregate", Name: "counts", KeyType: "window+string", Windows: w,
			States: map[string]*codec.Schema{"aggregate": nil}}}}
	}
	minute := &runtime.WindowsMeta{Size: time.Minute, Slide: time.Minute}
	for _, tc := range []struct {
		now     *runtime.WindowsMeta
		want    string // "" to start
		allowed bool
	}{
		{&runtime.WindowsMeta{Size: 2 * time.Minute, Slide: 2 * time.Minute}, "is 1m0s long, and its windows are now 2m0s long", false},
		{&runtime.WindowsMeta{Size: 2 * time.Minute, Slide: time.Minute}, "is 1m0s long, and its windows are now 2m0s long, one every 1m0s", false},
		{&runtime.WindowsMeta{Size: time.Minute, Slide: time.Minute, Offset: 10 * time.Second}, "is none of its windows now (1m0s long, starting 10s past the epoch (modulo 1m0s))", true},
		// Cumulative windows came after windows were described: the
		// stored ones are tumbling, whose full-length windows are the
		// cumulative ones' last.
		{&runtime.WindowsMeta{Size: time.Minute, Slide: time.Minute, Step: 10 * time.Second}, "is of tumbling or sliding windows (the checkpoint was written before it described its windows), and its windows are now from 10s to 1m0s long by 10s", false},
		{minute, "", true},
	} {
		// With no window stored, any windows start.
		empty := open(t, vfs.NewMem(), runtime.StoreOptions{})
		if _, _, err := empty.CheckMeta(windowed(nil), false); err != nil {
			t.Fatal(err)
		}
		if _, _, err := empty.CheckMeta(windowed(tc.now), false); err != nil {
			t.Errorf("windows %v on a checkpoint with no window stored: %v", tc.now, err)
		}
		empty.Close()

		s := open(t, vfs.NewMem(), runtime.StoreOptions{})
		if _, _, err := s.CheckMeta(windowed(nil), false); err != nil {
			t.Fatal(err)
		}
		b := s.NewBatch()
		start := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC).UnixNano()
		key := append(runtime.AppendTimedKey(runtime.AppendTimedKey(nil, start), start+int64(time.Minute)), "u1"...)
		if err := b.Put(runtime.Var{}, key, nil, []byte("1")); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(b, runtime.Progress{BatchID: 0}); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.CheckMeta(windowed(tc.now), false)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("windows %v: %v", tc.now, err)
		case tc.want != "" && (!errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("windows %v: %v, want a refusal saying %q", tc.now, err, tc.want)
		case tc.want != "":
			if _, _, err := s.CheckMeta(windowed(tc.now), true); tc.allowed != (err == nil) {
				t.Errorf("windows %v with the change allowed: %v", tc.now, err)
			}
		}
		s.Close()
	}
}

// TestStoreClosedTwice: a second Close returns what the first did, where
// it panicked (a deferred Close after an explicit one is common).
func TestStoreClosedTwice(t *testing.T) {
	fs := vfs.NewMem()
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("the second Close: %v, want the first's nil", err)
	}
	again, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
	if err != nil {
		t.Fatalf("open after two Closes: %v", err)
	}
	again.Close()
}

// TestCheckpointInNewDirectoriesSurvivesACrash: a checkpoint whose
// directory, and the directories above it, the store made is still there
// after a machine crash once a batch has committed: each directory made
// is named in a synced parent.
func TestCheckpointInNewDirectoriesSurvivesACrash(t *testing.T) {
	fs := vfs.NewCrashableMem()
	dir := fs.PathJoin("data", "queries", "ckpt")
	s, err := runtime.OpenStore(dir, runtime.StoreOptions{FS: fs})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	b.Put(sumVar, []byte("k"), nil, u64(7))
	if err := s.Commit(b, runtime.Progress{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 0})
	s.Close()
	s, err = runtime.OpenStore(dir, runtime.StoreOptions{FS: crashed})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p, ok, err := s.Progress(); err != nil || !ok || p.BatchID != 0 {
		t.Fatalf("after the crash: progress %+v (%v, %v), want batch 0 committed", p, ok, err)
	}
}

// variableMeta is the description of a transformWithState operator with
// one state variable, "total", described by v.
func variableMeta(v runtime.VariableMeta) runtime.Meta {
	return runtime.Meta{
		Sources: []string{"memory:in"},
		Operators: []runtime.OperatorMeta{{Kind: "transformWithState", Name: "counts", OutputMode: "Append", KeyType: "string",
			States: map[string]*codec.Schema{"total": nil}, Variables: map[string]runtime.VariableMeta{"total": v}}},
	}
}

// TestCheckMetaRefusesOtherBasicTypes: a state variable of a basic type
// (ValueState[int64] become ValueState[float64]), a map state's keys of
// another basic type, or of a record whose fields changed, are refused
// at start, naming the variable and both types: their stored bytes read
// as the new type were garbage, or their entries were not found.
func TestCheckMetaRefusesOtherBasicTypes(t *testing.T) {
	field := func(name string, id uint32, kind codec.Kind, goType string) codec.Field {
		return codec.Field{Name: name, ID: id, Type: &codec.Type{Kind: kind, Go: goType, Bits: 64}}
	}
	page := &codec.Schema{Name: "x.Page", Fields: []codec.Field{field("URL", 1, codec.KindString, "string")}}
	pageMore := &codec.Schema{Name: "x.Page", Fields: []codec.Field{field("URL", 1, codec.KindString, "string"), field("Lang", 2, codec.KindString, "string")}}
	for _, tc := range []struct {
		name     string
		was, now runtime.VariableMeta
		want     string
	}{
		{"value type", runtime.VariableMeta{Kind: "value", ValueType: "int64"}, runtime.VariableMeta{Kind: "value", ValueType: "float64"},
			`state variable "total" held int64 values, now holds float64`},
		{"map key type", runtime.VariableMeta{Kind: "map", ValueType: "int64", MapKeyType: "string"}, runtime.VariableMeta{Kind: "map", ValueType: "int64", MapKeyType: "int64"},
			`state variable "total" had keys of type string, now of type int64`},
		{"map key fields", runtime.VariableMeta{Kind: "map", ValueType: "int64", MapKeyType: "record", MapKey: page}, runtime.VariableMeta{Kind: "map", ValueType: "int64", MapKeyType: "record", MapKey: pageMore},
			`state variable "total": its key x.Page: its fields were (URL string), are now (URL string, Lang string)`},
	} {
		for _, allow := range []bool{false, true} {
			s := open(t, vfs.NewMem(), runtime.StoreOptions{})
			if _, _, err := s.CheckMeta(variableMeta(tc.was), false); err != nil {
				t.Fatal(err)
			}
			if _, _, err := s.CheckMeta(variableMeta(tc.was), false); err != nil {
				t.Fatalf("%s: unchanged: %v", tc.name, err)
			}
			_, _, err := s.CheckMeta(variableMeta(tc.now), allow)
			if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (AllowPipelineChanges %v): %v, want it refused: %s", tc.name, allow, err, tc.want)
			}
			s.Close()
		}
	}
}

// TestCheckMetaRefusesBinaryKeyChanges: a grouping key record in its
// binary encoding (it has a nested struct, so no ordered one) whose
// fields change, at the top or nested, is refused at start: every key's
// bytes change, and each key would start from empty state, the old
// entries kept for ever. The same key starts.
func TestCheckMetaRefusesBinaryKeyChanges(t *testing.T) {
	str := func(name string, id uint32) codec.Field {
		return codec.Field{Name: name, ID: id, Type: &codec.Type{Kind: codec.KindString, Go: "string"}}
	}
	key := func(loc []codec.Field, top ...codec.Field) runtime.Meta {
		k := &codec.Schema{Name: "x.Key", Fields: append([]codec.Field{str("User", 1),
			{Name: "Where", ID: 2, Type: &codec.Type{Kind: codec.KindStruct, Go: "x.Loc", Struct: &codec.Schema{Name: "x.Loc", Fields: loc}}}}, top...)}
		m := meta(map[string]*codec.Schema{"state": nil})
		m.Operators[0].KeyType, m.Operators[0].Key = "record", k
		return m
	}
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	city := []codec.Field{str("City", 3)}
	if _, _, err := s.CheckMeta(key(city), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CheckMeta(key(city), false); err != nil {
		t.Fatalf("the same key: %v", err)
	}
	for name, m := range map[string]runtime.Meta{
		"a field added":        key(city, codec.Field{Name: "Shard", ID: 4, Type: &codec.Type{Kind: codec.KindInt, Go: "int", Bits: 64}}),
		"a nested field added": key(append(city, str("Zip", 5))),
	} {
		_, _, err := s.CheckMeta(m, true)
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), "key x.Key: its fields were") {
			t.Errorf("%s: %v, want it refused", name, err)
		}
	}
}

// TestRenamedNestedFieldRefused: a field of a struct nested in the state
// (in a field or in a list) that disappears while one of its type
// appears is refused as a top-level one is (its values were dropped
// without a word).
func TestRenamedNestedFieldRefused(t *testing.T) {
	i64 := func(name string, id uint32) codec.Field {
		return codec.Field{Name: name, ID: id, Type: &codec.Type{Kind: codec.KindInt, Go: "int64", Bits: 64}}
	}
	state := func(stats codec.Field, inList bool) *codec.Schema {
		nested := &codec.Type{Kind: codec.KindStruct, Go: "x.Stats", Struct: &codec.Schema{Name: "x.Stats", Fields: []codec.Field{stats}}}
		if inList {
			nested = &codec.Type{Kind: codec.KindList, Go: "[]x.Stats", Elem: nested}
		}
		return &codec.Schema{Name: "x.Total", Fields: []codec.Field{i64("N", 1), {Name: "Stats", ID: 2, Type: nested}}}
	}
	for _, inList := range []bool{false, true} {
		s := open(t, vfs.NewMem(), runtime.StoreOptions{})
		if _, _, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": state(i64("Count", 3), inList)}), false); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.CheckMeta(meta(map[string]*codec.Schema{"state": state(i64("Total", 4), inList)}), false)
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || !strings.Contains(err.Error(), `state "state".Stats: field Count (int64) is gone and field Total of the same type is new`) {
			t.Errorf("in a list %v: %v, want the nested rename refused", inList, err)
		}
		s.Close()
	}
}

// TestCheckMetaAcceptsWiderIntegers: every integer of a basic state value
// or map key is stored in 8 bytes, and a key record's integers as
// varints of any width: a ValueState[int32] become ValueState[int64], a
// map's int keys become int64, a key record's int32 field become int64,
// start; a narrower integer, or one of the other signedness, is refused.
func TestCheckMetaAcceptsWiderIntegers(t *testing.T) {
	for _, tc := range []struct {
		was, now runtime.VariableMeta
		ok       bool
	}{
		{runtime.VariableMeta{Kind: "value", ValueType: "int32"}, runtime.VariableMeta{Kind: "value", ValueType: "int64"}, true},
		{runtime.VariableMeta{Kind: "value", ValueType: "int"}, runtime.VariableMeta{Kind: "value", ValueType: "int64"}, true},
		{runtime.VariableMeta{Kind: "map", ValueType: "int64", MapKeyType: "uint16"}, runtime.VariableMeta{Kind: "map", ValueType: "int64", MapKeyType: "uint"}, true},
		{runtime.VariableMeta{Kind: "value", ValueType: "int64"}, runtime.VariableMeta{Kind: "value", ValueType: "int32"}, false},
		{runtime.VariableMeta{Kind: "value", ValueType: "int64"}, runtime.VariableMeta{Kind: "value", ValueType: "uint64"}, false},
		{runtime.VariableMeta{Kind: "value", ValueType: "float32"}, runtime.VariableMeta{Kind: "value", ValueType: "float64"}, false},
	} {
		s := open(t, vfs.NewMem(), runtime.StoreOptions{})
		if _, _, err := s.CheckMeta(variableMeta(tc.was), false); err != nil {
			t.Fatal(err)
		}
		_, _, err := s.CheckMeta(variableMeta(tc.now), false)
		if tc.ok != (err == nil) {
			t.Errorf("%s to %s: %v, want accepted %v", tc.was.ValueType+tc.was.MapKeyType, tc.now.ValueType+tc.now.MapKeyType, err, tc.ok)
		}
		s.Close()
	}

	key := func(bits int, goType string) runtime.Meta {
		k := &codec.Schema{Name: "x.Key", Fields: []codec.Field{
			{Name: "Shard", ID: 1, Type: &codec.Type{Kind: codec.KindInt, Go: goType, Bits: bits}},
			{Name: "Where", ID: 2, Type: &codec.Type{Kind: codec.KindStruct, Go: "x.Loc", Struct: &codec.Schema{Name: "x.Loc", Fields: []codec.Field{
				{Name: "City", ID: 3, Type: &codec.Type{Kind: codec.KindString, Go: "string"}}}}}},
		}}
		m := meta(map[string]*codec.Schema{"state": nil})
		m.Operators[0].KeyType, m.Operators[0].Key = "record", k
		return m
	}
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	if _, _, err := s.CheckMeta(key(32, "int32"), false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.CheckMeta(key(64, "int64"), false); err != nil {
		t.Errorf("a binary key's int32 field become int64: %v, want it accepted", err)
	}
}

// commitKeys commits batch round, which sets key-000000 and on, keys of
// them, to value(round, i).
func commitKeys(t *testing.T, s *runtime.Store, round, keys int, value func(round, i int) []byte) {
	t.Helper()
	b := s.NewBatch()
	for i := range keys {
		if err := b.Put(sumVar, fmt.Appendf(nil, "key-%06d", i), nil, value(round, i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(b, runtime.Progress{BatchID: int64(round)}); err != nil {
		t.Fatal(err)
	}
}

// TestMemTableSize: a store's memtables are 64 MiB unless set, so that
// batches of about 6 MB of writes (over half of Pebble's 4 MiB memtable)
// gather in one memtable and no table is flushed; with MemTableSize at 4
// MiB, or in a store that shares caches (which keeps Pebble's 4 MiB), each
// batch becomes a memtable of its own, flushed to a table. What was written reads back
// either way.
func TestMemTableSize(t *testing.T) {
	const rounds, keys = 3, 50000
	value := func(round, i int) []byte { return fmt.Appendf(nil, "%d-%d-%s", round, i, strings.Repeat("v", 100)) }
	for _, c := range []struct {
		name     string
		opts     runtime.StoreOptions
		perBatch bool // each batch flushed to a table
	}{
		{name: "default", opts: runtime.StoreOptions{}},
		{name: "4MiB", opts: runtime.StoreOptions{MemTableSize: 4 << 20}, perBatch: true},
		{name: "shared", opts: runtime.StoreOptions{Shared: runtime.NewSharedCaches(0, 0)}, perBatch: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := open(t, vfs.NewMem(), c.opts)
			defer s.Close()
			for round := range rounds {
				commitKeys(t, s, round, keys, value)
			}
			m := s.Metrics()
			t.Logf("flushes %d, tables %d", m.Flushes, m.TableCount)
			// A batch waits for the flushes of the memtables queued
			// before it past two: by the third, one flush is done.
			if c.perBatch && m.Flushes == 0 || !c.perBatch && (m.Flushes > 0 || m.TableCount > 0) {
				t.Fatalf("%d flushes and %d tables after %d batches of %d keys", m.Flushes, m.TableCount, rounds, keys)
			}
			b := s.NewBatch()
			defer b.Close()
			for _, i := range []int{0, keys / 2, keys - 1} {
				got, ok, err := b.Get(sumVar, fmt.Appendf(nil, "key-%06d", i), nil)
				if err != nil || !ok || !bytes.Equal(got, value(rounds-1, i)) {
					t.Fatalf("key %d: %q %v %v", i, got, ok, err)
				}
			}
		})
	}
}

// TestStoreOfANewerFormat: a store that a later version wrote (its format
// marker names a format this version does not know, as after a
// downgrade), with or without a commit file, is refused at open as
// incompatible, not as a failure to fix and retry.
func TestStoreOfANewerFormat(t *testing.T) {
	for _, committed := range []bool{false, true} {
		fs := vfs.NewMem()
		s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
		if err != nil {
			t.Fatal(err)
		}
		if committed {
			commitBatches(t, s, 0, 1)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		names, err := fs.List("ckpt")
		if err != nil {
			t.Fatal(err)
		}
		renamed := false
		for _, name := range names {
			if strings.HasPrefix(name, "marker.format-version.") {
				parts := strings.Split(name, ".")
				parts[len(parts)-1] = "999"
				if err := fs.Rename(fs.PathJoin("ckpt", name), fs.PathJoin("ckpt", strings.Join(parts, "."))); err != nil {
					t.Fatal(err)
				}
				renamed = true
			}
		}
		if !renamed {
			t.Fatalf("no format marker among %q", names)
		}
		_, err = runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
		if !errors.Is(err, runtime.ErrIncompatibleCheckpoint) || errors.Is(err, runtime.ErrStoreFailed) ||
			!strings.Contains(err.Error(), "run the version that wrote it, or start from a new checkpoint directory") {
			t.Errorf("committed %v: %v; want the store refused as incompatible", committed, err)
		}
	}
}

// TestDamagedManifestRefused: a MANIFEST that records many flushes, cut
// short or with a byte changed in its middle, is one Pebble opens without
// the tables of its later records (and deletes them); the commit file's
// mark of it refuses such a store at open as corrupt. An undamaged one
// opens with everything committed.
func TestDamagedManifestRefused(t *testing.T) {
	// Few enough flushes that no compaction runs: a record cut off then
	// only added tables, and Pebble opens without them.
	const batches = 3
	build := func() vfs.FS {
		t.Helper()
		fs := vfs.NewMem()
		s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs, MemTableSize: 256 << 10})
		if err != nil {
			t.Fatal(err)
		}
		value := bytes.Repeat([]byte("v"), 100)
		for id := range int64(batches) {
			b := s.NewBatch()
			for i := range 2000 {
				b.Put(sumVar, fmt.Appendf(nil, "k%d-%d", id, i), nil, value)
			}
			if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
				t.Fatal(err)
			}
			if err := s.Flush(); err != nil { // a table, and a MANIFEST record, each
				t.Fatal(err)
			}
		}
		// One more once Pebble's background work is done, so that the
		// mark covers the whole MANIFEST.
		s.MarkedManifest()
		commitBatches(t, s, batches, batches+1)
		name, size := s.MarkedManifest()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		info, err := fs.Stat(fs.PathJoin("ckpt", name))
		if name == "" || err != nil || info.Size() != size {
			t.Fatalf("the commit file marks %q, %d bytes; the file: %v, %v", name, size, info, err)
		}
		return fs
	}
	manifest := func(fs vfs.FS) string {
		names, _ := fs.List("ckpt")
		for _, n := range names {
			if strings.HasPrefix(n, "marker.manifest.") {
				return fs.PathJoin("ckpt", n[strings.LastIndexByte(n, '.')+1:])
			}
		}
		t.Fatal("no manifest marker")
		return ""
	}
	rewrite := func(fs vfs.FS, path string, edit func([]byte) []byte) {
		t.Helper()
		f, err := fs.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		out, err := fs.Create(path, vfs.WriteCategoryUnspecified)
		if err != nil {
			t.Fatal(err)
		}
		out.Write(edit(data))
		out.Close()
	}

	fs := build()
	s, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
	if err != nil {
		t.Fatalf("undamaged: %v", err)
	}
	b := s.NewBatch()
	for _, key := range []string{"k0-0", "k1-1999", "k2-7"} {
		if _, ok, err := b.Get(sumVar, []byte(key), nil); err != nil || !ok {
			t.Errorf("undamaged: %s: %v, %v", key, ok, err)
		}
	}
	b.Close()
	s.Close()

	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		want string
	}{
		{"cut to two thirds", func(b []byte) []byte { return b[:len(b)*2/3] }, "the MANIFEST was cut short"},
		{"a byte changed", func(b []byte) []byte { b[len(b)*2/3] ^= 0x40; return b }, "the MANIFEST's bytes changed"},
	} {
		fs := build()
		rewrite(fs, manifest(fs), c.edit)
		_, err := runtime.OpenStore("ckpt", runtime.StoreOptions{FS: fs})
		if !errors.Is(err, runtime.ErrCorruptCheckpoint) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want the store refused as corrupt, saying %q", c.name, err, c.want)
		}
	}
}
