package typed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// MemorySink keeps the rows of each batch in memory, for tests and
// notebooks, like Spark's memory sink. A batch written again replaces the
// rows kept for it; a batch with no rows is kept as an empty batch. It
// keeps everything it is given: memory grows with the output.
//
// The zero value is not ready for use; call NewMemorySink. A MemorySink is safe
// for concurrent use: the query writes while a test reads.
type MemorySink[T any] struct {
	mu      sync.Mutex
	batches map[int64][]T
}

// NewMemorySink returns an empty MemorySink.
func NewMemorySink[T any]() *MemorySink[T] {
	return &MemorySink[T]{batches: make(map[int64][]T)}
}

// Write keeps a copy of rows as the output of batch batchID. The copy is
// shallow: rows that hold pointers, slices or maps share them with the
// caller.
func (m *MemorySink[T]) Write(ctx context.Context, batchID int64, rows []T) error {
	kept := append([]T{}, rows...) // non-nil even when empty
	m.mu.Lock()
	m.batches[batchID] = kept
	m.mu.Unlock()
	return nil
}

// Description names the sink in progress reports.
func (m *MemorySink[T]) Description() string { return "memory" }

// AtLeastOnce is true: a batch written again replaces its rows, in full
// (see runtime.AtLeastOnceSink).
func (m *MemorySink[T]) AtLeastOnce() bool { return true }

// Rows returns the rows of all batches kept, in batch order and in order
// within a batch, in a new slice.
func (m *MemorySink[T]) Rows() []T {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []T
	for _, id := range slices.Sorted(maps.Keys(m.batches)) {
		all = append(all, m.batches[id]...)
	}
	return all
}

// Batches returns the rows kept for each batch id, in a new map of new
// slices.
func (m *MemorySink[T]) Batches() map[int64][]T {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int64][]T, len(m.batches))
	for id, rows := range m.batches {
		out[id] = slices.Clone(rows)
	}
	return out
}

// ConsoleOption configures Console.
type ConsoleOption interface{ applyConsole(*consoleConfig) }

type consoleOptionFunc func(*consoleConfig)

func (f consoleOptionFunc) applyConsole(c *consoleConfig) { f(c) }

type consoleConfig struct {
	numRows  int
	truncate int
}

// ConsoleNumRows shows at most n rows of each batch, n > 0; the footer
// "only showing top n rows" says when there were more. The default is 20,
// as in Spark.
func ConsoleNumRows(n int) ConsoleOption {
	return consoleOptionFunc(func(c *consoleConfig) { c.numRows = n })
}

// ConsoleTruncate cuts cells longer than n characters to their first n-3
// and "..." (to their first n when n < 4), and aligns cells right, as
// Spark's show does with truncate. n = 0 shows cells in full, aligned left.
// Column names, instants and windows are never cut. The default is 20.
func ConsoleTruncate(n int) ConsoleOption {
	return consoleOptionFunc(func(c *consoleConfig) { c.truncate = n })
}

func (c *consoleConfig) validate() error {
	var errs []error
	if c.numRows <= 0 {
		errs = append(errs, fmt.Errorf("ConsoleNumRows %d is not positive", c.numRows))
	}
	if c.truncate < 0 {
		errs = append(errs, fmt.Errorf("ConsoleTruncate %d is negative", c.truncate))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: console sink options: %w", unprefixed(err))
	}
	return nil
}

