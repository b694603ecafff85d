package typed

import (
	"fmt"

	"github.com/streamgen/streamgen/runtime"
)

// keyedRows gathers a batch's rows of an operator that takes rows of
// several kinds (the inputs of a table join): each key's group in the
// runtime's Groups, the key of each group, and the rows in the order they
// came. One query's loop uses it.
type keyedRows[K comparable, R any] struct {
	groups runtime.Groups
	group  map[K]int32
	keys   []K
	keyBuf []byte
	rows   []R
}

// add adds r to the group of k, encoded with codec; a key that does not
// encode panics with a userPanic naming the operator of info.
func (b *keyedRows[K, R]) add(codec keyCodec[K], info *runtime.OperatorInfo, k K, r *R) {
	g, ok := b.group[k]
	if !ok {
		var err error
		if b.keyBuf, err = codec.encode(b.keyBuf[:0], &k); err != nil {
			panic(userPanic{fmt.Errorf("streamgen: %s (%s): key %v: %w", info.Kind, info.Name, k, unprefixed(err))})
		}
		b.keys = appendDoubling(b.keys, &k)
		if b.group == nil {
			b.group = make(map[K]int32)
		}
		g = b.groups.NewGroup(b.keyBuf)
		b.group[k] = g
	}
	b.groups.AddRow(g)
	b.rows = appendDoubling(b.rows, r)
}

// endBatch drops the batch's rows and keys, keeping the memory for the
// next batch (but for a map of keys grown past 2M).
func (b *keyedRows[K, R]) endBatch() {
	clear(b.rows)
	clear(b.keys)
	b.rows, b.keys = b.rows[:0], b.keys[:0]
	if len(b.group) > 1<<21 {
		b.group = nil
	} else {
		clear(b.group)
	}
}
