// Package testenv says how much the repository's tests do. `go test ./...`
// runs what a newcomer waits for, in a few minutes; with
// STREAMGEN_TEST_FULL=1, which .ci/run sets, the tests that take long (the
// fault campaign's full size, end-to-end builds of the examples, a
// hundred thousand files) run too.
package testenv

import (
	"os"
	"testing"
)

// FullEnv is the environment variable that asks for the full tests.
const FullEnv = "STREAMGEN_TEST_FULL"

// Full reports whether the full tests are asked for. Safe for concurrent
// use.
func Full() bool { return os.Getenv(FullEnv) == "1" }

// SkipUnlessFull skips t, saying why and how to run it, unless the full
// tests are asked for.
func SkipUnlessFull(t testing.TB, why string) {
	t.Helper()
	if !Full() {
		t.Skipf("%s: %s=1 runs it (.ci/run does)", why, FullEnv)
	}
}
