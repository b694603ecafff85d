package runtime_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/streamgen/streamgen/generated/sensor"
	"github.com/streamgen/streamgen/internal/testenv"
	"github.com/streamgen/streamgen/runtime"
)

// readAll collects the records Read gives, copying Data, which is valid
// only during the callback.
func readAll(t *testing.T, src runtime.Source, start, end json.RawMessage) []runtime.Record {
	t.Helper()
	var got []runtime.Record
	err := src.Read(context.Background(), start, end, func(r runtime.Record) error {
		r.Data = bytes.Clone(r.Data)
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Read(%s, %s): %v", start, end, err)
	}
	return got
}

// expectLines is the test's own reading of JSON-lines files: the records
// it expects from the named files, in the given order.
func expectLines(t *testing.T, dir string, names ...string) []runtime.Record {
	t.Helper()
	var want []runtime.Record
	for _, name := range names {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(data), "\n") {
			line = strings.TrimSuffix(line, "\r")
			if strings.TrimSpace(line) == "" {
				continue
			}
			want = append(want, runtime.Record{
				Partition: "files",
				Data:      []byte(line),
				Position:  fmt.Sprintf("%s:%d", name, i+1),
			})
		}
	}
	return want
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o666); err != nil {
		t.Fatal(err)
	}
}

func available(t *testing.T, src runtime.Source) json.RawMessage {
	t.Helper()
	off, err := src.Available(context.Background())
	if err != nil {
		t.Fatalf("Available: %v", err)
	}
	return off
}

func next(t *testing.T, src runtime.Source, committed, upTo json.RawMessage) json.RawMessage {
	t.Helper()
	off, err := src.Next(context.Background(), committed, upTo, runtime.Limited)
	if err != nil {
		t.Fatalf("Next(%s, %s): %v", committed, upTo, err)
	}
	return off
}

// names returns the files of an offset: the batch's, or those listed.
func names(t *testing.T, off json.RawMessage) []string {
	t.Helper()
	var o struct{ Files []string }
	if err := json.Unmarshal(off, &o); err != nil {
		t.Fatalf("offset %s: %v", off, err)
	}
	return o.Files
}

// logOf returns the processed-file log of an offset, sorted.
func logOf(t *testing.T, off json.RawMessage) []string {
	t.Helper()
	var o struct{ Seen map[string]int64 }
	if err := json.Unmarshal(off, &o); err != nil {
		t.Fatalf("offset %s: %v", off, err)
	}
	return slices.Sorted(maps.Keys(o.Seen))
}

func TestFilesWaitForPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "later")
	src := runtime.FilesSource(dir, runtime.FilesOptions{WaitForPath: true})
	// The name is that of the resolved root even before it exists.
	if got, want := src.Name(), "files:"+filepath.Join(realPath(t, filepath.Dir(dir)), "later"); got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	if err := src.(runtime.StartChecker).CheckStart(); err != nil {
		t.Errorf("CheckStart with WaitForPath: %v", err)
	}
	upTo := available(t, src)
	if got := names(t, upTo); len(got) != 0 {
		t.Errorf("Available = %s, want no files", upTo)
	}
	if got := next(t, src, nil, upTo); got != nil {
		t.Errorf("Next(nil, []) = %s, want nil (committed)", got)
	}
	// The directory appears later, and its files with it.
	writeFile(t, dir, "a.json", "{}\n")
	if got := names(t, next(t, src, nil, available(t, src))); !slices.Equal(got, []string{"a.json"}) {
		t.Errorf("after the directory appears, Next = %q", got)
	}
}

// TestFilesIncremental adds files between batches, some sorting before
// files already read, with MaxFilesPerTrigger splitting what is
// available, oldest first by modification time, then by name, as Spark's
// file source takes them.
func TestFilesIncremental(t *testing.T) {
	dir := t.TempDir()
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 2, Name: "events"})
	if src.Name() != "events" {
		t.Errorf("Name = %q", src.Name())
	}
	t0 := time.Now().Add(-24 * time.Hour)
	at := func(name string, t time.Time) {
		if err := os.Chtimes(filepath.Join(dir, name), t, t); err != nil {
			panic(err)
		}
	}
	writeFile(t, dir, "b.json", `{"n":1}`+"\n"+`{"n":2}`+"\n")
	writeFile(t, dir, "d.jsonl", `{"n":3}`+"\n")
	writeFile(t, dir, "c.json", `{"n":4}`)
	for _, name := range []string{"b.json", "d.jsonl", "c.json"} {
		at(name, t0) // written at once: by name
	}
	// None of these is input: hidden, in-progress, other extensions, a
	// directory.
	writeFile(t, dir, ".e.json", `{"n":"hidden"}`)
	writeFile(t, dir, "_e.json", `{"n":"in progress"}`)
	writeFile(t, dir, "e.txt", `{"n":"text"}`)
	writeFile(t, dir, "e.json.tmp", `{"n":"tmp"}`)
	writeFile(t, filepath.Join(dir, "sub.json"), "f.json", `{"n":"nested"}`)

	upTo := available(t, src)
	if got, want := names(t, upTo), []string{"b.json", "c.json", "d.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("Available = %q, want %q", got, want)
	}

	// Batch 0: the first two files, of one time, in lexical order.
	var committed json.RawMessage
	end := next(t, src, committed, upTo)
	if got, want := names(t, end), []string{"b.json", "c.json"}; !slices.Equal(got, want) {
		t.Fatalf("batch 0 = %q, want %q", got, want)
	}
	if got, want := readAll(t, src, committed, end), expectLines(t, dir, "b.json", "c.json"); !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("batch 0 read\n%v\nwant\n%v", got, want)
	}
	committed = end

	// a.json sorts before everything read; it is still new, and newer
	// than d, which is read first.
	writeFile(t, dir, "a.jsonl", `{"n":5}`+"\n")
	at("a.jsonl", t0.Add(time.Hour))
	upTo = available(t, src)
	end = next(t, src, committed, upTo)
	if got, want := names(t, end), []string{"a.jsonl", "d.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("batch 1 = %q, want %q", got, want)
	}
	if got, want := logOf(t, end), []string{"a.jsonl", "b.json", "c.json", "d.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("log after batch 1 = %q, want %q", got, want)
	}
	if got, want := readAll(t, src, committed, end), expectLines(t, dir, "d.jsonl", "a.jsonl"); !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("batch 1 read\n%v\nwant\n%v", got, want)
	}
	committed = end

	// Three files whose names sort against their times: the two oldest
	// first, the oldest of them first.
	for i, name := range []string{"y.json", "x.json", "w.json"} {
		writeFile(t, dir, name, fmt.Sprintf(`{"n":%d}`, 6+i)+"\n")
		at(name, t0.Add(time.Duration(3+i)*time.Hour))
	}
	at("x.json", t0.Add(2*time.Hour))
	upTo = available(t, src)
	end = next(t, src, committed, upTo)
	if got, want := names(t, end), []string{"x.json", "y.json"}; !slices.Equal(got, want) {
		t.Fatalf("batch 2 = %q, want %q", got, want)
	}
	if got, want := readAll(t, src, committed, end), expectLines(t, dir, "x.json", "y.json"); !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("batch 2 read\n%v\nwant\n%v", got, want)
	}
	committed = end
	end = next(t, src, committed, upTo)
	if got, want := names(t, end), []string{"w.json"}; !slices.Equal(got, want) {
		t.Fatalf("batch 3 = %q, want %q", got, want)
	}
	committed = end

	// Nothing new: committed comes back byte for byte.
	if got := next(t, src, committed, available(t, src)); !bytes.Equal(got, committed) {
		t.Errorf("Next with nothing new = %s, want %s", got, committed)
	}
	// upTo limits Next even when the directory has more.
	writeFile(t, dir, "f.json", "{}\n")
	if got := next(t, src, committed, upTo); !bytes.Equal(got, committed) {
		t.Errorf("Next beyond upTo = %s, want %s", got, committed)
	}
}

