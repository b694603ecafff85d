// Package queries holds the Nexmark queries q0–q23 as the nexmark/nexmark
// SQL defines them (the Flink flavour), each written with streamgen's
// public API as a user would write it, and beside each a plain loop that
// computes the same SQL over a slice of events, which the tests compare
// it with.
//
// A query reads the events' stream with the SQL's watermark, the event
// time dateTime less 4 seconds (Watermark), but for q3, q12, q15, q16,
// q20 and q23, which read it without, as a user writes them: their SQL's
// stateful operators are Flink's regular join, group aggregation or
// processing-time window, which need no event time, which the watermark
// declared on the source does not affect, and which keep late rows,
// where streamgen's join and transformWithState, as Spark's, drop the
// rows at or before a watermark. The other queries' operators use event
// time (q4, q5, q7–q9, q11), or drop no late rows (the stateless queries,
// an aggregation without windows, (flat)mapGroupsWithState without an
// event-time timeout). A query writes rows whose JSON fields are the
// SQL's result columns. A query whose SQL result is a table that changes
// (an aggregation without windows, a regular join with an aggregation
// after it, a top-N) writes each changed row again; its Keys name the
// columns that identify a row of the table, whose last row written is
// its value (Final).
package queries

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

// WatermarkDelay is the SQL's watermark: `dateTime - INTERVAL '4' SECOND`.
const WatermarkDelay = 4 * time.Second

// Query is one Nexmark query. The fields are read only: a Query is safe
// for concurrent use.
type Query struct {
	// Name is the query's name, "q0" to "q23".
	Name string
	// Title is what the query computes, in the SQL's words.
	Title string
	// Keys are the result columns that identify a row of the result table
	// of a query that writes a row again when it changes; nil for a query
	// every row of whose output is a row of the result.
	Keys []string
	// ProcessingTime says the query's windows are of processing time: its
	// loop takes every event to arrive at LoopClock.
	ProcessingTime bool
	// noWatermark says the query reads the events without the SQL's
	// watermark: its operators need no event time, and keep late rows as
	// Flink's regular join, group aggregation or processing-time window
	// does, which a watermark in front of them would drop.
	noWatermark bool
	// build builds the query over the events, writing to out.
	build func(events typed.Stream[model.Event], out Output) starter
	// loop computes the result's rows with a plain loop.
	loop func(events []model.Event) ([][]byte, error)
}

// starter is a query ready to start: a typed.Writer.
type starter interface {
	Start(ctx context.Context, opts ...runtime.Option) (*typed.Query, error)
}

// Output receives a query's rows as JSON lines, a batch at a time,
// idempotently by batch id (see typed.Sink). The lines are valid during
// the call only.
type Output interface {
	Write(ctx context.Context, batch int64, lines [][]byte) error
}

// Start starts q over events (which Start gives the SQL's watermark if q
// uses event time), writing its rows to out, with the runtime's options.
func (q *Query) Start(ctx context.Context, events typed.Stream[model.Event], out Output, opts ...runtime.Option) (*typed.Query, error) {
	if !q.noWatermark {
		events = Watermark(events)
	}
	return q.build(events, out).Start(ctx, opts...)
}

// Loop computes q's rows over events with a plain loop, as JSON lines:
// for a query with Keys, its final result table.
func (q *Query) Loop(events []model.Event) ([][]byte, error) { return q.loop(events) }

// Watermark gives the events the SQL's watermark.
func Watermark(events typed.Stream[model.Event]) typed.Stream[model.Event] {
	return typed.WithWatermark(events, (*model.Event).Time, WatermarkDelay)
}

// All is every query, in order: those streamgen expresses. Excluded lists
// the others.
var All []*Query

// Excluded names the queries of the suite that are not here, and why.
var Excluded = map[string]string{
	"q6": "not run by the suite: the nexmark/nexmark SQL of q6 does not run on Flink either (an OVER window over a retracting input, FLINK-19059)",
}

// ByName returns the query named name.
func ByName(name string) (*Query, error) {
	for _, q := range All {
		if q.Name == name {
			return q, nil
		}
	}
	if why, ok := Excluded[name]; ok {
		return nil, fmt.Errorf("%s is not in the suite: %s", name, why)
	}
	return nil, fmt.Errorf("no query %q (q0 to q23)", name)
}

