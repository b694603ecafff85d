package cli

import (
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
)

// The sample as an unreliable network delivers it, for the examples that
// drop duplicates and late readings (an IoT network: the same message
// may be sent several times). Besides every reading of Sample, in
// the same files:
//
//   - every 25th reading of a file is delivered again right after it,
//     half of those with a later Arrival_Time (a resend: the same User
//     and Creation_Time, the same reading);
//   - each file after the first starts with a resend of 5 readings from
//     the end of the file before (less than a second behind the newest
//     reading so far) and 5 from its start (about half a minute behind);
//   - each file after the first holds readings taken long before the
//     newest reading of the files before it, by 7 h (late for a 5 h
//     watermark delay), by exactly 5 h, by 90 s, by exactly 5 s and by 5 s
//     less a nanosecond: when each file is a batch, the watermark of a
//     batch with a delay of 5 h or 5 s is that newest reading less the
//     delay, so the readings exactly 5 h and 5 s behind are at it (late)
//     and the one 5 s less a nanosecond behind is just after it.
//
// Readings taken late are new readings (their own Index and Creation_Time),
// with a user, device and activity of a reading of their file.
const (
	sampleResendEvery = 25 // every 25th reading of a file is delivered twice
	sampleResendTail  = 5  // readings of the end of the file before, delivered again
	sampleResendHead  = 5  // readings of the start of the file before, delivered again
)

// sampleLateBy are how far behind the newest reading of the files before
// the late readings of a file are taken.
var sampleLateBy = []time.Duration{7 * time.Hour, 5 * time.Hour, 90 * time.Second, 5 * time.Second, 5*time.Second - time.Nanosecond}

// SampleWithDuplicates returns the built-in sample with readings delivered
// twice and readings that arrive late (see above), in file order. The rows
// of its files are those of Sample's files, with the duplicates and late
// readings among them.
func SampleWithDuplicates() [][]sensor.Event {
	clean := Sample()
	files := make([][]sensor.Event, len(clean))
	lateIndex := int64(1_000_000) // the Index of the next late reading, past the sample's
	var newest int64              // the newest Creation_Time of the files before
	for f, rows := range clean {
		var out []sensor.Event
		if f > 0 {
			before := clean[f-1]
			out = append(out, before[len(before)-sampleResendTail:]...)
			out = append(out, before[:sampleResendHead]...)
		}
		for i, e := range rows {
			out = append(out, e)
			if i%sampleResendEvery == sampleResendEvery-1 {
				again := e
				if i%(2*sampleResendEvery) == sampleResendEvery-1 {
					again.ArrivalTime += 1500 // ms: delivered again 1.5 s later
				}
				out = append(out, again)
			}
			// The late readings go after the 100th, 200th, ... reading.
			if k := i / 100; f > 0 && i%100 == 99 && k < len(sampleLateBy) {
				late := e
				late.CreationTime = newest - int64(sampleLateBy[k])
				late.ArrivalTime = e.ArrivalTime
				late.Index = lateIndex
				lateIndex++
				out = append(out, late)
			}
		}
		for _, e := range rows {
			newest = max(newest, e.CreationTime)
		}
		files[f] = out
	}
	return files
}

// WriteSampleWithDuplicates writes SampleWithDuplicates as JSON-lines files
// in dir, with the line that is not valid JSON that WriteSample writes.
func WriteSampleWithDuplicates(dir string) error {
	return writeSampleFiles(dir, SampleWithDuplicates(), true)
}
