package runtime

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// FilesOptions tune a Files source. The zero value is the default.
type FilesOptions struct {
	// MaxFilesPerTrigger caps the number of new files in one batch. The
	// default, 0, takes every file available.
	MaxFilesPerTrigger int
	// Name names the source in progress reports and the checkpoint, which
	// keeps the processed-file log under it. The default is "files:"
	// followed by the source's Root, so that every spelling of one
	// directory names one source.
	Name string
	// MaxLineBytes is the longest line, without its newline, that Read
	// accepts; a longer line is an error naming its file and line. The
	// default is 64 MiB. It bounds the memory one line may take.
	MaxLineBytes int
}

// filesPartition is the partition of every record of a Files source: the
// files of a directory have no order among themselves that a per-partition
// watermark could use, so they count as one.
const filesPartition = "files"

// defaultMaxLineBytes is the default of FilesOptions.MaxLineBytes.
const defaultMaxLineBytes = 64 << 20

// Files returns a source over the JSON-lines files in dir: every file whose
// name ends in ".json" or ".jsonl" and does not start with "." or "_".
// Writers should create a file under such a hidden name and rename it into
// place when it is complete: a file with a visible name is read once, when
// it first appears, and a later append to it is never seen.
//
// Files are taken in lexical order of name, each at most once. The offset
// is the processed-file log: the JSON array of the names of all files read
// so far, sorted, relative to the source's root. So a file that appears
// later is read even when its name sorts before files already read, and
// restarting from a checkpoint reads neither a file twice nor one too few.
// The log grows by one name per file and is stored with every batch; a
// directory that receives millions of files should be rotated into a new
// query.
//
// Files resolves dir once, when called: made absolute and clean, with
// symbolic links resolved (of a directory that does not exist yet, those of
// its longest existing parent), it is the source's root, which Root
// returns, the directory read, and part of the default Name. So "in",
// "./in/", the absolute path and a link to it all share one processed-file
// log and no file is read twice. A link on the way to dir that is later
// pointed elsewhere is not followed until the source is made again, which
// then has a new default Name and so starts reading from scratch.
//
// Each non-blank line of a file is a Record with Partition "files" and
// Position "name:line" (lines numbered from 1, blank lines counted). A
// trailing "\r" is dropped from each line. A directory that does not exist
// yet is an empty source.
//
// The source holds no mutable state: it is safe for concurrent use.
func Files(dir string, opts FilesOptions) Source {
	root := resolveRoot(dir)
	if opts.Name == "" {
		opts.Name = "files:" + root
	}
	if opts.MaxLineBytes == 0 {
		opts.MaxLineBytes = defaultMaxLineBytes
	}
	return &filesSource{root: root, opts: opts}
}

type filesSource struct {
	root string
	opts FilesOptions
}

func (s *filesSource) Name() string { return s.opts.Name }

// Root returns the directory the source reads: the dir given to Files,
// absolute, clean and with symbolic links resolved as they were when Files
// was called.
func (s *filesSource) Root() string { return s.root }

// resolveRoot returns dir made absolute and clean, with its symbolic links
// resolved. Of a path that does not exist yet it resolves the longest
// existing parent and appends the rest, cleaned. When resolving fails
// otherwise (a loop of links, a parent that cannot be searched), it
// settles for the absolute clean path: the source will then fail to list
// the directory and say why.
func resolveRoot(dir string) string {
	// An existing path is resolved as given: EvalSymlinks takes a ".."
	// after a link to mean the link target's parent, as the kernel does,
	// where filepath.Abs would drop the link lexically.
	real, err := filepath.EvalSymlinks(dir)
	if err == nil {
		if abs, err := filepath.Abs(real); err == nil {
			return abs
		}
		return real
	}
	abs, absErr := filepath.Abs(dir)
	if absErr != nil {
		return filepath.Clean(dir)
	}
	rest := ""
	for path := abs; errors.Is(err, fs.ErrNotExist); {
		parent := filepath.Dir(path)
		if parent == path {
			break
		}
		rest = filepath.Join(filepath.Base(path), rest)
		path = parent
		if real, err = filepath.EvalSymlinks(path); err == nil {
			return filepath.Join(real, rest)
		}
	}
	return abs
}

func (s *filesSource) validate() error {
	var errs []error
	if s.opts.MaxFilesPerTrigger < 0 {
		errs = append(errs, fmt.Errorf("MaxFilesPerTrigger %d is negative", s.opts.MaxFilesPerTrigger))
	}
	if s.opts.MaxLineBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxLineBytes %d is negative", s.opts.MaxLineBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("streamgen: files source %q: options: %w", s.opts.Name, err)
	}
	return nil
}

// Available lists the directory: the offset of every complete file in it.
func (s *filesSource) Available(ctx context.Context) (json.RawMessage, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(s.root)
	if errors.Is(err, fs.ErrNotExist) {
		return json.RawMessage("[]"), nil
	}
	if err != nil {
		return nil, fmt.Errorf("streamgen: files source %q: list: %w", s.opts.Name, err)
	}
	// os.ReadDir sorts by name, which is the order the offset keeps.
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() || !isInputFile(e.Name()) {
			continue
		}
		names = append(names, e.Name())
	}
	return s.encode(names)
}

