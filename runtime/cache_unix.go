//go:build unix

package runtime

import "syscall"

// mapMemory returns n bytes of memory outside the Go heap: an anonymous
// mapping, whose pages the system provides when first touched.
func mapMemory(n int) []byte {
	if n <= 0 {
		return nil
	}
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	return b
}

// releaseMemory gives the pages of b back to the system; b stays usable
// (reading zeros).
func releaseMemory(b []byte) {
	if len(b) > 0 {
		_ = syscall.Madvise(b, syscall.MADV_DONTNEED)
	}
}

// unmapMemory returns b, from mapMemory, to the system.
func unmapMemory(b []byte) {
	if len(b) > 0 {
		if err := syscall.Munmap(b); err != nil {
			// Memory from the Go heap (mapMemory's fallback): the
			// collector takes it back.
			return
		}
	}
}

// zeroMemory makes b, from mapMemory, read as zeros: its pages go back to
// the system where it allows, so that memory cleared is not resident.
func zeroMemory(b []byte) {
	if len(b) > 0 && syscall.Madvise(b, syscall.MADV_DONTNEED) != nil {
		clear(b)
	}
}
