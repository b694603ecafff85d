package observe

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/streamgen/streamgen/runtime"
)

// StateHandler serves the state of running queries as JSON, read from a
// snapshot of each query's last committed batch (runtime.Query.LookupState)
// without stopping it:
//
//	GET /state/                                the queries, their operators and variables
//	GET /state/{operator}/{variable}?key=K     the entries of key K in a variable
//	GET /state/{operator}?key=K                the entries of key K in every variable
//	GET /state/{operator}/{variable}           every key's entries, up to limit
//
// The operator is named as the progress reports name it (the user
// function's name, a slash in it escaped as %2F) or by its index. K is the grouping key as JSON ("alice",
// 42, {"user":"alice","day":3}, a record's fields by their JSON names or,
// as the rows show them, their Go names; in a window {"window": {"start": ...,
// "end": ...}, "key": ...}, in a grouping set {"set": N, "key": ...}); a string key may be given bare
// (?key=alice). Further parameters: query=NAME (or id) when it watches
// more than one query, limit=N (default runtime.DefaultStateLimit). The
// answer is a runtime.StateAnswer: the rows with the batch id they reflect.
// An unknown query, operator or variable gets 404 with what there is; a key
// that does not decode, 400; a query that has stopped, 503.
//
// Like the status page, it serves whoever reaches it: it is an
// http.Handler, so a program wraps it with its own authentication (and
// serves it over TLS with the standard library). A StateHandler is a
// listener: pass it to Start with runtime.Listener, or use Server, which
// mounts one at /state/. Safe for concurrent use.
type StateHandler struct {
	mu      sync.Mutex
	queries []watched
}

// watched is a running query the handler serves.
type watched struct {
	id, name string
	q        *runtime.Query
}

// NewStateHandler returns a StateHandler that serves no query yet.
func NewStateHandler() *StateHandler { return &StateHandler{} }

// OnQueryStarted adds the query.
func (h *StateHandler) OnQueryStarted(e runtime.QueryStarted) {
	if e.Query == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queries = slices.DeleteFunc(h.queries, func(w watched) bool { return w.id == e.ID })
	h.queries = append(h.queries, watched{id: e.ID, name: e.Name, q: e.Query})
}

// OnQueryTerminated removes the query.
func (h *StateHandler) OnQueryTerminated(e runtime.QueryTerminated) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queries = slices.DeleteFunc(h.queries, func(w watched) bool { return w.id == e.ID && w.q.RunID() == e.RunID })
}

// Queries returns the names (ids, for those without one) of the queries
// it serves.
func (h *StateHandler) Queries() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, len(h.queries))
	for i, w := range h.queries {
		names[i] = w.label()
	}
	return names
}

func (w watched) label() string {
	if w.name != "" {
		return w.name
	}
	return w.id
}

// find returns the query name names (or the only one, for "").
func (h *StateHandler) find(name string) (*runtime.Query, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if name == "" {
		switch len(h.queries) {
		case 1:
			return h.queries[0].q, nil
		case 0:
			return nil, errors.New("no query is running here")
		}
		return nil, fmt.Errorf("%d queries run here: name one with query= (%s)", len(h.queries), strings.Join(h.labels(), ", "))
	}
	for _, w := range h.queries {
		if w.name == name || w.id == name {
			return w.q, nil
		}
	}
	return nil, fmt.Errorf("no query %q runs here (%s)", name, strings.Join(h.labels(), ", "))
}

func (h *StateHandler) labels() []string {
	var l []string
	for _, w := range h.queries {
		l = append(l, strconv.Quote(w.label()))
	}
	if len(l) == 0 {
		return []string{"none runs"}
	}
	return l
}

// StateListing describes the state a query has: StateHandler's answer at
// /state/.
type StateListing struct {
	Query string `json:"query"`
	ID    string `json:"id"`
	// BatchID is the last committed batch.
	BatchID   int64           `json:"batchId"`
	Operators []OperatorState `json:"operators"`
}

