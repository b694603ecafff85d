package observe_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/runtime/observe"
)

// browser starts headless Chromium for the test, and skips the test when
// it cannot be started.
func startBrowser(t *testing.T) context.Context {
	t.Helper()
	// Its shared memory files (disable-dev-shm-usage) and other
	// temporary files go to a directory the test removes, not /tmp.
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]), chromedp.WindowSize(1280, 1000),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.Env("TMPDIR="+t.TempDir()))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium refuses to run as root in its sandbox
	}
	if path, err := exec.LookPath("chromium"); err == nil {
		opts = append(opts, chromedp.ExecPath(path))
	}
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	// The first action starts the browser.
	if err := chromedp.Do(ctx); err != nil {
		t.Skipf("Chromium cannot be started, so the status page is not tested in a browser (install the Debian package chromium): %v", err)
	}
	return ctx
}

// do runs steps with a deadline, a safety net for a page that never
// shows what a wait waits for.
func browserDo(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	browserRead(t, ctx, what, chromedp.Steps(steps...))
}

// read runs an action with a deadline, and returns its value.
func browserRead[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		page, _ := chromedp.Run(ctx, chromedp.OuterHTML("body"))
		t.Fatalf("%s: %v; the page:\n%s", what, err, page)
	}
	return v
}

// pageShows waits until the JavaScript expression is true.
func pageShows(expression string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expression)
}

// chartPoint is a point as a chart holds it in the DOM.
type chartPoint struct {
	Batch int64  `json:"batch"`
	Phase string `json:"phase"`
	Value string `json:"value"`
}

func (p chartPoint) String() string {
	if p.Phase != "" {
		return fmt.Sprintf("%d/%s=%s", p.Batch, p.Phase, p.Value)
	}
	return fmt.Sprintf("%d=%s", p.Batch, p.Value)
}

// readCharts reads every chart's points from the page's SVG.
const readCharts = `(() => {
	const out = {};
	for (const svg of document.querySelectorAll("svg[data-chart]")) {
		out[svg.dataset.chart] = [...svg.querySelectorAll("[data-batch]")].map((e) =>
			({batch: Number(e.dataset.batch), phase: e.dataset.phase || "", value: e.dataset.value}));
	}
	return out;
})()`

// chartsHold is true once the duration chart has a bar for each of n
// batches and the status says status.
func chartsHold(n int, status string) string {
	return fmt.Sprintf(`document.querySelectorAll("#chart-duration g.bar").length === %d && document.getElementById("status").textContent === %q`, n, status)
}

// checkCharts compares the charts' points with those computed from the
// query's progress reports: the same batches, in order, with the same
// values.
func checkCharts(t *testing.T, charts map[string][]chartPoint, progress []runtime.QueryProgress) {
	t.Helper()
	want := map[string][]string{}
	for _, p := range progress {
		e := chartValues(p)
		add := func(chart string, v float64) {
			want[chart] = append(want[chart], fmt.Sprintf("%d=%v", e.batch, v))
		}
		add("inputRate", e.inputRate)
		add("processRate", e.processRate)
		add("stateRows", float64(e.stateRows))
		add("outputRows", float64(e.outputRows))
		add("lateRows", float64(e.lateRows))
		add("deadLetters", float64(e.deadLetters))
		if e.lag != nil {
			add("lag", float64(*e.lag))
		}
		add("diskMiB", e.diskMiB)
		if e.delayMs != nil {
			add("watermarkDelay", float64(*e.delayMs))
		}
		for _, phase := range phaseNames {
			want["duration"] = append(want["duration"], fmt.Sprintf("%d/%s=%d", e.batch, phase, e.phases[phase]))
		}
	}
	for _, chart := range []string{"inputRate", "processRate", "duration", "stateRows", "outputRows", "lateRows", "deadLetters", "diskMiB", "lag", "watermarkDelay"} {
		var got []string
		for _, p := range charts[chart] {
			// The value as a number: the page writes 2.5 as "2.5" and 3 as
			// "3", as %v does.
			v, err := strconv.ParseFloat(p.Value, 64)
			if err != nil {
				t.Fatalf("chart %s: point %v: %v", chart, p, err)
			}
			p.Value = fmt.Sprint(v)
			got = append(got, p.String())
		}
		if !slices.Equal(got, want[chart]) {
			t.Errorf("chart %s holds\n%v\nwant, from the progress reports,\n%v", chart, got, want[chart])
		}
	}
}