// ConsoleSink returns a sink that prints each batch to w as Spark's console sink
// does: a header naming the batch, then a table of its first rows whose
// columns are the record's top-level JSON members, every member its JSON
// may have in the order it writes them (as Spark shows every column of
// the schema, an empty batch too), and whose cells are the members' JSON
// values, strings without their quotes and with control characters such as
// a newline escaped ("\n"). Instants read as Spark shows timestamps,
// "2015-02-23 10:18:53.176", and a window as "{start, end}"; they are
// never cut (see ConsoleTruncate). A member a row leaves out (omitempty)
// is an empty cell. Widths count characters, so East Asian wide characters
// misalign the table.
//
//	-------------------------------------------
//	Batch: 0
//	-------------------------------------------
//	+------+---+
//	|Device|  x|
//	+------+---+
//	|    d1|1.5|
//	+------+---+
//
// Each batch is printed with one call to w.Write. A batch written again
// after a failure is printed again: a console cannot take back what it
// showed. Bad options make every Write fail. The sink is safe for
// concurrent use if w is.
func ConsoleSink[T any, P codec.RecordPtr[T]](w io.Writer, opts ...ConsoleOption) Sink[T] {
	cfg := consoleConfig{numRows: 20, truncate: 20}
	for _, o := range opts {
		o.applyConsole(&cfg)
	}
	var zero T
	columns, err := codec.JSONSchemaProperties(P(&zero).StreamJSONSchema())
	return &consoleSink[T, P]{w: w, cfg: cfg, columns: columns, err: errors.Join(cfg.validate(), err)}
}

type consoleSink[T any, P codec.RecordPtr[T]] struct {
	w       io.Writer
	cfg     consoleConfig
	columns []string // the record's JSON members, in order
	err     error    // from validate, returned by every Write
}

// consoleDashes is the rule above and below the batch header, as long as
// Spark's.
const consoleDashes = "-------------------------------------------\n"

// Description names the sink in progress reports.
func (s *consoleSink[T, P]) Description() string { return "console" }

// AtLeastOnce is true: a batch run again is printed again.
func (s *consoleSink[T, P]) AtLeastOnce() bool { return true }

func (s *consoleSink[T, P]) Write(ctx context.Context, batchID int64, rows []T) error {
	if s.err != nil {
		return s.err
	}
	shown := rows[:min(len(rows), s.cfg.numRows)]
	columns, cells, err := consoleCells[T, P](s.columns, shown, s.cfg.truncate)
	if err != nil {
		return fmt.Errorf("streamgen: console sink: batch %d: %w", batchID, unprefixed(err))
	}
	var b []byte
	b = append(b, consoleDashes...)
	b = append(b, "Batch: "...)
	b = strconv.AppendInt(b, batchID, 10)
	b = append(b, '\n')
	b = append(b, consoleDashes...)
	b = appendTable(b, columns, cells, s.cfg.truncate)
	if len(rows) > len(shown) {
		b = append(b, "only showing top "...)
		b = strconv.AppendInt(b, int64(len(shown)), 10)
		if len(shown) == 1 {
			b = append(b, " row\n"...)
		} else {
			b = append(b, " rows\n"...)
		}
	}
	b = append(b, '\n') // Spark prints a blank line after the table
	if _, err := s.w.Write(b); err != nil {
		return fmt.Errorf("streamgen: console sink: batch %d: %w", batchID, unprefixed(err))
	}
	return nil
}

// consoleCells encodes each row with its generated AppendJSON and reads the
// object's members back: the column names (the record's, then any other
// member in order of first appearance) and, per row, the cells by column
// ("" where the row has no such member; a row may be shorter than
// columns), cut to truncate characters (see cellText).
func consoleCells[T any, P codec.RecordPtr[T]](record []string, rows []T, truncate int) (columns []string, cells [][]string, err error) {
	index := make(map[string]int, len(record))
	columns = append(columns, record...)
	for i, name := range record {
		index[name] = i
	}
	var (
		buf  []byte
		r    codec.JSONReader
		cell codec.JSONReader // reads string values on their own
	)
	add := func(row *T) error {
		var err error
		if buf, err = P(row).AppendJSON(buf[:0]); err != nil {
			return err
		}
		var line []string
		r.Reset(buf)
		if r.BeginObject("console row") {
			for {
				key, ok := r.NextKey()
				if !ok {
					break
				}
				i, seen := index[string(key)]
				if !seen {
					i = len(columns)
					index[string(key)] = i
					columns = append(columns, string(key))
				}
				raw, ok := r.RawValue()
				if !ok {
					break
				}
				for len(line) <= i {
					line = append(line, "")
				}
				line[i] = cellText(&cell, raw, truncate)
			}
		}
		if err := r.Finish(); err != nil {
			return err
		}
		cells = append(cells, line)
		return nil
	}
	for i := range rows {
		if err := add(&rows[i]); err != nil {
			return nil, nil, fmt.Errorf("row %d: %w", i, unprefixed(err))
		}
	}
	return columns, cells, nil
}

