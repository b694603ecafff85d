package codec

import "unsafe"

// AsBytes returns p, a slice of a named byte type ([]Level with type Level
// uint8), as a []byte over the same memory: nil stays nil, empty stays
// empty. Generated code encodes such slices as []byte, as encoding/json
// does.
func AsBytes[E ~uint8](p []E) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(p))), len(p))
}

// BytesAs returns p as a slice of the named byte type E over the same
// memory; it is AsBytes reversed, for decoding.
func BytesAs[E ~uint8](p []byte) []E {
	return unsafe.Slice((*E)(unsafe.Pointer(unsafe.SliceData(p))), len(p))
}
