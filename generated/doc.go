// Package generated holds, in its subpackages, this repository's own
// annotated records and the code streamgen generates for them, committed so
// that a reader sees what the generator emits and CI can check that
// regenerating changes nothing:
//
//   - sensor: the sensor event schema the examples and benchmarks use;
//   - fixtures: records covering every supported field type, tag and
//     evolution case, with the tests that check their codecs against
//     encoding/json and against each other.
package generated

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen ./...
