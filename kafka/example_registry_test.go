package kafka_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Write clicks in Confluent's wire format, registering their JSON Schema
// in a schema registry (here the embedded one; sr.NewClient with
// kafka.RegistryURLs() for a real one), and read them back.
func ExampleFromConfluentJSON() {
	ctx := context.Background()
	cluster, err := kafka.Embedded(ctx, kafka.SchemaRegistry(), kafka.SeedTopics(1, "clicks"))
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	conn, registry := cluster.Connection(), cluster.Registry()

	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "clicks",
		Key:    func(c *fixtures.Click) []byte { return []byte(c.User) },
		Format: kafka.ConfluentJSON, Registry: registry})
	defer sink.Close()
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	if err := sink.Write(ctx, 0, []fixtures.Click{{User: "ann", Time: at, Page: "home"}, {User: "bob", Time: at, Page: "cart"}}); err != nil {
		log.Fatal(err)
	}
	registered, err := registry.SchemaByVersion(ctx, "clicks-value", -1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("subject clicks-value: schema %d, %s\n", registered.ID, registered.Type)

	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{"clicks"}, StartingOffsets: kafka.Earliest()})
	defer src.Close()
	read := typed.NewMemorySink[fixtures.Click]()
	q, err := typed.WriteTo(kafka.FromConfluentJSON[fixtures.Click](src), read).Start(ctx, runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		log.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		log.Fatal(err)
	}
	for _, c := range read.Rows() {
		fmt.Println(c.User, c.Page, c.Time.Format(time.RFC3339))
	}
	// Output:
	// subject clicks-value: schema 1, JSON
	// ann home 2024-05-01T12:00:00Z
	// bob cart 2024-05-01T12:00:00Z
}
