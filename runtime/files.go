package runtime

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"
)

// FilesOptions tune a Files source. The zero value is the default.
type FilesOptions struct {
	// MaxFilesPerTrigger caps the number of new files in one batch. The
	// default, 0, takes every file available.
	MaxFilesPerTrigger int
	// MaxBytesPerTrigger caps the bytes (of the files as stored,
	// compressed or not) of the new files in one batch, as Spark's option
	// of that name: a batch takes files, in the order it takes them, while
	// their sizes add up to no more than it, and at least one file. The
	// default, 0, sets no cap. It cannot be set with MaxFilesPerTrigger.
	MaxBytesPerTrigger int64
	// LatestFirst takes the newest files first, by modification time, as
	// Spark's latestFirst: with a per-batch cap, a backlog is read from
	// its newest end, and older files wait for batches with room for them
	// (the processed-file log keeps them from being forgotten, whatever
	// MaxFileAge). With MaxFilesPerTrigger, MaxFileAge is not used at all,
	// as in Spark: the log forgets no file from then on, and a file that
	// appears with an old modification time is read (unless it is older
	// than what a log compacted by an earlier start without them forgot:
	// such a file is taken as read). Within a batch files are read oldest
	// first either way.
	LatestFirst bool
	// Name names the source in progress reports and the checkpoint, which
	// keeps the processed-file log under it. The default is "files:"
	// followed by the source's Root, so that every spelling of one
	// directory names one source.
	Name string
	// MaxLineBytes is the longest line, without its newline, that Read
	// accepts. The default is 64 MiB. It bounds the memory one line may
	// take: of a longer line Read keeps only a prefix and skips the rest.
	MaxLineBytes int
	// FailOnBadFiles makes a bad input an error from Read, which fails the
	// batch, and so every retry of it until someone moves the input away:
	// Spark's ignoreCorruptFiles=false. A bad input is a file that cannot
	// be opened or read, or is no longer a regular file, or a line longer
	// than MaxLineBytes. By default (false) Read reports each as a Record
	// whose Err is set, which the query sends to its dead-letter sink, and
	// goes on. Either way Available skips entries that are not regular
	// files when it lists them.
	FailOnBadFiles bool
	// MinFileAge holds a file back until its modification time is at least
	// MinFileAge before Clock(), so that a file a writer is still
	// appending to, against the contract on Files, is read only once it
	// has been left alone that long. The default, 0, lists a file as soon
	// as it appears. A file whose modification time is in the future is
	// held back until the clock passes it too.
	MinFileAge time.Duration
	// Clock tells the time that MinFileAge is measured against. The default
	// is time.Now. It is called from the goroutine that calls Available.
	Clock func() time.Time
	// WaitForPath lets a query start on a directory that does not exist
	// yet, as an empty source until it appears. By default Start fails on
	// it ("path does not exist"), since a mistyped path would otherwise
	// wait for input for ever.
	WaitForPath bool
	// MaxFileAge bounds the processed-file log, as Spark's maxFileAge: a
	// file whose modification time is more than MaxFileAge before that of
	// the newest file read is forgotten, and a file that old is ignored
	// when it is listed, read or not. So the log, stored with every
	// batch, holds the files of the last MaxFileAge (by their
	// modification times), not every file ever read. The default is 7
	// days. A file that appears with a modification time that far behind
	// the newest one read is not read, and cannot be told from one read
	// and forgotten: a file copied in with its old time kept (cp -p,
	// rsync -t) is skipped without a word. Make MaxFileAge longer than
	// the spread of the times of the files a query is given.
	MaxFileAge time.Duration
	// Recursive reads the files in the directories within the source's
	// directory too, at any depth, as Spark's recursiveFileLookup: a file
	// is named by its path from the source's directory ("2026/12/06/a.json"),
	// in the processed-file log and in record positions. Hidden
	// directories (a name starting with ".", or "_" without a "=") and
	// ArchiveDir are not
	// read, nor are links to directories followed. By default only the
	// files directly in the directory are read.
	Recursive bool
	// PathGlobFilter, when set, is the pattern (path.Match's) of the names
	// of the files to read, in place of ".json" and ".jsonl", as Spark's
	// pathGlobFilter: "*.log" reads JSON lines from files named so, and
	// "*.log.gz" from such files compressed. It matches a file's name, not
	// its directory's; hidden names are never read.
	PathGlobFilter string
	// CleanSource says what becomes of a file once the batch that read it
	// is committed and durable, as Spark's cleanSource option: CleanOff (the default)
	// leaves it, CleanDelete deletes it and CleanArchive moves it to
	// ArchiveDir. See FilesSource.
	CleanSource CleanMode
	// ArchiveDir is where CleanArchive moves the files read, under their
	// names: Spark's sourceArchiveDir. It may be a directory inside the
	// source's (which the source does not read), and is made when missing.
	ArchiveDir string
}

// CleanMode says what a files source does with the files it has read:
// FilesOptions.CleanSource.
type CleanMode uint8

const (
	// CleanOff leaves the files read where they are.
	CleanOff CleanMode = iota
	// CleanDelete deletes each file once the batch that read it is
	// committed.
	CleanDelete
	// CleanArchive moves each file to FilesOptions.ArchiveDir once the
	// batch that read it is committed.
	CleanArchive
)

func (m CleanMode) String() string {
	switch m {
	case CleanOff:
		return "off"
	case CleanDelete:
		return "delete"
	case CleanArchive:
		return "archive"
	}
	return fmt.Sprintf("CleanMode(%d)", uint8(m))
}

// DefaultMaxFileAge is the default of FilesOptions.MaxFileAge, Spark's.
const DefaultMaxFileAge = 7 * 24 * time.Hour

// filesPartition is the partition of every record of a Files source: the
// files of a directory have no order among themselves that a per-partition
// watermark could use, so they count as one.
const filesPartition = "files"

// defaultMaxLineBytes is the default of FilesOptions.MaxLineBytes.
const defaultMaxLineBytes = 64 << 20

// maxLinePrefix is the most of a too-long line that Read passes on as the
// Data of its Err record: enough to recognise the line by.
const maxLinePrefix = 1 << 10

