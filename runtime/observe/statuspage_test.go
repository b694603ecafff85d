package observe_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
)

// The JSON of the API as a client reads it, declared here apart from the
// page's own types.
type apiBatch struct {
	BatchID                int64     `json:"batchId"`
	Timestamp              time.Time `json:"timestamp"`
	NumInputRows           int64     `json:"numInputRows"`
	NumOutputRows          int64     `json:"numOutputRows"`
	InputRowsPerSecond     float64   `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64   `json:"processedRowsPerSecond"`
	DurationMs             []int64   `json:"durationMs"`
	StateRows              int64     `json:"stateRows"`
	WatermarkDelayMs       *int64    `json:"watermarkDelayMs"`
}

type apiQuery struct {
	ID           string                 `json:"id"`
	RunID        string                 `json:"runId"`
	Name         string                 `json:"name"`
	Status       string                 `json:"status"`
	Error        string                 `json:"error"`
	Started      time.Time              `json:"started"`
	NumBatches   int64                  `json:"numBatches"`
	Latest       *apiBatch              `json:"latest"`
	Phases       []string               `json:"phases"`
	Batches      []apiBatch             `json:"batches"`
	LastProgress *runtime.QueryProgress `json:"lastProgress"`
}

type apiList struct {
	Queries []apiQuery `json:"queries"`
	Panels  []struct {
		Title string          `json:"title"`
		Data  json.RawMessage `json:"data"`
	} `json:"panels"`
}

// get serves path from h and decodes the JSON answer into v; it returns
// the status code.
func statusGet(t *testing.T, h http.Handler, path string, v any) int {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("GET %s: Content-Type %q, want application/json", path, ct)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
		t.Fatalf("GET %s: %v in %s", path, err, rec.Body)
	}
	return rec.Code
}

// report is a progress report of batch id with values that tell batches
// apart, and every field the page charts.
func syntheticProgress(id, run string, batch int64, start time.Time) runtime.QueryProgress {
	ts := start.Add(time.Duration(batch) * time.Second)
	p := runtime.QueryProgress{
		ID: id, RunID: run, Name: "q-" + id, Timestamp: ts, BatchID: batch,
		NumInputRows:           10 * batch,
		InputRowsPerSecond:     float64(batch) * 1.5,
		ProcessedRowsPerSecond: float64(batch)*2.25 + 0.1,
		DurationMs: map[string]int64{
			runtime.DurationLatestOffset: 1, runtime.DurationGetBatch: batch % 5, runtime.DurationStateOperators: 3,
			runtime.DurationTimers: 1, runtime.DurationSink: 2, runtime.DurationAddBatch: 6, runtime.DurationWALCommit: 4,
			runtime.DurationTriggerExecution: 20 + batch%3,
		},
		StateOperators: []runtime.StateOperatorProgress{{NumRowsTotal: batch}, {NumRowsTotal: 7}},
		Sink:           runtime.SinkProgress{NumOutputRows: batch + 1},
	}
	if batch%4 == 1 {
		// A query of several outputs (typed.WriteAll).
		p.OtherSinks = []runtime.SinkProgress{{Description: "second", NumOutputRows: 2 * batch}, {Description: "third", NumOutputRows: 5}}
	}
	switch {
	case batch%10 == 0:
		// no watermark yet
	case batch%10 == 9:
		p.EventTime = map[string]string{"watermark": runtime.EndOfTime.Format(time.RFC3339Nano)}
	default:
		p.EventTime = map[string]string{"watermark": ts.Add(-time.Duration(batch) * time.Minute).Format(time.RFC3339Nano)}
	}
	return p
}

// checkBatch compares a batch of the API with the report it came from.
func checkBatch(t *testing.T, got apiBatch, p runtime.QueryProgress) {
	t.Helper()
	want := chartValues(p)
	if got.BatchID != want.batch || got.InputRowsPerSecond != want.inputRate || got.ProcessedRowsPerSecond != want.processRate ||
		got.StateRows != want.stateRows || !got.Timestamp.Equal(p.Timestamp) ||
		got.NumInputRows != p.NumInputRows || got.NumOutputRows != want.outputRows {
		t.Errorf("batch %d: got %+v, want %+v from %+v", p.BatchID, got, want, p)
	}
	if len(got.DurationMs) != len(phaseNames) {
		t.Fatalf("batch %d: %d durations, want %d", p.BatchID, len(got.DurationMs), len(phaseNames))
	}
	for i, name := range phaseNames {
		if got.DurationMs[i] != want.phases[name] {
			t.Errorf("batch %d: %s %d ms, want %d", p.BatchID, name, got.DurationMs[i], want.phases[name])
		}
	}
	switch {
	case want.delayMs == nil && got.WatermarkDelayMs != nil:
		t.Errorf("batch %d: watermark delay %d, want none (watermark %q)", p.BatchID, *got.WatermarkDelayMs, p.EventTime["watermark"])
	case want.delayMs != nil && (got.WatermarkDelayMs == nil || *got.WatermarkDelayMs != *want.delayMs):
		t.Errorf("batch %d: watermark delay %v, want %d", p.BatchID, got.WatermarkDelayMs, *want.delayMs)
	}
}

// TestStatusPageAPI: the JSON holds each query's identity and status, the
// last 100 batches of each (oldest first) with what the charts draw, the
// latest rates and the last report; a failed query shows its error.
func TestStatusPageAPI(t *testing.T) {
	page := observe.NewStatusPage()
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	page.OnQueryStarted(runtime.QueryStarted{ID: "a", RunID: "a-1", Name: "q-a", Time: start})
	var reports []runtime.QueryProgress
	for b := range int64(150) {
		reports = append(reports, syntheticProgress("a", "a-1", b, start))
		page.OnQueryProgress(reports[b])
	}
	page.OnQueryStarted(runtime.QueryStarted{ID: "b", RunID: "b-1", Name: "q-b", Time: start.Add(time.Minute)})
	calls := 0
	page.AddPanel("app", func() any { calls++; return map[string]int{"calls": calls} })

	var list apiList
	if code := statusGet(t, page, "/api/queries", &list); code != http.StatusOK {
		t.Fatalf("GET /api/queries: %d", code)
	}
	if len(list.Panels) != 1 || list.Panels[0].Title != "app" || string(list.Panels[0].Data) != `{"calls":1}` {
		t.Fatalf("the panels: %+v", list.Panels)
	}
	if len(list.Queries) != 2 {
		t.Fatalf("%d queries, want 2: %+v", len(list.Queries), list)
	}
	a, b := list.Queries[1], list.Queries[0] // the newest first
	if a.ID != "a" || a.RunID != "a-1" || a.Name != "q-a" || a.Status != "active" || !a.Started.Equal(start) || a.NumBatches != 150 || a.Latest == nil {
		t.Fatalf("query a: %+v", a)
	}
	checkBatch(t, *a.Latest, reports[149])
	if b.RunID != "b-1" || b.Status != "active" || b.NumBatches != 0 || b.Latest != nil {
		t.Errorf("query b, no batch yet: %+v", b)
	}

	var d apiQuery
	if code := statusGet(t, page, "/api/query?run=a-1", &d); code != http.StatusOK {
		t.Fatalf("GET /api/query: %d", code)
	}
	if strings.Join(d.Phases, ",") != strings.Join(phaseNames, ",") {
		t.Errorf("phases %v, want %v", d.Phases, phaseNames)
	}
	if len(d.Batches) != 100 {
		t.Fatalf("%d batches, want the last 100", len(d.Batches))
	}
	for i, got := range d.Batches {
		checkBatch(t, got, reports[50+i])
	}
	if d.LastProgress == nil || d.LastProgress.BatchID != 149 || d.LastProgress.DurationMs[runtime.DurationTriggerExecution] != reports[149].DurationMs[runtime.DurationTriggerExecution] {
		t.Errorf("last progress %+v, want batch 149's report", d.LastProgress)
	}

	page.OnQueryTerminated(runtime.QueryTerminated{ID: "a", RunID: "a-1", Err: errors.New("streamgen: batch 150: boom")})
	page.OnQueryTerminated(runtime.QueryTerminated{ID: "b", RunID: "b-1"})
	statusGet(t, page, "/api/queries", &list)
	a, b = list.Queries[1], list.Queries[0]
	if a.Status != "failed" || a.Error != "streamgen: batch 150: boom" {
		t.Errorf("failed query: status %q, error %q", a.Status, a.Error)
	}
	if b.Status != "finished" || b.Error != "" {
		t.Errorf("finished query: status %q, error %q", b.Status, b.Error)
	}
}

// TestStatusPageQueryLookup: a query's JSON is found by run id, or by
// query id (its latest run); a request for neither, or for an unknown
// run, is refused with a message.
func TestStatusPageQueryLookup(t *testing.T) {
	page := observe.NewStatusPage()
	for i, run := range []string{"r1", "r2"} {
		page.OnQueryStarted(runtime.QueryStarted{ID: "q", RunID: run, Time: clickT0.Add(time.Duration(i) * time.Hour)})
		page.OnQueryProgress(syntheticProgress("q", run, int64(i), clickT0))
		page.OnQueryTerminated(runtime.QueryTerminated{ID: "q", RunID: run})
	}
	var d apiQuery
	if code := statusGet(t, page, "/api/query?id=q", &d); code != http.StatusOK || d.RunID != "r2" {
		t.Errorf("?id=q: status %d, run %q; want 200 and the latest run, r2", code, d.RunID)
	}
	if code := statusGet(t, page, "/api/query?run=r1", &d); code != http.StatusOK || d.RunID != "r1" {
		t.Errorf("?run=r1: status %d, run %q", code, d.RunID)
	}
	var e struct{ Error string }
	if code := statusGet(t, page, "/api/query", &e); code != http.StatusBadRequest || !strings.Contains(e.Error, "?run=RUNID") {
		t.Errorf("no run: status %d, error %q; want 400 saying how to ask", code, e.Error)
	}
	if code := statusGet(t, page, "/api/query?run=nope", &e); code != http.StatusNotFound || e.Error == "" {
		t.Errorf("unknown run: status %d, error %q; want 404 with a message", code, e.Error)
	}
}

// TestStatusPageKeepsRecentEnded: past the limit, the oldest ended
// queries are dropped; an active one never is.
func TestStatusPageKeepsRecentEnded(t *testing.T) {
	page := observe.NewStatusPage(observe.StatusPageQueries(2), observe.StatusPageBatches(3))
	page.OnQueryStarted(runtime.QueryStarted{ID: "active", RunID: "active"})
	for i := range 5 {
		run := fmt.Sprint("ended-", i)
		page.OnQueryStarted(runtime.QueryStarted{ID: run, RunID: run})
		page.OnQueryTerminated(runtime.QueryTerminated{ID: run, RunID: run})
	}
	for b := range int64(5) {
		page.OnQueryProgress(syntheticProgress("active", "active", b, clickT0))
	}
	var list apiList
	statusGet(t, page, "/api/queries", &list)
	var runs []string
	for _, q := range list.Queries {
		runs = append(runs, q.RunID)
	}
	if got := strings.Join(runs, " "); got != "ended-4 ended-3 active" {
		t.Errorf("queries %q, want the two latest ended and the active one", got)
	}
	var d apiQuery
	statusGet(t, page, "/api/query?run=active", &d)
	if len(d.Batches) != 3 || d.Batches[0].BatchID != 2 || d.Batches[2].BatchID != 4 || d.NumBatches != 5 {
		t.Errorf("StatusPageBatches(3): %d batches kept of %d, want 2 to 4", len(d.Batches), d.NumBatches)
	}
}

// TestStatusPageServesEmbedded: the pages, script and style are served
// from the binary, under a policy that forbids loading anything from
// elsewhere, and they name nothing elsewhere (the SVG namespace is a
// name, not a load). The handler works under a prefix.
func TestStatusPageServesEmbedded(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("/status/", http.StripPrefix("/status", observe.NewStatusPage()))
	for path, want := range map[string]string{
		"/status/":                 "text/html",
		"/status/query?run=x":      "text/html",
		"/status/static/app.js":    "text/javascript",
		"/status/static/style.css": "text/css",
	} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), want) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, rec.Code, rec.Header().Get("Content-Type"), want)
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
	}
	for _, path := range []string{"/status/static/", "/status/static/nope.js", "/status/nope"} {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, rec.Code)
		}
	}
	err := filepath.WalkDir("ui", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := strings.ReplaceAll(string(b), `"http://www.w3.org/2000/svg"`, "")
		for _, ref := range []string{"http://", "https://", "//fonts", "@import", "url("} {
			if strings.Contains(s, ref) {
				t.Errorf("%s refers to something outside the page: %q", path, ref)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestStatusPageRealQuery: the JSON of a query that ran holds every batch
// of its RecentProgress, and its status.
func TestStatusPageRealQuery(t *testing.T) {
	page := observe.NewStatusPage()
	q := startClicks(t, "sessions", page)
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	progress := q.RecentProgress()
	if len(progress) < minBatches {
		t.Fatalf("%d batches ran, want at least %d", len(progress), minBatches)
	}
	var d apiQuery
	statusGet(t, page, "/api/query?run="+progress[0].RunID, &d)
	if d.Status != "finished" || d.Name != "sessions" || d.ID != progress[0].ID || d.NumBatches != int64(len(progress)) || len(d.Batches) != len(progress) {
		t.Fatalf("query %+v, want finished with %d batches", d, len(progress))
	}
	for i, p := range progress {
		checkBatch(t, d.Batches[i], p)
	}
	var delays, states int
	for _, p := range progress {
		if e := chartValues(p); e.delayMs != nil {
			delays++
		}
		states += int(chartValues(p).stateRows)
	}
	if delays == 0 || delays == len(progress) || states == 0 {
		t.Errorf("the query charts %d watermark delays of %d batches, %d state rows: the test should see some of each", delays, len(progress), states)
	}
}

// TestStatusPageConcurrent: listener calls on one goroutine and requests
// on others (run with -race).
func TestStatusPageConcurrent(t *testing.T) {
	page := observe.NewStatusPage(observe.StatusPageBatches(10))
	srv := httptest.NewServer(page)
	defer srv.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		for r := range 20 {
			run := fmt.Sprint("run-", r)
			page.OnQueryStarted(runtime.QueryStarted{ID: "q", RunID: run})
			for b := range int64(30) {
				page.OnQueryProgress(syntheticProgress("q", run, b, clickT0))
			}
			page.OnQueryTerminated(runtime.QueryTerminated{ID: "q", RunID: run})
		}
	})
	for range 4 {
		wg.Go(func() {
			for range 30 {
				for _, path := range []string{"/api/queries", "/api/query?id=q"} {
					resp, err := http.Get(srv.URL + path)
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
			}
		})
	}
	wg.Wait()
	var list apiList
	statusGet(t, page, "/api/queries", &list)
	if len(list.Queries) != 20 || list.Queries[0].NumBatches != 30 {
		t.Errorf("%d queries, the latest with %d batches; want 20 and 30", len(list.Queries), list.Queries[0].NumBatches)
	}
}
