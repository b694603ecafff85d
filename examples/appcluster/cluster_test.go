package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/internal/testenv"
	"github.com/streamgen/streamgen/kafka"
)

// cluster is the processes of the multi-process test: a broker and the
// App's instances.
type cluster struct {
	t       testing.TB
	bin     string
	dir     string
	brokers string
	mu      sync.Mutex
	procs   map[int]*instance
}

// instance is a running appcluster process.
type instance struct {
	cmd  *exec.Cmd
	addr string
	done chan struct{}
}

// build builds a package into dir.
func build(t testing.TB, dir, name, pkg string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// startLine starts cmd and returns the first line of its stdout that
// begins with prefix.
func startLine(t testing.TB, cmd *exec.Cmd, prefix string) (string, chan struct{}) {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	line := ""
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), prefix) {
			line = lines.Text()
			break
		}
	}
	done := make(chan struct{})
	go func() {
		io.Copy(io.Discard, out)
		cmd.Wait()
		close(done)
	}()
	if line == "" {
		<-done
		t.Fatalf("%s printed no %q line", cmd.Path, prefix)
	}
	return line, done
}

// start starts instance i (on its own directory, kept across restarts),
// with one standby per partition, or the flags given.
func (c *cluster) start(i int, flags ...string) {
	if flags == nil {
		flags = []string{"-standbys", "1"}
	}
	cmd := exec.Command(c.bin, append([]string{"-brokers", c.brokers, "-dir", filepath.Join(c.dir, fmt.Sprint(i)), "-http", "127.0.0.1:0",
		"-session-timeout", "1s", "-rebalance-timeout", "5s"}, flags...)...)
	logf, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("instance-%d.log", i)), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	line, done := startLine(c.t, cmd, "appcluster: serving on")
	addr := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(line)[3], "http://"), "/")
	c.mu.Lock()
	c.procs[i] = &instance{cmd: cmd, addr: addr, done: done}
	c.mu.Unlock()
}

// stop stops instance i with sig and waits for it.
func (c *cluster) stop(i int, sig syscall.Signal) {
	c.mu.Lock()
	p := c.procs[i]
	delete(c.procs, i)
	c.mu.Unlock()
	p.cmd.Process.Signal(sig)
	<-p.done
}

// running returns the instances running.
func (c *cluster) running() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for i := range c.procs {
		out = append(out, i)
	}
	return out
}

// TestClusterSurvivesKills runs the App as processes against a broker
// process (streamgen broker): three instances, while the input is
// produced, killed with SIGKILL at random and started again, a fourth
// added and one stopped for good. Every user's counts, read back with
// read_committed, rise at each update and end at a plain loop's count:
// nothing lost, doubled or reordered. Reads of state from any instance
// agree with the loop.
func TestClusterSurvivesKills(t *testing.T) {
	testenv.SkipUnlessFull(t, "builds the broker and the example and runs them as processes")
	dir := t.TempDir()
	sg := build(t, dir, "streamgen", "../../cmd/streamgen")
	c := &cluster{t: t, bin: build(t, dir, "appcluster", "."), dir: dir, procs: map[int]*instance{}}
	broker := exec.Command(sg, "broker", "-listen", "127.0.0.1:0", "-min-session-timeout", "100ms", "-topic", "clicks:8", "-topic", "counts:4")
	line, brokerDone := startLine(t, broker, "brokers ")
	c.brokers = strings.Fields(line)[1]
	defer func() {
		for _, i := range c.running() {
			c.stop(i, syscall.SIGKILL)
		}
		broker.Process.Signal(syscall.SIGTERM)
		<-brokerDone
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(c.brokers), kgo.DefaultProduceTopic("clicks"))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for i := range 3 {
		c.start(i)
	}

	// The input, produced while the instances come and go.
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 7))
	var in []Click
	base := time.Now().UTC()
	for i := range 6000 {
		in = append(in, Click{User: fmt.Sprintf("user-%d", r.IntN(150)), Time: base.Add(time.Duration(i) * time.Millisecond), Page: pages[r.IntN(len(pages))]})
	}
	produced := make(chan error, 1)
	go func() {
		for start := 0; start < len(in); start += 50 {
			var recs []*kgo.Record
			for _, ck := range in[start:min(start+50, len(in))] {
				v, _ := ck.MarshalJSON()
				recs = append(recs, &kgo.Record{Key: []byte(ck.User), Value: v})
			}
			if err := client.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				produced <- err
				return
			}
			time.Sleep(80 * time.Millisecond)
		}
		produced <- nil
	}()

	next := 3
	for step := 0; ; step++ {
		select {
		case err := <-produced:
			if err != nil {
				t.Fatal(err)
			}
			goto settled
		case <-time.After(time.Duration(400+r.IntN(800)) * time.Millisecond):
		}
		running := c.running()
		switch {
		case step == 2:
			t.Logf("step %d: instance %d joins", step, next)
			c.start(next) // a fourth instance
			next++
		case step == 5 && len(running) > 2:
			leaving := running[r.IntN(len(running))]
			t.Logf("step %d: instance %d leaves (SIGTERM)", step, leaving)
			c.stop(leaving, syscall.SIGTERM) // one leaves for good
		case len(running) > 1:
			victim := running[r.IntN(len(running))]
			t.Logf("step %d: instance %d killed (SIGKILL) and started again", step, victim)
			c.stop(victim, syscall.SIGKILL)
			time.Sleep(time.Duration(100+r.IntN(600)) * time.Millisecond)
			c.start(victim)
		}
	}