// FilesSource returns a source over the JSON-lines files in dir: every file whose
// name ends in ".json" or ".jsonl" and is not hidden: does not start
// with ".", nor with "_" unless it holds a "=", nor end in "._COPYING_",
// as Spark's file source hides names.
// Other visible files are left out (where Spark's file source reads
// every file), with a warning once for each extension;
// FilesOptions.PathGlobFilter picks the files by another pattern.
// FilesOptions.Recursive reads the directories within dir too.
//
// dir may be a glob, as Spark's file source path: from its first element
// that holds "*", "?" or "[" on, each element is a pattern (path.Match's,
// within one directory level) that names directories or files under the
// directory before it ("logs/2026-*/events", "in/*/*.jsonl"). A file the
// whole glob names is read whatever its extension; so are, with the
// extensions above (or PathGlobFilter), the files directly in a directory
// it names, and with Recursive the files at any depth below one. Files
// are named by their paths from that directory, as with Recursive. As in
// Spark, a glob that names nothing yet, its directory included, is not
// an error: the query waits for files.
//
// A file whose name ends in ".json" or ".jsonl" followed by ".gz",
// ".bz2" or ".zst" is read decompressed (gzip, of one member or several
// in a row, zero bytes after the last taken for padding as gzip(1) takes
// them; bzip2; zstd, of one frame or several), as Spark tells a
// file's compression by its extension. Its checksums come at the end of
// what they cover, so such a file is read twice: once whole, to check it,
// then for its lines; a file that is damaged, cut short or not
// compressed as its name says gives no lines, only a dead letter naming
// it and what is wrong, and a file of no bytes gives no lines.
//
// Writers must make a file appear complete: write it under a hidden name
// (starting with "." or "_") in dir, or anywhere on the same file system,
// then rename it to its visible name, as Spark's file source requires too.
// A file with a visible name is read once, when it is first listed, and a
// later append to it is never seen. When a writer cannot rename, set
// FilesOptions.MinFileAge so that a file is listed only once it has not
// been modified for that long.
//
// Only regular files are read. Available skips, with a warning logged once
// while it stays so, an entry that is a named pipe (which a read would
// block on), a directory or another file that is not regular. A link to a
// regular file is read through; a broken link (dangling, a loop of links,
// to a directory or to a pipe) is listed, and becomes one dead letter
// naming it and why, once.
//
// Files are taken oldest first by modification time (then by name), as
// Spark's file source takes them (newest first with LatestFirst), each at
// most once, as many as MaxFilesPerTrigger or MaxBytesPerTrigger let a
// batch take. The offset
// of a batch names the batch's files and holds the processed-file log:
// the names of the files read, with their modification times. So a file
// that appears later is read even when its name sorts before files
// already read, a batch run again reads exactly the files of its first
// attempt, and restarting from a checkpoint reads neither a file twice
// nor one too few. The log is compacted at every batch, as Spark's
// file-source log is purged by its maxFileAge: it forgets the files more
// than MaxFileAge (7 days by default) older, by modification time, than the
// newest file read (but never one as old as a file listed and still to
// read), and a file that old is taken as read when it is listed. So the
// offset stored with each batch, and the work of planning a batch beyond
// listing the directory, are bounded by the files of the last MaxFileAge,
// not by every file ever read (except with LatestFirst and
// MaxFilesPerTrigger, whose log, as Spark's, forgets nothing and grows
// with every file read). Each batch still lists the directory, and
// asks for the modification time of each file the log does not hold,
// forgotten ones included: move files that have been read out of the
// directory when it grows large.
//
// With FilesOptions.CleanSource, the files read are deleted, or moved to
// ArchiveDir under their names, once the batch that read them is
// committed and durable (never before: a batch that fails keeps its
// files, to read them again; with SyncInterval, a batch's files wait for
// the sync that makes it durable, so that a machine crash that takes the
// batch back finds them), as Spark's cleanSource does; the directory then
// holds what is still to be read, and listing it stays cheap. Cleaning
// runs on the query's goroutine. Moving links the file into the archive
// (or, on another file system, copies it there, synced) before it
// removes it, so a crash leaves a file in both places, never in neither;
// a process that dies between a batch's commit and its clean leaves
// that batch's files (with SyncInterval, those of the batches of the
// last interval), which the next start cleans at its first batch that
// reads files: every file of the log still there as it was read.
// A file a record of which became a dead letter that does not hold it
// whole (a fault in a compressed file, a line past MaxLineBytes, or, in a
// query without a dead-letter sink, any dead letter, logged without its
// bytes) is left in place, with a warning, so that no record is lost.
// A file is cleaned only while its modification time is the one read (a
// file written since under the name of one read, which is not read
// again, as in Spark, is left), and never replaces a file of other bytes
// in the archive; what cannot be cleaned is left in place, with a
// warning. As in Spark, no other query should read a directory that one
// cleans.
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
// fails the query's Start ("path does not exist"), and a path that is not
// a directory too; with FilesOptions.WaitForPath, a directory that does
// not exist yet is an empty source until it appears. Bad input is reported
// in Records with Err set, in place and in the same order on every Read of
// the same offsets (see FilesOptions.FailOnBadFiles):
//
//   - a file that cannot be opened, that is not a regular file, or whose
//     reading fails: one Record with Position the file's name and no Data,
//     after the lines read before the failure;
//   - a line longer than MaxLineBytes: a Record with Position "name:line"
//     whose Data is the line's first 1 KiB (or MaxLineBytes if less);
//     the lines after it are read as usual.
//
// The source is safe for concurrent use.
func FilesSource(dir string, opts FilesOptions) Source {
	dir, glob := splitGlob(dir)
	root := resolveRoot(dir)
	if opts.Name == "" {
		opts.Name = "files:" + root
		if glob != nil {
			opts.Name += "/" + strings.Join(glob, "/")
		}
	}
	if opts.MaxLineBytes == 0 {
		opts.MaxLineBytes = defaultMaxLineBytes
	}
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.MaxFileAge == 0 {
		opts.MaxFileAge = DefaultMaxFileAge
	}
	if opts.LatestFirst && opts.MaxFilesPerTrigger > 0 {
		// Spark's rule: the newest files first, a few a batch, would
		// otherwise have older files left behind for ever.
		opts.MaxFileAge = math.MaxInt64
	}
	src := &filesSource{root: root, glob: glob, opts: opts}
	if opts.ArchiveDir != "" {
		src.archive = resolveRoot(opts.ArchiveDir)
	}
	return src
}

type filesSource struct {
	root string
	// glob are the patterns of the elements of the path after root, when
	// it was given as a glob (see FilesSource).
	glob []string
	opts FilesOptions
	// archive is ArchiveDir, resolved as root is.
	archive string

	mu sync.Mutex
	// skipped holds the names Available last skipped for not being regular
	// files, so that it warns of each once while it stays so, and forgets
	// it once it is gone or mended.
	skipped map[string]bool
	// leftOut holds the kinds of names (their extensions) Available has
	// warned of leaving out, once each.
	leftOut map[string]bool
	// kept are the files CleanSource leaves in place, each warned of
	// once (true once it is): a record of theirs is a dead letter that
	// does not hold it whole (see keepFile).
	kept map[string]bool
	// swept is set once Committed has cleaned the files of the log
	// before its first batch (FilesOptions.CleanSource).
	swept bool
}

func (s *filesSource) Name() string { return s.opts.Name }

