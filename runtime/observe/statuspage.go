package observe

import (
	"net/http"
	"sync"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// StatusPage is a web page of the queries it listens to, and the JSON it
// is drawn from. Pass it to each query as a listener
// (runtime.Listener(page)) and serve it (it is an http.Handler): its list
// shows each query's name, id, run id, status (active, finished, or failed
// with the error), start, batches and latest rates; a query's page charts
// its recent batches (input and process rates, batch duration by phase,
// state rows, watermark delay) and shows its last progress report as JSON.
// The pages poll the JSON once a second, so they follow a running query.
// Every script, style and font is embedded: the page loads nothing from
// elsewhere.
//
// The handler serves, relative to where it is mounted (at "/", or under a
// prefix ending in "/" with http.StripPrefix):
//
//	GET  /                       the list of queries (HTML)
//	GET  /query?run=RUNID        a query's page (HTML); ?id=ID shows the latest run of ID
//	GET  /api/queries            the list, as JSON
//	GET  /api/query?run=RUNID    a query's recent batches and last progress, as JSON
//	GET  /static/...             the embedded script and style
//
// api/query also takes ?id=ID. Its JSON, of which api/queries gives each
// query's first eight fields:
//
//	{"id", "runId", "name", "status": "active" | "finished" | "failed",
//	 "error" (of a failed query), "started", "numBatches" (in this run),
//	 "latest" (the last of "batches", null before the first),
//	 "phases": ["latestOffset", "getBatch", "stateOperators", "timers",
//	            "sink", "walCommit", "other"],
//	 "batches": [{"batchId", "timestamp", "numInputRows", "numOutputRows" (over every sink),
//	              "inputRowsPerSecond", "processedRowsPerSecond",
//	              "durationMs": [one number per phase, they add up to the batch],
//	              "stateRows" (over every operator), "lateRows", "numDeadLetters", "diskBytes",
//	              "lag" (records behind the latest available, over the sources; null when none tells),
//	              "watermarkDelayMs" (timestamp - watermark; null without one)}, ...],
//	 "lastProgress": the runtime.QueryProgress of the last batch}
//
// A page keeps the last 100 batches of each query (StatusPageBatches) and
// every active query, with the last 100 ended ones (StatusPageQueries).
//
// A StatusPage is safe for concurrent use: each query calls its listener
// methods on the query's goroutine, and the handler serves any number of
// requests at once. A listener method holds a lock only to copy a few
// numbers in, so it does not slow the query by more than that.
type StatusPage struct {
	keepBatches, keepEnded int
	mux                    *http.ServeMux

	mu      sync.Mutex
	queries []*pageQuery // in the order they started
	byRun   map[string]*pageQuery
	panels  []panel
}

// panel is a section of the list page that a program adds (AddPanel).
type panel struct {
	title string
	data  func() any
}

// AddPanel adds a section titled title to the list page, showing what
// data returns, as JSON, at every refresh: a kafka.App's Status, say
// (its tasks, standbys, partitions and rebalances). data is called from
// the page's handler, on any goroutine: it must be safe for concurrent
// use.
func (p *StatusPage) AddPanel(title string, data func() any) {
	p.mu.Lock()
	p.panels = append(p.panels, panel{title: title, data: data})
	p.mu.Unlock()
}

// StatusPageOption configures NewStatusPage.
type StatusPageOption interface{ apply(*StatusPage) }

type statusPageOption func(*StatusPage)

func (o statusPageOption) apply(p *StatusPage) { o(p) }

// StatusPageBatches sets how many of a query's most recent batches the
// page keeps and charts. The default, and the value used for n < 1, is
// 100.
func StatusPageBatches(n int) StatusPageOption {
	return statusPageOption(func(p *StatusPage) {
		if n > 0 {
			p.keepBatches = n
		}
	})
}

// StatusPageQueries sets how many ended queries the page keeps, besides
// every active one; the oldest go first. The default, and the value used
// for n < 0, is 100.
func StatusPageQueries(n int) StatusPageOption {
	return statusPageOption(func(p *StatusPage) {
		if n >= 0 {
			p.keepEnded = n
		}
	})
}

// NewStatusPage returns a page that knows no query yet.
func NewStatusPage(opts ...StatusPageOption) *StatusPage {
	p := &StatusPage{keepBatches: 100, keepEnded: 100, byRun: map[string]*pageQuery{}}
	for _, o := range opts {
		o.apply(p)
	}
	p.mux = newStatusMux(p)
	return p
}

// The status of a query on the page, as the JSON says it.
const (
	statusActive   = "active"
	statusFinished = "finished"
	statusFailed   = "failed"
)

// pageQuery is what the page knows of one run of a query. The fields
// after started change under StatusPage.mu.
type pageQuery struct {
	id, runID, name string
	started         time.Time

	status  string
	err     string // the error of a failed query
	batches int64  // every report seen, not only those kept
	// recent holds the last keepBatches batches as a ring: once full, the
	// oldest is at next.
	recent []batchPoint
	next   int
	last   runtime.QueryProgress // valid when batches > 0
}

// batchPoint is one batch as the charts draw it, computed when its report
// arrives. Its JSON is the API's.
type batchPoint struct {
	BatchID                int64     `json:"batchId"`
	Timestamp              time.Time `json:"timestamp"`
	NumInputRows           int64     `json:"numInputRows"`
	NumOutputRows          int64     `json:"numOutputRows"`
	InputRowsPerSecond     float64   `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64   `json:"processedRowsPerSecond"`
	// DurationMs holds the batch's time in each of chartPhases, in that
	// order: phases that do not overlap, so that they stack to the whole
	// batch (runtime.DurationTriggerExecution).
	DurationMs [len(chartPhases)]int64 `json:"durationMs"`
	// StateRows is the state rows of every operator after the batch.
	StateRows int64 `json:"stateRows"`
	// LateRows is the rows the batch's operators dropped as behind the
	// watermark; NumDeadLetters the rows that did not decode.
	LateRows       int64 `json:"lateRows"`
	NumDeadLetters int64 `json:"numDeadLetters"`
	// DiskBytes is what the checkpoint's store has on disk after the
	// batch (runtime.StoreProgress.DiskBytes).
	DiskBytes int64 `json:"diskBytes"`
	// Lag is how many records (a files source's files) the batch's end
	// is behind the latest available, over the sources that can tell
	// (runtime.SourceProgress.Lag); nil when none can.
	Lag *int64 `json:"lag"`
	// WatermarkDelayMs is the batch's time less its watermark: how far
	// event time lags processing time. Nil before the first watermark,
	// and for the end-of-input batch of FlushEventTime, whose watermark
	// is runtime.EndOfTime.
	WatermarkDelayMs *int64 `json:"watermarkDelayMs"`
}

// chartPhases are the phases of a batch the duration chart stacks: those
// of runtime's Duration constants that do not overlap (addBatch is
// stateOperators + timers + sink), and "other", what is left of
// triggerExecution, the whole batch.
var chartPhases = [...]string{
	runtime.DurationLatestOffset,
	runtime.DurationGetBatch,
	runtime.DurationStateOperators,
	runtime.DurationTimers,
	runtime.DurationSink,
	runtime.DurationWALCommit,
	"other",
}

func newBatchPoint(p *runtime.QueryProgress) batchPoint {
	b := batchPoint{
		BatchID:                p.BatchID,
		Timestamp:              p.Timestamp,
		NumInputRows:           p.NumInputRows,
		NumOutputRows:          p.OutputRowsTotal(),
		InputRowsPerSecond:     p.InputRowsPerSecond,
		ProcessedRowsPerSecond: p.ProcessedRowsPerSecond,
		NumDeadLetters:         p.NumDeadLetters,
		DiskBytes:              p.StateStore.DiskBytes,
	}
	for _, op := range p.StateOperators {
		b.LateRows += op.NumRowsDroppedByWatermark
	}
	for _, src := range p.Sources {
		for _, l := range src.Lag {
			if b.Lag == nil {
				b.Lag = new(int64)
			}
			*b.Lag += l.Lag
		}
	}
	var sum int64
	for i, name := range chartPhases[:len(chartPhases)-1] {
		b.DurationMs[i] = p.DurationMs[name]
		sum += p.DurationMs[name]
	}
	// Each phase is rounded down to the millisecond on its own, so the
	// rest can be a little above what the phases left out.
	b.DurationMs[len(chartPhases)-1] = max(0, p.DurationMs[runtime.DurationTriggerExecution]-sum)
	for _, op := range p.StateOperators {
		b.StateRows += op.NumRowsTotal
	}
	if s, ok := p.EventTime["watermark"]; ok {
		if wm, err := time.Parse(time.RFC3339Nano, s); err == nil && !wm.Equal(runtime.EndOfTime) {
			d := p.Timestamp.Sub(wm).Milliseconds()
			b.WatermarkDelayMs = &d
		}
	}
	return b
}

// OnQueryStarted adds the query to the page, as active. The query calls
// it on the goroutine that starts it.
func (p *StatusPage) OnQueryStarted(e runtime.QueryStarted) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.query(e.ID, e.RunID, e.Name, e.Time)
}

// query returns the run's entry, adding it when it is new. It needs p.mu.
func (p *StatusPage) query(id, runID, name string, started time.Time) *pageQuery {
	if q, ok := p.byRun[runID]; ok {
		return q
	}
	q := &pageQuery{id: id, runID: runID, name: name, started: started, status: statusActive}
	p.byRun[runID] = q
	p.queries = append(p.queries, q)
	return q
}

// OnQueryProgress adds a batch to the query's charts. The query calls it
// on its goroutine after each committed batch.
func (p *StatusPage) OnQueryProgress(r runtime.QueryProgress) {
	point := newBatchPoint(&r)
	p.mu.Lock()
	defer p.mu.Unlock()
	// A page added as a listener to a query already running learns of it
	// here.
	q := p.query(r.ID, r.RunID, r.Name, r.Timestamp)
	q.batches++
	q.last = r
	if len(q.recent) < p.keepBatches {
		q.recent = append(q.recent, point)
		return
	}
	q.recent[q.next] = point
	q.next = (q.next + 1) % len(q.recent)
}

// OnQueryTerminated marks the query finished, or failed with its error.
// The query calls it on the goroutine that ends it.
func (p *StatusPage) OnQueryTerminated(e runtime.QueryTerminated) {
	p.mu.Lock()
	defer p.mu.Unlock()
	q, ok := p.byRun[e.RunID]
	if !ok {
		return // a query the page never saw running is not worth a row
	}
	q.status = statusFinished
	if e.Err != nil {
		q.status, q.err = statusFailed, e.Err.Error()
	}
	p.dropEnded()
}

// dropEnded forgets the oldest ended queries past keepEnded. It needs
// p.mu.
func (p *StatusPage) dropEnded() {
	ended := 0
	for _, q := range p.queries {
		if q.status != statusActive {
			ended++
		}
	}
	kept := p.queries[:0]
	for _, q := range p.queries {
		if q.status != statusActive && ended > p.keepEnded {
			ended--
			delete(p.byRun, q.runID)
			continue
		}
		kept = append(kept, q)
	}
	clear(p.queries[len(kept):])
	p.queries = kept
}

// points returns q's kept batches, oldest first, in a new slice. It needs
// p.mu.
func (q *pageQuery) points() []batchPoint {
	out := make([]batchPoint, 0, len(q.recent))
	out = append(out, q.recent[q.next:]...)
	return append(out, q.recent[:q.next]...)
}
