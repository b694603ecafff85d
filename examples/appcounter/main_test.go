package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/examples/internal/cli"
	"github.com/streamgen/streamgen/kafka"
)

// safetyNet bounds each test's waits: a net for a run that never
// returns, not a pace (the cluster is in process).
const safetyNet = 2 * time.Minute

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), safetyNet)
	t.Cleanup(cancel)
	return ctx
}

var defaultTopics = topics{input: "InputsTopic", output: "CorpAppsTopic", deadLetters: "DeadLettersTopic"}

// TestNumberingAgainstAPlainLoop runs appcounter twice on one checkpoint
// against a cluster of the test's own (-brokers), each run adding 60
// messages of the sample, and checks the three topics, read back with a
// read_committed consumer, against a plain loop over the input topic:
// every request once in CorpAppsTopic, numbered per key 1, 2, 3, ... in
// offset order across both runs, and every other message once in
// DeadLettersTopic with its key, value and reason.
func TestNumberingAgainstAPlainLoop(t *testing.T) {
	ctx := testContext(t)
	cluster, err := kafka.Embedded(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	args := []string{"-brokers", strings.Join(cluster.Brokers(), ","), "-checkpoint", t.TempDir(), "-sample", "60"}

	var first bytes.Buffer
	if err := run(ctx, args, &first, io.Discard); err != nil {
		t.Fatal(err)
	}
	in := readTopic(t, cluster.Brokers(), "InputsTopic")
	wantFirst := plainNumbering(t, in)
	got := check(t, cluster.Brokers(), wantFirst)
	if !strings.Contains(first.String(), fmt.Sprintf("This run wrote %d requests to CorpAppsTopic and %d messages to DeadLettersTopic.",
		len(wantFirst.apps), len(wantFirst.dead))) {
		t.Errorf("the first run's summary does not give its counts: %s", &first)
	}

	var second bytes.Buffer
	if err := run(ctx, args, &second, io.Discard); err != nil {
		t.Fatal(err)
	}
	in = readTopic(t, cluster.Brokers(), "InputsTopic")
	if len(in) != 120 {
		t.Fatalf("the input topic holds %d messages after two runs, want 120", len(in))
	}
	want := plainNumbering(t, in)
	got2 := check(t, cluster.Brokers(), want)
	if len(want.notJSON) == 0 || len(want.dead) == len(want.notJSON) {
		t.Fatalf("the sample lacks a kind of bad message: %d dead letters, %d not JSON", len(want.dead), len(want.notJSON))
	}
	// The second run numbered on: some key has requests in both runs,
	// and its second-run numbers follow its first-run ones.
	continued := 0
	for id, a := range got2 {
		if _, old := got[id]; !old && a.AppCounter > 1 {
			continued++
		}
	}
	if continued == 0 {
		t.Fatalf("no request of the second run has a number above 1: the sample does not show the numbering going on")
	}
	if !strings.Contains(second.String(), fmt.Sprintf("This run wrote %d requests to CorpAppsTopic and %d messages to DeadLettersTopic.",
		len(want.apps)-len(wantFirst.apps), len(want.dead)-len(wantFirst.dead))) {
		t.Errorf("the second run's summary does not give its own counts: %s", &second)
	}
}

// TestEmbeddedRunsAgainOnItsCheckpoint runs appcounter with no broker
// twice on one -checkpoint: the in-process cluster keeps its logs in the
// checkpoint, so the second run finds the first run's topics, adds the
// next part of the sample and numbers on. The topics, read from the
// cluster started again on those logs, are checked against the plain
// loop.
func TestEmbeddedRunsAgainOnItsCheckpoint(t *testing.T) {
	t.Setenv(kafka.BrokersEnv, "")
	ctx := testContext(t)
	checkpoint := t.TempDir()
	var stdout [2]bytes.Buffer
	for i := range stdout {
		if err := run(ctx, []string{"-checkpoint", checkpoint}, &stdout[i], io.Discard); err != nil {
			t.Fatalf("run %d: %v", i+1, err)
		}
	}

	cluster, err := kafka.Embedded(ctx, kafka.FakeOptions(kfake.DataDir(filepath.Join(checkpoint, "embedded-kafka"))))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	in := readTopic(t, cluster.Brokers(), "InputsTopic")
	if len(in) != 2*defaultSample {
		t.Fatalf("the input topic holds %d messages after two runs, want %d", len(in), 2*defaultSample)
	}
	firstHalf := plainNumbering(t, slices.DeleteFunc(slices.Clone(in), func(r *kgo.Record) bool { return messageNumber(t, r) >= defaultSample }))
	want := plainNumbering(t, in)
	check(t, cluster.Brokers(), want)
	// Each run wrote its own part: the first the first half's requests
	// and dead letters, the second the rest, so nothing was read twice.
	for i, n := range [][2]int{
		{len(firstHalf.apps), len(firstHalf.dead)},
		{len(want.apps) - len(firstHalf.apps), len(want.dead) - len(firstHalf.dead)},
	} {
		summary := fmt.Sprintf("This run wrote %d requests to CorpAppsTopic and %d messages to DeadLettersTopic.", n[0], n[1])
		if !strings.Contains(stdout[i].String(), summary) {
			t.Errorf("run %d printed\n%s\nwant it to end with %q", i+1, &stdout[i], summary)
		}
	}
}

// TestBadFlags checks that flags that do not parse end with the usage
// error's exit status.
func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-sample", "-1"}, {"-trigger", "sometimes"}, {"-nope"}, {"extra"}} {
		err := run(t.Context(), args, io.Discard, io.Discard)
		if cli.ExitCode(err) != 2 {
			t.Errorf("%q: %v (exit status %d), want a usage error", args, err, cli.ExitCode(err))
		}
	}
}

