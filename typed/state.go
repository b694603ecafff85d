package typed

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// The state variables of a StatefulProcessor. Each is declared in Init,
// by name, and used in handlers with the handler's ctx, which says whose
// key's state it is. A value of T is stored with T's binary encoding (a
// record's generated codec, or the bytes of a string, integer, float64 or
// bool), so changing T follows the codec's evolution rules. Every method
// returns an error for a state operation that failed; such a failure (a
// storage error, a value that does not decode) also fails the batch,
// whatever the handler does with it. Methods are safe for concurrent use
// by the goroutines of one handler's call; each costs a read or write of
// the batch's state (a cache lookup or a Pebble read, then an in-memory
// write committed with the batch).

// expiry is the expiry, and its clock, of a value of v written in the
// call (zero: none).
func (s *keyScope) expiry(v *variable) (time.Time, runtime.ExpiryClock) {
	switch {
	case v.ttl <= 0:
		return time.Time{}, runtime.ProcessingTimeExpiry
	case v.eventTTL:
		return runtime.TimerInstant(s.eventTime.Add(v.ttl)), runtime.EventTimeExpiry
	}
	return runtime.TimerInstant(s.now.Add(v.ttl)), runtime.ProcessingTimeExpiry
}

// expired reports whether an entry of v that expires at at is gone: in
// processing time, from the batch's processing time on (Spark's rule, in
// every handler); in event time, from the watermark on, or, in the call of
// an event-time timer, once the timer's instant is past it.
func (s *keyScope) expired(v *variable, at time.Time) bool {
	switch {
	case !v.eventTTL && !(v.ttl <= 0 && v.eventExpiries):
		return runtime.Expired(at, s.now)
	case !s.timerAt.IsZero():
		return !at.IsZero() && at.Before(s.timerAt)
	}
	return !s.watermark.IsZero() && runtime.Expired(at, s.watermark)
}

func (v *variable) scope(ctx context.Context, what string) (*keyScope, error) {
	if !v.valid {
		return nil, v.err
	}
	if s, _ := ctx.Value(scopeKey{}).(*keyScope); s != nil {
		return s, nil
	}
	return scopeOf(ctx, v.name+"."+what) // the error, with the name
}

// remember records an entry the call wrote (raw nil: deleted).
func (s *keyScope) remember(id uint8, suffix, raw []byte) {
	if s.memo == int(id)+1 {
		s.memo = 0
	}
	w := scopeWrite{id: id, deleted: raw == nil, suffixAt: int32(len(s.arena)), suffixLen: int32(len(suffix))}
	s.arena = append(s.arena, suffix...)
	w.valueAt, w.valueLen = int32(len(s.arena)), int32(len(raw))
	s.arena = append(s.arena, raw...)
	s.written = append(s.written, w)
	switch n := len(s.written); {
	case n < scopeIndexMin:
	case len(s.latest) == 0:
		if s.latest == nil {
			s.latest = make(map[string]int32, 2*scopeIndexMin)
		}
		for i := range s.written {
			s.latest[s.writtenKey(i)] = int32(i)
		}
	default:
		s.latest[s.writtenKey(n-1)] = int32(n - 1)
	}
}

// writtenKey is the index key of written entry i: its variable's id,
// then its suffix.
func (s *keyScope) writtenKey(i int) string {
	w := &s.written[i]
	s.indexKey = append(append(s.indexKey[:0], w.id), s.arena[w.suffixAt:w.suffixAt+w.suffixLen]...)
	return string(s.indexKey)
}

// get reads an entry as stored (with its expiry): what the call wrote, or
// the batch's.
func (s *keyScope) get(id uint8, suffix []byte) (raw []byte, ok bool, err error) {
	if len(s.latest) > 0 {
		s.indexKey = append(append(s.indexKey[:0], id), suffix...)
		if i, found := s.latest[string(s.indexKey)]; found {
			w := &s.written[i]
			if w.deleted {
				return nil, false, nil
			}
			return s.arena[w.valueAt : w.valueAt+w.valueLen], true, nil
		}
	} else {
		for i := len(s.written) - 1; i >= 0; i-- {
			w := &s.written[i]
			if w.id == id && string(s.arena[w.suffixAt:w.suffixAt+w.suffixLen]) == string(suffix) {
				if w.deleted {
					return nil, false, nil
				}
				return s.arena[w.valueAt : w.valueAt+w.valueLen], true, nil
			}
		}
	}
	if s.clean {
		return s.k.GetCommitted(id, suffix)
	}
	return s.k.Get(id, suffix)
}

