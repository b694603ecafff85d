package kafka_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// windowUserCount is a row of the windowed counts of TestAppStateOfWindows.
type windowUserCount struct {
	Window typed.Window
	User   string
	N      int64
}

// TestAppStateOfWindows counts each user's clicks per minute in an App
// over four partitions, the input partitioned by user, and reads each
// (window, user) count through the App's StateHandler by the key its rows
// show, {"window": ..., "key": user}: the read goes to the partition of
// the user (the one KeyPartition gives the user's name), whatever the
// window, and its count is a plain loop's.
func TestAppStateOfWindows(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "clicks", 4)
	in := clicks(300, 41)
	produce(t, conn, clickRecords(t, "clicks", 4, in)...)
	type windowUser struct {
		start time.Time
		user  string
	}
	want := map[windowUser]int64{}
	for _, c := range in {
		want[windowUser{c.Time.Truncate(time.Minute), c.User}]++
	}

	app := kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "windows", Topics: []string{"clicks"}, Dir: t.TempDir(),
		Options:      []runtime.Option{runtime.PollInterval(time.Millisecond)},
		KeyPartition: func(key []byte, partitions int32) int32 { return userPartition(string(key), partitions) },
	}, func(task *kafka.Task) (kafka.Starter, error) {
		src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 50})
		ws := typed.GroupByWindow(typed.From[fixtures.Click](src), func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(time.Minute),
			func(c *fixtures.Click) string { return c.User })
		counts := typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) windowUserCount {
			return windowUserCount{w, user, n}
		})
		return typed.WriteTo(counts, typed.NewMemorySink[windowUserCount]()).OutputMode(typed.Update), nil
	})
	ctx, cancel := context.WithCancel(testContext(t))
	r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Run(ctx) }()
	defer r.stop(t)
	for k, n := range want {
		key, _ := json.Marshal(map[string]any{"window": map[string]time.Time{"start": k.start, "end": k.start.Add(time.Minute)}, "key": k.user})
		if ans := awaitCount(t, r, key, n); ans.Partition != userPartition(k.user, 4) {
			t.Fatalf("%s: read in partition %d, the user's is %d", key, ans.Partition, userPartition(k.user, 4))
		}
	}
	// A window of another size is none of the operator's.
	var one windowUser
	for k := range want {
		one = k
		break
	}
	bad, _ := json.Marshal(map[string]any{"window": map[string]time.Time{"start": one.start, "end": one.start.Add(time.Hour)}, "key": one.user})
	if code, _, body := readState(app, bad); code != 400 || !strings.Contains(body, "they are 1m0s long") {
		t.Errorf("%s: %d %s, want 400 naming the windows' size", bad, code, body)
	}
}

// TestAppRefusesGroupingSetsOnPartitions: a rollup's rolled-up keys take
// rows from every partition, which no one task sees, so an App over an
// input of more than one partition refuses it, saying why and what to do
// instead. Over one partition the App runs it, and a read of a rolled-up
// key ({"set", "key"}) answers the loop's count.
func TestAppRefusesGroupingSetsOnPartitions(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "clicks2", 2)
	createTopic(t, adm, "clicks1", 1)
	in := clicks(200, 42)
	produce(t, conn, clickRecords(t, "clicks2", 2, in)...)
	produce(t, conn, clickRecords(t, "clicks1", 1, in)...)
	newApp := func(topic string) *kafka.App {
		return kafka.NewApp(kafka.AppOptions{Connection: conn, Group: "rollup-" + topic, Topics: []string{topic}, Dir: t.TempDir(),
			Options: []runtime.Option{runtime.PollInterval(time.Millisecond)},
		}, func(task *kafka.Task) (kafka.Starter, error) {
			src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest()})
			ks := typed.GroupByKey(typed.From[fixtures.Click](src), func(c *fixtures.Click) string { return c.User })
			rollup := typed.Rollup(ks, typed.Count[fixtures.Click](), func(user string, set typed.GroupingSet, n int64) int64 { return n },
				func(user *string) { *user = "*" })
			return typed.WriteTo(rollup, typed.NewMemorySink[int64]()).OutputMode(typed.Update), nil
		})
	}
	err := newApp("clicks2").Run(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "cannot run in an App of 2 partitions") || !strings.Contains(err.Error(), "in two Apps") {
		t.Fatalf("a rollup over two partitions: %v", err)
	}

	app := newApp("clicks1")
	ctx, cancel := context.WithCancel(testContext(t))
	r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Run(ctx) }()
	defer r.stop(t)
	want := map[string]int64{"*": int64(len(in))}
	for _, c := range in {
		want[c.User]++
	}
	for user, n := range want {
		set := 0
		if user == "*" {
			set = 1
		}
		key, _ := json.Marshal(map[string]any{"set": set, "key": user})
		awaitCount(t, r, key, n)
	}
}

