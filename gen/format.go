package gen

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"runtime"
)

// formatOutput returns src, the generator's unformatted output for the
// file at path, as gofmt formats it.
//
// Formatting is most of the cost of writing a large output file, and most
// runs write what is already on disk. So the generator remembers, per
// output file, the hash of the last source it formatted for that path and
// the hash of the result: when src has that hash and the file on disk has
// the result's, the file on disk is the formatted src, and it is returned
// without formatting again. (The hashes are SHA-256 and the source's is
// salted with the Go version, whose gofmt did the formatting.) The notes
// are small files in the user's cache directory, one per output file; when
// it cannot be read or written, every run formats.
func formatOutput(path string, src []byte) ([]byte, error) {
	key := sourceKey(src)
	note := formatNotePath(path)
	if note != "" {
		if old, err := os.ReadFile(note); err == nil && len(old) == 2*sha256.Size && bytes.Equal(old[:sha256.Size], key[:]) {
			if disk, err := os.ReadFile(path); err == nil {
				if sum := sha256.Sum256(disk); bytes.Equal(sum[:], old[sha256.Size:]) {
					return disk, nil
				}
			}
		}
	}
	out, err := format.Source(src)
	if err != nil {
		return nil, fmt.Errorf("formatting the output: %w", err)
	}
	if note != "" {
		sum := sha256.Sum256(out)
		writeNote(note, append(key[:], sum[:]...))
	}
	return out, nil
}

// formatNoteVersion changes when what a note means changes.
const formatNoteVersion = "streamgen format note 1"

func sourceKey(src []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write([]byte(formatNoteVersion + "\x00" + runtime.Version() + "\x00"))
	h.Write(src)
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// formatNotePath is where the note for the output file at path is kept, or
// "" when there is no cache directory.
func formatNotePath(path string) string {
	dir, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256([]byte(abs))
	return filepath.Join(dir, "streamgen", "format", hex.EncodeToString(sum[:16]))
}

// writeNote replaces a note, through a temporary file renamed into place
// so that a reader never sees half of one. A note that cannot be written
// is only a formatting saved less: errors are dropped.
func writeNote(note string, data []byte) {
	dir := filepath.Dir(note)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, "tmp-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if werr != nil || cerr != nil || os.Rename(tmp.Name(), note) != nil {
		os.Remove(tmp.Name())
	}
}
