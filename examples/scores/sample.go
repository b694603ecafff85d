package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// The built-in sample: 200 users who each visit a few pages in each of
// two rounds, spread over 20 JSON-lines files of 20 users each. A user's
// visits of a round are all in one file, and each user has a file in each
// round, so a user's highest score changes from round to round.
const (
	sampleUsers         = 200
	sampleRounds        = 2
	sampleUsersPerFile  = 20
	sampleVisitsPerUser = 4 // per round
	sampleFiles         = sampleRounds * sampleUsers / sampleUsersPerFile
)

var samplePages = []string{"/", "/search", "/cart", "/checkout", "/help", "/account"}

// sample returns the sample's visits, per file, in file order: in each
// file, the users' visits interleaved.
func sample() [][]Visit {
	r := rand.New(rand.NewPCG(2024, 5))
	files := make([][]Visit, sampleFiles)
	id := int64(1)
	for f := range files {
		first := f % (sampleUsers / sampleUsersPerFile) * sampleUsersPerFile
		for range sampleVisitsPerUser {
			for u := first; u < first+sampleUsersPerFile; u++ {
				files[f] = append(files[f], Visit{
					EventID: id,
					User:    fmt.Sprintf("u%03d", u),
					Page:    samplePages[r.IntN(len(samplePages))],
					Seconds: 1 + r.Int64N(600),
				})
				id++
			}
		}
	}
	return files
}

// writeSampleFiles writes the sample's files from to to (excluded) into
// dir.
func writeSampleFiles(dir string, from, to int) error {
	files := sample()
	for i := from; i < to; i++ {
		var b bytes.Buffer
		for _, v := range files[i] {
			line, err := v.MarshalJSON()
			if err != nil {
				return err
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d.json", i)), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeSample writes the whole sample into dir.
func writeSample(dir string) error { return writeSampleFiles(dir, 0, sampleFiles) }
