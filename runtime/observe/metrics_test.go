package observe_test

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// count is a row of the windowed count of the tests.
type count struct {
	Window typed.Window
	User   string
	N      int64
}

// clickLine is a click as a JSON line.
func clickLine(user string, at time.Time) string {
	return fmt.Sprintf(`{"user":%q,"time":%q,"page":"p"}`, user, at.UTC().Format(time.RFC3339Nano))
}

// clickFiles writes the test's input, one file per batch, and returns its
// directory, with the dead letters and late rows it holds: a line that
// does not decode, and a row behind the watermark of the files before.
func clickFiles(t *testing.T) (dir string, deadLetters, late int64) {
	t.Helper()
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	files := [][]string{
		{clickLine("ann", base), clickLine("bob", base.Add(5*time.Second)), clickLine("ann", base.Add(20*time.Second))},
		{clickLine("cy", base.Add(70*time.Second)), "not json", clickLine("ann", base.Add(80*time.Second))},
		{clickLine("bob", base.Add(130*time.Second))},
		// bob's first minute closed by the watermark the batch before
		// ran with (base+70s): late.
		{clickLine("dee", base.Add(200*time.Second)), clickLine("bob", base.Add(time.Second)), clickLine("ann", base.Add(201*time.Second)), clickLine("eve", base.Add(260*time.Second))},
	}
	dir = t.TempDir()
	for i, lines := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%d.json", i)), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, 1, 1
}

// windowedCounts counts clicks per user and minute, with a watermark 10s
// behind, one file per batch.
func windowedCounts(dir string) *typed.Writer[count] {
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 1})
	at := func(c *fixtures.Click) time.Time { return c.Time }
	s := typed.WithWatermark(typed.From[fixtures.Click, *fixtures.Click](src), at, 10*time.Second)
	ws := typed.GroupByWindow(s, at, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
	rows := typed.AggregateWindows(ws, typed.Count[fixtures.Click](), func(w typed.Window, user string, n int64) count { return count{w, user, n} })
	return typed.WriteTo(rows, typed.NewMemorySink[count]()).OutputMode(typed.Update)
}

// scrape gets url and parses it as Prometheus's text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	families, err := tryScrape(url)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

func tryScrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape: %s", resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	return families, nil
}

// series finds the series of family name whose labels include want.
func series(families map[string]*dto.MetricFamily, name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	f := families[name]
	if f == nil {
		return nil
	}
next:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if have[k] != v {
				continue next
			}
		}
		out = append(out, m)
	}
	return out
}

// value is the value of the one series of family name with labels want;
// ok is false when there is none.
func value(t *testing.T, families map[string]*dto.MetricFamily, name string, want map[string]string) (v float64, ok bool) {
	t.Helper()
	ms := series(families, name, want)
	switch {
	case len(ms) == 0:
		return 0, false
	case len(ms) > 1:
		t.Fatalf("%s%v: %d series", name, want, len(ms))
	}
	switch m := ms[0]; {
	case m.Counter != nil:
		return m.Counter.GetValue(), true
	case m.Gauge != nil:
		return m.Gauge.GetValue(), true
	case m.Untyped != nil:
		return m.Untyped.GetValue(), true
	}
	t.Fatalf("%s%v is neither a counter nor a gauge", name, want)
	return 0, false
}

// atEachBatch is a listener, given after a Metrics, that scrapes url
// once each batch's report has reached the Metrics: last is what a
// scrape during the query's last batch shows, made between before and
// after.
type atEachBatch struct {
	t             *testing.T
	url           string
	last          map[string]*dto.MetricFamily
	before, after time.Time
}

func (s *atEachBatch) OnQueryProgress(runtime.QueryProgress) {
	s.before = time.Now()
	f, err := tryScrape(s.url)
	if err != nil {
		s.t.Error(err)
		return
	}
	s.last, s.after = f, time.Now()
}

