package runtime

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// batchRecord is one write of a batch, as read back.
type batchRecord struct {
	kind       pebble.InternalKeyKind
	key, value string
}

func readBatch(t *testing.T, b *pebble.Batch) []batchRecord {
	t.Helper()
	var out []batchRecord
	r := b.Reader()
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out = append(out, batchRecord{kind, string(key), string(value)})
	}
}

// TestSortedCopy checks the copy of a large batch in key order against a
// stable sort of its writes by bytes.Compare that keeps each key's last
// write, for keys that share long prefixes, are prefixes of each other,
// hold zero bytes, are empty, or are written more than once; and that
// committing the copy leaves the store as committing the batch would.
func TestSortedCopy(t *testing.T) {
	gens := map[string]func(r *rand.Rand) []byte{
		// State keys as the store lays them out: prefix, length, key.
		"state": func(r *rand.Rand) []byte {
			return entryKey(nil, Var{Scope: Scope{Partition: uint32(r.IntN(3)), Operator: 0}, Variable: uint8(r.IntN(2))}, fmt.Appendf(nil, "user-%08d", r.IntN(50_000)))
		},
		// Short keys over a small alphabet with zeros: many prefixes of
		// one another and many zero-padded look-alikes.
		"prefixes": func(r *rand.Rand) []byte {
			k := make([]byte, r.IntN(20))
			for i := range k {
				k[i] = []byte{0, 1, 'a'}[r.IntN(3)]
			}
			return k
		},
		// Long keys that differ only far in.
		"long": func(r *rand.Rand) []byte {
			k := bytes.Repeat([]byte{'x'}, 8+r.IntN(40))
			k[len(k)-1-r.IntN(4)] = byte(r.IntN(256))
			return k
		},
	}
	for name, gen := range gens {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, 2))
			db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			b := db.NewBatch()
			for b.Len() < sortedBatchMin+(1<<20) {
				k := gen(r)
				if r.IntN(5) == 0 {
					if err := b.Delete(k, nil); err != nil {
						t.Fatal(err)
					}
					continue
				}
				if err := b.Set(k, fmt.Appendf(nil, "v%d-%s", r.Int(), bytes.Repeat([]byte{'.'}, r.IntN(64))), nil); err != nil {
					t.Fatal(err)
				}
			}
			// The writes in key order, stably, each key's last only.
			all := readBatch(t, b)
			slices.SortStableFunc(all, func(x, y batchRecord) int { return bytes.Compare([]byte(x.key), []byte(y.key)) })
			var want []batchRecord
			for i, rec := range all {
				if i+1 < len(all) && all[i+1].key == rec.key {
					continue
				}
				want = append(want, rec)
			}
			if len(want) == len(all) {
				t.Fatal("no key is written twice: the test does not reach the case")
			}

			var s batchSorter
			sorted, ok, err := s.sortedCopy(db, b)
			if err != nil || !ok {
				t.Fatalf("sortedCopy: ok %v, err %v", ok, err)
			}
			got := readBatch(t, sorted)
			if len(got) != len(want) || sorted.Count() != uint32(len(want)) {
				t.Fatalf("%d writes in the copy (count %d), want %d", len(got), sorted.Count(), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("write %d of the copy is %+v, want %+v", i, got[i], want[i])
				}
			}

			// The copy commits what the batch would.
			model := map[string]string{}
			for _, rec := range readBatch(t, b) {
				if rec.kind == pebble.InternalKeyKindSet {
					model[rec.key] = rec.value
				} else {
					delete(model, rec.key)
				}
			}
			b.Close()
			if err := sorted.Commit(pebble.NoSync); err != nil {
				t.Fatal(err)
			}
			it, err := db.NewIter(nil)
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for it.First(); it.Valid(); it.Next() {
				if v, ok := model[string(it.Key())]; !ok || v != string(it.Value()) {
					t.Fatalf("store holds %q = %q; want %q (present %v)", it.Key(), it.Value(), v, ok)
				}
				n++
			}
			if err := it.Close(); err != nil {
				t.Fatal(err)
			}
			if n != len(model) {
				t.Fatalf("store holds %d keys, want %d", n, len(model))
			}
		})
	}
}

