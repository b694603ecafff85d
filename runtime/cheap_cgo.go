//go:build linux && cgo

package runtime

/*
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

typedef int (*streamgen_trim_fn)(size_t);

static streamgen_trim_fn streamgen_trim;

// streamgen_find_trim looks malloc_trim up where the C library has it
// (glibc), so that a C library without it (musl) links too.
static int streamgen_find_trim(void) {
	streamgen_trim = (streamgen_trim_fn)dlsym(RTLD_DEFAULT, "malloc_trim");
	return streamgen_trim != NULL;
}

static void streamgen_run_trim(void) {
	if (streamgen_trim != NULL) {
		streamgen_trim(0);
	}
}
*/
import "C"

import "sync"

// haveTrim reports whether the C library returns its heap's free pages
// on request (glibc's malloc_trim).
var haveTrim = sync.OnceValue(func() bool { return C.streamgen_find_trim() != 0 })

// trimCHeap gives the free pages of the C heap back to the system, if
// the C library can. Pebble's block cache and memtables are in that heap
// (with cgo); see releaseCHeap.
func trimCHeap() {
	if haveTrim() {
		C.streamgen_run_trim()
	}
}
