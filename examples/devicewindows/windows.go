package main

import (
	"iter"
	"slices"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// WindowSize is the number of readings in a window.
const WindowSize = 500

// Window is a device's readings since its last full window.
//
//streamgen:record
type Window struct {
	Count int64
	SumX  float64
}

// DeviceAverage is the average x of a full window of a device.
//
//streamgen:record
type DeviceAverage struct {
	Device          string  `json:"device"`
	PreviousAverage float64 `json:"previousAverage"`
}

// updateWindow adds a device's readings of the batch, in event-time
// order, to its window, and emits the average of each window of
// WindowSize readings it completes.
//
//streamgen:flatMapGroupsWithState mode=append key=Device
func updateWindow(device string, events iter.Seq[sensor.Event], state *typed.GroupState[Window], emit func(DeviceAverage)) error {
	w, _ := state.Get()
	rows := slices.SortedStableFunc(events, func(a, b sensor.Event) int { return compareInt(a.CreationTime, b.CreationTime) })
	for _, e := range rows {
		w.Count++
		w.SumX += e.X
		if w.Count == WindowSize {
			emit(DeviceAverage{Device: device, PreviousAverage: w.SumX / WindowSize})
			w = Window{}
		}
	}
	state.Update(w)
	return nil
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
