package kafka

import (
	"encoding/binary"
	"testing"
)

// TestBatchesBefore cuts a fetch's record batches after the first one
// that starts at or past the end of the read, keeping every batch that
// may hold an offset before it, and leaves what does not parse whole.
func TestBatchesBefore(t *testing.T) {
	// batch returns a batch framing: offset, length, then length bytes.
	batch := func(offset int64, length int) []byte {
		b := binary.BigEndian.AppendUint64(nil, uint64(offset))
		b = binary.BigEndian.AppendUint32(b, uint32(length))
		return append(b, make([]byte, length)...)
	}
	var raw []byte
	var ends []int // where each batch ends in raw
	for _, offset := range []int64{0, 10, 20, 30} {
		raw = append(raw, batch(offset, 50)...)
		ends = append(ends, len(raw))
	}
	for _, c := range []struct {
		to   int64
		want int // bytes kept
	}{
		{1, ends[1]},  // batch 10 starts past the end: kept as the first such, then cut
		{10, ends[1]}, // the batch at 10 may be an older message set ending at 10
		{15, ends[2]},
		{30, ends[3]},
		{31, ends[3]},
		{1000, ends[3]},
	} {
		if got := len(batchesBefore(raw, c.to)); got != c.want {
			t.Errorf("to %d: kept %d bytes, want %d", c.to, got, c.want)
		}
	}
	// A batch cut short by the fetch's size is kept as it is; a length
	// that does not parse leaves the rest whole.
	short := raw[:ends[1]+20]
	if got := len(batchesBefore(short, 1000)); got != len(short) {
		t.Errorf("a partial last batch: kept %d bytes, want all %d", got, len(short))
	}
	bad := append(append([]byte(nil), raw[:ends[0]]...), batch(10, 5)...)
	binary.BigEndian.PutUint32(bad[ends[0]+8:], 0xffffffff)
	if got := len(batchesBefore(bad, 1000)); got != len(bad) {
		t.Errorf("a negative length: kept %d bytes, want all %d", got, len(bad))
	}
}