// OperatorState describes one stateful operator of a StateListing.
type OperatorState struct {
	Index     int      `json:"index"`
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`
	KeyType   string   `json:"keyType"`
	Variables []string `json:"variables"`
}

// ServeHTTP answers a read of state (see StateHandler).
func (h *StateHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		stateError(w, http.StatusMethodNotAllowed, errors.New("state is read with GET"))
		return
	}
	parts, status, err := StatePath(r)
	if err != nil {
		stateError(w, status, err)
		return
	}
	params := r.URL.Query()
	if parts == nil && params.Get("query") == "" {
		h.serveListing(w)
		return
	}
	q, err := h.find(params.Get("query"))
	if err != nil {
		stateError(w, http.StatusNotFound, err)
		return
	}
	if parts == nil {
		h.serveListingOf(w, q)
		return
	}
	req := runtime.StateRequest{Operator: parts[0]}
	if len(parts) == 2 {
		req.Variable = parts[1]
	}
	if params.Has("key") {
		req.Key = KeyParam(params.Get("key"))
	}
	if l := params.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n <= 0 {
			stateError(w, http.StatusBadRequest, fmt.Errorf("limit=%q is not a positive number", l))
			return
		}
		req.Limit = n
	}
	ans, err := q.LookupState(req)
	if err != nil {
		stateError(w, stateStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, ans)
}

// StatePath splits a read of state's path into its operator and variable
// (none, one or both), unescaped: the part after "/state/", split at
// its escaped slashes (an operator's name, a function's with its package
// path, holds slashes, escaped as %2F). A path of more parts, or one that
// does not unescape, is an error with the HTTP status to answer.
func StatePath(r *http.Request) (parts []string, status int, err error) {
	path := r.URL.EscapedPath()
	if i := strings.Index(path, "/state/"); i >= 0 {
		path = path[i+len("/state/"):]
	} else {
		path = strings.TrimPrefix(path, "/")
	}
	parts = strings.Split(strings.Trim(path, "/"), "/")
	if len(parts) == 1 && parts[0] == "" {
		return nil, 0, nil
	}
	if len(parts) > 2 {
		return nil, http.StatusNotFound, fmt.Errorf("%q is not a state path: /state/{operator}/{variable}, a slash in a name escaped as %%2F", r.URL.Path)
	}
	for i, p := range parts {
		if parts[i], err = url.PathUnescape(p); err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("%q is not a state path: %w", r.URL.Path, err)
		}
	}
	return parts, 0, nil
}

// KeyParam turns a key= parameter into the JSON of a StateRequest: JSON
// as given, and anything that is not JSON as a string (a bare string
// key).
func KeyParam(v string) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	b, _ := json.Marshal(v)
	return b
}

// stateStatus is the HTTP status of a failed read.
func stateStatus(err error) int {
	switch {
	case errors.Is(err, runtime.ErrUnknownState):
		return http.StatusNotFound
	case errors.Is(err, runtime.ErrBadStateKey):
		return http.StatusBadRequest
	case errors.Is(err, runtime.ErrStoreClosed):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

func (h *StateHandler) serveListing(w http.ResponseWriter) {
	h.mu.Lock()
	qs := slices.Clone(h.queries)
	h.mu.Unlock()
	out := []StateListing{}
	for _, wq := range qs {
		l, err := listing(wq.q)
		if errors.Is(err, runtime.ErrStoreClosed) {
			continue // it stopped meanwhile
		}
		if err != nil {
			stateError(w, stateStatus(err), err)
			return
		}
		out = append(out, l)
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *StateHandler) serveListingOf(w http.ResponseWriter, q *runtime.Query) {
	l, err := listing(q)
	if err != nil {
		stateError(w, stateStatus(err), err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

// listing describes the state of q.
func listing(q *runtime.Query) (StateListing, error) {
	l := StateListing{ID: q.ID(), Operators: []OperatorState{}}
	err := q.ReadState(func(r *runtime.CheckpointReader) error {
		m, _, err := r.Meta()
		if err != nil {
			return err
		}
		p, _, err := r.Progress()
		if err != nil {
			return err
		}
		l.BatchID = p.BatchID
		for i, om := range m.Operators {
			os := OperatorState{Index: i, Name: om.Name, Kind: om.Kind, KeyType: om.KeyType, Variables: []string{}}
			if om.Key != nil {
				os.KeyType = om.Key.Name
			}
			for name, v := range om.Variables {
				if !v.Index {
					os.Variables = append(os.Variables, name)
				}
			}
			slices.Sort(os.Variables)
			l.Operators = append(l.Operators, os)
		}
		return nil
	})
	l.Query = q.Name()
	return l, err
}

// stateError answers with err as {"error": ...}.
func stateError(w http.ResponseWriter, status int, err error) {
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

// WriteStateError answers a read of state that failed with err: 404 for
// what does not exist (runtime.ErrUnknownState), 400 for a key that does
// not decode, 503 (try again) for a query that stopped, else 500; the body
// is {"error": ...}.
func WriteStateError(w http.ResponseWriter, err error) { stateError(w, stateStatus(err), err) }

// WriteStateAnswer answers a read of state with v as JSON, not to be
// cached.
func WriteStateAnswer(w http.ResponseWriter, v any) { writeJSON(w, http.StatusOK, v) }

// WriteStateRefusal answers a read of state with status and err (400 for
// a bad request, 405 for another method, 503 to try again) as
// {"error": ...}.
func WriteStateRefusal(w http.ResponseWriter, status int, err error) { stateError(w, status, err) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode the answer"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
