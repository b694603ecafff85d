package runtime

import (
	"math"
	"math/rand/v2"
	"slices"
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
		if got := ClampedNanos(c.t); got != c.want {
			t.Errorf("ClampedNanos(%v) = %d, want %d", c.t, got, c.want)
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

// TestGroupsRowsBetween: the rows of a run of groups, which the loop hands
// an operator to read ahead (RowsWarmer), are those of each group in turn,
// as a plain loop over the rows in arrival order finds them.
func TestGroupsRowsBetween(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var g Groups
	const groups, rows = 40, 300
	for i := range groups {
		g.NewGroup([]byte{byte(i)})
	}
	of := make([]int32, rows)
	for j := range of {
		// Most rows to a few busy groups, as a batch's are.
		of[j] = int32(r.IntN(groups))
		if r.IntN(4) > 0 {
			of[j] = int32(r.IntN(3))
		}
		g.AddRow(of[j])
	}
	g.sort()
	for range 200 {
		i := r.IntN(groups)
		k := i + 1 + r.IntN(groups-i)
		var want []int32
		for grp := i; grp < k; grp++ {
			for j, o := range of {
				if int(o) == grp {
					want = append(want, int32(j))
				}
			}
		}
		if got := g.rowsBetween(i, k); !slices.Equal(got, want) {
			t.Fatalf("rowsBetween(%d, %d) = %v, want %v", i, k, got, want)
		}
	}
}
