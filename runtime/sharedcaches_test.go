package runtime_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/streamgen/streamgen/runtime"
)

// openSharedStore opens the store in dir on mem with caches.
func openSharedStore(t *testing.T, mem vfs.FS, caches *runtime.SharedCaches, dir string) *runtime.Store {
	t.Helper()
	s, err := runtime.OpenStore(dir, runtime.StoreOptions{FS: mem, Shared: caches})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSharedCaches: stores opened with one SharedCaches hold their state
// caches to equal shares of its budget. One store alone fills more than
// half of it; two more opened beside it cut it to a third at once, and
// each stays within a third as they fill theirs; reads through each
// still give its committed values; once the two close, the first grows
// past half again. The stores have one block cache between them.
func TestSharedCaches(t *testing.T) {
	const budget = 4 << 20
	caches := runtime.NewSharedCaches(budget, 64<<20)
	mem := vfs.NewMem()
	openShared := func(dir string) *runtime.Store { return openSharedStore(t, mem, caches, dir) }
	const keys = 40000
	value := func(dir string, k int) []byte {
		return fmt.Appendf(nil, "%s-%d-%s", dir, k, bytes.Repeat([]byte("v"), 80))
	}
	fill := func(s *runtime.Store, dir string) {
		for id := range int64(4) {
			b := s.NewBatch()
			for k := int(id) * keys / 4; k < int(id+1)*keys/4; k++ {
				if err := b.Put(sumVar, fmt.Appendf(nil, "k%d", k), nil, value(dir, k)); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Commit(b, runtime.Progress{BatchID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	readAll := func(s *runtime.Store, dir string) {
		b := s.NewBatch()
		defer b.Close()
		for k := range keys {
			v, ok, err := b.Get(sumVar, fmt.Appendf(nil, "k%d", k), nil)
			if err != nil || !ok || !bytes.Equal(v, value(dir, k)) {
				t.Fatalf("%s: key %d reads %q, %v, %v", dir, k, v, ok, err)
			}
		}
	}
	cached := func(s *runtime.Store) int64 { return s.Metrics().StateCacheBytes }

	a := openShared("a")
	defer a.Close()
	fill(a, "a")
	if got := cached(a); got <= budget/2 || got > budget {
		t.Fatalf("alone, the cache holds %d bytes: want over half the budget of %d, and within it", got, budget)
	}
	b, c := openShared("b"), openShared("c")
	if got := cached(a); got > budget/3 {
		t.Fatalf("with two more stores open, the first's cache holds %d bytes, over a third of %d", got, budget)
	}
	fill(b, "b")
	fill(c, "c")
	readAll(a, "a")
	readAll(b, "b")
	readAll(c, "c")
	for i, s := range []*runtime.Store{a, b, c} {
		if got := cached(s); got > budget/3 {
			t.Fatalf("store %d's cache holds %d bytes, over a third of %d", i, got, budget)
		}
	}
	// Seen from two stores, one cache has one size (read twice: Pebble's
	// background work may load a block between the two reads).
	for try := 0; ; try++ {
		ma, mb := a.Metrics(), b.Metrics()
		if ma.BlockCacheBytes != 0 && ma.BlockCacheBytes == mb.BlockCacheBytes {
			break
		}
		if try == 10 {
			t.Fatalf("block cache: %d bytes seen from one store, %d from another: not one cache", ma.BlockCacheBytes, mb.BlockCacheBytes)
		}
	}
	for _, s := range []*runtime.Store{b, c} {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	caches.Close()
	readAll(a, "a")
	if got := cached(a); got <= budget/2 {
		t.Fatalf("alone again, the cache holds %d bytes: want over half the budget of %d", got, budget)
	}
}

// TestSharedCachesConcurrently: stores that commit and read at once, on
// their own goroutines, while another store opens and closes beside them
// again and again (each open and close reshares the budget under them),
// still read back every value they committed.
func TestSharedCachesConcurrently(t *testing.T) {
	caches := runtime.NewSharedCaches(1<<20, 0)
	defer caches.Close()
	mem := vfs.NewMem()
	openShared := func(dir string) *runtime.Store { return openSharedStore(t, mem, caches, dir) }
	batches := 40
	if testing.Short() {
		batches = 15
	}
	const keys = 3000
	done := make(chan error, 3)
	for w := range 3 {
		dir := fmt.Sprint("w", w)
		s := openShared(dir)
		go func() {
			defer s.Close()
			latest := map[int]int{}
			for id := range batches {
				b := s.NewBatch()
				for k := id * 97 % keys; k < keys; k += 7 {
					// Read, then write the next version of the key.
					v, ok, err := b.Get(sumVar, fmt.Appendf(nil, "k%d", k), nil)
					if err == nil && ok != (latest[k] > 0) || err == nil && ok && string(v) != fmt.Sprint(dir, "/", k, "/", latest[k]) {
						err = fmt.Errorf("%s batch %d: key %d reads %q (%v), want version %d", dir, id, k, v, ok, latest[k])
					}
					if err == nil {
						latest[k]++
						err = b.Put(sumVar, fmt.Appendf(nil, "k%d", k), nil, fmt.Appendf(nil, "%s/%d/%d", dir, k, latest[k]))
					}
					if err != nil {
						b.Close()
						done <- err
						return
					}
				}
				if err := s.Commit(b, runtime.Progress{BatchID: int64(id)}); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
	}
	stop := make(chan struct{})
	churned := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				churned <- n
				return
			default:
			}
			// Not openShared: t.Fatal must not be called off the test's
			// goroutine.
			s, err := runtime.OpenStore("churn", runtime.StoreOptions{FS: mem, Shared: caches})
			if err == nil {
				err = s.Close()
			}
			if err != nil {
				t.Error(err)
				churned <- n
				return
			}
			n++
		}
	}()
	for range 3 {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	if n := <-churned; n == 0 {
		t.Error("no store opened and closed beside the writers")
	}
}
