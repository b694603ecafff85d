package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
)

// The built-in sample is shaped as Databricks' events data set: many small JSON-lines files of {"time", "action"} rows, times in
// Unix seconds, a little increasing from row to row and from file to
// file, actions Open or Close. One file also holds a row without an
// action, which the query refuses and sends to the dead letters.
const (
	sampleFiles       = 50
	sampleRowsPerFile = 80
	sampleStart       = 1469501107 // the data set's first time
	sampleBadFile     = 7          // the file with the refused row
)

// sample returns the sample's events, per file, in file order.
func sample() [][]Event {
	r := rand.New(rand.NewPCG(2016, 7))
	files := make([][]Event, sampleFiles)
	t := int64(sampleStart)
	for f := range files {
		for range sampleRowsPerFile {
			t += int64(r.IntN(4))
			action := "Close"
			if r.IntN(100) < 52 {
				action = "Open"
			}
			files[f] = append(files[f], Event{Time: t, Action: action})
		}
	}
	return files
}

// sampleFile returns the name and contents of the sample's file i.
func sampleFile(i int, events []Event) (name string, data []byte, err error) {
	var b bytes.Buffer
	for j, e := range events {
		line, err := e.MarshalJSON()
		if err != nil {
			return "", nil, err
		}
		b.Write(line)
		b.WriteByte('\n')
		if i == sampleBadFile && j == len(events)/2 {
			fmt.Fprintf(&b, "{\"time\":%d}\n", e.Time)
		}
	}
	return fmt.Sprintf("part-%05d.json", i), b.Bytes(), nil
}

// writeSampleFiles writes the sample's files from to to (excluded) into
// dir.
func writeSampleFiles(dir string, from, to int) error {
	files := sample()
	for i := from; i < to; i++ {
		name, data, err := sampleFile(i, files[i])
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeSample writes the whole sample into dir.
func writeSample(dir string) error { return writeSampleFiles(dir, 0, sampleFiles) }
