package typed_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// sinkEvents are a few readings in the shape of the data set.
var sinkEvents = []sensor.Event{
	{ArrivalTime: 1424686735090, CreationTime: 1424686733090638193, Device: "nexus4_1", Index: 35, Model: "nexus4", User: "g", Activity: "stand", X: -0.0095, Y: 0.0046, Z: -0.0049},
	{ArrivalTime: 1424688581345, CreationTime: 1424688579404000000, Device: "nexus4_2", Index: 36, Model: "nexus4", User: "a", X: 1.5, Y: -2, Z: 9.80665},
	{ArrivalTime: 1424688581350, CreationTime: 1424688579410000000, Device: "s3mini_1", Index: 7, Model: "s3mini", User: "i", Activity: "bike", X: 0.1, Y: 0.2, Z: 0.3},
}

// plainEvent has sensor.Event's fields and none of its methods, so
// encoding/json marshals it by reflection: an encoding independent of the
// generated one.
type plainEvent sensor.Event

func TestMemorySink(t *testing.T) {
	ctx := context.Background()
	m := typed.NewMemorySink[sensor.Event]()
	var sink typed.Sink[sensor.Event] = m
	var wg sync.WaitGroup
	wg.Go(func() { // a reader while the query writes
		for range 100 {
			_ = m.Rows()
			_ = m.Batches()
		}
	})
	in := slices.Clone(sinkEvents)
	for _, w := range []struct {
		id   int64
		rows []sensor.Event
	}{{2, in[2:]}, {0, in[:1]}, {1, nil}, {0, in[1:2]}} {
		if err := sink.Write(ctx, w.id, w.rows); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	// Batch 0 was rewritten with the second event; batch 1 is empty.
	if got, want := m.Rows(), []sensor.Event{sinkEvents[1], sinkEvents[2]}; !slices.Equal(got, want) {
		t.Errorf("Rows = %+v, want %+v", got, want)
	}
	batches := m.Batches()
	if len(batches) != 3 || len(batches[1]) != 0 || batches[1] == nil || !slices.Equal(batches[0], sinkEvents[1:2]) || !slices.Equal(batches[2], sinkEvents[2:]) {
		t.Errorf("Batches = %+v", batches)
	}
	// The sink copied the rows, and Batches copies again.
	in[2].Device = "changed"
	batches[2][0].Device = "changed"
	if m.Rows()[1].Device != sinkEvents[2].Device {
		t.Error("the sink shares rows with its writer or with Batches' result")
	}
}

// consoleTable is the test's own rendering of Spark's show output from JSON
// objects, for ASCII data in full (no truncation): column names in order of
// first appearance (the record's order, for records without omitted
// members), widths at least 3, cells padded on the left.
func consoleTable(t *testing.T, objects [][]byte) string {
	t.Helper()
	var columns []string
	var rows []map[string]string
	for _, obj := range objects {
		dec := json.NewDecoder(bytes.NewReader(obj))
		dec.UseNumber()
		if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
			t.Fatalf("%s: %v %v", obj, tok, err)
		}
		row := map[string]string{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				t.Fatal(err)
			}
			key := tok.(string)
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(columns, key) {
				columns = append(columns, key)
			}
			row[key] = fmt.Sprint(v)
		}
		rows = append(rows, row)
	}
	width := map[string]int{}
	for _, c := range columns {
		width[c] = max(3, len(c))
		for _, r := range rows {
			width[c] = max(width[c], len(r[c]))
		}
	}
	var b strings.Builder
	rule := "+"
	for _, c := range columns {
		rule += strings.Repeat("-", width[c]) + "+"
	}
	b.WriteString(rule + "\n|")
	for _, c := range columns {
		fmt.Fprintf(&b, "%*s|", width[c], c)
	}
	b.WriteString("\n" + rule + "\n")
	for _, r := range rows {
		b.WriteString("|")
		for _, c := range columns {
			fmt.Fprintf(&b, "%*s|", width[c], r[c])
		}
		b.WriteString("\n")
	}
	b.WriteString(rule + "\n")
	return b.String()
}

func consoleHeader(batch int) string {
	dashes := strings.Repeat("-", 43) + "\n"
	return fmt.Sprintf("%sBatch: %d\n%s", dashes, batch, dashes)
}

