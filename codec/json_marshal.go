package codec

import (
	"sync"
	"sync/atomic"
)

// JSONAppender is implemented by generated types: AppendJSON appends the
// value's JSON encoding to b.
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// jsonBufPool holds buffers for MarshalJSONOf, so that encoding into one
// costs no allocations once it has grown.
var jsonBufPool = sync.Pool{New: func() any { return new([]byte) }}

// jsonBufMax is the largest buffer kept in jsonBufPool, so that one huge
// value does not pin its buffer for good.
const jsonBufMax = 64 << 10

// MarshalJSONOf returns v's AppendJSON output in a new slice of exactly
// its length, as encoding/json's Marshal does: it encodes into a pooled
// buffer and copies the result out, which costs one allocation instead of
// the repeated growth of appending to nil. Generated MarshalJSON methods
// can be written as "return codec.MarshalJSONOf(t)".
func MarshalJSONOf(v JSONAppender) ([]byte, error) {
	bp := jsonBufPool.Get().(*[]byte)
	b, err := v.AppendJSON((*bp)[:0])
	var out []byte
	if err == nil {
		// append, unlike make, does not zero what it copies over.
		out = append([]byte(nil), b...)
	}
	if cap(b) <= jsonBufMax {
		*bp = b
		jsonBufPool.Put(bp)
	}
	return out, err
}

// JSONSize is a running estimate of the size of one type's JSON encoding,
// for generated MarshalJSON methods. While Small reports true, they
// append the encoding to a buffer of JSONStackSize bytes on their own
// stack and return a copy of exactly its length: one allocation, of the
// smallest size class that holds it; while Medium does, the same with a
// buffer of JSONMediumStackSize bytes. Past that, Buffer returns a new,
// empty buffer of about the estimated size and the encoding is appended
// to it once (no copy). Either way Observe learns from the size it had.
// A value larger than the estimate grows the buffer as append does, once,
// and raises the estimate; one much smaller lowers it, so that a rare
// large value does not make every later buffer large. JSONSize is safe
// for concurrent use: a race between Observe calls only makes the
// estimate less exact. The zero value is ready to use.
type JSONSize struct {
	n atomic.Uint32
}

// jsonSizeFirst is the estimate before any value has been seen.
const jsonSizeFirst = 128

// JSONStackSize is the size of the buffer that generated MarshalJSON
// methods keep on their stack for encodings that JSONSize.Small expects to
// fit in it.
const JSONStackSize = 512

// Small reports whether the estimate, which includes room for the
// writers' slack, fits in JSONStackSize bytes.
func (s *JSONSize) Small() bool {
	return s.n.Load() <= JSONStackSize
}

// JSONMediumStackSize is the size of the buffer that generated MarshalJSON
// methods keep on their stack for encodings that JSONSize.Medium expects
// to fit in it. Copying the result out of it allocates exactly the bytes
// the result needs, where a buffer sized by the estimate would allocate
// the largest recent size (and an eighth) for every value: for records
// whose sizes vary, as most do, that is a third more bytes for the
// collector, which costs more than the copy and the clearing of the
// buffer.
const JSONMediumStackSize = 2048

// Medium reports whether the estimate fits in JSONMediumStackSize bytes.
func (s *JSONSize) Medium() bool {
	return s.n.Load() <= JSONMediumStackSize
}

// Buffer returns an empty slice with room for the estimated size.
func (s *JSONSize) Buffer() []byte {
	n := s.n.Load()
	if n == 0 {
		n = jsonSizeFirst
	}
	return make([]byte, 0, n)
}

// Observe records that an encoding was size bytes long. The estimate is
// the size with an eighth more room, so that values of nearly the same
// size fit without growing; it is raised when size does not fit, and
// lowered when size fills less than half of it. It stays under
// jsonBufMax.
func (s *JSONSize) Observe(size int) {
	est := int(s.n.Load())
	if size <= est && size >= est/2 {
		return
	}
	s.n.Store(uint32(min(size+size/8+8, jsonBufMax)))
}