settled:
	// Every user's last count is the loop's, as the output shows it.
	want := map[string]int64{}
	for _, ck := range in {
		want[ck.User]++
	}
	adm := kadm.NewClient(client)
	var got map[string][]int64
	for deadline := time.Now().Add(2 * time.Minute); ; {
		got = counts(t, ctx, c.brokers, adm)
		var wrong []string
		for u, w := range want {
			if cs := got[u]; len(cs) == 0 || cs[len(cs)-1] != w {
				wrong = append(wrong, fmt.Sprintf("%s: want %d, got %v", u, w, cs))
			}
		}
		if len(wrong) == 0 && len(got) == len(want) {
			break
		}
		if time.Now().After(deadline) {
			c.diagnose(ctx, adm)
			sort.Strings(wrong)
			t.Fatalf("the output never reached the loop's counts (%d users of %d, %d wrong):\n%s", len(got), len(want), len(wrong), strings.Join(wrong[:min(len(wrong), 10)], "\n"))
		}
		time.Sleep(500 * time.Millisecond)
	}
	for u, cs := range got {
		for i := 1; i < len(cs); i++ {
			if cs[i] <= cs[i-1] {
				t.Fatalf("user %s: counts %v: update %d repeats or goes back", u, cs, i)
			}
		}
	}
	// Any instance answers any user's count. A partition may still move
	// (a warm copy that caught up takes it over): while it starts, the
	// answer is 503, to try again, as a client does.
	for _, i := range c.running() {
		c.mu.Lock()
		addr := c.procs[i].addr
		c.mu.Unlock()
		for u, w := range want {
			var ans kafka.AppStateAnswer
			var resp *http.Response
			var err error
			for deadline := time.Now().Add(30 * time.Second); ; {
				ans = kafka.AppStateAnswer{}
				resp, err = http.Get("http://" + addr + "/app/state/0/state?key=" + u)
				if err != nil {
					t.Fatal(err)
				}
				err = json.NewDecoder(resp.Body).Decode(&ans)
				resp.Body.Close()
				if resp.StatusCode != http.StatusServiceUnavailable || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			var cnt Count
			if err != nil || resp.StatusCode != 200 || len(ans.Rows) != 1 || json.Unmarshal(ans.Rows[0].Value, &cnt) != nil || cnt.Count != w {
				t.Fatalf("instance %d: %s: %d %+v; want %d", i, u, resp.StatusCode, ans, w)
			}
		}
	}
}

