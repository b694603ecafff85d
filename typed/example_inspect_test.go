package typed_test

import (
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Read a stopped query's state from its checkpoint without the query's
// code, decoded through the schemas the checkpoint stores: what
// streamgen inspect DIR state OPERATOR prints.
func ExampleOpenCheckpoint() {
	dir, err := os.MkdirTemp("", "checkpoint-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	checkpoint := filepath.Join(dir, "counts")

	clicks := typed.NewMemoryStream[fixtures.Click]("clicks", 10)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clicks.Add(fixtures.Click{User: "ann", Time: t0}, fixtures.Click{User: "bob", Time: t0}, fixtures.Click{User: "ann", Time: t0})
	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
	q, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), typed.NewMemorySink[fixtures.UserCount]()).
		OutputMode(typed.Update).
		Start(context.Background(), runtime.Checkpoint(checkpoint), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}

	c, err := runtime.OpenCheckpoint(checkpoint)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	meta, _, err := c.Meta()
	if err != nil {
		fmt.Println(err)
		return
	}
	op := meta.Operators[0]
	fmt.Printf("%s, key %s, state %s\n", op.Kind, op.KeyType, op.States["state"].Name)
	err = c.Rows(meta, 0, "", func(r runtime.StateRow) error {
		fmt.Printf("%s %s: %s\n", r.Key, r.Variable, r.Value)
		return nil
	})
	if err != nil {
		fmt.Println(err)
	}
	// Output:
	// mapGroupsWithState, key string, state github.com/streamgen/streamgen/generated/fixtures.Counter
	// "ann" state: {"Count":2,"First":"0001-01-01T00:00:00Z","Last":"0001-01-01T00:00:00Z","Pages":null}
	// "bob" state: {"Count":1,"First":"0001-01-01T00:00:00Z","Last":"0001-01-01T00:00:00Z","Pages":null}
}