// nextSeq returns the next sequence number of list id, if the call knows
// it.
func (s *keyScope) nextSeq(id uint8) (uint64, bool) {
	for _, q := range s.seqs {
		if q.id == id {
			return q.next, true
		}
	}
	return 0, false
}

func (s *keyScope) setNextSeq(id uint8, next uint64) {
	for i := range s.seqs {
		if s.seqs[i].id == id {
			s.seqs[i].next = next
			return
		}
	}
	s.seqs = append(s.seqs, listSeq{id, next})
}

// live reads an entry of v and returns its value, or ok false when it is
// absent or expired.
func (s *keyScope) live(v *variable, suffix []byte) (value []byte, ok bool, err error) {
	raw, ok, err := s.get(v.id, suffix)
	if err != nil || !ok {
		return nil, false, err
	}
	at, value, err := runtime.ReadExpiring(raw)
	if err != nil {
		return nil, false, s.k.Fail(err)
	}
	if s.expired(v, at) {
		return nil, false, nil
	}
	return value, true, nil
}

// put writes an entry, counting a new one as added. value may be the
// scope's own encoded buffer.
func (s *keyScope) put(v *variable, suffix, value []byte) error {
	return s.putExpiring(v, suffix, value, false)
}

// putExpiring is put; with lasting, an entry there that expires later,
// or never, keeps its expiry (a list's header, which must outlive its
// elements: those written before the variable had a time to live never
// expire).
func (s *keyScope) putExpiring(v *variable, suffix, value []byte, lasting bool) error {
	raw, existed, err := s.get(v.id, suffix)
	if err != nil {
		return err
	}
	at, clock := s.expiry(v)
	if lasting && existed && !at.IsZero() {
		old, _, err := runtime.ReadExpiring(raw)
		if err != nil {
			return s.k.Fail(err)
		}
		if old.IsZero() || old.After(at) {
			at = old
		}
	}
	if err := s.k.PutExpiring(v.id, suffix, value, at, clock); err != nil {
		return err
	}
	s.scratch = runtime.AppendExpiring(s.scratch[:0], at, value) // the stored form
	s.remember(v.id, suffix, s.scratch)
	s.k.Updated(!existed)
	return nil
}

// remove deletes an entry that is there.
func (s *keyScope) remove(v *variable, suffix []byte) error {
	_, existed, err := s.get(v.id, suffix)
	if err != nil || !existed {
		return err
	}
	if err := s.k.Delete(v.id, suffix); err != nil {
		return err
	}
	s.remember(v.id, suffix, nil)
	s.k.Removed()
	return nil
}

// entries returns the live entries of variable v, in suffix order, copied.
func (s *keyScope) entries(v *variable) (suffixes, values [][]byte, err error) {
	suffixes, values, _, err = s.expiringEntries(v)
	return suffixes, values, err
}

// expiringEntries is entries with the expiry of each (zero: none).
func (s *keyScope) expiringEntries(v *variable) (suffixes, values [][]byte, expiries []time.Time, err error) {
	err = s.scan(v, func(suffix, raw []byte) error {
		if v.kind == "list" && len(suffix) == 0 {
			return nil // the list's header
		}
		at, value, err := runtime.ReadExpiring(raw)
		if err != nil {
			return err
		}
		if s.expired(v, at) {
			return nil
		}
		suffixes = append(suffixes, append([]byte(nil), suffix...))
		values = append(values, append([]byte(nil), value...))
		expiries = append(expiries, at)
		return nil
	})
	return suffixes, values, expiries, err
}