func TestConsoleSink(t *testing.T) {
	ctx := context.Background()
	var out bytes.Buffer
	sink := typed.ConsoleSink[sensor.Event](&out, typed.ConsoleTruncate(0), typed.ConsoleTruncate(30))
	if err := sink.Write(ctx, 4, sinkEvents); err != nil {
		t.Fatal(err)
	}
	var objects [][]byte
	for _, e := range sinkEvents {
		b, err := json.Marshal(plainEvent(e))
		if err != nil {
			t.Fatal(err)
		}
		objects = append(objects, b)
	}
	want := consoleHeader(4) + consoleTable(t, objects) + "\n"
	if got := out.String(); got != want {
		t.Errorf("console output\n%s\nwant\n%s", got, want)
	}

	// More rows than shown.
	out.Reset()
	sink = typed.ConsoleSink[sensor.Event](&out, typed.ConsoleNumRows(2), typed.ConsoleTruncate(30))
	if err := sink.Write(ctx, 5, sinkEvents); err != nil {
		t.Fatal(err)
	}
	want = consoleHeader(5) + consoleTable(t, objects[:2]) + "only showing top 2 rows\n\n"
	if got := out.String(); got != want {
		t.Errorf("console output\n%s\nwant\n%s", got, want)
	}
}

// TestConsoleSinkShape checks the details by hand: every member's column
// in the record's order (A and B shown in the batch whose first row omits
// A and whose other omits B), empty cells, escaped control characters,
// truncation to 20 characters with right alignment by default, full cells
// aligned left with ConsoleTruncate(0), one row shown.
func TestConsoleSinkShape(t *testing.T) {
	ctx := context.Background()
	b := "b\tc"
	rows := []fixtures.Optional{
		{B: &b},
		{A: "a \"quoted\"\nline that is long", B: nil},
		{},
	}
	var out bytes.Buffer
	if err := typed.ConsoleSink[fixtures.Optional](&out).Write(ctx, 0, rows); err != nil {
		t.Fatal(err)
	}
	want := consoleHeader(0) + `+--------------------+----+
|                   A|   B|
+--------------------+----+
|                    |b\tc|
|a "quoted"\nline ...|    |
|                    |    |
+--------------------+----+

`
	if got := out.String(); got != want {
		t.Errorf("console output\n%s\nwant\n%s", got, want)
	}

	out.Reset()
	if err := typed.ConsoleSink[fixtures.Optional](&out, typed.ConsoleTruncate(0), typed.ConsoleNumRows(1)).Write(ctx, 12, rows[1:]); err != nil {
		t.Fatal(err)
	}
	cell := `a "quoted"\nline that is long`
	rule := "+" + strings.Repeat("-", len(cell)) + "+---+\n" // 3: Spark's narrowest column
	want = consoleHeader(12) + rule + "|A" + strings.Repeat(" ", len(cell)-1) + "|B  |\n" + rule +
		"|" + cell + "|   |\n" + rule + "only showing top 1 row\n\n"
	if got := out.String(); got != want {
		t.Errorf("console output\n%s\nwant\n%s", got, want)
	}

	// An empty batch shows every column, those its zero value omits too;
	// a record without fields an empty table, as Spark shows an empty
	// schema.
	out.Reset()
	if err := typed.ConsoleSink[fixtures.Optional](&out).Write(ctx, 3, nil); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), consoleHeader(3)+"+---+---+\n|  A|  B|\n+---+---+\n+---+---+\n\n"; got != want {
		t.Errorf("empty batch of omitted members\n%s\nwant\n%s", got, want)
	}
	out.Reset()
	if err := typed.ConsoleSink[sensor.Event](&out).Write(ctx, 1, nil); err != nil {
		t.Fatal(err)
	}
	want = consoleHeader(1) + `+------------+-------------+------+-----+-----+----+---+---+---+---+
|Arrival_Time|Creation_Time|Device|Index|Model|User| gt|  x|  y|  z|
+------------+-------------+------+-----+-----+----+---+---+---+---+
+------------+-------------+------+-----+-----+----+---+---+---+---+

`
	if got := out.String(); got != want {
		t.Errorf("empty batch\n%s\nwant\n%s", got, want)
	}
	out.Reset()
	if err := typed.ConsoleSink[fixtures.Empty](&out).Write(ctx, 2, make([]fixtures.Empty, 1)); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), consoleHeader(2)+"++\n||\n++\n||\n++\n\n"; got != want {
		t.Errorf("record without fields\n%s\nwant\n%s", got, want)
	}
}