// TestFilesRestart reads a batch again, as a restarted query does: the same
// offsets give the same records, from a new source too.
func TestFilesRestart(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "1.json", "{\"a\":1}\n{\"a\":2}\n")
	writeFile(t, dir, "2.json", "{\"a\":3}\n")
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 1})
	start := next(t, src, nil, available(t, src))
	end := next(t, src, start, available(t, src))
	first := readAll(t, src, start, end)
	writeFile(t, dir, "0.json", "{\"a\":0}\n") // arrives meanwhile
	again := readAll(t, runtime.FilesSource(dir, runtime.FilesOptions{}), start, end)
	if !slices.EqualFunc(first, again, equalRecord) {
		t.Errorf("second read\n%v\nwant\n%v", again, first)
	}
	if want := expectLines(t, dir, "2.json"); !slices.EqualFunc(first, want, equalRecord) {
		t.Errorf("read\n%v\nwant\n%v", first, want)
	}
}

func TestFilesPositionsAndBlankLines(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "x.json", "\n{\"a\":1}\r\n  \n\t\r\n{\"a\":2}\n\n{\"a\":3}")
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	got := readAll(t, src, nil, available(t, src))
	want := []runtime.Record{
		{Partition: "files", Data: []byte(`{"a":1}`), Position: "x.json:2"},
		{Partition: "files", Data: []byte(`{"a":2}`), Position: "x.json:5"},
		{Partition: "files", Data: []byte(`{"a":3}`), Position: "x.json:7"},
	}
	if !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("read\n%v\nwant\n%v", got, want)
	}
	if again := expectLines(t, dir, "x.json"); !slices.EqualFunc(got, again, equalRecord) {
		t.Errorf("read\n%v\nthe test's reading\n%v", got, again)
	}
}

func TestFilesLongLines(t *testing.T) {
	dir := t.TempDir()
	// Longer than bufio's and bufio.Scanner's buffers many times over.
	huge := `{"s":"` + strings.Repeat("x", 5<<20) + `"}`
	writeFile(t, dir, "a.json", "{}\n"+huge+"\n{}\n")
	writeFile(t, dir, "b.json", huge) // no final newline
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	got := readAll(t, src, nil, available(t, src))
	if want := expectLines(t, dir, "a.json", "b.json"); !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("long lines read wrongly: got %d records, want %d", len(got), len(want))
	}

	// Past MaxLineBytes, a line is bad input: its first KiB and an error
	// that gives its length, in place, and the file goes on.
	small := runtime.FilesSource(dir, runtime.FilesOptions{MaxLineBytes: 1 << 20})
	got = readAll(t, small, nil, available(t, small))
	tooLong := fmt.Sprintf("line too long: %d bytes, more than MaxLineBytes %d", len(huge), 1<<20)
	want := []runtime.Record{
		{Partition: "files", Data: []byte("{}"), Position: "a.json:1"},
		{Partition: "files", Data: []byte(huge[:1024]), Position: "a.json:2", Err: errors.New(tooLong)},
		{Partition: "files", Data: []byte("{}"), Position: "a.json:3"},
		{Partition: "files", Data: []byte(huge[:1024]), Position: "b.json:1", Err: errors.New(tooLong)},
	}
	if !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("read with lines past MaxLineBytes\n%v\nwant\n%v", got, want)
	}
	// With FailOnBadFiles, Read fails and says where.
	strict := runtime.FilesSource(dir, runtime.FilesOptions{MaxLineBytes: 1 << 20, FailOnBadFiles: true})
	err := strict.Read(context.Background(), nil, available(t, strict), func(runtime.Record) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "a.json:2") || !strings.Contains(err.Error(), tooLong) {
		t.Errorf("Read with FailOnBadFiles and a line past MaxLineBytes: %v", err)
	}
	// Exactly at the limit is fine, "\r\n" not counted; one byte more is
	// too long, and of a line shorter than a KiB the prefix is still
	// shorter than the line.
	writeFile(t, dir, "c.json", strings.Repeat(" ", 99)+"1\r\n"+strings.Repeat(" ", 100)+"1\r\n2")
	exact := runtime.FilesSource(dir, runtime.FilesOptions{MaxLineBytes: 100})
	got = readAll(t, exact, json.RawMessage(`["a.json","b.json"]`), available(t, exact))
	want = []runtime.Record{
		{Partition: "files", Data: []byte(strings.Repeat(" ", 99) + "1"), Position: "c.json:1"},
		{Partition: "files", Data: []byte(strings.Repeat(" ", 100)), Position: "c.json:2",
			Err: errors.New("line too long: 101 bytes, more than MaxLineBytes 100")},
		{Partition: "files", Data: []byte("2"), Position: "c.json:3"},
	}
	if !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("lines at and past MaxLineBytes\n%q\nwant\n%q", got, want)
	}
}

// TestFilesSensorEvents round-trips generated records through a file.
func TestFilesSensorEvents(t *testing.T) {
	dir := t.TempDir()
	events := []sensor.Event{
		{ArrivalTime: 1424686735090, CreationTime: 1424686733090638193, Device: "nexus4_1", Index: 35, Model: "nexus4", User: "g", Activity: "stand", X: -0.0095, Y: 0.0046, Z: -0.0049},
		{ArrivalTime: 1424688581345, CreationTime: 1424688579404000000, Device: "nexus4_2", Index: 36, Model: "nexus4", User: "a", X: 1.5, Y: -2, Z: 9.80665},
	}
	var file []byte
	for i := range events {
		var err error
		if file, err = events[i].AppendJSON(file); err != nil {
			t.Fatal(err)
		}
		file = append(file, '\n')
	}
	writeFile(t, dir, "part-0.jsonl", string(file))
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	var got []sensor.Event
	err := src.Read(context.Background(), nil, available(t, src), func(r runtime.Record) error {
		var e sensor.Event
		if err := e.UnmarshalJSON(r.Data); err != nil {
			return fmt.Errorf("%s: %w", r.Position, err)
		}
		got = append(got, e)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, events) {
		t.Errorf("read %+v, want %+v", got, events)
	}
}

func TestFilesErrors(t *testing.T) {
	dir := t.TempDir()
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	ctx := context.Background()
	if _, err := src.Next(ctx, json.RawMessage(`{`), json.RawMessage(`[]`), runtime.Limited); err == nil || !strings.Contains(err.Error(), "committed offset") {
		t.Errorf("Next with a bad offset: %v", err)
	}
	// A file in the offset that has gone is bad input, not a silent skip:
	// a record with the error, or with FailOnBadFiles Read's error.
	got := readAll(t, src, nil, json.RawMessage(`["gone.json"]`))
	if len(got) != 1 || got[0].Position != "gone.json" || got[0].Data != nil || !errors.Is(got[0].Err, fs.ErrNotExist) {
		t.Errorf("Read of a missing file: %v", got)
	}
	strict := runtime.FilesSource(dir, runtime.FilesOptions{FailOnBadFiles: true})
	err := strict.Read(ctx, nil, json.RawMessage(`["gone.json"]`), func(runtime.Record) error { return nil })
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.HasPrefix(err.Error(), "gone.json: ") {
		t.Errorf("Read with FailOnBadFiles of a missing file: %v", err)
	}
	bad := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: -1})
	if _, err := bad.Available(ctx); err == nil || !strings.Contains(err.Error(), "MaxFilesPerTrigger") {
		t.Errorf("negative MaxFilesPerTrigger: %v", err)
	}
	// fn's error stops Read and comes back as is.
	writeFile(t, dir, "a.json", "1\n2\n")
	stop := fmt.Errorf("stop")
	calls := 0
	err = src.Read(ctx, nil, available(t, src), func(runtime.Record) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("Read with a failing fn: %v after %d calls", err, calls)
	}
}

