package typed

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"iter"
	"runtime/debug"
	"slices"
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
// float64, bools, records (composite keys) or struct{} (one group).
func GroupByKey[T any, K comparable](s Stream[T], key func(*T) K) KeyedStream[K, T] {
	c, err := newKeyCodec[K]()
	if err != nil {
		s.p = s.p.failed("%v", err)
	}
	return KeyedStream[K, T]{s: s, key: key, codec: c}
}

// GroupsOption configures MapGroupsWithState and FlatMapGroupsWithState.
type GroupsOption[K comparable, S any] func(*groupsConfig[K, S])

type groupsConfig[K comparable, S any] struct {
	initial []Pair[K, S]
	// streams are initial states given as streams, read at Start.
	streams []func(ctx context.Context) ([]Pair[K, S], error)
	// late is the late-rows sink of a generated binding (BindingLateRows),
	// which its watermark takes.
	late *lateRowsOption
}

// Pair is a key and its state.
type Pair[K comparable, S any] struct {
	Key   K
	State S
}

// InitialState gives the operator a state for each key of m before its
// first batch, as Spark's initialState. The first batch of a new query
// calls the function for each of these keys, with the key's rows of that
// batch or with none; a query restarted on its checkpoint ignores it.
func InitialState[K comparable, S any](m map[K]S) GroupsOption[K, S] {
	return func(c *groupsConfig[K, S]) {
		for k, s := range m {
			c.initial = append(c.initial, Pair[K, S]{k, s})
		}
	}
}

// InitialStatePairs is InitialState from a list: Start fails when a key
// appears twice in it, naming the key.
func InitialStatePairs[K comparable, S any](pairs ...Pair[K, S]) GroupsOption[K, S] {
	return func(c *groupsConfig[K, S]) { c.initial = append(c.initial, pairs...) }
}

// InitialStateStream gives the operator an initial state from a bounded
// stream of key and state pairs (Map rows read with From into Pairs), as
// Spark's initialState is a grouped Dataset. Start reads the stream to the
// end of what its sources hold then (a row that does not decode, or a key
// given twice, fails Start), and the state is applied as InitialState's.
func InitialStateStream[K comparable, S any](s Stream[Pair[K, S]]) GroupsOption[K, S] {
	return func(c *groupsConfig[K, S]) {
		c.streams = append(c.streams, func(ctx context.Context) ([]Pair[K, S], error) {
			var pairs []Pair[K, S]
			rc := compile(s, func(p *Pair[K, S]) { pairs = append(pairs, *p) })
			defer rc.closeAll() // what compiling claimed or opened (a processor's claim)
			if err := errors.Join(s.p.errs...); err != nil {
				return nil, err
			}
			dead, err := runtime.ReadAll(ctx, &rc.plan)
			if err != nil {
				return nil, err
			}
			if len(dead) > 0 {
				return nil, fmt.Errorf("initial state: %s: %s: %s", dead[0].Source, dead[0].Position, dead[0].Error)
			}
			return pairs, nil
		})
	}
}

// MapGroupsWithState calls f once per key with the key's rows of the
// batch, in the order they were read, and the key's state, and once per
// timed-out key with no rows; each call gives one output row. The query's
// output mode must be Update, as in Spark.
func MapGroupsWithState[K comparable, In, S, Out any, PS codec.RecordPtr[S]](
	ks KeyedStream[K, In], timeout Timeout,
	f func(key K, rows iter.Seq[In], state *GroupState[S]) (Out, error),
	opts ...GroupsOption[K, S],
) Stream[Out] {
	return groupsWithState[K, In, S, Out, PS](ks, "mapGroupsWithState", Update, timeout, funcName(f),
		func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error {
			out, err := f(key, rows, state)
			if err == nil {
				emit(out)
			}
			return err
		}, opts)
}

// FlatMapGroupsWithState is MapGroupsWithState for functions that give any
// number of output rows, through emit. mode is Append (rows emitted are
// final) or Update, and must be the query's output mode.
func FlatMapGroupsWithState[K comparable, In, S, Out any, PS codec.RecordPtr[S]](
	ks KeyedStream[K, In], mode OutputMode, timeout Timeout,
	f func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error,
	opts ...GroupsOption[K, S],
) Stream[Out] {
	return groupsWithState[K, In, S, Out, PS](ks, "flatMapGroupsWithState", mode, timeout, funcName(f), f, opts)
}