// Skipped returns the number of entries the last listing skipped for not
// being files to read (named pipes, directories), which progress reports
// count (SourceProgress.NumSkippedInputs).
func (s *filesSource) Skipped() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int64(len(s.skipped))
}

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
	if _, err := path.Match(s.opts.PathGlobFilter, ""); err != nil {
		errs = append(errs, fmt.Errorf("PathGlobFilter %q: %w", s.opts.PathGlobFilter, err))
	}
	for _, p := range s.glob {
		if _, err := path.Match(p, ""); err != nil {
			errs = append(errs, fmt.Errorf("path pattern %q: %w", strings.Join(s.glob, "/"), err))
			break
		}
	}
	if s.opts.MaxBytesPerTrigger < 0 {
		errs = append(errs, fmt.Errorf("MaxBytesPerTrigger %d is negative", s.opts.MaxBytesPerTrigger))
	}
	if s.opts.MaxFilesPerTrigger > 0 && s.opts.MaxBytesPerTrigger > 0 {
		errs = append(errs, errors.New("MaxFilesPerTrigger and MaxBytesPerTrigger are both set: set one"))
	}
	if s.opts.MaxLineBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxLineBytes %d is negative", s.opts.MaxLineBytes))
	}
	if s.opts.MinFileAge < 0 {
		errs = append(errs, fmt.Errorf("MinFileAge %v is negative", s.opts.MinFileAge))
	}
	if s.opts.MaxFileAge < 0 {
		errs = append(errs, fmt.Errorf("MaxFileAge %v is negative", s.opts.MaxFileAge))
	}
	switch {
	case s.opts.CleanSource > CleanArchive:
		errs = append(errs, fmt.Errorf("CleanSource %v is not a CleanMode", s.opts.CleanSource))
	case s.opts.CleanSource == CleanArchive && s.opts.ArchiveDir == "":
		errs = append(errs, errors.New("CleanSource is CleanArchive but ArchiveDir is not set"))
	case s.opts.CleanSource == CleanArchive && s.archive == s.root:
		errs = append(errs, fmt.Errorf("ArchiveDir %s is the source's directory: the files would be moved where they are", s.opts.ArchiveDir))
	case s.opts.CleanSource != CleanArchive && s.opts.ArchiveDir != "":
		errs = append(errs, fmt.Errorf("ArchiveDir is set but CleanSource is %v, not CleanArchive", s.opts.CleanSource))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	return nil
}

// CheckStart refuses, before the query starts, options that are not
// valid, a directory that does not exist (unless WaitForPath), and a path
// that is not a directory.
func (s *filesSource) CheckStart() error {
	if err := s.validate(); err != nil {
		return err
	}
	s.mu.Lock()
	s.swept = false // a query starts (again): its first clean sweeps
	s.mu.Unlock()
	info, err := os.Stat(s.root)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if s.opts.WaitForPath || s.glob != nil { // a glob that names no file yet, as Spark's
			return nil
		}
		return fmt.Errorf("path does not exist: %s (create it, or set FilesOptions.WaitForPath to wait for it)", s.root)
	case err != nil:
		return err
	case !info.IsDir():
		return notDirError(s.root, info.Mode())
	}
	return nil
}

// notDirError says that the source's path is not a directory.
func notDirError(root string, mode fs.FileMode) error {
	what := "a file"
	if !mode.IsRegular() {
		what = describeType(mode)
	}
	return fmt.Errorf("%s is %s, not a directory: give Files the directory that holds the input files", root, what)
}

// Available lists the directory: the offset of every input file in it that
// is a regular file and old enough.
func (s *filesSource) Available(ctx context.Context) (json.RawMessage, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	skipped := make(map[string]error)
	entries, err := s.list(skipped)
	if errors.Is(err, fs.ErrNotExist) {
		if !s.opts.WaitForPath && s.glob == nil { // a glob names no file yet, as Spark's
			return nil, fmt.Errorf("path does not exist: %s (it was removed; set FilesOptions.WaitForPath to wait for it)", s.root)
		}
		return s.encode(filesOffset{})
	}
	if err != nil {
		if info, serr := os.Stat(s.root); serr == nil && !info.IsDir() {
			return nil, notDirError(s.root, info.Mode())
		}
		return nil, fmt.Errorf("list %s: %w", s.root, err)
	}
	// A file written at the cutoff or before it is old enough.
	cutoff := s.opts.Clock().Add(-s.opts.MinFileAge)
	// list sorts by name, which is the order the offset keeps.
	var listed filesOffset
	for _, entry := range entries {
		name, e := entry.name, entry.DirEntry
		if !(entry.named && visible(e.Name())) && !s.isInput(e.Name()) {
			if !e.IsDir() && s.opts.PathGlobFilter == "" { // a directory such as ArchiveDir, or one Recursive reads
				s.warnLeftOut(name)
			}
			continue
		}
		modTime, present, err := s.inspect(name, e)
		if err != nil {
			if e.Type()&fs.ModeSymlink != 0 {
				// A broken link (dangling, a loop, to a directory or to
				// anything but a regular file) is listed, with the
				// link's own modification time: Read turns it into one
				// dead letter naming it and why, and it is then in the
				// processed-file log, so it is reported once.
				if info, lerr := e.Info(); lerr == nil {
					listed.add(name, info.ModTime())
				}
				continue
			}
			skipped[name] = err
			continue
		}
		if !present {
			continue // renamed or removed since the listing
		}
		if s.opts.MinFileAge > 0 && modTime.After(cutoff) {
			continue
		}
		listed.add(name, modTime)
	}
	s.warnSkipped(skipped)
	if !slices.ContainsFunc(listed.ModTimes, func(t int64) bool { return t != 0 }) {
		listed.ModTimes = nil // none known
	}
	return s.encode(listed)
}

// entry is a directory entry the source lists, with its name: its path
// from the source's root, "/" between directories.
type entry struct {
	name string
	fs.DirEntry
	// named is set for a file the source's glob names itself, which is
	// read whatever its extension.
	named bool
}

