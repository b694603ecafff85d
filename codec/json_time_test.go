package codec

import (
	"testing"
	"time"
)

// TestAppendJSONTimeDays compares the hand-written writer with
// time.Time.MarshalJSON on every day of the years it writes (every 37th
// in -short), each at a clock time, nanoseconds and zone that vary with
// the day, leap days and the edges of the range included.
func TestAppendJSONTimeDays(t *testing.T) {
	step := 1
	if testing.Short() {
		step = 37
	}
	nanos := []int{0, 5, 100_000_000, 120_000_000, 123_000, 999_999_999, 10, 400_000_001}
	offsets := []int{0, 30, -30, 3600, -5 * 3600, 5*3600 + 30*60, -(9*3600 + 30*60), 23*3600 + 59*60 + 59, -(23*3600 + 59*60 + 59)}
	first := time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC).Unix() / 86400
	last := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC).Unix() / 86400
	check := func(tm time.Time) {
		want, err := tm.MarshalJSON()
		got, ok := jsonAppendTime([]byte("x"), tm)
		if err != nil {
			if ok {
				t.Fatalf("%v: wrote %s, MarshalJSON fails: %v", tm, got, err)
			}
			return
		}
		if !ok || string(got) != "x"+string(want) {
			t.Fatalf("%v: got %s (%v), want x%s", tm, got, ok, want)
		}
	}
	for i, day := 0, first-1; day <= last+1; i, day = i+1, day+int64(step) {
		zone := time.FixedZone("", offsets[i%len(offsets)])
		sec := day*86400 + int64(i*7919)%86400
		check(time.Unix(sec, int64(nanos[i%len(nanos)])).In(zone))
		check(time.Unix(day*86400, 0).UTC())
	}
	for _, tm := range []time.Time{
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(2024, 2, 29, 12, 0, 0, 0, time.UTC), time.Date(2000, 2, 29, 23, 59, 59, 0, time.UTC),
		time.Date(1900, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(1600, 12, 31, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", 3600)), time.Date(0, 1, 1, 0, 0, 0, 0, time.FixedZone("", -3600)),
		time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", -3600)), time.Date(9999, 12, 31, 23, 0, 0, 0, time.FixedZone("", 3600)),
		time.Date(2026, 3, 1, 0, 0, 0, 0, time.FixedZone("", 86400)), time.Date(2026, 3, 1, 0, 0, 0, 0, time.FixedZone("", -86400)),
		time.Date(2026, 3, 1, 0, 0, 0, 0, time.Local), time.Now(),
	} {
		check(tm)
	}
}
