package typed

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// Table is a static table of rows by key, known before the stream it is
// joined with (Spark's stream-static join: JoinTable). It is a
// description: each query that joins with it loads it when it starts
// (once, however many of its joins and outputs read it), off the batch
// path, and, with RefreshEvery, again at an interval, each load a new
// version; a batch joins all its rows with one version, which
// its progress report names (QueryProgress.Tables). A key may have several
// rows, as a relation may: a stream row joins each. A Table is safe for
// concurrent use by the queries that join with it.
type Table[K comparable, V any] struct {
	name string
	// load reads the table's rows with their keys, and, for a table of a
	// stream, the dead letters of the rows that did not decode;
	// newChanged, when not nil, makes for one query's run of the table a
	// function that reports whether a load would read something new (a
	// stream's sources moved since that run's last load).
	load       func(ctx context.Context) ([]tableRow[K, V], []runtime.DeadLetter, error)
	newChanged func() func(ctx context.Context) (bool, error)
	every      time.Duration
	// diskAbove, when positive, keeps a version of more rows on disk,
	// in a table store under dir.
	diskAbove int
	dir       string
	errs      []error
}

// tableRow is a row of a table and its key.
type tableRow[K comparable, V any] struct {
	key K
	row V
}

// TableOption configures a Table.
type TableOption func(*tableConfig)

type tableConfig struct {
	name      string
	every     time.Duration
	diskAbove int
	dir       string
}

// TableName names the table in progress reports and messages. The
// default names it by its kind.
func TableName(name string) TableOption { return func(c *tableConfig) { c.name = name } }

// RefreshEvery loads the table again every d while a query runs, on a
// goroutine of the query's, as Spark reads a static side again at every
// batch: the batches that start after a load use its version. A table
// from a stream is read again only when its sources hold something new
// (files added). A load that fails is logged and the version before kept.
// The default, 0, loads the table once, when the query starts.
func RefreshEvery(d time.Duration) TableOption { return func(c *tableConfig) { c.every = d } }

// TableOnDiskAbove keeps a version of the table of more than rows rows on
// disk instead of in memory: in a Pebble store of its own (with a block
// cache of 32 MiB), in a directory under TableDir's that is removed when
// a newer version replaces it and the batches using it have ended, or
// the query stops. Each stream row's lookup is then a read of the store.
// The key and row types must have a binary encoding (generated records,
// strings, numbers); Start refuses others. A load still reads the whole
// version into memory before it writes it out. A store whose disk fails
// (a full disk) as it loads fails the load, as any failed load does (one
// that fails later still answers lookups from what it loaded); such a
// store is left open when it closes, its directory removed (its files
// keep their space until the process ends), and after three such the
// process makes no more until it restarts. The default, 0, keeps every
// version in memory.
func TableOnDiskAbove(rows int) TableOption { return func(c *tableConfig) { c.diskAbove = rows } }

// TableDir is the directory under which TableOnDiskAbove keeps a table's
// versions; the default, "", is the system's temporary directory.
func TableDir(dir string) TableOption { return func(c *tableConfig) { c.dir = dir } }

func newTable[K comparable, V any](kind string, load func(ctx context.Context) ([]tableRow[K, V], []runtime.DeadLetter, error), opts []TableOption) *Table[K, V] {
	cfg := tableConfig{name: kind}
	for _, o := range opts {
		o(&cfg)
	}
	t := &Table[K, V]{name: cfg.name, load: load, every: cfg.every, diskAbove: cfg.diskAbove, dir: cfg.dir}
	if cfg.every < 0 {
		t.errs = append(t.errs, fmt.Errorf("table %s: RefreshEvery(%v) is negative", cfg.name, cfg.every))
	}
	if cfg.diskAbove < 0 {
		t.errs = append(t.errs, fmt.Errorf("table %s: TableOnDiskAbove(%d) is negative", cfg.name, cfg.diskAbove))
	}
	if cfg.diskAbove > 0 {
		if _, err := newKeyCodec[K](); err != nil {
			t.errs = append(t.errs, fmt.Errorf("table %s: TableOnDiskAbove: the key: %w", cfg.name, err))
		}
		if _, err := newValueCodec[V](); err != nil {
			t.errs = append(t.errs, fmt.Errorf("table %s: TableOnDiskAbove: the rows: %w", cfg.name, err))
		}
	}
	return t
}

