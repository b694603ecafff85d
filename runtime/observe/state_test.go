package observe_test

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
	"github.com/streamgen/streamgen/typed"
)

// countPages counts each (user, page)'s clicks.
func countPages(k fixtures.PageKey, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
	c, _ := st.Get()
	for range rows {
		c.Count++
	}
	st.Update(c)
	return fixtures.UserCount{User: k.User, Count: c.Count}, nil
}

// countUser counts each user's clicks.
func countUser(user string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
	return countPages(fixtures.PageKey{User: user}, rows, st)
}

// stateClicks are the state tests' input.
func stateClicks() []fixtures.Click {
	var out []fixtures.Click
	for i, u := range strings.Fields("ann bob ann cat ann bob") {
		out = append(out, fixtures.Click{User: u, Page: []string{"home", "cart"}[i%2], Time: clickT0.Add(time.Duration(i) * time.Second)})
	}
	return out
}

// startCounting starts a query that counts clicks per user, or per user
// and page, watched by srv, and waits for its first batch.
func startCounting(t testing.TB, srv *observe.Server, name string, byPage bool) *runtime.Query {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(stateClicks()...)
	var out typed.Stream[fixtures.UserCount]
	if byPage {
		out = typed.MapGroupsWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) fixtures.PageKey {
			return fixtures.PageKey{User: c.User, Page: c.Page}
		}), typed.NoTimeout, countPages)
	} else {
		out = typed.MapGroupsWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), typed.NoTimeout, countUser)
	}
	committed := make(chan struct{})
	var once sync.Once
	q, err := typed.WriteTo(out, typed.NewMemorySink[fixtures.UserCount]()).OutputMode(typed.Update).Start(context.Background(),
		runtime.Name(name), srv.Watch(), runtime.Listener(progressFunc(func(runtime.QueryProgress) { once.Do(func() { close(committed) }) })))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Stop() })
	select {
	case <-committed:
	case <-q.Done():
		t.Fatalf("the query ended before its first batch: %v", q.Err())
	}
	return q
}

type progressFunc func(runtime.QueryProgress)

func (f progressFunc) OnQueryProgress(p runtime.QueryProgress) { f(p) }

// TestStateEndpoint: /state/ lists the queries' state; a key's state is
// read by operator (name or index), variable and key (JSON, or a bare
// string), with the batch it reflects; what is unknown or does not decode
// gets a 4xx that says why, and a stopped query 404 (it is no longer
// served).
func TestStateEndpoint(t *testing.T) {
	srv, err := observe.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	users := startCounting(t, srv, "users", false)
	startCounting(t, srv, "pages", true)
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(strings.TrimSuffix(srv.URL(), "/") + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: content type %q", path, ct)
		}
		if !json.Valid(b) {
			t.Errorf("%s: not JSON: %s", path, b)
		}
		return resp.StatusCode, string(b)
	}
	// The count of a user, as a plain loop has it.
	want := map[string]int64{}
	for _, c := range stateClicks() {
		want[c.User]++
	}
	for _, path := range []string{"/state/0/state?query=users&key=ann", "/state/0/state?query=users&key=%22ann%22", "/state/0?query=users&key=ann"} {
		code, body := get(path)
		var ans runtime.StateAnswer
		if err := json.Unmarshal([]byte(body), &ans); err != nil || code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var c fixtures.Counter
		if len(ans.Rows) != 1 || json.Unmarshal(ans.Rows[0].Value, &c) != nil || c.Count != want["ann"] || ans.BatchID != 0 || ans.Query != "users" {
			t.Fatalf("%s: %s; want ann's count %d at batch 0", path, body, want["ann"])
		}
	}
	// A record key, by its fields, and the operator by its name.
	code, body := get("/state/0/state?query=pages&key=" + url.QueryEscape(`{"User":"ann","Page":"home"}`))
	if code != 200 || !strings.Contains(body, `"Count":3`) {
		t.Fatalf("a record key: %d %s", code, body)
	}
	code, body = get("/state/")
	var listing []observe.StateListing
	if err := json.Unmarshal([]byte(body), &listing); err != nil || code != 200 || len(listing) != 2 {
		t.Fatalf("/state/: %d %s", code, body)
	}
	op := listing[0].Operators[0]
	if op.Kind != "mapGroupsWithState" || len(op.Variables) != 1 || op.Variables[0] != "state" {
		t.Fatalf("/state/ describes %+v", listing)
	}
	if code, body := get("/state/" + url.PathEscape(op.Name) + "/state?query=" + listing[0].Query + "&key=bob"); code != 200 || !strings.Contains(body, `"Count":2`) {
		t.Fatalf("by the operator's name %q: %d %s", op.Name, code, body)
	}
	for _, tc := range []struct {
		path string
		code int
		says string
	}{
		{"/state/0/state?key=ann", 404, `2 queries run here: name one with query=`},
		{"/state/0/state?query=nosuch&key=ann", 404, `no query \"nosuch\"`},
		{"/state/9/state?query=users&key=ann", 404, "no operator 9"},
		{"/state/0/nosuch?query=users&key=ann", 404, `has no state variable \"nosuch\"`},
		{"/state/0/state?query=pages&key=ann", 400, "is not a key of operator"},
		{"/state/0/state?query=users&key=ann&limit=x", 400, "limit"},
		{"/state/0/state/extra?query=users", 404, "not a state path"},
	} {
		code, body := get(tc.path)
		if code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: %d %s; want %d saying %s", tc.path, code, body, tc.code, tc.says)
		}
	}
	resp, err := http.Post(strings.TrimSuffix(srv.URL(), "/")+"/state/0/state?query=users", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST: %s", resp.Status)
	}
	if err := users.Stop(); err != nil {
		t.Fatal(err)
	}
	if code, body := get("/state/0/state?query=users&key=ann"); code != 404 {
		t.Errorf("a stopped query: %d %s", code, body)
	}
}

// FuzzStateKey: whatever the key parameter holds, a read of a string-keyed
// and of a record-keyed query answers 200 or 400 with JSON, never a panic
// or a 5xx.
func FuzzStateKey(f *testing.F) {
	for _, seed := range []string{"ann", `"ann"`, `{"User":"ann","Page":"home"}`, `{"User":1}`, "", "null", "[]", `{"User":"\ud800"}`, "\xff", "1e999", `{"User":"ann","Page":"home","X":{"Y":[1,2]}}`} {
		f.Add(seed)
	}
	srv := observe.NewServer()
	startCounting(f, srv, "users", false)
	startCounting(f, srv, "pages", true)
	h := srv.Handler()
	f.Fuzz(func(t *testing.T, key string) {
		for _, query := range []string{"users", "pages"} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest("GET", "/state/0/state?query="+query+"&key="+url.QueryEscape(key), nil))
			if rec.Code != 200 && rec.Code != 400 || !json.Valid(rec.Body.Bytes()) {
				t.Fatalf("%s, key %q: %d %s", query, key, rec.Code, rec.Body)
			}
		}
	})
}
