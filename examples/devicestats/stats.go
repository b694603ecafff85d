package main

import (
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// DeviceKey is a (gt, Model) of the cube: a part rolled up, or null in
// the data (gt reads as ""), is null, and a key with a null part joins
// nothing, as in SQL.
//
//streamgen:record
type DeviceKey struct {
	Gt       string
	Model    string
	GtAll    bool
	ModelAll bool
}

// HasNull reports whether a part of the key is null (typed.NullKey).
func (k DeviceKey) HasNull() bool { return k.GtAll || k.ModelAll || k.Gt == "" || k.Model == "" }

// Sums are the running sums of x, y and z of a group, and its count: the
// accumulator of their averages.
//
//streamgen:record
type Sums struct {
	N       int64
	X, Y, Z float64
}

// Averages are the averages of x, y and z of a group.
type Averages struct{ X, Y, Z float64 }

// averages is the aggregator of the averages of x, y and z.
type averages struct{}

func (averages) Zero() Sums { return Sums{} }
func (averages) Add(s Sums, e *sensor.Event) Sums {
	return Sums{N: s.N + 1, X: s.X + e.X, Y: s.Y + e.Y, Z: s.Z + e.Z}
}
func (averages) Merge(a, b Sums) Sums {
	return Sums{N: a.N + b.N, X: a.X + b.X, Y: a.Y + b.Y, Z: a.Z + b.Z}
}
func (averages) Result(s Sums) Averages {
	n := float64(s.N)
	return Averages{X: s.X / n, Y: s.Y / n, Z: s.Z / n}
}

// GroupAverages is a row of the historical averages: a group and its
// averages.
//
//streamgen:record
type GroupAverages struct {
	Key        DeviceKey
	X, Y, Z    float64
	RolledUpBy typed.GroupingSet `stream:"-" json:"-"`
}

// DeviceCount is a row of the output: the stream's averages of a (gt,
// Model) beside the historical ones.
//
//streamgen:record
type DeviceCount struct {
	Gt       string  `json:"gt"`
	Model    string  `json:"Model"`
	AvgX     float64 `json:"avg_x"`
	AvgY     float64 `json:"avg_y"`
	AvgZ     float64 `json:"avg_z"`
	HistAvgX float64 `json:"hist_avg_x"`
	HistAvgY float64 `json:"hist_avg_y"`
	HistAvgZ float64 `json:"hist_avg_z"`
}

func keyOf(e *sensor.Event) DeviceKey { return DeviceKey{Gt: e.Activity, Model: e.Model} }

// historical is the table of the historical averages per (gt, Model), an
// aggregation over the sensor records of dir read to their end (Spark's
// static historicalAgg).
func historical(dir string) *typed.Table[DeviceKey, GroupAverages] {
	history := typed.From[sensor.Event](runtime.FilesSource(dir, runtime.FilesOptions{}))
	agg := typed.AggregateByKey(typed.GroupByKey(history, keyOf), typed.Aggregator[sensor.Event, Sums, Averages](averages{}),
		func(k DeviceKey, a Averages) GroupAverages { return GroupAverages{Key: k, X: a.X, Y: a.Y, Z: a.Z} })
	return typed.TableFromStream(agg, func(g *GroupAverages) DeviceKey { return g.Key }, typed.TableName("historical"))
}

// deviceCounts is the device_counts query, in Spark's words: the stream's
// cube(gt, Model) averages of x, y and z, joined (inner, on gt and Model)
// with the historical averages of the same groups. The cube's rows that
// roll a part up have a null part, and join nothing.
func deviceCounts(in typed.Stream[sensor.Event], history *typed.Table[DeviceKey, GroupAverages]) typed.Stream[DeviceCount] {
	cube := typed.Cube(typed.GroupByKey(in, keyOf), typed.Aggregator[sensor.Event, Sums, Averages](averages{}),
		func(k DeviceKey, set typed.GroupingSet, a Averages) GroupAverages {
			return GroupAverages{Key: k, X: a.X, Y: a.Y, Z: a.Z, RolledUpBy: set}
		},
		func(k *DeviceKey) { k.Gt, k.GtAll = "", true },
		func(k *DeviceKey) { k.Model, k.ModelAll = "", true })
	return typed.JoinTable(cube, func(g *GroupAverages) DeviceKey { return g.Key }, history, typed.Inner,
		func(j typed.Joined[DeviceKey, GroupAverages, GroupAverages]) DeviceCount {
			return DeviceCount{Gt: j.Key.Gt, Model: j.Key.Model, AvgX: j.Left.X, AvgY: j.Left.Y, AvgZ: j.Left.Z,
				HistAvgX: j.Right.X, HistAvgY: j.Right.Y, HistAvgZ: j.Right.Z}
		})
}
