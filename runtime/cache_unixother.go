//go:build unix && !linux

package runtime

import "golang.org/x/sys/unix"

// zeroMemory makes b, from mapMemory, read as zeros. These systems may
// keep the contents of pages advised away (MADV_DONTNEED), so b is
// cleared, then advised free: the system may take its pages back, which
// then read as zeros too.
func zeroMemory(b []byte) {
	if len(b) > 0 {
		clear(b)
		_ = unix.Madvise(b, unix.MADV_FREE)
	}
}
