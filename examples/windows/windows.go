package main

import (
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// WindowCount is the number of readings in an event-time window, or of one
// user's readings in it: Spark's row of
// groupBy(window(event_time, ...)).count(), {"window": {"start", "end"},
// "count"}, and of groupBy(window(event_time, ...), "User").count(), with
// "User" between them. User is nil, and left out, when the count is not
// per user.
//
//streamgen:record
type WindowCount struct {
	Window typed.Window `json:"window"`
	User   *string      `json:"User,omitempty"`
	Count  int64        `json:"count"`
}

// Query is what the flags make of the windowed counts.
type Query struct {
	// Window is the windows' size; Slide, how far apart they start: Slide
	// = Window makes tumbling windows, a smaller Slide sliding ones.
	// Cumulate, when set, makes Flink's cumulative windows instead: each
	// Window-long period has a window ending every Cumulate, all starting
	// with it (Slide is then Window).
	Window, Slide, Cumulate time.Duration
	// Watermark is the watermark's delay behind the newest event time;
	// NoWatermark leaves the watermark out.
	Watermark   time.Duration
	NoWatermark bool
	// ByUser counts per window and user, not per window.
	ByUser bool
}

// eventTime is a reading's event time: Creation_Time, in nanoseconds since
// the Unix epoch, as Spark's
// cast(cast(Creation_Time as double)/1000000000 as timestamp) (to the
// nanosecond here, where Spark keeps microseconds).
func eventTime(e *sensor.Event) time.Time { return time.Unix(0, e.CreationTime).UTC() }

// windowCounts counts the readings per window (and user), as this Spark
// query does:
//
//	withEventTime
//	  .withWatermark("event_time", "5 hours")
//	  .groupBy(window(col("event_time"), "10 minutes", "5 minutes"))
//	  .count()
//
// In Update and Append mode a reading is dropped from each of its windows
// whose end the watermark has reached, and counted in the progress report;
// Complete mode drops nothing. The output mode is the query's (see main).
func windowCounts(in typed.Stream[sensor.Event], q Query) typed.Stream[WindowCount] {
	if !q.NoWatermark {
		in = typed.WithWatermark(in, eventTime, q.Watermark)
	}
	windows := typed.Tumbling(q.Window)
	switch {
	case q.Cumulate != 0:
		windows = typed.Cumulate(q.Cumulate, q.Window)
	case q.Slide != q.Window:
		windows = typed.Sliding(q.Window, q.Slide)
	}
	count := typed.Count[sensor.Event]()
	if q.ByUser {
		byUser := typed.GroupByWindow(in, eventTime, windows, func(e *sensor.Event) string { return e.User })
		return typed.AggregateWindows(byUser, count, func(w typed.Window, user string, n int64) WindowCount {
			return WindowCount{Window: w, User: &user, Count: n}
		})
	}
	// One group per window: every reading has the same key, struct{}.
	byWindow := typed.GroupByWindow(in, eventTime, windows, func(*sensor.Event) struct{} { return struct{}{} })
	return typed.AggregateWindows(byWindow, count, func(w typed.Window, _ struct{}, n int64) WindowCount {
		return WindowCount{Window: w, Count: n}
	})
}
