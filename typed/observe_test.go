package typed_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// writeClickFiles writes one JSON-lines file per element of files, in
// order (names sort as given), and returns the directory.
func writeClickFiles(t *testing.T, files [][]string) string {
	t.Helper()
	dir := t.TempDir()
	for i, lines := range files {
		name := filepath.Join(dir, fmt.Sprintf("part-%03d.json", i))
		if err := os.WriteFile(name, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// clickLine is a click as a JSON line.
func clickLine(user string, at time.Time) string {
	return fmt.Sprintf(`{"user":%q,"time":%q,"page":"p"}`, user, at.UTC().Format(time.RFC3339Nano))
}

// windowedClicksFromFiles is a query over click files, one file per batch:
// a watermark 10s behind the event times, counts per user and minute,
// into a memory sink.
func windowedClicksFromFiles(dir string) (*typed.Writer[windowCount], *typed.MemorySink[windowCount]) {
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 1})
	s := typed.WithWatermark(typed.From[fixtures.Click, *fixtures.Click](src), func(c *fixtures.Click) time.Time { return c.Time }, 10*time.Second)
	ws := typed.GroupByWindow(s, func(c *fixtures.Click) time.Time { return c.Time }, typed.Tumbling(time.Minute), func(c *fixtures.Click) string { return c.User })
	sink := typed.NewMemorySink[windowCount]()
	return typed.WriteTo(typed.AggregateWindows(ws, typed.Count[fixtures.Click](), countRow), sink).OutputMode(typed.Update), sink
}

// batchesOfClicks are the files of windowedClicksFromFiles's tests:
// the second has a line that does not decode, the fourth a row behind the
// watermark the third batch ran with.
func batchesOfClicks() (files [][]string, rows, deadLetters, late int) {
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	files = [][]string{
		{clickLine("ann", base), clickLine("bob", base.Add(5*time.Second)), clickLine("ann", base.Add(20*time.Second))},
		{clickLine("cy", base.Add(70*time.Second)), "not json", clickLine("ann", base.Add(80*time.Second))},
		{clickLine("bob", base.Add(130*time.Second))},
		// Late for the watermark the batch before ran with (base+70s):
		// its minute has closed.
		{clickLine("bob", base.Add(1*time.Second))},
	}
	return files, 7, 1, 1
}

// TestProgressIdentityAndStore: every report names its sink, has no
// watermark before the first (rather than the zero time), and carries
// the state store's figures at the end of the batch.
func TestProgressIdentityAndStore(t *testing.T) {
	files, rows, dead, late := batchesOfClicks()
	w, _ := windowedClicksFromFiles(writeClickFiles(t, files))
	q, err := w.Start(t.Context(), runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	reports := q.RecentProgress()
	if len(reports) < len(files) {
		t.Fatalf("%d reports, want one per file (%d) and perhaps one without data that closes windows", len(reports), len(files))
	}
	var gotRows, gotDead, gotLate int64
	var maxEvent time.Time
	for i, p := range reports {
		gotRows += p.NumInputRows
		gotDead += p.NumDeadLetters
		gotLate += p.StateOperators[0].NumRowsDroppedByWatermark
		if p.Sink.Description != "memory" {
			t.Errorf("batch %d: sink description %q, want the memory sink's", p.BatchID, p.Sink.Description)
		}
		js, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		w, ok := p.WatermarkTime()
		switch {
		case i == 0 && (ok || strings.Contains(string(js), "0001-01-01") || strings.Contains(string(js), `"watermark"`)):
			t.Errorf("first batch: a watermark before the first: %s", js)
		case i > 0 && (!ok || !w.Equal(maxEvent.Add(-10*time.Second))):
			t.Errorf("batch %d: watermark %v (found %v), want the largest event time so far less 10s, %v", p.BatchID, w, ok, maxEvent.Add(-10*time.Second))
		}
		if m, err := time.Parse(time.RFC3339Nano, p.EventTime["max"]); err == nil && m.After(maxEvent) {
			maxEvent = m
		}
		st := p.StateStore
		if st.MemtableBytes <= 0 || st.MemtableCount <= 0 || st.DiskBytes <= 0 || st.DiskBytes < st.TableBytes+st.WALBytes {
			t.Errorf("batch %d: store figures not those of an open store: %+v", p.BatchID, st)
		}
		// The state cache holds at least the state rows the batch left
		// (each committed entry enters it).
		if st.StateCacheEntries < p.StateOperators[0].NumRowsTotal || st.StateCacheBytes <= 0 {
			t.Errorf("batch %d: state cache %d entries, %d bytes, for %d state rows", p.BatchID, st.StateCacheEntries, st.StateCacheBytes, p.StateOperators[0].NumRowsTotal)
		}
		if i > 0 {
			prev := reports[i-1].StateStore
			if st.Compactions < prev.Compactions || st.Flushes < prev.Flushes || st.StateCacheHits+st.StateCacheMisses < prev.StateCacheHits+prev.StateCacheMisses {
				t.Errorf("batch %d: a count since the store opened went down: %+v after %+v", p.BatchID, st, prev)
			}
		}
	}
	if gotRows != int64(rows+dead) || gotDead != int64(dead) || gotLate != int64(late) {
		t.Errorf("reports: %d rows, %d dead letters, %d late; want %d, %d, %d", gotRows, gotDead, gotLate, rows+dead, dead, late)
	}
}

// TestStoreFiguresWithoutStateCache: with the state cache turned off, its
// figures are 0 and Pebble's are still there.
func TestStoreFiguresWithoutStateCache(t *testing.T) {
	files, _, _, _ := batchesOfClicks()
	w, _ := windowedClicksFromFiles(writeClickFiles(t, files))
	q, err := w.Start(t.Context(), runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()), runtime.StateCacheSize(-1))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	for _, p := range q.RecentProgress() {
		st := p.StateStore
		if st.StateCacheBytes != 0 || st.StateCacheEntries != 0 || st.StateCacheHits != 0 || st.MemtableBytes <= 0 {
			t.Errorf("batch %d: %+v", p.BatchID, st)
		}
	}
}

// records is a slog.Handler that keeps what is logged.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *records) Enabled(context.Context, slog.Level) bool { return true }
func (h *records) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recs = append(h.recs, r.Clone())
	return nil
}
func (h *records) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *records) WithGroup(string) slog.Handler      { return h }

