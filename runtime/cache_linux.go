package runtime

import "golang.org/x/sys/unix"

// zeroMemory makes b, from mapMemory, read as zeros: its pages go back to
// the system (a private anonymous mapping reads as zeros after
// MADV_DONTNEED), so that memory cleared is not resident.
func zeroMemory(b []byte) {
	if len(b) > 0 && unix.Madvise(b, unix.MADV_DONTNEED) != nil {
		clear(b)
	}
}