// TestMetricsOfARunningQuery runs a query of several batches, scraping the
// handler all along, and checks the last scrape against the sums and the
// last values of the query's own progress reports.
func TestMetricsOfARunningQuery(t *testing.T) {
	dir, wantDead, wantLate := clickFiles(t)
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	lastBatch := &atEachBatch{t: t, url: srv.URL}
	q, err := windowedCounts(dir).Start(t.Context(), runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()),
		runtime.Name("clicks"), runtime.Listener(m), runtime.Listener(lastBatch))
	if err != nil {
		t.Fatal(err)
	}
	// Scrapes while the batches run: each parses, and the counters
	// never go down.
	var scraping sync.WaitGroup
	scraping.Go(func() {
		last := -1.0
		for {
			select {
			case <-q.Done():
				return
			default:
			}
			f, err := tryScrape(srv.URL)
			if err != nil {
				t.Error(err)
				return
			}
			if ms := series(f, "streamgen_input_rows_total", map[string]string{"query": "clicks"}); len(ms) == 1 {
				v := ms[0].Counter.GetValue()
				if v < last {
					t.Errorf("input_rows_total went from %v to %v", last, v)
				}
				last = v
			}
		}
	})
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	scraping.Wait()
	f, before, after := lastBatch.last, lastBatch.before, lastBatch.after
	ended := scrape(t, srv.URL)

	reports := q.RecentProgress()
	if len(reports) < 4 {
		t.Fatalf("%d batches, want at least one per file (4)", len(reports))
	}
	last := reports[len(reports)-1]
	var in, out, dead, updated, removed, late float64
	phases := map[string][]float64{} // seconds, by phase
	for _, p := range reports {
		in += float64(p.NumInputRows)
		out += float64(p.Sink.NumOutputRows)
		dead += float64(p.NumDeadLetters)
		op := p.StateOperators[0]
		updated += float64(op.NumRowsUpdated)
		removed += float64(op.NumRowsRemoved)
		late += float64(op.NumRowsDroppedByWatermark)
		for phase, ms := range p.DurationMs {
			phases[phase] = append(phases[phase], float64(ms)/1000)
		}
	}
	if dead != float64(wantDead) || late != float64(wantLate) {
		t.Fatalf("the reports say %v dead letters and %v late rows, the input has %d and %d", dead, late, wantDead, wantLate)
	}
	query := map[string]string{"query": "clicks"}
	// The label is the aggregator's type without package paths.
	name := last.StateOperators[0].Name
	if want := "typed.countAgg[fixtures.Click]"; name != "typed.countAgg[github.com/streamgen/streamgen/generated/fixtures.Click]" {
		t.Fatalf("the operator is named %q, want %s with package paths", name, want)
	}
	operator := map[string]string{"query": "clicks", "operator": "typed.countAgg[fixtures.Click]", "kind": last.StateOperators[0].OperatorName}
	running := 1.0
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"streamgen_batches_total", query, float64(len(reports))},
		{"streamgen_batch_id", query, float64(last.BatchID)},
		{"streamgen_input_rows_total", query, in},
		{"streamgen_output_rows_total", query, out},
		{"streamgen_dead_letters_total", query, dead},
		{"streamgen_input_rows_per_second", query, last.InputRowsPerSecond},
		{"streamgen_processed_rows_per_second", query, last.ProcessedRowsPerSecond},
		{"streamgen_state_rows", operator, float64(last.StateOperators[0].NumRowsTotal)},
		{"streamgen_state_rows_updated_total", operator, updated},
		{"streamgen_state_rows_removed_total", operator, removed},
		{"streamgen_late_rows_total", operator, late},
		{"streamgen_query_running", query, running},
		{"streamgen_query_info", map[string]string{"query": "clicks", "id": q.ID(), "run_id": q.RunID()}, 1},
		{"streamgen_store_memtable_bytes", query, float64(last.StateStore.MemtableBytes)},
		{"streamgen_store_memtables", query, float64(last.StateStore.MemtableCount)},
		{"streamgen_store_block_cache_bytes", query, float64(last.StateStore.BlockCacheBytes)},
		{"streamgen_store_state_cache_bytes", query, float64(last.StateStore.StateCacheBytes)},
		{"streamgen_store_state_cache_entries", query, float64(last.StateStore.StateCacheEntries)},
		{"streamgen_store_compactions_total", query, float64(last.StateStore.Compactions)},
		{"streamgen_store_flushes_total", query, float64(last.StateStore.Flushes)},
		{"streamgen_store_table_bytes", query, float64(last.StateStore.TableBytes)},
		{"streamgen_store_wal_bytes", query, float64(last.StateStore.WALBytes)},
		{"streamgen_store_disk_bytes", query, float64(last.StateStore.DiskBytes)},
		{"streamgen_store_disk_available_bytes", query, float64(last.StateStore.DiskAvailableBytes)},
		{"streamgen_store_disk_reserve_bytes", query, float64(last.StateStore.DiskReserveBytes)},
	} {
		got, ok := value(t, f, c.name, c.labels)
		if !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
		// Once the query ended, its counters stay, query_running is 0,
		// and the gauges of its state are gone, as are the figures of
		// its store, closed.
		got, ok = value(t, ended, c.name, c.labels)
		switch {
		case c.name == "streamgen_query_running":
			if got != 0 {
				t.Errorf("%s%v = %v once the query ended", c.name, c.labels, got)
			}
		case strings.HasSuffix(c.name, "_total") && !strings.HasPrefix(c.name, "streamgen_store_"):
			if !ok || got != c.want {
				t.Errorf("%s%v = %v (found %v) once the query ended, want %v", c.name, c.labels, got, ok, c.want)
			}
		default:
			if ok {
				t.Errorf("%s%v = %v once the query ended, want no series", c.name, c.labels, got)
			}
		}
	}
	if last.StateStore.DiskBytes <= 0 || last.StateStore.MemtableBytes <= 0 ||
		last.StateStore.DiskAvailableBytes <= 0 || last.StateStore.DiskReserveBytes <= 0 || last.StateStore.DiskReserveBytes > runtime.DefaultDiskReserve {
		t.Errorf("the last report has no store figures: %+v", last.StateStore)
	}

	// The watermark, and its delay behind the clock at the scrape.
	w, ok := last.WatermarkTime()
	if !ok {
		t.Fatal("the last batch has no watermark")
	}
	if got, _ := value(t, f, "streamgen_watermark_seconds", query); got != float64(w.UnixNano())/1e9 {
		t.Errorf("watermark_seconds %v, want %v", got, float64(w.UnixNano())/1e9)
	}
	delay, _ := value(t, f, "streamgen_watermark_delay_seconds", query)
	if low, high := before.Sub(w).Seconds(), after.Sub(w).Seconds(); delay < low || delay > high {
		t.Errorf("watermark_delay_seconds %v, want between %v and %v", delay, low, high)
	}
	for _, name := range []string{"streamgen_watermark_seconds", "streamgen_watermark_delay_seconds"} {
		if got, ok := value(t, ended, name, query); ok {
			t.Errorf("%s = %v once the query ended, want no series", name, got)
		}
	}

	// A histogram per phase: its count, sum and buckets are those of
	// the reports' durations.
	for phase, secs := range phases {
		ms := series(f, "streamgen_batch_duration_seconds", map[string]string{"query": "clicks", "phase": phase})
		if len(ms) != 1 || ms[0].Histogram == nil {
			t.Errorf("phase %s: %d series", phase, len(ms))
			continue
		}
		h := ms[0].Histogram
		var sum float64
		for _, s := range secs {
			sum += s
		}
		if h.GetSampleCount() != uint64(len(secs)) || math.Abs(h.GetSampleSum()-sum) > 1e-9 {
			t.Errorf("phase %s: count %d, sum %v; want %d, %v", phase, h.GetSampleCount(), h.GetSampleSum(), len(secs), sum)
		}
		for _, b := range h.Bucket {
			var n uint64
			for _, s := range secs {
				if s <= b.GetUpperBound() {
					n++
				}
			}
			if b.GetCumulativeCount() != n {
				t.Errorf("phase %s: bucket le=%v holds %d, want %d", phase, b.GetUpperBound(), b.GetCumulativeCount(), n)
			}
		}
	}
	for _, phase := range []string{runtime.DurationGetBatch, runtime.DurationWALCommit, runtime.DurationTriggerExecution} {
		if _, ok := phases[phase]; !ok {
			t.Errorf("no report has phase %s", phase)
		}
	}
}