// wantApp is a request as the plain loop numbers it.
type wantApp struct {
	key, name, subject, product string
	quantity, counter           int64
}

// numbering is the plain loop's result: the numbered requests by id, and
// the positions ("topic/partition@offset") of the other messages, of
// which notJSON are values that are not JSON at all.
type numbering struct {
	apps          map[int64]wantApp
	dead, notJSON map[string]*kgo.Record
}

// plainNumbering numbers the requests among the input records with a
// plain loop over them in offset order, with encoding/json: a request is
// a JSON message whose content's last space-separated word is an
// integer; each key's requests are numbered from 1.
func plainNumbering(t *testing.T, in []*kgo.Record) numbering {
	t.Helper()
	n := numbering{apps: map[int64]wantApp{}, dead: map[string]*kgo.Record{}, notJSON: map[string]*kgo.Record{}}
	counters := map[string]int64{}
	for _, r := range in {
		pos := fmt.Sprintf("%s/%d@%d", r.Topic, r.Partition, r.Offset)
		var m struct {
			ID                     int64
			Name, Subject, Content string
		}
		if err := json.Unmarshal(r.Value, &m); err != nil {
			n.dead[pos], n.notJSON[pos] = r, r
			continue
		}
		words := strings.Split(m.Content, " ")
		if len(words) < 2 {
			n.dead[pos] = r
			continue
		}
		quantity, err := strconv.ParseInt(words[len(words)-1], 10, 64)
		if err != nil {
			n.dead[pos] = r
			continue
		}
		counters[string(r.Key)]++
		if _, dup := n.apps[m.ID]; dup {
			t.Fatalf("the sample has id %d twice", m.ID)
		}
		n.apps[m.ID] = wantApp{key: string(r.Key), name: m.Name, subject: m.Subject,
			product: strings.Join(words[:len(words)-1], " "), quantity: quantity, counter: counters[string(r.Key)]}
	}
	return n
}

// gotApp is an output value, decoded with encoding/json.
type gotApp struct {
	ID                     int64
	Name, Subject, Product string
	Quantity               int64
	AppCounter             int64 `json:"app_counter"`
}

