//go:build !unix

package runtime

// mapMemory returns n bytes for the cache's arena: from the Go heap where
// the system offers no anonymous mappings.
func mapMemory(n int) []byte {
	if n <= 0 {
		return nil
	}
	return make([]byte, n)
}

func releaseMemory([]byte) {}

func unmapMemory([]byte) {}

// zeroMemory makes b read as zeros.
func zeroMemory(b []byte) { clear(b) }
