package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// ErrRewoundCheckpoint is wrapped by the error of OpenStore and Start for
// a checkpoint whose store holds less than its commit file says was
// committed: the progress of an earlier batch (a damaged or missing
// write-ahead log), or nothing at all, or no tables (a missing or
// truncated MANIFEST; the error then wraps ErrCorruptCheckpoint too).
// Starting on it would rewind the query; see "Storage faults" in the
// package doc for what that means for sinks. Deleting the commit file
// accepts the rewind.
var ErrRewoundCheckpoint = errors.New("streamgen: checkpoint lost committed batches")

// The commit file records, outside Pebble, the id of the last batch whose
// commit is known durable: like the commits/ log of Spark's checkpoints,
// it lets a start notice a store that came back with less than was
// committed, which Pebble itself opens without a word (a write-ahead log
// cut short replays up to the cut; a lost MANIFEST marker or a truncated
// MANIFEST opens as a new, empty store, whose first flush then deletes
// the tables of the old one).
//
// It is one small JSON file in the checkpoint directory, replaced
// atomically (written to commitFileName+".tmp", synced, renamed over,
// directory synced) through the store's vfs.FS. Pebble ignores files it
// did not name. The record never runs ahead of what Pebble holds durably:
// with SyncInterval 0 it is written after each commit's synced write; with
// a SyncInterval, by the sync loop, only up to the batches whose log sync
// has completed, so a machine crash that loses the unsynced batches (as
// asynchronous progress tracking allows) leaves the record at or behind
// Pebble's progress and is not taken for damage. It may lag behind Pebble
// (a crash between the commit and its record): that is never an error.
const commitFileName = "STREAMGEN-COMMIT"

// commitFormat is the version of the commit file's layout: 2 since it
// records the MANIFEST (this version reads 1 as well).
const commitFormat = 2

// commitRecord is the commit file's content.
type commitRecord struct {
	Format int `json:"format"`
	// BatchID is the last batch known committed durably.
	BatchID int64 `json:"batchId"`
	// Manifest marks Pebble's current MANIFEST (see manifestMark); nil
	// in a file of format 1, or when no mark could be taken yet.
	Manifest *manifestMark `json:"manifest,omitempty"`
}

// readCommitFile reads dir's commit file; found is false when there is
// none (a new checkpoint, or one written before commit files).
func readCommitFile(fsys vfs.FS, dir string) (rec commitRecord, found bool, err error) {
	path := fsys.PathJoin(dir, commitFileName)
	f, err := fsys.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return rec, false, nil
	}
	if err == nil {
		var data []byte
		data, err = io.ReadAll(f)
		f.Close()
		if err == nil {
			return parseCommitFile(data, dir, path)
		}
	}
	return rec, false, &storeError{kinds: []error{ErrStoreFailed}, dir: dir, file: path, cause: fmt.Errorf("read the commit file: %w", err), hint: failedHint(err)}
}

// parseCommitFile parses the commit file at path, read as data.
func parseCommitFile(data []byte, dir, path string) (rec commitRecord, found bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(&rec)
	if err == nil && rec.Format == 0 {
		// No format at all: every commit file was written with one.
		err = errors.New("it has no format")
	}
	if err != nil {
		return rec, false, &storeError{kinds: []error{ErrCorruptCheckpoint}, dir: dir, file: path,
			cause: fmt.Errorf("the commit file cannot be read: %w", err),
			hint:  "it is written atomically, so something else changed it: if the store itself is sound, delete the commit file and start again"}
	}
	if rec.Format < 1 || rec.Format > commitFormat {
		return rec, false, fmt.Errorf("%w: the commit file %s has format %d, this version reads format %d; start from a new checkpoint directory",
			ErrIncompatibleCheckpoint, path, rec.Format, commitFormat)
	}
	return rec, true, nil
}

// writeCommitFile replaces dir's commit file with one that says batch id
// was committed, with the MANIFEST's mark, atomically: a crash leaves the
// old record or the new.
func writeCommitFile(fsys vfs.FS, dir string, id int64, mark *manifestMark) error {
	data, err := json.Marshal(commitRecord{Format: commitFormat, BatchID: id, Manifest: mark})
	if err != nil {
		return err
	}
	path := fsys.PathJoin(dir, commitFileName)
	tmp := path + ".tmp"
	fail := func(err error) error { return fmt.Errorf("write the commit file %s: %w", path, err) }
	f, err := fsys.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fail(err)
	}
	// Synced before the rename, so that the rename never publishes a
	// file whose content a crash could still lose.
	if err := f.Sync(); err != nil {
		f.Close()
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fail(err)
	}
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return fail(err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fail(err)
	}
	return nil
}