// equalRecord compares records, their errors by message.
func equalRecord(a, b runtime.Record) bool {
	if (a.Err == nil) != (b.Err == nil) || a.Err != nil && a.Err.Error() != b.Err.Error() {
		return false
	}
	return a.Partition == b.Partition && a.Position == b.Position && bytes.Equal(a.Data, b.Data)
}

// realPath is path with its links resolved.
func realPath(t *testing.T, path string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		t.Fatal(err)
	}
	return real
}

// root is the resolved root of a Files source, which the query reads
// through this interface.
func root(t *testing.T, src runtime.Source) string {
	t.Helper()
	r, ok := src.(interface{ Root() string })
	if !ok {
		t.Fatalf("%T has no Root method", src)
	}
	return r.Root()
}

// TestFilesNameResolvesDir makes one directory, and one that does not exist
// yet, in many spellings: each names one source, whose processed-file log
// is then kept once.
func TestFilesNameResolvesDir(t *testing.T) {
	tmp := realPath(t, t.TempDir())
	in := filepath.Join(tmp, "data", "in")
	if err := os.MkdirAll(in, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(tmp, "data"), filepath.Join(tmp, "link")); err != nil {
		t.Fatal(err)
	}
	// "up" leads back to tmp only if ".." is taken after the link: up/..
	// is tmp/data/in/.., which is tmp/data, not tmp.
	if err := os.Symlink(in, filepath.Join(tmp, "up")); err != nil {
		t.Fatal(err)
	}
	t.Chdir(filepath.Join(tmp, "data"))
	spellings := []string{
		in,
		in + "/",
		"in",
		"./in",
		"in/",
		"../data/./in",
		filepath.Join(tmp, "link", "in"),
		"../link/in",
		"../up/../in",
	}
	for _, dir := range spellings {
		src := runtime.FilesSource(dir, runtime.FilesOptions{})
		if got, want := src.Name(), "files:"+in; got != want {
			t.Errorf("Files(%q).Name() = %q, want %q", dir, got, want)
		}
		if got := root(t, src); got != in {
			t.Errorf("Files(%q).Root() = %q, want %q", dir, got, in)
		}
		// What it reads is the root.
		if got := names(t, available(t, src)); len(got) != 0 {
			t.Errorf("Files(%q): Available = %q, want none", dir, got)
		}
	}

	// Not there yet: the existing part is resolved, the rest cleaned.
	later := filepath.Join(in, "later", "x")
	for _, dir := range []string{later, "in/later/x", "./in/later/../later/x/", filepath.Join(tmp, "link", "in", "later", "x"), "../link/in/later//x"} {
		src := runtime.FilesSource(dir, runtime.FilesOptions{})
		if got, want := src.Name(), "files:"+later; got != want {
			t.Errorf("Files(%q).Name() = %q, want %q", dir, got, want)
		}
		if got := root(t, src); got != later {
			t.Errorf("Files(%q).Root() = %q, want %q", dir, got, later)
		}
	}
	// A name given stays as given; the root is resolved all the same.
	named := runtime.FilesSource("../link/in", runtime.FilesOptions{Name: "events"})
	if named.Name() != "events" || root(t, named) != in {
		t.Errorf("named source: Name %q, Root %q", named.Name(), root(t, named))
	}
	writeFile(t, in, "a.json", "{}\n")
	if got := names(t, available(t, named)); !slices.Equal(got, []string{"a.json"}) {
		t.Errorf("through a link: Available = %q", got)
	}
}