// isInputFile reports whether name is a complete JSON-lines file, as
// opposed to another kind of file or one a writer has not finished.
func isInputFile(name string) bool {
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
		return false
	}
	return strings.HasSuffix(name, ".json") || strings.HasSuffix(name, ".jsonl")
}

// Next adds to committed the first files of upTo, in lexical order, that
// committed lacks, at most MaxFilesPerTrigger of them.
func (s *filesSource) Next(ctx context.Context, committed, upTo json.RawMessage, limit ReadLimit) (json.RawMessage, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	done, err := s.decode(committed, "committed")
	if err != nil {
		return nil, err
	}
	available, err := s.decode(upTo, "upTo")
	if err != nil {
		return nil, err
	}
	var fresh []string
	for _, name := range available {
		if _, found := slices.BinarySearch(done, name); found {
			continue
		}
		fresh = append(fresh, name)
		if limit == Limited && len(fresh) == s.opts.MaxFilesPerTrigger {
			break
		}
	}
	if len(fresh) == 0 {
		return committed, nil
	}
	next := append(slices.Clone(done), fresh...)
	slices.Sort(next)
	return s.encode(next)
}

// Read reads, in lexical order, the files named in end and not in start.
func (s *filesSource) Read(ctx context.Context, start, end json.RawMessage, fn func(Record) error) error {
	if err := s.validate(); err != nil {
		return err
	}
	done, err := s.decode(start, "start")
	if err != nil {
		return err
	}
	all, err := s.decode(end, "end")
	if err != nil {
		return err
	}
	var line []byte // reused across files: Record.Data lives for one callback
	for _, name := range all {
		if _, found := slices.BinarySearch(done, name); found {
			continue
		}
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("streamgen: files source %q: %w", s.opts.Name, err)
		}
		if line, err = s.readFile(ctx, name, line, fn); err != nil {
			return err
		}
	}
	return nil
}

// readFile calls fn for each non-blank line of the file name. line is a
// buffer to reuse; readFile returns it, perhaps grown.
func (s *filesSource) readFile(ctx context.Context, name string, line []byte, fn func(Record) error) ([]byte, error) {
	f, err := os.Open(filepath.Join(s.root, name))
	if err != nil {
		return line, fmt.Errorf("streamgen: files source %q: %w", s.opts.Name, err)
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for number := 1; ; number++ {
		var eof bool
		line, eof, err = readLine(r, line[:0], s.opts.MaxLineBytes)
		if err != nil {
			return line, fmt.Errorf("streamgen: files source %q: %s:%d: %w", s.opts.Name, name, number, err)
		}
		if len(bytes.TrimSpace(line)) > 0 {
			rec := Record{
				Partition: filesPartition,
				Data:      line,
				Position:  name + ":" + strconv.Itoa(number),
			}
			if err := fn(rec); err != nil {
				return line, err
			}
		}
		if eof {
			return line, nil
		}
		// A cancelled query stops within a few thousand lines rather
		// than at the end of a large file.
		if number%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return line, fmt.Errorf("streamgen: files source %q: %w", s.opts.Name, err)
			}
		}
	}
}

// errLineTooLong is wrapped by the error Read returns for a line longer than
// FilesOptions.MaxLineBytes.
var errLineTooLong = errors.New("line too long")

// readLine appends to b the next line of r without its "\n" or "\r\n". eof
// is true when the line was the last one: the file does not end in a
// newline, or the line is the empty remainder after the final newline.
func readLine(r *bufio.Reader, b []byte, limit int) (line []byte, eof bool, err error) {
	for {
		chunk, err := r.ReadSlice('\n')
		b = append(b, chunk...)
		switch {
		case err == nil:
			b = bytes.TrimSuffix(b[:len(b)-1], []byte{'\r'})
		case errors.Is(err, bufio.ErrBufferFull):
			// Only a "\r" right before the newline is dropped, so the
			// line will be at least len(b)-1 bytes long.
			if len(b)-1 > limit {
				return b, false, fmt.Errorf("%w: more than %d bytes", errLineTooLong, limit)
			}
			continue
		case errors.Is(err, io.EOF):
			b = bytes.TrimSuffix(b, []byte{'\r'})
			eof = true
		default:
			return b, false, err
		}
		if len(b) > limit {
			return b, false, fmt.Errorf("%w: more than %d bytes", errLineTooLong, limit)
		}
		return b, eof, nil
	}
}

// decode reads a processed-file log. nil (a new query) is the empty log.
// The log is kept sorted; decode sorts again so that a hand-edited
// checkpoint cannot break the binary searches.
func (s *filesSource) decode(offset json.RawMessage, what string) ([]string, error) {
	if len(offset) == 0 {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal(offset, &names); err != nil {
		return nil, fmt.Errorf("streamgen: files source %q: %s offset: %w", s.opts.Name, what, err)
	}
	slices.Sort(names)
	return slices.Compact(names), nil
}

func (s *filesSource) encode(names []string) (json.RawMessage, error) {
	if names == nil {
		names = []string{} // "[]", not "null"
	}
	b, err := json.Marshal(names)
	if err != nil {
		return nil, fmt.Errorf("streamgen: files source %q: offset: %w", s.opts.Name, err)
	}
	return b, nil
}
