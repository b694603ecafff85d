package runtime

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// The default cache budgets of a store (StoreOptions) and of the caches
// that several stores share (NewSharedCaches).
const (
	DefaultStateCacheSize = 256 << 20
	DefaultBlockCacheSize = 128 << 20
	// DefaultMemTableSize is the size of a store's memtables
	// (StoreOptions.MemTableSize), but for a store that shares caches.
	DefaultMemTableSize = 64 << 20
	// pebbleMemTableSize is Pebble's default memtable size, a sharing
	// store's.
	pebbleMemTableSize = 4 << 20
)

// SharedCaches are memory budgets that the checkpoint stores of several
// queries in one process share, as the tasks of a Kafka App do, so that
// what their caches take does not grow with the number of queries. The
// cache of committed state in front of each store (StateCacheSize) is
// held to an equal share of one budget, rebalanced as stores open and
// close: a store whose share shrinks evicts what is over it at once.
// Each state cache is laid out for the whole budget in address space,
// which costs no memory until it is used. Pebble's block caches may be
// shared too: one block cache then holds the blocks of every store, and
// Pebble also reserves in it the memory of each store's memtables (4 MiB
// each unless StoreOptions.MemTableSize says otherwise, and up to three
// of them while they are flushed), which leaves
// that much less for blocks. The queries are given them with
// WithSharedCaches. Safe for concurrent use.
type SharedCaches struct {
	state *sharedBudget // nil: the state cache is off
	mu    sync.Mutex
	block *pebble.Cache // nil: not shared, or closed
}

// NewSharedCaches returns a budget of stateCacheSize bytes of committed
// state, shared out among the stores (0 is DefaultStateCacheSize; a
// negative size turns the state caches off), and, if blockCacheSize is
// positive, a block cache of that size that the stores share; with 0
// each store has a block cache of its own (StoreOptions.CacheSize, the
// query option BlockCacheSize). Close them once the queries are started
// or stopped: each store holds the block cache while it is open.
func NewSharedCaches(stateCacheSize, blockCacheSize int64) *SharedCaches {
	if stateCacheSize == 0 {
		stateCacheSize = DefaultStateCacheSize
	}
	c := &SharedCaches{}
	if blockCacheSize > 0 {
		c.block = pebble.NewCache(blockCacheSize)
	}
	if stateCacheSize > 0 {
		c.state = &sharedBudget{total: stateCacheSize}
	}
	return c
}

// Close releases the shared block cache's memory once the stores that
// use it have closed. Stores opened after Close have block caches of
// their own.
func (c *SharedCaches) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.block != nil {
		c.block.Unref()
		c.block = nil
	}
}

// blockCache returns the shared block cache with a reference for the
// caller, or nil (no shared caches, or closed).
func (c *SharedCaches) blockCache() *pebble.Cache {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.block != nil {
		c.block.Ref()
	}
	return c.block
}

// stateBudget returns the shared state cache budget, or nil.
func (c *SharedCaches) stateBudget() *sharedBudget {
	if c == nil {
		return nil
	}
	return c.state
}
