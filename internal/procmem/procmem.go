// Package procmem reads the process's memory figures from Linux's
// /proc/self/status, for the tests and benchmarks that report or bound
// resident memory. Elsewhere the figures read as 0.
package procmem

import (
	"os"
	goruntime "runtime"
	"runtime/debug"
	"strconv"
	"strings"
)

// Status returns the field of /proc/self/status named field (as
// "VmHWM", "VmRSS" or "RssAnon"), whose value is in kB, in bytes; 0 when
// the file cannot be read or has no such field. It is safe for
// concurrent use.
func Status(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// Peak returns the process's peak resident memory (VmHWM) in bytes,
// since it started or since the last ResetPeak.
func Peak() int64 { return Status("VmHWM") }

// ResetPeak collects garbage, returns the memory the process no longer
// uses to the system, and starts the peak (VmHWM) again from the memory
// resident now (Linux's clear_refs 5), so that what runs next has a peak
// of its own.
func ResetPeak() {
	goruntime.GC()
	debug.FreeOSMemory()
	os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}
