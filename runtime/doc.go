// Package runtime runs streamgen queries, knowing no record types.
//
// Package typed compiles a typed pipeline into a Plan: inputs (a Source and
// the stage that reads and decodes it), keyed stateful Operators, and
// Outputs. Start runs the plan's micro-batch loop in a goroutine it owns;
// each batch goes through its phases in order, timed for the progress
// report:
//
//   - plan the offsets of every source (Source.Next);
//   - read every input, which pushes rows through the stateless stages into
//     the first operator's Groups, or to the outputs;
//   - operator by operator: in the first batch of a new query, the initial
//     state; a call per key with rows, in order of each key's first row
//     (KeyState gives the key's state and timers); then a call per timer
//     due, in expiry order;
//   - write the outputs and the dead letters, idempotently by batch id;
//   - commit (Committer): state, timers, offsets, watermark and batch id in
//     one Pebble batch.
//
// The Store keeps state entries by (partition, operator, variable, key,
// suffix), so a key's entries, an operator's, or a whole input partition's
// are each one range; a StateBatch reads its own writes, scans in key order
// and deletes ranges. The timer service keeps any number of timers per key
// in an index by expiry (the due timers are one range scan) and one by key.
// A cache of committed state sits in front of Pebble. The checkpoint
// records the pipeline (Meta) and refuses one that cannot continue from it.
package runtime
