package codec

import "sync"

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
