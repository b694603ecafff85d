// Package sensor is the schema of the heterogeneity activity recognition
// data set that the examples and benchmarks read: one reading of a phone or
// watch accelerometer, labelled with what its user was doing.
package sensor

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// Event is one sensor reading, with the data set's JSON field names.
//
//streamgen:record
type Event struct {
	ArrivalTime  int64   `json:"Arrival_Time"`                             // when the reading arrived, in ms since the Unix epoch
	CreationTime int64   `json:"Creation_Time" stream:"eventtime,unit=ns"` // when the reading was taken, in ns since the Unix epoch: the event time
	Device       string  `json:"Device"`
	Index        int64   `json:"Index"`
	Model        string  `json:"Model"`
	User         string  `json:"User" stream:"key"`
	Activity     string  `json:"gt"` // "stand", "sit", "walk", "bike", ...; null in the data reads as ""
	X            float64 `json:"x"`
	Y            float64 `json:"y"`
	Z            float64 `json:"z"`
}
