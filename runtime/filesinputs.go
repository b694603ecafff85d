package runtime

import (
	"encoding/json"
	"slices"
	"strings"
)

// The files source counts its inputs (InputCounter): the files of a batch.

// PlannedInputs returns the number of files named in end and not in
// start: the files Read reads.
func (s *filesSource) PlannedInputs(start, end json.RawMessage) (int64, error) {
	done, err := s.decode(start, "start")
	if err != nil {
		return 0, err
	}
	all, err := s.decode(end, "end")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, name := range all {
		if _, found := slices.BinarySearch(done, name); !found {
			n++
		}
	}
	return n, nil
}

// InputOf returns the file of a record: its Position without the line
// number ("name:line"), or the whole Position of a file that could not be
// read.
func (s *filesSource) InputOf(r Record) string {
	i := strings.LastIndexByte(r.Position, ':')
	if i < 0 || i == len(r.Position)-1 {
		return r.Position
	}
	for _, c := range r.Position[i+1:] {
		if c < '0' || c > '9' {
			return r.Position
		}
	}
	return r.Position[:i]
}