// TestStatusPageInBrowser loads the page of a running query in headless
// Chromium: its charts hold the batches that ran, and follow the query to
// its end. Screenshots of the query's page and of the list are saved as
// test artifacts (go test -artifacts keeps them).
func TestStatusPageInBrowser(t *testing.T) {
	ctx := startBrowser(t)

	page := observe.NewStatusPage()
	page.AddPanel("An application", func() any { return map[string]any{"tasks": []int{0, 2}, "standbys": []int{1}} })
	const held = 4 // the batch the query stops after, until released
	g := newProgressGate(held)
	q := startClicks(t, "sessions", page, g)
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(g.release) }) })
	select {
	case <-g.reached:
	case <-q.Done():
		t.Fatalf("the query ended before batch %d: %v", held, q.Err())
	}
	srv := httptest.NewServer(page)
	defer srv.Close()

	// Every request the page makes, to check it loads nothing from
	// elsewhere.
	var mu sync.Mutex
	var requests []string
	err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*network.EventRequestWillBeSent); ok {
			mu.Lock()
			requests = append(requests, e.Request.URL)
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}

	progress := q.RecentProgress()
	if len(progress) != held+1 {
		t.Fatalf("%d batches reported at batch %d", len(progress), held)
	}
	run := progress[0].RunID
	browserDo(t, ctx, "the running query's page",
		chromedp.Navigate(srv.URL+"/query?run="+run),
		pageShows(chartsHold(held+1, "active")))
	checkCharts(t, browserRead(t, ctx, "the charts", chromedp.Evaluate[map[string][]chartPoint](readCharts)), progress)
	// The charts' x axis is dated: each label is the time a batch
	// started, as its progress report says, in UTC.
	starts := map[string]bool{}
	for _, p := range progress {
		starts[p.Timestamp.UTC().Format("15:04:05")] = true
	}
	labels := browserRead(t, ctx, "the x-axis labels", chromedp.Evaluate[[]string](`[...document.querySelectorAll("svg[data-chart='inputRate'] .axes text.tick")].filter((e) => /^\d\d:\d\d:\d\d$/.test(e.textContent)).map((e) => e.textContent)`))
	if len(labels) == 0 {
		t.Error("no time on the charts' x axis")
	}
	for _, l := range labels {
		if !starts[l] {
			t.Errorf("x-axis label %s is not a batch's start (%v)", l, starts)
		}
	}

	// The page follows the query to its end.
	release.Do(func() { close(g.release) })
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	progress = q.RecentProgress()
	if len(progress) < minBatches {
		t.Fatalf("%d batches ran, want at least %d", len(progress), minBatches)
	}
	browserDo(t, ctx, "the ended query's page", pageShows(chartsHold(len(progress), "finished")))
	checkCharts(t, browserRead(t, ctx, "the charts", chromedp.Evaluate[map[string][]chartPoint](readCharts)), progress)
	last := browserRead(t, ctx, "the last progress", chromedp.Text("#last-progress"))
	var lastProgress runtime.QueryProgress
	if err := json.Unmarshal([]byte(last), &lastProgress); err != nil || lastProgress.BatchID != progress[len(progress)-1].BatchID {
		t.Errorf("last progress shows batch %d (%v), want %d:\n%s", lastProgress.BatchID, err, progress[len(progress)-1].BatchID, last)
	}
	if title := browserRead(t, ctx, "the title", chromedp.Text("#title")); title != "sessions" {
		t.Errorf("title %q, want the query's name", title)
	}
	queryShot := browserRead(t, ctx, "a screenshot of the query's page", chromedp.FullScreenshot(100))

	// The list shows the query finished, and links its page.
	row := fmt.Sprintf(`#completed tr[data-run=%q]`, run)
	browserDo(t, ctx, "the list",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(row+`[data-status="finished"] a`))
	listShot := browserRead(t, ctx, "a screenshot of the list", chromedp.FullScreenshot(100))
	// A program's panel shows its data, as JSON, under its title.
	if title := browserRead(t, ctx, "the panel's title", chromedp.Text("#panels h2")); title != "An application" {
		t.Errorf("the panel's title is %q", title)
	}
	var panel map[string][]int
	if text := browserRead(t, ctx, "the panel", chromedp.Text("#panels pre")); json.Unmarshal([]byte(text), &panel) != nil ||
		fmt.Sprint(panel) != "map[standbys:[1] tasks:[0 2]]" {
		t.Errorf("the panel shows %q", text)
	}
	link := browserRead(t, ctx, "the link to the query's page", chromedp.Attributes(row+" a"))["href"]
	if want := "query?run=" + run; link != want {
		t.Errorf("the list links the query as %q, want %q", link, want)
	}

	dir := t.ArtifactDir()
	for name, shot := range map[string][]byte{"statuspage-query.png": queryShot, "statuspage-list.png": listShot} {
		if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("screenshots in %s (go test -artifacts keeps them)", dir)

	mu.Lock()
	defer mu.Unlock()
	if len(requests) == 0 {
		t.Fatal("no request seen")
	}
	for _, u := range requests {
		if !strings.HasPrefix(u, srv.URL+"/") && !strings.HasPrefix(u, "data:") {
			t.Errorf("the page loaded %s, from outside the status page", u)
		}
	}
}

// TestStatusPageInBrowserFailed: a failed query shows as failed, with
// its error as text (markup in it is not markup), on its page and in the
// list.
func TestStatusPageInBrowserFailed(t *testing.T) {
	ctx := startBrowser(t)
	page := observe.NewStatusPage()
	page.OnQueryStarted(runtime.QueryStarted{ID: "q", RunID: "r", Name: "broken", Time: clickT0})
	for b := range int64(3) {
		page.OnQueryProgress(syntheticProgress("q", "r", b, clickT0))
	}
	const failure = `streamgen: batch 3: <b id="injected">sink</b> "out": disk full`
	page.OnQueryTerminated(runtime.QueryTerminated{ID: "q", RunID: "r", Err: errors.New(failure)})
	srv := httptest.NewServer(page)
	defer srv.Close()

	browserDo(t, ctx, "the failed query's page",
		chromedp.Navigate(srv.URL+"/query?run=r"),
		pageShows(chartsHold(3, "failed")))
	if got := browserRead(t, ctx, "the error", chromedp.TextContent("#error")); got != "Failed: "+failure {
		t.Errorf("the page says %q, want the error %q", got, failure)
	}
	browserDo(t, ctx, "the list",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(`#completed tr[data-run="r"][data-status="failed"]`))
	if got := browserRead(t, ctx, "the error in the list", chromedp.TextContent(`#completed tr[data-run="r"] td.error`)); got != failure {
		t.Errorf("the list says %q, want the error %q", got, failure)
	}
	if n := browserRead(t, ctx, "markup from the error", chromedp.Evaluate[int](`document.querySelectorAll("#injected").length`)); n != 0 {
		t.Errorf("the error's markup made %d elements", n)
	}
}