// TestMetricsLabelUnnamedQueriesByID: a query without a name is labelled
// by its id, and two queries on one Metrics keep their own series.
func TestMetricsLabelUnnamedQueriesByID(t *testing.T) {
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	rows := map[string]int{}
	var ids []string
	for _, name := range []string{"", "named"} {
		dir, _, _ := clickFiles(t)
		opts := []runtime.Option{runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()), runtime.Listener(m)}
		if name != "" {
			opts = append(opts, runtime.Name(name))
		}
		q, err := windowedCounts(dir).Start(context.Background(), opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		label := name
		if label == "" {
			label = q.ID()
		}
		ids = append(ids, label)
		for _, p := range q.RecentProgress() {
			rows[label] += int(p.NumInputRows)
		}
	}
	f := scrape(t, srv.URL)
	if n := len(series(f, "streamgen_input_rows_total", nil)); n != 2 {
		t.Errorf("%d series of input_rows_total, want one per query", n)
	}
	for _, l := range ids {
		if got, _ := value(t, f, "streamgen_input_rows_total", map[string]string{"query": l}); got != float64(rows[l]) {
			t.Errorf("query %s: input_rows_total %v, want %d", l, got, rows[l])
		}
	}
}

// TestMetricsFollowTheNamingConventions: every metric is prefixed, a
// counter ends in _total, and a histogram of time is in seconds. The
// client library's linter (promlint) would say the same; this keeps the
// check without its dependency.
func TestMetricsFollowTheNamingConventions(t *testing.T) {
	dir, _, _ := clickFiles(t)
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	q, err := windowedCounts(dir).Start(context.Background(), runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()), runtime.Listener(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	for name, f := range scrape(t, srv.URL) {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") {
			continue // the client library's own collectors
		}
		if !strings.HasPrefix(name, "streamgen_") || f.GetHelp() == "" {
			t.Errorf("%s: no streamgen_ prefix, or no help", name)
		}
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			if !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
		case dto.MetricType_HISTOGRAM:
			if !strings.HasSuffix(name, "_seconds") {
				t.Errorf("histogram %s is not in seconds", name)
			}
		default:
			if strings.HasSuffix(name, "_total") {
				t.Errorf("%s ends in _total but is a %v", name, f.GetType())
			}
		}
	}
}