// scan calls fn for each stored entry of variable v, in suffix order, as
// the batch sees it. A key the batch had not written when the call began
// (clean) reads the committed entries and puts the call's own writes over
// them: a read of the committed state alone, which the store answers
// without Pebble for a key that never had an entry, and which leaves the
// batch unindexed. fn must not write, nor stop the scan (runtime.StopScan:
// the memo would hold part of the entries). A scan that reaches the end
// keeps the suffixes it found, for a clear of v that follows before any
// write to v (see keyScope.memo).
func (s *keyScope) scan(v *variable, fn func(suffix, raw []byte) error) error {
	s.memo, s.memoBuf, s.memoEnds = 0, s.memoBuf[:0], s.memoEnds[:0]
	if s.recordFn == nil {
		s.recordFn = s.record
	}
	s.memoEach = fn
	err := s.scanAll(v, s.recordFn)
	s.memoEach = nil
	if err != nil {
		return err
	}
	s.memo = int(v.id) + 1
	return nil
}

// record notes a suffix the scan in progress found, then calls its
// function.
func (s *keyScope) record(suffix, raw []byte) error {
	s.memoBuf = append(s.memoBuf, suffix...)
	s.memoEnds = append(s.memoEnds, int32(len(s.memoBuf)))
	return s.memoEach(suffix, raw)
}

// scanAll is scan, without the memo. fn may end it with runtime.StopScan.
func (s *keyScope) scanAll(v *variable, fn func(suffix, raw []byte) error) error {
	if !s.clean {
		return s.k.Scan(v.id, fn)
	}
	// The call's latest write of each suffix of v, in suffix order.
	s.own = s.own[:0]
	for i := len(s.written) - 1; i >= 0; i-- {
		if s.written[i].id == v.id {
			s.own = append(s.own, int32(i))
		}
	}
	suffix := func(i int32) []byte { w := &s.written[i]; return s.arena[w.suffixAt : w.suffixAt+w.suffixLen] }
	slices.SortStableFunc(s.own, func(a, b int32) int { return bytes.Compare(suffix(a), suffix(b)) })
	s.own = slices.CompactFunc(s.own, func(a, b int32) bool { return bytes.Equal(suffix(a), suffix(b)) })
	next := 0
	stopped := false
	// emitOwn gives the call's writes before suffix before, or all left.
	emitOwn := func(before []byte, all bool) error {
		for ; next < len(s.own) && (all || bytes.Compare(suffix(s.own[next]), before) < 0); next++ {
			w := &s.written[s.own[next]]
			if w.deleted {
				continue
			}
			if err := fn(suffix(s.own[next]), s.arena[w.valueAt:w.valueAt+w.valueLen]); err != nil {
				stopped = errors.Is(err, runtime.StopScan)
				return err
			}
		}
		return nil
	}
	err := s.k.ScanCommitted(v.id, nil, nil, func(sfx, raw []byte) error {
		if err := emitOwn(sfx, false); err != nil {
			return err
		}
		if next < len(s.own) && bytes.Equal(suffix(s.own[next]), sfx) {
			return nil // written by the call: emitOwn gives it next
		}
		err := fn(sfx, raw)
		stopped = errors.Is(err, runtime.StopScan)
		return err
	})
	if err != nil || stopped { // ScanCommitted returns nil for a stop
		return err
	}
	if err := emitOwn(nil, true); !stopped {
		return err
	}
	return nil
}

// clear deletes every entry of variable v, live or expired: those the
// call's last scan of v found, when it has not written to v since, else
// those a scan finds now.
func (s *keyScope) clear(v *variable) error {
	if s.memo != int(v.id)+1 {
		if err := s.scan(v, func([]byte, []byte) error { return nil }); err != nil {
			return err
		}
	}
	// The deletions below end the memo, not its suffixes: no scan runs
	// until the loop ends.
	start := int32(0)
	for _, end := range s.memoEnds {
		suffix := s.memoBuf[start:end]
		start = end
		if err := s.k.Delete(v.id, suffix); err != nil {
			return err
		}
		s.remember(v.id, suffix, nil)
		s.k.Removed()
	}
	s.setNextSeq(v.id, 0)
	return nil
}

// ValueState is a state variable holding one value per key, as Spark's
// ValueState.
// Its methods are safe for concurrent use: by the calls of different keys
// (Concurrency) and by the goroutines of one call.
type ValueState[T any] struct {
	v     *variable
	codec valueCodec[T]
	tmp   T // a value being encoded or decoded, under the scope's lock
}

