package typed

import (
	"encoding/binary"
	"fmt"

	"github.com/streamgen/streamgen/codec"
	"github.com/streamgen/streamgen/runtime"
)

// The helpers below are shared by the operators that keep each key's
// state as one value row of aggregates (session windows, the windows of
// a time difference).

// modalInfo is the part of an operator's description that follows the
// query's output mode: in any mode but Complete, a batch without data
// runs when the watermark moves, to close windows.
type modalInfo struct {
	info runtime.OperatorInfo
	mode *OutputMode
}

func (m modalInfo) Info() runtime.OperatorInfo {
	info := m.info
	info.OutputMode = m.mode.String()
	if *m.mode != Complete {
		info.NoData = runtime.NoDataOnWatermark
	}
	return info
}

// appendSizedAcc appends uvarint(len) and acc's binary encoding.
func appendSizedAcc[Acc any, PA codec.RecordPtr[Acc]](b []byte, acc *Acc) ([]byte, error) {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 0) // room for the length, fixed below
	b, err := PA(acc).AppendBinary(b)
	if err != nil {
		return nil, err
	}
	enc := append([]byte(nil), b[start+5:]...)
	b = binary.AppendUvarint(b[:start], uint64(len(enc)))
	return append(b, enc...), nil
}

// readSizedAcc reads what appendSizedAcc appended, and returns the rest.
func readSizedAcc[Acc any, PA codec.RecordPtr[Acc]](raw []byte, corrupt error) (acc Acc, rest []byte, err error) {
	size, w := binary.Uvarint(raw)
	if w <= 0 || uint64(len(raw)-w) < size {
		return acc, nil, corrupt
	}
	if err := PA(&acc).UnmarshalBinary(raw[w : w+int(size)]); err != nil {
		return acc, nil, fmt.Errorf("stored aggregate does not decode: %w", unprefixed(err))
	}
	return acc, raw[w+int(size):], nil
}

// appendTimedAccs appends uvarint(n) and n accumulators, each
// varint(at) (Unix nanoseconds) and appendSizedAcc's: item gives the
// i-th (runtime.EncodingInstants' layout, and that of the slices of
// EncodingSlices).
func appendTimedAccs[Acc any, PA codec.RecordPtr[Acc]](b []byte, n int, item func(i int) (int64, *Acc)) ([]byte, error) {
	b = binary.AppendUvarint(b, uint64(n))
	for i := range n {
		at, acc := item(i)
		var err error
		b = binary.AppendVarint(b, at)
		if b, err = appendSizedAcc[Acc, PA](b, acc); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// readTimedAccs reads what appendTimedAccs appended, calling add with
// each accumulator in turn.
func readTimedAccs[Acc any, PA codec.RecordPtr[Acc]](raw []byte, corrupt error, add func(at int64, acc Acc) error) error {
	n, w := binary.Uvarint(raw)
	if w <= 0 || n > uint64(len(raw)) {
		return corrupt
	}
	raw = raw[w:]
	for range n {
		at, w := binary.Varint(raw)
		if w <= 0 {
			return corrupt
		}
		acc, rest, err := readSizedAcc[Acc, PA](raw[w:], corrupt)
		if err != nil {
			return err
		}
		if err := add(at, acc); err != nil {
			return err
		}
		raw = rest
	}
	return nil
}

// copyAcc returns a copy of acc that shares no memory with it, through
// its binary encoding in *buf, for an accumulator merged into several
// windows whose Merge may change or pass on the memory it holds; what
// names the operator.
func copyAcc[Acc any, PA codec.RecordPtr[Acc]](buf *[]byte, acc Acc, what string) Acc {
	var err error
	if *buf, err = PA(&acc).AppendBinary((*buf)[:0]); err == nil {
		var c Acc
		if err = PA(&c).UnmarshalBinary(*buf); err == nil {
			return c
		}
	}
	panic(userPanic{fmt.Errorf("streamgen: %s: an accumulator does not copy: %w", what, unprefixed(err))})
}

// loadValue reads the key's value row with decode; ok is false when it
// has none.
func loadValue(k *runtime.KeyState, decode func([]byte) error) (bool, error) {
	raw, ok, err := k.Get(0, nil)
	if err != nil || !ok {
		return false, err
	}
	if err := decode(raw); err != nil {
		return false, k.Fail(err)
	}
	return true, nil
}

// saveValue writes the key's value row with encode, or deletes it when
// empty, counting the row in the operator's report.
func saveValue(k *runtime.KeyState, existed, empty bool, encode func() ([]byte, error), what string) error {
	if empty {
		if !existed {
			return nil
		}
		if err := k.Delete(0, nil); err != nil {
			return err
		}
		k.Removed()
		return nil
	}
	raw, err := encode()
	if err != nil {
		return k.Fail(fmt.Errorf("%s: %w", what, unprefixed(err)))
	}
	if err := k.Put(0, nil, raw); err != nil {
		return err
	}
	k.Updated(!existed)
	return nil
}
