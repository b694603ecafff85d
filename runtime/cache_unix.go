//go:build unix

package runtime

import "golang.org/x/sys/unix"

// mapMemory returns n bytes of memory outside the Go heap: an anonymous
// mapping, whose pages the system provides when first touched.
func mapMemory(n int) []byte {
	if n <= 0 {
		return nil
	}
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		return make([]byte, n)
	}
	return b
}

// releaseMemory gives the pages of b back to the system; b stays usable,
// its contents undefined until written (zeros on Linux; other systems may
// keep them).
func releaseMemory(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_DONTNEED)
	}
}

// unmapMemory returns b, from mapMemory, to the system.
func unmapMemory(b []byte) {
	if len(b) > 0 {
		if err := unix.Munmap(b); err != nil {
			// Memory from the Go heap (mapMemory's fallback): the
			// collector takes it back.
			return
		}
	}
}