// NewValueState declares a value state variable. Call it in Init.
func NewValueState[T any](h *Handle, name string, opts ...StateOption) *ValueState[T] {
	s := &ValueState[T]{v: h.declare(name, "value", opts)}
	var err error
	if s.codec, err = newValueCodec[T](); err != nil {
		s.v.fail(fmt.Errorf("state variable %q: %w", name, unprefixed(err)))
	}
	s.v.schema, s.v.valueType = s.codec.schema, s.codec.typeName
	return s
}

// fail makes v invalid, and Start fail, with err.
func (v *variable) fail(err error) {
	v.valid, v.err = false, err
	if v.h != nil {
		v.h.errs = append(v.h.errs, err)
	}
}

// Exists reports whether the key has a value (that has not expired).
func (s *ValueState[T]) Exists(ctx context.Context) (bool, error) {
	_, ok, err := s.Get(ctx)
	return ok, err
}

// Get returns the key's value and whether it has one.
func (s *ValueState[T]) Get(ctx context.Context) (value T, ok bool, err error) {
	sc, err := s.v.scope(ctx, "Get")
	if err != nil {
		return value, false, err
	}
	defer sc.lock()()
	raw, ok, err := sc.live(s.v, nil)
	if err != nil || !ok {
		return value, false, err
	}
	// Decoding into the variable's own value, not into the result, keeps
	// the result from escaping to the heap through the codec's function.
	var zero T
	s.tmp = zero
	if err := s.codec.decode(raw, &s.tmp); err != nil {
		return value, false, sc.k.Fail(fmt.Errorf("state %q does not decode: %w", s.v.name, unprefixed(err)))
	}
	value, s.tmp = s.tmp, zero
	return value, true, nil
}

// Expiry returns when the key's value expires: the zero time for a
// variable without a time to live; ok is false when the key has no value
// (or it has expired). For tests and tools: a handler need not know.
func (s *ValueState[T]) Expiry(ctx context.Context) (at time.Time, ok bool, err error) {
	sc, err := s.v.scope(ctx, "Expiry")
	if err != nil {
		return at, false, err
	}
	defer sc.lock()()
	return sc.expiryOf(s.v, nil)
}

// expiryOf returns the expiry of a live entry of v (zero: none), ok false
// when there is none.
func (s *keyScope) expiryOf(v *variable, suffix []byte) (time.Time, bool, error) {
	raw, ok, err := s.get(v.id, suffix)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	at, _, err := runtime.ReadExpiring(raw)
	if err != nil {
		return time.Time{}, false, s.k.Fail(err)
	}
	if s.expired(v, at) {
		return time.Time{}, false, nil
	}
	return at, true, nil
}

// Update sets the key's value (and, with a time to live, its expiry).
func (s *ValueState[T]) Update(ctx context.Context, value T) error {
	sc, err := s.v.scope(ctx, "Update")
	if err != nil {
		return err
	}
	defer sc.lock()()
	s.tmp = value
	sc.encoded, err = s.codec.encode(sc.encoded[:0], &s.tmp)
	var zero T
	s.tmp = zero
	if err != nil {
		return sc.k.Fail(fmt.Errorf("state %q: %w", s.v.name, unprefixed(err)))
	}
	return sc.put(s.v, nil, sc.encoded)
}

// Clear removes the key's value.
func (s *ValueState[T]) Clear(ctx context.Context) error {
	sc, err := s.v.scope(ctx, "Clear")
	if err != nil {
		return err
	}
	defer sc.lock()()
	return sc.remove(s.v, nil)
}

// ListState is a state variable holding a list per key, as Spark's
// ListState: appending costs one write, whatever the list's length, and
// with a time to live each element expires on its own. A list's entries
// are its elements and a header (which counts as a state row too).
// Its methods are safe for concurrent use: by the calls of different keys
// (Concurrency) and by the goroutines of one call.
type ListState[T any] struct {
	v     *variable
	codec valueCodec[T]
}

// NewListState declares a list state variable. Call it in Init.
func NewListState[T any](h *Handle, name string, opts ...StateOption) *ListState[T] {
	s := &ListState[T]{v: h.declare(name, "list", opts)}
	var err error
	if s.codec, err = newValueCodec[T](); err != nil {
		s.v.fail(fmt.Errorf("state variable %q: %w", name, unprefixed(err)))
	}
	s.v.schema, s.v.valueType = s.codec.schema, s.codec.typeName
	return s
}

