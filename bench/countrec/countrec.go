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
