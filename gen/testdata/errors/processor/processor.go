package processor

import (
	"context"
	"iter"
	"time"

	"github.com/streamgen/streamgen/typed"
)

//streamgen:record
type Row struct {
	K  string `stream:"key"`
	At time.Time
}

//streamgen:record
type Total struct{ N int }

// NoKey has no key field.
type NoKey struct{ At time.Time }

// base, rows and timers give the processors below their methods,
// promoted: ok is a processor.
type (
	base   struct{}
	rows   struct{}
	timers struct{}
	ok     struct {
		base
		rows
		timers
	}
)

func (base) Init(*typed.Handle) error { return nil }
func (base) Close() error             { return nil }

func (rows) HandleInputRows(ctx context.Context, key string, rows iter.Seq[Row], timers typed.TimerValues, emit func(Total)) error {
	return nil
}

func (timers) HandleExpiredTimer(ctx context.Context, key string, timers typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(Total)) error {
	return nil
}

// notAProcessor has no HandleInputRows.
//
//streamgen:processor
type notAProcessor struct{ base }

func (notAProcessor) Handle(ctx context.Context, key string, rows iter.Seq[Row]) error { return nil }

// wrongSignature's Close, which it need not have, returns nothing: the
// runtime would not call it.
//
//streamgen:processor
type wrongSignature struct{ ok }

func (*wrongSignature) Close() {}

// noInit has no Init.
//
//streamgen:processor
type noInit struct{ rows }

// initField has a field Init, not a method.
//
//streamgen:processor
type initField struct {
	rows
	Init func(*typed.Handle) error
}

// twoInits has Init twice at the same depth.
//
//streamgen:processor
type twoInits struct {
	base
	rows
	timers
	initAgain
}

type initAgain struct{}

func (initAgain) Init(*typed.Handle) error { return nil }

// wrongRows does not take an iter.Seq.
//
//streamgen:processor
type wrongRows struct{ base }

func (wrongRows) HandleInputRows(ctx context.Context, key string, rows []Row, timers typed.TimerValues, emit func(Total)) error {
	return nil
}

// wrongKey has string keys in HandleInputRows and int keys in
// HandleExpiredTimer.
//
//streamgen:processor
type wrongKey struct {
	base
	rows
}

func (wrongKey) HandleExpiredTimer(ctx context.Context, key int, timers typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(Total)) error {
	return nil
}

// wrongOut emits Row on timers and Total on rows.
//
//streamgen:processor
type wrongOut struct {
	base
	rows
}

func (wrongOut) HandleExpiredTimer(ctx context.Context, key string, timers typed.TimerValues, expired typed.ExpiredTimerInfo, emit func(Row)) error {
	return nil
}

// initialKey takes int keys in HandleInitialState.
//
//streamgen:processor
type initialKey struct {
	base
	rows
}

func (initialKey) HandleInitialState(ctx context.Context, key int, initial int64, timers typed.TimerValues) error {
	return nil
}

// sliceKey's key is not comparable.
//
//streamgen:processor
type sliceKey struct{ base }

func (sliceKey) HandleInputRows(ctx context.Context, key []string, rows iter.Seq[Row], timers typed.TimerValues, emit func(Total)) error {
	return nil
}

// noKeyField's input has no key field.
//
//streamgen:processor
type noKeyField struct {
	base
	timers
}

func (noKeyField) HandleInputRows(ctx context.Context, key string, rows iter.Seq[NoKey], timers typed.TimerValues, emit func(Total)) error {
	return nil
}

// The processors below are right; their directives are not.
//
//streamgen:processor time=event
type eventWithoutWatermark struct{ ok }

//streamgen:processor timeout=event
type unknownKey struct{ ok }

//streamgen:processor time=later
type badTime struct{ ok }

//streamgen:processor mode=complete
type badMode struct{ ok }

//streamgen:processor watermark=5s
type noEventTimeField struct{ ok }

//streamgen:processor key=K name=not-a-name
type badName struct{ ok }

//streamgen:processor
type alias = ok

// Proc is an interface.
//
//streamgen:processor
type Proc interface {
	typed.StatefulProcessor[string, Row, Total]
}

//streamgen:processor
func onFunc() {}

// emitsPointers emits pointers, which no sink of records takes.
//
//streamgen:processor
type emitsPointers struct{ base }

func (emitsPointers) HandleInputRows(ctx context.Context, key string, rows iter.Seq[Row], timers typed.TimerValues, emit func(*Total)) error {
	return nil
}
