package runtime

// StoreProgress reports the state store, Pebble, as it stands at the end of
// a batch: what Spark puts in its state operators' customMetrics for the
// RocksDB state store. One store holds the state of every operator of a
// query, so a report has one StoreProgress, not one per operator. Sizes
// are in bytes; the counts of compactions and flushes are since the store
// was opened (this run), so they only grow within a run.
type StoreProgress struct {
	// MemtableBytes is the memory held by Pebble's memtables (writes not
	// yet flushed to tables), MemtableCount their number.
	MemtableBytes int64 `json:"memtableBytes"`
	MemtableCount int64 `json:"memtableCount"`
	// BlockCacheBytes is the memory Pebble's block cache holds (see
	// StoreOptions.CacheSize); BlockCacheHits and BlockCacheMisses count
	// its lookups since the store was opened.
	BlockCacheBytes  int64 `json:"blockCacheBytes"`
	BlockCacheHits   int64 `json:"blockCacheHits"`
	BlockCacheMisses int64 `json:"blockCacheMisses"`
	// StateCacheBytes is the memory the cache of committed state in front
	// of Pebble uses, of its budget (StateCacheSize): the live keys and
	// values and the slots of their entries. StateCacheEntries counts the
	// entries, StateCacheHits and StateCacheMisses its lookups since the
	// store was opened. All are 0 with the cache turned off.
	StateCacheBytes   int64 `json:"stateCacheBytes"`
	StateCacheEntries int64 `json:"stateCacheEntries"`
	StateCacheHits    int64 `json:"stateCacheHits"`
	StateCacheMisses  int64 `json:"stateCacheMisses"`
	// Compactions and Flushes count the compactions and memtable flushes
	// Pebble has run; CompactionDebtBytes estimates the bytes it still has
	// to compact to reach a stable shape.
	Compactions         int64 `json:"compactions"`
	Flushes             int64 `json:"flushes"`
	CompactionDebtBytes int64 `json:"compactionDebtBytes"`
	// ReadAmplification is the number of sorted runs a read may look
	// through (sublevels of level 0 plus the other non-empty levels).
	ReadAmplification int64 `json:"readAmplification"`
	// TableBytes and TableCount are the live tables on disk; WALBytes is
	// the write-ahead log's files on disk; DiskBytes is everything the
	// store has on disk (tables, including obsolete ones not yet deleted,
	// logs, manifest and options).
	TableBytes int64 `json:"tableBytes"`
	TableCount int64 `json:"tableCount"`
	WALBytes   int64 `json:"walBytes"`
	DiskBytes  int64 `json:"diskBytes"`
	// DiskAvailableBytes is the free space of the checkpoint's file
	// system, and DiskReserveBytes the part of it the store keeps free
	// (DiskReserve): a batch whose commit would leave less ends the query
	// with ErrDiskFull. Both are 0 when the file system cannot report its
	// usage, and the reserve is 0 when it is turned off.
	DiskAvailableBytes int64 `json:"diskAvailableBytes"`
	DiskReserveBytes   int64 `json:"diskReserveBytes"`
}

// Metrics returns the store's figures now: one call of Pebble's
// DB.Metrics, which takes its mutex briefly. Safe for concurrent use with
// the store's other methods except Close; a store that is closing, closed
// or failed returns the zero StoreProgress.
func (s *Store) Metrics() (p StoreProgress) {
	select {
	case <-s.stop:
		return StoreProgress{}
	default:
	}
	if s.Err() != nil {
		return StoreProgress{}
	}
	defer func() {
		if recover() != nil { // Pebble closed under us: no figures
			p = StoreProgress{}
		}
	}()
	m := s.db.Metrics()
	p = StoreProgress{
		MemtableBytes:       int64(m.MemTable.Size),
		MemtableCount:       m.MemTable.Count,
		BlockCacheBytes:     m.BlockCache.Size,
		BlockCacheHits:      m.BlockCache.Hits,
		BlockCacheMisses:    m.BlockCache.Misses,
		Compactions:         m.Compact.Count,
		Flushes:             m.Flush.Count,
		CompactionDebtBytes: int64(m.Compact.EstimatedDebt),
		ReadAmplification:   int64(m.ReadAmp()),
		TableBytes:          int64(m.Table.Local.LiveSize),
		TableCount:          int64(m.Table.Local.LiveCount),
		WALBytes:            int64(m.WAL.PhysicalSize),
		DiskBytes:           int64(m.DiskSpaceUsage()),
	}
	if u, reserve, ok := s.diskUsage(); ok {
		p.DiskAvailableBytes, p.DiskReserveBytes = int64(u.AvailBytes), int64(reserve)
	}
	if s.state != nil {
		st := s.state.stats()
		p.StateCacheBytes, p.StateCacheEntries, p.StateCacheHits, p.StateCacheMisses = st.bytes, st.entries, st.hits, st.misses
	}
	return p
}

// cacheStats are a stateCache's figures for StoreProgress.
type cacheStats struct {
	bytes, entries, hits, misses int64
}

// stats returns the cache's figures: the bytes of its live keys and
// values and of the slots in use.
func (c *stateCache) stats() cacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	entries := int64(len(c.entries) - len(c.free))
	return cacheStats{bytes: c.live + entries*cacheEntrySize, entries: entries, hits: c.hits, misses: c.misses}
}
