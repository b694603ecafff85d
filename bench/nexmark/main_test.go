package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/nexmark/generator"
	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/bench/nexmark/queries"
	"github.com/streamgen/streamgen/runtime"
)

// The queries checked end to end through the command's paths: a regular
// join, windows closed by the watermark, and an updating aggregation.
var checked = []string{"q3", "q5", "q17"}

// loopOf is q's result table by its loop over cfg's events.
func loopOf(t *testing.T, q *queries.Query, cfg generator.Config) []string {
	t.Helper()
	m := generator.NewMerged(cfg)
	var events []model.Event
	var e model.Event
	for m.Next(&e) {
		c := e
		switch {
		case e.Bid != nil:
			b := *e.Bid
			c.Bid = &b
		case e.Auction != nil:
			a := *e.Auction
			c.Auction = &a
		case e.Person != nil:
			p := *e.Person
			c.Person = &p
		}
		events = append(events, c)
	}
	lines, err := q.Loop(events)
	if err != nil {
		t.Fatal(err)
	}
	want, err := queries.Final(q, lines)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 {
		t.Fatalf("%s: the loop's result is empty", q.Name)
	}
	return want
}

func testConfig() generator.Config {
	cfg := generator.DefaultConfig()
	cfg.Events, cfg.Rate, cfg.Generators = 20_000, 1_000, 1
	return cfg
}

// TestGenerateAndRun: `generate` then `run -input` writes, a file a
// batch, the result the loop computes.
func TestGenerateAndRun(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "events")
	if err := run(context.Background(), []string{"generate", "-events", "20000", "-rate", "1000", "-generators", "1", "-per-file", "3000", "-out", in}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, name := range checked {
		q, _ := queries.ByName(name)
		out := filepath.Join(dir, "out-"+name)
		if err := run(context.Background(), []string{"run", "-query", name, "-input", in, "-output", out}, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(out, "batch-*.json"))
		var lines [][]byte
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for l := range bytes.Lines(b) {
				lines = append(lines, bytes.TrimSuffix(l, []byte("\n")))
			}
		}
		got, err := queries.Final(q, lines)
		if err != nil {
			t.Fatal(err)
		}
		if want := loopOf(t, q, testConfig()); !slices.Equal(got, want) {
			t.Errorf("%s from files: %d rows, the loop %d", name, len(got), len(want))
		}
	}
}

// memOutput keeps the lines written.
type memOutput struct {
	mu    sync.Mutex
	lines [][]byte
}

func (o *memOutput) Write(_ context.Context, _ int64, lines [][]byte) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range lines {
		o.lines = append(o.lines, slices.Clone(l))
	}
	return nil
}

// TestFromKafkaAndGenerator: the events produced to the embedded Kafka
// cluster, and those of the in-process generator, give the queries the
// result the loop computes.
func TestFromKafkaAndGenerator(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig()
	conn, closeKafka, err := produce(ctx, cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer closeKafka()
	for _, name := range checked {
		q, _ := queries.ByName(name)
		want := loopOf(t, q, cfg)
		for _, source := range []string{"kafka", "generator"} {
			events, closeSource := fromKafka(conn, 3_000)
			if source == "generator" {
				events, closeSource = fromGenerator(cfg, 3_000), func() {}
			}
			out := &memOutput{}
			run, err := q.Start(ctx, events, out, runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
			if err != nil {
				t.Fatal(err)
			}
			err = run.AwaitTermination()
			closeSource()
			if err != nil {
				t.Fatal(err)
			}
			got, err := queries.Final(q, out.lines)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s from %s: %d rows, the loop %d", name, source, len(got), len(want))
			}
		}
	}
}

// TestGeneratorFlagsDefaultToThePublishedWorkload: without -rate and
// -generators, the events are those of the published Flink run's layout
// (10M events a second of event time, from 8 generators), so that the
// figures bench prints beside Flink's come from the same workload: 200k
// events span 20 ms of event time, and their auctions' ids come from 8
// splits, not one.
func TestGeneratorFlagsDefaultToThePublishedWorkload(t *testing.T) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var g genFlags
	g.register(fs)
	if err := fs.Parse([]string{"-events", "200000"}); err != nil {
		t.Fatal(err)
	}
	var first, last time.Time
	var e model.Event
	gen := generator.NewMerged(g.config())
	for n := 0; gen.Next(&e); n++ {
		if n == 0 {
			first = e.Time()
		}
		last = e.Time()
	}
	if span := last.Sub(first); span < 19*time.Millisecond || span > 21*time.Millisecond {
		t.Errorf("200k events span %v of event time, want 20 ms (10M events a second)", span)
	}
	one := g.config()
	one.Generators = 1
	if merged, single := g.config(), one; sameEvents(t, merged, single) {
		t.Errorf("the default generators give the stream of one generator")
	}
}