// list returns the entries of the source's directory, and with Recursive
// of the directories in it, but for hidden ones (a name starting with
// "." or "_") and ArchiveDir, sorted by name. A directory within that
// cannot be read is left out, and put in skipped with why (gone since it
// was listed: left out alone); the error is of the root's listing.
func (s *filesSource) list(skipped map[string]error) ([]entry, error) {
	if s.glob != nil {
		return s.listGlob(skipped)
	}
	top, err := os.ReadDir(s.root)
	if err != nil {
		return nil, err
	}
	entries := make([]entry, len(top))
	for i, e := range top {
		entries[i] = entry{name: e.Name(), DirEntry: e}
	}
	if !s.opts.Recursive {
		return entries, nil // os.ReadDir sorts them
	}
	for i := 0; i < len(entries); i++ {
		dir := entries[i]
		if !dir.IsDir() || !visible(dir.Name()) {
			continue
		}
		path := filepath.Join(s.root, dir.name)
		if s.archive != "" && path == s.archive {
			continue
		}
		within, err := os.ReadDir(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			skipped[dir.name] = err
			continue
		}
		for _, e := range within {
			entries = append(entries, entry{name: dir.name + "/" + e.Name(), DirEntry: e})
		}
	}
	slices.SortFunc(entries, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return entries, nil
}

// inspect tells whether the directory entry e is a regular file once links
// are followed: it returns an error saying why not, or the file's
// modification time, which is zero when the listing's file type tells
// enough and MinFileAge does not need it (Next then asks for the times of
// the files it has not read: see modTimeOf). present is false when the
// entry has gone since the listing.
func (s *filesSource) inspect(name string, e fs.DirEntry) (modTime time.Time, present bool, err error) {
	if e.Type().IsRegular() {
		if s.opts.MinFileAge == 0 {
			return time.Time{}, true, nil // Next asks for it if it needs it
		}
		info, err := e.Info() // Lstat, which for a regular file is Stat
		if errors.Is(err, fs.ErrNotExist) {
			return time.Time{}, false, nil
		}
		if err != nil {
			return time.Time{}, false, err
		}
		return info.ModTime(), true, nil
	}
	path := filepath.Join(s.root, name)
	info, err := os.Stat(path)
	if err != nil {
		// A dangling link stays a problem; an entry that has gone since
		// the listing was renamed or removed, as a writer may do.
		if _, lerr := os.Lstat(path); errors.Is(lerr, fs.ErrNotExist) {
			return time.Time{}, false, nil
		}
		return time.Time{}, false, err
	}
	if !info.Mode().IsRegular() {
		return time.Time{}, false, fmt.Errorf("%w: %s is %s", errNotRegular, path, describeType(info.Mode()))
	}
	return info.ModTime(), true, nil
}

// warnLeftOut warns, once for each extension, that a visible file the
// source does not read (not .json nor .jsonl, compressed or not, where Spark's file source
// reads every file) is left out: hidden names (a "." or "_" in front, as
// a writer names a file it has not finished) and ".tmp" ones are not.
func (s *filesSource) warnLeftOut(name string) {
	ext := filepath.Ext(name)
	if !visible(path.Base(name)) || ext == ".tmp" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.leftOut[ext] {
		return
	}
	if s.leftOut == nil {
		s.leftOut = map[string]bool{}
	}
	s.leftOut[ext] = true
	slog.Warn("streamgen: files source: leaving out files that are not .json or .jsonl (the source reads JSON lines from those alone, and from those compressed: .json.gz, .jsonl.zst, ...)",
		"source", s.opts.Name, "file", name, "extension", ext)
}

// warnSkipped logs a warning for each entry in skipped, which maps a name
// Available skipped to why, unless the previous Available skipped it too.
func (s *filesSource) warnSkipped(skipped map[string]error) {
	s.mu.Lock()
	var fresh []string
	for name := range skipped {
		if !s.skipped[name] {
			fresh = append(fresh, name)
		}
	}
	s.skipped = make(map[string]bool, len(skipped))
	for name := range skipped {
		s.skipped[name] = true
	}
	s.mu.Unlock()
	slices.Sort(fresh)
	for _, name := range fresh {
		slog.Warn("streamgen: files source: skipping an entry that is not a regular file, or a directory within that cannot be listed",
			"source", s.opts.Name, "file", name, "error", skipped[name])
	}
}

// errNotRegular is wrapped by the error of an input that is not a regular
// file once links are followed.
var errNotRegular = errors.New("not a regular file")

// describeType names the type of a file that is not regular.
func describeType(mode fs.FileMode) string {
	switch {
	case mode.IsDir():
		return "a directory"
	case mode&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case mode&fs.ModeSocket != 0:
		return "a socket"
	case mode&fs.ModeDevice != 0:
		return "a device"
	default:
		return "of type " + mode.Type().String()
	}
}

// splitGlob splits dir, when it is a glob, into the directory of its
// elements before the first that holds a pattern's special character
// ("*", "?", "[" or "\\"), and the elements from there on; glob is nil
// when dir has none.
func splitGlob(dir string) (root string, glob []string) {
	elems := strings.Split(filepath.ToSlash(dir), "/")
	for i, e := range elems {
		if strings.ContainsAny(e, "*?[\\") {
			root = filepath.FromSlash(strings.Join(elems[:i], "/"))
			switch {
			case root == "" && i > 0: // "/x*": the root directory
				root = string(filepath.Separator)
			case root == "":
				root = "."
			}
			for _, e := range elems[i:] {
				if e != "" && e != "." {
					glob = append(glob, e)
				}
			}
			return root, glob
		}
	}
	return dir, nil
}

// listGlob lists the files the source's glob names (see FilesSource),
// reading only the directories that may hold some, sorted by name.
func (s *filesSource) listGlob(skipped map[string]error) ([]entry, error) {
	n := len(s.glob)
	// matches reports whether the first k elements of a path match the
	// glob's first k patterns.
	matches := func(elems []string, k int) bool {
		for i := range k {
			if ok, _ := path.Match(s.glob[i], elems[i]); !ok { // validate checked the patterns
				return false
			}
		}
		return true
	}
	var out []entry
	var walk func(rel string, elems []string) error
	walk = func(rel string, elems []string) error {
		within, err := os.ReadDir(filepath.Join(s.root, filepath.FromSlash(rel)))
		switch {
		case err != nil && rel == "":
			return err
		case errors.Is(err, fs.ErrNotExist):
			return nil // removed since it was listed
		case err != nil:
			skipped[rel] = err
			return nil
		}
		for _, e := range within {
			if !visible(e.Name()) {
				continue
			}
			at := append(elems[:len(elems):len(elems)], e.Name())
			name := path.Join(rel, e.Name())
			m := len(at)
			if e.IsDir() {
				if s.archive != "" && filepath.Join(s.root, filepath.FromSlash(name)) == s.archive {
					continue
				}
				if m <= n && matches(at, m) || m > n && s.opts.Recursive && matches(at, n) {
					if err := walk(name, at); err != nil {
						return err
					}
				}
				continue
			}
			switch {
			case m == n && matches(at, n):
				out = append(out, entry{name: name, DirEntry: e, named: true})
			case m == n+1 && matches(at, n), m > n+1 && s.opts.Recursive && matches(at, n):
				out = append(out, entry{name: name, DirEntry: e})
			}
		}
		return nil
	}
	if err := walk("", nil); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.name, b.name) })
	return out, nil
}

// isInput reports whether a file of the base name base is one to read: a
// complete JSON-lines file, perhaps compressed, or with PathGlobFilter one
// whose name it matches, as opposed to another kind of file or one a
// writer has not finished.
func (s *filesSource) isInput(base string) bool {
	if !visible(base) {
		return false
	}
	if s.opts.PathGlobFilter != "" {
		matched, _ := path.Match(s.opts.PathGlobFilter, base) // validate checked it
		return matched
	}
	base, _ = cutCompression(base)
	return strings.HasSuffix(base, ".json") || strings.HasSuffix(base, ".jsonl")
}

