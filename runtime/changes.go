package runtime

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// This file is what a committer that copies a store elsewhere (a Kafka
// changelog topic) needs of it, in the store's own terms: the changes a
// batch makes, record by record (Changes), the checkpoint's records
// (Snapshot), a place for the committer's own bookkeeping that commits
// with the batch (SetCommitterRecord), and bulk writes that bring a
// store back from such a copy (Restore).
//
// A record is a key of the store and its value. The records a copy has to
// hold to give back a checkpoint are the mirrored ones: the pipeline's
// description (metadata), the progress of the last batch, and the state,
// timers and expiry index. The store's creation time, planned batch,
// progress reports and committer records are its own and are not
// mirrored.

// committerPrefix starts the keys of committers' records (see
// SetCommitterRecord).
const committerPrefix = 0x06

// Restorer is implemented by a committer (see WithCommitter) that can
// bring the store back from a copy kept elsewhere. Start calls Restore
// once, after it opens the store and before it reads the checkpoint's
// metadata, so that a checkpoint directory that was lost, or fell behind
// the copy, is whole again before the query's first batch; an error fails
// Start.
type Restorer interface {
	Restore(ctx context.Context) error
}

// TriggerChecker is implemented by a committer that works with some
// triggers only: Start calls CheckTrigger with the query's trigger before
// it restores anything, and fails with its error.
type TriggerChecker interface {
	CheckTrigger(Trigger) error
}

// Mirrored reports whether key is one of the records a copy of the store
// holds (see the file's comment): metadata, progress, state, timers and
// expiry index.
func Mirrored(key []byte) bool {
	return string(key) == metaKey || string(key) == progressKey || (len(key) > 0 && key[0] >= statePrefix)
}

// IsProgressKey reports whether key is the record of the progress of the
// last committed batch (see Progress), which Commit writes last into
// every batch.
func IsProgressKey(key []byte) bool { return string(key) == progressKey }

// KeyPartition returns the input partition a mirrored record belongs to:
// the partition field of a state entry, timer or expiry index entry, and
// 0 for the checkpoint's own records (metadata, progress). A copy that
// keeps each partition's records apart (a changelog topic's partitions)
// can move a partition's state with it.
func KeyPartition(key []byte) uint32 {
	if len(key) >= 5 && key[0] >= statePrefix {
		return binary.BigEndian.Uint32(key[1:5])
	}
	return 0
}

// WriteProgress writes p into the batch, as Commit does, so that Changes
// lists it; Commit writes it again, unchanged.
func (b *StateBatch) WriteProgress(p Progress) error {
	v, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("streamgen: encode progress: %w", err)
	}
	if err := b.b.Set([]byte(progressKey), v, nil); err != nil {
		return fmt.Errorf("streamgen: write progress: %w", err)
	}
	return nil
}

// RewriteMeta writes the checkpoint's metadata (the pipeline's
// description, as Start left it) into the batch again, unchanged, so that
// Changes lists it: a committer copying the batch sends it at least once
// per run, and so once after any change Start made to it.
func (b *StateBatch) RewriteMeta() error {
	if err := b.store.Err(); err != nil {
		return err
	}
	if err := b.settled(); err != nil {
		return err
	}
	v, closer, err := b.db.Get([]byte(metaKey))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	if err != nil {
		return b.readError(err)
	}
	defer closer.Close()
	if err := b.b.Set([]byte(metaKey), v, nil); err != nil {
		return fmt.Errorf("streamgen: write the checkpoint's metadata: %w", err)
	}
	return nil
}

// SetCommitterRecord writes a committer's record name into the batch: it
// commits with the batch's state, all or nothing (a committer keeps there
// how far its copy of the store goes). Read it with
// Store.CommitterRecord. It is not a mirrored record.
func (b *StateBatch) SetCommitterRecord(name string, value []byte) error {
	if err := b.b.Set(committerKey(name), value, nil); err != nil {
		return fmt.Errorf("streamgen: write committer record %q: %w", name, err)
	}
	return nil
}

func committerKey(name string) []byte { return append([]byte{committerPrefix}, name...) }

// CommitterRecord returns the committed value of the committer's record
// name (see StateBatch.SetCommitterRecord); ok is false when there is
// none. It is safe for concurrent use.
func (s *Store) CommitterRecord(name string) (value []byte, ok bool, err error) {
	return s.Read(committerKey(name))
}

// Read returns the committed value of the store's record key; ok is false
// when there is none. It is safe for concurrent use.
func (s *Store) Read(key []byte) (value []byte, ok bool, err error) {
	if err := s.Err(); err != nil {
		return nil, false, err
	}
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, s.Err()
	}
	if err != nil {
		return nil, false, s.fail(fmt.Errorf("read checkpoint record %x: %w", key, err))
	}
	value = slices.Clone(v)
	closer.Close()
	return value, true, s.Err()
}