// badEntries makes in dir, besides regular files, entries that are not
// regular files once links are followed, and returns their names.
func badEntries(t *testing.T, dir string) []string {
	t.Helper()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o666); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		"dir.json":      "sub",
		"dirreal.json":  "", // a directory itself
		"dangling.json": "missing.json",
		"loop.json":     "loop.json",
		"gone.json":     filepath.Join(dir, "sub", "removed", "x.json"), // into a directory that is not there
	}
	for name, target := range links {
		var err error
		if target == "" {
			err = os.Mkdir(filepath.Join(dir, name), 0o777)
		} else {
			err = os.Symlink(target, filepath.Join(dir, name))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return []string{"dangling.json", "dir.json", "dirreal.json", "fifo.json", "gone.json", "loop.json"}
}

// TestFilesOnlyRegularFiles lists a directory with a named pipe, a
// directory, and links to nowhere, to themselves and to a directory among
// its files: a broken link is listed, and Read makes it one record with
// Err naming it and why (a dead letter), once, since it is then in the
// processed-file log; a pipe or a directory is not a file to read at all:
// it is skipped, and a warning names it once.
func TestFilesOnlyRegularFiles(t *testing.T) {
	log := testenv.CaptureLog(t)
	dir := t.TempDir()
	bad := badEntries(t, dir)
	writeFile(t, dir, "a.json", "{\"a\":1}\n")
	writeFile(t, filepath.Join(dir, "sub"), "real.json", "{\"a\":2}\n")
	if err := os.Symlink(filepath.Join("sub", "real.json"), filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	brokenLinks := []string{"dangling.json", "dir.json", "gone.json", "loop.json"}
	skipped := []string{"dirreal.json", "fifo.json"}
	want := []string{"a.json", "dangling.json", "dir.json", "gone.json", "link.json", "loop.json"}
	for range 3 {
		if got := names(t, available(t, src)); !slices.Equal(got, want) {
			t.Fatalf("Available = %q, want %q", got, want)
		}
	}
	if n := src.(runtime.Skipper).Skipped(); n != int64(len(skipped)) {
		t.Errorf("Skipped() = %d, want %d (for the progress report)", n, len(skipped))
	}
	for _, name := range bad {
		n := strings.Count(log.String(), "file="+name+" ")
		if wantN := btoi(slices.Contains(skipped, name)); n != wantN {
			t.Errorf("%s logged %d times, want %d; log:\n%s", name, n, wantN, log)
		}
	}
	got := readAll(t, src, nil, available(t, src))
	var data []runtime.Record
	var dead []string
	for _, r := range got {
		if r.Err != nil {
			dead = append(dead, r.Position)
			continue
		}
		data = append(data, r)
	}
	if !slices.EqualFunc(data, []runtime.Record{
		{Partition: "files", Data: []byte(`{"a":1}`), Position: "a.json:1"},
		{Partition: "files", Data: []byte(`{"a":2}`), Position: "link.json:1"},
	}, equalRecord) {
		t.Errorf("read %v", data)
	}
	if !slices.Equal(dead, brokenLinks) {
		t.Errorf("records with Err at %q, want one for each broken link %q", dead, brokenLinks)
	}

	// A mended pipe is forgotten: should it come back, it is logged
	// again.
	log.Reset()
	if err := os.Remove(filepath.Join(dir, "fifo.json")); err != nil {
		t.Fatal(err)
	}
	available(t, src)
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.json"), 0o666); err != nil {
		t.Fatal(err)
	}
	available(t, src)
	if n := strings.Count(log.String(), "file="); n != 1 || !strings.Contains(log.String(), "file=fifo.json ") {
		t.Errorf("after removing and making fifo.json again, log:\n%s", log)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestFilesBadFiles reads offsets that name files which went bad after
// they were listed, as a restarted query may: each is one Err record in
// its place, the same on every read, and the query's other files are
// read; with FailOnBadFiles the first is Read's error.
func TestFilesBadFiles(t *testing.T) {
	dir := t.TempDir()
	bad := badEntries(t, dir)
	writeFile(t, dir, "a.json", "{\"a\":1}\n")
	writeFile(t, dir, "z.json", "{\"z\":1}\n")
	offset := append([]string{"a.json", "z.json"}, bad...)
	// /proc/self/mem is a regular file that no one, root included, can
	// read from its start.
	if _, err := os.Stat("/proc/self/mem"); err == nil {
		if err := os.Symlink("/proc/self/mem", filepath.Join(dir, "mem.json")); err != nil {
			t.Fatal(err)
		}
		offset = append(offset, "mem.json")
	}
	// A file without read permission, unless root, who can read it.
	if os.Getuid() != 0 {
		writeFile(t, dir, "secret.json", "{}\n")
		if err := os.Chmod(filepath.Join(dir, "secret.json"), 0); err != nil {
			t.Fatal(err)
		}
		offset = append(offset, "secret.json")
	}
	slices.Sort(offset)
	end, err := json.Marshal(offset)
	if err != nil {
		t.Fatal(err)
	}

	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	got := readWithin(t, src, end)
	// What each bad file's error must say, besides its name and position.
	why := map[string]func(error) bool{
		"dangling.json": func(err error) bool { return errors.Is(err, fs.ErrNotExist) },
		"gone.json":     func(err error) bool { return errors.Is(err, fs.ErrNotExist) },
		"loop.json":     func(err error) bool { return errors.Is(err, syscall.ELOOP) },
		"dir.json":      func(err error) bool { return strings.Contains(err.Error(), "is a directory") },
		"dirreal.json":  func(err error) bool { return strings.Contains(err.Error(), "is a directory") },
		"fifo.json":     func(err error) bool { return strings.Contains(err.Error(), "is a named pipe") },
		"mem.json":      func(err error) bool { return errors.Is(err, syscall.EIO) && strings.Contains(err.Error(), "line 1") },
		"secret.json":   func(err error) bool { return errors.Is(err, fs.ErrPermission) },
	}
	if len(got) != len(offset) {
		t.Fatalf("read %d records, want one per file of %q:\n%v", len(got), offset, got)
	}
	for i, r := range got {
		name := offset[i]
		switch {
		case name == "a.json" || name == "z.json":
			if r.Err != nil || r.Position != name+":1" {
				t.Errorf("record %d = %v, want the line of %s", i, r, name)
			}
		case r.Position != name || r.Partition != "files" || r.Data != nil || r.Err == nil || !why[name](r.Err):
			t.Errorf("record %d = %+v, want the error of %s", i, r, name)
		}
	}
	if again := readWithin(t, runtime.FilesSource(dir, runtime.FilesOptions{}), end); !slices.EqualFunc(got, again, equalRecord) {
		t.Errorf("second read\n%v\nwant\n%v", again, got)
	}

	strict := runtime.FilesSource(dir, runtime.FilesOptions{FailOnBadFiles: true})
	err = strict.Read(context.Background(), nil, end, func(runtime.Record) error { return nil })
	if first := offset[1]; err == nil || !strings.HasPrefix(err.Error(), first+": ") || !why[first](err) {
		t.Errorf("Read with FailOnBadFiles: %v, want the error of %s", err, first)
	}
}

// readWithin is readAll from nil to end, failing the test should Read not
// return promptly: a named pipe must not block it.
func readWithin(t *testing.T, src runtime.Source, end json.RawMessage) []runtime.Record {
	t.Helper()
	done := make(chan []runtime.Record, 1)
	go func() {
		var got []runtime.Record
		err := src.Read(context.Background(), nil, end, func(r runtime.Record) error {
			r.Data = bytes.Clone(r.Data)
			got = append(got, r)
			return nil
		})
		if err != nil {
			t.Errorf("Read(nil, %s): %v", end, err)
		}
		done <- got
	}()
	select {
	case got := <-done:
		return got
	case <-time.After(time.Minute):
		t.Fatal("Read blocks")
		return nil
	}
}

// TestFilesLongLineMemory reads a line far longer than MaxLineBytes: Read
// takes memory for MaxLineBytes and its buffer, not for the line.
func TestFilesLongLineMemory(t *testing.T) {
	dir := t.TempDir()
	const lineBytes = 32 << 20
	f, err := os.Create(filepath.Join(dir, "a.json"))
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for range lineBytes / len(chunk) {
		if _, err := f.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.WriteString("\r\n{}\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxLineBytes: 64 << 10})
	end := available(t, src)
	// The least of three reads: the count is the process's, and another
	// goroutine (a test's before, winding down) may allocate meanwhile.
	var got []runtime.Record
	allocated := uint64(math.MaxUint64)
	for range 3 {
		got = got[:0]
		var before, after goruntime.MemStats
		goruntime.ReadMemStats(&before)
		err = src.Read(context.Background(), nil, end, func(r runtime.Record) error {
			r.Data = bytes.Clone(r.Data)
			got = append(got, r)
			return nil
		})
		goruntime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		allocated = min(allocated, after.TotalAlloc-before.TotalAlloc)
	}
	if allocated > 4<<20 {
		t.Errorf("Read of a %d-byte line allocated %d bytes", lineBytes, allocated)
	}
	want := []runtime.Record{
		{Partition: "files", Data: chunk[:1024], Position: "a.json:1",
			Err: fmt.Errorf("line too long: %d bytes, more than MaxLineBytes %d", lineBytes, 64<<10)},
		{Partition: "files", Data: []byte("{}"), Position: "a.json:2"},
	}
	if !slices.EqualFunc(got, want, equalRecord) {
		t.Errorf("read\n%.80q\nwant\n%.80q", got, want)
	}
}

// TestFilesMinFileAge lists files by their modification time against a
// manual clock.
func TestFilesMinFileAge(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	src := runtime.FilesSource(dir, runtime.FilesOptions{
		MinFileAge: 5 * time.Second,
		Clock:      func() time.Time { return now },
	})
	touch := func(name string, mtime time.Time) {
		t.Helper()
		if err := os.Chtimes(filepath.Join(dir, name), mtime, mtime); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, dir, "a.json", "{}\n")
	writeFile(t, dir, "b.json", "{}\n")
	writeFile(t, dir, "c.json", "{}\n")
	touch("a.json", now.Add(-10*time.Second))
	touch("b.json", now.Add(-time.Second))
	touch("c.json", now.Add(time.Hour)) // a clock ahead of ours
	if err := os.Symlink("b.json", filepath.Join(dir, "link.json")); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		advance time.Duration
		want    []string
	}{
		{0, []string{"a.json"}},
		{3999 * time.Millisecond, []string{"a.json"}},
		// b.json is exactly MinFileAge old, and its link with it.
		{time.Millisecond, []string{"a.json", "b.json", "link.json"}},
		{time.Hour, []string{"a.json", "b.json", "link.json"}},
		{5 * time.Second, []string{"a.json", "b.json", "c.json", "link.json"}},
	}
	for _, step := range steps {
		now = now.Add(step.advance)
		if got := names(t, available(t, src)); !slices.Equal(got, step.want) {
			t.Errorf("at %v: Available = %q, want %q", now, got, step.want)
		}
	}
	// Appended to, b.json is held back again until it has been left
	// alone long enough (its link too, which goes by the file's time).
	touch("b.json", now.Add(-time.Second))
	if got, want := names(t, available(t, src)), []string{"a.json", "c.json"}; !slices.Equal(got, want) {
		t.Errorf("after a write to b.json: Available = %q, want %q", got, want)
	}

	// The default clock is the real one.
	real := runtime.FilesSource(dir, runtime.FilesOptions{MinFileAge: time.Hour})
	touch("a.json", time.Now().Add(-2*time.Hour))
	touch("b.json", time.Now())
	touch("c.json", time.Now().Add(-2*time.Hour))
	if got, want := names(t, available(t, real)), []string{"a.json", "c.json"}; !slices.Equal(got, want) {
		t.Errorf("with the real clock: Available = %q, want %q", got, want)
	}

	negative := runtime.FilesSource(dir, runtime.FilesOptions{MinFileAge: -time.Second})
	if _, err := negative.Available(context.Background()); err == nil || !strings.Contains(err.Error(), "MinFileAge") {
		t.Errorf("negative MinFileAge: %v", err)
	}
}

// TestFilesMaxFileAge: the log forgets files more than MaxFileAge older
// than the newest read, and takes a file that old for read; but a backlog
// read MaxFilesPerTrigger at a time, oldest first, whose names sort
// against their times, is read whole. With LatestFirst and
// MaxFilesPerTrigger, MaxFileAge is not used.
func TestFilesMaxFileAge(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	touch := func(name string, at time.Duration) {
		t.Helper()
		writeFile(t, dir, name, "{}\n")
		if err := os.Chtimes(filepath.Join(dir, name), base.Add(at), base.Add(at)); err != nil {
			t.Fatal(err)
		}
	}
	// Names in the reverse order of their times: the first batch takes
	// the oldest files (each batch's named in lexical order), and the
	// newest are still to read.
	touch("a.json", 10*time.Hour)
	touch("b.json", 9*time.Hour)
	touch("c.json", 5*time.Hour)
	touch("d.json", 0)
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 2, MaxFileAge: time.Hour})
	var committed json.RawMessage
	var read []string
	for {
		end := next(t, src, committed, available(t, src))
		if bytes.Equal(end, committed) {
			break
		}
		read = append(read, names(t, end)...)
		committed = end
	}
	if want := []string{"c.json", "d.json", "a.json", "b.json"}; !slices.Equal(read, want) {
		t.Fatalf("read %q, want the whole backlog %q", read, want)
	}
	// With nothing left to read, the log forgets what is more than an
	// hour older than a.json once the next batch commits.
	touch("e.json", 11*time.Hour)
	committed = next(t, src, committed, available(t, src))
	if got, want := logOf(t, committed), []string{"a.json", "e.json"}; !slices.Equal(got, want) {
		t.Errorf("log after the backlog = %q, want %q", got, want)
	}
	// The forgotten files are not read again, and a file that appears
	// with a time that old is taken as read: Spark's maxFileAge.
	touch("0.json", 2*time.Hour)
	if got := next(t, src, committed, available(t, src)); !bytes.Equal(got, committed) {
		t.Errorf("Next after compaction = %s, want nothing new", got)
	}
	// A restart reads from the committed offset alone.
	touch("f.json", 12*time.Hour)
	again := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 2, MaxFileAge: time.Hour})
	if got := names(t, next(t, again, committed, available(t, again))); !slices.Equal(got, []string{"f.json"}) {
		t.Errorf("after a restart: %q, want f.json", got)
	}

	// With LatestFirst and MaxFilesPerTrigger, MaxFileAge is not used, as
	// in Spark: the log forgets nothing, and a file that appears with an
	// old time is read.
	latest := runtime.FilesSource(dir, runtime.FilesOptions{MaxFilesPerTrigger: 2, LatestFirst: true, MaxFileAge: time.Hour})
	committed, read = nil, nil
	for {
		end := next(t, latest, committed, available(t, latest))
		if bytes.Equal(end, committed) {
			break
		}
		read = append(read, names(t, end)...)
		committed = end
	}
	if want := []string{"e.json", "f.json", "a.json", "b.json", "0.json", "c.json", "d.json"}; !slices.Equal(read, want) {
		t.Fatalf("LatestFirst: read %q, want %q", read, want)
	}
	touch("old.json", -240*time.Hour)
	if got := names(t, next(t, latest, committed, available(t, latest))); !slices.Equal(got, []string{"old.json"}) {
		t.Errorf("LatestFirst: a file ten days older than the others: %q, want it read", got)
	}
}

