// Package windowrec holds the records of the window and deduplication
// benchmarks in package bench: the key of a reading for DropDuplicates (a
// grouping key of more than one field is a record).
package windowrec

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Reading identifies a sensor reading: its user and event time, in Unix
// nanoseconds, as Spark's dropDuplicates("User", "event_time").
//
//streamgen:record
type Reading struct {
	User         string
	CreationTime int64
}
