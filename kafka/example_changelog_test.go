package kafka_test

import (
	"context"
	"fmt"
	"iter"
	"log"
	"os"
	"path/filepath"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Keep a count per user in a checkpoint with a changelog topic, lose the
// checkpoint directory, and go on: the next start restores the counts,
// and the source's offsets with them, from the topic.
func ExampleChangelog() {
	ctx := context.Background()
	cluster, err := kafka.Embedded(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer cluster.Close()
	dir, err := os.MkdirTemp("", "changelog-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	checkpoint := filepath.Join(dir, "counts")

	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	sink := typed.NewMemorySink[fixtures.UserCount]()
	byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
	counts := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout,
		func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
			c, _ := state.Get()
			for range rows {
				c.Count++
			}
			state.Update(c)
			return fixtures.UserCount{User: user, Count: c.Count}, nil
		}), sink)
	run := func(users ...string) {
		for _, u := range users {
			clicks.Add(fixtures.Click{User: u})
		}
		q, err := counts.Start(ctx, runtime.Checkpoint(checkpoint), runtime.WithTrigger(runtime.AvailableNow()),
			kafka.Changelog(kafka.ChangelogOptions{Connection: cluster.Connection(), Topic: "counts-changelog"}))
		if err != nil {
			log.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			log.Fatal(err)
		}
	}
	run("ann", "bob", "ann")
	if err := os.RemoveAll(checkpoint); err != nil { // the disk is lost
		log.Fatal(err)
	}
	run("ann", "cy")
	for _, r := range sink.Batches()[1] {
		fmt.Printf("%s: %d\n", r.User, r.Count)
	}
	// Unordered output:
	// ann: 3
	// cy: 1
}
