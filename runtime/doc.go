// Package runtime runs streamgen queries. This far it holds the state
// store: a query's state, timers and progress in Pebble under a checkpoint
// directory, committed atomically per micro-batch, with the checkpoint's
// metadata checked against the pipeline at start.
package runtime
