//go:build !linux || !cgo

package runtime

// trimCHeap reports that the C heap's free pages cannot be returned
// here: Pebble's caches are in the Go heap (without cgo), or the C
// library returns them itself.
func trimCHeap() bool { return false }
