package typed

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// MapAsync applies f to every row, with up to concurrency calls running at
// once, as Flink's async I/O (AsyncDataStream.orderedWait): for a lookup
// in a database or a call to a service per row, whose waits then overlap
// instead of adding up. The rows it writes are in the order of the rows it
// reads, each with its row's place in the pipeline (its event time, its
// input's partition), and a batch's rows have all been written before the
// operator after it, or the sink, takes its turn: what comes after it sees
// what it would see after Map with f, but for rows of other branches
// merged with its own (a Union, a join's other side), which may come
// before them within the batch, where after Map they would be
// interleaved.
//
// f is called from goroutines of its own, with a copy of the row and a
// context cancelled when the query stops or a call of the batch fails: it
// must be safe for concurrent use. A batch run again (after a failure, or
// a restart before its commit) calls f again for its rows, so f should be
// a lookup, or idempotent. An error, or a panic, from f fails the batch
// and stops the query with it, naming f; f decides what to write for a
// lookup that finds nothing, or for a failure to retry or to skip.
// Each branch of a query that reads the stream (a self-join, the outputs
// of WriteAll) has calls of its own: put a lookup that several outputs
// need before a stateful operator they share to call it once a row. A
// concurrency below 1 is 1. Each call costs about a microsecond
// beyond f (a goroutine and a handoff; see bench/README.md): for a
// function that does not wait, Map is faster.
func MapAsync[T, U any](s Stream[T], f func(ctx context.Context, row T) (U, error), concurrency int) Stream[U] {
	name := funcName(f)
	concurrency = max(concurrency, 1)
	return Stream[U]{p: s.p, attach: func(c *compiler, emit func(*U)) {
		a := &asyncMap[T, U]{c: c, f: f, name: name, emit: emit, limit: concurrency}
		s.attach(c, a.push)
		// After those of the stages before it: their rows come first.
		c.flushes = append(c.flushes, a.flush)
		c.plan.Closers = append(c.plan.Closers, func() error {
			a.release() // the calls of a batch that failed
			return nil
		})
	}}
}

// asyncMap is a MapAsync of one query: the calls of its batch, in the
// order of their rows, used by the query's goroutine only (the calls'
// goroutines write their asyncCall and close its done, and record the
// batch's first failure in its asyncFailure).
type asyncMap[T, U any] struct {
	c     *compiler
	f     func(ctx context.Context, row T) (U, error)
	name  string
	emit  func(*U)
	limit int
	// queue holds the calls not yet written, at most limit: those
	// running and those done behind one that runs.
	queue []*asyncCall[U]
	// ctx is the calls' context for the batch, cancel ends it, and
	// failure is the batch's first failed call.
	ctx     context.Context
	cancel  context.CancelFunc
	failure *asyncFailure
	batch   *runtime.Batch
}

// asyncCall is one call of f and what its row was in the pipeline.
type asyncCall[U any] struct {
	done chan struct{}
	out  U
	err  error
	at   rowPlace
}

// rowPlace is what the stages know of the row being pushed, besides the
// row: a row MapAsync holds back is written with its own.
type rowPlace struct {
	input     int
	partition string
	rowBytes  int
	eventTime time.Time
	lateRow   func() func()
	// source, record and hasRecord are the compiler's: record's bytes a
	// copy, since the source reuses its buffer once the read goes on.
	source    string
	record    runtime.Record
	hasRecord bool
}

func (c *compiler) place() rowPlace {
	p := rowPlace{input: c.input, partition: c.partition, rowBytes: c.rowBytes, eventTime: c.eventTime,
		source: c.source, hasRecord: c.hasRecord}
	if c.hasRecord {
		p.record = runtime.Record{Position: c.record.Position, Data: bytes.Clone(c.record.Data)}
	}
	if c.lateRow != nil {
		// The pushed row's own sender: the WithWatermark's lateRow
		// sends whichever row it pushes when called.
		send := c.lateRow()
		p.lateRow = func() func() { return send }
	}
	return p
}

func (c *compiler) setPlace(p rowPlace) {
	c.input, c.partition, c.rowBytes, c.eventTime, c.lateRow = p.input, p.partition, p.rowBytes, p.eventTime, p.lateRow
	c.source, c.record, c.hasRecord = p.source, p.record, p.hasRecord
}

// asyncFailure is the first call of a batch that failed, which cancels
// the others at once.
type asyncFailure struct {
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
}

func (f *asyncFailure) fail(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
	f.cancel()
}

func (f *asyncFailure) first() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// push starts the call of a row, first writing the oldest row's result
// when limit calls are queued, then writes the results that are done at
// the queue's head. Once a call of the batch has failed, it starts no
// more: flush reports the failure.
func (a *asyncMap[T, U]) push(t *T) {
	c := a.c
	if a.batch != c.batch {
		// The batch's first row, or the first since a flush.
		a.release()
		a.ctx, a.cancel = context.WithCancel(c.ctx)
		a.failure = &asyncFailure{cancel: a.cancel}
		a.batch = c.batch
	}
	if a.failure.first() != nil {
		return
	}
	// The row's place first: writing a row sets its own, and the place
	// is the pushing stage's again after.
	call := &asyncCall[U]{done: make(chan struct{}), at: c.place()}
	row := *t
	if len(a.queue) == a.limit {
		if a.write(true, 1); a.failure.first() != nil {
			return
		}
	}
	ctx, failure := a.ctx, a.failure
	go func() {
		defer close(call.done)
		defer func() {
			if r := recover(); r != nil {
				call.err = fmt.Errorf("panic: %v\n%s", r, stack())
			}
			if call.err != nil {
				failure.fail(call.err)
			}
		}()
		call.out, call.err = a.f(ctx, row)
	}()
	a.queue = append(a.queue, call)
	a.write(false, len(a.queue))
	c.setPlace(call.at)
}

// write writes the results at the head of the queue, up to n of them:
// those done, or, with wait, each once it is done. It stops at a call of
// a batch that has failed, waiting for the others (see flush).
func (a *asyncMap[T, U]) write(wait bool, n int) {
	c := a.c
	for n > 0 && len(a.queue) > 0 {
		if a.failure.first() != nil {
			a.release()
			return
		}
		call := a.queue[0]
		if wait {
			<-call.done
		} else {
			select {
			case <-call.done:
			default:
				return
			}
		}
		if call.err != nil {
			continue // the failure, recorded: above
		}
		a.queue[0] = nil
		a.queue = a.queue[1:]
		n--
		c.setPlace(call.at)
		a.emit(&call.out)
	}
}

// flush writes every row of the batch, waiting for their calls, or fails
// the batch with its first failed call (see compiler.catch).
func (a *asyncMap[T, U]) flush() {
	if a.batch == nil {
		return // no row since the last flush
	}
	a.write(true, len(a.queue))
	a.c.lateRow = nil // no row is pushed
	err := a.failure.first()
	a.release()
	a.batch = nil
	if err != nil {
		panic(userPanic{fmt.Errorf("streamgen: MapAsync (%s): %w", a.name, unprefixed(err))})
	}
}

// release cancels the batch's calls and waits for those still running,
// and empties the queue.
func (a *asyncMap[T, U]) release() {
	if a.cancel != nil {
		a.cancel()
	}
	for _, call := range a.queue {
		<-call.done
	}
	clear(a.queue)
	a.queue = a.queue[:0]
}
