// Package countrec holds the records of the stateful benchmarks in package
// bench: an input event with a string key, a per-key count as state, and
// the per-key output row.
package countrec

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Event is an input row: one occurrence of Key.
//
//streamgen:record
type Event struct {
	Key string `json:"key" stream:"key"`
}

// Count is the per-key state: how many events the key has had.
//
//streamgen:record
type Count struct {
	N int64
}

// KeyCount is an output row: the key's count after a batch.
//
//streamgen:record
type KeyCount struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
}

// TimedEvent is an input row of the latency benchmark: an occurrence of
// Key, with the time it was sent (Unix nanoseconds).
//
//streamgen:record
type TimedEvent struct {
	Key  string `json:"key"`
	Sent int64  `json:"sent"`
}

// TimedCount is an output row of the latency benchmark: the key's count,
// with the send time of the latest of its events counted.
//
//streamgen:record
type TimedCount struct {
	Key   string `json:"key"`
	Count int64  `json:"count"`
	Sent  int64  `json:"sent"`
}