// consoleEscaper escapes the characters that would break a table's lines,
// as Spark's show does.
var consoleEscaper = strings.NewReplacer(
	"\n", `\n`, "\r", `\r`, "\t", `\t`, "\f", `\f`, "\b", `\b`, "\v", `\v`, "\a", `\a`,
)

// cellText is a JSON value as a table shows it, cut to truncate
// characters (truncateCell): a string unquoted, any other value as it is
// in the JSON. An instant (a string in the RFC 3339 form that a
// time.Time's JSON has) reads as Spark shows timestamps, with a space
// between date and time, "2015-02-23 10:18:53.176", the zone after it
// unless it is UTC, and is never cut: a time cut to "2015-02-23T10:18:..."
// says nothing.
//
// An object whose members are all instants, such as a window's
// {"start", "end"} (typed.Window), reads as Spark shows such a struct,
// "{2015-02-23 10:10:00, 2015-02-23 10:20:00}", and is never cut either.
func cellText(r *codec.JSONReader, raw []byte, truncate int) string {
	if len(raw) > 0 && raw[0] == '{' {
		if text, ok := instantsObject(raw); ok {
			return text
		}
	}
	if len(raw) == 0 || raw[0] != '"' {
		return truncateCell(string(raw), truncate)
	}
	r.Reset(raw)
	s, _ := r.String("console cell")
	if t, ok := instant(s); ok {
		return instantText(t, s)
	}
	return truncateCell(consoleEscaper.Replace(s), truncate)
}

// instantText writes t, read from s, as a console cell shows an instant.
func instantText(t time.Time, s string) string {
	layout := "2006-01-02 15:04:05.999999999"
	if _, offset := t.Zone(); offset != 0 || !strings.HasSuffix(s, "Z") {
		layout += " Z07:00"
	}
	return t.Format(layout)
}

// instantsObject reads raw, a JSON object, as "{t1, t2, ...}" when it has
// members and each is an instant.
func instantsObject(raw []byte) (string, bool) {
	var obj, member codec.JSONReader
	obj.Reset(raw)
	var parts []string
	if !obj.BeginObject("console cell") {
		return "", false
	}
	for {
		if _, ok := obj.NextKey(); !ok {
			break
		}
		v, ok := obj.RawValue()
		if !ok || len(v) == 0 || v[0] != '"' {
			return "", false
		}
		member.Reset(v)
		s, _ := member.String("console cell")
		t, ok := instant(s)
		if !ok {
			return "", false
		}
		parts = append(parts, instantText(t, s))
	}
	if obj.Finish() != nil || len(parts) == 0 {
		return "", false
	}
	return "{" + strings.Join(parts, ", ") + "}", true
}

