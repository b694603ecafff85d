package processor

import (
	"context"
	"errors"
	"iter"
	"strings"
	"time"

	"github.com/streamgen/streamgen/typed"
)

// Click is an input row: its key is Page, its event time At, and it
// carries the same instant in Nanos, as Unix nanoseconds.
//
//streamgen:record
type Click struct {
	Page  string `stream:"key"`
	User  string
	At    time.Time `stream:"eventtime"`
	Nanos int64     `stream:"unit=ns"`
}

// Count is an output row.
//
//streamgen:record
type Count struct {
	Key string
	N   int64
}

// counter counts clicks per user in a value state, from an initial state
// if given one. Its methods have pointer receivers, so countStream takes
// a *counter; it has no timers, so no HandleExpiredTimer. The directive
// names every key: the key and event-time fields replace the tagged ones.
//
//streamgen:processor mode=update time=processing watermark=5s key=User eventtime=At name=countStream
type counter struct {
	n *typed.ValueState[int64]
}

func (c *counter) Init(h *typed.Handle) error {
	c.n = typed.NewValueState[int64](h, "n")
	return nil
}

func (c *counter) HandleInputRows(ctx context.Context, user string, clicks iter.Seq[Click], _ typed.TimerValues, emit func(Count)) error {
	n, _, err := c.n.Get(ctx)
	if err != nil {
		return err
	}
	for range clicks {
		n++
	}
	emit(Count{Key: user, N: n})
	return c.n.Update(ctx, n)
}

// HandleInitialState starts a user's count at initial.
func (c *counter) HandleInitialState(ctx context.Context, user string, initial int64, _ typed.TimerValues) error {
	return c.n.Update(ctx, initial)
}

func (c *counter) Close() error {
	if c.n == nil {
		return errors.New("counter: Close before Init")
	}
	return nil
}

// pageTotals emits each page's click count once the watermark passes its
// last click by a minute: event-time timers, on a watermark over the
// integer field Nanos; the output mode (append) and the name
// (pageTotalsStream) are the defaults.
//
//streamgen:processor time=event watermark=10s eventtime=Nanos
type pageTotals struct {
	n *typed.ValueState[int64]
	h *typed.Handle
}

func (p *pageTotals) Init(h *typed.Handle) error {
	p.n, p.h = typed.NewValueState[int64](h, "n"), h
	return nil
}

func (p *pageTotals) HandleInputRows(ctx context.Context, page string, clicks iter.Seq[Click], _ typed.TimerValues, _ func(Count)) error {
	n, _, err := p.n.Get(ctx)
	if err != nil {
		return err
	}
	var last int64
	for c := range clicks {
		n++
		last = max(last, c.Nanos)
	}
	if err := p.n.Update(ctx, n); err != nil {
		return err
	}
	// One timer per page: the one set by an earlier batch goes.
	timers, err := p.h.ListTimers(ctx)
	if err != nil {
		return err
	}
	for _, at := range timers {
		if err := p.h.DeleteTimer(ctx, at); err != nil {
			return err
		}
	}
	return p.h.RegisterTimer(ctx, time.Unix(0, last).Add(time.Minute))
}

func (p *pageTotals) HandleExpiredTimer(ctx context.Context, page string, _ typed.TimerValues, _ typed.ExpiredTimerInfo, emit func(Count)) error {
	n, _, err := p.n.Get(ctx)
	if err != nil {
		return err
	}
	emit(Count{Key: page, N: n})
	return p.n.Clear(ctx)
}

func (p *pageTotals) Close() error { return nil }

// shout keeps no state and has only the two methods it must have: they
// have value receivers, so shoutStream takes a shout. Its output is not a
// record.
//
//streamgen:processor
type shout struct{ suffix string }

func (shout) Init(*typed.Handle) error { return nil }

func (s shout) HandleInputRows(_ context.Context, page string, clicks iter.Seq[Click], _ typed.TimerValues, emit func(string)) error {
	for c := range clicks {
		emit(strings.ToUpper(page+" "+c.User) + s.suffix)
	}
	return nil
}
