package runtime

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// CheckpointReader is a query's checkpoint opened read-only, to look at
// what the query left in it without the query's code, as Spark's state
// data source does: the pipeline's description with the schemas of its
// state, the progress of the last committed batch, and the state and
// timers, decoded through the stored schemas. streamgen inspect is built
// on it.
//
// It takes the checkpoint's lock, as a query does, so a query cannot
// start on it while it is open. A checkpoint a query runs on (in any
// process) is read from a snapshot the query makes on request, without
// stopping it: its state as of the last batch committed when the reader
// was opened (Live reports it). It never writes: Pebble is opened read-only, replaying its log in
// memory (the lock file, which every open of the store takes, is the one
// file it opens for writing). A CheckpointReader is safe for concurrent
// use; Close releases it, and the slices its callbacks are given are valid
// during the call only.
type CheckpointReader struct {
	s *Store
	// r is what it reads: the store's Pebble, or a snapshot of it (a
	// running query's, see Query.ReadState), which release closes.
	r       pebble.Reader
	release func() error
	// committed is the batch id of the commit file, -1 for none.
	committed int64
	// live is set for a snapshot of a running query's checkpoint.
	live bool
	// closing makes Close's work happen once; closeErr is its result.
	closing  sync.Once
	closeErr error
}

// Live reports whether the reader reads a snapshot of a running query's
// checkpoint (taken when it was opened), rather than a checkpoint no
// query held.
func (c *CheckpointReader) Live() bool { return c.live }

// OpenCheckpoint opens the checkpoint in dir read-only. It refuses a
// directory that holds no checkpoint. One that a running query holds is
// read from a snapshot the query makes (see CheckpointReader); a query
// that does not answer within 30 s gives an error wrapping
// ErrCheckpointInUse.
func OpenCheckpoint(dir string) (*CheckpointReader, error) {
	return OpenCheckpointFS(vfs.Default, dir)
}

// OpenCheckpointFS is OpenCheckpoint on the file system fsys.
func OpenCheckpointFS(fsys vfs.FS, dir string) (*CheckpointReader, error) {
	return openCheckpoint(fsys, dir, true)
}

// OpenIdleCheckpointFS is OpenCheckpointFS for a checkpoint that no query
// holds: one in use gives an error wrapping ErrCheckpointInUse at once,
// rather than a snapshot asked of its query and waited for. It is for a
// caller that has no need of a checkpoint in use (a look at what a
// machine holds before its queries start), and whose holder may not be a
// query that answers (another reader).
func OpenIdleCheckpointFS(fsys vfs.FS, dir string) (*CheckpointReader, error) {
	return openCheckpoint(fsys, dir, false)
}

// openCheckpoint opens the checkpoint in dir read-only; one in use, with
// live set, from a snapshot its query makes.
func openCheckpoint(fsys vfs.FS, dir string, live bool) (*CheckpointReader, error) {
	// Pebble leaves its LOCK file in every store it opened: without one,
	// the directory holds no checkpoint, and taking the lock would
	// write one.
	lockPath := fsys.PathJoin(dir, "LOCK")
	if _, err := fsys.Stat(lockPath); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("streamgen: %s holds no checkpoint (no %s)", dir, lockPath)
		}
		return nil, fmt.Errorf("streamgen: open checkpoint %s: %w", dir, err)
	}
	s := &Store{dir: dir, fs: fsys, opts: StoreOptions{FS: fsys, CacheSize: 8 << 20, MemTableSize: 4 << 20}, recorded: -1, failed: make(chan struct{}), stuck: make(chan struct{})}
	lock, lockFile, err := lockCheckpoint(fsys, dir, inUseInspectHint)
	if errors.Is(err, ErrCheckpointInUse) && fsys == vfs.Default && live {
		// A query runs on it, in another process (or this one): it
		// gives a snapshot.
		return openRunning(dir, err)
	}
	if err != nil {
		return nil, err
	}
	s.lock, s.lockFile = lock, lockFile
	c := &CheckpointReader{s: s, committed: -1}
	rec, found, err := readCommitFile(fsys, dir)
	if err != nil {
		lock.Close()
		return nil, err
	}
	if found {
		c.committed = rec.BatchID
	}
	cache := pebble.NewCache(s.opts.CacheSize)
	defer cache.Unref()
	db, err := s.openPebble(cache, true, true)
	if err != nil {
		lock.Close()
		if errors.Is(err, pebble.ErrDBDoesNotExist) {
			return nil, fmt.Errorf("streamgen: %s holds no checkpoint: %w", dir, err)
		}
		return nil, s.openError(err)
	}
	s.db = db
	c.r = db
	return c, nil
}