// sameEvents reports whether a and b generate the same events.
func sameEvents(t *testing.T, a, b generator.Config) bool {
	t.Helper()
	ga, gb := generator.NewMerged(a), generator.NewMerged(b)
	var ea, eb model.Event
	for ga.Next(&ea) {
		if !gb.Next(&eb) {
			return false
		}
		ja, _ := ea.MarshalJSON()
		jb, _ := eb.MarshalJSON()
		if string(ja) != string(jb) {
			return false
		}
	}
	return !gb.Next(&eb)
}

// TestMain runs the command itself when bench's -query all starts this
// binary for a query (benchAlone).
func TestMain(m *testing.M) {
	if os.Getenv(benchChildEnv) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestBenchCommand: bench runs every query, each in a process of its own,
// and prints a line for each, with the published figures beside it; bad
// arguments are refused.
func TestBenchCommand(t *testing.T) {
	var out strings.Builder
	if err := run(context.Background(), []string{"bench", "-query", "all", "-events", "5000", "-batch", "1000"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, q := range queries.All {
		if !strings.Contains(out.String(), "\n"+q.Name+" ") {
			t.Errorf("no line for %s:\n%s", q.Name, out.String())
		}
	}
	if !strings.Contains(out.String(), "155020") {
		t.Errorf("no Flink figure for q0:\n%s", out.String())
	}
	for _, args := range [][]string{{"bench", "-query", "q6", "-events", "10"}, {"run", "-query", "q1"}, {"nope"}, {"bench", "-query", "q1"}} {
		var usage *usageError
		if err := run(context.Background(), args, io.Discard, io.Discard); err == nil || !errors.As(err, &usage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}

// TestBenchMemProfile: -memprofile writes a heap profile (gzipped, as
// go tool pprof reads it) that names the heap's sample types; with a
// process a query, each writes its own profiles, and the command none.
func TestBenchMemProfile(t *testing.T) {
	dir := t.TempDir()
	heap, cpu := filepath.Join(dir, "heap"), filepath.Join(dir, "cpu")
	if err := run(context.Background(), []string{"bench", "-query", "all", "-events", "2000", "-batch", "1000", "-memprofile", heap, "-cpuprofile", cpu}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, q := range queries.All {
		for _, p := range []string{heap, cpu} {
			if _, err := os.Stat(p + "." + q.Name); err != nil {
				t.Errorf("%s's profile: %v", q.Name, err)
			}
		}
	}
	for _, p := range []string{heap, cpu} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("the command that ran a process a query wrote %s", p)
		}
	}

	path := filepath.Join(t.TempDir(), "heap.prof")
	if err := run(context.Background(), []string{"bench", "-query", "q9", "-events", "20000", "-batch", "2000", "-memprofile", path}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("not a gzipped profile: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"inuse_space", "alloc_space"} {
		if !bytes.Contains(b, []byte(name)) {
			t.Errorf("the profile names no %s", name)
		}
	}
}
