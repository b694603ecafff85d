// Package observe shows running queries to people and to the tools that
// watch services, from their listener calls (runtime.Listener), so it
// needs nothing of a query but its progress reports:
//
//   - Metrics exports their progress as Prometheus metrics, a collector
//     with a handler to mount;
//   - StatusPage is a web page in the spirit of the Spark UI's Structured
//     Streaming tab, charting each query's recent batches.
//
// It is a package of its own so that programs that do not use it do not
// build the Prometheus client or the page into the runtime.
package observe
