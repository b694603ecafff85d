package runtime

import (
	"bytes"
	"sync/atomic"
)

// liveBatch holds the counts of the running batch that its reading
// publishes (Batch.RecordRead, AddInputRows): atomics, so that the loop
// never waits for a reader of Status. The rest of the running batch, set
// once at its start, is in Query.status under Query.mu.
type liveBatch struct {
	rows, inputsDone atomic.Int64
}

// beginBatch shows b as the running batch in Status, with the inputs its
// sources planned where they count them (InputCounter). A source that
// cannot count this batch's inputs is left out of the figures.
func (q *Query) beginBatch(b *Batch, planned offsets) {
	var inputs int64
	for i, in := range q.plan.Inputs {
		c, ok := in.Source.(InputCounter)
		if !ok || bytes.Equal(planned.start[i], planned.end[i]) {
			continue
		}
		n, err := c.PlannedInputs(planned.start[i], planned.end[i])
		if err != nil {
			continue // Read, which decodes the same offsets, says why
		}
		b.inputs[i].counter, b.inputs[i].planned = c, n
		inputs += n
	}
	b.live = &q.live
	q.mu.Lock()
	defer q.mu.Unlock()
	q.live.rows.Store(0)
	q.live.inputsDone.Store(0)
	q.status.Batch = RunningBatch{BatchID: b.ID, Started: b.started, InputsPlanned: inputs}
}

// endBatch shows no running batch in Status.
func (q *Query) endBatch() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.status.Batch = RunningBatch{}
}