// TestMetricsAcrossRuns: a query started again on its checkpoint keeps
// its series: counters add up both runs, query_info names the new run
// only, and store counters restart with the new run's store.
func TestMetricsAcrossRuns(t *testing.T) {
	dir, _, _ := clickFiles(t)
	checkpoint := t.TempDir()
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var batches, rows int
	var last *runtime.Query
	lastBatch := &atEachBatch{t: t, url: srv.URL}
	for run := range 2 {
		if run == 1 {
			line := clickLine("zed", time.Date(2026, 3, 1, 10, 10, 0, 0, time.UTC)) + "\n"
			if err := os.WriteFile(filepath.Join(dir, "part-9.json"), []byte(line), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		q, err := windowedCounts(dir).Start(context.Background(), runtime.Checkpoint(checkpoint), runtime.WithTrigger(runtime.AvailableNow()),
			runtime.Name("clicks"), runtime.Listener(m), runtime.Listener(lastBatch))
		if err != nil {
			t.Fatal(err)
		}
		if err := q.AwaitTermination(); err != nil {
			t.Fatal(err)
		}
		for _, p := range q.RecentProgress() {
			batches++
			rows += int(p.NumInputRows)
		}
		last = q
	}
	f := scrape(t, srv.URL)
	query := map[string]string{"query": "clicks"}
	if got, _ := value(t, f, "streamgen_batches_total", query); got != float64(batches) {
		t.Errorf("batches_total %v, want %d over both runs", got, batches)
	}
	if got, _ := value(t, f, "streamgen_input_rows_total", query); got != float64(rows) || rows != 12 {
		t.Errorf("input_rows_total %v, want %d over both runs (12 lines)", got, rows)
	}
	// During the last run, its query_info and its store's figures.
	during := lastBatch.last
	info := series(during, "streamgen_query_info", query)
	if len(info) != 1 {
		t.Fatalf("%d query_info series, want the last run's only", len(info))
	}
	if _, ok := value(t, during, "streamgen_query_info", map[string]string{"query": "clicks", "run_id": last.RunID()}); !ok {
		t.Errorf("query_info is not the last run's (%s)", last.RunID())
	}
	p, _ := last.LastProgress()
	if got, _ := value(t, during, "streamgen_store_state_cache_misses_total", query); got != float64(p.StateStore.StateCacheMisses) {
		t.Errorf("store_state_cache_misses_total %v, want the last run's %d", got, p.StateStore.StateCacheMisses)
	}
}

// TestMetricsOfSeveralSinks: a query of two outputs (typed.WriteAll)
// counts the first sink's rows in output_rows_total and the second's
// in other_sink_output_rows_total, labelled with its description, as
// the reports say.
func TestMetricsOfSeveralSinks(t *testing.T) {
	dir, _, _ := clickFiles(t)
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 1})
	clicks := typed.From[fixtures.Click, *fixtures.Click](src)
	ann := typed.Filter(clicks, func(c *fixtures.Click) bool { return c.User == "ann" })
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	q, err := typed.WriteAll(typed.WriteTo(clicks, typed.NewMemorySink[fixtures.Click]()), typed.WriteTo(ann, typed.NewMemorySink[fixtures.Click]())).
		Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()), runtime.Name("clicks"), runtime.Listener(m))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	var all, anns float64
	var sink string
	for _, p := range q.RecentProgress() {
		all += float64(p.Sink.NumOutputRows)
		if len(p.OtherSinks) != 1 {
			t.Fatalf("batch %d reports other sinks %+v, want one", p.BatchID, p.OtherSinks)
		}
		anns += float64(p.OtherSinks[0].NumOutputRows)
		sink = p.OtherSinks[0].Description
	}
	if anns == 0 || anns >= all {
		t.Fatalf("%v rows to the first sink, %v to the second: the test needs some of ann's and some of others'", all, anns)
	}
	f := scrape(t, srv.URL)
	if got, _ := value(t, f, "streamgen_output_rows_total", map[string]string{"query": "clicks"}); got != all {
		t.Errorf("output_rows_total %v, want the first sink's %v", got, all)
	}
	if got, _ := value(t, f, "streamgen_other_sink_output_rows_total", map[string]string{"query": "clicks", "output": "2", "sink": sink}); got != anns {
		t.Errorf("other_sink_output_rows_total{sink=%q} %v, want the second sink's %v", sink, got, anns)
	}
}

