package faults_test

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// safetyNet bounds each wait on a program; reaching it is a failure, not
// a way to pace the test.
const safetyNet = 2 * time.Minute

// process is a running program. Its stderr is kept whole, and the test
// waits on the lines that say a batch was committed.
type process struct {
	name    string
	cmd     *exec.Cmd
	stderr  *lineLog
	done    chan struct{} // closed once the program has ended and stderr is all read
	started time.Time
}

// run starts program (a name in bin) with args.
func run(t *testing.T, program string, args ...string) *process {
	t.Helper()
	p := &process{
		name:   program,
		cmd:    exec.Command(filepath.Join(bin, program), args...),
		stderr: newLineLog(),
		done:   make(chan struct{}),
	}
	// Through an io.Writer, not a pipe: exec copies stderr on a goroutine
	// of its own and Wait waits for the copy, so Wait may be called at
	// any time, and the log's writes never block.
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.started = time.Now()
	go func() {
		p.cmd.Wait() // the status is in ProcessState
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default: // the test failed while it ran
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// committedLine matches the line a program prints after each commit.
var committedLine = regexp.MustCompile(`(?m)^\w+: batch (\d+) committed: `)

// awaitCommitted waits until the program has printed n lines saying a
// batch was committed, or has ended; it reports whether it has ended.
func (p *process) awaitCommitted(t *testing.T, n int) (ended bool) {
	t.Helper()
	timeout := time.NewTimer(safetyNet)
	defer timeout.Stop()
	for {
		if p.stderr.count(committedLine) >= n {
			return false
		}
		select {
		case <-p.stderr.wrote:
		case <-p.done:
			return true
		case <-timeout.C:
			t.Fatalf("%s: no %d committed batches after %v; stderr:\n%s", p.name, n, safetyNet, p.stderr)
		}
	}
}

// kill sends SIGKILL and waits for the program to end. It reports whether
// the signal ended it: false when the program had exited by itself.
func (p *process) kill(t *testing.T) (killed bool) {
	t.Helper()
	p.cmd.Process.Kill() // fails only when the program has been reaped
	<-p.done
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// exit waits for the program to end by itself and returns its exit status
// (-1 when a signal ended it) and its stderr.
func (p *process) exit(t *testing.T) (status int, stderr string) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(safetyNet):
		t.Fatalf("%s: still running after %v; stderr:\n%s", p.name, safetyNet, p.stderr)
	}
	return p.cmd.ProcessState.ExitCode(), p.stderr.String()
}

// committed returns the batch ids the program said it committed.
func (p *process) committed() []string {
	var ids []string
	for _, m := range committedLine.FindAllStringSubmatch(p.stderr.String(), -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// lineLog is a program's stderr, which a test reads while the program
// writes. A write never blocks: wrote holds a token after each write,
// dropped when one is pending.
type lineLog struct {
	mu    sync.Mutex
	b     bytes.Buffer
	wrote chan struct{}
}

func newLineLog() *lineLog { return &lineLog{wrote: make(chan struct{}, 1)} }

func (l *lineLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case l.wrote <- struct{}{}:
	default:
	}
	return l.b.Write(p)
}

func (l *lineLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count counts the complete lines that match re.
func (l *lineLog) count(re *regexp.Regexp) int {
	s := l.String()
	return len(re.FindAllStringIndex(s[:strings.LastIndexByte(s, '\n')+1], -1))
}