func register(q *Query) *Query {
	All = append(All, q)
	slices.SortFunc(All, func(a, b *Query) int { return queryNumber(a.Name) - queryNumber(b.Name) })
	return q
}

func queryNumber(name string) int {
	var n int
	fmt.Sscanf(name, "q%d", &n)
	return n
}

// Discard is an Output that keeps nothing, as Flink's blackhole sink: a
// query writing to it does not even encode its rows.
var Discard Output = discard{}

type discard struct{}

func (discard) Write(context.Context, int64, [][]byte) error { return nil }

// discardSink is Discard as a typed sink.
type discardSink[T any] struct{}

func (discardSink[T]) Write(context.Context, int64, []T) error { return nil }

// sinkOf writes rows to out as JSON lines.
func sinkOf[T any, P codec.RecordPtr[T]](out Output) typed.Sink[T] {
	if out == Discard {
		return discardSink[T]{}
	}
	return &lineSink[T, P]{out: out}
}

type lineSink[T any, P codec.RecordPtr[T]] struct {
	out   Output
	buf   []byte
	ends  []int
	lines [][]byte
}

func (s *lineSink[T, P]) Write(ctx context.Context, batch int64, rows []T) error {
	s.buf, s.ends, s.lines = s.buf[:0], s.ends[:0], s.lines[:0]
	for i := range rows {
		var err error
		if s.buf, err = P(&rows[i]).AppendJSON(s.buf); err != nil {
			return err
		}
		s.ends = append(s.ends, len(s.buf))
	}
	start := 0
	for _, end := range s.ends {
		s.lines = append(s.lines, s.buf[start:end:end])
		start = end
	}
	return s.out.Write(ctx, batch, s.lines)
}

// lines encodes rows as JSON lines, for the loops.
func lines[T any, P codec.RecordPtr[T]](rows []T) ([][]byte, error) {
	out := make([][]byte, 0, len(rows))
	for i := range rows {
		b, err := P(&rows[i]).AppendJSON(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// bids is the events' bids, auctions their auctions, persons their
// persons, as the SQL's views.
func bids(events typed.Stream[model.Event]) typed.Stream[model.Bid] {
	return typed.Map(typed.Filter(events, func(e *model.Event) bool { return e.Bid != nil }), func(e *model.Event) model.Bid { return *e.Bid })
}

func auctions(events typed.Stream[model.Event]) typed.Stream[model.Auction] {
	return typed.Map(typed.Filter(events, func(e *model.Event) bool { return e.Auction != nil }), func(e *model.Event) model.Auction { return *e.Auction })
}

func persons(events typed.Stream[model.Event]) typed.Stream[model.Person] {
	return typed.Map(typed.Filter(events, func(e *model.Event) bool { return e.Person != nil }), func(e *model.Event) model.Person { return *e.Person })
}

// Final is the result table that a query's output lines make: for a query
// with keys, the last line written of each key (a row that changed is
// written again), else every line; sorted, for comparison.
func Final(q *Query, out [][]byte) ([]string, error) {
	if len(q.Keys) == 0 {
		rows := make([]string, len(out))
		for i, l := range out {
			rows[i] = string(l)
		}
		sort.Strings(rows)
		return rows, nil
	}
	last := map[string]string{}
	for _, l := range out {
		k, err := keyOf(l, q.Keys)
		if err != nil {
			return nil, err
		}
		last[k] = string(l)
	}
	rows := make([]string, 0, len(last))
	for _, l := range last {
		rows = append(rows, l)
	}
	sort.Strings(rows)
	return rows, nil
}

// keyOf returns the values of the columns keys of a JSON line.
func keyOf(line []byte, keys []string) (string, error) {
	var row map[string]json.RawMessage
	if err := json.Unmarshal(line, &row); err != nil {
		return "", fmt.Errorf("nexmark: a row that is not JSON: %q: %w", line, err)
	}
	var b strings.Builder
	for _, k := range keys {
		v, ok := row[k]
		if !ok {
			return "", fmt.Errorf("nexmark: a row without its key column %q: %s", k, line)
		}
		b.Write(bytes.TrimSpace(v))
		b.WriteByte(0)
	}
	return b.String(), nil
}
