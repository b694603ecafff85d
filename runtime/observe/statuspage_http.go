package observe

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"slices"
	"time"

	"github.com/streamgen/streamgen/runtime"
)

// statusUI holds the pages, their script and their style: nothing is loaded
// from elsewhere, which the Content-Security-Policy of every response
// enforces.
//
//go:embed ui
var statusUI embed.FS

const contentSecurityPolicy = "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// newStatusMux routes a StatusPage's requests.
func newStatusMux(p *StatusPage) *http.ServeMux {
	files, err := fs.Sub(statusUI, "ui")
	if err != nil {
		panic(err) // ui is embedded: it is there
	}
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "no-cache")
			http.ServeFileFS(w, r, files, name)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", page("index.html"))
	mux.Handle("GET /query", page("query.html"))
	// One file name: /static/ itself, which would list the files, is
	// not found.
	mux.Handle("GET /static/{file}", http.StripPrefix("/static/", http.FileServerFS(files)))
	mux.HandleFunc("GET /api/queries", p.serveQueries)
	mux.HandleFunc("GET /api/query", p.serveQuery)
	return mux
}

// ServeHTTP serves the pages and their JSON; see StatusPage for the
// paths. It is safe to call from any number of goroutines.
func (p *StatusPage) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	p.mux.ServeHTTP(w, r)
}

// querySummary is a query in the list (GET api/queries).
type querySummary struct {
	ID      string    `json:"id"`
	RunID   string    `json:"runId"`
	Name    string    `json:"name"`
	Status  string    `json:"status"` // active, finished or failed
	Error   string    `json:"error,omitempty"`
	Started time.Time `json:"started"`
	// NumBatches counts the batches the run committed, not only those
	// kept; Latest is the last of them, nil before the first.
	NumBatches int64       `json:"numBatches"`
	Latest     *batchPoint `json:"latest"`
}

// queryDetail is a query's page (GET api/query).
type queryDetail struct {
	querySummary
	// Phases names the entries of each batch's durationMs.
	Phases       []string               `json:"phases"`
	Batches      []batchPoint           `json:"batches"`
	LastProgress *runtime.QueryProgress `json:"lastProgress"`
}

// summary needs p.mu.
func (q *pageQuery) summary() querySummary {
	s := querySummary{ID: q.id, RunID: q.runID, Name: q.name, Status: q.status, Error: q.err,
		Started: q.started, NumBatches: q.batches}
	if n := len(q.recent); n > 0 {
		last := q.recent[(q.next+n-1)%n]
		s.Latest = &last
	}
	return s
}

func (p *StatusPage) serveQueries(w http.ResponseWriter, _ *http.Request) {
	p.mu.Lock()
	list := make([]querySummary, 0, len(p.queries))
	for i := len(p.queries) - 1; i >= 0; i-- { // the newest first
		list = append(list, p.queries[i].summary())
	}
	panels := slices.Clone(p.panels)
	p.mu.Unlock()
	shown := make([]panelData, len(panels))
	for i, pn := range panels {
		shown[i] = panelData{Title: pn.title, Data: pn.data()}
	}
	writeStatusJSON(w, http.StatusOK, struct {
		Queries []querySummary `json:"queries"`
		Panels  []panelData    `json:"panels"`
	}{list, shown})
}

// panelData is a panel as the list's JSON gives it.
type panelData struct {
	Title string `json:"title"`
	Data  any    `json:"data"`
}

func (p *StatusPage) serveQuery(w http.ResponseWriter, r *http.Request) {
	run, id := r.URL.Query().Get("run"), r.URL.Query().Get("id")
	if run == "" && id == "" {
		writeStatusJSON(w, http.StatusBadRequest, statusAPIError{"give the query's run id as ?run=RUNID, or its id as ?id=ID"})
		return
	}
	p.mu.Lock()
	q := p.byRun[run]
	if run == "" {
		for _, c := range p.queries { // the latest run of id
			if c.id == id {
				q = c
			}
		}
	}
	if q == nil {
		p.mu.Unlock()
		writeStatusJSON(w, http.StatusNotFound, statusAPIError{"no query with that run id or id on this page (an ended query is kept only among the most recent)"})
		return
	}
	d := queryDetail{querySummary: q.summary(), Phases: chartPhases[:], Batches: q.points()}
	if q.batches > 0 {
		// The report's maps are shared with the query's own copy, which
		// nothing writes after the report is made.
		last := q.last
		d.LastProgress = &last
	}
	p.mu.Unlock()
	writeStatusJSON(w, http.StatusOK, d)
}

type statusAPIError struct {
	Error string `json:"error"`
}

func writeStatusJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "streamgen: status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b)
}
