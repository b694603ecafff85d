//go:build !linux || !cgo

package runtime

// trimCHeap does nothing here: without cgo, Pebble's caches are in the
// Go heap, whose collector returns their pages; on other systems, the C
// library's allocator returns free pages itself.
func trimCHeap() {}
