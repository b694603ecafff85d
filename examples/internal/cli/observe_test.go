package cli

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestMetricsFlag: -metrics serves the query's metrics while it runs,
// which count what the sample holds, and stops serving when the query
// ends.
func TestMetricsFlag(t *testing.T) {
	s := start(t, io.Discard, "-metrics", "127.0.0.1:0", "-trigger", "1h")
	s.stderr.waitFor(t, "test: batch 0 committed")
	url := regexp.MustCompile(`test: metrics at (http://\S+)\n`).FindStringSubmatch(s.stderr.String())
	if url == nil {
		t.Fatalf("stderr does not say where the metrics are:\n%s", s.stderr)
	}
	resp, err := http.Get(url[1])
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The sample: 4,001 lines, one of which does not decode, read in
	// one batch; the identity pipeline writes the rest.
	for name, want := range map[string]float64{
		"streamgen_batches_total":      1,
		"streamgen_input_rows_total":   4001,
		"streamgen_output_rows_total":  4000,
		"streamgen_dead_letters_total": 1,
		"streamgen_query_running":      1,
	} {
		f := families[name]
		if f == nil || len(f.Metric) != 1 {
			t.Errorf("%s: %v, want one series", name, f)
			continue
		}
		m := f.Metric[0]
		got := m.GetCounter().GetValue() + m.GetGauge().GetValue()
		if got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	s.signals <- syscall.SIGINT
	s.result(t)
	if resp, err := http.Get(url[1]); err == nil {
		resp.Body.Close()
		t.Errorf("the metrics are still served after the run: %s", resp.Status)
	}
}

// TestMetricsFlagAddressInUse: an address that cannot be listened on
// fails the run before the query starts, naming the flag.
func TestMetricsFlagAddressInUse(t *testing.T) {
	s := start(t, io.Discard, "-metrics", "127.0.0.1:-1")
	err := s.result(t)
	if err == nil || !strings.Contains(err.Error(), "-metrics") || ExitCode(err) != 1 {
		t.Fatalf("got %v (status %d), want an error that names -metrics", err, ExitCode(err))
	}
}

// withWatermark is the sensor pipeline with a watermark a minute behind
// the readings' creation times.
func withWatermark(s typed.Stream[sensor.Event]) typed.Stream[sensor.Event] {
	return typed.WithWatermark(s, func(e *sensor.Event) time.Time { return time.Unix(0, e.CreationTime) }, time.Minute)
}

// TestSummary: the summary says where the dead letters went (a directory,
// or logged), the watermark reached, and, after -flush, that the input
// was flushed rather than the watermark past every event time that the
// flush sets.
func TestSummary(t *testing.T) {
	deadLetters := filepath.Join(t.TempDir(), "dead")
	stderr := newOutput()
	err := run[sensor.Event]("test", []string{"-max-files-per-trigger", "3", "-dead-letter", deadLetters}, io.Discard, stderr, nil, true, withWatermark)
	if err != nil {
		t.Fatal(err)
	}
	wantInStderr(t, stderr, "4001 rows in, 4000 rows out, 1 dead letter (in "+deadLetters+"); watermark 20")
	files, _ := os.ReadDir(deadLetters)
	files = slices.DeleteFunc(files, func(e os.DirEntry) bool { return strings.HasPrefix(e.Name(), ".") }) // hidden
	if len(files) != 1 {
		t.Errorf("the dead-letter directory holds %d files, want the one batch's", len(files))
	}
	summary := regexp.MustCompile(`; watermark (\S+)\n`).FindStringSubmatch(stderr.String())
	if summary == nil {
		t.Fatalf("no watermark in the summary:\n%s", stderr)
	}
	if w, err := time.Parse(time.RFC3339, summary[1]); err != nil || w.Year() > 2100 {
		t.Errorf("watermark %q: %v", summary[1], err)
	}

	stderr = newOutput()
	if err := run[sensor.Event]("test", []string{"-max-files-per-trigger", "3", "-flush"}, io.Discard, stderr, nil, true, withWatermark); err != nil {
		t.Fatal(err)
	}
	wantInStderr(t, stderr, "test: committed 4 batches in this run (ids 0 to 3): 4001 rows in, 4000 rows out, 1 dead letter (logged); input flushed (-flush)\n")
	if strings.Contains(stderr.String(), "2262") || strings.Contains(stderr.String(), "watermark") {
		t.Errorf("the flush's watermark is printed:\n%s", stderr)
	}
}

// terminal is a stderr that stands for a terminal: the status line is
// drawn at each tick the test sends.
type terminal struct {
	*output
	ticks chan time.Time
}

func (t terminal) statusTicks() <-chan time.Time { return t.ticks }

// TestLiveStatusLine: on a terminal, a status line says how far the
// running batch has gone, instead of a line per batch, and is erased
// before the summary.
func TestLiveStatusLine(t *testing.T) {
	stdout := &stuckWriter{writing: make(chan struct{}), release: make(chan struct{})}
	stderr := terminal{newOutput(), make(chan time.Time)}
	done := make(chan error, 1)
	go func() {
		done <- run[sensor.Event]("test", nil, stdout, stderr, nil, false, identity)
	}()
	<-stdout.writing // the batch has read its 8 files, and is held in the sink
	stderr.ticks <- time.Now()
	stderr.waitFor(t, "\r\x1b[Ktest: batch 0 running, 8 of 8 files, 4001 rows read (")
	close(stdout.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	out := stderr.String()
	if !strings.Contains(out, " elapsed\r\x1b[Ktest: committed 1 batch in this run (id 0): 4001 rows in, 4000 rows out, 1 dead letter (logged)\n") {
		t.Errorf("the summary does not replace the status line:\n%q", out)
	}
	if strings.Contains(out, "batch 0 committed:") {
		t.Errorf("a line per batch on a terminal:\n%q", out)
	}
}

// TestStatusLine: what the status line says in each state of a run.
func TestStatusLine(t *testing.T) {
	start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	now := start.Add(90 * time.Second)
	running := runtime.Status{Message: "Processing new data", IsDataAvailable: true, IsTriggerActive: true,
		Batch: runtime.RunningBatch{BatchID: 7, Started: now.Add(-2 * time.Second), NumInputRows: 5000, InputsDone: 3, InputsPlanned: 8}}
	waiting := runtime.Status{Message: "Waiting for data to arrive"}
	for _, c := range []struct {
		name string
		w    *watch
		st   runtime.Status
		want string
	}{
		{"before the first batch", &watch{}, runtime.Status{Message: "Initializing sources"},
			"test: initializing sources, 1m30s elapsed"},
		{"a batch running", &watch{batches: 7, last: 6, watermark: "2015-02-23T10:18:00Z"}, running,
			"test: batch 7 running, 3 of 8 files, 5000 rows read (2500 rows/s), watermark 2015-02-23T10:18:00Z, 1m30s elapsed"},
		{"a source that does not count its inputs", &watch{}, runtime.Status{IsTriggerActive: true,
			Batch: runtime.RunningBatch{BatchID: 0, Started: now.Add(-time.Second), NumInputRows: 10}},
			"test: batch 0 running, 10 rows read (10 rows/s), 1m30s elapsed"},
		{"waiting after a batch", &watch{batches: 2, last: 1, lastRate: 1234.4, watermark: "2015-02-23T10:18:00Z"}, waiting,
			"test: batch 1 committed (1234 rows/s), waiting for data to arrive, watermark 2015-02-23T10:18:00Z, 1m30s elapsed"},
		{"after the flush", &watch{batches: 3, last: 2, flushed: true}, runtime.Status{Message: "Stopped"},
			"test: batch 2 committed (0 rows/s), stopped, watermark flushed, 1m30s elapsed"},
	} {
		c.w.name, c.w.started = "test", start
		if got := c.w.statusLine(c.st, now); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}
