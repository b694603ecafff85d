// Package atomicfile replaces files so that a reader sees the old content
// or the new one in full, never a part, even after a crash.
package atomicfile

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// A temporary file of Replace is named tempPrefix, then the name it will
// replace, then "-" and tempSuffixLen lowercase hexadecimal digits, such as
// ".streamgen-tmp-out.json-0123456789abcdef". The leading dot hides it from
// readers of the directory (the Files source, Spark, ls); the prefix and the
// fixed-length suffix, which Replace draws itself rather than leave to
// os.CreateTemp, tell it apart from any other hidden file, so that
// RemoveStale can remove exactly these.
const (
	tempPrefix    = ".streamgen-tmp-"
	tempSuffixLen = 16
)

// Replace creates dir if need be (MkdirAll) and writes dir/name with write: write
// goes to a temporary file named ".streamgen-tmp-name-" and a random
// suffix (readers of the directory skip names that start with a dot), which
// is synced and then renamed over name; the directory is synced so that the
// rename survives a crash too. On failure the temporary file is removed and
// name is left as it was; after a crash it stays, for RemoveStale.
func Replace(dir, name string, write func(io.Writer) error) (err error) {
	if err := MkdirAll(dir); err != nil {
		return err
	}
	tmp, err := createTemp(dir, name)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	w := bufio.NewWriterSize(tmp, 64<<10)
	if err := write(w); err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return SyncDir(dir)
}

// MkdirAll creates dir and the parents it lacks, as os.MkdirAll does, and
// syncs the parent of each directory it creates, so that a file synced in
// dir after it survives a crash with the directories that lead to it.
func MkdirAll(dir string) error { return MkdirAllFS(dirFS, dir, 0o777) }

// MkdirAllFS is MkdirAll on fs (a checkpoint's file system), the
// directories made with perm (before the umask).
func MkdirAllFS(fs vfs.FS, dir string, perm os.FileMode) error {
	var created []string // deepest first
	for d := dir; ; d = fs.PathDir(d) {
		_, err := fs.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if fs.PathDir(d) == d {
			break
		}
	}
	if len(created) == 0 {
		return nil
	}
	if err := fs.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDirFS(fs, fs.PathDir(d)); err != nil {
			return err
		}
	}
	return nil
}

// dirFS is the file system of MkdirAll and SyncDir: the operating
// system's, but in tests that see which directories are synced.
var dirFS = vfs.Default

// SyncDir syncs the directory dir, so that the names created, renamed or
// removed in it survive a crash.
func SyncDir(dir string) error { return syncDirFS(dirFS, dir) }

func syncDirFS(fs vfs.FS, dir string) error {
	d, err := fs.OpenDir(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// createTemp creates a new temporary file in dir for name, readable and
// writable by its owner only, as os.CreateTemp does.
func createTemp(dir, name string) (*os.File, error) {
	// With 64 random bits a name is taken again only by a bug; a few
	// tries make that an error rather than a loop.
	for range 4 {
		path := filepath.Join(dir, fmt.Sprintf("%s%s-%0*x", tempPrefix, name, tempSuffixLen, rand.Uint64()))
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("create a temporary file for %s in %s: every name tried exists", name, dir)
}

// isTemp reports whether name is that of a temporary file of Replace.
func isTemp(name string) bool {
	rest, ok := strings.CutPrefix(name, tempPrefix)
	i := len(rest) - tempSuffixLen - 1 // where the "-" before the suffix is
	if !ok || i < 1 || rest[i] != '-' {
		return false // too short to hold a name, "-" and a suffix
	}
	for _, c := range rest[i+1:] {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// RemoveStale removes from dir the temporary files that Replace left there
// when its process died before it could rename or remove them. It knows
// them by name, as described at tempPrefix: the prefix ".streamgen-tmp-",
// a name, "-" and sixteen lowercase hexadecimal digits; it leaves any other
// file, hidden or not, and anything that is not a regular file. A dir that
// does not exist has nothing stale in it.
//
// A temporary file of a Replace under way in dir looks the same as a stale
// one, and removing it makes that Replace fail. So call RemoveStale only
// when nothing else writes to dir with Replace: at the start of the one
// process that owns dir, before it writes there. It is not synced: should
// the system crash, a stale file may come back, to be removed next time.
func RemoveStale(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove stale temporary files: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !isTemp(e.Name()) {
			continue
		}
		err := os.Remove(filepath.Join(dir, e.Name()))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove stale temporary files: %w", err)
	}
	return nil
}
