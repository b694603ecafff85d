package main

import (
	"slices"
	"testing"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/examples/internal/clitest"
	"github.com/streamgen/streamgen/generated/sensor"
)

// TestWindowsMatchAPlainLoop: each device's readings sorted by event time
// and cut into runs of WindowSize give the averages written, in order.
func TestWindowsMatchAPlainLoop(t *testing.T) {
	byDevice := map[string][]sensor.Event{}
	for _, file := range cli.Sample() {
		for _, e := range file {
			byDevice[e.Device] = append(byDevice[e.Device], e)
		}
	}
	want := map[string][]float64{}
	windows := 0
	for d, evs := range byDevice {
		slices.SortStableFunc(evs, func(a, b sensor.Event) int { return compareInt(a.CreationTime, b.CreationTime) })
		for i := 0; i+WindowSize <= len(evs); i += WindowSize {
			sum := 0.0
			for _, e := range evs[i : i+WindowSize] {
				sum += e.X
			}
			want[d] = append(want[d], sum/WindowSize)
			windows++
		}
	}
	if windows < 4 {
		t.Fatalf("the sample fills only %d windows", windows)
	}
	clitest.Run(t, run, nil, func(t *testing.T, out, _ string) {
		got := map[string][]float64{}
		for _, a := range clitest.ReadOutput[DeviceAverage](t, out) {
			got[a.Device] = append(got[a.Device], a.PreviousAverage)
		}
		for d, w := range want {
			g := got[d]
			if len(g) != len(w) {
				t.Fatalf("device %s: %d windows, want %d", d, len(g), len(w))
			}
			for i := range w {
				if diff := g[i] - w[i]; diff > 1e-15 || diff < -1e-15 {
					t.Fatalf("device %s window %d: %v, want %v", d, i, g[i], w[i])
				}
			}
		}
	})
}