// Close closes the checkpoint and releases its lock. Calls after the
// first return its result.
func (c *CheckpointReader) Close() error {
	c.closing.Do(func() {
		if c.release != nil {
			c.closeErr = c.release()
			return
		}
		c.closeErr = c.s.closeDB()
		if lerr := c.s.lock.Close(); c.closeErr == nil {
			c.closeErr = lerr
		}
	})
	return c.closeErr
}

// Dir returns the checkpoint's directory.
func (c *CheckpointReader) Dir() string { return c.s.dir }

// Meta returns the description of the query that wrote the checkpoint;
// ok is false when it holds none (no query started on it).
func (c *CheckpointReader) Meta() (m Meta, ok bool, err error) {
	v, closer, err := c.r.Get([]byte(metaKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return m, false, nil
	}
	if err != nil {
		return m, false, c.s.fail(fmt.Errorf("read checkpoint metadata: %w", err))
	}
	defer closer.Close()
	err = json.Unmarshal(v, &m)
	if err == nil {
		err = m.checkSchemas()
	}
	if err != nil {
		return m, false, fmt.Errorf("streamgen: the checkpoint's metadata is corrupt: %w", err)
	}
	return m, true, nil
}

// Progress returns the progress of the last committed batch; ok is false
// when no batch was committed.
func (c *CheckpointReader) Progress() (Progress, bool, error) {
	if err := c.s.Err(); err != nil {
		return Progress{}, false, err
	}
	return c.s.readProgress(c.r)
}

// PlannedBatch returns the last batch planned, which is the next batch's
// when it ran and failed or was stopped before its commit.
func (c *CheckpointReader) PlannedBatch() (PlannedOffsets, bool, error) {
	return c.s.readPlannedBatch(c.r)
}

// CommitRecord returns the batch id of the commit file, the last batch
// known durable; ok is false without one.
func (c *CheckpointReader) CommitRecord() (batchID int64, ok bool) {
	return c.committed, c.committed >= 0
}

// Created returns when the checkpoint was created.
func (c *CheckpointReader) Created() (time.Time, bool, error) {
	v, closer, err := c.r.Get([]byte(originKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, c.s.fail(err)
	}
	defer closer.Close()
	t, err := time.Parse(time.RFC3339, string(v))
	return t, err == nil, nil
}

// Entry is one raw state entry: its place in the store and its bytes,
// valid during the callback.
type Entry struct {
	Partition uint32
	Operator  uint8
	Variable  uint8
	Key       []byte
	Suffix    []byte
	Value     []byte
}

// ScanState calls fn with each state entry of operator op, in every
// partition, in the store's order (by partition, variable, key, suffix).
func (c *CheckpointReader) ScanState(op uint8, fn func(Entry) error) error {
	it, err := c.r.NewIter(&pebble.IterOptions{LowerBound: []byte{statePrefix}, UpperBound: []byte{statePrefix + 1}})
	if err != nil {
		return c.s.fail(fmt.Errorf("read state: %w", err))
	}
	// The partition comes before the operator in a state key: the scan
	// seeks to the operator's entries in each partition.
	for valid := it.First(); valid; {
		k := it.Key()
		if len(k) < 7 {
			it.Close()
			return fmt.Errorf("streamgen: a state entry's key of %d bytes", len(k))
		}
		part := binary.BigEndian.Uint32(k[1:5])
		switch {
		case k[5] < op:
			valid = it.SeekGE(appendScope(nil, statePrefix, Scope{Partition: part, Operator: op}))
			continue
		case k[5] > op:
			valid = it.SeekGE(prefixEnd(k[:5])) // the next partition
			continue
		}
		n, w := binary.Uvarint(k[7:])
		if w <= 0 || uint64(len(k)-7-w) < n {
			it.Close()
			return fmt.Errorf("streamgen: a state entry's key is corrupt")
		}
		key := k[7+w : 7+w+int(n)]
		value, err := it.ValueAndErr()
		if err != nil {
			it.Close()
			return c.s.fail(fmt.Errorf("read state: %w", err))
		}
		if err := fn(Entry{Partition: part, Operator: op, Variable: k[6], Key: key, Suffix: k[7+w+int(n):], Value: value}); err != nil {
			it.Close()
			return err
		}
		valid = it.Next()
	}
	if err := it.Close(); err != nil {
		return c.s.fail(fmt.Errorf("read state: %w", err))
	}
	return nil
}

// StoredTimer is one timer of a key.
type StoredTimer struct {
	Partition uint32
	Key       []byte
	At        time.Time
}

// Timers calls fn with each timer of operator op, in every partition, by
// partition, then expiry.
func (c *CheckpointReader) Timers(op uint8, fn func(StoredTimer) error) error {
	it, err := c.r.NewIter(&pebble.IterOptions{LowerBound: []byte{timerPrefix}, UpperBound: []byte{timerPrefix + 1}})
	if err != nil {
		return c.s.fail(fmt.Errorf("read timers: %w", err))
	}
	for valid := it.First(); valid; valid = it.Next() {
		k := it.Key()
		if len(k) < 14 {
			it.Close()
			return fmt.Errorf("streamgen: a timer's key of %d bytes", len(k))
		}
		if k[5] != op {
			continue
		}
		t := StoredTimer{Partition: binary.BigEndian.Uint32(k[1:5]), At: readInstant(k[6:14]), Key: k[14:]}
		if err := fn(t); err != nil {
			it.Close()
			return err
		}
	}
	if err := it.Close(); err != nil {
		return c.s.fail(fmt.Errorf("read timers: %w", err))
	}
	return nil
}

// Rows calls fn with each entry of operator op's variable (every variable
// when variable is ""), decoded through the schemas in m (Meta): the
// grouping key, the entry's index or map key, its expiry or timeout, and
// its value, as JSON. A list's header entry is left out, and so are the
// entries of an index (VariableMeta.Index).
func (c *CheckpointReader) Rows(m Meta, op int, variable string, fn func(StateRow) error) error {
	d, err := newRowDecoder(m, op, variable)
	if err != nil {
		return err
	}
	return c.ScanState(uint8(op), func(e Entry) error {
		row, ok, err := d.decode(e)
		if err != nil || !ok {
			return err
		}
		return fn(row)
	})
}

// rowDecoder decodes the entries of an operator's variables into rows.
type rowDecoder struct {
	op       int
	om       OperatorMeta
	names    map[uint8]string
	variable string
}

// newRowDecoder decodes the entries of operator op's variable (every
// variable for "") as m describes them.
func newRowDecoder(m Meta, op int, variable string) (*rowDecoder, error) {
	if op < 0 || op >= len(m.Operators) {
		return nil, fmt.Errorf("%w: the checkpoint has no operator %d", ErrUnknownState, op)
	}
	om := m.Operators[op]
	d := &rowDecoder{op: op, om: om, names: map[uint8]string{}, variable: variable}
	for name, v := range om.Variables {
		d.names[v.ID] = name
	}
	if variable != "" {
		if v, ok := om.Variables[variable]; !ok || v.Index {
			return nil, fmt.Errorf("%w: operator %d (%s %q) has no state variable %q (it has %s)", ErrUnknownState, op, om.Kind, om.Name, variable, quotedNames(d.variables()))
		}
	}
	return d, nil
}

// quotedNames lists names, quoted, for an error.
func quotedNames(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}

// variables lists the operator's variables that hold state rows.
func (d *rowDecoder) variables() []string {
	var names []string
	for name, v := range d.om.Variables {
		if !v.Index {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// decode decodes e; ok is false for an entry that is no row: of another
// variable, of an index, or a list's header.
func (d *rowDecoder) decode(e Entry) (row StateRow, ok bool, err error) {
	name, known := d.names[e.Variable]
	if !known || d.variable != "" && name != d.variable {
		return row, false, nil // a variable the description no longer names
	}
	v := d.om.Variables[name]
	if v.Index {
		return row, false, nil // no state rows: an index of the others
	}
	row = StateRow{Partition: e.Partition, Variable: name}
	key, suffix := e.Key, e.Suffix
	if v.Encoding == EncodingByEventTime {
		// The key is the entry's time; the grouping key follows.
		if len(key) != timedKeyLen {
			return row, false, fmt.Errorf("streamgen: operator %d, variable %q: entry %x does not begin with its event time", d.op, name, e.Key)
		}
		at := readInstant(key)
		row.ExpiresAt = &at
		key, suffix = suffix, nil
	}
	if row.Key, err = KeyJSON(d.om, key); err != nil {
		return row, false, fmt.Errorf("streamgen: operator %d, variable %q: key %x: %w", d.op, name, key, err)
	}
	if err := decodeEntry(&row, v, d.om.States[name], suffix, e.Value); err != nil {
		return row, false, fmt.Errorf("streamgen: operator %d, variable %q, key %s: %w", d.op, name, row.Key, err)
	}
	return row, !row.header, nil
}

// KeyJSON renders a grouping key of operator om as JSON. A key of an
// aggregation over grouping sets (typed's Cube, Rollup and GroupingSets)
// holds its set, 4 bytes, in front of the key with the set's dimensions
// rolled up; it is rendered as {"set": the set, "key": that key}.
func KeyJSON(om OperatorMeta, key []byte) (json.RawMessage, error) {
	if !groupingSetKinds[om.Kind] {
		return appendTyped(nil, om.Key, om.KeyType, key)
	}
	if len(key) < 4 {
		return nil, fmt.Errorf("%w: a key of %d bytes does not begin with its grouping set", ErrBadStateKey, len(key))
	}
	b := strconv.AppendUint(append(make([]byte, 0, 16+len(key)), `{"set":`...), uint64(binary.BigEndian.Uint32(key)), 10)
	b, err := appendTyped(append(b, `,"key":`...), om.Key, om.KeyType, key[4:])
	return append(b, '}'), err
}

// groupingSetKinds are the kinds of the aggregations over grouping sets.
var groupingSetKinds = map[string]bool{"cube": true, "rollup": true, "groupingSets": true}

// IsGroupingSetKind reports whether kind (OperatorInfo.Kind,
// OperatorMeta.Kind) is an aggregation over grouping sets: cube, rollup
// or groupingSets, whose keys hold their set in front of the key.
func IsGroupingSetKind(kind string) bool { return groupingSetKinds[kind] }

// CheckpointSummary is what a checkpoint holds, in short: streamgen
// inspect's listing.
type CheckpointSummary struct {
	Dir     string    `json:"dir"`
	Created time.Time `json:"created,omitzero"`
	// Meta is the pipeline's description; HasMeta is false before any
	// query started on the checkpoint.
	Meta    Meta `json:"meta"`
	HasMeta bool `json:"-"`
	// Progress is the last committed batch's (BatchID -1 for none).
	Progress Progress `json:"progress"`
	// NextWatermark is the watermark the next batch starts with: the least
	// of the partitions' watermarks, never below the last batch's (a query
	// with an IdleTimeout may leave idle partitions out, and one with
	// MaxWatermark policies may have a greater one).
	NextWatermark time.Time `json:"nextWatermark,omitzero"`
	// Planned is the batch planned after it and not committed, if any: it
	// runs again at the next start, on the same input, at the same
	// processing time and watermark.
	Planned *PlannedOffsets `json:"planned,omitempty"`
	// CommitRecord is the commit file's batch id (-1 for none).
	CommitRecord int64             `json:"commitRecord"`
	Operators    []OperatorSummary `json:"operators"`
	// Recent are the progress reports of the latest batches, oldest first
	// (see RecentProgress).
	Recent []QueryProgress `json:"recentProgress,omitempty"`
}

// OperatorSummary describes one stateful operator and what it holds.
type OperatorSummary struct {
	Index int          `json:"index"`
	Meta  OperatorMeta `json:"meta"`
	// StateRows is the operator's row count as the query keeps it (in the
	// progress), which the progress reports show.
	StateRows int64             `json:"stateRows"`
	Variables []VariableSummary `json:"variables"`
	// Timers counts the operator's timers; FirstTimer and LastTimer are
	// the earliest and the latest.
	Timers     int64      `json:"timers"`
	FirstTimer *time.Time `json:"firstTimer,omitempty"`
	LastTimer  *time.Time `json:"lastTimer,omitempty"`
}

// VariableSummary describes one state variable and counts its entries.
type VariableSummary struct {
	Name string       `json:"name"`
	Meta VariableMeta `json:"meta"`
	// Keys counts the grouping keys that hold an entry of the variable;
	// Entries the entries (a list's or map's elements, and a list's
	// header; an index's entries, Meta.Index, are no state rows).
	Keys    int64 `json:"keys"`
	Entries int64 `json:"entries"`
}

// Summary reads the checkpoint's description and progress, and counts
// its state entries and timers (a scan of the whole state).
func (c *CheckpointReader) Summary() (CheckpointSummary, error) {
	sum := CheckpointSummary{Dir: c.s.dir, CommitRecord: c.committed}
	var err error
	if sum.Created, _, err = c.Created(); err != nil {
		return sum, err
	}
	if sum.Meta, sum.HasMeta, err = c.Meta(); err != nil {
		return sum, err
	}
	if sum.Progress, _, err = c.Progress(); err != nil {
		return sum, err
	}
	sum.NextWatermark = sum.Progress.Watermark
	if marks := len(sum.Progress.PartitionWatermarks); marks > 0 {
		// The watermarks the pipeline has, as far as the progress tells:
		// one past the greatest numbered.
		n := 0
		for key := range sum.Progress.PartitionWatermarks {
			mark, _ := splitWatermarkKey(key)
			n = max(n, mark+1)
		}
		policy := MinWatermark
		if sum.Meta.WatermarkPolicy == MaxWatermark.String() {
			policy = MaxWatermark // the checkpoint's (Meta.WatermarkPolicy)
		}
		sum.NextWatermark = nextWatermark(sum.Progress, n, policy, MinWatermark, nil)
	}
	planned, ok, err := c.PlannedBatch()
	if err != nil {
		return sum, err
	}
	if ok && planned.BatchID == sum.Progress.BatchID+1 {
		sum.Planned = &planned
	}
	if sum.Recent, err = c.RecentProgress(); err != nil {
		return sum, err
	}
	for i, om := range sum.Meta.Operators {
		os := OperatorSummary{Index: i, Meta: om}
		if i < len(sum.Progress.StateRows) {
			os.StateRows = sum.Progress.StateRows[i]
		}
		byID := map[uint8]int{}
		for name, v := range om.Variables {
			os.Variables = append(os.Variables, VariableSummary{Name: name, Meta: v})
		}
		slices.SortFunc(os.Variables, func(a, b VariableSummary) int { return int(a.Meta.ID) - int(b.Meta.ID) })
		for j, v := range os.Variables {
			byID[v.Meta.ID] = j
		}
		var lastKey []byte
		lastVar, lastPart := -1, uint32(0)
		// A variable ordered by event time is in order of time: its
		// grouping keys (after the time) are counted in a set.
		timedKeys := map[int]map[string]bool{}
		err := c.ScanState(uint8(i), func(e Entry) error {
			j, ok := byID[e.Variable]
			if !ok {
				return nil
			}
			v := &os.Variables[j]
			v.Entries++
			if v.Meta.Encoding == EncodingByEventTime {
				keys := timedKeys[j]
				if keys == nil {
					keys = map[string]bool{}
					timedKeys[j] = keys
				}
				k := strconv.FormatUint(uint64(e.Partition), 10) + "/" + string(e.Suffix)
				if !keys[k] {
					keys[k] = true
					v.Keys++
				}
				return nil
			}
			if j != lastVar || e.Partition != lastPart || !bytes.Equal(e.Key, lastKey) {
				v.Keys++
				lastVar, lastPart, lastKey = j, e.Partition, append(lastKey[:0], e.Key...)
			}
			return nil
		})
		if err != nil {
			return sum, err
		}
		err = c.Timers(uint8(i), func(t StoredTimer) error {
			os.Timers++
			at := t.At
			if os.FirstTimer == nil || at.Before(*os.FirstTimer) {
				os.FirstTimer = &at
			}
			if os.LastTimer == nil || at.After(*os.LastTimer) {
				last := at
				os.LastTimer = &last
			}
			return nil
		})
		if err != nil {
			return sum, err
		}
		sum.Operators = append(sum.Operators, os)
	}
	return sum, nil
}

// CommitterRecord returns a committer's record (see
// StateBatch.SetCommitterRecord): a changelog's offsets. ok is false when
// there is none.
func (c *CheckpointReader) CommitterRecord(name string) (value []byte, ok bool, err error) {
	v, closer, err := c.r.Get(committerKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, c.s.fail(fmt.Errorf("read the committer's record %q: %w", name, err))
	}
	defer closer.Close()
	return bytes.Clone(v), true, nil
}
