package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/kafka"
)

// The partitions of the topics appcounter creates: three for the input,
// as the Quix Streams application's InputsTopic, and for the output, whose records are
// keyed as the input's; one for the dead letters.
const (
	inputPartitions      = 3
	outputPartitions     = 3
	deadLetterPartitions = 1
)

// ensureTopics creates the three topics that do not exist yet, with the
// cluster's default replication factor.
func ensureTopics(ctx context.Context, conn kafka.Connection, t topics) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	defer client.Close()
	adm := kadm.NewClient(client)
	for _, topic := range []struct {
		name       string
		partitions int32
	}{{t.input, inputPartitions}, {t.output, outputPartitions}, {t.deadLetters, deadLetterPartitions}} {
		_, err := adm.CreateTopic(ctx, topic.partitions, -1, nil, topic.name)
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", topic.name, err)
		}
	}
	return nil
}

// The built-in sample: messages numbered from 0 (id = number + 1), keyed
// by customer, each made from its number alone, so that any part of the
// sample is the same whenever it is produced. About two in three are
// purchase requests; the others are questions, contents with no quantity,
// and now and then a value that is not JSON at all.
var (
	customers = []string{"anna", "boris", "vera", "gleb", "daria", "egor", "zoya"}
	products  = []string{"laptop", "coffee grinder", "office chair", "USB-C cable", "monitor 27 inch", "desk lamp"}
	questions = []string{
		"Do you deliver to Kazan on Sundays?",
		"Is the office chair available in black?",
		"How long is the warranty on laptops?",
		"laptop",
		"Can I order 2 laptops?",
		"coffee grinder a few",
	}
)

// sampleMessage returns the key and value of the sample's message n.
func sampleMessage(n int) (key string, value []byte) {
	r := rand.New(rand.NewPCG(uint64(n), 20240917))
	name := customers[r.IntN(len(customers))]
	m := Message{ID: int64(n) + 1, Name: name}
	switch k := r.IntN(20); {
	case k == 0:
		// A value cut short: not JSON.
		return name, fmt.Appendf(nil, `{"id": %d, "name": %q, "subject": "order", "content": "des`, m.ID, name)
	case k < 7:
		m.Subject, m.Content = "question", questions[r.IntN(len(questions))]
	default:
		m.Subject, m.Content = "order", fmt.Sprintf("%s %d", products[r.IntN(len(products))], 1+r.IntN(5))
	}
	value, _ = m.MarshalJSON() // a Message always encodes
	return name, value
}

// produceSample produces the next count messages of the sample to topic:
// numbers from the number of records the topic holds now, so that a later
// run adds new messages. It returns the numbers produced, [from, to).
func produceSample(ctx context.Context, conn kafka.Connection, topic string, count int) (from, to int, err error) {
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		return 0, 0, fmt.Errorf("sample producer: %w", err)
	}
	defer client.Close()
	ends, err := kadm.NewClient(client).ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, 0, fmt.Errorf("sample: end offsets of %s: %w", topic, err)
	}
	if err := ends.Error(); err != nil {
		return 0, 0, fmt.Errorf("sample: end offsets of %s: %w", topic, err)
	}
	ends.Each(func(o kadm.ListedOffset) { from += int(o.Offset) })
	records := make([]*kgo.Record, count)
	for i := range records {
		key, value := sampleMessage(from + i)
		records[i] = &kgo.Record{Topic: topic, Key: []byte(key), Value: value}
	}
	if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return 0, 0, fmt.Errorf("sample: produce to %s: %w", topic, err)
	}
	return from, from + count, nil
}