// TestFilesOldOffset continues from an offset written before the log was
// compacted (an array of every file read): only new files are read, and the
// log takes their modification times from the listing.
func TestFilesOldOffset(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"a.json", "b.json", "c.json"} {
		writeFile(t, dir, name, "{}\n")
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	old := json.RawMessage(`["a.json","b.json","gone.json"]`)
	end := next(t, src, old, available(t, src))
	if got := names(t, end); !slices.Equal(got, []string{"c.json"}) {
		t.Errorf("after an old offset: %q, want c.json", got)
	}
	if got, want := logOf(t, end), []string{"a.json", "b.json", "c.json"}; !slices.Equal(got, want) {
		t.Errorf("log = %q, want %q (gone.json is no longer listed)", got, want)
	}
	if got := readAll(t, src, old, end); !slices.EqualFunc(got, expectLines(t, dir, "c.json"), equalRecord) {
		t.Errorf("read %v", got)
	}
	if got, want := src.(runtime.OffsetDescriber).DescribeOffset(old), `{"files":[],"remembered":3}`; got != want {
		t.Errorf("an old offset is described as %s, want %s", got, want)
	}
}

// TestFilesSystemFaultFailsTheRead: an open that fails for the system's
// reasons (the process out of file descriptors) fails Read, so that the
// batch fails and runs again, rather than make a good file a dead
// letter, skipped for good; once the fault has passed, the same read
// gives the file's line.
func TestFilesSystemFaultFailsTheRead(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "a.json", "{\"a\":1}\n")
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	end := available(t, src)
	var starved atomic.Bool
	starved.Store(true)
	runtime.FailOpens(t, func(path string) error {
		if starved.Load() && filepath.Base(path) == "a.json" {
			return syscall.EMFILE
		}
		return nil
	})
	var got []runtime.Record
	err := src.Read(context.Background(), nil, end, func(r runtime.Record) error {
		got = append(got, r)
		return nil
	})
	if !errors.Is(err, syscall.EMFILE) || len(got) != 0 {
		t.Fatalf("Read while out of file descriptors: %v, records %+v; want EMFILE and none", err, got)
	}
	starved.Store(false)
	got = readWithin(t, src, end)
	if len(got) != 1 || got[0].Err != nil || string(got[0].Data) != `{"a":1}` {
		t.Fatalf("Read once the fault passed: %+v, want the file's line", got)
	}
}

// TestFilesWarnOfFilesLeftOut: a visible file that is not JSON lines is
// left out, where Spark's file source would read it, so the source warns
// once for each extension (not for hidden names, which writers give the
// files they are writing, nor .tmp ones).
func TestFilesWarnOfFilesLeftOut(t *testing.T) {
	var logs bytes.Buffer
	before := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(before)
	dir := t.TempDir()
	for _, name := range []string{"a.json", "b.txt", "c.txt", "d.csv", "part-00000", ".e.txt", "_f.csv", "g.json.tmp"} {
		writeFile(t, dir, name, "{}\n")
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{Name: "in"})
	available(t, src)
	available(t, src)
	var warned []string
	for line := range strings.Lines(logs.String()) {
		if strings.Contains(line, "leaving out files that are not .json or .jsonl") {
			_, ext, _ := strings.Cut(line, "extension=")
			warned = append(warned, strings.TrimSpace(ext))
		}
	}
	slices.Sort(warned)
	if want := []string{`""`, ".csv", ".txt"}; !slices.Equal(warned, want) {
		t.Fatalf("warned of %q, want once each of %q:\n%s", warned, want, logs.String())
	}
}

