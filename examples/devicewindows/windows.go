package main

import (
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// WindowSize is the number of readings in a window.
const WindowSize = 500

// DeviceAverage is the average x of a full window of a device.
//
//streamgen:record
type DeviceAverage struct {
	Device          string  `json:"device"`
	PreviousAverage float64 `json:"previousAverage"`
}

// deviceAverages writes, per device, the average x of each run of
// WindowSize readings in event-time order: count windows, with the
// built-in AggregateEvery (the readings since the last full window wait in
// state for the next batches).
func deviceAverages(in typed.Stream[sensor.Event]) typed.Stream[DeviceAverage] {
	byDevice := typed.GroupByKey(in, func(e *sensor.Event) string { return e.Device })
	byTime := func(a, b *sensor.Event) int { return compareInt(a.CreationTime, b.CreationTime) }
	x := func(e *sensor.Event) float64 { return e.X }
	return typed.AggregateEvery(byDevice, WindowSize, byTime, typed.Avg(x), func(device string, avg float64) DeviceAverage {
		return DeviceAverage{Device: device, PreviousAverage: avg}
	})
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