// keyed gives each row its key.
func keyed[K comparable, V any](rows []V, key func(*V) K) []tableRow[K, V] {
	out := make([]tableRow[K, V], len(rows))
	for i := range rows {
		out[i] = tableRow[K, V]{key: key(&rows[i]), row: rows[i]}
	}
	return out
}

// TableOf is a table of rows, each under the key key gives it.
func TableOf[K comparable, V any](rows []V, key func(*V) K, opts ...TableOption) *Table[K, V] {
	fixed := keyed(rows, key)
	return newTable("table", func(context.Context) ([]tableRow[K, V], []runtime.DeadLetter, error) { return fixed, nil, nil }, opts)
}

// TableFromMap is a table of one row per key of m.
func TableFromMap[K comparable, V any](m map[K]V, opts ...TableOption) *Table[K, V] {
	fixed := make([]tableRow[K, V], 0, len(m))
	for k, v := range m {
		fixed = append(fixed, tableRow[K, V]{key: k, row: v})
	}
	return newTable("table", func(context.Context) ([]tableRow[K, V], []runtime.DeadLetter, error) { return fixed, nil, nil }, opts)
}

// TableFromFunc is a table whose rows load reads, each under the key key
// gives it: a file, a database, a service. With RefreshEvery, load is
// called again at each interval.
func TableFromFunc[K comparable, V any](load func(ctx context.Context) ([]V, error), key func(*V) K, opts ...TableOption) *Table[K, V] {
	return newTable("table", func(ctx context.Context) ([]tableRow[K, V], []runtime.DeadLetter, error) {
		rows, err := load(ctx)
		if err != nil {
			return nil, nil, err
		}
		return keyed(rows, key), nil, nil
	}, opts)
}

