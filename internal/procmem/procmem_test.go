package procmem

import (
	goruntime "runtime"
	"testing"
)

func TestStatusReadsResidentMemory(t *testing.T) {
	if goruntime.GOOS != "linux" {
		t.Skip("/proc/self/status is Linux's")
	}
	// 64 MiB touched page by page must show in the resident figures.
	before := Status("VmRSS")
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after, peak := Status("VmRSS"), Peak()
	goruntime.KeepAlive(buf)
	if after-before < 48<<20 {
		t.Errorf("VmRSS went from %d to %d bytes after touching 64 MiB", before, after)
	}
	if peak < after {
		t.Errorf("VmHWM %d is below VmRSS %d", peak, after)
	}
	if got := Status("NoSuchField"); got != 0 {
		t.Errorf("a missing field read as %d", got)
	}
}
