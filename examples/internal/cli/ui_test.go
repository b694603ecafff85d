package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// getPage fetches url and returns its body; it fails the test on an error
// or a status other than 200.
func getPage(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s %v\n%s", url, resp.Status, err, b)
	}
	return b
}

// TestStatusPageFlag: with -ui, the example serves the query's status
// page while it runs, with the batches it committed, and stops serving
// when it ends.
func TestStatusPageFlag(t *testing.T) {
	s := start(t, io.Discard, "-ui", "127.0.0.1:0", "-output", t.TempDir(), "-trigger", "1h")
	s.stderr.waitFor(t, "test: batch 0 committed")
	page := regexp.MustCompile(`test: status page at (http://127\.0\.0\.1:\d+/)\n`).FindStringSubmatch(s.stderr.String())
	batch := regexp.MustCompile(`test: batch 0 committed: (\d+) rows in`).FindStringSubmatch(s.stderr.String())
	if page == nil || batch == nil {
		t.Fatalf("stderr does not say where the status page is, or what batch 0 read:\n%s", s.stderr)
	}
	url, rowsIn := page[1], batch[1]

	if html := string(getPage(t, url)); !strings.Contains(html, "Streaming queries") {
		t.Errorf("the page is not the list of queries:\n%s", html)
	}
	var list struct {
		Queries []struct {
			RunID, Status string
			NumBatches    int64
		}
	}
	if err := json.Unmarshal(getPage(t, url+"api/queries"), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Queries) != 1 || list.Queries[0].Status != "active" || list.Queries[0].NumBatches != 1 {
		t.Fatalf("queries %+v, want the example's, active, with its one batch", list.Queries)
	}
	var query struct {
		Batches []struct {
			BatchID      int64
			NumInputRows int64
		}
	}
	if err := json.Unmarshal(getPage(t, url+"api/query?run="+list.Queries[0].RunID), &query); err != nil {
		t.Fatal(err)
	}
	if len(query.Batches) != 1 || query.Batches[0].BatchID != 0 || fmt.Sprint(query.Batches[0].NumInputRows) != rowsIn {
		t.Errorf("batches %+v, want batch 0 with the %s rows stderr reported", query.Batches, rowsIn)
	}

	s.signals <- syscall.SIGINT
	var interrupted *Interrupted
	if err := s.result(t); !errors.As(err, &interrupted) {
		t.Fatalf("got %v, want stopped by SIGINT", err)
	}
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("the status page is still served after the example ended: %s", resp.Status)
	}
}

// TestStatusPageFlagBadAddress: an address that cannot be listened on
// fails the run, naming the flag.
func TestStatusPageFlagBadAddress(t *testing.T) {
	s := start(t, io.Discard, "-ui", "127.0.0.1:no-such-port")
	if err := s.result(t); err == nil || !strings.HasPrefix(err.Error(), "-ui: ") {
		t.Errorf("got %v, want an error about -ui", err)
	}
}
