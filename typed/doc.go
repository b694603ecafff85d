// Package typed is the API a streamgen user touches: typed streams of
// records (From, FromMemory, Map, Filter, FlatMap, WithWatermark), grouping
// by key (GroupByKey), Spark's mapGroupsWithState and
// flatMapGroupsWithState with GroupState, timeouts and output modes, sinks
// (Memory, Console, Files, Foreach), and WriteTo(...).Start, which starts a
// query in package runtime.
//
// Records reach their generated codecs through codec.RecordPtr, so
// nothing here uses reflection on a hot path; the only reflection is done
// once, when a pipeline is built (to pick how a key type is encoded, and to
// name user functions in messages).
package typed