// visible reports whether a file or directory of the base name base is
// not hidden, by Spark's rule (HadoopFSUtils.shouldFilterOutPathName): its
// name does not start with ".", nor with "_" unless it holds a "=" (a
// partition directory's, "_src=a"), nor end in "._COPYING_" (a copy under
// way), as a writer names a file it has not finished.
func visible(base string) bool {
	return !strings.HasPrefix(base, ".") && !(strings.HasPrefix(base, "_") && !strings.Contains(base, "=")) &&
		!strings.HasSuffix(base, "._COPYING_")
}

// Visible reports whether a files source reads a file or directory of the
// base name base, rather than take it for hidden (see FilesSource).
func Visible(base string) bool { return visible(base) }

// compression names a file's compression, by its extension.
type compression uint8

const (
	uncompressed compression = iota
	gzipped                  // .gz
	bzipped                  // .bz2
	zstded                   // .zst
)

// cutCompression returns name without the extension of a compression the
// source reads, and that compression.
func cutCompression(name string) (string, compression) {
	for _, c := range []struct {
		ext string
		c   compression
	}{{".gz", gzipped}, {".bz2", bzipped}, {".zst", zstded}} {
		if base, found := strings.CutSuffix(name, c.ext); found {
			return base, c.c
		}
	}
	return name, uncompressed
}

func (c compression) String() string {
	switch c {
	case gzipped:
		return "gzip"
	case bzipped:
		return "bzip2"
	case zstded:
		return "zstd"
	}
	return "uncompressed"
}

// checkCompressed reads the whole of r, compressed with c, and returns an
// error if it cannot: a damaged file, or one not compressed so. A
// compressed file's checksums come at the end of what they cover (gzip's
// at the end of each member, zstd's of each frame), so a damaged file
// would give lines that are wrong before its error: its lines are handed
// on only once all of it is known good. A file whose content is no more
// than keepDecompressed comes back whole in content, so that it is not
// decompressed again; of a larger one content is nil. empty reports a
// file of no bytes, which holds no lines.
func checkCompressed(ctx context.Context, r *bufio.Reader, c compression) (content []byte, empty bool, err error) {
	if _, err := r.Peek(1); errors.Is(err, io.EOF) {
		return nil, true, nil
	}
	z, release, err := decompress(r, c)
	if err != nil {
		return nil, false, err
	}
	defer release()
	kept := make([]byte, 0, 64<<10)
	var scratch []byte // once kept is given up
	for reads := 1; ; reads++ {
		buf := scratch
		if kept != nil {
			if len(kept) == cap(kept) {
				kept = slices.Grow(kept, min(len(kept), keepDecompressed+1-len(kept)))
			}
			buf = kept[len(kept):cap(kept)]
		}
		n, err := z.Read(buf)
		if kept != nil {
			kept = kept[:len(kept)+n]
			if len(kept) > keepDecompressed {
				kept, scratch = nil, make([]byte, 64<<10)
			}
		}
		if err == io.EOF { // the decompressors' end of a whole stream, unwrapped
			return kept, false, nil
		}
		if err != nil {
			return nil, false, fmt.Errorf("not a whole %s file: %w", c, err)
		}
		if reads%64 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, false, err
			}
		}
	}
}

// lineBuffer is the size of the buffer a file's lines are read through:
// a longer line is read in pieces. (A variable for the tests.)
var lineBuffer = 64 << 10

// keepDecompressed is the most of a compressed file's content that
// checkCompressed keeps, so that a file that small is decompressed once.
// (A variable for the tests.)
var keepDecompressed = 8 << 20

// decompress returns a reader of the content of f, compressed with c, and
// a function that releases what the reader holds. A header that is not
// c's is the file's error.
func decompress(f io.Reader, c compression) (io.Reader, func(), error) {
	switch c {
	case gzipped:
		// Several members in a row, as gzip writes appended files, are
		// one stream.
		b, ok := f.(*bufio.Reader)
		if !ok {
			b = bufio.NewReader(f)
		}
		z, err := gzip.NewReader(b)
		if err != nil {
			return nil, nil, fmt.Errorf("not a whole gzip file: %w", err)
		}
		z.Multistream(false)
		return &gzipMembers{z: z, r: b}, func() { z.Close() }, nil
	case bzipped:
		return bzip2.NewReader(f), func() {}, nil
	case zstded:
		z, err := zstd.NewReader(f, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			return nil, nil, fmt.Errorf("not a whole zstd file: %w", err)
		}
		return z, z.Close, nil
	}
	return f, func() {}, nil
}

// gzipMembers reads the members of a gzip file one after another and,
// as gzip(1) does ("trailing zero bytes ignored"), takes zero bytes after
// the last for padding (a tape's, a preallocated file's) rather than a
// damaged member: a member begins with 0x1f, never 0. Other bytes after a
// member must be a whole member.
type gzipMembers struct {
	z    *gzip.Reader
	r    *bufio.Reader // z's input
	done bool
}

func (g *gzipMembers) Read(p []byte) (int, error) {
	for !g.done {
		n, err := g.z.Read(p)
		if err != io.EOF {
			return n, err
		}
		next, err := g.r.Peek(1)
		switch {
		case errors.Is(err, io.EOF):
			g.done = true
		case err != nil:
			return n, err
		case next[0] == 0:
			if err := onlyZeros(g.r); err != nil {
				return n, err
			}
			g.done = true
		default:
			if err := g.z.Reset(g.r); err != nil {
				if err == io.EOF { // not the whole stream's end
					err = io.ErrUnexpectedEOF
				}
				return n, err
			}
			g.z.Multistream(false)
		}
		if n > 0 {
			return n, nil
		}
	}
	return 0, io.EOF
}

