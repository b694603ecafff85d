package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"

	"github.com/streamgen/streamgen/internal/atomicfile"
)

// The files source cleans the files it has read (FilesOptions.CleanSource)
// once the batches that read them are committed: a CommitListener.

// Committed deletes or archives, as FilesOptions.CleanSource says, the
// files of the batch from start to end, which is durable. The first call
// of a source cleans as well the files of the log before it (start's, as
// the last batch an earlier run committed left it) that are still there:
// a process that died between a batch's commit and its clean left them,
// the files of several batches with a SyncInterval. A file
// is cleaned only while its modification time is the one the log holds
// for it: a file written since under the name of one read is left. What
// cannot be cleaned is logged and left in place.
func (s *filesSource) Committed(start, end json.RawMessage) {
	if s.opts.CleanSource == CleanOff {
		return
	}
	before, err := s.decode(start, "start")
	if err == nil {
		var o filesOffset
		if o, err = s.decode(end, "committed"); err == nil {
			s.clean(before, o)
			return
		}
	}
	slog.Warn("streamgen: files source: cannot clean the files of a committed batch", "source", s.opts.Name, "error", err)
}

// clean cleans the files of the batch from before to o (see Committed).
func (s *filesSource) clean(before, o filesOffset) {
	names := slices.Clone(o.Files)
	s.mu.Lock()
	sweep := !s.swept
	s.swept = true
	s.mu.Unlock()
	if sweep && !before.legacy { // (a legacy offset's log has no times)
		// Every file of the log, not only the last batch's: with a
		// SyncInterval, a process that died may have committed several
		// batches it never cleaned.
		for name := range before.Seen {
			if !slices.Contains(o.Files, name) {
				names = append(names, name)
			}
		}
		slices.Sort(names[len(o.Files):])
	}
	// Not those a record of which is a dead letter that does not hold it
	// whole: warned of, once.
	s.mu.Lock()
	names = slices.DeleteFunc(names, func(name string) bool {
		warned, keep := s.kept[name]
		if keep && !warned {
			s.kept[name] = true
			slog.Warn("streamgen: files source: a file read is left in place: a record of it is a dead letter that does not hold it whole (a fault in the file, a line past MaxLineBytes, or a letter logged without a dead-letter sink)",
				"source", s.opts.Name, "file", name, "cleanSource", s.opts.CleanSource.String())
		}
		return keep
	})
	s.mu.Unlock()
	// Only the files read: a file of the same name written since (which
	// the log keeps from being read) is not one of them.
	names = slices.DeleteFunc(names, func(name string) bool {
		modTime, found := o.Seen[name]
		if !found {
			modTime = before.Seen[name]
		}
		return !s.stillRead(name, modTime)
	})
	if s.opts.CleanSource == CleanDelete {
		for _, name := range names {
			if err := os.Remove(filepath.Join(s.root, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.warnClean(name, err)
			}
		}
		return
	}
	s.archiveFiles(names)
}

// stillRead reports whether the file name is there and is the file the
// log says was read: its modification time (or, of a link, the link's
// own) is the log's modTime.
func (s *filesSource) stillRead(name string, modTime int64) bool {
	path := filepath.Join(s.root, name)
	if info, err := os.Stat(path); err == nil && info.ModTime().UnixNano() == modTime {
		return true
	}
	info, err := os.Lstat(path)
	return err == nil && info.ModTime().UnixNano() == modTime
}

// warnClean logs that the file name, read and committed, could not be
// cleaned.
func (s *filesSource) warnClean(name string, err error) {
	slog.Warn("streamgen: files source: cannot clean a file read (it is left in place, and not read again)",
		"source", s.opts.Name, "file", name, "cleanSource", s.opts.CleanSource.String(), "error", err)
}

// archiveFiles moves the named files to the archive directory: each is
// linked (or, across file systems, copied) there first, the directories
// that took them are synced, and only then is it removed from the source's
// directory, so that a crash leaves a file in both places (the next
// source's first clean removes it) and never in neither. A file already
// in the archive with other content is left in place, with a warning.
func (s *filesSource) archiveFiles(names []string) {
	dirs := map[string][]string{} // an archive directory, the files moved into it
	for _, name := range names {
		src := filepath.Join(s.root, name)
		dst := filepath.Join(s.archive, name)
		if err := atomicfile.MkdirAll(filepath.Dir(dst)); err != nil {
			s.warnClean(name, err)
			continue
		}
		if err := linkOrCopy(src, dst); err != nil {
			s.warnClean(name, err)
			continue
		}
		dirs[filepath.Dir(dst)] = append(dirs[filepath.Dir(dst)], name)
	}
	for _, dir := range slices.Sorted(maps.Keys(dirs)) {
		if err := atomicfile.SyncDir(dir); err != nil {
			for _, name := range dirs[dir] {
				s.warnClean(name, fmt.Errorf("sync the archive: %w", err))
			}
			continue
		}
		for _, name := range dirs[dir] {
			if err := os.Remove(filepath.Join(s.root, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				s.warnClean(name, err)
			}
		}
	}
}

// linkOrCopy makes dst a copy of src, never replacing a file already at
// dst: a hard link, or, where one cannot be made (another file system), a
// copy written under a hidden name, synced, and linked to dst (renamed,
// on a file system without hard links). A dst that is already src, or
// holds the same bytes (a clean that a crash cut short), will do.
func linkOrCopy(src, dst string) error {
	err := linkFile(src, dst)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return sameFile(src, dst)
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".archiving")
	if err := copyFile(src, tmp); err != nil {
		os.Remove(tmp)
		return err
	}
	defer os.Remove(tmp)
	err = linkFile(tmp, dst)
	switch {
	case errors.Is(err, fs.ErrExist):
		return sameFile(src, dst)
	case err != nil:
		// A file system without hard links: a rename, which would
		// replace a file of the name that appeared since the look.
		if _, serr := os.Lstat(dst); !errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("the archive already holds a file named %s, or cannot be looked at: %w", dst, errors.Join(err, serr))
		}
		return os.Rename(tmp, dst)
	}
	return nil
}

// linkFile is os.Link, or a test's.
var linkFile = os.Link

// sameFile returns nil when dst is src, or a file of the same bytes, and
// an error saying the archive holds another file otherwise.
func sameFile(src, dst string) error {
	a, err := os.Lstat(src)
	if err != nil {
		return err
	}
	b, err := os.Lstat(dst)
	if err != nil {
		return err
	}
	if os.SameFile(a, b) {
		return nil
	}
	differs := fmt.Errorf("the archive already holds another file named %s", dst)
	if !a.Mode().IsRegular() || !b.Mode().IsRegular() || a.Size() != b.Size() {
		return differs
	}
	fa, err := os.Open(src)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(dst)
	if err != nil {
		return err
	}
	defer fb.Close()
	bufA, bufB := make([]byte, 64<<10), make([]byte, 64<<10)
	for {
		na, errA := io.ReadFull(fa, bufA)
		nb, errB := io.ReadFull(fb, bufB)
		if !bytes.Equal(bufA[:na], bufB[:nb]) {
			return differs
		}
		if errA != nil || errB != nil {
			if (errA == io.EOF || errA == io.ErrUnexpectedEOF) && errA == errB {
				return nil
			}
			return errors.Join(errA, errB)
		}
	}
}

// copyFile writes a copy of the regular file src (links followed) to
// dst, synced.
func copyFile(src, dst string) error {
	in, _, err := openRegular(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