// diagnose logs, for a run whose output did not settle, where each
// partition of the input and the output stands, what each running
// instance reports of its tasks and the end of each instance's log, and
// keeps the instances' goroutines and logs in a directory the test does
// not remove.
func (c *cluster) diagnose(ctx context.Context, adm *kadm.Client) {
	t := c.t
	if ends, err := adm.ListEndOffsets(ctx, "clicks", "counts"); err == nil {
		stable, _ := adm.ListCommittedOffsets(ctx, "counts")
		ends.Each(func(o kadm.ListedOffset) {
			if s, ok := stable.Lookup(o.Topic, o.Partition); ok {
				t.Logf("%s/%d: end %d, stable %d", o.Topic, o.Partition, o.Offset, s.Offset)
			} else {
				t.Logf("%s/%d: end %d", o.Topic, o.Partition, o.Offset)
			}
		})
	}
	if group, err := adm.FetchOffsets(ctx, "appcluster"); err == nil {
		group.Each(func(o kadm.OffsetResponse) { t.Logf("group offset %s/%d: %d", o.Topic, o.Partition, o.At) })
	}
	kept, err := os.MkdirTemp("", "appcluster-failure-")
	if err != nil {
		t.Log(err)
		return
	}
	for _, i := range c.running() {
		c.mu.Lock()
		addr := c.procs[i].addr
		c.mu.Unlock()
		for name, path := range map[string]string{"status": "/api/queries", "goroutines": "/debug/pprof/goroutine?debug=2"} {
			resp, err := http.Get("http://" + addr + path)
			if err != nil {
				t.Logf("instance %d: %s: %v", i, name, err)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			os.WriteFile(filepath.Join(kept, fmt.Sprintf("%s-%d.txt", name, i)), b, 0o644)
			if name == "status" {
				t.Logf("instance %d: %s", i, b)
			} else {
				t.Logf("instance %d: the goroutines in streamgen's code:\n%s", i, ownGoroutines(string(b)))
			}
		}
	}
	logs, _ := filepath.Glob(filepath.Join(c.dir, "instance-*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		os.WriteFile(filepath.Join(kept, filepath.Base(l)), b, 0o644)
		t.Logf("%s:\n%s", l, b[max(0, len(b)-3000):])
	}
	t.Logf("the instances' logs, status and goroutines are kept in %s", kept)
}

// ownGoroutines summarizes a goroutine dump (debug=2): for each
// goroutine with a frame in streamgen's code, its state and its first
// three such frames, the same ones counted once.
func ownGoroutines(dump string) string {
	seen := map[string]int{}
	var order []string
	for _, g := range strings.Split(dump, "\n\n") {
		lines := strings.Split(g, "\n")
		state := ""
		if _, rest, ok := strings.Cut(lines[0], "["); ok {
			state, _, _ = strings.Cut(rest, "]")
		}
		var frames []string
		for _, l := range lines[1:] {
			if !strings.HasPrefix(l, "\t") && strings.Contains(l, "streamgen/streamgen/") && len(frames) < 3 {
				name := strings.TrimPrefix(l, "github.com/streamgen/streamgen/")
				if i := strings.LastIndex(name, "("); i > 0 && !strings.HasPrefix(name, "created by") {
					name = name[:i] // the arguments
				}
				frames = append(frames, name)
			}
		}
		if len(frames) == 0 {
			continue
		}
		key := "[" + state + "] " + strings.Join(frames, " < ")
		if seen[key] == 0 {
			order = append(order, key)
		}
		seen[key]++
	}
	var b strings.Builder
	for _, k := range order {
		fmt.Fprintf(&b, "%d× %s\n", seen[k], k)
	}
	return b.String()
}

// counts reads the output with read_committed: each user's counts in
// order.
func counts(t *testing.T, ctx context.Context, brokers string, adm *kadm.Client) map[string][]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(ctx, "counts")
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[string]map[int32]kgo.Offset{"counts": {}}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		offsets["counts"][o.Partition] = kgo.NewOffset().AtStart()
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumePartitions(offsets), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[string][]int64{}
	for len(remaining) > 0 {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		fetches := cl.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		if timedOut && fetches.NumRecords() == 0 {
			break // the rest are transaction markers
		}
		fetches.EachRecord(func(rec *kgo.Record) {
			var cnt Count
			if err := cnt.UnmarshalJSON(rec.Value); err != nil {
				t.Fatalf("output %d@%d: %v", rec.Partition, rec.Offset, err)
			}
			out[cnt.User] = append(out[cnt.User], cnt.Count)
			if rec.Offset+1 >= remaining[rec.Partition] {
				delete(remaining, rec.Partition)
			}
		})
	}
	return out
}
