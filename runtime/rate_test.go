package runtime_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// fakeClock is a clock a test moves by hand.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// rateRow is one row as the test expects it, computed with plain
// multiplication (small values only).
type rateRow struct {
	Timestamp time.Time `json:"timestamp"`
	Value     int64     `json:"value"`
	partition string
}

func rateTimestamp(start time.Time, rate, value int64) time.Time {
	return start.Add(time.Duration(value) * time.Second / time.Duration(rate))
}

// rateCount counts by brute force the rows whose timestamp is not after now.
func rateCount(start, now time.Time, rate int64) int64 {
	n := int64(0)
	for !rateTimestamp(start, rate, n).After(now) {
		n++
	}
	return n
}

func expectRate(start time.Time, rate, partitions, from, to int64) []rateRow {
	var rows []rateRow
	for v := from; v < to; v++ {
		rows = append(rows, rateRow{Timestamp: rateTimestamp(start, rate, v), Value: v, partition: fmt.Sprintf("rate-%d", v%partitions)})
	}
	return rows
}

func readRate(t *testing.T, src runtime.Source, start, end json.RawMessage) []rateRow {
	t.Helper()
	var rows []rateRow
	for _, r := range readAll(t, src, start, end) {
		var row rateRow
		dec := json.NewDecoder(bytes.NewReader(r.Data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&row); err != nil {
			t.Fatalf("row %s: %v", r.Data, err)
		}
		if want := fmt.Sprintf("rate:%d", row.Value); r.Position != want {
			t.Errorf("row %d at %q, want %q", row.Value, r.Position, want)
		}
		row.partition = r.Partition
		rows = append(rows, row)
	}
	return rows
}

func equalRows(a, b []rateRow) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].Timestamp.Equal(b[i].Timestamp) || a[i].Value != b[i].Value || a[i].partition != b[i].partition {
			return false
		}
	}
	return true
}

func rateRows(t *testing.T, off json.RawMessage) (start time.Time, rows int64) {
	t.Helper()
	var o struct {
		Start time.Time `json:"start"`
		Rows  int64     `json:"rows"`
	}
	if err := json.Unmarshal(off, &o); err != nil {
		t.Fatalf("offset %s: %v", off, err)
	}
	return o.Start, o.Rows
}

func TestRate(t *testing.T) {
	t0 := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	clock := &fakeClock{now: t0}
	const rate, partitions = 3, 2
	src := runtime.RateSource(runtime.RateOptions{RowsPerSecond: rate, Partitions: partitions, Clock: clock.Now})

	// The first Available fixes the start: row 0 is due at once.
	upTo := available(t, src)
	if start, rows := rateRows(t, upTo); !start.Equal(t0) || rows != 1 {
		t.Fatalf("first Available = %s", upTo)
	}
	committed := json.RawMessage(nil)
	end := next(t, src, committed, upTo)
	if !bytes.Equal(end, upTo) {
		t.Errorf("Next = %s, want upTo %s", end, upTo)
	}
	if got, want := readRate(t, src, committed, end), expectRate(t0, rate, partitions, 0, 1); !equalRows(got, want) {
		t.Errorf("batch 0 = %+v, want %+v", got, want)
	}
	committed = end

	// Row timestamps fall between nanoseconds at 3 rows a second: check
	// both sides of each boundary, and a later time, against brute force.
	for _, elapsed := range []time.Duration{
		333333332, 333333333, 666666666, 666666667, time.Second - 1, time.Second, 7*time.Second + 1,
	} {
		clock.now = t0.Add(elapsed)
		upTo = available(t, src)
		_, rows := rateRows(t, upTo)
		if want := rateCount(t0, clock.now, rate); rows != want {
			t.Errorf("at +%v Available has %d rows, want %d", elapsed, rows, want)
		}
		end = next(t, src, committed, upTo)
		_, from := rateRows(t, committed)
		if rows == from {
			if !bytes.Equal(end, committed) {
				t.Errorf("at +%v with nothing new Next = %s, want committed %s", elapsed, end, committed)
			}
			continue
		}
		got := readRate(t, src, committed, end)
		if want := expectRate(t0, rate, partitions, from, rows); !equalRows(got, want) {
			t.Errorf("at +%v read %+v, want %+v", elapsed, got, want)
		}
		// The same offsets read the same rows again.
		if again := readRate(t, src, committed, end); !equalRows(again, got) {
			t.Errorf("second read differs: %+v", again)
		}
		committed = end
	}

	// A restarted source starts its own clock but continues the
	// checkpoint's sequence, in the first batch already.
	clock.now = t0.Add(10*time.Second + 500*time.Millisecond)
	restarted := runtime.RateSource(runtime.RateOptions{RowsPerSecond: rate, Partitions: partitions, Clock: clock.Now})
	upTo = available(t, restarted)
	end = next(t, restarted, committed, upTo)
	start, rows := rateRows(t, end)
	if !start.Equal(t0) || rows != rateCount(t0, clock.now, rate) {
		t.Errorf("after restart Next = %s, want start %v and %d rows", end, t0, rateCount(t0, clock.now, rate))
	}
	_, from := rateRows(t, committed)
	if got, want := readRate(t, restarted, committed, end), expectRate(t0, rate, partitions, from, rows); !equalRows(got, want) {
		t.Errorf("after restart read %+v, want %+v", got, want)
	}
	// And its later Available counts from the checkpoint's start.
	clock.now = clock.now.Add(time.Second)
	if start, rows := rateRows(t, available(t, restarted)); !start.Equal(t0) || rows != rateCount(t0, clock.now, rate) {
		t.Errorf("after restart Available = %v, %d rows", start, rows)
	}
}