// Changes calls fn for each mirrored record the batch writes, in the
// order of its writes: value is the new value, or nil with deleted true
// for a deletion. A range deletion (DeleteKey, DeleteVar, DeletePartition,
// the expiry pass, the fired timers) is listed as the deletions of the
// keys it covers: the committed ones, read now, and the ones the batch
// itself writes. A key is listed as deleted once until it is written
// again: a deletion of a key whose last change listed is a deletion (a
// fired timer's entry, deleted and then in the range of the batch's
// fired timers; a key that is both committed and written by the batch)
// is left out. A copy that applies the changes in order (a compacted
// changelog topic, which keeps the last value of each key) holds, per
// key, what the store holds once the batch commits. The slices are valid
// during the call only; fn's first error stops the walk and is returned.
// Call it before Commit.
func (b *StateBatch) Changes(fn func(key, value []byte, deleted bool) error) error {
	if err := b.store.Err(); err != nil {
		return err
	}
	var own [][]byte // the batch's point keys, sorted, at the first range deletion
	// gone holds the keys whose last change listed is a deletion.
	gone := map[string]struct{}{}
	del := func(key []byte) error {
		if _, ok := gone[string(key)]; ok {
			return nil
		}
		gone[string(key)] = struct{}{}
		return fn(key, nil, true)
	}
	r := b.b.Reader()
	for {
		kind, key, value, ok, err := r.Next()
		if err != nil {
			return fmt.Errorf("streamgen: read the batch's writes: %w", err)
		}
		if !ok {
			return nil
		}
		switch kind {
		case pebble.InternalKeyKindSet:
			if Mirrored(key) {
				delete(gone, string(key))
				if err := fn(key, value, false); err != nil {
					return err
				}
			}
		case pebble.InternalKeyKindDelete, pebble.InternalKeyKindSingleDelete, pebble.InternalKeyKindDeleteSized:
			if Mirrored(key) {
				if err := del(key); err != nil {
					return err
				}
			}
		case pebble.InternalKeyKindRangeDelete:
			if own == nil {
				if own, err = b.pointKeys(); err != nil {
					return err
				}
			}
			if err := b.expandRange(key, value, own, del); err != nil {
				return err
			}
		default:
			return fmt.Errorf("streamgen: the batch holds a write of kind %v, which a copy cannot follow", kind)
		}
	}
}

// pointKeys returns the mirrored keys the batch sets or deletes, sorted,
// without repeats.
func (b *StateBatch) pointKeys() ([][]byte, error) {
	keys := [][]byte{}
	r := b.b.Reader()
	for {
		kind, key, _, ok, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("streamgen: read the batch's writes: %w", err)
		}
		if !ok {
			break
		}
		if kind != pebble.InternalKeyKindRangeDelete && Mirrored(key) {
			keys = append(keys, key)
		}
	}
	slices.SortFunc(keys, bytes.Compare)
	return slices.CompactFunc(keys, bytes.Equal), nil
}

// expandRange calls del for each key in [lower, upper): the committed
// ones, then the batch's own (own, sorted). A deletion of a key the
// batch writes later is followed by that write, so it changes nothing.
func (b *StateBatch) expandRange(lower, upper []byte, own [][]byte, del func(key []byte) error) error {
	if err := b.settled(); err != nil {
		return err
	}
	it, err := b.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
	if err != nil {
		return b.readError(err)
	}
	for it.First(); it.Valid(); it.Next() {
		if Mirrored(it.Key()) {
			if err := del(it.Key()); err != nil {
				it.Close()
				return err
			}
		}
	}
	if err := it.Close(); err != nil {
		return b.readError(err)
	}
	i, _ := slices.BinarySearchFunc(own, lower, bytes.Compare)
	for ; i < len(own) && bytes.Compare(own[i], upper) < 0; i++ {
		if err := del(own[i]); err != nil {
			return err
		}
	}
	return nil
}