// TestFilesCompressed reads files compressed with gzip, bzip2 and zstd,
// told by their extension, as the same lines uncompressed: a gzip file of
// several members (as appending gzip files makes) as one, an empty file
// as no lines, and a file that is damaged or not what its name says as
// one dead letter and no lines.
func TestFilesCompressed(t *testing.T) {
	// Each file is kept whole from its check, or (1 KiB kept) read again.
	for _, keep := range []int{8 << 20, 1 << 10} {
		t.Run(fmt.Sprintf("keep=%d", keep), func(t *testing.T) {
			defer runtime.SetKeepDecompressed(keep)()
			testFilesCompressed(t)
		})
	}
}

func testFilesCompressed(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 2000 {
		lines = append(lines, fmt.Sprintf(`{"id":%d,"name":"reading %d","note":"Grüße"}`, i, i*i))
	}
	content := strings.Join(lines, "\n") + "\n"
	writeFile(t, dir, "plain.jsonl", content)
	gz := func(parts ...string) []byte {
		var buf bytes.Buffer
		for _, p := range parts { // one member each
			w := gzip.NewWriter(&buf)
			if _, err := w.Write([]byte(p)); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
		}
		return buf.Bytes()
	}
	half := len(content) / 2
	half += strings.IndexByte(content[half:], '\n') + 1
	members := gz(content[:half], content[half:])
	writeFile(t, dir, "members.json.gz", string(members))
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "z.jsonl.zst", string(enc.EncodeAll([]byte(content), nil)))
	enc.Close()
	bz, err := os.ReadFile(filepath.Join("testdata", "lines.jsonl.bz2"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "small.jsonl.bz2", string(bz))
	writeFile(t, dir, "empty.json.gz", "")
	// Zero bytes after the last member are padding, as gzip(1) reads
	// them; a byte other than zero among them is not.
	writeFile(t, dir, "padded.json.gz", string(members)+strings.Repeat("\x00", 70000))
	writeFile(t, dir, "trailing.json.gz", string(members)+strings.Repeat("\x00", 70000)+"\x01"+strings.Repeat("\x00", 10))
	// Damaged: cut short within the second member, a corrupt body, not
	// gzip at all, and a zstd frame cut short.
	cut := members[:len(members)-len(gz(content[half:]))/2]
	writeFile(t, dir, "cut.json.gz", string(cut))
	corrupt := gz(content)
	corrupt[len(corrupt)/2] ^= 0xff
	writeFile(t, dir, "corrupt.json.gz", string(corrupt))
	writeFile(t, dir, "text.json.gz", content)
	src := runtime.FilesSource(dir, runtime.FilesOptions{})
	end := next(t, src, nil, available(t, src))
	got := readAll(t, src, nil, end)
	byFile := map[string][]runtime.Record{}
	for _, r := range got {
		name := r.Position
		if i := strings.LastIndexByte(name, ':'); i > 0 && r.Err == nil {
			name = name[:i]
		}
		byFile[name] = append(byFile[name], r)
	}
	want := expectLines(t, dir, "plain.jsonl")
	sameLines := func(name string, got, want []runtime.Record) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d records, want %d", name, len(got), len(want))
		}
		for i := range want {
			w := want[i]
			w.Position = name + w.Position[strings.LastIndexByte(w.Position, ':'):]
			if !equalRecord(got[i], w) {
				t.Fatalf("%s: record %d = %+v, want %+v", name, i, got[i], w)
			}
		}
	}
	sameLines("members.json.gz", byFile["members.json.gz"], want)
	sameLines("z.jsonl.zst", byFile["z.jsonl.zst"], want)
	sameLines("padded.json.gz", byFile["padded.json.gz"], want)
	small := []runtime.Record{
		{Partition: "files", Data: []byte(`{"id":1,"city":"Zürich"}`), Position: "x:1"},
		{Partition: "files", Data: []byte(`{"id":2,"city":"Lyon"}`), Position: "x:2"},
		{Partition: "files", Data: []byte(`{"id":3,"city":"Ōsaka"}`), Position: "x:4"},
	}
	sameLines("small.jsonl.bz2", byFile["small.jsonl.bz2"], small)
	if n := len(byFile["empty.json.gz"]); n != 0 {
		t.Fatalf("empty.json.gz gave %d records, want none", n)
	}
	// A damaged file gives no lines (gzip's checksum is at the end of a
	// member: lines read before it would be unchecked), only a dead letter.
	for _, name := range []string{"cut.json.gz", "corrupt.json.gz", "text.json.gz", "trailing.json.gz"} {
		recs := byFile[name]
		if len(recs) != 1 || recs[0].Err == nil || recs[0].Position != name || recs[0].Data != nil {
			t.Fatalf("%s: %+v, want one dead letter naming the file, without data", name, recs)
		}
		if msg := recs[0].Err.Error(); !strings.Contains(msg, "not a whole gzip file") {
			t.Fatalf("%s: the dead letter says %q, want it to say the file is not a whole gzip file", name, msg)
		}
	}
	if len(got) != 4*len(want)+len(small)+4 { // plain, members, z, padded
		t.Fatalf("%d records in all, want %d", len(got), 4*len(want)+len(small)+4)
	}
	// FailOnBadFiles fails the read instead.
	failing := runtime.FilesSource(dir, runtime.FilesOptions{FailOnBadFiles: true})
	err = failing.Read(context.Background(), nil, end, func(runtime.Record) error { return nil })
	if err == nil {
		t.Fatal("FailOnBadFiles: the damaged files were read without an error")
	}
}

// TestFilesBytesPerTriggerAndLatestFirst: MaxBytesPerTrigger takes files,
// in order, while their sizes add up to it (at least one file, and none
// past the first that does not fit, as Spark's takeWhile); LatestFirst
// takes the newest first, and the older files left behind are read in
// later batches, not forgotten, however old.
func TestFilesBytesPerTriggerAndLatestFirst(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Now().Add(-30 * 24 * time.Hour) // older than MaxFileAge behind the newest
	// Files a..f, each an hour newer than the one before, of these sizes.
	sizes := map[string]int{"a.json": 40, "b.json": 50, "c.json": 120, "d.json": 10, "e.json": 30, "f.json": 60}
	for i, name := range []string{"a.json", "b.json", "c.json", "d.json", "e.json", "f.json"} {
		writeFile(t, dir, name, strings.Repeat("x", sizes[name]-1)+"\n")
		when := t0.Add(time.Duration(i) * time.Hour)
		if name == "f.json" {
			when = time.Now().Add(-time.Minute)
		}
		if err := os.Chtimes(filepath.Join(dir, name), when, when); err != nil {
			t.Fatal(err)
		}
	}
	batches := func(opts runtime.FilesOptions) [][]string {
		t.Helper()
		src := runtime.FilesSource(dir, opts)
		upTo := available(t, src)
		var out [][]string
		var committed json.RawMessage
		for range 10 {
			end := next(t, src, committed, upTo)
			if bytes.Equal(end, committed) {
				return out
			}
			// Read takes the batch's files oldest first.
			var read []string
			for _, r := range readAll(t, src, committed, end) {
				read = append(read, r.Position[:strings.IndexByte(r.Position, ':')])
			}
			out = append(out, read)
			committed = end
		}
		t.Fatal("more than 10 batches")
		return nil
	}
	for _, c := range []struct {
		opts runtime.FilesOptions
		want [][]string
	}{
		// 40+50 fit in 100; c alone is over it; d+e+... 10+30+60 fit.
		{runtime.FilesOptions{MaxBytesPerTrigger: 100}, [][]string{{"a.json", "b.json"}, {"c.json"}, {"d.json", "e.json", "f.json"}}},
		// b does not fit after a, and ends the batch though d would fit.
		{runtime.FilesOptions{MaxBytesPerTrigger: 60}, [][]string{{"a.json"}, {"b.json"}, {"c.json"}, {"d.json", "e.json"}, {"f.json"}}},
		{runtime.FilesOptions{MaxFilesPerTrigger: 2, LatestFirst: true}, [][]string{{"e.json", "f.json"}, {"c.json", "d.json"}, {"a.json", "b.json"}}},
		{runtime.FilesOptions{MaxBytesPerTrigger: 100, LatestFirst: true}, [][]string{{"d.json", "e.json", "f.json"}, {"c.json"}, {"a.json", "b.json"}}},
		{runtime.FilesOptions{LatestFirst: true}, [][]string{{"a.json", "b.json", "c.json", "d.json", "e.json", "f.json"}}},
	} {
		if got := batches(c.opts); !slices.EqualFunc(got, c.want, slices.Equal) {
			t.Errorf("%+v: batches %q, want %q", c.opts, got, c.want)
		}
	}
	// A Once trigger's batch (AllAvailable) takes everything.
	src := runtime.FilesSource(dir, runtime.FilesOptions{MaxBytesPerTrigger: 1})
	end, err := src.Next(context.Background(), nil, available(t, src), runtime.AllAvailable)
	if err != nil || len(names(t, end)) != 6 {
		t.Errorf("AllAvailable with MaxBytesPerTrigger: %q, %v; want all six files", names(t, end), err)
	}
	both := runtime.FilesSource(dir, runtime.FilesOptions{MaxBytesPerTrigger: 1, MaxFilesPerTrigger: 1})
	if _, err := both.Available(context.Background()); err == nil || !strings.Contains(err.Error(), "MaxFilesPerTrigger and MaxBytesPerTrigger are both set") {
		t.Errorf("both caps: %v", err)
	}
}

