// Package runtime runs streamgen queries, knowing no record types.
//
// Package typed compiles a typed pipeline into a Plan: inputs (a Source and
// the stage that reads and decodes it), keyed stateful Operators, and
// Outputs. Start runs the plan's micro-batch loop in a goroutine it owns;
// each batch goes through its phases in order, timed for the progress
// report:
//
//   - plan the offsets of every source (Source.Next), and record them in
//     the checkpoint before the batch runs (Spark's offset log): a batch
//     run again after a failure reads exactly the input of its first
//     attempt;
//   - read every input, which pushes rows through the stateless stages into
//     the first operator's Groups, or to the outputs;
//   - operator by operator: in the first batch of a new query, the initial
//     state; a call per key with rows, in order of each key's first row
//     (KeyState gives the key's state and timers); then a call per timer
//     due, in expiry order;
//   - write the outputs and the dead letters, idempotently by batch id;
//   - commit (Committer): state, timers, offsets, watermark and batch id in
//     one Pebble batch; then the commit file records the batch id once the
//     batch is durable. A committer given with WithCommitter wraps the
//     store's: one that copies the store elsewhere (package kafka's
//     changelog) reads a batch's records with StateBatch.Changes before
//     it commits, and, as a Restorer, brings a lost or stale checkpoint
//     back from its copy at Start (Store.BeginRestore).
//
// With the store as committer and a trigger that starts the next batch
// at once (AvailableNow, or none), a batch's commit runs on a goroutine
// while the next batch is read and its operators called: the next batch's
// plan is recorded after that commit, its reads that the state cache
// cannot answer wait for it, and its outputs and its own commit wait until
// it is durable, so the phases above keep their order wherever anything
// is seen or made durable; a failed commit ends the query before the next
// batch writes anything (see inflight.go).
//
// The Store keeps state entries by (partition, operator, variable, key,
// suffix), so a key's entries, an operator's, or a whole input partition's
// are each one range; a StateBatch reads its own writes, scans in key order
// and deletes ranges. The timer service keeps any number of timers per key
// in an index by expiry (the due timers are one range scan) and one by key.
// A cache of committed state sits in front of Pebble. The checkpoint
// records the pipeline (Meta) and refuses one that cannot continue from it.
//
// A checkpoint describes itself: Meta holds the schemas of the grouping
// keys and state variables and how their entries are laid out, so
// OpenCheckpoint reads a stopped query's state without its code (streamgen
// inspect is built on it). One query at a time holds a checkpoint: a
// second Start on it is refused with an error wrapping
// ErrCheckpointInUse; OpenCheckpoint reads a running query's checkpoint
// from a snapshot the query makes (ErrCheckpointInUse when the query does
// not answer within 30 seconds).
//
// # Watching a query
//
// Each committed batch makes a QueryProgress (Spark's
// StreamingQueryProgress), kept by RecentProgress and passed to listeners
// (Listener); it carries the state store's own figures (StoreProgress).
// Status says what the query does now, and, while a batch runs, how far it
// has gone (RunningBatch). LogProgress logs a line per batch with log/slog.
// Package runtime/observe exports the reports as Prometheus metrics and
// shows them on a status page.
//
// # Storage faults
//
// A checkpoint is a Pebble store and one file of streamgen's beside it,
// the commit file (STREAMGEN-COMMIT), which records outside Pebble the
// last batch known committed durably.
//
// While a query runs, the first fault its store meets is the store's
// failure: a write or sync that fails (a full disk), a flush or
// compaction that fails in the background, a block whose checksum does
// not match. Every later read, write and commit returns it, and the query
// ends with an error that wraps ErrStoreFailed (and ErrCorruptCheckpoint
// for damaged data) and names the checkpoint directory, the file when
// known, and the cause; Query.Err reports it. Nothing is half committed:
// started again once the cause is fixed, the query resumes from the last
// committed batch. Pebble alone would go on: it retries a failed flush in
// a loop, without pause, until its memtables are full and writes stall
// for ever; ending the query closes the store, which stops it. Stop, and
// a query whose store failed, wait for the query's goroutine up to
// CloseTimeout (30 seconds by default), then end with an error wrapping
// ErrStoreNotClosed: a call into a disk that hangs may never return.
//
// A disk that fills needs a margin: Pebble moves to a new log file for
// every memtable's worth of writes (MemTableSize) and for every batch of
// over half of one, preallocating 110% of a memtable for it, and when it
// cannot close its log or create the next one it would end the process
// (the store fails instead, and is left open until the process ends:
// ErrStoreLeftOpen). So the store keeps DiskReserve of the checkpoint's
// file system free (256 MiB by
// default, at most a twentieth of its size, never under that
// preallocation): Start refuses to start with less
// free, and a batch whose commit would leave less, counting its writes
// twice, ends the query with an error wrapping ErrDiskFull and
// ErrStoreFailed that says how much was free and needed, before Pebble
// sees any of it. The reserve covers the query's own writes; another
// process filling the disk, or a compaction that needs more than the
// reserve, can still fill it, and fails the store as any fault does.
//
// A start whose store replays batches from its log flushes them while
// Pebble opens, and Pebble retries a flush that fails in a loop: a fault
// there fails that start with the cause, and the open is left behind in
// the process, holding what it replayed in memory, with the checkpoint's
// lock released, so that a start in the same process once the cause is
// fixed opens it whole. After three such opens of one checkpoint, a
// process refuses the next until it is restarted. A directory sync that
// fails fails the store too, where Pebble would end the process (as a
// flush or a compaction moves to a new MANIFEST); a snapshot for
// streamgen inspect that meets a fault fails alone.
//
// At start, OpenStore refuses a checkpoint whose files are damaged (a
// checksum that does not match in the blocks read to open it, a table cut
// short or missing, a malformed MANIFEST) with ErrCorruptCheckpoint, the
// file, and the way out: a fresh checkpoint directory, which a query
// with a changelog (kafka.Changelog) restores from its topic. Damage in blocks that are read later is a
// failure of the running query, as above.
//
// Pebble may also open, without a word, a store that holds less than was
// committed: a write-ahead log cut short replays up to the cut, a
// MANIFEST cut short opens as its earlier edits, and a missing MANIFEST
// marker opens as a new, empty store, whose tables a writable open then
// deletes. A checkpoint with a commit file is therefore opened read-only
// first, and refused with ErrRewoundCheckpoint, before anything is
// written, when its store's progress is behind the commit file, when it
// is empty, or when it has lost its tables (the key written once when it
// was created is gone), and, before that, when its current MANIFEST is
// shorter than the commit file recorded, or the bytes recorded changed
// (the commit file marks the MANIFEST's length and checksum while no
// flush or compaction writes it: Pebble would open a MANIFEST damaged in
// its middle as its records before the damage, without the tables the
// later ones added). Starting on it anyway, after deleting the commit
// file, rewinds the query: the batches after the store's progress run
// again, under the same batch ids, from the offsets that progress
// recorded (an empty store starts over from the sources' start, at batch
// id 0). The sinks are idempotent by batch id, but a batch run again need
// not hold the same rows: its end offsets are planned again from what the
// sources hold now, its processing time differs, and a source may no
// longer hold the records. A sink that skips the ids it has seen (as
// Spark's file sink does) keeps the old rows and drops the new ones,
// while the state goes on from the new; a sink that replaces a batch's
// rows changes output that may have been read already. Restoring the
// directory from a backup, or a fresh checkpoint directory with fresh
// sink output, avoids both.
//
// The commit file never runs ahead of what Pebble holds durably. With
// SyncInterval 0 it is written after each synced commit. With a
// SyncInterval, a commit hands its batch to Pebble's log writer, whose
// goroutine writes it to the log file at once, without waiting for a
// sync, and syncs the file at most once per interval; the commit file
// follows the completed syncs. A process crash, where the operating
// system keeps what was written, loses no committed batch but one whose
// commit returned in the instant before, which the log writer had not
// yet written (it may be finishing a sync). A machine crash then loses at most the batches after
// the last sync, which the commit file does not claim: the store opens,
// behind, and those batches run again.
package runtime