// TestLogProgress: LogProgress logs one line per committed batch whose
// attributes are the batch's report, summed over operators where it has
// several figures, and no watermark before the first.
func TestLogProgress(t *testing.T) {
	files, _, _, _ := batchesOfClicks()
	w, _ := windowedClicksFromFiles(writeClickFiles(t, files))
	h := &records{}
	q, err := w.Start(t.Context(), runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()),
		runtime.Name("clicks"), runtime.LogProgress(slog.New(h)))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	reports := q.RecentProgress()
	if len(h.recs) != len(reports) {
		t.Fatalf("%d log lines for %d batches", len(h.recs), len(reports))
	}
	for i, r := range h.recs {
		p := reports[i]
		got := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool { got[a.Key] = a.Value; return true })
		if r.Level != slog.LevelInfo || r.Message == "" {
			t.Errorf("line %d: level %v, message %q", i, r.Level, r.Message)
		}
		want := map[string]any{
			runtime.LogQuery:         "clicks",
			runtime.LogBatch:         p.BatchID,
			runtime.LogRowsIn:        p.NumInputRows,
			runtime.LogRowsOut:       p.Sink.NumOutputRows,
			runtime.LogRowsPerSecond: p.ProcessedRowsPerSecond,
			runtime.LogDuration:      time.Duration(p.DurationMs[runtime.DurationTriggerExecution]) * time.Millisecond,
			runtime.LogStateRows:     p.StateOperators[0].NumRowsTotal,
			runtime.LogLateRows:      p.StateOperators[0].NumRowsDroppedByWatermark,
			runtime.LogDeadLetters:   p.NumDeadLetters,
		}
		if wm, ok := p.WatermarkTime(); ok && !wm.Equal(runtime.EndOfTime) {
			want[runtime.LogWatermark] = wm
		} else if v, found := got[runtime.LogWatermark]; found {
			t.Errorf("line %d: watermark %v before the first", i, v)
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || !g.Equal(slog.AnyValue(v)) {
				t.Errorf("line %d: %s = %v (present %v), want %v", i, k, g, ok, v)
			}
		}
		if len(got) != len(want) {
			t.Errorf("line %d: attributes %v, want the keys of %v", i, got, want)
		}
	}
	// The figures are those of the input, not only the reports'.
	var dead, late int64
	for _, r := range h.recs {
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case runtime.LogDeadLetters:
				dead += a.Value.Int64()
			case runtime.LogLateRows:
				late += a.Value.Int64()
			}
			return true
		})
	}
	if _, _, wantDead, wantLate := batchesOfClicks(); dead != int64(wantDead) || late != int64(wantLate) {
		t.Errorf("logged %d dead letters and %d late rows, want %d and %d", dead, late, wantDead, wantLate)
	}
}