func groupsWithState[K comparable, In, S, Out any, PS codec.RecordPtr[S]](
	ks KeyedStream[K, In], kind string, mode OutputMode, timeout Timeout, function string,
	f func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error,
	opts []GroupsOption[K, S],
) Stream[Out] {
	var cfg groupsConfig[K, S]
	for _, o := range opts {
		o(&cfg)
	}
	info := runtime.OperatorInfo{
		Kind:       kind,
		Name:       function,
		Timeout:    timeout.String(),
		OutputMode: mode.String(),
		TimeMode:   timeout.timeMode(),
		KeyType:    ks.codec.typeName, LegacyKeyType: ks.codec.legacyTypeName, UseKeys: ks.codec.useKeys, ParseKey: ks.codec.parseJSON,
		Key:    ks.codec.schema,
		States: []runtime.StateInfo{{Name: "state", Schema: PS(new(S)).StreamSchema(), Encoding: runtime.EncodingGroupState}},
		// Spark drops late rows before (flat)mapGroupsWithState only with
		// event-time timeouts.
		DropsLateRows: timeout == EventTimeTimeout,
		NoData:        timeout.noData(),
	}
	opInfo := operatorInfo{kind: kind, function: function, mode: mode, timeout: timeout, watermarked: ks.s.p.watermarked}
	// The initial state of this query: the pairs given, and those read
	// from the streams given when the query starts.
	var initial []Pair[K, S]
	opInfo.prepare = func(ctx context.Context) error {
		if err := cfg.late.check(); err != nil {
			return err
		}
		initial = slices.Clone(cfg.initial)
		for _, read := range cfg.streams {
			pairs, err := read(ctx)
			if err != nil {
				return fmt.Errorf("initial state: %w", unprefixed(err))
			}
			initial = append(initial, pairs...)
		}
		return checkInitial(ks.codec, initial, true)
	}
	p := ks.s.p
	return once(Stream[Out]{p: p, attach: func(c *compiler, emit func(*Out)) {
		op := &groupsOp[K, In, S, Out, PS]{gatherer: newGatherer(c, ks, info.Kind+" ("+info.Name+")"), info: info, f: f, timeout: timeout}
		op.initial = func() []Pair[K, S] { return initial }
		op.seq = func(yield func(In) bool) {
			for _, j := range op.current {
				if !yield(op.rows[j]) {
					return
				}
			}
		}
		// The stages after it get a pointer valid during the call (see
		// Map), so one variable of the operator's holds each row.
		op.emit = func(o Out) {
			op.out = o
			emit(&op.out)
		}
		op.index = c.addOperator(func() { ks.s.attach(c, op.add) }, op, opInfo)
	}})
}

// checkInitial refuses an initial state whose keys do not encode, and,
// with once, one that names a key twice: two keys of one encoding, which
// addresses their state (two NaNs, or one instant in two *time.Location
// values, are one key), as Spark's flatMapGroupsWithState refuses them
// ("The initial state provided contained multiple rows(state) with the
// same key").
func checkInitial[K comparable, S any](kc keyCodec[K], pairs []Pair[K, S], once bool) error {
	if kc.encode == nil {
		return nil // a key type with no encoding, which Start refuses
	}
	seen := make(map[string]bool, len(pairs))
	var buf []byte
	for i := range pairs {
		var err error
		if buf, err = kc.encode(buf[:0], &pairs[i].Key); err != nil {
			return fmt.Errorf("the initial state's key %v: %w", pairs[i].Key, unprefixed(err))
		}
		if !once {
			continue
		}
		if seen[string(buf)] {
			return fmt.Errorf("the initial state has key %v more than once: give each key one state", pairs[i].Key)
		}
		seen[string(buf)] = true
	}
	return nil
}

// groupsOp is a (flat)mapGroupsWithState operator of one query: the
// runtime operator that gathers its rows by key and calls the user
// function.
//
// A key's state is one row of variable 0, as Spark's: a flags byte (bit 0:
// there is a value; bit 1: there is a timeout), then the timeout instant as
// 8 bytes (Unix nanoseconds, big-endian) when there is one, then the
// value's binary encoding when there is one. A key with a timeout and no
// value is a state row too. The timeout is also a timer in the runtime's
// timer service, which calls HandleTimer when it is due.
type groupsOp[K comparable, In, S, Out any, PS codec.RecordPtr[S]] struct {
	gatherer[K, In]
	index   int
	info    runtime.OperatorInfo
	f       func(key K, rows iter.Seq[In], state *GroupState[S], emit func(Out)) error
	timeout Timeout
	// initial returns the initial state, read when the query started.
	initial func() []Pair[K, S]

	// current are the row numbers of the call's rows.
	current []int32
	seq     iter.Seq[In]
	emit    func(Out)
	out     Out // the row being emitted
	state   GroupState[S]
	valBuf  []byte
}

// The flags of a state row.
const (
	rowHasValue   = runtime.GroupStateHasValue
	rowHasTimeout = runtime.GroupStateHasTimeout
)

func (o *groupsOp[K, In, S, Out, PS]) Info() runtime.OperatorInfo { return o.info }
func (o *groupsOp[K, In, S, Out, PS]) Groups() *runtime.Groups    { return &o.groups }

// EndBatch drops the batch's rows.
func (o *groupsOp[K, In, S, Out, PS]) EndBatch() { o.gatherer.end() }