// Exists reports whether the key's list has an element.
func (s *ListState[T]) Exists(ctx context.Context) (bool, error) { return s.v.exists(ctx) }

// exists reports whether the key has a live entry of v, reading no more
// than it must: a list's header, which a list has while it has an element
// and which lives as long as its longest-lived element; a map's entries
// up to the first live one.
func (v *variable) exists(ctx context.Context) (bool, error) {
	sc, err := v.scope(ctx, "Exists")
	if err != nil {
		return false, err
	}
	defer sc.lock()()
	if v.kind == "list" {
		_, ok, err := sc.live(v, nil)
		return ok, err
	}
	found := false
	err = sc.scanAll(v, func(_, raw []byte) error {
		at, _, err := runtime.ReadExpiring(raw)
		if err != nil {
			return err
		}
		if sc.expired(v, at) {
			return nil
		}
		found = true
		return runtime.StopScan
	})
	return found, err
}

// Get returns the key's list, in order, as it is when Get is called, read
// and decoded then: an error is a read that failed or an element that
// does not decode (which also fails the batch). The sequence may be
// ranged over any number of times.
func (s *ListState[T]) Get(ctx context.Context) (iter.Seq[T], error) {
	sc, err := s.v.scope(ctx, "Get")
	if err != nil {
		return nil, err
	}
	defer sc.lock()()
	_, values, err := sc.entries(s.v)
	if err != nil {
		return nil, err
	}
	list := make([]T, len(values))
	for i, raw := range values {
		if err := s.codec.decode(raw, &list[i]); err != nil {
			return nil, sc.k.Fail(fmt.Errorf("state %q does not decode: %w", s.v.name, unprefixed(err)))
		}
	}
	return slices.Values(list), nil
}

// Expiries returns when each element of the key's list expires, in the
// list's order (the zero time for a variable without a time to live). For
// tests and tools.
func (s *ListState[T]) Expiries(ctx context.Context) ([]time.Time, error) {
	sc, err := s.v.scope(ctx, "Expiries")
	if err != nil {
		return nil, err
	}
	defer sc.lock()()
	_, _, expiries, err := sc.expiringEntries(s.v)
	return expiries, err
}

// Put replaces the key's list with values; with none, the key has no list
// left (as after Clear).
func (s *ListState[T]) Put(ctx context.Context, values []T) error {
	sc, err := s.v.scope(ctx, "Put")
	if err != nil {
		return err
	}
	defer sc.lock()()
	if err := sc.clear(s.v); err != nil || len(values) == 0 {
		return err
	}
	return s.append(sc, values)
}

// AppendValue adds value at the end of the key's list.
func (s *ListState[T]) AppendValue(ctx context.Context, value T) error {
	return s.AppendList(ctx, []T{value})
}

// AppendList adds values at the end of the key's list (none: nothing
// changes).
func (s *ListState[T]) AppendList(ctx context.Context, values []T) error {
	sc, err := s.v.scope(ctx, "AppendList")
	if err != nil || len(values) == 0 {
		return err
	}
	defer sc.lock()()
	return s.append(sc, values)
}