// TableFromStream is a table of the rows of a bounded stream, each under
// the key key gives it: the stream runs as a query of its own, in memory,
// to the end of what its sources hold when it is loaded (a directory of
// files). A stream that ends in an aggregation gives its whole result
// table (Complete mode: Spark's static aggregate, such as a device's
// historical averages); another, every row it writes. A row that does not
// decode is left out of the table and goes to the dead letters of each
// query that joins the table (runtime.DeadLetters), as a dead letter of
// the first batch that joins with the load that read it, as the query's
// own input's would: once in a run of the query, whose refreshes read it
// again (a query started again, which loads the table again, reports it
// again). With RefreshEvery, the stream is read again when its
// sources hold more: each query that joins the table checks its own last
// load, and the queries' loads run one at a time (a processor in the
// stream serves one query at a time; two tables made from one stream
// with a processor would load it at once: make each from a stream of its
// own).
func TableFromStream[K comparable, V any](s Stream[V], key func(*V) K, opts ...TableOption) *Table[K, V] {
	// The queries that join the table compile s one at a time: a
	// processor of s serves one query at a time (StatefulProcessor). The
	// lock is a channel, so that a query that stops while it waits for
	// another's load stops at once.
	lock := make(chan struct{}, 1)
	acquire := func(ctx context.Context) error {
		select {
		case lock <- struct{}{}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	t := newTable("stream table", func(ctx context.Context) ([]tableRow[K, V], []runtime.DeadLetter, error) {
		if err := acquire(ctx); err != nil {
			return nil, nil, err
		}
		defer func() { <-lock }()
		rows, letters, err := readBounded(ctx, s)
		if err != nil {
			return nil, nil, err
		}
		return keyed(rows, key), letters, nil
	}, opts)
	t.errs = append(t.errs, s.p.errs...)
	t.newChanged = func() func(ctx context.Context) (bool, error) {
		changed := sourcesChanged(s)
		return func(ctx context.Context) (bool, error) {
			if err := acquire(ctx); err != nil {
				return false, err
			}
			defer func() { <-lock }()
			return changed(ctx)
		}
	}
	return t
}

// readBounded runs s as a query of its own, in memory, to the end of what
// its sources hold, and returns its result: the last batch's rows when it
// ends in an aggregation (its whole table, in Complete mode), every row
// written otherwise; and its dead letters, in order. The end of its input
// moves its watermark past every event time, so windows still open are
// written.
func readBounded[V any](ctx context.Context, s Stream[V]) ([]V, []runtime.DeadLetter, error) {
	sink := NewMemorySink[V]()
	w := WriteTo(s, Sink[V](sink))
	complete := endsInAggregation(s)
	if complete {
		w = w.OutputMode(Complete)
	}
	dead := &deadLetterList{}
	q, err := w.Start(ctx, runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime(), runtime.DeadLetters(dead))
	if err != nil {
		return nil, nil, err
	}
	if err := q.AwaitTermination(); err != nil {
		return nil, nil, err
	}
	batches := sink.Batches()
	ids := slices.Sorted(maps.Keys(batches))
	if complete && len(ids) > 0 {
		return batches[ids[len(ids)-1]], dead.all(), nil
	}
	var rows []V
	for _, id := range ids {
		rows = append(rows, batches[id]...)
	}
	return rows, dead.all(), nil
}

// deadLetterList keeps the dead letters of a query, by batch.
type deadLetterList struct {
	mu      sync.Mutex
	letters map[int64][]runtime.DeadLetter
}

func (l *deadLetterList) WriteDeadLetters(_ context.Context, batch int64, letters []runtime.DeadLetter) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.letters == nil {
		l.letters = map[int64][]runtime.DeadLetter{}
	}
	l.letters[batch] = append([]runtime.DeadLetter(nil), letters...)
	return nil
}

// all returns the dead letters, batch by batch.
func (l *deadLetterList) all() []runtime.DeadLetter {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []runtime.DeadLetter
	for _, id := range slices.Sorted(maps.Keys(l.letters)) {
		out = append(out, l.letters[id]...)
	}
	return out
}

// endsInAggregation reports whether the last stateful operator of s is an
// aggregation.
func endsInAggregation[V any](s Stream[V]) bool {
	c := compile(s, func(*V) {})
	defer c.closeAll()
	return len(c.ops) > 0 && c.ops[len(c.ops)-1].aggregation
}

// sourcesChanged returns a function that reports whether the sources of
// s hold anything new since its last call (true at the first).
func sourcesChanged[V any](s Stream[V]) func(ctx context.Context) (bool, error) {
	var last []json.RawMessage
	return func(ctx context.Context) (bool, error) {
		c := compile(s, func(*V) {})
		defer c.closeAll()
		now := make([]json.RawMessage, len(c.plan.Inputs))
		for i, in := range c.plan.Inputs {
			var err error
			if now[i], err = in.Source.Available(ctx); err != nil {
				return false, fmt.Errorf("source %s: %w", in.Source.Name(), unprefixed(err))
			}
		}
		changed := len(last) != len(now)
		for i := range now {
			changed = changed || !bytes.Equal(last[i], now[i])
		}
		last = now
		return changed, nil
	}
}

// tableVersion is one load of a table: in memory, its rows, each key's
// together, and where each key's are (a map to a span of one slice has
// smaller entries than a map to a slice per key, and a lookup reads
// less); on disk, a table store of each key's rows.
type tableVersion[K comparable, V any] struct {
	progress runtime.TableProgress
	index    map[K]tableSpan
	rows     []V
	disk     *diskRows[K, V]
	// byEncoding, for keys that may differ as Go values where their
	// encodings are equal (a NaN, a time in two *time.Location values:
	// valueCodec.byEncoding), indexes the rows by their key's encoding,
	// as a version on disk does, in place of index; codec encodes a key
	// looked up, into keyBuf.
	byEncoding map[string]tableSpan
	codec      keyCodec[K]
	keyBuf     []byte
	// letters are the load's dead letters, which the first batch that
	// joins with the version reports (guarded by tableRun.mu; nil once
	// reported).
	letters []runtime.DeadLetter
	// users counts the queries' batches using the version (guarded by
	// tableRun.mu); a version on disk is closed once it is not current
	// and none uses it.
	users int
}

// tableSpan is where a key's rows are in tableVersion.rows.
type tableSpan struct{ start, n int32 }

// lookup returns the rows of key k, valid until the next lookup into
// scratch (a version on disk reads them into it).
func (v *tableVersion[K, V]) lookup(k K, scratch *[]V) []V {
	if v.disk != nil {
		return v.disk.lookup(k, scratch)
	}
	var sp tableSpan
	if v.byEncoding != nil {
		var err error
		if v.keyBuf, err = v.codec.encode(v.keyBuf[:0], &k); err != nil {
			panic(userPanic{fmt.Errorf("table %s: key %v: %w", v.progress.Name, k, unprefixed(err))})
		}
		sp = v.byEncoding[string(v.keyBuf)]
	} else {
		sp = v.index[k]
	}
	return v.rows[sp.start : sp.start+sp.n : sp.start+sp.n]
}

// close releases what the version holds on disk.
func (v *tableVersion[K, V]) close() error {
	if v.disk == nil {
		return nil
	}
	return v.disk.store.Close()
}

// diskRows is a version of a table on disk: under each key's encoding, its
// rows, as uvarint(count), then uvarint(length) and the encoding of each.
type diskRows[K comparable, V any] struct {
	name  string
	store *runtime.TableStore
	keys  keyCodec[K]
	rows  valueCodec[V]
	key   []byte
}

// lookup reads the rows of key k into *scratch, the caller's: each join
// has its own, valid until its next lookup (a join after it in the
// pipeline may look up the same version while it writes its matches). A
// read that fails stops the query.
func (d *diskRows[K, V]) lookup(k K, scratch *[]V) []V {
	var err error
	if d.key, err = d.keys.encode(d.key[:0], &k); err != nil {
		panic(userPanic{fmt.Errorf("table %s: key %v: %w", d.name, k, unprefixed(err))})
	}
	raw, ok, err := d.store.Get(d.key)
	if err != nil {
		panic(userPanic{fmt.Errorf("table %s: %w", d.name, unprefixed(err))})
	}
	clear(*scratch)
	*scratch = (*scratch)[:0]
	if !ok {
		return nil
	}
	n, w := binary.Uvarint(raw)
	for i := uint64(0); w > 0 && i < n; i++ {
		raw = raw[w:]
		size, sw := binary.Uvarint(raw)
		if sw <= 0 || uint64(len(raw)-sw) < size {
			w = 0
			break
		}
		*scratch = append(*scratch, *new(V))
		if err := d.rows.decode(raw[sw:sw+int(size)], &(*scratch)[len(*scratch)-1]); err != nil {
			panic(userPanic{fmt.Errorf("table %s: a row of key %v does not decode: %w", d.name, k, unprefixed(err))})
		}
		w = sw + int(size)
	}
	if w <= 0 {
		panic(userPanic{fmt.Errorf("table %s: the rows of key %v are corrupt", d.name, k)})
	}
	return *scratch
}

// tableRun is a table as one query uses it: the version its batches join
// with, and the goroutine that refreshes it, which close stops.
type tableRun[K comparable, V any] struct {
	t *Table[K, V]
	// changed reports whether the table's sources moved since this run's
	// last load (nil: a table that is not a stream's); each query's run
	// has its own, so that one query's refresh does not hide the change
	// from another's.
	changed func(ctx context.Context) (bool, error)
	cancel  context.CancelFunc
	done    chan struct{}
	// mu guards current, open (the versions not closed), the versions'
	// users and closed.
	mu      sync.Mutex
	current *tableVersion[K, V]
	open    []*tableVersion[K, V]
	closed  bool
	// reported are the dead letters the run's batches have reported, by
	// source and position: a load that reads them again (a refresh)
	// does not report them again.
	reported map[[2]string]bool
}

// acquire returns the current version, for a batch's use until release,
// and its dead letters, for the first batch that uses it to report.
func (r *tableRun[K, V]) acquire() (*tableVersion[K, V], []runtime.DeadLetter) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.current.users++
	var letters []runtime.DeadLetter
	for _, l := range r.current.letters {
		if id := [2]string{l.Source, l.Position}; !r.reported[id] {
			if r.reported == nil {
				r.reported = map[[2]string]bool{}
			}
			r.reported[id] = true
			letters = append(letters, l)
		}
	}
	r.current.letters = nil
	return r.current, letters
}

