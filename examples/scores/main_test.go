package main

import (
	"bytes"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/examples/internal/clitest"
)

// safetyNet bounds how long the gate holds a call; reaching it fails the
// call, and the run, rather than pacing the test.
const safetyNet = 30 * time.Second

// gate wraps the scoring service: it holds each call until size calls are
// held, then lets those go together (a cyclic barrier), and records the
// most calls in flight at once. A handler that made its calls one at a
// time, or a query that ran fewer handlers at once than the gate needs,
// would leave a call held until the safety net fails it.
type gate struct {
	size int

	mu                    sync.Mutex
	held                  int
	release               chan struct{}
	inFlight, maxInFlight int
}

func newGate(size int) *gate { return &gate{size: size, release: make(chan struct{})} }

func (g *gate) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		g.inFlight++
		g.maxInFlight = max(g.maxInFlight, g.inFlight)
		release := g.release
		if g.held++; g.held == g.size {
			close(g.release)
			g.release, g.held = make(chan struct{}), 0
		}
		g.mu.Unlock()
		defer func() {
			g.mu.Lock()
			g.inFlight--
			g.mu.Unlock()
		}()
		timeout := time.NewTimer(safetyNet)
		defer timeout.Stop()
		select {
		case <-release:
			next.ServeHTTP(w, r)
		case <-timeout.C:
			http.Error(w, "held without enough other calls in flight to open the gate", http.StatusGatewayTimeout)
		case <-r.Context().Done():
		}
	})
}

func (g *gate) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.maxInFlight
}

// plainBest is the independent answer: a plain loop over the sample's
// visits, scored with the service's function.
func plainBest() map[string]float64 {
	best := map[string]float64{}
	for _, file := range sample() {
		for _, v := range file {
			if s, ok := best[v.User]; !ok || score(&v) > s {
				best[v.User] = score(&v)
			}
		}
	}
	return best
}

// TestScoresMatchAPlainLoop runs the example with one and with eight
// concurrent handlers, ten files per batch, or one file per batch with a
// restart after 7 files. The last score written per user is their highest
// score; the output, batch by batch, is the same for both concurrencies.
//
// The gate checks the calls are concurrent without timing them: with one
// handler at a time it opens for a user's 4 calls (so they are all in
// flight at once, and never more), with eight it needs two users' calls.
// Every batch has an even number of users, each with 4 visits, so the
// gate always opens.
func TestScoresMatchAPlainLoop(t *testing.T) {
	want := plainBest()
	if len(want) != sampleUsers {
		t.Fatalf("the plain loop has %d users, want %d", len(want), sampleUsers)
	}
	for _, m := range []struct {
		name     string
		args     []string
		firstRun int // files in the input of a first run (0: none)
	}{
		{"ten files per batch", nil, 0},
		{"one file per batch, restarted", []string{"-max-files-per-trigger", "1"}, 7},
	} {
		var outputs [][]byte
		for _, c := range []struct {
			concurrency string
			gate        int
		}{{"1", sampleVisitsPerUser}, {"8", 2 * sampleVisitsPerUser}} {
			t.Run(m.name+"/concurrency="+c.concurrency, func(t *testing.T) {
				input, out, checkpoint := t.TempDir(), t.TempDir(), t.TempDir()
				args := append([]string{"-input", input, "-output", out, "-checkpoint", checkpoint,
					"-concurrency", c.concurrency, "-latency", "100us"}, m.args...)
				g := newGate(c.gate)
				if m.firstRun > 0 {
					if err := writeSampleFiles(input, 0, m.firstRun); err != nil {
						t.Fatal(err)
					}
					if err := run(args, io.Discard, g.wrap); err != nil {
						t.Fatal(err)
					}
				}
				if err := writeSampleFiles(input, m.firstRun, sampleFiles); err != nil {
					t.Fatal(err)
				}
				var stdout bytes.Buffer
				if err := run(args, &stdout, g.wrap); err != nil {
					t.Fatal(err)
				}

				got := map[string]float64{}
				for _, s := range clitest.ReadOutput[UserScore](t, out) {
					got[s.User] = s.Score
				}
				if !maps.Equal(got, want) {
					t.Errorf("last score written per user:\n got %v\nwant %v", got, want)
				}
				// One handler at a time has its user's calls in flight, no
				// more; eight have at least two users' calls.
				switch most := g.most(); {
				case c.concurrency == "1" && most != sampleVisitsPerUser:
					t.Errorf("at most %d calls in flight at once, want %d", most, sampleVisitsPerUser)
				case most < c.gate:
					t.Errorf("at most %d calls in flight at once, want at least %d", most, c.gate)
				}
				if !strings.Contains(stdout.String(), " calls to the scoring service in ") || !strings.Contains(stdout.String(), "(-concurrency "+c.concurrency+", -latency 100µs)") {
					t.Errorf("stdout: %q", &stdout)
				}
				outputs = append(outputs, readAll(t, out))
			})
		}
		if len(outputs) == 2 && !bytes.Equal(outputs[0], outputs[1]) {
			t.Errorf("%s: the output with eight concurrent handlers differs from the one with one", m.name)
		}
	}
}

// readAll returns the output files of dir, in name order, end to end.
func readAll(t *testing.T, dir string) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	slices.Sort(files)
	var all []byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, data...)
	}
	return all
}
