package runtime

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
)

// The files source counts its inputs (InputCounter): the files of a batch.

// PlannedInputs returns the number of the batch's files (named in end)
// that start has not read: the files Read reads.
func (s *filesSource) PlannedInputs(start, end json.RawMessage) (int64, error) {
	done, err := s.decode(start, "start")
	if err != nil {
		return 0, err
	}
	batch, err := s.decode(end, "end")
	if err != nil {
		return 0, err
	}
	var n int64
	for _, name := range batch.Files {
		if !done.holds(name) {
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

// Lag counts the files of the listing latest that the log of position
// has not read (LagReporter), and their bytes.
func (s *filesSource) Lag(position, latest json.RawMessage) ([]PartitionLag, error) {
	done, err := s.decode(position, "position")
	if err != nil {
		return nil, err
	}
	listing, err := s.decode(latest, "latest")
	if err != nil {
		return nil, err
	}
	before := done.forgotten()
	l := PartitionLag{Partition: "files", Latest: int64(len(listing.Files))}
	for i, name := range listing.Files {
		if done.holds(name) {
			continue
		}
		if t := listing.modTime(i); t != 0 && t < before {
			continue // older than the log remembers: taken as read
		}
		l.Lag++
		if info, err := os.Stat(filepath.Join(s.root, name)); err == nil {
			l.Bytes += info.Size()
		}
	}
	l.Position = l.Latest - l.Lag
	return []PartitionLag{l}, nil
}
