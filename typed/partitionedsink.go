package typed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// PartitionedFilesSink is FilesSink with Spark's partitionBy: partition
// gives each row its partition values, and the row is written under dir
// in the directory they name, key=value for each in order
// ("date=2026-12-06/hour=07"), as Spark's file sink lays out a
// partitioned table and its partition discovery reads one (so does a
// FilesSource with Recursive: see runtime.FileMeta's Partitions). Keys
// and values are escaped as Spark escapes them ("%2F" for "/", "%3D" for
// "=", "%25" for "%", ...); a value that is empty, or Null, is Hive's null
// directory, key=__HIVE_DEFAULT_PARTITION__. A row keeps its partition
// fields in its JSON (Spark's files leave partition columns out).
//
// Each batch writes one file, part-N.jsonl, in each directory it has
// rows for, with FilesSink's guarantees in each: a file appears once its
// batch is committed and durable, a batch written again replaces its
// files (and removes those of an earlier attempt in directories it no
// longer writes to), a start removes the files of batches after the last
// committed in every directory under dir. partition is called from the
// query's goroutine; an empty key is an error that fails the batch.
//
// The sink is safe for concurrent use, though two concurrent writes of
// the same batch leave either one's files.
func PartitionedFilesSink[T any, P codec.RecordPtr[T]](dir string, partition func(*T) []runtime.PartitionValue) Sink[T] {
	return partitionedFileSink[T, P]{dir: dir, partition: partition, files: &partitionedFiles{dir: dir}}
}

type partitionedFileSink[T any, P codec.RecordPtr[T]] struct {
	dir       string
	partition func(*T) []runtime.PartitionValue
	files     *partitionedFiles
}

// partitionedFiles are a partitioned sink's batch files: one
// runtime.BatchFiles for each partition directory.
type partitionedFiles struct {
	dir string

	mu sync.Mutex
	// dirs are the batch files of each partition directory, by its path
	// from dir; written the directories each batch written and not yet
	// published wrote to.
	dirs    map[string]*runtime.BatchFiles
	written map[int64][]string
	// held is set by the start's RewindAfter: the query publishes its
	// batches (see runtime.NewPublishedBatchFiles).
	held bool
}

// of returns the batch files of the partition directory path, made when
// new.
func (p *partitionedFiles) of(path string) *runtime.BatchFiles {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.dirs[path]
	if f == nil {
		if p.dirs == nil {
			p.dirs = map[string]*runtime.BatchFiles{}
		}
		f = runtime.NewPublishedBatchFiles(filepath.Join(p.dir, path), "part-")
		if p.held {
			f.Hold()
		}
		p.dirs[path] = f
	}
	return f
}

// Description names the sink in progress reports.
func (s partitionedFileSink[T, P]) Description() string { return "files:" + s.dir }

// place is the sink's directory, absolute (placeOf).
func (s partitionedFileSink[T, P]) place() string { return fileSink[T, P]{dir: s.dir}.place() }

func (s partitionedFileSink[T, P]) Write(ctx context.Context, batchID int64, rows []T) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("streamgen: files sink: batch %d: %w", batchID, unprefixed(err))
	}
	fail := func(err error) error {
		return fmt.Errorf("streamgen: files sink %s: batch %d: %w", s.dir, batchID, unprefixed(err))
	}
	// The rows of each partition directory, in their order.
	groups := map[string][]int{}
	for i := range rows {
		path, err := partitionPath(s.partition(&rows[i]))
		if err != nil {
			return fail(fmt.Errorf("row %d: %w", i, err))
		}
		groups[path] = append(groups[path], i)
	}
	paths := slices.Sorted(func(yield func(string) bool) {
		for path := range groups {
			if !yield(path) {
				return
			}
		}
	})
	// An earlier attempt at the batch may have written where this one
	// does not.
	s.files.mu.Lock()
	before := s.files.written[batchID]
	s.files.mu.Unlock()
	for _, path := range before {
		if _, ok := groups[path]; !ok {
			if err := s.files.of(path).Write(ctx, batchID, true, nil); err != nil {
				return fail(err)
			}
		}
	}
	for _, path := range paths {
		err := s.files.of(path).Write(ctx, batchID, false, func(w io.Writer) error {
			return writeLines[T, P](w, rows, groups[path])
		})
		if err != nil {
			return fail(err)
		}
	}
	s.files.mu.Lock()
	if s.files.written == nil || !s.files.held {
		// Without a start's RewindAfter no PublishBatch comes to forget
		// the batches: the last one is kept, for a write of it again.
		s.files.written = map[int64][]string{}
	}
	s.files.written[batchID] = paths
	s.files.mu.Unlock()
	return nil
}