// TestStatusOfARunningBatch: while a batch over several files runs, Status
// says which batch, how many rows it has read (published every 1024 rows
// or at a file's end) and how many of its files are done. The decoder
// blocks at a chosen line, which holds the batch there.
func TestStatusOfARunningBatch(t *testing.T) {
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var files [][]string
	for i, n := range []int{3, 2500, 4} {
		var lines []string
		for j := range n {
			lines = append(lines, clickLine("u", base.Add(time.Duration(i*10000+j)*time.Millisecond)))
		}
		files = append(files, lines)
	}
	dir := writeClickFiles(t, files)
	const holdAt = "part-001.json:2000"
	reached, release := make(chan struct{}), make(chan struct{})
	decoded := 0 // records seen by decode, an independent count
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	s := typed.FromFunc(src, func(r runtime.Record) (fixtures.Click, error) {
		decoded++
		if r.Position == holdAt {
			close(reached)
			<-release
		}
		var c fixtures.Click
		err := c.UnmarshalJSON(r.Data)
		return c, err
	})
	sink := typed.NewMemorySink[fixtures.Click]()
	q, err := typed.WriteTo(s, sink).Start(t.Context(), runtime.Checkpoint(t.TempDir()), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	<-reached
	st := q.Status()
	read := int64(decoded) // the decoder is held: no race on decoded
	b := st.Batch
	if !st.IsTriggerActive || b.BatchID != 0 || b.Started.IsZero() || b.InputsPlanned != 3 || b.InputsDone != 1 ||
		b.NumInputRows > read || b.NumInputRows <= read-1024 {
		t.Errorf("status of the held batch, %d rows read: %+v", read, st)
	}
	close(release)
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	if st := q.Status(); st.Batch != (runtime.RunningBatch{}) {
		t.Errorf("status after the end shows a batch: %+v", st)
	}
	p, _ := q.LastProgress()
	if p.NumInputRows != 3+2500+4 || int64(decoded) != p.NumInputRows {
		t.Errorf("report: %d rows, decoded %d", p.NumInputRows, decoded)
	}
}

// heldSink holds its first write until release is closed.
type heldSink[T any] struct {
	writing, release chan struct{}
	once             sync.Once
}

func (s *heldSink[T]) Write(context.Context, int64, []T) error {
	s.once.Do(func() {
		close(s.writing)
		<-s.release
	})
	return nil
}

// TestStatusOfABatchWithoutInputCounts: a source that does not count its
// inputs (a memory stream) shows the running batch's rows, and no inputs.
func TestStatusOfABatchWithoutInputCounts(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
	m.Add(clicks(25, 9)...)
	sink := &heldSink[fixtures.Click]{writing: make(chan struct{}), release: make(chan struct{})}
	clock := runtime.NewManualClock(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
	q, err := typed.WriteTo(typed.FromMemory(m), typed.Sink[fixtures.Click](sink)).Start(t.Context(),
		newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()), runtime.WithManualClock(clock))...)
	if err != nil {
		t.Fatal(err)
	}
	<-sink.writing
	want := runtime.RunningBatch{BatchID: 0, Started: clock.Now(), NumInputRows: 25}
	if st := q.Status(); !st.IsTriggerActive || st.Batch != want {
		t.Errorf("status of the held batch: %+v, want batch %+v", st, want)
	}
	close(sink.release)
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
}

// TestSinkDescriptionOfASinkOfYourOwn: a sink without a Description is
// named in every report by its type.
func TestSinkDescriptionOfASinkOfYourOwn(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 10)
	m.Add(clicks(25, 9)...)
	q, err := typed.WriteTo(typed.FromMemory(m), typed.Sink[fixtures.Click](newSink[fixtures.Click]())).Start(t.Context(),
		newCheckpoint().opts(runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatal(err)
	}
	reports := q.RecentProgress()
	if len(reports) != 3 {
		t.Fatalf("%d reports, want 3", len(reports))
	}
	for _, p := range reports {
		if want := fmt.Sprintf("%T", newSink[fixtures.Click]()); p.Sink.Description != want {
			t.Errorf("batch %d: sink description %q, want %q", p.BatchID, p.Sink.Description, want)
		}
	}
}

// panickyListener panics at every event.
type panickyListener struct{}

func (panickyListener) OnQueryStarted(runtime.QueryStarted)       { panic("started") }
func (panickyListener) OnQueryProgress(runtime.QueryProgress)     { panic("progress") }
func (panickyListener) OnQueryTerminated(runtime.QueryTerminated) { panic("terminated") }

// countingListener counts the progress reports and the end it is told.
type countingListener struct {
	mu                  sync.Mutex
	progress, terminate int
}

func (l *countingListener) OnQueryProgress(runtime.QueryProgress) {
	l.mu.Lock()
	l.progress++
	l.mu.Unlock()
}

func (l *countingListener) OnQueryTerminated(runtime.QueryTerminated) {
	l.mu.Lock()
	l.terminate++
	l.mu.Unlock()
}

// TestListenerPanicsAreLogged: a listener that panics at every event
// stops neither the query nor the listeners after it, as Spark's
// listener bus logs a listener's exception and goes on.
func TestListenerPanicsAreLogged(t *testing.T) {
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
	m.Add(click("a", 1), click("b", 2), click("c", 3))
	sink := newSink[fixtures.Click]()
	after := &countingListener{}
	q, err := typed.WriteTo(typed.FromMemory(m), sink).Start(context.Background(),
		newCheckpoint().opts(runtime.Listener(panickyListener{}), runtime.Listener(after), runtime.WithTrigger(runtime.AvailableNow()))...)
	if err != nil {
		t.Fatalf("a listener's panic at the start: %v", err)
	}
	if err := q.AwaitTermination(); err != nil {
		t.Fatalf("a listener's panic failed the query: %v", err)
	}
	if n := len(sink.rows()); n != 3 {
		t.Fatalf("wrote %d rows, want 3", n)
	}
	after.mu.Lock()
	defer after.mu.Unlock()
	if after.progress != 3 || after.terminate != 1 {
		t.Fatalf("the listener after the panicking one was told %d reports and %d ends, want 3 and 1", after.progress, after.terminate)
	}
}
