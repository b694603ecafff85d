package runtime

import (
	"context"
	"log/slog"
	"time"
)

// The keys of the attributes of LogAttrs, the line LogProgress logs.
const (
	LogQuery   = "query"
	LogBatch   = "batch"
	LogRowsIn  = "rowsIn"
	LogRowsOut = "rowsOut"
	// LogOtherRowsOut is the rows of a query's further sinks
	// (QueryProgress.OtherSinks), summed; absent without them.
	LogOtherRowsOut  = "otherRowsOut"
	LogRowsPerSecond = "rowsPerSecond"
	LogDuration      = "duration"
	LogWatermark     = "watermark"
	LogStateRows     = "stateRows"
	LogLateRows      = "lateRows"
	LogDeadLetters   = "deadLetters"
)

// progressMessage is the message of the line LogProgress logs.
const progressMessage = "streamgen: batch committed"

// LogAttrs returns the attributes of p's log line (LogProgress): the
// query's name (its id without one), batch id, rows in and out (and out
// to the further sinks of a query of several: LogOtherRowsOut), rows
// processed per second, the batch's duration (DurationTriggerExecution),
// the watermark in effect as a time.Time (left out before the first, and
// in the batch that flushes the end of the input: see FlushEventTime),
// the state rows, the rows dropped as late, both summed over the
// operators, and the dead letters.
func LogAttrs(p QueryProgress) []slog.Attr {
	query := p.Name
	if query == "" {
		query = p.ID
	}
	var stateRows, late int64
	for _, op := range p.StateOperators {
		stateRows += op.NumRowsTotal
		late += op.NumRowsDroppedByWatermark
	}
	attrs := []slog.Attr{
		slog.String(LogQuery, query),
		slog.Int64(LogBatch, p.BatchID),
		slog.Int64(LogRowsIn, p.NumInputRows),
		slog.Int64(LogRowsOut, p.Sink.NumOutputRows),
	}
	if len(p.OtherSinks) > 0 {
		var other int64
		for _, s := range p.OtherSinks {
			other += s.NumOutputRows
		}
		attrs = append(attrs, slog.Int64(LogOtherRowsOut, other))
	}
	attrs = append(attrs,
		slog.Float64(LogRowsPerSecond, p.ProcessedRowsPerSecond),
		slog.Duration(LogDuration, time.Duration(p.DurationMs[DurationTriggerExecution])*time.Millisecond))
	if w, ok := p.WatermarkTime(); ok && !w.Equal(EndOfTime) {
		attrs = append(attrs, slog.Time(LogWatermark, w))
	}
	return append(attrs,
		slog.Int64(LogStateRows, stateRows),
		slog.Int64(LogLateRows, late),
		slog.Int64(LogDeadLetters, p.NumDeadLetters))
}

// WatermarkTime returns the watermark in effect in the batch, from
// EventTime; ok is false before the first watermark, or without one.
func (p QueryProgress) WatermarkTime() (w time.Time, ok bool) {
	s, found := p.EventTime["watermark"]
	if !found {
		return time.Time{}, false
	}
	w, err := time.Parse(time.RFC3339Nano, s)
	return w, err == nil
}

// logProgress logs r's line when LogProgress asked for it.
func (q *Query) logProgress(r QueryProgress) {
	if l := q.cfg.progressLog; l != nil {
		l.LogAttrs(context.Background(), slog.LevelInfo, progressMessage, LogAttrs(r)...)
	}
}
