package kafka_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/typed"
)

// TestTableTableJoinThroughCompactedTopics: two compacted topics, each a
// table of clicks by user whose null values are tombstones, joined
// (typed.JoinTables, FullOuter) into a compacted topic whose removals are
// tombstones (SinkOptions.Tombstone), in two runs of one checkpoint. Read
// back in order, the output topic is the table a plain loop over the
// inputs ends with; a tombstone has the key and a null value.
func TestTableTableJoinThroughCompactedTopics(t *testing.T) {
	conn, adm := newCluster(t)
	compact := "compact"
	for _, topic := range []string{"left", "right", "joined"} {
		if _, err := adm.CreateTopic(testContext(t), 3, 1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(4, 5))
	base := time.Unix(1_700_000_000, 0).UTC()
	lefts, rights := map[string]string{}, map[string]string{}
	var inputs [2][]*kgo.Record
	for i := range 300 {
		user := fmt.Sprint("u", rng.IntN(8))
		side, topic := lefts, "left"
		if rng.IntN(2) == 0 {
			side, topic = rights, "right"
		}
		r := &kgo.Record{Topic: topic, Partition: userPartition(user, 3), Key: []byte(user), Timestamp: base.Add(time.Duration(i) * time.Second)}
		if rng.IntN(4) == 0 {
			delete(side, user) // Value nil: a tombstone
		} else {
			c := fixtures.Click{User: user, Time: r.Timestamp, Page: fmt.Sprint("p", i)}
			side[user] = c.Page
			var err error
			if r.Value, err = c.MarshalJSON(); err != nil {
				t.Fatal(err)
			}
		}
		inputs[i*2/300] = append(inputs[i*2/300], r)
	}
	want := map[string]string{}
	for _, user := range []string{"u0", "u1", "u2", "u3", "u4", "u5", "u6", "u7"} {
		l, lok := lefts[user]
		r, rok := rights[user]
		if lok || rok {
			want[user] = l + "-" + r
		}
	}

	decode := func(m *kafka.Message) (fixtures.Click, error) {
		if m.Value == nil {
			return fixtures.Click{User: string(m.Key), Time: m.Timestamp}, nil // a tombstone: no page
		}
		var c fixtures.Click
		return c, c.UnmarshalJSON(m.Value)
	}
	table := func(topic string) typed.UpdatesTable[string, fixtures.Click] {
		src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{topic}, StartingOffsets: kafka.Earliest()})
		t.Cleanup(func() { src.Close() })
		return typed.TableUpdates(kafka.From(src, decode), func(c *fixtures.Click) string { return c.User }, func(c *fixtures.Click) bool { return c.Page == "" })
	}
	joined := typed.JoinTables(table("left"), table("right"), typed.FullOuter, func(c typed.TableChange[string, fixtures.Click, fixtures.Click]) fixtures.Click {
		if c.Removed {
			return fixtures.Click{User: c.Key, Time: c.Time}
		}
		var l, r string
		if c.Left != nil {
			l = c.Left.Page
		}
		if c.Right != nil {
			r = c.Right.Page
		}
		return fixtures.Click{User: c.Key, Time: c.Time, Page: l + "-" + r}
	})
	sink := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{
		Connection: conn,
		Topic:      "joined",
		Key:        func(c *fixtures.Click) []byte { return []byte(c.User) },
		Tombstone:  func(c *fixtures.Click) bool { return c.Page == "" },
	})
	defer sink.Close()
	ck := newCheckpoint()
	for _, part := range inputs {
		produce(t, conn, part...)
		runAvailableNow(t, typed.WriteTo(joined, sink), ck)
	}

	got := map[string]string{}
	var tombstones int
	for _, r := range consume(t, conn, adm, "joined") {
		if r.Value == nil {
			if _, ok := got[string(r.Key)]; !ok {
				t.Errorf("a tombstone of %q, which had no row", r.Key)
			}
			delete(got, string(r.Key))
			tombstones++
			continue
		}
		var c fixtures.Click
		if err := c.UnmarshalJSON(r.Value); err != nil {
			t.Fatal(err)
		}
		if c.User != string(r.Key) {
			t.Errorf("row %+v under key %q", c, r.Key)
		}
		got[c.User] = c.Page
	}
	if tombstones == 0 {
		t.Fatal("no tombstones written")
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the joined topic holds %v, want %v", got, want)
	}

	bad := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "joined", Tombstone: func(*fixtures.Click) bool { return true }})
	defer bad.Close()
	if err := bad.Write(testContext(t), 0, []fixtures.Click{{User: "x"}}); err == nil || !strings.Contains(err.Error(), "Tombstone needs Key") {
		t.Errorf("Tombstone without Key: %v", err)
	}
	createTopic(t, adm, "plain", 1)
	keyless := kafka.Sink[fixtures.Click](kafka.SinkOptions[fixtures.Click]{Connection: conn, Topic: "plain",
		Key: func(c *fixtures.Click) []byte { return nil }, Tombstone: func(c *fixtures.Click) bool { return c.Page == "" }})
	defer keyless.Close()
	if err := keyless.Write(testContext(t), 0, []fixtures.Click{{User: "x", Page: "p"}, {User: "y"}}); err == nil || !strings.Contains(err.Error(), "row 1: a tombstone without a key") {
		t.Errorf("a tombstone whose key is nil: %v", err)
	}
}
