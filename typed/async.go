package typed

import (
	"context"
	"fmt"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// MapAsync applies f to every row, with up to concurrency calls running at
// once, as Flink's async I/O (AsyncDataStream.orderedWait): for a lookup
// in a database or a call to a service per row, whose waits then overlap
// instead of adding up. The rows it writes are in the order of the rows it
// reads, each with its row's place in the pipeline (its event time, its
// input's partition), so a query's output, state and checkpoint are those
// of Map with f; and a batch's rows have all been written before the
// operator after it, or the sink, takes its turn.
//
// f is called from goroutines of its own, with a copy of the row and a
// context cancelled when the query stops or a call of the batch fails: it
// must be safe for concurrent use. A batch run again (after a failure, or
// a restart before its commit) calls f again for its rows, so f should be
// a lookup, or idempotent. An error, or a panic, from f fails the batch
// and stops the query with it, naming f; f decides what to write for a
// lookup that finds nothing, or for a failure to retry or to skip.
// Each branch of a query that reads the stream (a self-join, the outputs
// of WriteAll) has calls of its own: a lookup that several outputs need
// goes before the stateful operator they share, or is done once per
// branch. A concurrency below 1 is 1.
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
// goroutines write their asyncCall and close its done).
type asyncMap[T, U any] struct {
	c     *compiler
	f     func(ctx context.Context, row T) (U, error)
	name  string
	emit  func(*U)
	limit int
	// queue holds the calls not yet written, at most limit: those
	// running and those done behind one that runs.
	queue []*asyncCall[U]
	// ctx is the calls' context for the batch, and cancel ends it.
	ctx    context.Context
	cancel context.CancelFunc
	batch  *runtime.Batch
}

// asyncCall is one call of f and what its row was in the pipeline.
type asyncCall[U any] struct {
	done      chan struct{}
	out       U
	err       error
	input     int
	partition string
	rowBytes  int
	eventTime time.Time
}

// push starts the call of a row, first writing the oldest row's result
// when limit calls are queued, then writes the results that are done at
// the queue's head.
func (a *asyncMap[T, U]) push(t *T) {
	c := a.c
	if a.batch != c.batch || a.ctx == nil {
		a.release()
		a.ctx, a.cancel = context.WithCancel(c.ctx)
		a.batch = c.batch
	}
	// The row's place first: writing a row restores its own.
	call := &asyncCall[U]{done: make(chan struct{}), input: c.input, partition: c.partition, rowBytes: c.rowBytes, eventTime: c.eventTime}
	row := *t
	if len(a.queue) == a.limit {
		a.write(true, 1)
	}
	go func() {
		defer close(call.done)
		defer func() {
			if r := recover(); r != nil {
				call.err = fmt.Errorf("panic: %v\n%s", r, stack())
			}
		}()
		call.out, call.err = a.f(a.ctx, row)
	}()
	a.queue = append(a.queue, call)
	a.write(false, len(a.queue))
}

// write writes the results at the head of the queue, up to n of them:
// those done, or, with wait, each once it is done. A call that failed
// cancels and waits for the others, empties the queue and panics with its
// error, which fails the batch (see compiler.catch).
func (a *asyncMap[T, U]) write(wait bool, n int) {
	c := a.c
	for n > 0 && len(a.queue) > 0 {
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
		a.queue[0] = nil
		a.queue = a.queue[1:]
		n--
		if call.err != nil {
			a.release()
			panic(userPanic{fmt.Errorf("streamgen: MapAsync (%s): %w", a.name, unprefixed(call.err))})
		}
		c.input, c.partition, c.rowBytes, c.eventTime = call.input, call.partition, call.rowBytes, call.eventTime
		a.emit(&call.out)
	}
}

// flush writes every row of the batch, waiting for their calls.
func (a *asyncMap[T, U]) flush() {
	a.write(true, len(a.queue))
	a.release()
}

// release cancels the batch's calls and waits for those still running,
// and empties the queue.
func (a *asyncMap[T, U]) release() {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
	for _, call := range a.queue {
		<-call.done
	}
	clear(a.queue)
	a.queue = a.queue[:0]
	a.ctx, a.batch = nil, nil
}
