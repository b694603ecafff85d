// Package kafka connects streamgen queries to Kafka through franz-go: a
// source (Source, and From for rows made from whole records), a sink
// (Sink), a dead-letter topic (DeadLetterTopic), and an in-process broker
// (Embedded) for tests and programs that run without a cluster. Values in
// Confluent's wire format with JSON Schema, registered in a schema
// registry, are written by the sink's ConfluentJSON format and read by
// FromConfluentJSON; Embedded starts a registry too with SchemaRegistry.
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
// over the records builds, however the query was stopped and started. A
// new query's first batch starts at the starting offsets resolved when
// it is planned (a "latest" or a timestamp then), which its plan keeps:
// run again after a failure, it reads from those, as Spark's metadata
// log keeps them, with records deleted since reported as data loss.
// The source itself commits nothing to Kafka and joins no consumer
// group: a query reads every partition it subscribes to, on one machine.
// To share the partitions among machines, run the pipeline as an App
// (below).
//
// # State that survives its disk
//
// Changelog is a query option that keeps a copy of the query's
// checkpoint in a compacted topic, as Kafka Streams changelogs its state
// stores: every batch's changes (state, timers, expiry index, and the
// progress with the sources' offsets) are produced, and acknowledged,
// before the batch commits locally, and a start on a lost or stale
// checkpoint directory restores it from the topic before the first batch.
//
//	q, err := typed.WriteTo(counts, sink).Start(ctx, runtime.Checkpoint(dir),
//		kafka.Changelog(kafka.ChangelogOptions{Connection: conn, Topic: "counts-changelog"}))
//
// # Exactly once
//
// ExactlyOnce makes a query's batches commit through Kafka transactions,
// as Kafka Streams' exactly_once_v2 does: each batch's rows from Kafka
// sinks that name the transactions, its dead letters (a DeadLetterTopic
// whose options name them), its changelog
// records and its progress (the sources' offsets) commit in one
// transaction, and only then in the local checkpoint. A batch that fails
// before that, or a process that dies, leaves nothing a read_committed
// consumer sees, and the batch runs again from the same offsets; a
// checkpoint left behind what Kafka committed is caught up from the
// changelog at the next start; a process still running with the same
// transactional ID is fenced when another starts.
//
//	eos := kafka.ExactlyOnce(kafka.ChangelogOptions{Connection: conn, Topic: "counts-changelog"})
//	defer eos.Close()
//	sink := kafka.Sink[UserCount](kafka.SinkOptions[UserCount]{Connection: conn, Topic: "counts", Key: userKey, Transactions: eos})
//	q, err := typed.WriteTo(counts, sink).Start(ctx, runtime.Checkpoint(dir), eos.Option())
//
// With ChangelogOptions.AsyncProgress the transaction is committed at
// most once per interval (a second by default) rather than per batch, as
// Spark's asynchronous progress tracking commits offsets: a process that
// dies replays at most an interval, its checkpoint, ahead of Kafka,
// rebuilt from the changelog at its next start.
//
// Without transactions (Changelog alone, or no changelog) a batch run
// again after a failure is written again, and its records' headers
// (BatchMark) are what a reader has to tell the copies apart.
//
// # Scaling out
//
// An App runs a pipeline on as many machines as there are partitions, as
// Kafka Streams does: its instances join one consumer group, and each
// runs a task, a query of its own, per input partition the group gives
// it, with the partition's state in a checkpoint directory of its own
// and in the partition's changelog partition. A partition that moves is
// stopped on the instance that gives it up (a batch not yet committing
// is abandoned, and runs again), and restored from the changelog on the
// one that takes it. The offsets
// that count are each task's (in its checkpoint and changelog); the
// group's committed offsets follow them after every batch, so that the
// tools that show a consumer group's lag show the App's.
//
//	app := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "counter", Topics: []string{"clicks"}, Dir: dir, ExactlyOnce: true},
//		func(task *kafka.Task) (kafka.Starter, error) {
//			clicks := typed.From[Click](task.Source(kafka.Options{StartingOffsets: kafka.Earliest()}))
//			sink := kafka.Sink[UserCount](kafka.SinkOptions[UserCount]{Connection: conn, Topic: "counts", Key: userKey, Transactions: task.Transactions()})
//			task.OnClose(sink.Close)
//			return typed.WriteTo(counts(clicks), sink), nil
//		})
//	err := app.Run(ctx)
//
// A grouping by something other than the message key needs each key's
// rows in one partition first: AppOptions.RepartitionBy makes the App
// copy its input through a repartition topic keyed by the grouping key, as
// Kafka Streams does, and the tasks read that topic.
package kafka
