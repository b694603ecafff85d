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