// append writes values after the list's last element: each under the next
// sequence number, 8 bytes big-endian, so the entries' order is the list's.
//
// The list's header, the entry with no suffix, holds the next sequence
// number, so that an append reads one entry rather than seeking the last.
func (s *ListState[T]) append(sc *keyScope, values []T) error {
	seq, known := sc.nextSeq(s.v.id)
	if !known {
		raw, ok, err := sc.get(s.v.id, nil)
		if err != nil {
			return err
		}
		if ok {
			_, header, err := runtime.ReadExpiring(raw)
			if err != nil {
				return sc.k.Fail(err)
			}
			n, w := binary.Uvarint(header)
			if w <= 0 {
				return sc.k.Fail(fmt.Errorf("state %q: the list's header is corrupt", s.v.name))
			}
			seq = n
		}
	}
	var suffix [8]byte
	for i := range values {
		raw, err := s.codec.encode(nil, &values[i])
		if err != nil {
			return sc.k.Fail(fmt.Errorf("state %q: %w", s.v.name, unprefixed(err)))
		}
		binary.BigEndian.PutUint64(suffix[:], seq)
		seq++
		at, clock := sc.expiry(s.v)
		if err := sc.k.PutExpiring(s.v.id, suffix[:], raw, at, clock); err != nil {
			return err
		}
		sc.scratch = runtime.AppendExpiring(sc.scratch[:0], at, raw) // the stored form
		sc.remember(s.v.id, suffix[:], sc.scratch)
		sc.k.Updated(true)
	}
	sc.setNextSeq(s.v.id, seq)
	// The header expires with the longest-lived element: once it has,
	// every element has, and numbering starts again. (With an event-time
	// TTL an append may expire before an earlier one: its rows behind
	// the earlier call's, or a timer's instant.)
	return sc.putExpiring(s.v, nil, binary.AppendUvarint(nil, seq), true)
}

// Clear removes the key's list.
func (s *ListState[T]) Clear(ctx context.Context) error {
	sc, err := s.v.scope(ctx, "Clear")
	if err != nil {
		return err
	}
	defer sc.lock()()
	return sc.clear(s.v)
}

// MapState is a state variable holding a map per key, as Spark's
// MapState: each entry is read and written on its own, entries are
// iterated in order of their keys' encoding (numbers in numeric order,
// strings in byte order), and with a time to live each entry expires on
// its own. Map keys may be strings, integers, float64s, bools or records.
// Its methods are safe for concurrent use: by the calls of different keys
// (Concurrency) and by the goroutines of one call.
type MapState[MK comparable, V any] struct {
	v      *variable
	keys   keyCodec[MK]
	values valueCodec[V]
	// key and value are a key and a value being encoded, under the
	// scope's lock (not escaping to the heap at every call).
	key   MK
	value V
}

// NewMapState declares a map state variable. Call it in Init.
func NewMapState[MK comparable, V any](h *Handle, name string, opts ...StateOption) *MapState[MK, V] {
	s := &MapState[MK, V]{v: h.declare(name, "map", opts)}
	var err error
	if s.keys, err = newValueCodec[MK](); err != nil {
		s.v.fail(fmt.Errorf("state variable %q: map key: %w", name, unprefixed(err)))
	}
	if s.values, err = newValueCodec[V](); err != nil {
		s.v.fail(fmt.Errorf("state variable %q: %w", name, unprefixed(err)))
	}
	s.v.schema, s.v.valueType = s.values.schema, s.values.typeName
	s.v.mapKey, s.v.mapKeyType = s.keys.schema, s.keys.typeName
	return s
}

// suffix is k's encoding, in the scope's buffer for it: valid until the
// next call, under the scope's lock (the runtime copies what it keeps).
func (s *MapState[MK, V]) suffix(sc *keyScope, k MK) ([]byte, error) {
	s.key = k
	b, err := s.keys.encode(sc.mapKey[:0], &s.key)
	var zero MK
	s.key = zero
	if err != nil {
		return nil, sc.k.Fail(fmt.Errorf("state %q: map key %v: %w", s.v.name, k, unprefixed(err)))
	}
	sc.mapKey = b
	return b, nil
}

// Exists reports whether the key's map has an entry.
func (s *MapState[MK, V]) Exists(ctx context.Context) (bool, error) { return s.v.exists(ctx) }

// GetValue returns the value of k and whether the map has it.
func (s *MapState[MK, V]) GetValue(ctx context.Context, k MK) (value V, ok bool, err error) {
	sc, err := s.v.scope(ctx, "GetValue")
	if err != nil {
		return value, false, err
	}
	defer sc.lock()()
	suffix, err := s.suffix(sc, k)
	if err != nil {
		return value, false, err
	}
	raw, ok, err := sc.live(s.v, suffix)
	if err != nil || !ok {
		return value, false, err
	}
	err = s.values.decode(raw, &s.value)
	value, s.value = s.value, value
	if err != nil {
		return value, false, sc.k.Fail(fmt.Errorf("state %q does not decode: %w", s.v.name, unprefixed(err)))
	}
	return value, true, nil
}