// TestFilesRecursiveAndGlob: Recursive reads the files in the directories
// within, named by their paths, but not hidden directories, ArchiveDir or
// links to directories; PathGlobFilter picks the files by name in place
// of the extensions, compressed ones told by theirs still.
func TestFilesRecursiveAndGlob(t *testing.T) {
	dir := t.TempDir()
	line := func(name string) string { return fmt.Sprintf(`{"file":%q}`, name) + "\n" }
	for _, name := range []string{"a.json", "sub/b.json", "sub/deeper/c.jsonl", ".hidden/d.json", "_tmp/e.json",
		"done/f.json", "sub/x.txt", "sub/a.log", "g.log", "sub/.h.json"} {
		writeFile(t, filepath.Join(dir, filepath.Dir(name)), filepath.Base(name), line(name))
	}
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz)
	w.Write([]byte(line("sub/deeper/z.log.gz")))
	w.Close()
	writeFile(t, filepath.Join(dir, "sub", "deeper"), "z.log.gz", gz.String())
	other := t.TempDir()
	writeFile(t, other, "l.json", line("linked/l.json"))
	if err := os.Symlink(other, filepath.Join(dir, "linked")); err != nil {
		t.Fatal(err)
	}
	read := func(opts runtime.FilesOptions) []string {
		t.Helper()
		src := runtime.FilesSource(dir, opts)
		var got []string
		for _, r := range readAll(t, src, nil, next(t, src, nil, available(t, src))) {
			name, number, _ := strings.Cut(r.Position, ":")
			if r.Err != nil || number != "1" || string(r.Data)+"\n" != line(name) {
				t.Fatalf("%+v: record %+v, want line 1 of a file that names it", opts, r)
			}
			got = append(got, name)
		}
		slices.Sort(got)
		return got
	}
	for _, c := range []struct {
		opts runtime.FilesOptions
		want []string
	}{
		{runtime.FilesOptions{}, []string{"a.json"}},
		{runtime.FilesOptions{Recursive: true}, []string{"a.json", "done/f.json", "sub/b.json", "sub/deeper/c.jsonl"}},
		{runtime.FilesOptions{Recursive: true, CleanSource: runtime.CleanArchive, ArchiveDir: filepath.Join(dir, "done")},
			[]string{"a.json", "sub/b.json", "sub/deeper/c.jsonl"}},
		{runtime.FilesOptions{PathGlobFilter: "*.log"}, []string{"g.log"}},
		{runtime.FilesOptions{PathGlobFilter: "*.log*", Recursive: true}, []string{"g.log", "sub/a.log", "sub/deeper/z.log.gz"}},
	} {
		if got := read(c.opts); !slices.Equal(got, c.want) {
			t.Errorf("%+v: read %q, want %q", c.opts, got, c.want)
		}
	}
	bad := runtime.FilesSource(dir, runtime.FilesOptions{PathGlobFilter: "[a-"})
	if _, err := bad.Available(context.Background()); err == nil || !strings.Contains(err.Error(), `PathGlobFilter "[a-"`) {
		t.Errorf("a bad pattern: %v", err)
	}
}