// TakeStartDeletions returns the keys Start deleted from the checkpoint
// (the entries of state variables the pipeline deletes; see
// AllowPipelineChanges) that no committed batch has given to the
// committer yet, so that a committer mirroring the store deletes them
// from its copy with its first batch. They are kept in the store until
// the next Commit, which deletes them: a run whose first batch never
// commits (it failed, or the process died) leaves them to the next
// run's, and a Restore that brings batches of the copy after the
// store's, or rebuilds the store, deletes them (the copy has them, or
// Start deletes them anew). Start keeps them only for a committer that
// is a Restorer. Call it from the committer's Commit.
func (s *Store) TakeStartDeletions() ([][]byte, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{startDeletionPrefix}, UpperBound: []byte{startDeletionPrefix + 1}})
	if err != nil {
		return nil, s.fail(fmt.Errorf("read the keys deleted at start: %w", err))
	}
	var keys [][]byte
	for it.First(); it.Valid(); it.Next() {
		keys = append(keys, append([]byte(nil), it.Key()[1:]...))
	}
	if err := it.Close(); err != nil {
		return nil, s.fail(fmt.Errorf("read the keys deleted at start: %w", err))
	}
	s.deletionsTaken = len(keys) > 0
	return keys, nil
}

// Snapshot calls fn for each committed mirrored record of the store, in
// key order: what a copy of the store starts from. The slices are valid
// during the call only; fn's first error stops the walk and is returned.
// It reads a consistent snapshot and is safe for concurrent use.
func (s *Store) Snapshot(fn func(key, value []byte) error) error {
	if err := s.Err(); err != nil {
		return err
	}
	snap := s.db.NewSnapshot()
	defer snap.Close()
	it, err := snap.NewIter(nil)
	if err != nil {
		return s.fail(fmt.Errorf("read checkpoint: %w", err))
	}
	for it.First(); it.Valid(); it.Next() {
		if Mirrored(it.Key()) {
			if err := fn(it.Key(), it.Value()); err != nil {
				it.Close()
				return err
			}
		}
	}
	if err := it.Close(); err != nil {
		return s.fail(fmt.Errorf("read checkpoint: %w", err))
	}
	return s.Err()
}

// Restore writes records copied from elsewhere (a changelog) into the
// store, in bulk: Set and Delete in the copy's order, then Finish. Its
// writes are committed in pieces as they come (a store restored halfway,
// by a process that stopped, holds part of the copy), so a committer
// keeps in its record how far the copy was applied, and writes it last,
// with Finish. Not safe for concurrent use; the query must not be running.
type Restore struct {
	s *Store
	b *pebble.Batch
	// size is the capacity each piece's batch starts with: a bulk
	// restore's pieces are made at full size, not grown to it.
	size int
	// n counts the records written.
	n int64
	// cleared is set by Clear: Finish records the restored batch in the
	// commit file even when it is earlier than the one there.
	cleared bool
	// from is the store's batch before the restore (-1: none).
	from int64
}

// restorePiece is the size in bytes past which a Restore commits its
// writes so far.
const restorePiece = 16 << 20

// BeginRestore starts a Restore of the store.
func (s *Store) BeginRestore() (*Restore, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	return s.beginRestore(s.db.NewBatch(), 0)
}

func (s *Store) beginRestore(b *pebble.Batch, size int) (*Restore, error) {
	r := &Restore{s: s, b: b, size: size, from: -1}
	p, ok, err := s.Progress()
	if err != nil {
		b.Close()
		return nil, err
	}
	if ok {
		r.from = p.BatchID
	}
	return r, nil
}

// BeginBulkRestore starts a Restore of many records (a whole changelog):
// its pieces are allocated at their full size at once, rather than grown
// to it by copying.
func (s *Store) BeginBulkRestore() (*Restore, error) {
	if err := s.Err(); err != nil {
		return nil, err
	}
	size := restorePiece + 1<<20
	return s.beginRestore(s.db.NewBatchWithSize(size), size)
}

// Set writes a mirrored record.
func (r *Restore) Set(key, value []byte) error {
	if !Mirrored(key) {
		return fmt.Errorf("streamgen: restore: %x is not a key of a checkpoint's state, timers, progress or metadata", key)
	}
	if err := r.usable(); err != nil {
		return err
	}
	if err := r.b.Set(key, value, nil); err != nil {
		return fmt.Errorf("streamgen: restore: %w", err)
	}
	return r.wrote()
}

// Delete deletes a mirrored record.
func (r *Restore) Delete(key []byte) error {
	if !Mirrored(key) {
		return fmt.Errorf("streamgen: restore: %x is not a key of a checkpoint's state, timers, progress or metadata", key)
	}
	if err := r.usable(); err != nil {
		return err
	}
	if err := r.b.Delete(key, nil); err != nil {
		return fmt.Errorf("streamgen: restore: %w", err)
	}
	return r.wrote()
}

// SetCommitterRecord writes a committer's record (see
// StateBatch.SetCommitterRecord) with the restore's last piece.
func (r *Restore) SetCommitterRecord(name string, value []byte) error {
	if err := r.b.Set(committerKey(name), value, nil); err != nil {
		return fmt.Errorf("streamgen: restore: %w", err)
	}
	return nil
}