// release ends a batch's use of v, closing it when it is no longer
// current and no batch uses it.
func (r *tableRun[K, V]) release(v *tableVersion[K, V]) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v.users--
	if v != r.current && v.users == 0 {
		r.closeVersion(v)
	}
}

// closeVersion closes v, logging a failure (its directory may be left
// behind, or its store left open: runtime.TableStore.Close). Called with
// r.mu held.
func (r *tableRun[K, V]) closeVersion(v *tableVersion[K, V]) {
	r.open = slices.DeleteFunc(r.open, func(o *tableVersion[K, V]) bool { return o == v })
	if err := v.close(); err != nil {
		slog.Warn("streamgen: table version did not close", "table", r.t.name, "version", v.progress.Version, "error", err)
	}
}

// start loads the table's first version, and starts its refresh.
func (r *tableRun[K, V]) start(ctx context.Context) error {
	if err := errors.Join(r.t.errs...); err != nil {
		return err
	}
	if r.t.newChanged != nil {
		r.changed = r.t.newChanged()
		if _, err := r.changed(ctx); err != nil {
			return fmt.Errorf("table %s: %w", r.t.name, err)
		}
	}
	if err := r.loadVersion(ctx, 1); err != nil {
		return err
	}
	if r.t.every <= 0 {
		return nil
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan struct{})
	go r.refresh(ctx)
	return nil
}

