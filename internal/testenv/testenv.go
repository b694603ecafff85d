// Package testenv says how much the repository's tests do, and holds
// what tests of several packages share. `go test ./...`
// runs what a newcomer waits for, in a few minutes; with
// STREAMGEN_TEST_FULL=1, which .ci/run sets, the tests that take long (the
// fault campaign's full size, end-to-end builds of the examples, a
// hundred thousand files) run too.
package testenv

import (
	"bytes"
	"log/slog"
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

// CaptureLog sends slog's default logger to a buffer for the rest of the
// test, and returns the buffer, to read once what logs has stopped. Not
// for parallel tests: the default logger is the process's.
func CaptureLog(t testing.TB) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(old) })
	return &buf
}
