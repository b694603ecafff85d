package required

import "time"

// Reading is a row read from JSON: its key and event time must be there,
// and so must Sensor (a pointer, so that null is refused, not nil kept)
// and Seq, pinned to id 7. Note is optional, as every untagged field is.
//
//streamgen:record
type Reading struct {
	Origin
	Device string    `json:"device" stream:"key,required"`
	At     time.Time `json:"at" stream:"eventtime"`
	Sensor *string   `json:"sensor" stream:"required"`
	Seq    int64     `json:"seq" stream:"required,id=7"`
	Note   string    `json:"note,omitempty"`
	Where  *Spot     `json:"where,omitempty"`
	Spots  []Spot    `json:"spots,omitempty"`
}

// Origin is embedded: its required field is a member of Reading's
// object.
type Origin struct {
	Source string `json:"source" stream:"required"`
}

// Spot is not a record: its required fields are checked in every object
// read into one.
type Spot struct {
	Lat  float64 `stream:"required"`
	Lon  float64 `stream:"required"`
	Name string
}

// Batch has no required fields of its own.
//
//streamgen:record
type Batch struct {
	Rows []Reading
}
