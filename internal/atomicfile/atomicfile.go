// Package atomicfile replaces files so that a reader sees the old content
// or the new one in full, never a part, even after a crash.
package atomicfile

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
)

// Replace creates dir if need be and writes dir/name with write: write
// goes to a temporary file named ".name-*" (readers of the directory skip
// names that start with a dot), which is synced and then renamed over
// name; the directory is synced so that the rename survives a crash too.
// On failure the temporary file is removed and name is left as it was.
func Replace(dir, name string, write func(io.Writer) error) (err error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+name+"-*")
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
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
