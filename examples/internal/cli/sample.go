package cli

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/streamgen/streamgen/generated/sensor"
)

// Sample shape: users with phones and watches, one reading every 20 to
// 120 ms on a shared clock, in runs of one activity, with pauses of 6 to 15
// s that end a user's session, spread over files in event-time order with
// up to 0.9 s of disorder within a file (less than the examples' watermark
// delay, so no reading of the sample is late) and none across files, so
// that every reading of a file comes after every reading of the files
// before it.
const (
	sampleFiles       = 8
	sampleRowsPerFile = 500
)

var (
	sampleUsers      = []string{"a", "b", "c", "d"}
	sampleActivities = []string{"stand", "sit", "walk", "bike", "stairsup", "stairsdown"}
	sampleDevices    = []string{"nexus4_1", "nexus4_2", "s3_1", "gear_1"}
	sampleModels     = []string{"nexus4", "nexus4", "s3", "gear"}
)

// Sample returns the built-in sample readings, in file order.
func Sample() [][]sensor.Event {
	r := rand.New(rand.NewPCG(2015, 2))
	now := int64(1424686733000000000) // ns, the shared clock
	pausedUntil := map[string]int64{}
	activity := map[string]string{}
	for _, u := range sampleUsers {
		activity[u] = sampleActivities[r.IntN(len(sampleActivities))]
	}
	files := make([][]sensor.Event, sampleFiles)
	index := int64(0)
	var previousFiles int64 // the latest creation time of the files before
	for f := range files {
		latest := previousFiles
		for len(files[f]) < sampleRowsPerFile {
			now += int64(20_000_000 + r.IntN(100_000_000))
			u := sampleUsers[r.IntN(len(sampleUsers))]
			if pausedUntil[u] > now {
				continue
			}
			if r.IntN(80) == 0 {
				pausedUntil[u] = now + int64(6+r.IntN(10))*1e9
				activity[u] = sampleActivities[r.IntN(len(sampleActivities))]
				continue
			}
			if r.IntN(40) == 0 {
				activity[u] = sampleActivities[r.IntN(len(sampleActivities))]
			}
			d := r.IntN(len(sampleDevices))
			created := max(now-int64(r.IntN(900_000_000)), previousFiles+1)
			latest = max(latest, created)
			files[f] = append(files[f], sensor.Event{
				ArrivalTime:  now/1e6 + int64(r.IntN(50)),
				CreationTime: created,
				Device:       sampleDevices[d],
				Index:        index,
				Model:        sampleModels[d],
				User:         u,
				Activity:     activity[u],
				X:            r.NormFloat64() / 100,
				Y:            r.NormFloat64() / 100,
				Z:            r.NormFloat64() / 100,
			})
			index++
		}
		previousFiles = latest
	}
	return files
}

// WriteSample writes the sample as JSON-lines files in dir, plus one line
// that is not valid JSON, for the dead-letter sink.
func WriteSample(dir string) error { return writeSampleFiles(dir, Sample(), true) }

// WriteValidSample writes the sample as WriteSample does, without the line
// that is not valid JSON: readings kept as history, which a static table
// reads.
func WriteValidSample(dir string) error { return writeSampleFiles(dir, Sample(), false) }

// writeSampleFiles writes files as WriteSample does: one JSON-lines file
// each, and with cut, one line that is not valid JSON at the end of the
// fourth.
func writeSampleFiles(dir string, files [][]sensor.Event, cut bool) error {
	for i, rows := range files {
		var b bytes.Buffer
		for _, ev := range rows {
			line, err := ev.MarshalJSON()
			if err != nil {
				return err
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		if cut && i == 3 {
			b.WriteString(`{"User": "a", "gt": "walk", "Creation_Time": ` + "\n")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%05d.jsonl", i)), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
