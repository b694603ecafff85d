package main

import (
	"iter"
	"slices"
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Gap is how long a user may be silent before their session ends.
const Gap = 5 * time.Second

// Session is the state of a user's open session.
//
//streamgen:record
type Session struct {
	Start      time.Time
	End        time.Time
	Count      int64
	Activities []string // distinct, in order of first appearance
	XSum       float64
}

// SessionOut is a closed session.
//
//streamgen:record
type SessionOut struct {
	UID        string    `json:"uid"`
	Start      time.Time `json:"start"`
	End        time.Time `json:"end"`
	Count      int64     `json:"count"`
	Activities []string  `json:"activities"`
	XAvg       float64   `json:"xAvg"`
}

// eventTime is a reading's event time: its creation time.
func eventTime(e *sensor.Event) time.Time { return time.Unix(0, e.CreationTime).UTC() }

// sessionize closes a user's session when a reading comes more than Gap
// after its last one (the reading opens the next), or when the watermark
// passes its end + Gap; it is called with the user's readings of the
// batch, or with none when the session timed out.
//
//streamgen:flatMapGroupsWithState mode=append timeout=event watermark=5s
func sessionize(user string, events iter.Seq[sensor.Event], state *typed.GroupState[Session], emit func(SessionOut)) error {
	s, open := state.Get()
	if state.HasTimedOut() {
		emit(closeSession(user, s))
		state.Remove()
		return nil
	}
	rows := slices.SortedFunc(events, func(a, b sensor.Event) int { return eventTime(&a).Compare(eventTime(&b)) })
	for _, e := range rows {
		t := eventTime(&e)
		if open && t.Sub(s.End) > Gap {
			emit(closeSession(user, s))
			open = false
		}
		if !open {
			s, open = Session{Start: t, End: t}, true
		}
		if t.Before(s.Start) {
			s.Start = t
		}
		if t.After(s.End) {
			s.End = t
		}
		s.Count++
		s.XSum += e.X
		if !slices.Contains(s.Activities, e.Activity) {
			s.Activities = append(s.Activities, e.Activity)
		}
	}
	state.Update(s)
	return state.SetTimeoutTimestamp(s.End.Add(Gap))
}

func closeSession(user string, s Session) SessionOut {
	return SessionOut{UID: user, Start: s.Start, End: s.End, Count: s.Count, Activities: s.Activities, XAvg: s.XSum / float64(s.Count)}
}