// PublishBatch makes batch id's files visible, once the batch is durable
// (see runtime.BatchPublisher).
func (s partitionedFileSink[T, P]) PublishBatch(batchID int64) error {
	s.files.mu.Lock()
	paths := s.files.written[batchID]
	delete(s.files.written, batchID)
	s.files.mu.Unlock()
	for _, path := range paths {
		if err := s.files.of(path).Publish(batchID); err != nil {
			return fmt.Errorf("streamgen: files sink %s: %w", filepath.Join(s.dir, path), err)
		}
	}
	return nil
}

// RewindAfter removes the files of the batches after batchID, and
// publishes those up to it that a process that died left pending, in
// every partition directory under dir (see runtime.BatchRewinder).
func (s partitionedFileSink[T, P]) RewindAfter(ctx context.Context, batchID int64) error {
	s.files.mu.Lock()
	s.files.held = true
	for _, f := range s.files.dirs {
		f.Hold()
	}
	s.files.written = nil
	s.files.mu.Unlock()
	var paths []string
	err := filepath.WalkDir(s.dir, func(path string, d fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist) && path == s.dir:
			return fs.SkipAll // nothing written yet
		case err != nil:
			return err
		case !d.IsDir():
			return nil
		case path != s.dir && !runtime.Visible(d.Name()):
			return fs.SkipDir
		}
		rel, err := filepath.Rel(s.dir, path)
		if err != nil {
			return err
		}
		if rel != "." {
			paths = append(paths, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("streamgen: files sink %s: list the partition directories: %w", s.dir, err)
	}
	for _, path := range paths {
		if err := s.files.of(path).RemoveAfter(ctx, batchID); err != nil {
			return fmt.Errorf("streamgen: files sink %s: remove the batches after %d: %w", filepath.Join(s.dir, path), batchID, err)
		}
	}
	return nil
}

// partitionPath is the directory of a row's partition values, from the
// sink's: key=value for each, escaped as Spark's escapePathName, joined
// by "/".
func partitionPath(values []runtime.PartitionValue) (string, error) {
	if len(values) == 0 {
		return "", errors.New("no partition values: a partitioned files sink needs at least one")
	}
	parts := make([]string, len(values))
	for i, v := range values {
		if v.Key == "" {
			return "", fmt.Errorf("partition value %d has an empty key", i)
		}
		if strings.HasPrefix(v.Key, ".") {
			return "", fmt.Errorf("partition key %q begins with \".\": its directories would be hidden from readers", v.Key)
		}
		value := escapePathName(v.Value)
		if v.Null || v.Value == "" {
			value = hiveNull
		}
		parts[i] = escapePathName(v.Key) + "=" + value
	}
	return strings.Join(parts, "/"), nil
}

// hiveNull is the directory name of a null (or empty) partition value,
// Spark's and Hive's.
const hiveNull = "__HIVE_DEFAULT_PARTITION__"

// escapePathName escapes s as Spark's ExternalCatalogUtils.escapePathName
// does for a partition directory's key or value: each control character,
// '"', '#', '%', '\”, '*', '/', ':', '=', '?', '\\', DEL, '{', '[', ']'
// and '^' as "%XX" (and NUL, which no file name may hold).
func escapePathName(s string) string {
	if !strings.ContainsFunc(s, needsEscape) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x80 && needsEscape(rune(c)) {
			fmt.Fprintf(&b, "%%%02X", c)
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func needsEscape(r rune) bool {
	return r <= 0x1F || strings.ContainsRune("\"#%'*/:=?\\\x7f{[]^", r)
}