// onlyZeros reads r to its end, and fails unless every byte is zero.
func onlyZeros(r *bufio.Reader) error {
	var at int64
	for {
		chunk, err := r.Peek(r.Buffered())
		if len(chunk) == 0 {
			chunk, err = r.Peek(1)
		}
		for i, c := range chunk {
			if c != 0 {
				return fmt.Errorf("gzip: byte %#x after %d zero bytes that follow a member: neither padding nor a member", c, at+int64(i))
			}
		}
		at += int64(len(chunk))
		r.Discard(len(chunk))
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Next returns the offset of the next batch after committed: the first
// files of upTo, oldest first by modification time (then by name), as
// Spark's file source takes them (newest first with LatestFirst), that
// the processed-file log of committed lacks and that are not older than
// MaxFileAge allows, at most MaxFilesPerTrigger of them or
// MaxBytesPerTrigger of their bytes, and the log with them added and
// compacted.
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
	seen := s.log(done, available)
	before := done.forgotten()
	var batch filesOffset
	// oldestLeft is the oldest modification time among the new files the
	// batch leaves for later: the log must not forget that far back.
	oldestLeft, left := int64(math.MaxInt64), false
	var fresh filesOffset // the new files, in order of name
	for i, name := range available.Files {
		if _, found := seen[name]; found {
			continue
		}
		modTime, present := s.modTimeOf(name, available.modTime(i))
		if !present {
			continue // removed since the listing
		}
		if modTime < before {
			continue // older than the log remembers: taken as read
		}
		fresh.Files = append(fresh.Files, name)
		fresh.ModTimes = append(fresh.ModTimes, modTime)
	}
	order := byModTime(&fresh)
	if s.opts.LatestFirst {
		slices.Reverse(order)
	}
	capped := limit != AllAvailable
	var size int64 // of the batch's files, with MaxBytesPerTrigger
	full := false
	for _, i := range order {
		name, modTime := fresh.Files[i], fresh.ModTimes[i]
		switch {
		case full || !capped:
		case s.opts.MaxFilesPerTrigger > 0:
			full = len(batch.Files) == s.opts.MaxFilesPerTrigger
		case s.opts.MaxBytesPerTrigger > 0:
			// As Spark takes files while their sizes add up to the cap:
			// a file past it ends the batch, though a smaller one after
			// it would fit.
			n := s.sizeOf(name)
			full = len(batch.Files) > 0 && size+n > s.opts.MaxBytesPerTrigger
			size += n
		}
		if full {
			oldestLeft, left = min(oldestLeft, modTime), true
			continue
		}
		batch.Files = append(batch.Files, name)
		batch.ModTimes = append(batch.ModTimes, modTime)
	}
	sortByName(&batch) // as offsets keep their files (Read reads by time)
	if len(batch.Files) == 0 {
		return committed, nil
	}
	for i, name := range batch.Files {
		seen[name] = batch.ModTimes[i]
	}
	// Compaction, as Spark's SeenFilesMap purges: the log forgets the files
	// more than MaxFileAge older than its newest, but never one as old as
	// a file still to read, so that a backlog read MaxFilesPerTrigger at a
	// time is read whole.
	newest := int64(math.MinInt64)
	for _, modTime := range seen {
		newest = max(newest, modTime)
	}
	forget := newest - int64(s.opts.MaxFileAge)
	if newest < math.MinInt64+int64(s.opts.MaxFileAge) {
		forget = math.MinInt64
	}
	if left {
		forget = min(forget, oldestLeft)
	}
	for _, modTime := range batch.ModTimes {
		// Nor a file of this batch, which CleanSource finds by its time
		// once the batch is committed.
		forget = min(forget, modTime)
	}
	if forget > before {
		before = forget
		for name, modTime := range seen {
			if modTime < before {
				delete(seen, name)
			}
		}
	}
	batch.ModTimes = nil // the log has them
	batch.Seen = seen
	if before != math.MinInt64 {
		batch.Before = &before
	}
	return s.encode(batch)
}

// Read reads, oldest first by the modification time end's log has for
// each (then by name), the files of end's batch that start's
// processed-file log does not hold: exactly the batch's files when end was
// made by Next from start, so a batch replayed from its stored offsets
// reads what its first attempt read, in the same order, whatever the
// directory holds since.
func (s *filesSource) Read(ctx context.Context, start, end json.RawMessage, fn func(Record) error) error {
	if err := s.validate(); err != nil {
		return err
	}
	done, err := s.decode(start, "start")
	if err != nil {
		return err
	}
	batch, err := s.decode(end, "end")
	if err != nil {
		return err
	}
	var line []byte // reused across files: Record.Data lives for one callback
	files := slices.Clone(batch.Files)
	slices.SortStableFunc(files, func(a, b string) int { return cmp.Compare(batch.Seen[a], batch.Seen[b]) })
	for _, name := range files {
		if done.holds(name) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if line, err = s.readFile(ctx, name, line, fn); err != nil {
			return err
		}
	}
	return nil
}

// DescribeOffset gives a batch's offset as progress reports show it: the
// batch's files and how many files the compacted log remembers, not the
// log itself.
func (s *filesSource) DescribeOffset(offset json.RawMessage) string {
	o, err := s.decode(offset, "reported")
	if err != nil {
		return string(offset)
	}
	files := o.Files
	if files == nil || o.legacy {
		files = []string{} // an old offset names the log, not its batch
	}
	b, err := json.Marshal(struct {
		Files      []string `json:"files"`
		Remembered int      `json:"remembered"`
	}{files, len(o.Seen)})
	if err != nil {
		return string(offset)
	}
	return string(b)
}

// readFile calls fn for each non-blank line of the file name, and for each
// bad input in it. line is a buffer to reuse; readFile returns it, perhaps
// grown.
func (s *filesSource) readFile(ctx context.Context, name string, line []byte, fn func(Record) error) ([]byte, error) {
	path := filepath.Join(s.root, name)
	f, info, err := openRegular(path)
	if err != nil {
		if systemFault(err) {
			return line, fmt.Errorf("%s: %w (the system's fault, not the file's: the batch fails, and reads the file again when it runs again)", name, err)
		}
		return line, s.bad(name, Record{Position: name, Err: err}, fn)
	}
	defer f.Close()
	meta := &FileMeta{Path: path, Name: name, Size: info.Size(), ModTime: info.ModTime(), Partitions: partitionsOf(name)}
	r := bufio.NewReaderSize(f, lineBuffer)
	if _, c := cutCompression(name); c != uncompressed {
		whole, empty, err := checkCompressed(ctx, r, c)
		switch {
		case ctx.Err() != nil:
			return line, ctx.Err()
		case err != nil && systemFault(err):
			return line, fmt.Errorf("%s: %w (the system's fault, not the file's: the batch fails, and reads the file again when it runs again)", name, err)
		case err != nil:
			return line, s.bad(name, Record{Position: name, Err: err}, fn)
		case empty:
			return line, nil
		case whole != nil:
			r = bufio.NewReaderSize(bytes.NewReader(whole), lineBuffer)
		default:
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return line, fmt.Errorf("%s: %w (the batch fails, and reads the file again when it runs again)", name, err)
			}
			r.Reset(f)
			content, release, err := decompress(r, c)
			if err != nil { // it was read whole a moment ago: changed since
				return line, s.bad(name, Record{Position: name, Err: err}, fn)
			}
			defer release()
			r = bufio.NewReaderSize(content, lineBuffer)
		}
	}
	for number := 1; ; number++ {
		var length int
		var eof bool
		line, length, eof, err = readLine(r, line[:0], s.opts.MaxLineBytes)
		switch {
		case err != nil && systemFault(err):
			return line, fmt.Errorf("%s: line %d: %w (the system's fault, not the file's: the batch fails, and reads the file again when it runs again)", name, number, err)
		case err != nil:
			// The file as a whole is bad: what follows cannot be
			// told apart into lines.
			return line, s.bad(name, Record{Position: name, Err: fmt.Errorf("line %d: %w", number, err)}, fn)
		case length > s.opts.MaxLineBytes:
			meta.Line = number
			rec := Record{
				Data:     line[:min(len(line), s.opts.MaxLineBytes, maxLinePrefix)],
				Position: name + ":" + strconv.Itoa(number),
				Err:      fmt.Errorf("line too long: %d bytes, more than MaxLineBytes %d", length, s.opts.MaxLineBytes),
				Meta:     meta,
			}
			if err := s.bad(name, rec, fn); err != nil {
				return line, err
			}
		case len(bytes.TrimSpace(line)) > 0:
			meta.Line = number
			rec := Record{
				Partition: filesPartition,
				Data:      line,
				Position:  name + ":" + strconv.Itoa(number),
				Meta:      meta,
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
				return line, err
			}
		}
	}
}

