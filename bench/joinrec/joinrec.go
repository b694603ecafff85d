// Package joinrec holds the records of the join benchmarks in package
// bench: a row of either side, a row of a static table, and the joined
// rows.
package joinrec

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Row is a row of either side of a stream-stream join, or of the stream of
// a stream-static join: a key, an event time in Unix nanoseconds and a
// value.
//
//streamgen:record
type Row struct {
	Key   string `json:"key"`
	Time  int64  `json:"time"`
	Value int64  `json:"value"`
}

// Pair is a joined row: the key and the values of both sides.
//
//streamgen:record
type Pair struct {
	Key   string `json:"key"`
	Left  int64  `json:"left"`
	Right int64  `json:"right"`
}

// Info is a row of a static table: a key's attributes.
//
//streamgen:record
type Info struct {
	Key   string `json:"key"`
	Group string `json:"group"`
	Score int64  `json:"score"`
}

// Enriched is a stream row with its key's attributes.
//
//streamgen:record
type Enriched struct {
	Key   string `json:"key"`
	Value int64  `json:"value"`
	Group string `json:"group"`
	Score int64  `json:"score"`
}
