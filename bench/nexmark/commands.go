package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/streamgen/streamgen/bench/nexmark/generator"
	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/bench/nexmark/queries"
	"github.com/streamgen/streamgen/internal/atomicfile"
	"github.com/streamgen/streamgen/internal/procmem"
	"github.com/streamgen/streamgen/kafka"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// genFlags are the generator's flags.
type genFlags struct {
	events     int64
	rate       int
	generators int
	seed       uint64
}

// The workload of the published Flink figures (nexmark/nexmark
// GUIDE_V1: "Source generates 10M records per seconds", parallelism 8):
// conf/nexmark.yaml's nexmark.workload.suite.100m.tps, which
// ddl_gen.sql gives the generator as first-event.rate, and one generator
// a source task (NexmarkTableSourceFactory: numEventGenerators =
// parallelism). Event time then moves 1 s every 10M events, and windows
// of 10 s hold a whole run of 10M.
const (
	publishedRate       = 10_000_000
	publishedGenerators = 8
)

func (g *genFlags) register(fs *flag.FlagSet) {
	fs.Int64Var(&g.events, "events", 0, "the number of events to generate")
	fs.IntVar(&g.rate, "rate", publishedRate, "events a second of event time (the generator's first-event.rate; the default is the published Flink run's)")
	fs.IntVar(&g.generators, "generators", publishedGenerators, "generators, each its split of the events' ids and times, merged in event-time order (the published Flink run's parallelism by default)")
	fs.Uint64Var(&g.seed, "seed", 42, "the generator's seed")
}

func (g *genFlags) config() generator.Config {
	cfg := generator.DefaultConfig()
	cfg.Events, cfg.Rate, cfg.Generators, cfg.Seed = g.events, g.rate, g.generators, g.seed
	return cfg
}

func generate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("generate", flag.ContinueOnError)
	var g genFlags
	g.register(fs)
	out := fs.String("out", "", "the `directory` to write the events' files to")
	perFile := fs.Int("per-file", 100_000, "events a file")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if g.events <= 0 || *out == "" {
		return usagef("generate needs -events N (more than 0) and -out DIR")
	}
	if err := generator.WriteFiles(g.config(), *out, *perFile); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%d events in %s\n", g.events, *out)
	return nil
}