// ContainsKey reports whether the map has k.
func (s *MapState[MK, V]) ContainsKey(ctx context.Context, k MK) (bool, error) {
	_, ok, err := s.GetValue(ctx, k)
	return ok, err
}

// UpdateValue sets the value of k.
func (s *MapState[MK, V]) UpdateValue(ctx context.Context, k MK, value V) error {
	sc, err := s.v.scope(ctx, "UpdateValue")
	if err != nil {
		return err
	}
	defer sc.lock()()
	suffix, err := s.suffix(sc, k)
	if err != nil {
		return err
	}
	s.value = value
	sc.encoded, err = s.values.encode(sc.encoded[:0], &s.value)
	var zero V
	s.value = zero
	if err != nil {
		return sc.k.Fail(fmt.Errorf("state %q: %w", s.v.name, unprefixed(err)))
	}
	return sc.put(s.v, suffix, sc.encoded)
}

// RemoveKey removes k from the map.
func (s *MapState[MK, V]) RemoveKey(ctx context.Context, k MK) error {
	sc, err := s.v.scope(ctx, "RemoveKey")
	if err != nil {
		return err
	}
	defer sc.lock()()
	suffix, err := s.suffix(sc, k)
	if err != nil {
		return err
	}
	return sc.remove(s.v, suffix)
}

// Expiry returns when the map's entry of k expires (the zero time for a
// variable without a time to live); ok is false when the map has no k.
// For tests and tools.
func (s *MapState[MK, V]) Expiry(ctx context.Context, k MK) (at time.Time, ok bool, err error) {
	sc, err := s.v.scope(ctx, "Expiry")
	if err != nil {
		return at, false, err
	}
	defer sc.lock()()
	suffix, err := s.suffix(sc, k)
	if err != nil {
		return at, false, err
	}
	return sc.expiryOf(s.v, suffix)
}

// Iterator returns the map's entries in key order, as they are when it is
// called, read and decoded then: an error is a read that failed or an
// entry that does not decode (which also fails the batch). The sequence
// may be ranged over any number of times.
func (s *MapState[MK, V]) Iterator(ctx context.Context) (iter.Seq2[MK, V], error) {
	keys, values, err := s.read(ctx, "Iterator")
	if err != nil {
		return nil, err
	}
	return func(yield func(MK, V) bool) {
		for i := range keys {
			if !yield(keys[i], values[i]) {
				return
			}
		}
	}, nil
}

// Keys returns the map's keys, in order (see Iterator).
func (s *MapState[MK, V]) Keys(ctx context.Context) (iter.Seq[MK], error) {
	keys, _, err := s.read(ctx, "Keys")
	if err != nil {
		return nil, err
	}
	return slices.Values(keys), nil
}

// Values returns the map's values, in order of their keys (see Iterator).
func (s *MapState[MK, V]) Values(ctx context.Context) (iter.Seq[V], error) {
	_, values, err := s.read(ctx, "Values")
	if err != nil {
		return nil, err
	}
	return slices.Values(values), nil
}

// read reads and decodes the map's live entries, in key order.
func (s *MapState[MK, V]) read(ctx context.Context, what string) ([]MK, []V, error) {
	sc, err := s.v.scope(ctx, what)
	if err != nil {
		return nil, nil, err
	}
	defer sc.lock()()
	suffixes, raws, err := sc.entries(s.v)
	if err != nil {
		return nil, nil, err
	}
	keys, values := make([]MK, len(suffixes)), make([]V, len(raws))
	for i := range suffixes {
		if err := s.keys.decode(suffixes[i], &keys[i]); err != nil {
			return nil, nil, sc.k.Fail(fmt.Errorf("state %q: a map key does not decode: %w", s.v.name, unprefixed(err)))
		}
		if err := s.values.decode(raws[i], &values[i]); err != nil {
			return nil, nil, sc.k.Fail(fmt.Errorf("state %q does not decode: %w", s.v.name, unprefixed(err)))
		}
	}
	return keys, values, nil
}

// Clear removes the key's map.
func (s *MapState[MK, V]) Clear(ctx context.Context) error {
	sc, err := s.v.scope(ctx, "Clear")
	if err != nil {
		return err
	}
	defer sc.lock()()
	return sc.clear(s.v)
}
