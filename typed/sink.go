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