// FileMeta is the Meta of a files source's records (Record.Meta, which
// typed.FromFunc's decoder sees): where a line is, as Spark's _metadata
// column and its partition columns tell. A record's FileMeta is valid
// only during the callback that gets it, as its Data is: the source
// reuses it for the file's next line.
type FileMeta struct {
	// Path is the file's path: the source's Root joined with Name.
	Path string
	// Name is the file's name from the source's directory, as the
	// processed-file log and the record's Position give it
	// ("date=2026-12-06/a.json" with Recursive).
	Name string
	// Size is the file's size in bytes as stored (compressed or not), and
	// ModTime its modification time, when it was opened.
	Size    int64
	ModTime time.Time
	// Line is the line's number in the file, from 1.
	Line int
	// Partitions are the directories of Name of the form key=value, from
	// the top, as Spark's partition discovery reads a partitioned
	// directory (its partitionBy's layout, Hive's): with Recursive,
	// "date=2026-12-06/hour=07/a.json" gives date 2026-12-06 and hour 07.
	// Keys and values are unescaped as Spark escapes them (%XX). As in
	// Spark, they are the key=value directories right above the file: of
	// "x=1/raw/hour=07/a.json" only hour.
	Partitions []PartitionValue
}

// PartitionValue is one key=value directory above a file: see
// FileMeta.Partitions.
type PartitionValue struct {
	Key, Value string
	// Null is set for Spark's and Hive's directory of a null value,
	// key=__HIVE_DEFAULT_PARTITION__; Value is then empty.
	Null bool
}

// Partition returns the value of the partition directory key above the
// file, and whether there is one and it is not null.
func (m *FileMeta) Partition(key string) (value string, ok bool) {
	for _, p := range m.Partitions {
		if p.Key == key {
			return p.Value, !p.Null
		}
	}
	return "", false
}

// hiveNull is the name Spark and Hive give a partition directory of a
// null value.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// partitionsOf reads the key=value directories of a file's name as
// Spark's PartitioningUtils.parsePartition does: from the file's
// directory up, each key=value one (a key and a value not empty) is a
// partition's, up to the first directory of another form above one: of
// "x=1/raw/hour=07/a.json" only hour is.
func partitionsOf(name string) []PartitionValue {
	dirs := strings.Split(filepath.ToSlash(name), "/")
	dirs = dirs[:len(dirs)-1]
	var parts []PartitionValue
	for i := len(dirs) - 1; i >= 0; i-- {
		k, v, ok := strings.Cut(dirs[i], "=")
		if !ok || k == "" || v == "" {
			if len(parts) > 0 {
				break
			}
			continue
		}
		p := PartitionValue{Key: unescapePathName(k), Value: unescapePathName(v)}
		if v == hiveNull {
			p.Value, p.Null = "", true
		}
		parts = append(parts, p)
	}
	slices.Reverse(parts)
	return parts
}

// unescapePathName reads the escapes "%XX" of a partition directory's
// key or value as Spark's ExternalCatalogUtils.unescapePathName does: a
// "%" not followed by two hexadecimal digits is itself.
func unescapePathName(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(v))
				i += 2
				continue
			}
		}
		b = append(b, s[i])
	}
	return string(b)
}

// systemFault reports whether err, of an open or a read, is the
// system's (out of file descriptors or memory, interrupted, a stale
// network file handle, timed out): the batch fails, to run again, rather
// than take a good file for a bad one and skip it for good, as Spark
// fails a query on a file it cannot read. Other errors (no such file, a
// loop of links, no permission, an I/O error reading it) are the file's:
// a dead letter.
func systemFault(err error) bool {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.ENOBUFS, syscall.EAGAIN, syscall.EINTR, syscall.ESTALE, syscall.ETIMEDOUT} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// bad hands on rec, which reports bad input, to fn, or with
// FailOnBadFiles returns it as Read's error.
func (s *filesSource) bad(name string, rec Record, fn func(Record) error) error {
	if s.opts.FailOnBadFiles {
		return fmt.Errorf("%s: %w", rec.Position, rec.Err)
	}
	// Its dead letter does not hold the record whole (the file's bytes
	// past a fault, a line past MaxLineBytes): the file stays.
	s.keepFile(name)
	rec.Partition = filesPartition
	return fn(rec)
}

// keepFile marks the file name as one CleanSource leaves in place (see
// KeepForDeadLetter).
func (s *filesSource) keepFile(name string) {
	if s.opts.CleanSource == CleanOff {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kept == nil {
		s.kept = map[string]bool{}
	}
	if _, ok := s.kept[name]; !ok {
		s.kept[name] = false // not warned of yet
	}
}

// KeepForDeadLetter leaves the file of a record that became a dead letter
// not kept whole (the query has no dead-letter sink, and logs it without
// its bytes) where it is: CleanSource does not delete or move it, so the
// record is still there (runtime.DeadLetterKeeper). position is the
// record's, "name:line".
func (s *filesSource) KeepForDeadLetter(position string) {
	name := position
	if i := strings.LastIndexByte(position, ':'); i >= 0 {
		if _, err := strconv.Atoi(position[i+1:]); err == nil {
			name = position[:i]
		}
	}
	s.keepFile(name)
}

// openFile is os.OpenFile, or a test's.
var openFile = os.OpenFile

// openRegular opens path for reading, and returns its information, if it
// is a regular file once links are followed. It opens without blocking,
// then checks: a plain open of a named pipe would wait for a writer,
// perhaps for ever, and checking before opening would leave a moment in
// which the file could be replaced. (O_NONBLOCK does not change how a
// regular file is read.)
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := openFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !info.Mode().IsRegular() {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s is %s", errNotRegular, path, describeType(info.Mode()))
	}
	return f, info, nil
}