// TestSortedCopyLeavesOrder checks that a batch is committed in its own
// order when moving its writes could change what they do (a write in a
// range after its deletion) or would gain nothing (a small batch).
func TestSortedCopyLeavesOrder(t *testing.T) {
	db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var s batchSorter
	small := db.NewBatch()
	defer small.Close()
	small.Set([]byte("b"), nil, nil)
	small.Set([]byte("a"), nil, nil)
	if _, ok, _ := s.sortedCopy(db, small); ok {
		t.Error("a small batch was copied")
	}
	ranged := db.NewBatch()
	defer ranged.Close()
	for i := 0; ranged.Len() < sortedBatchMin+1024; i++ {
		ranged.Set(fmt.Appendf(nil, "k%09d", 1_000_000_000-i), make([]byte, 100), nil)
		if i == 10 {
			ranged.DeleteRange([]byte("k"), []byte("l"), nil)
		}
	}
	if _, ok, _ := s.sortedCopy(db, ranged); ok {
		t.Error("a batch that writes in a range after deleting it was copied")
	}
}

// TestSortedCopyRangeDeletions checks that a batch whose range deletions
// each come after its writes in their range is copied in key order with
// the deletions last, and that committing the copy leaves the store as
// committing the batch would: over keys of five prefixes, some of them
// written before the batch, the batch deletes a prefix's range now and
// then and writes no more of it.
func TestSortedCopyRangeDeletions(t *testing.T) {
	open := func() *pebble.DB {
		db, err := pebble.Open("", &pebble.Options{FS: vfs.NewMem(), Logger: quietLogger{}})
		if err != nil {
			t.Fatal(err)
		}
		return db
	}
	before, after := open(), open()
	defer before.Close()
	defer after.Close()
	for _, db := range []*pebble.DB{before, after} {
		for i := range 1000 {
			if err := db.Set(fmt.Appendf(nil, "%c%05d", 'a'+i%5, i), []byte("committed"), nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	r := rand.New(rand.NewPCG(3, 4))
	b := before.NewBatch()
	defer b.Close()
	open5 := []byte("abcde")
	deletions := 0
	for b.Len() < sortedBatchMin+(1<<19) {
		p := open5[r.IntN(len(open5))]
		if len(open5) > 1 && r.IntN(4000) == 0 {
			// The prefix's range goes, and is written no more.
			if err := b.DeleteRange([]byte{p}, []byte{p + 1}, nil); err != nil {
				t.Fatal(err)
			}
			open5 = bytes.ReplaceAll(open5, []byte{p}, nil)
			deletions++
			continue
		}
		k := fmt.Appendf(nil, "%c%05d", p, r.IntN(3000))
		if r.IntN(5) == 0 {
			b.Delete(k, nil)
			continue
		}
		b.Set(k, fmt.Appendf(nil, "v%d", r.Int()), nil)
	}
	if deletions == 0 {
		t.Fatal("no range deletion: the test does not reach the case")
	}
	var s batchSorter
	sorted, ok, err := s.sortedCopy(after, b)
	if err != nil || !ok {
		t.Fatalf("sortedCopy: ok %v, err %v", ok, err)
	}
	recs := readBatch(t, sorted)
	for i := 1; i < len(recs)-deletions; i++ {
		if recs[i-1].key >= recs[i].key {
			t.Fatalf("write %d of the copy (%q) is not after write %d (%q)", i, recs[i].key, i-1, recs[i-1].key)
		}
	}
	for _, rec := range recs[len(recs)-deletions:] {
		if rec.kind != pebble.InternalKeyKindRangeDelete {
			t.Fatalf("the copy ends with %+v, want its %d range deletions", rec, deletions)
		}
	}
	if err := sorted.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		t.Fatal(err)
	}
	read := func(db *pebble.DB) []string {
		it, err := db.NewIter(nil)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for it.First(); it.Valid(); it.Next() {
			out = append(out, string(it.Key())+"="+string(it.Value()))
		}
		if err := it.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	want, got := read(before), read(after)
	if !slices.Equal(got, want) {
		t.Fatalf("the copy leaves %d keys, the batch %d", len(got), len(want))
	}
}

// quietLogger keeps Pebble's informational lines out of test output.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
