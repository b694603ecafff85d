package runtime

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The commit file also records how long Pebble's current MANIFEST was,
// and a checksum of its bytes, when a batch was committed (manifestMark).
// Pebble reads a MANIFEST up to its first record that is cut short or
// fails its checksum, and takes that for the end (a write a crash cut
// short): a MANIFEST truncated or damaged in its middle opens without the
// tables its later records added, and the first flush after deletes them.
// A start that finds the current MANIFEST shorter than recorded, or its
// recorded bytes changed, refuses the store as corrupt instead.
//
// A MANIFEST only grows (Pebble writes a new one rather than change one),
// and each of its records is synced before the flush or compaction that
// wrote it ends: the mark is taken only while none is running, so every
// byte it covers is durable, and a machine crash cannot leave a MANIFEST
// shorter than its mark. While one runs, the commit file keeps the last
// mark.

// manifestMark is the commit file's record of the current MANIFEST.
type manifestMark struct {
	// Name is the MANIFEST's file name ("MANIFEST-000006").
	Name string `json:"name"`
	// Size is how many of its bytes were written and synced.
	Size int64 `json:"size"`
	// CRC is the CRC-32 (Castagnoli) of those bytes.
	CRC uint32 `json:"crc"`
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// pebbleWork counts the flushes and compactions under way (which write
// the MANIFEST), and those begun, so that a mark is taken only while
// none runs (see manifestMark). Ingestion and format upgrades write it
// too: the store uses neither once open.
type pebbleWork struct {
	running, begun atomic.Int64
	// idle is signalled when running falls to 0, for waitIdle; its L is
	// mu, set by the first waitIdle.
	mu   sync.Mutex
	idle sync.Cond
}

func (w *pebbleWork) begin() { w.begun.Add(1); w.running.Add(1) }

func (w *pebbleWork) end() {
	if w.running.Add(-1) == 0 {
		w.mu.Lock()
		if w.idle.L != nil {
			w.idle.Broadcast()
		}
		w.mu.Unlock()
	}
}

// waitIdle waits until no flush or compaction runs (for the tests).
func (w *pebbleWork) waitIdle() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.idle.L == nil {
		w.idle.L = &w.mu
	}
	for w.running.Load() != 0 {
		w.idle.Wait()
	}
}

// listen adds the counting of w to l.
func (w *pebbleWork) listen(l *pebble.EventListener) {
	l.FlushBegin = func(pebble.FlushInfo) { w.begin() }
	l.FlushEnd = func(pebble.FlushInfo) { w.end() }
	l.CompactionBegin = func(pebble.CompactionInfo) { w.begin() }
	l.CompactionEnd = func(pebble.CompactionInfo) { w.end() }
	// The other background work that edits the MANIFEST (none runs with
	// the store's options, but a later Pebble's may).
	l.BlobFileRewriteBegin = func(pebble.BlobFileRewriteInfo) { w.begin() }
	l.BlobFileRewriteEnd = func(pebble.BlobFileRewriteInfo) { w.end() }
	l.DownloadBegin = func(pebble.DownloadInfo) { w.begin() }
	l.DownloadEnd = func(pebble.DownloadInfo) { w.end() }
}

// markManifest returns the mark of the current MANIFEST, extending last
// (the mark taken before, of the same MANIFEST, whose bytes are not read
// again), or last itself while a flush or compaction runs or when the
// MANIFEST cannot be read (the next commit tries again). The caller holds
// s.recording.
func (s *Store) markManifest(last *manifestMark) *manifestMark {
	begun := s.work.begun.Load()
	if s.work.running.Load() != 0 {
		return last
	}
	name := currentManifest(s.fs, s.dir)
	if name == "" {
		return last
	}
	mark := manifestMark{Name: name}
	if last != nil && last.Name == name {
		mark = *last
	}
	f, err := s.fs.Open(s.fs.PathJoin(s.dir, name))
	if err != nil {
		return last
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || info.Size() < mark.Size {
		return last
	}
	buf := make([]byte, info.Size()-mark.Size)
	if _, err := f.ReadAt(buf, mark.Size); err != nil && !errors.Is(err, io.EOF) {
		return last
	}
	if s.work.running.Load() != 0 || s.work.begun.Load() != begun {
		return last // a flush or compaction began meanwhile
	}
	mark.CRC = crc32.Update(mark.CRC, castagnoli, buf)
	mark.Size = info.Size()
	return &mark
}

// checkManifest refuses, before Pebble opens the store, a current
// MANIFEST that is the one mark names but shorter than it, or whose
// first mark.Size bytes changed since batch id was committed. A MANIFEST
// Pebble has replaced since is not checked.
func checkManifest(fsys vfs.FS, dir string, id int64, mark *manifestMark) error {
	if mark == nil || currentManifest(fsys, dir) != mark.Name {
		return nil
	}
	path := fsys.PathJoin(dir, mark.Name)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // the store is then found empty, and refused as such
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	corrupt := func(what string) error {
		return &storeError{kinds: []error{ErrRewoundCheckpoint, ErrCorruptCheckpoint}, dir: dir, file: path,
			cause: fmt.Errorf("%s since batch %d was committed (the commit file %s recorded %d bytes): Pebble would open the store without the tables its later records add, and lose their state",
				what, id, fsys.PathJoin(dir, commitFileName), mark.Size),
			hint: corruptHint}
	}
	info, err := f.Stat()
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if info.Size() < mark.Size {
		return corrupt(fmt.Sprintf("the MANIFEST was cut short to %d bytes", info.Size()))
	}
	h := crc32.New(castagnoli)
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, mark.Size)); err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	if h.Sum32() != mark.CRC {
		return corrupt("the MANIFEST's bytes changed")
	}
	return nil
}