// readLine appends to b the next line of r without its "\n" or "\r\n", and
// returns length, the line's length in bytes. When length is over limit
// the line has been read to its end but only its first limit+1 bytes kept,
// so that a line costs at most limit bytes of memory (and r's buffer),
// however long it is. eof is true when the line was the last one: the file
// does not end in a newline, or the line is the empty remainder after the
// final newline.
func readLine(r *bufio.Reader, b []byte, limit int) (line []byte, length int, eof bool, err error) {
	var last byte // the line's last byte so far, to tell a "\r\n" split across chunks
	for {
		chunk, err := r.ReadSlice('\n')
		switch {
		case err == nil:
			chunk = chunk[:len(chunk)-1]
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			eof = true
		default:
			return b, length, false, err
		}
		if len(chunk) > 0 {
			last = chunk[len(chunk)-1]
		}
		length += len(chunk)
		// Keep up to one byte past limit: it may be the "\r" of "\r\n".
		// (Written so that a limit of math.MaxInt does not overflow.)
		if len(b) <= limit {
			keep := len(chunk)
			if keep > limit-len(b) {
				keep = limit - len(b) + 1
			}
			b = append(b, chunk[:keep]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if last == '\r' {
			length--
		}
		return b[:min(length, len(b))], length, eof, nil
	}
}

// filesOffset is a Files source's offset:
//
//	{"files":["c.json","d.json"],"seen":{"b.json":1700000000000000000,...},"before":1699990000000000000}
//
// Files are the files of the batch that ends at the offset, sorted; Seen
// is the processed-file log after it: every file read and not yet
// forgotten (MaxFileAge), with its modification time in Unix nanoseconds;
// Before, when set, is the modification time below which it forgot them.
// Available's offset is a listing: Files and their ModTimes, no Seen.
//
// An offset written before the log was compacted is a JSON array of the
// names of every file read: decode takes it for a log of those names whose
// modification times are unknown (0), which Next learns from the listing
// (see log).
type filesOffset struct {
	Files    []string         `json:"files"`
	ModTimes []int64          `json:"modTimes,omitempty"`
	Seen     map[string]int64 `json:"seen,omitempty"`
	// Before, when set, is the modification time below which the log has
	// forgotten files: a file that old is taken as read.
	Before *int64 `json:"before,omitempty"`
	// legacy marks an offset of the old form, whose Seen has no times.
	legacy bool
}

// add adds a file and its modification time (the zero time: unknown).
func (o *filesOffset) add(name string, modTime time.Time) {
	o.Files = append(o.Files, name)
	var nanos int64
	if !modTime.IsZero() {
		nanos = modTime.UnixNano()
	}
	o.ModTimes = append(o.ModTimes, nanos)
}

// sortByName sorts o's files, with their times (if it has any), by name.
func sortByName(o *filesOffset) {
	order := make([]int, len(o.Files))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(o.Files[a], o.Files[b]) })
	files := make([]string, len(order))
	var times []int64
	if o.ModTimes != nil {
		times = make([]int64, len(order))
	}
	for i, j := range order {
		files[i] = o.Files[j]
		if times != nil {
			times[i] = o.ModTimes[j]
		}
	}
	o.Files, o.ModTimes = files, times
}

// byModTime returns the indices of o's files, oldest first by
// modification time (unknown ones first), then by name.
func byModTime(o *filesOffset) []int {
	order := make([]int, len(o.Files))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(o.modTime(a), o.modTime(b)) })
	return order
}

// modTime returns the modification time of Files[i] in Unix nanoseconds,
// 0 when not known.
func (o *filesOffset) modTime(i int) int64 {
	if i < len(o.ModTimes) {
		return o.ModTimes[i]
	}
	return 0
}

// forgotten returns the modification time below which the offset's log
// takes every file as read.
func (o *filesOffset) forgotten() int64 {
	if o.Before == nil {
		return math.MinInt64
	}
	return *o.Before
}

// holds reports whether the offset's log, or its files, name a file.
func (o *filesOffset) holds(name string) bool {
	if _, found := o.Seen[name]; found {
		return true
	}
	_, found := slices.BinarySearch(o.Files, name)
	return found
}

// log returns a copy of the processed-file log of the offset o. The files
// of an old offset take their modification times from the listing, or
// the file system; those that are gone are dropped.
func (s *filesSource) log(o, listing filesOffset) map[string]int64 {
	seen := make(map[string]int64, len(o.Seen))
	for name, modTime := range o.Seen {
		if o.legacy {
			i, found := slices.BinarySearch(listing.Files, name)
			if !found {
				continue
			}
			if modTime, found = s.modTimeOf(name, listing.modTime(i)); !found {
				continue
			}
		}
		seen[name] = modTime
	}
	return seen
}

// sizeOf returns the size of the listed file name, links followed, or 0
// when it cannot be told (Read reports why).
func (s *filesSource) sizeOf(name string) int64 {
	info, err := os.Stat(filepath.Join(s.root, name))
	if err != nil {
		return 0
	}
	return info.Size()
}

// modTimeOf returns the modification time, in Unix nanoseconds, of the
// listed file name: listed when the listing knew it (not 0), or else the
// file's, or a broken link's own. present is false when it is gone. It
// is called from the goroutine that calls Next.
func (s *filesSource) modTimeOf(name string, listed int64) (modTime int64, present bool) {
	if listed != 0 {
		return listed, true
	}
	path := filepath.Join(s.root, name)
	info, err := os.Stat(path)
	if err != nil {
		if info, err = os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return 0, false
		}
		if err != nil {
			// Listed but not to be looked at: Read reports it, once,
			// as bad input; it counts as new now.
			return s.opts.Clock().UnixNano(), true
		}
	}
	return info.ModTime().UnixNano(), true
}

// decode reads an offset. nil (a new query) is the empty offset. Files are
// kept sorted; decode sorts them again (with their times) so that a
// hand-edited checkpoint cannot break the binary searches.
func (s *filesSource) decode(offset json.RawMessage, what string) (filesOffset, error) {
	var o filesOffset
	if len(offset) == 0 {
		return o, nil
	}
	if offset[0] == '[' {
		var names []string
		if err := json.Unmarshal(offset, &names); err != nil {
			return o, fmt.Errorf("%s offset: %w", what, err)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		o.Files, o.legacy = names, true
		o.Seen = make(map[string]int64, len(names))
		for _, name := range names {
			o.Seen[name] = 0
		}
		return o, nil
	}
	if err := json.Unmarshal(offset, &o); err != nil {
		return o, fmt.Errorf("%s offset: %w", what, err)
	}
	if len(o.ModTimes) != 0 && len(o.ModTimes) != len(o.Files) {
		return o, fmt.Errorf("%s offset: %d files and %d modification times", what, len(o.Files), len(o.ModTimes))
	}
	if !slices.IsSorted(o.Files) {
		sortByName(&o)
	}
	return o, nil
}

func (s *filesSource) encode(o filesOffset) (json.RawMessage, error) {
	if o.Files == nil {
		o.Files = []string{} // "[]", not "null"
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil, fmt.Errorf("offset: %w", err)
	}
	return b, nil
}
