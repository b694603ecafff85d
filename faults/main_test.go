package faults_test

import (
	"fmt"
	"github.com/streamgen/streamgen/internal/testenv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// bin is the directory TestMain builds the programs into.
var bin string

// The programs, as built from these packages (relative to this one).
var packages = []string{
	"../examples/activity",
	"../examples/devicewindows",
	"../examples/sessions",
	"./testdata/countkeys",
}

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "streamgen-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults_test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// go test puts its own go first on PATH.
	args := append([]string{"build", "-o", dir + string(filepath.Separator)}, packages...)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "faults_test: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	bin = dir
	return m.Run()
}

// long reports whether the long campaign was asked for.
func long() bool { return os.Getenv("STREAMGEN_FAULTS_LONG") == "1" }

// campaignSize is how much of each fault the campaign tries.
type campaignSize struct {
	// killsPerProgram is how many SIGKILLs each program must survive.
	killsPerProgram int
	// files and rowsPerFile shape the input of the kill runs: one file
	// per batch, so a run has about files batches to be killed in.
	files, rowsPerFile int
	// flips is how many single bytes of each checkpoint file are
	// flipped, each in a copy of its own, besides the damages every
	// campaign does (truncated to half, emptied, middle overwritten,
	// deleted).
	flips int
}

func size() campaignSize {
	if long() {
		return campaignSize{
			killsPerProgram: 200,
			files:           60,
			rowsPerFile:     200,
			flips:           16,
		}
	}
	if !testenv.Full() {
		// What `go test ./...` runs: a kill each, on a short input.
		return campaignSize{
			killsPerProgram: 1,
			files:           12,
			rowsPerFile:     150,
		}
	}
	return campaignSize{
		killsPerProgram: 3,
		files:           24,
		rowsPerFile:     150,
	}
}

// newRand returns the campaign's source of random choices, seeded from
// STREAMGEN_FAULTS_SEED or else the clock, and logs the seed.
func newRand(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("STREAMGEN_FAULTS_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("STREAMGEN_FAULTS_SEED=%q: %v", s, err)
		}
	}
	t.Logf("random choices from STREAMGEN_FAULTS_SEED=%d", seed)
	return rand.New(rand.NewPCG(seed, 0x5eed))
}
