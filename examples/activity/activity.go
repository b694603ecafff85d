package main

import (
	"iter"
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Activity is a user's current activity: the state, and the output row.
//
//streamgen:record
type Activity struct {
	User     string    `json:"user"`
	Activity string    `json:"activity"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end"`
}

// updateActivity folds a user's readings, in the order they were read,
// into their current activity: a reading of the same activity widens its
// start and end; a reading of another activity with a later time starts
// that activity; an older reading of another activity changes nothing.
//
//streamgen:mapGroupsWithState
func updateActivity(user string, events iter.Seq[sensor.Event], state *typed.GroupState[Activity]) (Activity, error) {
	a, ok := state.Get()
	for e := range events {
		t := time.Unix(0, e.CreationTime).UTC()
		switch {
		case !ok:
			a, ok = Activity{User: user, Activity: e.Activity, Start: t, End: t}, true
		case e.Activity == a.Activity:
			if t.Before(a.Start) {
				a.Start = t
			}
			if t.After(a.End) {
				a.End = t
			}
		case t.After(a.End):
			a = Activity{User: user, Activity: e.Activity, Start: t, End: t}
		}
	}
	state.Update(a)
	return a, nil
}