// loadVersion loads the table as version id and makes it current.
func (r *tableRun[K, V]) loadVersion(ctx context.Context, id int64) error {
	rows, letters, err := r.t.load(ctx)
	if err != nil {
		return fmt.Errorf("table %s: load: %w", r.t.name, unprefixed(err))
	}
	if len(letters) > 0 {
		slog.Warn("streamgen: rows of a table's stream did not decode: they are left out of the table, and go to the dead letters of the first batch that joins with it",
			"table", r.t.name, "version", id, "rows", len(letters), "first", letters[0].Source+": "+letters[0].Position, "error", letters[0].Error)
	}
	if len(rows) > math.MaxInt32 {
		return fmt.Errorf("table %s: %d rows: more than %d", r.t.name, len(rows), math.MaxInt32)
	}
	progress := runtime.TableProgress{Name: r.t.name, Version: id, Rows: int64(len(rows)), LoadedAt: time.Now()}
	if r.t.diskAbove > 0 && len(rows) > r.t.diskAbove {
		d, err := r.writeDisk(rows)
		if err != nil {
			return err
		}
		progress.OnDisk = true
		return r.makeCurrent(&tableVersion[K, V]{progress: progress, disk: d, letters: letters})
	}
	v := &tableVersion[K, V]{rows: make([]V, len(rows)), progress: progress, letters: letters}
	if kc, err := newKeyCodec[K](); err == nil && kc.byEncoding {
		keys := make([]string, len(rows))
		for i := range rows {
			b, err := kc.encode(nil, &rows[i].key)
			if err != nil {
				return fmt.Errorf("table %s: key %v: %w", r.t.name, rows[i].key, unprefixed(err))
			}
			keys[i] = string(b)
		}
		v.byEncoding, v.codec = spans(keys, rows, v.rows), kc
	} else {
		keys := make([]K, len(rows))
		for i := range rows {
			keys[i] = rows[i].key
		}
		v.index = spans(keys, rows, v.rows)
	}
	return r.makeCurrent(v)
}

// spans fills out with the rows' values, each key's together, keys[i]
// being the key of rows[i], and returns where each key's are: it counts
// each key's rows, gives each key its span, then fills the spans in the
// rows' order.
func spans[I comparable, K comparable, V any](keys []I, rows []tableRow[K, V], out []V) map[I]tableSpan {
	index := make(map[I]tableSpan, len(keys))
	for _, k := range keys {
		sp := index[k]
		sp.n++
		index[k] = sp
	}
	next := int32(0)
	for k, sp := range index {
		index[k] = tableSpan{start: next}
		next += sp.n
	}
	for i, k := range keys {
		sp := index[k]
		out[sp.start+sp.n] = rows[i].row
		sp.n++
		index[k] = sp
	}
	return index
}

