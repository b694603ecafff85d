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
	// nulls counts the updates dropped for a null key.
	nulls nullKeys
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
		if b.group == nil {
			b.group = make(map[K]int32)
		}
		var added bool
		if g, added = codec.group(&b.groups, b.keyBuf); added {
			b.keys = appendDoubling(b.keys, &k)
		}
		if k == k {
			b.group[k] = g
		}
	}
	b.groups.AddRow(g)
	b.rows = appendDoubling(b.rows, r)
}

// endBatch drops the batch's rows and keys, keeping the memory for the
// next batch (but for a map of keys grown past 2M).
func (b *keyedRows[K, R]) endBatch() {
	b.nulls = nullKeys{}
	clear(b.rows)
	clear(b.keys)
	b.rows, b.keys = b.rows[:0], b.keys[:0]
	if len(b.group) > 1<<21 {
		b.group = nil
	} else {
		clear(b.group)
	}
}

// tablesPlan is what building a join of tables (or a table's changes)
// shares: its name, the plan of its inputs, and the errors found, for
// which only UpdatesName of the options applies.
type tablesPlan struct {
	what, name string
	p          *plan
}

// newTablesPlan reads opts and joins the plans of the inputs (right nil
// for one); what names the function in errors, and row names the
// operator when UpdatesName does not.
func newTablesPlan(what string, left, right *plan, row any, opts []UpdatesOption) *tablesPlan {
	var cfg updatesConfig
	for _, o := range opts {
		o.applyUpdates(&cfg)
	}
	t := &tablesPlan{what: what, name: cfg.name, p: left}
	if t.name == "" {
		t.name = funcName(row)
	}
	if right != nil {
		t.p = left.with(func(q *plan) {
			q.errs = append(q.errs, right.errs...)
			if !left.watermarked {
				q.watermarkDelay = right.watermarkDelay
			}
			q.watermarked = left.watermarked || right.watermarked
		})
	}
	if cfg.asOf || cfg.history != 0 {
		t.fail("AsOf and TableHistory apply to a stream joined with a table (JoinUpdates)")
	}
	return t
}

// fail records an error of the plan.
func (t *tablesPlan) fail(format string, args ...any) {
	t.p = t.p.failed("streamgen: "+t.what+" (%s): "+format, append([]any{t.name}, args...)...)
}

// codecOf returns the codec of values of type V, recording an error of
// the plan, about what, when V has none.
func codecOf[V any](t *tablesPlan, what string) valueCodec[V] {
	c, err := newValueCodec[V]()
	if err != nil {
		t.fail("%s: %v", what, unprefixed(err))
	}
	return c
}
