package kafka_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
)

// TestAppStateRouting runs the App in two instances, each serving its
// StateHandler on loopback at its AdvertisedAddr, over input keyed by user
// and partitioned by Kafka's default partitioner. Any instance answers any
// user's count, a plain loop's: from its own task, or forwarded to the
// owner the group's assignment names; the answer names the partition the
// producer put the user in and the instance that read it. A stale read may
// come from a standby. What is unknown, or not a read, gets a 4xx; a
// forwarded read of a partition that is not there is not forwarded again.
func TestAppStateRouting(t *testing.T) {
	conn, adm := newCountingCluster(t, 4)
	in := clicks(400, 31)
	// Produced as any producer would: keyed, partitioned by the key.
	client, err := kgo.NewClient(kgo.SeedBrokers(conn.Brokers...))
	if err != nil {
		t.Fatal(err)
	}
	partitionOf := map[string]int32{}
	for _, c := range in {
		v, _ := c.MarshalJSON()
		r := &kgo.Record{Topic: "clicks", Key: []byte(c.User), Value: v, Timestamp: c.Time}
		if err := client.ProduceSync(testContext(t), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		partitionOf[c.User] = r.Partition
	}
	client.Close()

	watch := newAppWatch()
	ctx := testContext(t)
	var apps []*runningApp
	var addrs []string
	// The instances forward through a client the test can make fail.
	failing := &failingTransport{}
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		app := newCountingApp(conn, kafka.AppOptions{Group: "killed", Dir: t.TempDir(), StandbyReplicas: 1, AdvertisedAddr: ln.Addr().String(),
			StateClient: &http.Client{Transport: failing}}, watch)
		srv := &http.Server{Handler: app.StateHandler()}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
		runCtx, cancel := context.WithCancel(ctx)
		r := &runningApp{app: app, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- app.Run(runCtx) }()
		defer r.stop(t)
		apps, addrs = append(apps, r), append(addrs, ln.Addr().String())
	}
	poll(t, "two tasks on each instance", func() bool {
		for _, r := range apps {
			select {
			case err := <-r.done:
				t.Fatalf("an instance ended: %v", err)
			default:
			}
		}
		return running(apps[0].app) == 2 && running(apps[1].app) == 2
	})
	ends, err := adm.ListEndOffsets(ctx, "clicks")
	if err != nil {
		t.Fatal(err)
	}
	awaitGroupAtEnd(t, adm, watch, ends)

	get := func(addr, path string, header ...string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+addr+path, nil)
		if len(header) == 2 {
			req.Header.Set(header[0], header[1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	owners := map[int32]string{}
	for _, p := range apps[0].app.Status().Partitions {
		owners[p.Partition] = p.OwnerAddr
	}
	want := expectedCounts(in)
	for user, w := range want {
		for _, addr := range addrs {
			code, body := get(addr, "/state/0/state?key="+url.QueryEscape(user))
			var ans kafka.AppStateAnswer
			if err := json.Unmarshal(body, &ans); err != nil || code != 200 {
				t.Fatalf("%s from %s: %d %s", user, addr, code, body)
			}
			var c fixtures.Counter
			if len(ans.Rows) != 1 || json.Unmarshal(ans.Rows[0].Value, &c) != nil || c.Count != w.Count {
				t.Fatalf("%s from %s: %s; want count %d", user, addr, body, w.Count)
			}
			if ans.Partition != partitionOf[user] || ans.Instance != owners[ans.Partition] || ans.Standby {
				t.Fatalf("%s from %s: read in partition %d by %s (standby %v); the producer put it in %d, owned by %s",
					user, addr, ans.Partition, ans.Instance, ans.Standby, partitionOf[user], owners[partitionOf[user]])
			}
		}
	}
	// Stale reads: the standbys catch up, then answer as the owners do.
	for user, w := range want {
		poll(t, "a stale read of "+user, func() bool {
			for _, addr := range addrs {
				code, body := get(addr, "/state/0/state?stale=true&key="+url.QueryEscape(user))
				var ans kafka.AppStateAnswer
				if code != 200 || json.Unmarshal(body, &ans) != nil || len(ans.Rows) != 1 {
					return false
				}
				var c fixtures.Counter
				if json.Unmarshal(ans.Rows[0].Value, &c) != nil || c.Count > w.Count || c.Count < w.Count {
					return false
				}
				// Where the partition has its standby, not its task,
				// the standby answers.
				if standby := addr != owners[partitionOf[user]]; ans.Standby != standby || ans.Instance != addr {
					return false
				}
			}
			return true
		})
	}
	// The same, through Go: Locate places a key as the producer did and
	// names its owner and standby; ReadState answers where the task is.
	// An instance that runs no task cannot place a key.
	idle := newStandbyApp(conn, t.TempDir(), "", watch)
	if _, err := idle.Locate(runtime.StateRequest{Operator: "0", Key: json.RawMessage(`"ann"`)}); !errors.Is(err, kafka.ErrNoTask) {
		t.Fatalf("Locate on an instance that never ran: %v, want ErrNoTask", err)
	}
	for user, w := range want {
		key, _ := json.Marshal(user)
		req := runtime.StateRequest{Operator: "0", Variable: "state", Key: key}
		for i, r := range apps {
			loc, err := r.app.Locate(req)
			p := partitionOf[user]
			if err != nil || loc.Partition != p || loc.Owner != owners[p] || loc.Local != slices.Contains(r.app.Tasks(), p) ||
				len(loc.Standbys) != 1 || loc.Standbys[0] == loc.Owner {
				t.Fatalf("%s located by instance %d: %+v, %v; want partition %d, owned by %s, one standby elsewhere", user, i, loc, err, p, owners[p])
			}
			ans, ok, err := r.app.ReadState(req, false)
			if err != nil || ok != loc.Local {
				t.Fatalf("%s read by instance %d: %v, %v; want a read where the task is", user, i, ok, err)
			}
			var c fixtures.Counter
			if ok && (len(ans.Rows) != 1 || json.Unmarshal(ans.Rows[0].Value, &c) != nil || c.Count != w.Count) {
				t.Fatalf("%s read by instance %d: %+v; want count %d", user, i, ans, w.Count)
			}
		}
	}
	// A read an instance could not place (it had no task yet), forwarded
	// "unplaced", is placed and forwarded once more, to the owner.
	mine := apps[0].app.Tasks()
	var elsewhere string
	for user, p := range partitionOf {
		if otherPartition(mine) >= 0 && !slices.Contains(mine, p) {
			elsewhere = user
		}
	}
	if code, body := get(addrs[0], "/state/0/state?key="+url.QueryEscape(elsewhere), "X-Streamgen-Forwarded", "unplaced"); code != 200 || !strings.Contains(body2s(body), `"Count":`) {
		t.Errorf("an unplaced read of %s: %d %s", elsewhere, code, body)
	}
	for _, tc := range []struct {
		path   string
		header []string
		code   int
	}{
		{"/state/0/state?key=nobody", nil, 200},
		{"/state/9/state?key=ann", nil, 404},
		{"/state/0/nosuch?key=ann", nil, 404},
		{"/state/0/state", nil, 400},
		{"/state/0/state?key=ann&limit=-1", nil, 400},
		// A forwarded read names its partition; one that is not here is
		// not forwarded again.
		{fmt.Sprintf("/state/0/state?key=ann&partition=%d", otherPartition(apps[0].app.Tasks())), []string{"X-Streamgen-Forwarded", "test"}, 503},
	} {
		if code, body := get(addrs[0], tc.path, tc.header...); code != tc.code || !json.Valid(body) {
			t.Errorf("%s: %d %s, want %d", tc.path, code, body, tc.code)
		}
	}
	// A read that cannot be forwarded says why, naming the instance.
	failing.fail.Store(true)
	code, body := get(addrs[0], "/state/0/state?key="+url.QueryEscape(elsewhere))
	if want := "forward to " + owners[partitionOf[elsewhere]] + ": "; code != 503 || !strings.Contains(string(body), want) || !strings.Contains(string(body), errRefusedByTest.Error()) {
		t.Errorf("a read of %s that could not be forwarded: %d %s, want 503 saying %q and why", elsewhere, code, body, want)
	}
	failing.fail.Store(false)
	code, body = get(addrs[0], "/state/")
	var st kafka.AppStatus
	if err := json.Unmarshal(body, &st); err != nil || code != 200 || len(st.Tasks) != 2 || len(st.Partitions) != 4 {
		t.Fatalf("/state/: %d %s", code, body)
	}
}

func body2s(b []byte) string { return string(b) }

// failingTransport is http.DefaultTransport, or, once fail is set, a
// transport whose every request fails with errRefusedByTest.
type failingTransport struct{ fail atomic.Bool }

var errRefusedByTest = errors.New("connection refused by the test")

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.fail.Load() {
		return nil, errRefusedByTest
	}
	return http.DefaultTransport.RoundTrip(r)
}

// otherPartition returns a partition of four not in mine.
func otherPartition(mine []int32) int32 {
	for p := range int32(4) {
		found := false
		for _, m := range mine {
			found = found || m == p
		}
		if !found {
			return p
		}
	}
	return -1
}

// TestStaleReadSkipsAnEmptyStandby: a standby that holds no batch yet (it
// has just started, or is rebuilding) does not answer a stale read (with
// "no such state", a 404 a client takes for an operator that does not
// exist): the read goes on to the owner or another standby.
func TestStaleReadSkipsAnEmptyStandby(t *testing.T) {
	app := kafka.NewApp(kafka.AppOptions{Group: "g", Topics: []string{"clicks"}, Dir: t.TempDir()},
		func(*kafka.Task) (kafka.Starter, error) { return nil, errors.New("not run") })
	store, err := runtime.OpenStore(t.TempDir(), runtime.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	answered, err := kafka.StaleReadFrom(app, 1, store, runtime.StateRequest{Operator: "0", Variable: "state", Key: json.RawMessage(`"ann"`)})
	if answered || err != nil {
		t.Fatalf("an empty standby answered a stale read: %v, %v", answered, err)
	}
}
