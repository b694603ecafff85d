package basic

import "time"

// Reading is a record with a key and an event time.
//
//streamgen:record
type Reading struct {
	Sensor string    `json:"sensor" stream:"key"`
	At     time.Time `json:"at" stream:"eventtime"`
	Value  float64   `json:"value"`
	Unit   *string   `json:"unit,omitempty"`
	Labels map[string]string
	Window [2]int32 `stream:"id=5"`
	cache  []byte
}
