package runtime

import (
	"context"
	"sync"
	"time"
)

// ManualClock is a processing-time clock that moves only when a test
// advances it, like Spark's StreamManualClock. A query started with
// WithManualClock reads its time from it and, between interval triggers or
// polls, waits on it instead of the wall clock: advancing the clock by a
// trigger's interval fires exactly one trigger, at the new time. Safe for
// concurrent use.
type ManualClock struct {
	mu      sync.Mutex
	now     time.Time
	changed chan struct{}       // closed and replaced at every Advance
	waiting map[*time.Time]bool // the times goroutines in Sleep wait for
	idle    chan struct{}       // closed and replaced when a goroutine starts waiting
}

// NewManualClock returns a clock at start.
func NewManualClock(start time.Time) *ManualClock {
	return &ManualClock{now: start, changed: make(chan struct{}), idle: make(chan struct{}), waiting: map[*time.Time]bool{}}
}

// Now returns the clock's time.
func (c *ManualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d and wakes the goroutines waiting
// on it.
func (c *ManualClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// Sleep waits until the clock reaches until, or ctx is done.
func (c *ManualClock) Sleep(ctx context.Context, until time.Time) error {
	c.mu.Lock()
	c.waiting[&until] = true
	close(c.idle)
	c.idle = make(chan struct{})
	defer func() {
		c.mu.Lock()
		delete(c.waiting, &until)
		c.mu.Unlock()
	}()
	for c.now.Before(until) {
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
		c.mu.Lock()
	}
	c.mu.Unlock()
	return nil
}

// WaitUntilWaiting blocks until a goroutine (the query's loop) is waiting
// on the clock for a time after the clock's, or ctx is done: then the
// query has done all it can at the current time.
func (c *ManualClock) WaitUntilWaiting(ctx context.Context) error {
	for {
		c.mu.Lock()
		for until := range c.waiting {
			if until.After(c.now) {
				c.mu.Unlock()
				return nil
			}
		}
		ch := c.idle
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// WithManualClock makes c the query's processing-time clock, for tests.
func WithManualClock(c *ManualClock) Option {
	return optionFunc(func(cfg *config) {
		cfg.manualClock = c
		cfg.clock = c.Now
	})
}

// sleep waits until d after from on the query's clock (not at all once
// that is past), or until ctx is done.
func (cfg *config) sleep(ctx context.Context, from time.Time, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if cfg.manualClock != nil {
		return cfg.manualClock.Sleep(ctx, from.Add(d))
	}
	// (On the query's clock: a clock of its own, Clock, need not be the
	// wall clock's time, nor move with it.)
	if d = from.Add(d).Sub(cfg.clock()); d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
