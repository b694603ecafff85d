package typed_test

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Count clicks per user with mapGroupsWithState: the state of each user is
// kept in the query's checkpoint between batches, and the Update-mode sink
// gets each user's new count.
func ExampleMapGroupsWithState() {
	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 2) // at most 2 rows per batch
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clicks.Add(
		fixtures.Click{User: "ann", Time: t0},
		fixtures.Click{User: "bob", Time: t0.Add(time.Second)},
		fixtures.Click{User: "ann", Time: t0.Add(2 * time.Second)},
	)

	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
	sink := typed.Memory[fixtures.UserCount]()
	q, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), sink).
		OutputMode(typed.Update).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for batch, rows := range sink.Batches() {
		for _, r := range rows {
			fmt.Printf("batch %d: %s %d\n", batch, r.User, r.Count)
		}
	}
	// Unordered output:
	// batch 0: ann 1
	// batch 0: bob 1
	// batch 1: ann 2
}
