package main

import (
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Delay is how far the watermark stays behind the newest event time: a
// resend is expected within seconds of the reading it repeats.
const Delay = 5 * time.Second

// UserCount is a user's number of distinct readings: Spark's row of
// groupBy("User").count(), {"User", "count"}.
//
//streamgen:record
type UserCount struct {
	User  string `json:"User"`
	Count int64  `json:"count"`
}

// Reading identifies a reading for deduplication: its user and its event
// time, as Spark's dropDuplicates("User", "event_time") (two rows
// with the same user and time are the same reading sent twice; other
// fields may differ, Arrival_Time say). The event time is in the key so
// that a key is forgotten once the watermark passes it.
//
//streamgen:record
type Reading struct {
	User         string `json:"User"`
	CreationTime int64  `json:"Creation_Time"`
}

// eventTime is a reading's event time: Creation_Time, in nanoseconds since
// the Unix epoch.
func eventTime(e *sensor.Event) time.Time { return time.Unix(0, e.CreationTime).UTC() }

// distinctCounts counts each user's distinct readings, as this Spark
// query does:
//
//	withEventTime
//	  .withWatermark("event_time", "5 seconds")
//	  .dropDuplicates("User", "event_time")
//	  .groupBy("User")
//	  .count()
//
// A reading at or before the watermark is late, and dropped (counted in the
// progress report); a later copy of a reading is dropped while the
// watermark has not reached it, which covers every copy that is not late.
// The output mode is Complete (see main).
func distinctCounts(in typed.Stream[sensor.Event]) typed.Stream[UserCount] {
	watermarked := typed.WithWatermark(in, eventTime, Delay)
	// The event time is the watermark's: the state is ordered by it, one
	// write per new reading and one range deletion per watermark.
	distinct := typed.DropDuplicatesWithEventTime(watermarked, func(e *sensor.Event) string { return e.User })
	byUser := typed.GroupByKey(distinct, func(e *sensor.Event) string { return e.User })
	return typed.AggregateByKey(byUser, typed.Count[sensor.Event](), func(user string, n int64) UserCount {
		return UserCount{User: user, Count: n}
	})
}
