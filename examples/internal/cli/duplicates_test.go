package cli

import (
	"slices"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/sensor"
)

// TestSampleWithDuplicates: each file holds its file of Sample, in order,
// and besides it only resends (a reading of the file or of the one before,
// by User and Creation_Time) and readings taken the promised durations
// before the newest reading of the files before.
func TestSampleWithDuplicates(t *testing.T) {
	clean, messy := Sample(), SampleWithDuplicates()
	if len(messy) != len(clean) {
		t.Fatalf("%d files, want %d", len(messy), len(clean))
	}
	type key struct {
		user string
		at   int64
	}
	var newest int64
	for f := range clean {
		known := map[key]bool{}
		for _, e := range clean[f] {
			known[key{e.User, e.CreationTime}] = true
		}
		if f > 0 {
			for _, e := range clean[f-1] {
				known[key{e.User, e.CreationTime}] = true
			}
		}
		var kept []sensor.Event
		resends, late := 0, map[time.Duration]int{}
		next := 0 // the next reading of clean[f] to find
		for _, e := range messy[f] {
			switch {
			case next < len(clean[f]) && e == clean[f][next]:
				kept = append(kept, e)
				next++
			case known[key{e.User, e.CreationTime}]:
				resends++
			case e.Index >= 1_000_000:
				late[time.Duration(newest-e.CreationTime)]++
			default:
				t.Fatalf("file %d: a reading that is neither the sample's, a resend nor late: %+v", f, e)
			}
		}
		if !slices.Equal(kept, clean[f]) {
			t.Fatalf("file %d: %d of the sample's %d readings, in order", f, len(kept), len(clean[f]))
		}
		wantResends, wantLate := len(clean[f])/sampleResendEvery, 0
		if f > 0 {
			wantResends += sampleResendTail + sampleResendHead
			wantLate = len(sampleLateBy)
			for _, d := range sampleLateBy {
				if late[d] != 1 {
					t.Errorf("file %d: %d readings %v behind, want 1", f, late[d], d)
				}
			}
		}
		if resends != wantResends || len(late) != wantLate {
			t.Errorf("file %d: %d resends and %d late readings, want %d and %d", f, resends, len(late), wantResends, wantLate)
		}
		for _, e := range clean[f] {
			newest = max(newest, e.CreationTime)
		}
	}
}
