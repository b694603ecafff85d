package generator

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/streamgen/streamgen/bench/nexmark/model"
	"github.com/streamgen/streamgen/internal/atomicfile"
)

// AppendJSONLine appends e as one JSON line, {"person":{...}},
// {"auction":{...}} or {"bid":{...}} followed by a newline, as model's
// JSON codec (like encoding/json) writes it: dateTime and expires in RFC
// 3339 as time.RFC3339Nano formats them, in UTC ("2026-01-01T00:00:00.1Z").
// It is safe for concurrent use with distinct bufs and events.
func AppendJSONLine(buf []byte, e *model.Event) ([]byte, error) {
	buf, err := e.AppendJSON(buf)
	if err != nil {
		return buf, err
	}
	return append(buf, '\n'), nil
}

// Merged generates the whole stream of cfg, all splits in one goroutine:
// it interleaves the splits round-robin (event k of split 0, of split 1,
// ..., then event k+1), skipping splits that have ended. Since event k of
// every split has the same dateTime, the merged stream's dateTimes never
// decrease (unless OutOfOrderGroupSize > 1 shuffles them on purpose).
// With one generator it is that generator's stream. A Merged is not safe
// for concurrent use.
type Merged struct {
	gens []*Generator // splits not ended, in split order
	next int          // index in gens of the next split to draw from
}

// NewMerged returns the merged stream of cfg. It panics if cfg is not
// valid, as New does. It is safe for concurrent use.
func NewMerged(cfg Config) *Merged {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	m := &Merged{gens: make([]*Generator, cfg.Generators)}
	for i := range m.gens {
		m.gens[i] = New(cfg, i)
	}
	return m
}

// Next sets e to the next event of the merged stream and returns true, or
// returns false at its end. It reuses e's structs as Generator.Next does.
func (m *Merged) Next(e *model.Event) bool {
	for len(m.gens) > 0 {
		i := m.next
		if m.gens[i].Next(e) {
			m.next = (i + 1) % len(m.gens)
			return true
		}
		// Split i has ended: drop it; the next split takes its index.
		m.gens = append(m.gens[:i], m.gens[i+1:]...)
		if i >= len(m.gens) {
			m.next = 0
		}
	}
	return false
}

// WriteFiles writes the stream of cfg (all its splits, merged as Merged
// does) to dir as JSON lines files of eventsPerFile events each, the last
// one possibly shorter: events-000000.json, events-000001.json, ... (more
// digits if there are more than a million files), so that the files'
// lexical order is the events' order. Each line is AppendJSONLine's.
//
// Each file is written under a temporary name starting with a dot,
// synced, then renamed, so that a reader never sees a partial file under
// a final name. It creates dir if needed, replaces files of the same
// names and leaves other files alone, so use a new directory. cfg.Events
// must be set: WriteFiles refuses unbounded streams. It is safe for
// concurrent use with distinct directories.
func WriteFiles(cfg Config, dir string, eventsPerFile int) error {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Events <= 0 {
		return errors.New("nexmark generator: WriteFiles needs Config.Events > 0")
	}
	if eventsPerFile <= 0 {
		return fmt.Errorf("nexmark generator: eventsPerFile = %d, want > 0", eventsPerFile)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	files := (cfg.Events + int64(eventsPerFile) - 1) / int64(eventsPerFile)
	width := max(6, len(fmt.Sprint(files-1)))
	m := NewMerged(cfg)
	var e model.Event
	var buf []byte
	for i := range files {
		n := min(int64(eventsPerFile), cfg.Events-i*int64(eventsPerFile))
		name := filepath.Join(dir, fmt.Sprintf("events-%0*d.json", width, i))
		if err := writeFile(name, func(w *bufio.Writer) error {
			for range n {
				if !m.Next(&e) {
					return errors.New("nexmark generator: stream ended early") // cannot happen
				}
				var err error
				if buf, err = AppendJSONLine(buf[:0], &e); err != nil {
					return err
				}
				if _, err := w.Write(buf); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// writeFile writes name atomically (atomicfile.Replace: a temporary file
// of the same directory, synced, then renamed), through a buffer.
func writeFile(name string, write func(*bufio.Writer) error) error {
	return atomicfile.Replace(filepath.Dir(name), filepath.Base(name), func(f io.Writer) error {
		w := bufio.NewWriterSize(f, 1<<20)
		if err := write(w); err != nil {
			return err
		}
		return w.Flush()
	})
}