// makeCurrent makes v the version the batches that start next use, and
// closes the one before when no batch uses it. A query that has stopped
// takes no new version.
func (r *tableRun[K, V]) makeCurrent(v *tableVersion[K, V]) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		r.closeVersion(v)
		return nil
	}
	old := r.current
	r.current = v
	r.open = append(r.open, v)
	if old != nil && old.users == 0 {
		r.closeVersion(old)
	}
	return nil
}

// writeDisk writes rows to a new table store, each key's rows under its
// encoding, in key order.
func (r *tableRun[K, V]) writeDisk(rows []tableRow[K, V]) (*diskRows[K, V], error) {
	keys, err := newKeyCodec[K]()
	if err != nil {
		return nil, err
	}
	vals, err := newValueCodec[V]()
	if err != nil {
		return nil, err
	}
	type encoded struct {
		key []byte
		i   int
	}
	all := make([]encoded, len(rows))
	for i := range rows {
		k, err := keys.encode(nil, &rows[i].key)
		if err != nil {
			return nil, fmt.Errorf("table %s: key %v: %w", r.t.name, rows[i].key, unprefixed(err))
		}
		all[i] = encoded{k, i}
	}
	slices.SortStableFunc(all, func(a, b encoded) int { return bytes.Compare(a.key, b.key) })
	store, err := runtime.CreateTableStore(r.t.dir)
	if err != nil {
		return nil, fmt.Errorf("table %s: %w", r.t.name, unprefixed(err))
	}
	var value, row []byte
	for i := 0; i < len(all); {
		j := i + 1
		for j < len(all) && bytes.Equal(all[j].key, all[i].key) {
			j++
		}
		value = binary.AppendUvarint(value[:0], uint64(j-i))
		for _, e := range all[i:j] {
			if row, err = vals.encode(row[:0], &rows[e.i].row); err != nil {
				store.Close()
				return nil, fmt.Errorf("table %s: a row of key %v: %w", r.t.name, rows[e.i].key, unprefixed(err))
			}
			value = binary.AppendUvarint(value, uint64(len(row)))
			value = append(value, row...)
		}
		if err := store.Add(all[i].key, value); err != nil {
			store.Close()
			return nil, fmt.Errorf("table %s: %w", r.t.name, unprefixed(err))
		}
		i = j
	}
	if err := store.Loaded(); err != nil {
		store.Close()
		return nil, fmt.Errorf("table %s: %w", r.t.name, unprefixed(err))
	}
	return &diskRows[K, V]{name: r.t.name, store: store, keys: keys, rows: vals}, nil
}

// refresh loads the table every interval until ctx is done.
func (r *tableRun[K, V]) refresh(ctx context.Context) {
	defer close(r.done)
	tick := time.NewTicker(r.t.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if r.changed != nil {
			changed, err := r.changed(ctx)
			if err != nil {
				if ctx.Err() == nil {
					slog.Warn("streamgen: table not refreshed", "table", r.t.name, "error", err)
				}
				continue
			}
			if !changed {
				continue
			}
		}
		r.mu.Lock()
		next := r.current.progress.Version + 1
		r.mu.Unlock()
		if err := r.loadVersion(ctx, next); err != nil && ctx.Err() == nil {
			slog.Warn("streamgen: table not refreshed", "table", r.t.name, "error", err)
		}
	}
}

// close stops the refresh, waits for it, and closes the current version
// (the query's batches have ended).
func (r *tableRun[K, V]) close() error {
	if r.cancel != nil {
		r.cancel()
		<-r.done
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil
	}
	r.closed = true
	var errs []error
	for _, v := range r.open {
		if err := v.close(); err != nil {
			errs = append(errs, fmt.Errorf("table %s: %w", r.t.name, unprefixed(err)))
		}
	}
	r.open = nil
	return errors.Join(errs...)
}