func TestRateStartOption(t *testing.T) {
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.FixedZone("CET", 3600))
	clock := &fakeClock{now: start.Add(-time.Minute)}
	src := runtime.RateSource(runtime.RateOptions{Start: start, Clock: clock.Now})
	if src.Name() != "rate" {
		t.Errorf("Name = %q", src.Name())
	}
	// Before Start nothing is available.
	upTo := available(t, src)
	if got := next(t, src, nil, upTo); got != nil {
		t.Errorf("Next before Start = %s, want nil", got)
	}
	clock.now = start.Add(2500 * time.Millisecond)
	end := next(t, src, nil, available(t, src))
	got := readRate(t, src, nil, end)
	if want := expectRate(start, 1, 1, 0, 3); !equalRows(got, want) {
		t.Errorf("read %+v, want %+v", got, want)
	}
	// Timestamps are written in UTC.
	for _, r := range readAll(t, src, nil, end) {
		if !strings.Contains(string(r.Data), `Z"`) {
			t.Errorf("row %s is not in UTC", r.Data)
		}
	}
}

func TestRateErrors(t *testing.T) {
	ctx := context.Background()
	for _, opts := range []runtime.RateOptions{{RowsPerSecond: -1}, {RowsPerSecond: 2e9}, {Partitions: -1}} {
		if _, err := runtime.RateSource(opts).Available(ctx); err == nil || !strings.HasPrefix(err.Error(), "streamgen: rate source: options") {
			t.Errorf("%+v: Available error %v", opts, err)
		}
	}
	src := runtime.RateSource(runtime.RateOptions{})
	a := json.RawMessage(`{"start":"2024-01-01T00:00:00Z","rows":5}`)
	b := json.RawMessage(`{"start":"2024-01-01T00:00:00Z","rows":3}`)
	c := json.RawMessage(`{"start":"2025-01-01T00:00:00Z","rows":9}`)
	nop := func(runtime.Record) error { return nil }
	if err := src.Read(ctx, a, b, nop); err == nil {
		t.Error("Read backwards: no error")
	}
	if err := src.Read(ctx, a, c, nop); err == nil {
		t.Error("Read across sequences: no error")
	}
	if _, err := src.Next(ctx, a, json.RawMessage(`nope`), runtime.Limited); err == nil {
		t.Error("Next with a bad offset: no error")
	}
}