// TestAppGroupingSetsThatKeepPartitions: sets of (user, page) that never
// roll up the user, over input partitioned by user, are whole in each
// task: with GroupingSetsKeepPartitions the App runs them on two
// partitions (and refuses them without it, naming the setting), and a
// read of each {"set", "key"} goes to the user's partition and answers
// the loop's count.
func TestAppGroupingSetsThatKeepPartitions(t *testing.T) {
	conn, adm := newCluster(t)
	createTopic(t, adm, "clicks", 2)
	in := clicks(300, 43)
	produce(t, conn, clickRecords(t, "clicks", 2, in)...)
	newApp := func(group string, keep bool, setsGiven ...typed.GroupingSet) *kafka.App {
		return kafka.NewApp(kafka.AppOptions{Connection: conn, Group: group, Topics: []string{"clicks"}, Dir: t.TempDir(),
			Options: []runtime.Option{runtime.PollInterval(time.Millisecond)}, GroupingSetsKeepPartitions: keep,
			KeyPartition: func(key []byte, partitions int32) int32 {
				var k fixtures.PageKey
				if err := k.UnmarshalBinary(key); err != nil {
					return -1
				}
				return userPartition(k.User, partitions)
			},
		}, func(task *kafka.Task) (kafka.Starter, error) {
			src := task.Source(kafka.Options{StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: 40})
			ks := typed.GroupByKey(typed.From[fixtures.Click](src), func(c *fixtures.Click) fixtures.PageKey { return fixtures.PageKey{User: c.User, Page: c.Page} })
			sets := typed.GroupingSets(ks, typed.Count[fixtures.Click](), func(k fixtures.PageKey, set typed.GroupingSet, n int64) int64 { return n },
				setsGiven, func(k *fixtures.PageKey) { k.User = "*" }, func(k *fixtures.PageKey) { k.Page = "*" })
			return typed.WriteTo(sets, typed.NewMemorySink[int64]()).OutputMode(typed.Update), nil
		})
	}
	err := newApp("refused", false, 0, 2).Run(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "cannot run in an App of 2 partitions") || !strings.Contains(err.Error(), "GroupingSetsKeepPartitions") {
		t.Fatalf("grouping sets over two partitions without the setting: %v", err)
	}
	// A grand total takes rows from every partition, whatever the
	// setting says.
	err = newApp("total", true, 0, 3).Run(testContext(t))
	if err == nil || !strings.Contains(err.Error(), "GroupingSetsKeepPartitions or not: one of its sets rolls up every dimension") {
		t.Fatalf("a grand total over two partitions with the setting: %v", err)
	}

	app := newApp("kept", true, 0, 2)
	ctx, cancel := context.WithCancel(testContext(t))
	r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Run(ctx) }()
	defer r.stop(t)
	type setKey struct {
		set typed.GroupingSet
		key fixtures.PageKey
	}
	want := map[setKey]int64{}
	for _, c := range in {
		want[setKey{0, fixtures.PageKey{User: c.User, Page: c.Page}}]++
		want[setKey{2, fixtures.PageKey{User: c.User, Page: "*"}}]++
	}
	for k, n := range want {
		key, _ := json.Marshal(map[string]any{"set": k.set, "key": k.key})
		ans := awaitCount(t, r, key, n)
		if ans.Partition != userPartition(k.key.User, 2) {
			t.Fatalf("%s: read in partition %d, the user's is %d", key, ans.Partition, userPartition(k.key.User, 2))
		}
	}
}

// readState reads key's state in operator 0 through app's StateHandler.
func readState(app *kafka.App, key json.RawMessage) (int, kafka.AppStateAnswer, string) {
	rec := httptest.NewRecorder()
	app.StateHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/state/0?key="+url.QueryEscape(string(key)), nil))
	var ans kafka.AppStateAnswer
	json.Unmarshal(rec.Body.Bytes(), &ans)
	return rec.Code, ans, rec.Body.String()
}

// awaitCount reads key through r's StateHandler until its one row is a
// count of n, and returns that answer; the test fails if the App ends.
func awaitCount(t *testing.T, r *runningApp, key json.RawMessage, n int64) kafka.AppStateAnswer {
	t.Helper()
	var ans kafka.AppStateAnswer
	poll(t, "the count of "+string(key), func() bool {
		select {
		case err := <-r.done:
			r.done <- err // for r.stop
			t.Fatalf("the App ended: %v", err)
		default:
		}
		var code int
		code, ans, _ = readState(r.app, key)
		var acc typed.CountAcc
		return code == 200 && len(ans.Rows) == 1 && json.Unmarshal(ans.Rows[0].Value, &acc) == nil && acc.N == n
	})
	return ans
}
