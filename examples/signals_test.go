// Package examples_test runs the example programs as an operator would:
// built with go build, as processes, stopped with real signals.
package examples_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// bin is the directory TestMain builds the programs into.
var bin string

var programs = []string{"activity", "devicewindows", "sessions"}

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	dir, err := os.MkdirTemp("", "streamgen-examples-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "examples_test:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	// go test puts its own go first on PATH.
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, p := range programs {
		args = append(args, "./"+p)
	}
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "examples_test: go %s: %v\n%s", strings.Join(args, " "), err, out)
		return 1
	}
	bin = dir
	return m.Run()
}

// safetyNet bounds each wait on a program; reaching it is a failure, not
// a way to pace the test.
const safetyNet = time.Minute

// process is a running example program whose stderr the test reads line
// by line.
type process struct {
	cmd    *exec.Cmd
	lines  chan string   // stderr, closed at its end
	quit   chan struct{} // closed at cleanup: the reader stops sending
	stderr strings.Builder
}

func start(t *testing.T, program string, args ...string) *process {
	t.Helper()
	p := &process{
		cmd:   exec.Command(filepath.Join(bin, program), args...),
		lines: make(chan string),
		quit:  make(chan struct{}),
	}
	// Its temporary directories (the built-in sample, a checkpoint),
	// which an exit at the second signal leaves, go in the test's.
	p.cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir())
	pipe, err := p.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(p.lines)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			case <-p.quit:
				io.Copy(io.Discard, pipe)
				return
			}
		}
	}()
	t.Cleanup(func() {
		close(p.quit)
		if p.cmd.ProcessState == nil { // the test failed before it ended
			p.cmd.Process.Kill()
			p.cmd.Wait()
		}
	})
	return p
}

// waitFor reads stderr up to a line that contains s.
func (p *process) waitFor(t *testing.T, s string) {
	t.Helper()
	timeout := time.NewTimer(safetyNet)
	defer timeout.Stop()
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				t.Fatalf("stderr ended without %q:\n%s", s, p.stderr.String())
			}
			fmt.Fprintln(&p.stderr, line)
			if strings.Contains(line, s) {
				return
			}
		case <-timeout.C:
			t.Fatalf("no %q on stderr after %v:\n%s", s, safetyNet, p.stderr.String())
		}
	}
}

// exit reads the rest of stderr, waits for the program to end and returns
// its exit status (-1 when a signal killed it) and all of its stderr.
func (p *process) exit(t *testing.T) (status int, stderr string) {
	t.Helper()
	timeout := time.NewTimer(safetyNet)
	defer timeout.Stop()
	for done := false; !done; {
		select {
		case line, ok := <-p.lines:
			if ok {
				fmt.Fprintln(&p.stderr, line)
			}
			done = !ok
		case <-timeout.C:
			t.Fatalf("still running after %v:\n%s", safetyNet, p.stderr.String())
		}
	}
	if err := p.cmd.Wait(); err != nil && !errors.As(err, new(*exec.ExitError)) {
		t.Fatal(err)
	}
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// signal sends sig, which the process must still be running to take.
func (p *process) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("send %v: %v", sig, err)
	}
}

// A run's summary line: how many batches it committed, and the rows read
// (the sample has 4,000 readings and a line that does not decode).
var summary = regexp.MustCompile(`: committed (\d+) batch(es)? in this run \(ids? 0( to \d+)?\): 4001 rows in, \d+ rows out`)

func committed(t *testing.T, stderr string) int {
	t.Helper()
	m := summary.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no summary of the batches committed, matching %s, on stderr:\n%s", summary, stderr)
	}
	n, err := strconv.Atoi(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSignalStopsTheProgram: SIGTERM and SIGINT stop a run that would
// never end by itself (an interval trigger, waiting an hour after its first
// batch); it reports the batch it committed and exits with 128 plus the
// signal's number.
func TestSignalStopsTheProgram(t *testing.T) {
	for _, program := range programs {
		for _, c := range []struct {
			signal syscall.Signal
			name   string
			status int
		}{
			{syscall.SIGTERM, "SIGTERM", 143},
			{syscall.SIGINT, "SIGINT", 130},
		} {
			t.Run(program+"/"+c.name, func(t *testing.T) {
				p := start(t, program, "-trigger", "1h")
				p.waitFor(t, program+": batch 0 committed")
				p.signal(t, c.signal)
				status, stderr := p.exit(t)
				if status != c.status {
					t.Errorf("exit status %d, want %d; stderr:\n%s", status, c.status, stderr)
				}
				if n := committed(t, stderr); n != 1 {
					t.Errorf("%d batches committed, want 1; stderr:\n%s", n, stderr)
				}
				for _, want := range []string{program + ": " + c.name + ": stopping the query", program + ": stopped by " + c.name} {
					if !strings.Contains(stderr, want) {
						t.Errorf("stderr lacks %q:\n%s", want, stderr)
					}
				}
			})
		}
	}
}

// TestSecondSignalExitsAtOnce: two signals in quick succession end the
// program with the signal's status, whether the second came while the
// first was stopping the query (an exit at once) or not at all (the two
// were delivered as one). cli's TestSecondSignalExitsAtOnce holds a batch
// in flight to check the exit at once itself.
func TestSecondSignalExitsAtOnce(t *testing.T) {
	for _, program := range programs {
		t.Run(program, func(t *testing.T) {
			p := start(t, program, "-trigger", "1h")
			p.waitFor(t, program+": batch 0 committed")
			p.signal(t, syscall.SIGTERM)
			// The program may have ended by now if this goroutine was
			// descheduled: then the signal has nothing to reach.
			if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
				t.Fatalf("send the second SIGTERM: %v", err)
			}
			status, stderr := p.exit(t)
			if status != 143 {
				t.Errorf("exit status %d, want 143; stderr:\n%s", status, stderr)
			}
			if !strings.Contains(stderr, program+": SIGTERM: stopping the query") {
				t.Errorf("stderr does not say it was stopping:\n%s", stderr)
			}
		})
	}
}

// TestFinishedRunExitsZero: an availableNow run ends by itself at the
// end of its input, reports its batches and exits 0.
func TestFinishedRunExitsZero(t *testing.T) {
	for _, program := range programs {
		t.Run(program, func(t *testing.T) {
			p := start(t, program, "-trigger", "availableNow", "-max-files-per-trigger", "4")
			status, stderr := p.exit(t)
			if status != 0 {
				t.Errorf("exit status %d, want 0; stderr:\n%s", status, stderr)
			}
			if n := committed(t, stderr); n < 2 { // the sample has 8 files
				t.Errorf("%d batches committed, want at least 2; stderr:\n%s", n, stderr)
			}
		})
	}
}

// TestHelpExitsZero: -h prints the usage and exits 0; a flag that does
// not exist exits 2, as the flag package's ExitOnError.
func TestHelpExitsZero(t *testing.T) {
	for _, program := range programs {
		t.Run(program, func(t *testing.T) {
			for _, c := range []struct {
				flag   string
				status int
			}{{"-h", 0}, {"-help", 0}, {"-no-such-flag", 2}} {
				status, stderr := start(t, program, c.flag).exit(t)
				if status != c.status {
					t.Errorf("%s: exit status %d, want %d; stderr:\n%s", c.flag, status, c.status, stderr)
				}
				if !strings.Contains(stderr, "Usage: "+program+" [flags]") {
					t.Errorf("%s: no usage on stderr:\n%s", c.flag, stderr)
				}
			}
		})
	}
}
