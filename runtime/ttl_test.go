package runtime_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/runtime"
)

// TestExpiryMatchesAModel runs random batches of writes with and without
// an expiry, deletions and expiry passes (some batches run two passes, or
// write entries that are already due before their pass, which the pass
// must see), and checks each pass's count, every entry after each
// commit and whether an entry is due at each instant ahead (what runs a
// batch without data) against a plain map of what must be there. A state cache that
// is complete, one too small to hold everything, and none read it.
func TestExpiryMatchesAModel(t *testing.T) {
	for _, cache := range []int64{-1, 4 << 10, 64 << 20} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, uint64(cache)))
			s := open(t, vfs.NewMem(), runtime.StoreOptions{StateCacheSize: cache})
			defer s.Close()
			v := runtime.Var{Variable: 1}
			type entry struct {
				value   string
				at      int64
				expires bool
			}
			model := map[string]entry{}
			base := time.Unix(1_000_000, 0).UTC()
			at := func(n int64) time.Time { return base.Add(time.Duration(n) * time.Second) }
			now := int64(0)
			for batch := range 60 {
				b := s.NewBatch()
				for range r.IntN(40) {
					key := fmt.Sprintf("k%03d", r.IntN(120))
					value := fmt.Sprintf("v%d", r.Int())
					switch op := r.IntN(10); {
					case op < 6: // expires from 3 seconds before now to 20 after
						exp := now - 3 + int64(r.IntN(24))
						if err := b.PutExpiring(v, []byte(key), nil, []byte(value), at(exp), runtime.ProcessingTimeExpiry); err != nil {
							t.Fatal(err)
						}
						model[key] = entry{value, exp, true}
					case op < 8:
						if err := b.PutExpiring(v, []byte(key), nil, []byte(value), time.Time{}, runtime.ProcessingTimeExpiry); err != nil {
							t.Fatal(err)
						}
						model[key] = entry{value, 0, false}
					default:
						if err := b.Delete(v, []byte(key), nil); err != nil {
							t.Fatal(err)
						}
						delete(model, key)
					}
				}
				for range 1 + r.IntN(2) {
					want := int64(0)
					for k, e := range model {
						if e.expires && e.at <= now {
							delete(model, k)
							want++
						}
					}
					got, err := b.ExpireState(v.Scope, at(now), time.Time{})
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("batch %d: the expiry pass at %d deleted %d entries, want %d", batch, now, got, want)
					}
				}
				if err := s.Commit(b, runtime.Progress{BatchID: int64(batch)}); err != nil {
					t.Fatal(err)
				}
				check := s.NewBatch()
				for i := range 120 {
					key := fmt.Sprintf("k%03d", i)
					raw, ok, err := check.Get(v, []byte(key), nil)
					if err != nil {
						t.Fatal(err)
					}
					e, want := model[key]
					if ok != want {
						t.Fatalf("batch %d: key %s present=%v, want %v", batch, key, ok, want)
					}
					if !ok {
						continue
					}
					exp, value, err := runtime.ReadExpiring(raw)
					if err != nil {
						t.Fatal(err)
					}
					if string(value) != e.value || e.expires == exp.IsZero() || (e.expires && !exp.Equal(at(e.at))) {
						t.Fatalf("batch %d: key %s = %q expiring %v, want %q expiring at %d", batch, key, value, exp, e.value, e.at)
					}
				}
				// Whether a batch must run to expire something: the
				// index's stale entries (of entries written again with
				// another expiry, or deleted) do not count.
				for until := now; until <= now+22; until++ {
					want := false
					for _, e := range model {
						want = want || e.expires && e.at <= until
					}
					got, err := check.HasExpiringState(v.Scope, at(until), time.Time{})
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Fatalf("batch %d: an entry expires by %d: %v, want %v", batch, until, got, want)
					}
				}
				check.Close()
				now += int64(r.IntN(4))
			}
		})
	}
}

// TestManyStaleExpiries: an entry written again 600 times leaves 599
// stale index entries before its own; whether anything expires by an
// instant reads past all of them (more than one chunk of the scan), to
// the entry's own expiry.
func TestManyStaleExpiries(t *testing.T) {
	s := open(t, vfs.NewMem(), runtime.StoreOptions{})
	defer s.Close()
	v := runtime.Var{Variable: 1}
	base := time.Unix(1_000_000, 0).UTC()
	at := func(n int) time.Time { return base.Add(time.Duration(n) * time.Second) }
	b := s.NewBatch()
	for i := 1; i <= 600; i++ {
		if err := b.PutExpiring(v, []byte("k"), nil, fmt.Appendf(nil, "v%d", i), at(i), runtime.ProcessingTimeExpiry); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Commit(b, runtime.Progress{BatchID: 0}); err != nil {
		t.Fatal(err)
	}
	check := s.NewBatch()
	defer check.Close()
	for _, c := range []struct {
		until int
		want  bool
	}{{1, false}, {599, false}, {600, true}, {5000, true}} {
		got, err := check.HasExpiringState(v.Scope, at(c.until), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("an entry expires by %d: %v, want %v", c.until, got, c.want)
		}
	}
}
