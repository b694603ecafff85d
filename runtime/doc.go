// Package runtime runs streamgen queries: the micro-batch loop and its
// triggers, sources (files, rate) and dead-letter sinks, the Pebble state
// store under a checkpoint directory (state, timers, offsets, watermark and
// batch id committed atomically per batch), event-time watermarks per
// source partition, checkpoint checks at start, and progress reports.
//
// It knows no record types: package typed compiles a typed pipeline into
// a Job, which the loop runs (Start).
package runtime