// check compares the output and dead-letter topics with want, and
// returns the output by id.
func check(t *testing.T, brokers []string, want numbering) map[int64]gotApp {
	t.Helper()
	got := map[int64]gotApp{}
	last := map[string]int64{} // per key, the last number seen in its partition
	for _, r := range readTopic(t, brokers, "CorpAppsTopic") {
		var a gotApp
		if err := json.Unmarshal(r.Value, &a); err != nil {
			t.Fatalf("output %d@%d: %v: %s", r.Partition, r.Offset, err, r.Value)
		}
		if _, dup := got[a.ID]; dup {
			t.Fatalf("request %d is in the output twice", a.ID)
		}
		got[a.ID] = a
		w, ok := want.apps[a.ID]
		if !ok {
			t.Fatalf("output %+v: id %d is not a request of the input", a, a.ID)
		}
		g := wantApp{key: string(r.Key), name: a.Name, subject: a.Subject, product: a.Product, quantity: a.Quantity, counter: a.AppCounter}
		if g != w {
			t.Errorf("request %d: got %+v, want %+v", a.ID, g, w)
		}
		if a.AppCounter != last[w.key]+1 {
			t.Errorf("key %s: number %d follows %d in the output", w.key, a.AppCounter, last[w.key])
		}
		last[w.key] = a.AppCounter
	}
	if len(got) != len(want.apps) {
		t.Errorf("the output holds %d requests, want %d", len(got), len(want.apps))
	}

	seen := map[string]bool{}
	for _, r := range readTopic(t, brokers, "DeadLettersTopic") {
		var pos, reason string
		for _, h := range r.Headers {
			switch h.Key {
			case kafka.HeaderPosition:
				pos = string(h.Value)
			case kafka.HeaderError:
				reason = string(h.Value)
			}
		}
		original, ok := want.dead[pos]
		switch {
		case !ok:
			t.Fatalf("dead letter at %q: not a message the plain loop refuses", pos)
		case seen[pos]:
			t.Fatalf("dead letter %s twice", pos)
		case !bytes.Equal(r.Key, original.Key) || !bytes.Equal(r.Value, original.Value):
			t.Errorf("dead letter %s: key %q value %q, want the original's %q %q", pos, r.Key, r.Value, original.Key, original.Value)
		}
		wantReason := "not a purchase request"
		if want.notJSON[pos] != nil {
			wantReason = "the value is not a message"
		}
		if !strings.Contains(reason, wantReason) {
			t.Errorf("dead letter %s: reason %q, want it to say %q", pos, reason, wantReason)
		}
		seen[pos] = true
	}
	if len(seen) != len(want.dead) {
		t.Errorf("the dead-letter topic holds %d messages, want %d", len(seen), len(want.dead))
	}
	return got
}

// messageNumber is the sample's number of an input record (its id - 1).
func messageNumber(t *testing.T, r *kgo.Record) int {
	t.Helper()
	for n := range 1000 {
		if _, value := sampleMessage(n); bytes.Equal(value, r.Value) {
			return n
		}
	}
	t.Fatalf("input %d@%d is not a sample message: %s", r.Partition, r.Offset, r.Value)
	return 0
}

// readTopic reads every record of topic up to its end offsets now with a
// plain franz-go consumer, read_committed, by partition, then offset.
func readTopic(t *testing.T, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx := testContext(t)
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ends, err := kadm.NewClient(client).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of %s: %v", topic, err)
	}
	remaining := map[int32]int64{}
	start := map[int32]kgo.Offset{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
			start[o.Partition] = kgo.NewOffset().AtStart()
		}
	})
	if len(remaining) == 0 {
		return nil
	}
	consumer, err := kgo.NewClient(kgo.SeedBrokers(brokers...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close()
	var out []*kgo.Record
	for len(remaining) > 0 {
		fetches := consumer.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %s: %v (still waiting for %v)", topic, err, remaining)
		}
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("read %s/%d: %v", topic, p, err)
			}
		})
		fetches.EachRecord(func(r *kgo.Record) {
			out = append(out, r)
			if r.Offset+1 >= remaining[r.Partition] {
				delete(remaining, r.Partition)
			}
		})
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return out
}
