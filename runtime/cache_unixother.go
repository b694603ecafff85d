//go:build unix && !linux

package runtime

// zeroMemory makes b, from mapMemory, read as zeros. These systems may
// keep the contents of pages advised away (MADV_DONTNEED: macOS, the
// BSDs), so b is cleared, and its pages stay resident.
func zeroMemory(b []byte) { clear(b) }
