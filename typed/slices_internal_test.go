package typed

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
)

// FuzzSlicesRow decodes a stored row of sliding windows' slices
// (runtime.EncodingSlices) from any bytes: a row that does not decode is
// an error, never a panic; one that does is encoded back to the same
// slices.
func FuzzSlicesRow(f *testing.F) {
	o := &sliceOp[string, int64, CountAcc, int64, int64, *CountAcc]{}
	o.closed = math.MinInt64
	o.slices = []sliceAcc[CountAcc]{{start: -20, acc: CountAcc{N: 3}}, {start: 0, acc: CountAcc{N: 1}}, {start: 40, acc: CountAcc{N: 1 << 40}}}
	seed, err := o.encode()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(slices.Clone(seed))
	f.Add(binary.AppendUvarint(binary.AppendVarint(nil, 7), 1<<40))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		o := &sliceOp[string, int64, CountAcc, int64, int64, *CountAcc]{}
		if err := o.decode(raw); err != nil {
			return
		}
		closed, got := o.closed, slices.Clone(o.slices)
		again, err := o.encode()
		if err != nil {
			t.Fatalf("decoded slices do not encode: %v", err)
		}
		if err := o.decode(slices.Clone(again)); err != nil {
			t.Fatalf("encoded slices do not decode: %v", err)
		}
		if o.closed != closed || !slices.Equal(o.slices, got) {
			t.Fatalf("slices %v closed at %d, then %v closed at %d", got, closed, o.slices, o.closed)
		}
	})
}
