// Package typed is the API a streamgen user touches: typed streams of
// records, grouping by key, Spark's mapGroupsWithState and
// flatMapGroupsWithState with GroupState, sinks, and starting a query.
package typed
