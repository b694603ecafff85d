package typed

import (
	"cmp"
	"fmt"
	"slices"
	"time"
	"unsafe"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// gatherer is the stage before a keyed operator, for one query: it keeps
// the batch's rows, in arrival order, and gathers them by key into the
// runtime's Groups (each key encoded once per batch). Past the batch's
// memory budget, rows that are records spill to sorted runs on disk and
// come back, group by group, when the operator handles them.
type gatherer[K comparable, In any] struct {
	c     *compiler
	what  string // the operator, for messages
	key   func(*In) K
	codec keyCodec[K]

	groups runtime.Groups
	// rows are the batch's rows in arrival order (or, after a spill, the
	// rows of the group being handled); keys the key of each group, and
	// group the group of each key.
	rows  []In
	keys  []K
	group map[K]int32
	// lastGroup is the group of the row add added last.
	lastGroup int32
	keyBuf    []byte
	// eventTimes is the latest event time of each group's rows, when the
	// rows carry one (after WithWatermark); firstTimes, kept when
	// trackFirstTimes, the event time of each group's first row.
	eventTimes      []time.Time
	firstTimes      []time.Time
	trackFirstTimes bool
	// firstOnly keeps each group's first row only, and no event times:
	// for an operator that reads no more (deduplication by key and event
	// time, whose later rows of a group are copies).
	firstOnly bool

	// Spilling, when the rows pass the batch's memory budget (only for
	// rows that are records, which have a binary encoding).
	spillable bool
	rowSize   int64   // the fixed size of a row in memory
	memBytes  int64   // estimated bytes of the rows in memory
	rowGroup  []int32 // the group of each row in memory
	spilled   int64   // rows already in runs
	spill     *runtime.Spill
	merge     *runtime.SpillMerge
	identity  []int32
	// touched sums the bytes WarmRows read, so that the reads stay.
	touched byte
}

func newGatherer[K comparable, In any](c *compiler, ks KeyedStream[K, In], what string) gatherer[K, In] {
	g := gatherer[K, In]{c: c, what: what, key: ks.key, codec: ks.codec}
	_, g.spillable = any(new(In)).(codec.Record)
	g.rowSize = int64(unsafe.Sizeof(*new(In)))
	return g
}

// add keeps the row and adds it to its key's group.
func (o *gatherer[K, In]) add(t *In) {
	k := o.key(t)
	g, ok := o.group[k]
	if ok && o.firstOnly {
		return
	}
	if !ok {
		var added bool
		var err error
		if g, added, err = o.newGroup(k); err != nil {
			panic(userPanic{fmt.Errorf("streamgen: %s: key %v: %w", o.what, k, unprefixed(err))})
		}
		if !added && o.firstOnly {
			return
		}
		if added && o.trackFirstTimes {
			o.firstTimes = append(o.firstTimes, o.c.eventTime)
		}
	}
	o.groups.AddRow(g)
	o.lastGroup = g
	o.rows = appendDoubling(o.rows, t)
	if et := o.c.eventTime; !et.IsZero() && !o.firstOnly {
		for int(g) >= len(o.eventTimes) {
			o.eventTimes = append(o.eventTimes, time.Time{})
		}
		if et.After(o.eventTimes[g]) {
			o.eventTimes[g] = et
		}
	}
	if !o.spillable {
		return
	}
	o.rowGroup = append(o.rowGroup, g)
	o.memBytes += o.rowSize + int64(o.c.rowBytes)
	if b := o.c.batch; o.memBytes > b.MemoryBudget {
		if err := o.spillRows(b); err != nil {
			panic(userPanic{fmt.Errorf("streamgen: %s: %w", o.what, unprefixed(err))})
		}
	}
}

// appendDoubling appends *t to s, doubling its capacity when full. A
// batch's rows fill a slice kept for the batches after, so its first
// batch grows it from nothing: append's growth by a quarter, past a few
// hundred rows, would allocate and copy about five times the rows' final
// size where doubling takes twice.
func appendDoubling[T any](s []T, t *T) []T {
	if len(s) == cap(s) {
		s = slices.Grow(s, max(len(s), 64))
	}
	return append(s, *t)
}

// firstTime returns the event time of group's first row (zero: none).
func (o *gatherer[K, In]) firstTime(group int32) time.Time {
	if int(group) < len(o.firstTimes) {
		return o.firstTimes[group]
	}
	return time.Time{}
}

// latest returns the latest event time of group's rows (zero: none).
func (o *gatherer[K, In]) latest(group int32) time.Time {
	if int(group) < len(o.eventTimes) {
		return o.eventTimes[group]
	}
	return time.Time{}
}

// newGroup returns the group of a key that the index of keys does not
// have: a new one, or, for a key that encodes as one the batch has
// (codec.byEncoding), that key's; and whether it is new.
func (o *gatherer[K, In]) newGroup(k K) (int32, bool, error) {
	// The key is encoded from its place in keys: a pointer to k itself
	// would move it to the heap, one allocation per group.
	o.keys = appendDoubling(o.keys, &k)
	var err error
	if o.keyBuf, err = o.codec.encode(o.keyBuf[:0], &o.keys[len(o.keys)-1]); err != nil {
		o.keys = o.keys[:len(o.keys)-1]
		return 0, false, err
	}
	if o.group == nil {
		o.group = make(map[K]int32)
	}
	g, added := o.codec.group(&o.groups, o.keyBuf)
	if !added {
		o.keys = o.keys[:len(o.keys)-1]
	}
	if k == k {
		// (A key unequal to itself, holding a NaN, would be a new
		// entry at every row.)
		o.group[k] = g
	}
	return g, added, nil
}

// groupOf returns the group of key k, whose encoding is encoded, when
// the batch has rows of it.
func (o *gatherer[K, In]) groupOf(k K, encoded []byte) (int32, bool) {
	if g, ok := o.group[k]; ok {
		return g, true
	}
	// A key unequal to itself, or equal in encoding to the batch's but
	// not as a value (valueCodec.byEncoding), is found by its encoding.
	return o.groups.Lookup(encoded)
}

// foldGroup returns the group of key k, for an operator that folds its
// rows as they come and keeps none: a new group (added) counts as one
// row of the batch's groups, which stands for all of its rows.
func (o *gatherer[K, In]) foldGroup(k K) (g int32, added bool) {
	g, ok := o.group[k]
	if ok {
		return g, false
	}
	g, added, err := o.newGroup(k)
	if err != nil {
		panic(userPanic{fmt.Errorf("streamgen: %s: key %v: %w", o.what, k, unprefixed(err))})
	}
	if added {
		o.groups.AddRow(g)
	}
	return g, added
}

// WarmRows reads the first and last bytes of rows (see
// runtime.RowsWarmer), when they are in memory.
func (o *gatherer[K, In]) WarmRows(rows []int32) {
	if o.spill != nil || o.rowSize == 0 || len(o.rows) == 0 {
		return
	}
	for _, j := range rows {
		if int(j) < len(o.rows) {
			p := unsafe.Pointer(&o.rows[j])
			o.touched += *(*byte)(p) + *(*byte)(unsafe.Add(p, o.rowSize-1))
		}
	}
}

// rowsOf returns the numbers, in o.rows, of group's rows: those the
// runtime gives, or, after a spill, those read back from the runs.
func (o *gatherer[K, In]) rowsOf(b *runtime.Batch, group int32, rows []int32) ([]int32, error) {
	if o.spill == nil {
		return rows, nil
	}
	return o.spilledRows(b, group)
}

// spillRows writes the rows in memory to a run, sorted by group (each
// group's rows staying in arrival order), and drops them.
func (o *gatherer[K, In]) spillRows(b *runtime.Batch) error {
	if o.spill == nil {
		o.spill = runtime.NewSpill(b.SpillDir)
	}
	order := make([]int32, len(o.rows))
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortStableFunc(order, func(i, j int32) int { return cmp.Compare(o.rowGroup[i], o.rowGroup[j]) })
	err := o.spill.WriteRun(len(order), func(i int, buf []byte) (int32, int64, []byte, error) {
		j := order[i]
		data, err := any(&o.rows[j]).(codec.Record).AppendBinary(buf)
		return o.rowGroup[j], o.spilled + int64(j), data, err
	})
	if err != nil {
		return err
	}
	o.spilled += int64(len(o.rows))
	clear(o.rows)
	o.rows, o.rowGroup, o.memBytes = o.rows[:0], o.rowGroup[:0], 0
	return nil
}

// spilledRows reads group's rows from the merged runs into o.rows, and
// returns their numbers there.
func (o *gatherer[K, In]) spilledRows(b *runtime.Batch, group int32) ([]int32, error) {
	if o.merge == nil {
		if len(o.rows) > 0 {
			if err := o.spillRows(b); err != nil {
				return nil, err
			}
		}
		m, err := o.spill.Merge()
		if err != nil {
			return nil, err
		}
		o.merge = m
	}
	clear(o.rows)
	o.rows = o.rows[:0]
	for {
		g, ok := o.merge.Peek()
		if !ok || g != group {
			break
		}
		_, data, _, err := o.merge.Next()
		if err != nil {
			return nil, err
		}
		o.rows = append(o.rows, *new(In))
		if err := any(&o.rows[len(o.rows)-1]).(codec.Record).UnmarshalBinary(data); err != nil {
			return nil, fmt.Errorf("a spilled row does not decode: %w", unprefixed(err))
		}
	}
	for len(o.identity) < len(o.rows) {
		o.identity = append(o.identity, int32(len(o.identity)))
	}
	return o.identity[:len(o.rows)], nil
}

// end drops the batch's rows and runs.
func (o *gatherer[K, In]) end() {
	clear(o.rows) // drop the references the rows hold
	clear(o.keys)
	o.rows, o.keys, o.eventTimes, o.firstTimes = o.rows[:0], o.keys[:0], o.eventTimes[:0], o.firstTimes[:0]
	if len(o.group) > 1<<21 {
		o.group = nil // a map only grows: drop one of a huge batch
	} else {
		clear(o.group)
	}
	o.rowGroup, o.memBytes, o.spilled = o.rowGroup[:0], 0, 0
	if o.merge != nil {
		o.merge.Close()
		o.merge = nil
	}
	if o.spill != nil {
		o.spill.Close()
		o.spill = nil
	}
}

// lateSends keeps, by the group of their key (keys one as encoded are
// one group, though unequal as values: see valueCodec.byEncoding), the
// batch's rows that may be late for an operator that decides which are
// when the batch runs (by its state), each with what sends the row its
// WithWatermark read to LateRows. An operator clears it at the end of
// the batch.
type lateSends map[int32][]lateKeep

// lateKeep is a row that may be late, by its event time and gap (0
// where the operator has none), and what sends it to LateRows.
type lateKeep struct {
	t    time.Time
	gap  time.Duration
	send func()
}

// keep keeps send for a row of group, at t with gap, that may be late.
func (l *lateSends) keep(group int32, t time.Time, gap time.Duration, send func()) {
	if *l == nil {
		*l = lateSends{}
	}
	(*l)[group] = append((*l)[group], lateKeep{t, gap, send})
}

// send sends a dropped row of group, at t with gap, to LateRows, if it
// has a sink: the first of that time and gap kept. An operator handles
// a key's late rows of one time in the order they came, and drops
// either all of them or the first that came (a session that one of
// them joined, the others touch too).
func (l lateSends) send(group int32, t time.Time, gap time.Duration) {
	keeps := l[group]
	for i, k := range keeps {
		if k.gap == gap && k.t.Equal(t) {
			k.send()
			l[group] = slices.Delete(keeps, i, i+1)
			return
		}
	}
}
