// Package clashes declares methods, fields and functions named like those
// the generator writes, which it refuses.
package clashes

import (
	"encoding/json"
	"iter"
	"time"

	"github.com/streamgen/streamgen/typed"
)

// OwnJSON encodes itself; the generator would write MarshalJSON and
// UnmarshalBinary again.
//
//streamgen:record
type OwnJSON struct{ A int }

func (o OwnJSON) MarshalJSON() ([]byte, error) { return json.Marshal(o.A) }

func (o *OwnJSON) UnmarshalBinary(b []byte) error { return nil }

// Helper is a method name the generator does not write.
func (o OwnJSON) Helper() {}

// FieldNames has fields named like generated methods.
//
//streamgen:record
type FieldNames struct {
	AppendJSON string
	StreamSchema
	Fine int
}

// StreamSchema is embedded in FieldNames, as a field of its name.
type StreamSchema struct{ V int }

// Visit is an input row.
//
//streamgen:record
type Visit struct {
	Page string    `stream:"key"`
	At   time.Time `stream:"eventtime"`
}

// Hits is state and output.
//
//streamgen:record
type Hits struct{ N int64 }

// countStream is the name the binding of count would get.
func countStream() {}

//streamgen:mapGroupsWithState
func count(page string, visits iter.Seq[Visit], state *typed.GroupState[Hits]) (Hits, error) {
	return Hits{}, nil
}

// lateStreamLateRows is the name of the LateRows option of late's binding.
var lateStreamLateRows = 0

//streamgen:mapGroupsWithState watermark=5s
func late(page string, visits iter.Seq[Visit], state *typed.GroupState[Hits]) (Hits, error) {
	return Hits{}, nil
}

//streamgen:mapGroupsWithState name=Twice
func first(page string, visits iter.Seq[Visit], state *typed.GroupState[Hits]) (Hits, error) {
	return Hits{}, nil
}

//streamgen:mapGroupsWithState name=Twice
func second(page string, visits iter.Seq[Visit], state *typed.GroupState[Hits]) (Hits, error) {
	return Hits{}, nil
}

//streamgen:mapGroupsWithState name=appendBinaryHits
func helper(page string, visits iter.Seq[Visit], state *typed.GroupState[Hits]) (Hits, error) {
	return Hits{}, nil
}