func TestConsoleSinkErrors(t *testing.T) {
	ctx := context.Background()
	for _, opt := range []typed.ConsoleOption{typed.ConsoleNumRows(0), typed.ConsoleTruncate(-1)} {
		err := typed.ConsoleSink[sensor.Event](io.Discard, opt).Write(ctx, 0, sinkEvents)
		if err == nil || !strings.HasPrefix(err.Error(), "streamgen: console sink options") {
			t.Errorf("bad option: %v", err)
		}
	}
	broken := errors.New("broken pipe")
	err := typed.ConsoleSink[sensor.Event](failingWriter{broken}).Write(ctx, 0, sinkEvents)
	if !errors.Is(err, broken) || !strings.HasPrefix(err.Error(), "streamgen: ") {
		t.Errorf("failing writer: %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }

func ExampleConsoleSink() {
	sink := typed.ConsoleSink[sensor.Event](os.Stdout)
	_ = sink.Write(context.Background(), 0, []sensor.Event{
		{ArrivalTime: 1424686735090, CreationTime: 1424686733090638193, Device: "nexus4_1", Index: 35, Model: "nexus4", User: "g", Activity: "stand", X: -0.0095, Y: 0.0046, Z: -0.0049},
		{ArrivalTime: 1424688581345, CreationTime: 1424688579404000000, Device: "nexus4_2", Index: 36, Model: "nexus4", User: "a", X: 1.5, Y: -2, Z: 9.80665},
	})
	// Output:
	// -------------------------------------------
	// Batch: 0
	// -------------------------------------------
	// +-------------+-------------------+--------+-----+------+----+-----+-------+------+-------+
	// | Arrival_Time|      Creation_Time|  Device|Index| Model|User|   gt|      x|     y|      z|
	// +-------------+-------------------+--------+-----+------+----+-----+-------+------+-------+
	// |1424686735090|1424686733090638193|nexus4_1|   35|nexus4|   g|stand|-0.0095|0.0046|-0.0049|
	// |1424688581345|1424688579404000000|nexus4_2|   36|nexus4|   a|     |    1.5|    -2|9.80665|
	// +-------------+-------------------+--------+-----+------+----+-----+-------+------+-------+
}

func TestFilesSink(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "out") // created on first write
	sink := typed.FilesSink[sensor.Event](dir)
	if err := sink.Write(ctx, 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("an empty batch created %s (%v)", dir, err)
	}
	for _, w := range []struct {
		id   int64
		rows []sensor.Event
	}{{11, sinkEvents[2:]}, {3, sinkEvents[:1]}, {7, sinkEvents[:2]}, {3, sinkEvents[1:3]}, {7, nil}} {
		if err := sink.Write(ctx, w.id, w.rows); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// Batch 3 was rewritten, batch 7 rewritten empty; nothing temporary
	// is left, and batch 3 sorts before batch 11.
	if want := []string{"part-0000000003.jsonl", "part-0000000011.jsonl"}; !slices.Equal(names, want) {
		t.Fatalf("files %q, want %q", names, want)
	}
	// The bytes are the rows as encoding/json writes them, one a line.
	for name, rows := range map[string][]sensor.Event{names[0]: sinkEvents[1:3], names[1]: sinkEvents[2:]} {
		var want []byte
		for _, e := range rows {
			b, err := json.Marshal(plainEvent(e))
			if err != nil {
				t.Fatal(err)
			}
			want = append(append(want, b...), '\n')
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s:\n%s\nwant\n%s", name, got, want)
		}
	}

	// A files source reads the output back in batch order, skipping the
	// temporary file of a write in progress.
	if err := os.WriteFile(filepath.Join(dir, ".part-0000000012.jsonl-99"), []byte("{"), 0o666); err != nil {
		t.Fatal(err)
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	end, err := src.Available(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []sensor.Event
	err = src.Read(ctx, nil, end, func(r runtime.Record) error {
		var e sensor.Event
		err := e.UnmarshalJSON(r.Data)
		got = append(got, e)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := slices.Concat(sinkEvents[1:3], sinkEvents[2:]); !slices.Equal(got, want) {
		t.Errorf("read back %+v, want %+v", got, want)
	}

	if err := sink.Write(ctx, -1, sinkEvents); err == nil || !strings.HasPrefix(err.Error(), "streamgen: ") {
		t.Errorf("negative batch id: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if err := sink.Write(cancelled, 20, sinkEvents); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled write: %v", err)
	}
}

// recordingWriter logs the calls a Foreach sink makes, and fails or skips
// on demand.
type recordingWriter struct {
	calls     []string
	openOK    bool
	openErr   error
	failAt    string // Device whose Process fails
	processEr error
}

func (w *recordingWriter) Open(partition int, epoch int64) (bool, error) {
	w.calls = append(w.calls, fmt.Sprintf("open %d %d", partition, epoch))
	return w.openOK, w.openErr
}

func (w *recordingWriter) Process(e sensor.Event) error {
	w.calls = append(w.calls, "process "+e.Device)
	if e.Device == w.failAt {
		return w.processEr
	}
	return nil
}

func (w *recordingWriter) Close(err error) {
	w.calls = append(w.calls, fmt.Sprintf("close %v", err))
}

func TestForeachSink(t *testing.T) {
	ctx := context.Background()
	bad := errors.New("bad row")
	for _, tc := range []struct {
		name    string
		writer  recordingWriter
		wantErr error
		want    []string
	}{{
		name:   "all rows",
		writer: recordingWriter{openOK: true},
		want:   []string{"open 0 9", "process nexus4_1", "process nexus4_2", "process s3mini_1", "close <nil>"},
	}, {
		name:   "skipped epoch",
		writer: recordingWriter{openOK: false},
		want:   []string{"open 0 9", "close <nil>"},
	}, {
		name:    "process fails",
		writer:  recordingWriter{openOK: true, failAt: "nexus4_2", processEr: bad},
		wantErr: bad,
		want:    []string{"open 0 9", "process nexus4_1", "process nexus4_2", "close bad row"},
	}, {
		name:    "open fails",
		writer:  recordingWriter{openOK: true, openErr: bad},
		wantErr: bad,
		want:    []string{"open 0 9"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			w := tc.writer
			err := typed.ForeachSink[sensor.Event](&w).Write(ctx, 9, sinkEvents)
			if !errors.Is(err, tc.wantErr) || (err != nil && !strings.HasPrefix(err.Error(), "streamgen: foreach sink: batch 9")) {
				t.Errorf("Write = %v, want %v", err, tc.wantErr)
			}
			if !slices.Equal(w.calls, tc.want) {
				t.Errorf("calls %q, want %q", w.calls, tc.want)
			}
		})
	}

	// Cancelled during a long batch: Close gets the context's error.
	w := recordingWriter{openOK: true}
	cancelled, cancel := context.WithCancel(ctx)
	rows := make([]sensor.Event, 5000)
	rows[10].Device = "cancel"
	canceller := &cancellingWriter{recordingWriter: &w, cancel: cancel}
	err := typed.ForeachSink[sensor.Event](canceller).Write(cancelled, 1, rows)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Write = %v", err)
	}
	if last := w.calls[len(w.calls)-1]; last != "close context canceled" || len(w.calls) > 1+1024+1 {
		t.Errorf("cancelled: %d calls, last %q", len(w.calls), last)
	}
}

// cancellingWriter cancels the batch's context when it sees a row of
// Device "cancel".
type cancellingWriter struct {
	*recordingWriter
	cancel context.CancelFunc
}

func (w *cancellingWriter) Process(e sensor.Event) error {
	if e.Device == "cancel" {
		w.cancel()
	}
	return w.recordingWriter.Process(e)
}

// TestConsoleSinkTimes: instants read as Spark shows timestamps and are
// never cut, where a string as long is; a zone other than UTC is shown.
func TestConsoleSinkTimes(t *testing.T) {
	at := time.Date(2015, 2, 23, 10, 18, 53, 176178965, time.UTC)
	rows := []fixtures.Click{
		{User: "g", Time: at, Page: "/a/page/with/a/rather/long/path"},
		{User: "h", Time: at.Truncate(time.Second).In(time.FixedZone("", 3600)), Page: "/"},
	}
	var out bytes.Buffer
	if err := typed.ConsoleSink[fixtures.Click](&out).Write(context.Background(), 0, rows); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"|2015-02-23 10:18:53.176178965|",
		"|   2015-02-23 11:18:53 +01:00|",
		"|/a/page/with/a/ra...|",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %q:\n%s", want, &out)
		}
	}
}
