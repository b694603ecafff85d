package bindings

import (
	"iter"
	"time"

	"github.com/streamgen/streamgen/typed"
)

//streamgen:record
type In struct {
	K  string `stream:"key"`
	At time.Time
}

//streamgen:record
type S struct{ N int }

type NotRecord struct{ N int }

//streamgen:mapGroupsWithState
func wrongArity(k string, rows iter.Seq[In]) (S, error) { return S{}, nil }

//streamgen:mapGroupsWithState
func notSeq(k string, rows []In, st *typed.GroupState[S]) (S, error) { return S{}, nil }

//streamgen:mapGroupsWithState
func notRecordState(k string, rows iter.Seq[In], st *typed.GroupState[NotRecord]) (S, error) {
	return S{}, nil
}

//streamgen:mapGroupsWithState
func wrongKey(k int, rows iter.Seq[In], st *typed.GroupState[S]) (S, error) { return S{}, nil }

//streamgen:mapGroupsWithState timeout=event
func eventWithoutWatermark(k string, rows iter.Seq[In], st *typed.GroupState[S]) (S, error) {
	return S{}, nil
}

//streamgen:mapGroupsWithState watermark=5s
func noEventTimeField(k string, rows iter.Seq[In], st *typed.GroupState[S]) (S, error) {
	return S{}, nil
}

//streamgen:flatMapGroupsWithState mode=complete
func badMode(k string, rows iter.Seq[In], st *typed.GroupState[S], emit func(S)) error { return nil }

//streamgen:flatMapGroupsWithState
func noError(k string, rows iter.Seq[In], st *typed.GroupState[S], emit func(S)) {}

//streamgen:mapGroupsWithState key=Missing
func missingKey(k string, rows iter.Seq[In], st *typed.GroupState[S]) (S, error) { return S{}, nil }

//streamgen:record
func recordOnFunc() {}

// T has a binding directive on a type.
//
//streamgen:mapGroupsWithState
type T struct{}

// Plain is a struct that is not a record.
type Plain struct{ N int }

//streamgen:flatMapGroupsWithState
func emitPointer(k string, rows iter.Seq[In], st *typed.GroupState[S], emit func(*S)) error {
	return nil
}

//streamgen:mapGroupsWithState
func resultPointer(k string, rows iter.Seq[In], st *typed.GroupState[S]) (*S, error) {
	return nil, nil
}

//streamgen:mapGroupsWithState
func pointerRows(k string, rows iter.Seq[*In], st *typed.GroupState[S]) (S, error) {
	return S{}, nil
}

//streamgen:flatMapGroupsWithState
func plainOut(k string, rows iter.Seq[In], st *typed.GroupState[S], emit func(Plain)) error {
	return nil
}

//streamgen:mapGroupsWithState
func pointerState(k string, rows iter.Seq[In], st *typed.GroupState[*S]) (S, error) {
	return S{}, nil
}

// Millis has an integer event time without its unit.
//
//streamgen:record
type Millis struct {
	K string `stream:"key"`
	T int64  `stream:"eventtime"`
}

// BadUnits has units that are not ones, or on a field that takes none.
//
//streamgen:record
type BadUnits struct {
	T int64     `stream:"eventtime,unit=days"`
	U time.Time `stream:"unit=ms"`
}

// NoUnit has an integer that a directive names as its event time.
//
//streamgen:record
type NoUnit struct {
	K string `stream:"key"`
	T int64
}

//streamgen:mapGroupsWithState watermark=5s eventtime=T
func noUnit(k string, rows iter.Seq[NoUnit], st *typed.GroupState[S]) (S, error) {
	return S{}, nil
}
