package kafka_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestAppJoinMovesWithItsPartitions: an App joins two co-partitioned
// topics (impressions and clicks of an ad, keyed by the ad) exactly once,
// as its partitions move: one instance, then a second that takes some
// (restoring their join state from the changelog), then the second alone.
// The joined rows read back with read_committed are every pair of an
// impression and a click of one ad, once, as a plain loop pairs them.
func TestAppJoinMovesWithItsPartitions(t *testing.T) {
	const partitions = 4
	conn, adm := newCluster(t)
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	createTopic(t, adm, "imps", partitions)
	createTopic(t, adm, "clicks", partitions)
	createTopic(t, adm, "joined", 2)
	rng := rand.New(rand.NewPCG(1, 2))
	event := func(topic string, i int) *kgo.Record {
		ad := fmt.Sprint("ad", rng.IntN(9))
		c := fixtures.Click{User: ad, Page: fmt.Sprint(topic, i), Time: time.Unix(int64(1000+i), 0).UTC()}
		v, err := c.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return &kgo.Record{Topic: topic, Key: []byte(ad), Value: v, Partition: userPartition(ad, partitions)}
	}
	var imps, clicks []*kgo.Record
	for i := range 90 {
		imps = append(imps, event("imps", i))
		clicks = append(clicks, event("clicks", i))
	}
	// The plain loop: every impression with every click of its ad.
	var want []string
	for _, i := range imps {
		for _, c := range clicks {
			if string(i.Key) == string(c.Key) {
				want = append(want, pairText(i, c))
			}
		}
	}
	slices.Sort(want)
	watch := newAppWatch()
	start := func() *runningApp {
		t.Helper()
		app := kafka.NewApp(kafka.AppOptions{
			Connection: conn, Group: "joiner", Topics: []string{"imps", "clicks"}, Dir: "tasks", ExactlyOnce: true,
			Options:    []runtime.Option{runtime.FileSystem(vfs.NewMem()), runtime.PollInterval(time.Millisecond), runtime.Listener(watch)},
			OnAssigned: func([]int32) { watch.signal() },
			OnRevoked:  func([]int32) { watch.signal() },
		}, func(task *kafka.Task) (kafka.Starter, error) {
			l := typed.From[fixtures.Click](task.SourceOf("imps", kafka.Options{StartingOffsets: kafka.Earliest()}))
			r := typed.From[fixtures.Click](task.SourceOf("clicks", kafka.Options{StartingOffsets: kafka.Earliest()}))
			sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "joined",
				Key: func(c *fixtures.Click) []byte { return []byte(c.User) }, Transactions: task.Transactions()})
			task.OnClose(sink.Close)
			byAd := func(c *fixtures.Click) string { return c.User }
			joined := typed.Join(typed.GroupByKey(l, byAd), typed.GroupByKey(r, byAd), typed.Inner,
				func(j typed.Joined[string, fixtures.Click, fixtures.Click]) fixtures.Click {
					return fixtures.Click{User: j.Key, Page: j.Left.Page + "+" + j.Right.Page}
				})
			return typed.WriteTo(joined, sink), nil
		})
		ctx, cancel := context.WithCancel(testContext(t))
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(ctx) }()
		return r
	}
	all := []int32{0, 1, 2, 3}
	first := start()
	defer first.cancel()
	watch.waitFor(t, "four tasks", func() bool { return slices.Equal(first.app.Tasks(), all) })
	produce(t, conn, append(imps[:30:30], clicks[:30]...)...)
	watch.waitFor(t, "60 rows", func() bool { return watch.rows >= 60 })
	second := start()
	defer second.cancel()
	watch.waitFor(t, "the second instance to take partitions", func() bool {
		a, b := first.app.Tasks(), second.app.Tasks()
		return len(b) > 0 && len(a)+len(b) == 4
	})
	produce(t, conn, append(imps[30:60:60], clicks[30:60]...)...)
	watch.waitFor(t, "120 rows", func() bool { return watch.rows >= 120 })
	first.stop(t)
	watch.waitFor(t, "the second alone", func() bool { return slices.Equal(second.app.Tasks(), all) })
	produce(t, conn, append(imps[60:90:90], clicks[60:]...)...)
	watch.waitFor(t, "180 rows", func() bool { return watch.rows >= 180 })
	second.stop(t)

	var got []string
	for _, rec := range consume(t, conn, adm, "joined") {
		var c fixtures.Click
		if err := c.UnmarshalJSON(rec.Value); err != nil {
			t.Fatal(err)
		}
		got = append(got, c.User+" "+c.Page)
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%d joined rows, want %d (the first differences: %s)", len(got), len(want), firstDiff(got, want))
	}
}

// pairText is the joined row of an impression and a click.
func pairText(imp, click *kgo.Record) string {
	var i, c fixtures.Click
	i.UnmarshalJSON(imp.Value)
	c.UnmarshalJSON(click.Value)
	return i.User + " " + i.Page + "+" + c.Page
}

func firstDiff(got, want []string) string {
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("got %q, want %q", g, w)
		}
	}
	return "none"
}