// TestFilesMeta: each record's Meta tells its file (path, name, size,
// modification time), its line, and the key=value directories above it
// as Spark's partition discovery reads them: unescaped, from the top,
// Hive's null directory null, other directories not partitions.
func TestFilesMeta(t *testing.T) {
	dir := t.TempDir()
	when := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	files := map[string]string{
		"date=2026-12-06/hour=07/a.json":              "{}\n\n{\"n\":2}\n",
		"date=__HIVE_DEFAULT_PARTITION__/b.json":      "{}\n",
		"raw/city=S%C3%A3o Paulo/k%3Dx=a%3Db%/c.json": "{}\n",
		"x=1/raw/hour=07/k=/e.json":                   "{}\n",
		"_src=a/f.json":                               "{}\n", // "_" with "=": a partition's, not hidden
		"_tmp/g.json":                                 "{}\n", // hidden
		"d.json":                                      "{}\n",
	}
	for name, content := range files {
		writeFile(t, filepath.Join(dir, filepath.Dir(name)), filepath.Base(name), content)
		if err := os.Chtimes(filepath.Join(dir, name), when, when); err != nil {
			t.Fatal(err)
		}
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{Recursive: true})
	got := map[string]runtime.FileMeta{}
	err := src.Read(context.Background(), nil, next(t, src, nil, available(t, src)), func(r runtime.Record) error {
		m, ok := r.Meta.(*runtime.FileMeta)
		if !ok {
			t.Fatalf("%s: Meta %T, want *runtime.FileMeta", r.Position, r.Meta)
		}
		got[r.Position] = *m
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p := func(kv ...string) []runtime.PartitionValue {
		var ps []runtime.PartitionValue
		for i := 0; i < len(kv); i += 2 {
			ps = append(ps, runtime.PartitionValue{Key: kv[i], Value: kv[i+1]})
		}
		return ps
	}
	meta := func(name string, line int, partitions []runtime.PartitionValue) runtime.FileMeta {
		return runtime.FileMeta{Path: filepath.Join(src.(interface{ Root() string }).Root(), name), Name: name,
			Size: int64(len(files[name])), ModTime: when, Line: line, Partitions: partitions}
	}
	want := map[string]runtime.FileMeta{
		"date=2026-12-06/hour=07/a.json:1": meta("date=2026-12-06/hour=07/a.json", 1, p("date", "2026-12-06", "hour", "07")),
		"date=2026-12-06/hour=07/a.json:3": meta("date=2026-12-06/hour=07/a.json", 3, p("date", "2026-12-06", "hour", "07")),
		"date=__HIVE_DEFAULT_PARTITION__/b.json:1": meta("date=__HIVE_DEFAULT_PARTITION__/b.json", 1,
			[]runtime.PartitionValue{{Key: "date", Null: true}}),
		"raw/city=S%C3%A3o Paulo/k%3Dx=a%3Db%/c.json:1": meta("raw/city=S%C3%A3o Paulo/k%3Dx=a%3Db%/c.json", 1,
			p("city", "São Paulo", "k=x", "a=b%")),
		"d.json:1": meta("d.json", 1, nil),
		// As Spark's: up from the file, to the first directory of
		// another form (an empty value is not a partition's).
		"x=1/raw/hour=07/k=/e.json:1": meta("x=1/raw/hour=07/k=/e.json", 1, p("hour", "07")),
		"_src=a/f.json:1":             meta("_src=a/f.json", 1, p("_src", "a")),
	}
	if len(got) != len(want) {
		t.Fatalf("records at %v, want %d", slices.Sorted(maps.Keys(got)), len(want))
	}
	for pos, w := range want {
		g := got[pos]
		if !g.ModTime.Equal(w.ModTime) || g.Path != w.Path || g.Name != w.Name || g.Size != w.Size || g.Line != w.Line ||
			!slices.Equal(g.Partitions, w.Partitions) {
			t.Errorf("%s: Meta %+v, want %+v", pos, g, w)
		}
	}
	a := got["date=2026-12-06/hour=07/a.json:3"]
	if v, ok := a.Partition("hour"); v != "07" || !ok {
		t.Errorf("Partition(hour) = %q, %t", v, ok)
	}
	b := got["date=__HIVE_DEFAULT_PARTITION__/b.json:1"]
	if v, ok := b.Partition("date"); v != "" || ok {
		t.Errorf("Partition(date) of the null directory = %q, %t, want \"\", false", v, ok)
	}
}

// TestFilesGlob: a path with a pattern reads the files it names, whatever
// their extensions, and the JSON-lines files directly in the directories
// it names (with Recursive, below them too), named from the directory
// before the pattern; hidden files and directories are never read.
func TestFilesGlob(t *testing.T) {
	dir := t.TempDir()
	line := func(name string) string { return fmt.Sprintf(`{"file":%q}`, name) + "\n" }
	logs := filepath.Join(dir, "logs")
	for _, name := range []string{"2026-12-05/events/a.json", "2026-12-05/events/b.log", "2026-12-05/other/c.json",
		"2026-12-06/events/d.jsonl", "2026-12-06/events/deeper/e.json", "2025-01-01/events/f.json",
		"2026-12-06/events/.hidden.json", "2026-12-06/.hidden/events/g.json", "x.json"} {
		writeFile(t, filepath.Join(logs, filepath.Dir(name)), filepath.Base(name), line(name))
	}
	read := func(glob string, opts runtime.FilesOptions) []string {
		t.Helper()
		src := runtime.FilesSource(filepath.Join(logs, glob), opts)
		var got []string
		for _, r := range readAll(t, src, nil, next(t, src, nil, available(t, src))) {
			name, number, _ := strings.Cut(r.Position, ":")
			if r.Err != nil || number != "1" || string(r.Data)+"\n" != line(name) {
				t.Fatalf("%s: record %+v, want line 1 of a file that names it", glob, r)
			}
			got = append(got, name)
		}
		slices.Sort(got)
		return got
	}
	for _, c := range []struct {
		glob string
		opts runtime.FilesOptions
		want []string
	}{
		{"2026-*/events", runtime.FilesOptions{}, []string{"2026-12-05/events/a.json", "2026-12-06/events/d.jsonl"}},
		{"2026-*/events", runtime.FilesOptions{Recursive: true},
			[]string{"2026-12-05/events/a.json", "2026-12-06/events/d.jsonl", "2026-12-06/events/deeper/e.json"}},
		{"2026-*/events/*.log", runtime.FilesOptions{}, []string{"2026-12-05/events/b.log"}},
		{"*/*/*.json", runtime.FilesOptions{}, []string{"2025-01-01/events/f.json", "2026-12-05/events/a.json", "2026-12-05/other/c.json"}},
		{"2026-1[2]-0?/events", runtime.FilesOptions{}, []string{"2026-12-05/events/a.json", "2026-12-06/events/d.jsonl"}},
		{"*", runtime.FilesOptions{}, []string{"x.json"}},
		{"2027-*/events", runtime.FilesOptions{}, nil},
	} {
		if got := read(c.glob, c.opts); !slices.Equal(got, c.want) {
			t.Errorf("%s %+v: read %q, want %q", c.glob, c.opts, got, c.want)
		}
	}
	src := runtime.FilesSource(filepath.Join(logs, "2026-*", "events"), runtime.FilesOptions{})
	if want := "files:" + realPath(t, logs) + "/2026-*/events"; src.Name() != want {
		t.Errorf("the source is named %q, want %q", src.Name(), want)
	}
	// A glob whose directory is not there yet names nothing yet, as in
	// Spark: the query starts, and waits for files.
	later := runtime.FilesSource(filepath.Join(dir, "later", "*", "events"), runtime.FilesOptions{})
	if err := later.(runtime.StartChecker).CheckStart(); err != nil {
		t.Errorf("a glob under a directory not there yet: %v", err)
	}
	if names := names(t, available(t, later)); len(names) != 0 {
		t.Errorf("a glob under a directory not there yet lists %q", names)
	}
	bad := runtime.FilesSource(filepath.Join(logs, "[a-", "x"), runtime.FilesOptions{})
	if _, err := bad.Available(context.Background()); err == nil || !strings.Contains(err.Error(), `path pattern "[a-/x"`) {
		t.Errorf("a bad pattern: %v", err)
	}
}

// TestFilesRecursiveQuery runs a query over a tree of directories that
// grows between runs, archiving what it reads: every file is read once,
// and the archive takes the tree's shape.
func TestFilesRecursiveQuery(t *testing.T) {
	tmp := t.TempDir()
	in, archive, cp := filepath.Join(tmp, "in"), filepath.Join(tmp, "in", "_archive"), filepath.Join(tmp, "cp")
	opts := runtime.FilesOptions{Recursive: true, MaxFilesPerTrigger: 3, CleanSource: runtime.CleanArchive, ArchiveDir: archive}
	var want []string
	for run := range 3 {
		for i := range 4 {
			name := fmt.Sprintf("2026/12/0%d/part-%d.json", run+1, i)
			writeFile(t, filepath.Join(in, filepath.Dir(name)), filepath.Base(name), "{}\n")
			want = append(want, name)
		}
		r := newFileReads()
		if _, err := runAvailable(t, r.plan(runtime.FilesSource(in, opts)), cp); err != nil {
			t.Fatal(err)
		}
		var got []string
		for id := range int64(20) {
			for _, rec := range r.read(id) {
				got = append(got, rec)
			}
		}
		slices.Sort(got)
		if start := len(want) - 4; !slices.Equal(got, want[start:]) {
			t.Fatalf("run %d read %q, want %q", run, got, want[start:])
		}
	}
	for _, name := range want {
		if _, err := os.Stat(filepath.Join(archive, name)); err != nil {
			t.Errorf("archived %s: %v", name, err)
		}
		if _, err := os.Stat(filepath.Join(in, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still in the source: %v", name, err)
		}
	}
}

// TestFilesCleanOldFileOfABatch: a file more than MaxFileAge older than
// the newest of its own batch is kept in the batch's log, so that
// CleanSource cleans it with the rest once the batch is committed.
func TestFilesCleanOldFileOfABatch(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	for name, at := range map[string]time.Time{"old.json": now.Add(-10 * 24 * time.Hour), "new.json": now.Add(-time.Minute)} {
		writeFile(t, dir, name, "{}\n")
		if err := os.Chtimes(filepath.Join(dir, name), at, at); err != nil {
			t.Fatal(err)
		}
	}
	src := runtime.FilesSource(dir, runtime.FilesOptions{CleanSource: runtime.CleanDelete})
	end := next(t, src, nil, available(t, src))
	if got := names(t, end); len(got) != 2 {
		t.Fatalf("the batch holds %q, want both files", got)
	}
	src.(runtime.CommitListener).Committed(nil, end)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("after the commit the directory holds %v", left)
	}
}