// instant reads s as an instant when it has the RFC 3339 form of a
// time.Time's JSON: "2015-02-23T10:18:53.176Z", "...+01:00".
func instant(s string) (time.Time, bool) {
	if len(s) < len("2006-01-02T15:04:05Z") || s[4] != '-' || s[10] != 'T' {
		return time.Time{}, false
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t, err == nil
}

// appendTable appends the table of Spark's show: columns at least three
// characters wide, cells padded on the left (truncate > 0) or the right.
// The cells are already cut (consoleCells).
func appendTable(b []byte, columns []string, rows [][]string, truncate int) []byte {
	header := make([]string, len(columns))
	for i, c := range columns {
		header[i] = consoleEscaper.Replace(c)
	}
	widths := make([]int, len(columns))
	for i := range widths {
		widths[i] = max(3, utf8.RuneCountInString(header[i]))
		for _, row := range rows {
			if i < len(row) {
				widths[i] = max(widths[i], utf8.RuneCountInString(row[i]))
			}
		}
	}
	// Lines are "+" or "|", the cells joined by it, and it again, as
	// Scala's addString makes them: "++" and "||" with no columns.
	dashes := make([]string, len(widths))
	for i, w := range widths {
		dashes[i] = strings.Repeat("-", w)
	}
	rule := "+" + strings.Join(dashes, "+") + "+\n"
	line := func(b []byte, cells []string) []byte {
		b = append(b, '|')
		for i, w := range widths {
			if i > 0 {
				b = append(b, '|')
			}
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", w-utf8.RuneCountInString(c))
			if truncate > 0 {
				b = append(b, pad...)
				b = append(b, c...)
			} else {
				b = append(b, c...)
				b = append(b, pad...)
			}
		}
		return append(b, "|\n"...)
	}
	b = append(b, rule...)
	b = line(b, header)
	b = append(b, rule...)
	for _, row := range rows {
		b = line(b, row)
	}
	return append(b, rule...)
}

// truncateCell cuts s to n characters as Spark does; n = 0 leaves it.
func truncateCell(s string, n int) string {
	if n <= 0 || utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	if n < 4 {
		return string(runes[:n])
	}
	return string(runes[:n-3]) + "..."
}

// FilesSink returns a sink that writes each batch as JSON lines, one row
// per line as the row's generated AppendJSON writes it, to the file
// dir/part-N.jsonl, N being the batch id padded with zeros to ten digits so
// that lexical order is batch order (see runtime.BatchFiles: a file appears
// complete or not at all, so a reader that skips hidden files, as
// runtime.FilesSource does, never sees a partial batch; a batch written
// again replaces its file; a batch with no rows has no file). A batch's
// file is written under a hidden name and appears under its own once the
// batch is committed and durable (with SyncInterval, after the sync that
// takes it), so a reader sees only committed batches, as Spark's file
// sink's readers do through its manifest: never one that a failure or a
// machine crash runs again, perhaps on other rows (runtime.BatchPublisher).
// dir is created when first needed. A start removes the files of the
// batches after the last committed, which a machine crash with
// SyncInterval may have left, and publishes those up to it that a process
// that died left hidden (runtime.BatchRewinder). A sink that wraps it
// must pass RewindAfter and PublishBatch on for this; without them, its
// files appear as they are written. The hidden file dir/.part-query names the
// query that last wrote a file there, whose first write takes the
// directory's part files over: a start with nothing committed removes
// them only when its query has written there, not when another query
// wrote them before. Two outputs of one WriteAll to FilesSinks of one
// directory are refused at Start.
//
// The sink is safe for concurrent use, though two concurrent writes of the
// same batch leave either one's file.
func FilesSink[T any, P codec.RecordPtr[T]](dir string) Sink[T] {
	return fileSink[T, P]{dir: dir, files: runtime.NewPublishedBatchFiles(dir, "part-")}
}

type fileSink[T any, P codec.RecordPtr[T]] struct {
	dir   string
	files *runtime.BatchFiles
}

// Description names the sink in progress reports.
func (s fileSink[T, P]) Description() string { return "files:" + s.dir }

// place is the sink's directory, absolute (placeOf): two FilesSinks of
// one directory, of one row type or two, write the same files.
func (s fileSink[T, P]) place() string {
	if abs, err := filepath.Abs(s.dir); err == nil {
		return abs
	}
	return filepath.Clean(s.dir)
}

// describeSink tells the runtime what out's sink does with a batch run
// again: its RewindAfter, when it keeps its batches apart
// (runtime.BatchRewinder), and whether it writes every attempt in full
// (runtime.AtLeastOnceSink).
func describeSink(out *runtime.Output, sink any) {
	if r, ok := sink.(runtime.BatchRewinder); ok {
		out.Rewind = r.RewindAfter
	}
	if s, ok := sink.(runtime.AtLeastOnceSink); ok {
		out.AtLeastOnce = s.AtLeastOnce()
	}
	if c, ok := sink.(runtime.StartChecker); ok {
		out.CheckStart = c.CheckStart
	}
	if p, ok := sink.(runtime.BatchPublisher); ok {
		out.Publish = p.PublishBatch
	}
}

// PublishBatch makes batch id's file visible, once the batch is durable
// (see runtime.BatchPublisher).
func (s fileSink[T, P]) PublishBatch(batchID int64) error { return s.files.Publish(batchID) }

// RewindAfter removes the files of the batches after batchID, and
// publishes those up to it that a process that died left pending (see
// runtime.BatchRewinder).
func (s fileSink[T, P]) RewindAfter(ctx context.Context, batchID int64) error {
	if err := s.files.RemoveAfter(ctx, batchID); err != nil {
		return fmt.Errorf("streamgen: files sink %s: remove the batches after %d: %w", s.dir, batchID, err)
	}
	return nil
}

func (s fileSink[T, P]) Write(ctx context.Context, batchID int64, rows []T) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("streamgen: files sink: batch %d: %w", batchID, unprefixed(err))
	}
	err := s.files.Write(ctx, batchID, len(rows) == 0, func(w io.Writer) error {
		return writeLines[T, P](w, rows, nil)
	})
	if err != nil {
		return fmt.Errorf("streamgen: files sink %s: batch %d: %w", s.dir, batchID, unprefixed(err))
	}
	return nil
}