// InitialState writes the initial state and adds its keys to the groups.
func (o *groupsOp[K, In, S, Out, PS]) InitialState(ctx context.Context, b *runtime.Batch, op int) error {
	initial := o.initial()
	for i := range initial {
		p := &initial[i]
		g, ok := o.group[p.Key]
		if !ok {
			var err error
			if g, _, err = o.newGroup(p.Key); err != nil {
				return fmt.Errorf("initial state: key %v: %w", p.Key, unprefixed(err))
			}
		}
		var err error
		if o.valBuf, err = PS(&p.State).AppendBinary(append(o.valBuf[:0], rowHasValue)); err != nil {
			return fmt.Errorf("initial state: key %v: %w", p.Key, unprefixed(err))
		}
		k := b.KeyOf(op, &o.groups, g)
		if err := k.Put(0, nil, o.valBuf); err != nil {
			return err
		}
		k.Inserted()
	}
	return nil
}

func (o *groupsOp[K, In, S, Out, PS]) HandleRows(ctx context.Context, k *runtime.KeyState, group int32, rows []int32) error {
	rows, err := o.rowsOf(k.Batch(), group, rows)
	if err != nil {
		return err
	}
	return o.call(k, o.keys[group], rows, false)
}

func (o *groupsOp[K, In, S, Out, PS]) HandleTimer(ctx context.Context, k *runtime.KeyState, expiry time.Time) error {
	var key K
	if err := o.codec.decode(k.Key(), &key); err != nil {
		return fmt.Errorf("a timer's key does not decode: %w", unprefixed(err))
	}
	return o.call(k, key, nil, true)
}

// call reads the key's state row, calls the function, and writes the
// row and the timer back as Spark does: the timeout is cleared at every
// call unless set again; a removed state with no timeout removes the row;
// otherwise the row is written when the state was updated or removed or
// the timeout changed.
func (o *groupsOp[K, In, S, Out, PS]) call(k *runtime.KeyState, key K, rows []int32, timedOut bool) (err error) {
	b := k.Batch()
	raw, existed, err := k.Get(0, nil)
	if err != nil {
		return err
	}
	st := &o.state
	*st = GroupState[S]{timeout: o.timeout, timedOut: timedOut, watermark: b.Watermark, now: b.Now}
	var oldTimeout time.Time
	hadTimeout := false
	if existed {
		if len(raw) == 0 {
			return fmt.Errorf("key %v: stored state row is empty", key)
		}
		flags, rest := raw[0], raw[1:]
		if flags&rowHasTimeout != 0 {
			if len(rest) < 8 {
				return fmt.Errorf("key %v: stored state row is cut short", key)
			}
			oldTimeout, hadTimeout = time.Unix(0, int64(binary.BigEndian.Uint64(rest))).UTC(), true
			rest = rest[8:]
		}
		if flags&rowHasValue != 0 {
			if err := PS(&st.value).UnmarshalBinary(rest); err != nil {
				return fmt.Errorf("key %v: stored state does not decode: %w", key, unprefixed(err))
			}
			st.exists = true
		}
	}

	if err := o.run(key, rows, st); err != nil {
		return err
	}

	newTimeout := runtime.TimerInstant(st.timeoutAt)
	timeoutChanged := hadTimeout != st.timeoutSet || st.timeoutSet && !newTimeout.Equal(oldTimeout)
	if timeoutChanged {
		if hadTimeout {
			if err := k.DeleteTimer(oldTimeout); err != nil {
				return err
			}
		}
		if st.timeoutSet {
			if err := k.RegisterTimer(newTimeout); err != nil {
				return err
			}
		}
	}
	switch {
	case st.removed && !st.timeoutSet:
		if existed {
			if err := k.Delete(0, nil); err != nil {
				return err
			}
			k.Removed()
		}
	case st.updated || st.removed || timeoutChanged:
		row := o.valBuf[:0]
		flags := byte(0)
		if st.exists {
			flags |= rowHasValue
		}
		if st.timeoutSet {
			flags |= rowHasTimeout
		}
		row = append(row, flags)
		if st.timeoutSet {
			row = binary.BigEndian.AppendUint64(row, uint64(newTimeout.UnixNano()))
		}
		if st.exists {
			if row, err = PS(&st.value).AppendBinary(row); err != nil {
				return fmt.Errorf("key %v: state: %w", key, unprefixed(err))
			}
		}
		o.valBuf = row
		if err := k.Put(0, nil, row); err != nil {
			return err
		}
		k.Updated(!existed)
	}
	return nil
}

// run calls the user function, turning a panic into an error that names
// the function (or the stage after it that panicked), the key and the
// stack.
func (o *groupsOp[K, In, S, Out, PS]) run(key K, rows []int32, st *GroupState[S]) (err error) {
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if up, ok := r.(userPanic); ok {
			err = up
			return
		}
		where := o.info.Name
		if s := o.c.stage; s != "" {
			where = s + ", on a row that " + o.info.Name + " emitted"
			o.c.stage = ""
		}
		err = userPanic{fmt.Errorf("key %v: panic: %v (in %s)\n%s", key, r, where, debug.Stack())}
	}()
	o.current = rows
	if err := o.f(key, o.seq, st, o.emit); err != nil {
		return fmt.Errorf("key %v: %w", key, unprefixed(err))
	}
	return nil
}
