package runtime_test

import (
	"context"
	"fmt"
	"iter"
	"sort"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// Two queries in one process hold their caches of committed state to one
// budget of 64 MiB between them (32 MiB each while both run), and share
// one Pebble block cache of 32 MiB.
func ExampleSharedCaches() {
	caches := runtime.NewSharedCaches(64<<20, 32<<20)
	defer caches.Close()

	count := func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
		c, _ := state.Get()
		for range rows {
			c.Count++
		}
		state.Update(c)
		return fixtures.UserCount{User: user, Count: c.Count}, nil
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	start := func(name string, users ...string) (*runtime.Query, *typed.MemorySink[fixtures.UserCount]) {
		clicks := typed.NewMemoryStream[fixtures.Click](name, 0)
		for i, u := range users {
			clicks.Add(fixtures.Click{User: u, Time: t0.Add(time.Duration(i) * time.Second)})
		}
		byUser := typed.GroupByKey(typed.FromMemory(clicks), func(c *fixtures.Click) string { return c.User })
		sink := typed.NewMemorySink[fixtures.UserCount]()
		q, err := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, count), sink).
			OutputMode(typed.Update).
			Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.WithSharedCaches(caches))
		if err != nil {
			panic(err)
		}
		return q, sink
	}
	q1, s1 := start("web", "ann", "bob", "ann")
	q2, s2 := start("app", "cy", "cy", "cy")
	for _, q := range []*runtime.Query{q1, q2} {
		if err := q.AwaitTermination(); err != nil {
			fmt.Println(err)
			return
		}
	}
	var lines []string
	for _, sink := range []*typed.MemorySink[fixtures.UserCount]{s1, s2} {
		for _, rows := range sink.Batches() {
			for _, r := range rows {
				lines = append(lines, fmt.Sprintf("%s %d", r.User, r.Count))
			}
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// ann 2
	// bob 1
	// cy 3
}