// writeLines writes rows as JSON lines to w, each as its generated
// AppendJSON writes it: those at the indexes at, or all for nil at.
func writeLines[T any, P codec.RecordPtr[T]](w io.Writer, rows []T, at []int) error {
	var line []byte
	write := func(i int) error {
		var err error
		if line, err = P(&rows[i]).AppendJSON(line[:0]); err != nil {
			return fmt.Errorf("row %d: %w", i, unprefixed(err))
		}
		line = append(line, '\n')
		_, err = w.Write(line)
		return err
	}
	if at == nil {
		for i := range rows {
			if err := write(i); err != nil {
				return err
			}
		}
		return nil
	}
	for _, i := range at {
		if err := write(i); err != nil {
			return err
		}
	}
	return nil
}

// ForeachWriter receives the rows of each batch, following Spark's
// ForeachWriter contract. For each batch (epoch) and partition the sink
// calls Open; if Open returns true, Process for each row in order; then
// Close, with the error that stopped processing or nil. Close is called
// whenever Open returned without error, whatever it returned, and not when
// Open failed. Open may return false to skip an epoch it has already
// handled, which is how a writer makes its output idempotent. All calls
// for one batch come from the query's goroutine, one at a time; for now
// there is one partition per batch, partition 0.
type ForeachWriter[T any] interface {
	Open(partition int, epoch int64) (bool, error)
	Process(row T) error
	Close(err error)
}

// ForeachSink returns a sink that hands each batch's rows to w. Its Write
// returns, wrapped, the error of Open or Process, or the context's error
// when the context is cancelled during the batch (then passed to Close
// too). The sink is as safe for concurrent use as w is.
func ForeachSink[T any](w ForeachWriter[T]) Sink[T] {
	return foreachSink[T]{w: w}
}

type foreachSink[T any] struct{ w ForeachWriter[T] }

// foreachCheckEvery is how many rows Foreach processes between looks at the
// context: often enough to stop soon, rarely enough to cost nothing.
const foreachCheckEvery = 1024

// Description names the sink in progress reports.
func (s foreachSink[T]) Description() string { return fmt.Sprintf("foreach:%T", s.w) }

func (s foreachSink[T]) Write(ctx context.Context, batchID int64, rows []T) error {
	const partition = 0
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("streamgen: foreach sink: batch %d: %w", batchID, unprefixed(err))
	}
	open, err := s.w.Open(partition, batchID)
	if err != nil {
		return fmt.Errorf("streamgen: foreach sink: batch %d: open: %w", batchID, unprefixed(err))
	}
	if !open {
		s.w.Close(nil)
		return nil
	}
	for i := range rows {
		if i%foreachCheckEvery == foreachCheckEvery-1 {
			if err := ctx.Err(); err != nil {
				s.w.Close(err)
				return fmt.Errorf("streamgen: foreach sink: batch %d: %w", batchID, unprefixed(err))
			}
		}
		if err := s.w.Process(rows[i]); err != nil {
			s.w.Close(err)
			return fmt.Errorf("streamgen: foreach sink: batch %d: row %d: %w", batchID, i, unprefixed(err))
		}
	}
	s.w.Close(nil)
	return nil
}
