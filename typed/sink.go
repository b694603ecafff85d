package typed

import "context"

// Sink receives the output rows of each micro-batch.
//
// A batch may be written more than once: when a query fails after writing a
// batch but before committing it, the restarted query runs the batch again
// with the same id and the same rows. A sink makes that idempotent by the
// batch id (the epoch): it replaces what it wrote for that id rather than
// adding to it. The query calls Write from one goroutine at a time.
//
// A sink with a method Description() string is named by it in the
// progress reports (their sink description, such as "files:DIR");
// another, by its Go type.
type Sink[T any] interface {
	Write(ctx context.Context, batchID int64, rows []T) error
}

// ForeachBatch returns a sink that calls fn with each batch's id and rows,
// as Spark's foreachBatch: to write a batch where no sink goes (a
// database in one transaction per batch, an HTTP endpoint), or to several
// places. rows are valid only during the call: fn copies what it keeps.
// As with any sink, a batch may be given again after a failure, with the
// same id and rows; fn makes that idempotent by the id (an upsert, or a
// table of the ids written). The query calls fn from one goroutine at a
// time; an error fails the batch, and the query with it.
func ForeachBatch[T any](fn func(ctx context.Context, batchID int64, rows []T) error) Sink[T] {
	return foreachBatch[T](fn)
}

type foreachBatch[T any] func(ctx context.Context, batchID int64, rows []T) error

func (f foreachBatch[T]) Write(ctx context.Context, batchID int64, rows []T) error {
	return f(ctx, batchID, rows)
}

// Description names the sink in progress reports.
func (foreachBatch[T]) Description() string { return "foreachBatch" }
