package typed

import (
	"encoding/binary"
	"fmt"
	"iter"
	"reflect"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// KeyedStream is a stream grouped by a key, ready for a stateful
// operator.
type KeyedStream[K comparable, T any] struct {
	s     Stream[T]
	key   func(*T) K
	codec keyCodec[K]
}

// GroupByKey groups the rows of s by key. Keys may be strings, integers,
// bools or records (composite keys).
func GroupByKey[T any, K comparable](s Stream[T], key func(*T) K) KeyedStream[K, T] {
	c, err := newKeyCodec[K]()
	if err != nil {
		s.p = s.p.failed("%v", err)
	}
	return KeyedStream[K, T]{s: s, key: key, codec: c}
}

// operator is a stateful operator of a plan.
type operator struct {
	// rowsHint and keysHint are the sizes of the operator's last batch,
	// to size the next one's buffers (atomic: a stream may run in more
	// than one query at a time).
	rowsHint, keysHint atomic.Int64
	index              uint8
	kind               string
	function           string // the user function, for messages
	mode               OutputMode
	timeout            Timeout
	watermarked        bool
	meta               runtime.OperatorMeta
}

// The names of an operator's entries in the store.
const (
	stateName   = "state"
	timeoutName = "timeout"
)

// timersDue reports whether one of the operator's timers is due.
func (op *operator) timersDue(s *runtime.Store, watermark, now time.Time) (bool, error) {
	bound, ok := op.timerBound(watermark, now)
	if !ok {
		return false, nil
	}
	due := false
	err := s.DueTimers(op.index, bound, func([]byte, time.Time) error {
		due = true
		return errStop
	})
	if err != nil && err != errStop {
		return false, err
	}
	return due, nil
}

// timerBound is the latest expiry that is due: the processing time for
// processing-time timeouts; for event-time timeouts, any time the
// watermark is strictly past.
func (op *operator) timerBound(watermark, now time.Time) (time.Time, bool) {
	switch op.timeout {
	case ProcessingTimeTimeout:
		return now, true
	case EventTimeTimeout:
		if watermark.IsZero() {
			return time.Time{}, false
		}
		return watermark.Add(-time.Nanosecond), true
	}
	return time.Time{}, false
}

// MapGroupsWithState calls f once per key with the key's rows of the
// batch, in the order they were read, and the key's state, and once per
// timed-out key with no rows; each call gives one output row. The query's
// output mode must be Update, as in Spark.
func MapGroupsWithState[K comparable, In, S, Out any, PS codec.RecordPtr[S]](
	ks KeyedStream[K, In], timeout Timeout,
	f func(key K, rows iter.Seq[In], state *GroupState[S]) (Out, error),
) Stream[Out] {
	return groupsWithState[K, In, S, Out, PS](ks, "mapGroupsWithState", Update, timeout, funcName(f),
		func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error {
			out, err := f(key, rows, state)
			if err == nil {
				emit(out)
			}
			return err
		})
}

// FlatMapGroupsWithState is MapGroupsWithState for functions that give any
// number of output rows, through emit. mode is Append (rows emitted are
// final) or Update, and must be the query's output mode.
func FlatMapGroupsWithState[K comparable, In, S, Out any, PS codec.RecordPtr[S]](
	ks KeyedStream[K, In], mode OutputMode, timeout Timeout,
	f func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error,
) Stream[Out] {
	return groupsWithState[K, In, S, Out, PS](ks, "flatMapGroupsWithState", mode, timeout, funcName(f), f)
}

// funcName names a user function for messages (reflection, once, when the
// pipeline is built).
func funcName(f any) string {
	if fn := goruntime.FuncForPC(reflect.ValueOf(f).Pointer()); fn != nil {
		return fn.Name()
	}
	return "?"
}

func groupsWithState[K comparable, In, S, Out any, PS codec.RecordPtr[S]](
	ks KeyedStream[K, In], kind string, mode OutputMode, timeout Timeout, function string,
	f func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error,
) Stream[Out] {
	p := ks.s.p
	if len(p.operators) >= 255 {
		p = p.failed("streamgen: more than 255 stateful operators")
	}
	op := &operator{
		index:       uint8(len(p.operators)),
		kind:        kind,
		function:    function,
		mode:        mode,
		timeout:     timeout,
		watermarked: ks.s.watermarked,
		meta: runtime.OperatorMeta{
			Kind:    kind,
			KeyType: ks.codec.typeName,
			Key:     ks.codec.schema,
			States:  map[string]*codec.Schema{stateName: PS(new(S)).StreamSchema()},
		},
	}
	p = p.with(func(q *plan) { q.operators = append(q.operators, op) })
	// rowBuffers keeps the gathering buffers between batches, so that a
	// steady stream reuses them instead of making garbage each batch.
	var rowBuffers sync.Pool
	return Stream[Out]{p: p, watermarked: ks.s.watermarked, run: func(b *batch, emit func(*Out)) error {
		// Gather the batch's rows by key, keys in order of first row: the
		// rows in one slice, in the order read, and a counting sort of
		// their indexes by key, so that each key's rows are a run of
		// indexes (no row is copied twice, no slice per key). The slices
		// and the map start at the sizes of the operator's last batch.
		rowsHint, keysHint := int(op.rowsHint.Load()), int(op.keysHint.Load())
		index := make(map[K]int32, keysHint)
		keys := make([]K, 0, keysHint)
		buf, _ := rowBuffers.Get().(*gathered[In])
		if buf == nil {
			buf = &gathered[In]{}
		}
		defer func() {
			clear(buf.all) // drop the references the rows hold
			buf.all, buf.keyOf, buf.order = buf.all[:0], buf.keyOf[:0], buf.order[:0]
			rowBuffers.Put(buf)
		}()
		all := slices.Grow(buf.all[:0], rowsHint)
		keyOf := slices.Grow(buf.keyOf[:0], rowsHint)
		err := ks.s.run(b, func(t *In) {
			k := ks.key(t)
			i, ok := index[k]
			if !ok {
				i = int32(len(keys))
				index[k] = i
				keys = append(keys, k)
			}
			all = append(all, *t)
			keyOf = append(keyOf, i)
		})
		if err != nil {
			return err
		}
		buf.all, buf.keyOf = all, keyOf
		op.rowsHint.Store(int64(len(all)))
		op.keysHint.Store(int64(len(keys)))
		started := time.Now()
		defer func() { b.run.Durations["stateOperators"] += time.Since(started) }()
		ends := make([]int32, len(keys))
		for _, i := range keyOf {
			ends[i]++
		}
		for i := 1; i < len(ends); i++ {
			ends[i] += ends[i-1]
		}
		order := slices.Grow(buf.order[:0], len(all))[:len(all)]
		buf.order = order
		next := make([]int32, len(keys))
		for i := range next {
			next[i] = startOf(ends, i)
		}
		for j, i := range keyOf {
			order[next[i]] = int32(j)
			next[i]++
		}
		g := newGroup[K, In, S, Out, PS](op, b, f, ks.codec, emit)
		g.all = all
		for i, k := range keys {
			if err := g.call(k, nil, order[startOf(ends, i):ends[i]], false); err != nil {
				return err
			}
		}
		// Then the keys whose timeout is due and that had no rows.
		bound, ok := op.timerBound(b.run.Watermark, b.run.Now)
		if !ok {
			return nil
		}
		type due struct{ key []byte }
		var timedOut []due
		err = b.run.Store.DueTimers(op.index, bound, func(key []byte, _ time.Time) error {
			timedOut = append(timedOut, due{key})
			return nil
		})
		if err != nil {
			return err
		}
		for _, d := range timedOut {
			var k K
			if err := ks.codec.decode(d.key, &k); err != nil {
				return fmt.Errorf("streamgen: %s (%s): a timer's key does not decode: %w", op.kind, op.function, err)
			}
			if _, had := index[k]; had {
				continue // a key with rows in the batch does not time out
			}
			index[k] = -1 // one call per key, however many timers it had
			if err := g.call(k, d.key, nil, true); err != nil {
				return err
			}
		}
		return nil
	}}
}

// gathered holds a batch's rows for an operator.
type gathered[In any] struct {
	all   []In
	keyOf []int32
	order []int32
}

// startOf is where key i's rows start in the sorted rows, given the
// running ends.
func startOf(ends []int32, i int) int32 {
	if i == 0 {
		return 0
	}
	return ends[i-1]
}

// group runs the user function for one key at a time. The iterator and
// emit function it hands over are made once per batch, not per call.
type group[K comparable, In, S, Out any, PS codec.RecordPtr[S]] struct {
	op    *operator
	b     *batch
	f     func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error
	codec keyCodec[K]
	key   []byte
	buf   []byte
	state GroupState[S]
	all   []In    // the batch's rows, in the order read
	rows  []int32 // the indexes in all of the current call's rows
	seq   iter.Seq[In]
	emit  func(Out)
}

func newGroup[K comparable, In, S, Out any, PS codec.RecordPtr[S]](op *operator, b *batch,
	f func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error, c keyCodec[K], emit func(*Out),
) *group[K, In, S, Out, PS] {
	g := &group[K, In, S, Out, PS]{op: op, b: b, f: f, codec: c}
	g.seq = func(yield func(In) bool) {
		for _, j := range g.rows {
			if !yield(g.all[j]) {
				return
			}
		}
	}
	g.emit = func(o Out) { emit(&o) }
	return g
}

// call loads the key's state, calls the function, and stages the state
// and timer changes in the batch.
func (g *group[K, In, S, Out, PS]) call(k K, encoded []byte, rows []int32, timedOut bool) (err error) {
	op, run := g.op, g.b.run
	if encoded == nil {
		if g.key, err = g.codec.encode(g.key[:0], &k); err != nil {
			return fmt.Errorf("streamgen: %s (%s): key %v: %w", op.kind, op.function, k, err)
		}
		encoded = g.key
	}
	st := &g.state
	*st = GroupState[S]{timeout: op.timeout, timedOut: timedOut, watermark: run.Watermark, now: run.Now}
	raw, existed, err := run.Batch.Get(op.index, stateName, encoded)
	if err != nil {
		return err
	}
	if existed {
		if err := PS(&st.value).UnmarshalBinary(raw); err != nil {
			return fmt.Errorf("streamgen: %s (%s): key %v: stored state does not decode: %w", op.kind, op.function, k, err)
		}
		st.exists = true
	}
	var oldTimer []byte
	if op.timeout != NoTimeout {
		if oldTimer, _, err = run.Batch.Get(op.index, timeoutName, encoded); err != nil {
			return err
		}
	}

	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("streamgen: %s (%s): key %v: panic: %v", op.kind, op.function, k, r)
		}
	}()
	g.rows = rows
	if err := g.f(k, g.seq, st, g.emit); err != nil {
		return fmt.Errorf("streamgen: %s (%s): key %v: %w", op.kind, op.function, k, err)
	}
	if st.err != nil {
		return fmt.Errorf("streamgen: %s (%s): key %v: %w", op.kind, op.function, k, st.err)
	}

	switch {
	case st.removed && existed:
		if err := run.Batch.Delete(op.index, stateName, encoded); err != nil {
			return err
		}
		run.StateRemoved[op.index]++
		run.StateRows[op.index]--
	case st.updated:
		if g.buf, err = PS(&st.value).AppendBinary(g.buf[:0]); err != nil {
			return fmt.Errorf("streamgen: %s (%s): key %v: state: %w", op.kind, op.function, k, err)
		}
		if err := run.Batch.Put(op.index, stateName, encoded, g.buf); err != nil {
			return err
		}
		run.StateUpdated[op.index]++
		if !existed {
			run.StateRows[op.index]++
		}
	}
	// The timeout is cleared at every call; a new one replaces it.
	if len(oldTimer) == 8 {
		at := time.Unix(0, int64(binary.BigEndian.Uint64(oldTimer)))
		if err := run.Batch.DeleteTimer(op.index, encoded, at); err != nil {
			return err
		}
		if err := run.Batch.Delete(op.index, timeoutName, encoded); err != nil {
			return err
		}
	}
	if st.timeoutSet && !st.removed {
		if err := run.Batch.SetTimer(op.index, encoded, st.timeoutAt); err != nil {
			return err
		}
		at := binary.BigEndian.AppendUint64(nil, uint64(st.timeoutAt.UnixNano()))
		if err := run.Batch.Put(op.index, timeoutName, encoded, at); err != nil {
			return err
		}
	}
	return nil
}