// TestMetricsOfAJoin: a join's rows per side, its custom metrics, are
// series of their own, as its last report says.
func TestMetricsOfAJoin(t *testing.T) {
	left := typed.NewMemoryStream[fixtures.Click]("left", 0)
	right := typed.NewMemoryStream[fixtures.Click]("right", 0)
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	left.Add(fixtures.Click{User: "a", Time: base}, fixtures.Click{User: "b", Time: base}, fixtures.Click{User: "b", Time: base.Add(time.Second)})
	right.Add(fixtures.Click{User: "a", Time: base})
	byUser := func(s typed.Stream[fixtures.Click]) typed.KeyedStream[string, fixtures.Click] {
		return typed.GroupByKey(s, func(c *fixtures.Click) string { return c.User })
	}
	joined := typed.Join(byUser(typed.FromMemory(left)), byUser(typed.FromMemory(right)), typed.Inner,
		func(j typed.Joined[string, fixtures.Click, fixtures.Click]) string { return j.Key })
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	lastBatch := &atEachBatch{t: t, url: srv.URL}
	q, err := typed.WriteTo(joined, typed.NewMemorySink[string]()).Start(context.Background(),
		runtime.Name("joined"), runtime.Listener(m), runtime.Listener(lastBatch), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	families := lastBatch.last
	for metric, want := range map[string]float64{"numLeftRows": 3, "numRightRows": 1} {
		got, ok := value(t, families, "streamgen_state_operator_metric", map[string]string{"query": "joined", "kind": "symmetricHashJoin", "metric": metric})
		if !ok || got != want {
			t.Errorf("%s: %v (found %v), want %v", metric, got, ok, want)
		}
	}
}

// TestMetricsLabelEachOperator: an operator's label is its name without
// package paths, type arguments' included, and two operators of one name
// have a series each, told apart by their index.
func TestMetricsLabelEachOperator(t *testing.T) {
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	m.OnQueryStarted(runtime.QueryStarted{ID: "q", RunID: "r", Name: "ops"})
	m.OnQueryProgress(runtime.QueryProgress{ID: "q", RunID: "r", Name: "ops", StateOperators: []runtime.StateOperatorProgress{
		{Name: "example.com/app/main.dedupe", OperatorName: "dedupe", NumRowsTotal: 10},
		{Name: "example.com/app/main.dedupe", OperatorName: "dedupe", NumRowsTotal: 7},
		{Name: "typed.countAgg[example.com/app/model.Click]", OperatorName: "windowedAggregate", NumRowsTotal: 3},
		{Name: "typed.reduceAgg[map[string]*example.com/app/model.Click,[]example.com/x.Y]", OperatorName: "windowedAggregate", NumRowsTotal: 2},
		{OperatorName: "dedupe", NumRowsTotal: 1},
		{Name: "typed.agg[func(example.com/app/model.Click) int;example.com/n.U]", OperatorName: "windowedAggregate", NumRowsTotal: 5},
	}})
	f := scrape(t, srv.URL)
	for operator, want := range map[string]float64{
		"main.dedupe#0":               10,
		"main.dedupe#1":               7,
		"typed.countAgg[model.Click]": 3,
		"typed.reduceAgg[map[string]*model.Click,[]x.Y]": 2,
		"4":                                    1,
		"typed.agg[func(model.Click) int;n.U]": 5,
	} {
		if got, ok := value(t, f, "streamgen_state_rows", map[string]string{"query": "ops", "operator": operator}); !ok || got != want {
			t.Errorf("state_rows of operator %q: %v (found %v), want %v", operator, got, ok, want)
		}
	}
	if n := len(series(f, "streamgen_state_rows", map[string]string{"query": "ops"})); n != 6 {
		t.Errorf("%d state_rows series, want 6", n)
	}
}

// TestMetricsOfNamesNotUTF8: a files source of a directory whose name is
// not UTF-8 (Linux allows any bytes) and a query so named are exported,
// each byte that is not UTF-8 as U+FFFD, where the client library would
// panic on the label.
func TestMetricsOfNamesNotUTF8(t *testing.T) {
	m := observe.NewMetrics()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	m.OnQueryStarted(runtime.QueryStarted{ID: "q", RunID: "r", Name: "caf\xe9"})
	m.OnQueryProgress(runtime.QueryProgress{ID: "q", RunID: "r", Name: "caf\xe9", NumInputRows: 4,
		Sources:        []runtime.SourceProgress{{Description: "files:/in/caf\xe9", Lag: []runtime.PartitionLag{{Partition: "files", Lag: 2, Bytes: 30}}}},
		StateOperators: []runtime.StateOperatorProgress{{Name: "main.f\xff", OperatorName: "dedupe", NumRowsTotal: 1}}})
	f := scrape(t, srv.URL)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"streamgen_input_rows_total", map[string]string{"query": "caf\uFFFD"}, 4},
		{"streamgen_source_lag_records", map[string]string{"query": "caf\uFFFD", "source": "files:/in/caf\uFFFD"}, 2},
		{"streamgen_source_lag_bytes", map[string]string{"query": "caf\uFFFD", "source": "files:/in/caf\uFFFD"}, 30},
		{"streamgen_state_rows", map[string]string{"query": "caf\uFFFD", "operator": "main.f\uFFFD"}, 1},
	} {
		if got, ok := value(t, f, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
}
