package runtime

import (
	"math"
	"testing"
	"time"
)

// TestClampedNanos: event times in the range of Unix nanoseconds are
// exact; times beyond it (a bad row's year 9999 or year 1) are the ends
// of the range, not a wrapped value, so they cannot move a watermark
// backwards.
func TestClampedNanos(t *testing.T) {
	for _, c := range []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(1_700_000_000, 123), 1_700_000_000_000_000_123},
		{time.Unix(0, math.MaxInt64), math.MaxInt64},
		{time.Unix(0, math.MinInt64), math.MinInt64},
		{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), math.MaxInt64},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), math.MinInt64},
	} {
		if got := clampedNanos(c.t); got != c.want {
			t.Errorf("clampedNanos(%v) = %d, want %d", c.t, got, c.want)
		}
	}
	var s eventTimeStats
	for _, sec := range []int64{10, 40, 30} {
		s.add(time.Unix(sec, 0))
	}
	if s.min != 10e9 || s.max != 40e9 || s.mean() != 80_000_000_000/3 {
		t.Errorf("stats of 10, 40, 30 s: min %d max %d mean %d", s.min, s.max, s.mean())
	}
}