// DeleteCommitterRecord deletes a committer's record, at once and synced:
// a committer calls it before it writes anything else, so that a restore
// that stops halfway is seen as not done.
func (r *Restore) DeleteCommitterRecord(name string) error {
	return r.s.write("restore", func() error { return r.s.db.Delete(committerKey(name), pebble.Sync) })
}

// Clear deletes every mirrored record (metadata, progress, state, timers,
// expiry index), the progress reports and the keys Start deleted (Start
// deletes them anew from the copy's), at once and synced, so that the
// restore that follows rebuilds the store from the copy alone: for a
// store that ran ahead of its copy (batches committed locally that the
// copy never got), which only the copy's earlier state can replace. The
// commit file goes first, so that a store cleared and not restored (a
// restore that fails or stops) opens again, as a new store or a partial
// copy, rather than as one that lost committed batches; Finish then
// records the restored batch. A committer deletes its own record
// (DeleteCommitterRecord) before it clears, so that a restore that stops
// halfway is seen as not done.
func (r *Restore) Clear() error {
	if err := r.s.unrecord(); err != nil {
		return r.s.fail(fmt.Errorf("restore: clear: %w", err))
	}
	b := r.s.db.NewBatch()
	defer r.s.closeBatch(b)
	err := b.Delete([]byte(metaKey), nil)
	if err == nil {
		err = b.Delete([]byte(progressKey), nil)
	}
	if err == nil {
		err = b.DeleteRange([]byte{reportPrefix}, []byte{reportPrefix + 1}, nil)
	}
	if err == nil {
		err = b.DeleteRange([]byte{startDeletionPrefix}, []byte{startDeletionPrefix + 1}, nil)
	}
	if err == nil {
		err = b.DeleteRange([]byte{statePrefix}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, nil)
	}
	if err != nil {
		return fmt.Errorf("streamgen: restore: clear: %w", err)
	}
	if err := r.s.write("restore: clear", func() error { return b.Commit(pebble.Sync) }); err != nil {
		return err
	}
	if r.s.state != nil {
		r.s.state.reset()
	}
	r.cleared = true
	return r.s.Err()
}

// Records returns how many records were written (set or deleted).
func (r *Restore) Records() int64 { return r.n }

func (r *Restore) wrote() error {
	r.n++
	if r.b.Len() < restorePiece {
		return nil
	}
	return r.commit(pebble.NoSync, true)
}

// usable returns the error that ended the restore, if it has ended (a
// commit that failed, Finish, Close).
func (r *Restore) usable() error {
	if r.b != nil {
		return nil
	}
	if err := r.s.Err(); err != nil {
		return err
	}
	return errors.New("streamgen: restore: used after it ended")
}

// commit commits the writes so far; more says whether a piece follows.
func (r *Restore) commit(opts *pebble.WriteOptions, more bool) error {
	if err := r.usable(); err != nil {
		return err
	}
	if err := r.s.diskRoom(r.b.Len(), "restore"); err != nil {
		return err
	}
	if err := r.s.write("restore: commit", func() error { return r.b.Commit(opts) }); err != nil {
		r.b = nil // (Pebble may still hold it)
		return err
	}
	r.b.Close()
	r.b = nil
	switch {
	case !more:
	case r.size > 0:
		r.b = r.s.db.NewBatchWithSize(r.size)
	default:
		r.b = r.s.db.NewBatch()
	}
	// A failed log write or sync calls Logger.Fatalf, after which Commit
	// returns nil.
	return r.s.Err()
}

// Finish commits the last writes, synced, forgets the state cache (it was
// filled before the restore), and records the restored batch in the
// commit file. The Restore cannot be used afterwards.
func (r *Restore) Finish() error {
	err := r.commit(pebble.Sync, false)
	r.Close()
	if err != nil {
		return err
	}
	if r.s.state != nil {
		r.s.state.reset()
	}
	p, ok, err := r.s.Progress()
	if err != nil {
		return err
	}
	if !ok {
		if r.cleared { // rebuilt to nothing: a new query's store
			return r.s.unrecord()
		}
		return nil
	}
	if r.cleared {
		return r.s.rerecord(p.BatchID)
	}
	if p.BatchID > r.from {
		// The copy has batches after the store's: the first of them
		// gave the committer the keys Start deleted (TakeStartDeletions).
		if err := r.s.write("restore", func() error {
			return r.s.db.DeleteRange([]byte{startDeletionPrefix}, []byte{startDeletionPrefix + 1}, pebble.Sync)
		}); err != nil {
			return err
		}
	}
	return r.s.record(p.BatchID)
}

// Close drops the writes not yet committed.
func (r *Restore) Close() {
	if r.b != nil {
		r.b.Close()
		r.b = nil
	}
}