func runQuery(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var g genFlags
	g.register(fs)
	name := fs.String("query", "", "the query, q0 to q23")
	input := fs.String("input", "", "a `directory` of the events' JSON lines files (without it: -events from the in-process generator)")
	output := fs.String("output", "", "the `directory` to write the rows to, a JSON lines file a batch (default: standard output)")
	checkpoint := fs.String("checkpoint", "", "the checkpoint `directory` (default: a temporary one, removed after)")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	q, err := queries.ByName(*name)
	if err != nil {
		return &usageError{err}
	}
	if (*input == "") == (g.events <= 0) {
		return usagef("run needs -input DIR or -events N, one of them")
	}
	var events typed.Stream[model.Event]
	if *input != "" {
		events = typed.From[model.Event](runtime.FilesSource(*input, runtime.FilesOptions{}))
	} else {
		events = fromGenerator(g.config(), 100_000)
	}
	var out queries.Output = &printOutput{w: stdout}
	if *output != "" {
		if err := os.MkdirAll(*output, 0o755); err != nil {
			return err
		}
		out = &filesOutput{dir: *output}
	}
	dir := *checkpoint
	if dir == "" {
		if dir, err = os.MkdirTemp("", "nexmark-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	run, err := q.Start(ctx, events, out, runtime.Checkpoint(dir), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime())
	if err != nil {
		return err
	}
	return awaitOrStop(ctx, run)
}

// awaitOrStop waits for the query, stopping it when ctx is done.
func awaitOrStop(ctx context.Context, q *typed.Query) error {
	select {
	case <-q.Done():
	case <-ctx.Done():
		if err := q.Stop(); err != nil {
			return err
		}
		return ctx.Err()
	}
	return q.Err()
}

// printOutput writes each line to w.
type printOutput struct{ w io.Writer }

func (p *printOutput) Write(_ context.Context, _ int64, lines [][]byte) error {
	bw := bufio.NewWriter(p.w)
	for _, l := range lines {
		bw.Write(l)
		bw.WriteByte('\n')
	}
	return bw.Flush()
}

// filesOutput writes each batch's lines to a file of its own, batch-N.json,
// atomically: a batch written again replaces its file.
type filesOutput struct{ dir string }

func (f *filesOutput) Write(_ context.Context, batch int64, lines [][]byte) error {
	if len(lines) == 0 {
		return nil
	}
	return atomicfile.Replace(f.dir, fmt.Sprintf("batch-%09d.json", batch), func(w io.Writer) error {
		bw := bufio.NewWriterSize(w, 1<<20)
		for _, l := range lines {
			bw.Write(l)
			bw.WriteByte('\n')
		}
		return bw.Flush()
	})
}

// genSource is the in-process generator as a source: its offsets are
// event counts; each record carries its event (Record.Meta), not bytes.
// A read that does not start where the last ended (a replay) generates
// again from the start.
type genSource struct {
	cfg      generator.Config
	perBatch int64
	gen      *generator.Merged
	next     int64 // the number of the generator's next event
}

func fromGenerator(cfg generator.Config, perBatch int64) typed.Stream[model.Event] {
	src := &genSource{cfg: cfg, perBatch: perBatch}
	return typed.FromFunc[model.Event](src, func(r runtime.Record) (model.Event, error) {
		// The generator reuses its structs: the stream's event owns
		// copies.
		e := r.Meta.(*model.Event)
		var c model.Event
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
		return c, nil
	})
}

func (s *genSource) Name() string { return "generator" }

func (s *genSource) Available(context.Context) (json.RawMessage, error) {
	return json.RawMessage(strconv.FormatInt(s.cfg.Events, 10)), nil
}

func offset(raw json.RawMessage) int64 {
	n, _ := strconv.ParseInt(string(raw), 10, 64)
	return n
}

func (s *genSource) Next(ctx context.Context, committed, upTo json.RawMessage, limit runtime.ReadLimit) (json.RawMessage, error) {
	return s.NextCapped(ctx, committed, upTo, limit, s.perBatch)
}

// NextCapped ends a batch after at most records events
// (runtime.RecordCapper), and perBatch.
func (s *genSource) NextCapped(_ context.Context, committed, upTo json.RawMessage, _ runtime.ReadLimit, records int64) (json.RawMessage, error) {
	from, to := offset(committed), min(offset(upTo), offset(committed)+min(s.perBatch, records))
	if to <= from {
		return committed, nil
	}
	return json.RawMessage(strconv.FormatInt(to, 10)), nil
}

func (s *genSource) Read(ctx context.Context, start, end json.RawMessage, fn func(runtime.Record) error) error {
	from, to := offset(start), offset(end)
	if s.gen == nil || from != s.next {
		s.gen, s.next = generator.NewMerged(s.cfg), 0
	}
	var e model.Event
	for s.next < from {
		s.gen.Next(&e)
		s.next++
	}
	for ; s.next < to; s.next++ {
		if !s.gen.Next(&e) {
			return fmt.Errorf("the generator ended at event %d", s.next)
		}
		if err := fn(runtime.Record{Partition: "generator", Meta: &e}); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// published is the published Nexmark throughput per core, in events a
// CPU-second: Flink 1.13's (nexmark/nexmark GUIDE_V1, 100M events,
// parallelism 8) and Feldera's (feldera/feldera benchmark README, 16
// workers, divided by 16).
var published = map[string][2]float64{
	"q0": {155_020, 436_000}, "q1": {157_940, 412_000}, "q2": {175_210, 422_000}, "q3": {152_120, 413_000},
	"q4": {34_330, 265_000}, "q5": {22_140, 412_000}, "q7": {12_330, 196_000}, "q8": {146_140, 415_000},
	"q9": {14_240, 57_000}, "q10": {57_810, 0}, "q11": {39_700, 0}, "q12": {75_670, 418_000},
	"q13": {130_730, 230_000}, "q14": {161_230, 429_000}, "q15": {72_420, 221_000}, "q16": {18_650, 51_000},
	"q17": {116_800, 242_000}, "q18": {53_700, 85_000}, "q19": {44_040, 75_000}, "q20": {18_980, 85_000},
	"q21": {98_490, 415_000}, "q22": {129_960, 394_000},
}

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) (err error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	var g genFlags
	g.register(fs)
	name := fs.String("query", "", "the query, q0 to q23, or all")
	source := fs.String("source", "generator", "where the events come from: generator (in-process), files (written first, then read) or kafka (produced to a topic first, then read)")
	perBatch := fs.Int64("batch", 200_000, "events a micro-batch")
	maxState := fs.Int64("max-batch-state", runtime.DefaultMaxBatchStateBytes, "the query's runtime.MaxBatchStateBytes: past it, batches take fewer events (0 or less: no cap)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the run to `file` (with a process a query: to file.qN for each)")
	memProfile := fs.String("memprofile", "", "write to `file` a heap profile of the Go heap near its largest during the run, the state cache and Pebble's caches being outside it (with a process a query: to file.qN for each)")
	processes := fs.Bool("processes", true, "with -query all and -source generator, run each query in a process of its own (this command again, with -query qN), so that its peak memory and CPU time are its own, not raised by the queries before it")
	if err := parse(fs, args, stderr); err != nil {
		return err
	}
	if g.events <= 0 {
		return usagef("bench needs -events N (more than 0)")
	}
	var list []*queries.Query
	if *name == "all" {
		list = queries.All
	} else {
		q, err := queries.ByName(*name)
		if err != nil {
			return &usageError{err}
		}
		list = []*queries.Query{q}
	}
	// With a process a query, each child writes its own profiles.
	alone := *processes && len(list) > 1 && *source == "generator"
	if !alone {
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		if *memProfile != "" {
			stop := peakHeapProfile(*memProfile, 100*time.Millisecond)
			defer func() {
				if perr := stop(); err == nil {
					err = perr
				}
			}()
		}
	}
	work, err := os.MkdirTemp("", "nexmark-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	var events func() (typed.Stream[model.Event], func(), error)
	switch *source {
	case "generator":
		events = func() (typed.Stream[model.Event], func(), error) {
			return fromGenerator(g.config(), *perBatch), func() {}, nil
		}
	case "files":
		dir := filepath.Join(work, "events")
		fmt.Fprintf(stderr, "nexmark: writing %d events to %s\n", g.events, dir)
		if err := generator.WriteFiles(g.config(), dir, int(*perBatch)); err != nil {
			return err
		}
		events = func() (typed.Stream[model.Event], func(), error) {
			return typed.From[model.Event](runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 1})), func() {}, nil
		}
	case "kafka":
		conn, closeKafka, err := produce(ctx, g.config(), stderr)
		if err != nil {
			return err
		}
		defer closeKafka()
		events = func() (typed.Stream[model.Event], func(), error) {
			s, closeSource := fromKafka(conn, *perBatch)
			return s, closeSource, nil
		}
	default:
		return usagef("-source %q: generator, files or kafka", *source)
	}

	fmt.Fprintf(stdout, "workload: %d events, %d a second of event time, %d generators (the published Flink run's: %d a second, %d generators)\n",
		g.events, g.rate, g.generators, publishedRate, publishedGenerators)
	fmt.Fprintf(stdout, "%-4s %12s %9s %14s %15s %9s %12s %12s %10s\n", "q", "events", "wall s", "events/s", "events/CPU-s", "RSS MiB", "Flink/core", "Feldera/core", "×Flink")
	if alone {
		for _, q := range list {
			var profiles []string
			if *cpuProfile != "" {
				profiles = append(profiles, "-cpuprofile", *cpuProfile+"."+q.Name)
			}
			if *memProfile != "" {
				profiles = append(profiles, "-memprofile", *memProfile+"."+q.Name)
			}
			row, err := benchAlone(ctx, q.Name, &g, *perBatch, stderr, append(profiles, "-max-batch-state", strconv.FormatInt(*maxState, 10))...)
			if err != nil {
				return fmt.Errorf("%s: %w", q.Name, err)
			}
			fmt.Fprintln(stdout, row)
		}
		return nil
	}
	for _, q := range list {
		s, closeSource, err := events()
		if err != nil {
			return err
		}
		dir := filepath.Join(work, "checkpoint-"+q.Name)
		procmem.ResetPeak()
		cpu0, wall0 := cpuTime(), time.Now()
		opts := []runtime.Option{runtime.Checkpoint(dir), runtime.WithTrigger(runtime.AvailableNow()), runtime.FlushEventTime(), runtime.MaxBatchStateBytes(*maxState)}
		if q.ProcessingTime {
			// The processing-time windows still open at the end are
			// written by a last batch after them.
			opts = append(opts, runtime.WithManualClock(runtime.NewManualClock(time.Now())))
		}
		run, err := q.Start(ctx, s, queries.Discard, opts...)
		if err != nil {
			closeSource()
			return fmt.Errorf("%s: %w", q.Name, err)
		}
		err = awaitOrStop(ctx, run)
		closeSource()
		if err != nil {
			return fmt.Errorf("%s: %w", q.Name, err)
		}
		wall, cpu := time.Since(wall0).Seconds(), cpuTime()-cpu0
		pub := published[q.Name]
		perCPU := float64(g.events) / cpu
		ratio := "-"
		if pub[0] > 0 {
			ratio = fmt.Sprintf("%.1f", perCPU/pub[0])
		}
		fmt.Fprintf(stdout, "%-4s %12d %9.2f %14.0f %15.0f %9d %12s %12s %10s\n", q.Name, g.events, wall, float64(g.events)/wall, perCPU,
			procmem.Peak()>>20, figure(pub[0]), figure(pub[1]), ratio)
		os.RemoveAll(dir)
	}
	return nil
}

// benchAlone runs bench for the query name in a process of its own (this
// command again), and returns the line it prints for the query.
func benchAlone(ctx context.Context, name string, g *genFlags, perBatch int64, stderr io.Writer, more ...string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, self, "bench", "-query", name, "-source", "generator", "-batch", strconv.FormatInt(perBatch, 10),
		"-events", strconv.FormatInt(g.events, 10), "-rate", strconv.Itoa(g.rate), "-generators", strconv.Itoa(g.generators),
		"-seed", strconv.FormatUint(g.seed, 10))
	cmd.Args = append(cmd.Args, more...)
	cmd.Env = append(os.Environ(), benchChildEnv+"=1")
	cmd.Stderr = stderr
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	for line := range strings.Lines(string(out)) {
		if strings.HasPrefix(line, name+" ") {
			return strings.TrimRight(line, "\n"), nil
		}
	}
	return "", fmt.Errorf("its process printed no line for it:\n%s", out)
}

// benchChildEnv is set, to 1, in the environment of the process
// benchAlone starts: the command ignores it; the package's tests, whose
// binary benchAlone starts, run the command when it is set.
const benchChildEnv = "NEXMARK_BENCH_CHILD"

func figure(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", f)
}

// cpuTime is the process's user and system CPU time so far, in seconds.
func cpuTime() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// fromKafka reads the events from eventsTopic, from its start, perBatch a
// batch, and returns what closes the source.
func fromKafka(conn kafka.Connection, perBatch int64) (typed.Stream[model.Event], func()) {
	src := kafka.Source(kafka.Options{Connection: conn, Topics: []string{eventsTopic}, StartingOffsets: kafka.Earliest(), MaxOffsetsPerTrigger: perBatch})
	return typed.From[model.Event](src), func() { src.Close() }
}

// eventsTopic is the topic bench -source kafka produces the events to.
const eventsTopic = "nexmark-events"

// produce produces the events to eventsTopic, keyed by nothing, on the
// cluster $STREAMGEN_KAFKA_BROKERS names or an embedded one, and returns
// the connection and what closes the embedded cluster.
func produce(ctx context.Context, cfg generator.Config, stderr io.Writer) (kafka.Connection, func(), error) {
	brokers, closeCluster := kafka.Brokers(), func() {}
	if len(brokers) == 0 {
		cluster, err := kafka.Embedded(ctx)
		if err != nil {
			return kafka.Connection{}, nil, err
		}
		brokers, closeCluster = cluster.Brokers(), func() { cluster.Close() }
	}
	conn := kafka.Connection{Brokers: brokers}
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		closeCluster()
		return conn, nil, err
	}
	defer client.Close()
	if _, err := kadm.NewClient(client).CreateTopic(ctx, 4, -1, nil, eventsTopic); err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		closeCluster()
		return conn, nil, fmt.Errorf("create topic %s: %w", eventsTopic, err)
	}
	fmt.Fprintf(stderr, "nexmark: producing %d events to %s at %s\n", cfg.Events, eventsTopic, strings.Join(brokers, ","))
	m := generator.NewMerged(cfg)
	var e model.Event
	var failed atomic.Pointer[error]
	for i := int64(0); m.Next(&e); i++ {
		v, err := e.AppendJSON(nil)
		if err != nil {
			closeCluster()
			return conn, nil, err
		}
		// Round robin over the partitions, in order within each.
		client.Produce(ctx, &kgo.Record{Topic: eventsTopic, Partition: int32(i % 4), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				failed.CompareAndSwap(nil, &err)
			}
		})
	}
	if err := client.Flush(ctx); err != nil {
		closeCluster()
		return conn, nil, err
	}
	if p := failed.Load(); p != nil {
		closeCluster()
		return conn, nil, fmt.Errorf("produce: %w", *p)
	}
	return conn, closeCluster, nil
}
