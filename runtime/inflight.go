package runtime

import (
	"fmt"
	"runtime/debug"
	"time"
)

// A batch's commit may run on a goroutine of its own while the next batch
// is read and processed (see Query.pipelines): the commit's Pebble work
// (the sort of a large batch, its write and sync) and the state cache's
// update then leave the query's goroutine. Nothing a user relies on
// changes:
//
//   - The next batch reads what the commit writes: the state cache takes
//     the batch's writes first (cached), and a read of the next batch that
//     the cache cannot answer, and every scan, waits for the commit
//     (StateBatch.settled).
//   - The next batch's sinks, its plan's write and its own commit come
//     after the commit is durable (Query.settle), so sinks, offsets and
//     progress stay in order, and a batch's planned input is durable before
//     anything of it can be seen or run again.
//   - A commit that fails ends the query with its error before the next
//     batch writes anything: the cache, which may hold writes that never
//     committed, is not used again (the store has failed, or the query
//     ends and closes it), and the next start replays from the last
//     durable commit.

// inFlight is work handed to a goroutine: a batch's commit, then perhaps
// the next batch's plan (Store.after).
type inFlight struct {
	// cached is closed once the state cache holds the committed batch's
	// writes, or the commit failed before; done once the work is over.
	cached, done chan struct{}
	// err and finished (when the commit ended) are set before done is
	// closed.
	err      error
	finished time.Time
}

// commitAsync commits b with progress p (Commit) on a goroutine, which
// ends when the commit does, and returns at once. The caller makes sure
// nothing else is in flight (settle). A failed commit closes b.
func (s *Store) commitAsync(b *StateBatch, p Progress, clock func() time.Time) {
	w := &inFlight{cached: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.inFlight = w
	s.mu.Unlock()
	go func() {
		defer close(w.done)
		isCached := false
		w.err = safeWork(func() error {
			return s.commit(b, p, func() {
				isCached = true
				close(w.cached)
			})
		}, fmt.Sprintf("commit batch %d", p.BatchID))
		if !isCached {
			close(w.cached)
		}
		if w.err != nil {
			b.Close()
			if s.state != nil {
				s.state.reset() // it may hold changes that never committed
			}
		}
		w.finished = clock()
	}()
}

// safeWork runs fn, turning a panic into an error that says what was
// done, as the query's goroutine does with its own panics: a goroutine
// that panics would end the process.
func safeWork(fn func() error, what string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("streamgen: %s: panic: %v\n%s", what, r, debug.Stack())
		}
	}()
	return fn()
}

// after runs fn once the work in flight has ended without an error, on a
// goroutine of its own, and makes it the work in flight; with nothing in
// flight it runs fn at once. The error is fn's, or the work's.
func (s *Store) after(fn func() error) error {
	s.mu.Lock()
	prev := s.inFlight
	if prev == nil {
		s.mu.Unlock()
		return fn()
	}
	w := &inFlight{cached: prev.cached, done: make(chan struct{})}
	s.inFlight = w
	s.mu.Unlock()
	go func() {
		defer close(w.done)
		<-prev.done
		if w.err = prev.err; w.err == nil {
			w.err = safeWork(fn, "after a commit")
		}
		w.finished = prev.finished
	}()
	return nil
}

// settle waits for the work in flight and returns its error; finished
// is when the last commit ended (zero when nothing was in flight). After
// a success nothing is in flight; a failure stays, so every later settle
// returns it.
func (s *Store) settle() (finished time.Time, err error) {
	s.mu.Lock()
	w := s.inFlight
	s.mu.Unlock()
	if w == nil {
		return time.Time{}, nil
	}
	<-w.done
	if w.err != nil {
		return w.finished, w.err
	}
	s.mu.Lock()
	if s.inFlight == w {
		s.inFlight = nil
	}
	s.mu.Unlock()
	return w.finished, nil
}

// inFlightWork returns the work in flight, if any.
func (s *Store) inFlightWork() *inFlight {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// settled waits for the work that was in flight when the batch began (a
// read of the committed state must see it) and returns its error. It may
// be called from the handlers of an operator that runs keys concurrently
// while the query's goroutine reads ahead (warm), so after is atomic.
func (b *StateBatch) settled() error {
	w := b.after.Load()
	if w == nil {
		return nil
	}
	<-w.done
	if err := w.err; err != nil {
		return err
	}
	b.after.CompareAndSwap(w, nil)
	return nil
}

// cacheSettled waits until the state cache holds the writes of the
// commit in flight when the batch began, and returns the commit's error
// if it has already failed.
func (b *StateBatch) cacheSettled() error {
	w := b.after.Load()
	if w == nil {
		return nil
	}
	<-w.cached
	select {
	case <-w.done:
		return b.settled()
	default:
		return nil
	}
}
