// Package typed is the API a streamgen user touches: typed streams of
// records (From, FromMemory, Map, Filter, FlatMap, Union, WithWatermark),
// grouping by key (GroupByKey), Spark's mapGroupsWithState and
// flatMapGroupsWithState with GroupState, timeouts, output modes and
// initial state, Spark 4's transformWithState (StatefulProcessor, value,
// list and map state with TTL, timers, concurrent handlers), streaming
// aggregations over keys and event-time windows (tumbling, sliding,
// session, count) with Spark's output modes and grouping sets (Cube,
// Rollup, GroupingSets), deduplication, joins (stream-static,
// stream-stream, stream-table, table-table, foreign-key), sinks (NewMemorySink, ConsoleSink,
// FilesSink, ForeachSink), and WriteTo(...).Start, which compiles the pipeline into a
// runtime.Plan and starts a query in package runtime. The bindings that
// streamgen generates for //streamgen:mapGroupsWithState,
// //streamgen:flatMapGroupsWithState and //streamgen:processor directives
// call these functions, and BindingLateRows, BindingWatermarkOptions,
// ProcessorLateRows and ProcessorWatermarkOptions for the late rows of
// their watermark.
//
// # Joins
//
// A join is one more stage or keyed operator of the same engine:
//
//   - JoinTable, a stream with a static Table: no state; the table is
//     loaded off the batch path (at start, and with RefreshEvery again),
//     held in memory or, with TableOnDiskAbove, in a store of its own on
//     disk, and each batch joins one version of it, which its progress
//     report names.
//   - Join, two keyed streams with watermarks: Spark's symmetric hash
//     join. Each side's rows are state of their key, ordered by event time
//     and, on a side the join writes padded, carrying a matched flag; a
//     variable of the operator indexes them by the time the watermark
//     forgets them (the bound Spark derives from
//     the window or the time condition), so that the rows a batch forgets
//     are read from one range of the index and the index goes in one range
//     deletion. A key's call joins the batch's rows of the key in memory
//     and reads the committed buffers only, so the batch's writes are
//     never read back. Outer joins write padded rows as they forget the
//     unmatched ones.
//   - JoinUpdates, a keyed stream with a table kept up to date by a stream
//     (TableUpdates): Kafka Streams' KStream-KTable join, the table's rows
//     (with AsOf, each version until the grace has passed) state of their
//     key, changelogged as every operator's.
//   - JoinTables, two tables kept up to date by streams: Kafka Streams'
//     KTable-KTable join. Each table's latest row is state of its key, and
//     each update writes the change it makes to the key's row of the join
//     (TableChange), with the row it replaces.
//   - TableChanges, a table's updates each with the row it replaces,
//     for an aggregation of the table that takes rows back.
//   - JoinTablesByForeignKey, a table with another under its rows'
//     foreign keys: Kafka Streams' foreign-key join, as three operators:
//     one keyed by the left key (the foreign key its row refers to, to
//     know the one it leaves), one by the foreign key (the right row, and
//     the left rows that refer to it, so that a right update reaches them
//     all), and one by the left key again (its row of the join, for the
//     row before each change).
//
// The rows a join writes are Joined values: pointers to each side's row,
// nil for the side an outer join pads.
//
// A Stream is a description; each query compiles it anew, so one stream
// may feed several queries. Records reach their generated codecs through
// codec.RecordPtr, so nothing here uses reflection on a hot path; the only
// reflection is done once, when a pipeline is built (to pick how a key type
// is encoded, and to name user functions in messages).
package typed