// TestAppForeignKeyJoinMovesWithItsPartitions: an App enriches orders
// (keyed by order, three partitions) with products (a compacted topic
// every task reads whole, as a GlobalKTable) on each order's product, a
// foreign-key join, into a compacted topic with tombstones, exactly once,
// as its partitions move: one instance, then a second that takes some
// (restoring their state from the changelog), then the second alone.
// After each phase the output topic, read in order, is the table a plain
// loop over the inputs makes.
func TestAppForeignKeyJoinMovesWithItsPartitions(t *testing.T) {
	const partitions = 3
	conn, adm := newCluster(t)
	conn.ClientOptions = []kgo.Opt{kgo.HeartbeatInterval(50 * time.Millisecond)}
	compact := "compact"
	createTopic(t, adm, "orders", partitions)
	for _, topic := range []string{"products", "enriched"} {
		if _, err := adm.CreateTopic(testContext(t), 2, 1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	orders, products := map[string]string{}, map[string]string{} // order → product, product → name
	var phases [3][]*kgo.Record
	var wants [3]map[string]string
	for phase := range phases {
		for i := range 60 {
			n := phase*60 + i
			var r *kgo.Record
			if rng.IntN(3) == 0 {
				product := fmt.Sprint("p", rng.IntN(5))
				r = &kgo.Record{Topic: "products", Key: []byte(product), Partition: userPartition(product, 2)}
				if rng.IntN(5) > 0 {
					products[product] = fmt.Sprint("name", n)
					r.Value = []byte(products[product])
				} else {
					delete(products, product)
				}
			} else {
				order := fmt.Sprint("o", rng.IntN(15))
				r = &kgo.Record{Topic: "orders", Key: []byte(order), Partition: userPartition(order, partitions)}
				if rng.IntN(6) > 0 {
					orders[order] = fmt.Sprint("p", rng.IntN(6))
					r.Value = []byte(orders[order])
				} else {
					delete(orders, order)
				}
			}
			r.Timestamp = time.Unix(int64(1000+n), 0)
			phases[phase] = append(phases[phase], r)
		}
		wants[phase] = map[string]string{}
		for order, product := range orders {
			if name, ok := products[product]; ok {
				wants[phase][order] = product + " " + name
			}
		}
	}
	// Rows: User the key, Page the value ("" for a tombstone).
	decode := func(m *kafka.Message) (fixtures.Click, error) {
		return fixtures.Click{User: string(m.Key), Page: string(m.Value), Time: m.Timestamp}, nil
	}
	deleted := func(c *fixtures.Click) bool { return c.Page == "" }
	key := func(c *fixtures.Click) string { return c.User }
	watch := newAppWatch()
	start := func() *runningApp {
		t.Helper()
		app := kafka.NewApp(kafka.AppOptions{
			Connection: conn, Group: "enricher", Topics: []string{"orders"}, Dir: "tasks", ExactlyOnce: true,
			Options:    []runtime.Option{runtime.FileSystem(vfs.NewMem()), runtime.PollInterval(time.Millisecond), runtime.Listener(watch)},
			OnAssigned: func([]int32) { watch.signal() },
			OnRevoked:  func([]int32) { watch.signal() },
		}, func(task *kafka.Task) (kafka.Starter, error) {
			o := kafka.From(task.SourceOf("orders", kafka.Options{StartingOffsets: kafka.Earliest()}), decode)
			p := kafka.From(task.GlobalSource("products", kafka.Options{StartingOffsets: kafka.Earliest()}), decode)
			sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "enriched",
				Key: func(c *fixtures.Click) []byte { return []byte(c.User) }, Tombstone: deleted, Transactions: task.Transactions()})
			task.OnClose(sink.Close)
			joined := typed.JoinTablesByForeignKey(typed.TableUpdates(o, key, deleted), typed.TableUpdates(p, key, deleted),
				func(c *fixtures.Click) string { return c.Page }, typed.Inner,
				func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) fixtures.Click {
					if c.Removed {
						return fixtures.Click{User: c.Key}
					}
					return fixtures.Click{User: c.Key, Page: c.Left.Page + " " + c.Right.Page}
				})
			return typed.WriteTo(joined, sink), nil
		})
		ctx, cancel := context.WithCancel(testContext(t))
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(ctx) }()
		return r
	}
	table := func() map[string]string {
		got := map[string]string{}
		for _, r := range consume(t, conn, adm, "enriched") {
			if r.Value == nil {
				delete(got, string(r.Key))
			} else {
				got[string(r.Key)] = string(r.Value)
			}
		}
		return got
	}
	var last map[string]string
	awaitTable := func(phase int) {
		t.Helper()
		watch.waitFor(t, fmt.Sprintf("the table of phase %d", phase), func() bool {
			last = map[string]string{}
			for k, v := range table() {
				var c fixtures.Click
				if err := c.UnmarshalJSON([]byte(v)); err != nil {
					t.Fatal(err)
				}
				last[k] = c.Page
			}
			return fmt.Sprint(last) == fmt.Sprint(wants[phase])
		})
	}
	all := []int32{0, 1, 2}
	first := start()
	defer first.cancel()
	watch.waitFor(t, "three tasks", func() bool { return slices.Equal(first.app.Tasks(), all) })
	produce(t, conn, phases[0]...)
	awaitTable(0)
	second := start()
	defer second.cancel()
	watch.waitFor(t, "the second instance to take partitions", func() bool {
		a, b := first.app.Tasks(), second.app.Tasks()
		return len(b) > 0 && len(a)+len(b) == partitions
	})
	produce(t, conn, phases[1]...)
	awaitTable(1)
	first.stop(t)
	watch.waitFor(t, "the second alone", func() bool { return slices.Equal(second.app.Tasks(), all) })
	produce(t, conn, phases[2]...)
	awaitTable(2)
	second.stop(t)
}
