package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/examples/internal/clitest"
	"github.com/streamgen/streamgen/generated/sensor"
)

// TestDeviceCountsMatchAPlainLoop: the last batch's table (Complete mode)
// holds, for each (gt, Model) of the stream with neither part null that
// the history has too, the averages of x, y and z over the stream and over
// the history, as a plain loop computes them; under every batch split and
// restart, with the history of two of the sample's files.
func TestDeviceCountsMatchAPlainLoop(t *testing.T) {
	files := cli.Sample()
	history := t.TempDir()
	for i, f := range files[:2] {
		var b strings.Builder
		for _, e := range f {
			line, err := e.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(history, "h"+string(rune('0'+i))+".jsonl"), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	type sums struct{ n, x, y, z float64 }
	add := func(m map[DeviceKey]*sums, e sensor.Event) {
		k := DeviceKey{Gt: e.Activity, Model: e.Model}
		if m[k] == nil {
			m[k] = &sums{}
		}
		s := m[k]
		s.n, s.x, s.y, s.z = s.n+1, s.x+e.X, s.y+e.Y, s.z+e.Z
	}
	stream, hist := map[DeviceKey]*sums{}, map[DeviceKey]*sums{}
	for i, f := range files {
		for _, e := range f {
			add(stream, e)
			if i < 2 {
				add(hist, e)
			}
		}
	}
	var want []DeviceCount
	for k, s := range stream {
		h, ok := hist[k]
		if !ok || k.Gt == "" || k.Model == "" {
			continue
		}
		want = append(want, DeviceCount{Gt: k.Gt, Model: k.Model, AvgX: s.x / s.n, AvgY: s.y / s.n, AvgZ: s.z / s.n,
			HistAvgX: h.x / h.n, HistAvgY: h.y / h.n, HistAvgZ: h.z / h.n})
	}
	order := func(a, b DeviceCount) int { return strings.Compare(a.Gt+"/"+a.Model, b.Gt+"/"+b.Model) }
	slices.SortFunc(want, order)
	if len(want) < 5 {
		t.Fatalf("the sample has %d groups", len(want))
	}
	clitest.Run(t, run, []string{"-static", history}, func(t *testing.T, out, _ string) {
		// The last batch's file: Complete mode writes the whole table.
		files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
		slices.Sort(files)
		data, err := os.ReadFile(files[len(files)-1])
		if err != nil {
			t.Fatal(err)
		}
		var got []DeviceCount
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var d DeviceCount
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatal(err)
			}
			got = append(got, d)
		}
		slices.SortFunc(got, order)
		if len(got) != len(want) {
			t.Fatalf("%d rows, want %d", len(got), len(want))
		}
		close := func(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }
		for i := range want {
			g, w := got[i], want[i]
			if g.Gt != w.Gt || g.Model != w.Model || !close(g.AvgX, w.AvgX) || !close(g.AvgY, w.AvgY) || !close(g.AvgZ, w.AvgZ) ||
				!close(g.HistAvgX, w.HistAvgX) || !close(g.HistAvgY, w.HistAvgY) || !close(g.HistAvgZ, w.HistAvgZ) {
				t.Fatalf("row %d: %+v, want %+v", i, g, w)
			}
		}
	})
}
