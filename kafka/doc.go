// Package kafka connects streamgen queries to Kafka through franz-go: a
// source (Source, and From for rows made from whole records), a sink
// (Sink), a dead-letter topic (DeadLetterTopic), and an in-process broker
// (Embedded) for tests and programs that run without a cluster.
//
//	cluster, _ := kafka.Embedded(ctx)           // or kafka.Connection{Brokers: kafka.Brokers()}
//	conn := cluster.Connection()
//	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"}, StartingOffsets: kafka.Earliest()})
//	defer src.Close()
//	counts := typed.MapGroupsWithState(typed.GroupByKey(typed.From[Click](src), clickUser), typed.NoTimeout, count)
//	sink := kafka.Sink[UserCount](kafka.SinkOptions[UserCount]{Connection: conn, Topic: "counts", Key: userKey})
//	defer sink.Close()
//	q, err := typed.WriteTo(counts, sink).Start(ctx, runtime.Checkpoint(dir))
//
// # Offsets and replay
//
// The source keeps its offsets in the query's checkpoint, per partition,
// in Spark's JSON form, and reads exactly the records between two
// offsets, in the same order every time, skipping what a read_committed
// consumer skips; so the state a query builds from Kafka is what one pass
// over the records builds, however the query was stopped and started.
// It commits nothing to Kafka and joins no consumer group: a query reads
// every partition it subscribes to, on one machine.
//
// # What is not here yet
//
// The sink is idempotent per record (franz-go's idempotent producer) but
// not per batch: a batch run again after a failure is written again, and
// its records' headers (BatchMark) are what a reader has to tell the
// copies apart. Exactly-once output needs the transactional committer,
// which will write a batch's output, its state changes (to changelog
// topics) and its offsets in one Kafka transaction; and scaling out needs
// partitions owned per instance, with state per partition restored from
// its changelog. The source is ready for both: its records carry their
// partition ("topic/partition"), its offsets are per partition, and its
// reads see only committed transactions.
package kafka
