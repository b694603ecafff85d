package faults_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/streamgen/streamgen/generated/sensor"
)

// The input is shaped as the examples' built-in sample (cli.Sample, which
// this package, outside examples/, cannot import): users reading on a
// shared clock every 20 to 120 ms, in runs of one activity, with pauses
// of 6 to 15 s that end a user's session (the sessions example closes one
// after 5 s); files in event-time order, with up to 0.9 s of disorder
// within a file and none across files, so that no reading is later than
// the sessions example's 5 s watermark delay. Three devices share the
// readings, so that the devicewindows example fills a window of 500
// readings per device every 1,500 readings or so.
var (
	sampleUsers      = []string{"ana", "ben", "cat", "dan", "eve", "fay"}
	sampleActivities = []string{"stand", "sit", "walk", "bike", "stairsup", "stairsdown"}
	sampleDevices    = []string{"nexus4_1", "s3_1", "gear_1"}
	sampleModels     = []string{"nexus4", "s3", "gear"}
)

// sample returns files of rowsPerFile readings each, in file order.
func sample(r *rand.Rand, files, rowsPerFile int) [][]sensor.Event {
	now := int64(1424686733000000000) // ns, the shared clock
	pausedUntil := map[string]int64{}
	activity := map[string]string{}
	for _, u := range sampleUsers {
		activity[u] = sampleActivities[r.IntN(len(sampleActivities))]
	}
	out := make([][]sensor.Event, files)
	index := int64(0)
	var previousFiles int64 // the latest creation time of the files before
	for f := range out {
		latest := previousFiles
		for len(out[f]) < rowsPerFile {
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
			out[f] = append(out[f], sensor.Event{
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
	return out
}

// badLineEvery puts a line that does not decode in every badLineEvery-th
// file, so that the dead letters are checked for loss and doubling too.
const badLineEvery = 5

// writeSample writes files[from:to] to dir as part-NNNNN.jsonl, each with
// a line that does not decode in its middle when its index is a multiple
// of badLineEvery.
func writeSample(t *testing.T, dir string, files [][]sensor.Event, from, to int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		var b bytes.Buffer
		for j, ev := range files[i] {
			line, err := ev.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
			if i%badLineEvery == 0 && j == len(files[i])/2 {
				fmt.Fprintf(&b, "{\"User\": %q, \"gt\": \"walk\", \"Creation_Time\": \n", ev.User)
			}
		}
		writeFileAtomic(t, dir, fmt.Sprintf("part-%05d.jsonl", i), b.Bytes())
	}
}

// writeFileAtomic writes a file as the files source asks writers to:
// under a hidden name, then renamed to its visible one.
func writeFileAtomic(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// countRows is the number of readings per user in files.
func countRows(files [][]sensor.Event) map[string]int64 {
	n := map[string]int64{}
	for _, f := range files {
		for _, ev := range f {
			n[ev.User]++
		}
	}
	return n
}
