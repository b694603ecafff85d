// Package typed is the API a streamgen user touches: typed streams of
// records (From, FromMemory, Map, Filter, FlatMap, Union, WithWatermark),
// grouping by key (GroupByKey), Spark's mapGroupsWithState and
// flatMapGroupsWithState with GroupState, timeouts, output modes and
// initial state, Spark 4's transformWithState (StatefulProcessor, value,
// list and map state with TTL, timers, concurrent handlers), streaming
// aggregations over keys and event-time windows (tumbling, sliding,
// session, count) with Spark's output modes, deduplication, sinks (NewMemorySink, ConsoleSink, FilesSink,
// ForeachSink), and WriteTo(...).Start, which compiles the pipeline into a
// runtime.Plan and starts a query in package runtime. The bindings that
// streamgen generates for //streamgen:mapGroupsWithState,
// //streamgen:flatMapGroupsWithState and //streamgen:processor directives
// call these functions, and BindingLateRows, BindingWatermarkOptions,
// ProcessorLateRows and ProcessorWatermarkOptions for the late rows of
// their watermark.
//
// A Stream is a description; each query compiles it anew, so one stream
// may feed several queries. Records reach their generated codecs through
// codec.RecordPtr, so nothing here uses reflection on a hot path; the only
// reflection is done once, when a pipeline is built (to pick how a key type
// is encoded, and to name user functions in messages).
package typed
