package kafka

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

// chosenPartition, as a record's Context, marks a record whose partition
// SinkOptions.Partition chose: rowPartitioner keeps it there. (A client
// hook that sets Context, for tracing, runs once the record is placed.)
var chosenPartition = context.WithValue(context.Background(), chosenPartitionKey{}, true)

type chosenPartitionKey struct{}

// defaultPartitioner is franz-go's default: a key hashed as the Java
// client hashes it, records without a key spread by bytes.
func defaultPartitioner() kgo.Partitioner {
	return kgo.UniformBytesPartitioner(64<<10, true, true, nil)
}

// rowPartitioner places a record marked with chosenPartition on the
// partition it names, and others as others would.
type rowPartitioner struct{ others kgo.Partitioner }

func (p rowPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	others := p.others.ForTopic(topic)
	chosen := rowTopicPartitioner{others: others}
	chosen.backup, _ = others.(kgo.TopicBackupPartitioner)
	// franz-go calls OnNewBatch, and holds a topic's lock to, only for a
	// partitioner that has it: the wrapper has it when others does.
	if onNewBatch, ok := others.(kgo.TopicPartitionerOnNewBatch); ok {
		return rowTopicPartitionerOnNewBatch{chosen, onNewBatch}
	}
	return chosen
}

type rowTopicPartitioner struct {
	others kgo.TopicPartitioner
	backup kgo.TopicBackupPartitioner // others, when it is one
}

// RequiresConsistency keeps a chosen record on its partition while its
// leader is away, as for a key: franz-go then numbers the partitions
// from 0, so that Partition's answer is the partition.
func (p rowTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Context == chosenPartition || p.others.RequiresConsistency(r)
}

func (p rowTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context == chosenPartition {
		return int(r.Partition)
	}
	return p.others.Partition(r, n)
}

func (p rowTopicPartitioner) PartitionByBackup(r *kgo.Record, n int, backup kgo.TopicBackupIter) int {
	if r.Context == chosenPartition {
		return int(r.Partition)
	}
	if p.backup != nil {
		return p.backup.PartitionByBackup(r, n, backup)
	}
	return p.others.Partition(r, n)
}

type rowTopicPartitionerOnNewBatch struct {
	rowTopicPartitioner
	onNewBatch kgo.TopicPartitionerOnNewBatch
}

func (p rowTopicPartitionerOnNewBatch) OnNewBatch() { p.onNewBatch.OnNewBatch() }