// lostError is verify's refusal of a store that holds less than rec says
// was committed; c is what it holds (nothing, when Pebble found no store).
func (s *Store) lostError(rec commitRecord, c storeContents) error {
	path := s.fs.PathJoin(s.dir, commitFileName)
	manifest := "its MANIFEST"
	if m := currentManifest(s.fs, s.dir); m != "" {
		manifest = "its MANIFEST (" + s.fs.PathJoin(s.dir, m) + ")"
	}
	const startOver = "Starting on it would start the query over: the sources would be read from their start and the batch ids would restart at 0, " +
		"so the sinks would be sent batch ids they already have, with other rows (a sink that skips the ids it has seen would drop them, one that replaces them would change output already read). " +
		"Restore the directory from a backup, or move it aside and start from a fresh checkpoint directory with fresh sink output; " +
		"to start over on this directory anyway, delete the commit file"
	switch {
	case !c.hasProgress && !c.hasOrigin:
		return damaged(fmt.Errorf("%w in %s: the store is empty (%s, or the marker file naming it, is missing or truncated), "+
			"but the commit file %s says batches 0 to %d were committed. %s",
			ErrRewoundCheckpoint, s.dir, manifest, path, rec.BatchID, startOver))
	case !c.hasOrigin:
		return damaged(fmt.Errorf("%w in %s: the store has lost its tables (%s is truncated or was replaced): "+
			"it holds the progress of batch %d, replayed from its write-ahead log, but none of the state written before Pebble's last flush; "+
			"the commit file %s says batch %d was committed. "+
			"Starting on it would go on from that progress with the state of most keys missing. "+
			"Restore the directory from a backup, or move it aside and start from a fresh checkpoint directory with fresh sink output",
			ErrRewoundCheckpoint, s.dir, manifest, c.progress.BatchID, path, rec.BatchID))
	case !c.hasProgress:
		return fmt.Errorf("%w in %s: the store holds no progress, but the commit file %s says batches 0 to %d were committed. %s",
			ErrRewoundCheckpoint, s.dir, path, rec.BatchID, startOver)
	}
	p := c.progress.BatchID
	lost := fmt.Sprintf("batches %d to %d are lost", p+1, rec.BatchID)
	ids := fmt.Sprintf("batch ids %d to %d would be used again for batches", p+1, rec.BatchID)
	if p+1 == rec.BatchID {
		lost = fmt.Sprintf("batch %d is lost", rec.BatchID)
		ids = fmt.Sprintf("batch id %d would be used again for a batch", rec.BatchID)
	}
	return fmt.Errorf("%w in %s: the store's progress is batch %d, but the commit file %s says batch %d was committed: "+
		"%s (a damaged or missing write-ahead log). "+
		"Starting on it would rewind the query to batch %d: the sources would be read again from that batch's offsets (if they still hold those records), "+
		"and %s that may hold other rows, "+
		"so the sinks would be sent batches they already have (a sink that skips the ids it has seen would drop the new rows, one that replaces them would change output already read). "+
		"Restore the directory from a backup, or start from a fresh checkpoint directory; to accept the rewind, delete the commit file",
		ErrRewoundCheckpoint, s.dir, p, path, rec.BatchID, lost, p, ids)
}

// currentManifest returns the name of the MANIFEST that Pebble's marker
// file names ("marker.manifest.000002.MANIFEST-000006"), or "", for
// messages only.
func currentManifest(fsys vfs.FS, dir string) string {
	names, err := fsys.List(dir)
	if err != nil {
		return ""
	}
	for _, n := range names {
		if strings.HasPrefix(n, "marker.manifest.") {
			return n[strings.LastIndexByte(n, '.')+1:]
		}
	}
	return ""
}

// damaged marks a store that lost its MANIFEST's content as corrupt too.
func damaged(err error) error { return alsoCorrupt{err} }

type alsoCorrupt struct{ error }

func (e alsoCorrupt) Is(target error) bool { return target == ErrCorruptCheckpoint }
func (e alsoCorrupt) Unwrap() error        { return e.error }
