package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// The exit statuses of the examples, which their usage text lists too.
const (
	exitOK    = 0 // the input is done: a Once or AvailableNow run finished by itself
	exitError = 1 // the query or its setup failed
	exitUsage = 2 // bad flags, as the flag package's ExitOnError
	// A signal that stops a run exits with 128 plus its number, as a shell
	// reports a process the signal killed: 130 for SIGINT, 143 for SIGTERM.
	exitSignalBase = 128
)

// Interrupted is Main's error when SIGINT or SIGTERM stopped the query
// before it finished by itself. Its exit status is 128 plus the number of
// the signal that ended the program.
type Interrupted struct {
	// Signal is the signal that ended the program: the first, or the
	// second when Forced.
	Signal os.Signal
	// Forced says a second signal came while the query was stopping, and
	// the program did not wait for the query's goroutine to end.
	Forced bool
}

func (e *Interrupted) Error() string {
	if e.Forced {
		return fmt.Sprintf("%s again while stopping: exited without waiting for the query", signalName(e.Signal))
	}
	return fmt.Sprintf("stopped by %s", signalName(e.Signal))
}

// ExitCode returns 128 plus the signal's number (130 for SIGINT, 143 for
// SIGTERM), or 1 for a signal that has no number.
func (e *Interrupted) ExitCode() int {
	if s, ok := e.Signal.(syscall.Signal); ok {
		return exitSignalBase + int(s)
	}
	return exitError
}

// signalName spells the signals Main handles as operators write them.
func signalName(s os.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// UsageError is Main's error for flags that do not parse. The flag
// package has already printed the error with the usage, so Exit prints
// nothing more; the exit status is 2.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ExitCode returns 2.
func (e *UsageError) ExitCode() int { return exitUsage }

// ExitCode returns the exit status for Main's result: 0 for nil, the
// status of an error in err's chain that has an ExitCode method
// (Interrupted, UsageError), or else 1.
func ExitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var coded interface{ ExitCode() int }
	if errors.As(err, &coded) {
		return coded.ExitCode()
	}
	return exitError
}

// Exit ends the program named name with Main's result err: for a non-nil
// err it prints "name: err" to stderr (unless err is a UsageError, which
// the flag package has already printed), then it exits with ExitCode(err).
// It does not return.
func Exit(name string, err error) {
	report(os.Stderr, name, err)
	os.Exit(ExitCode(err))
}

// report is what Exit prints.
func report(w io.Writer, name string, err error) {
	var usage *UsageError
	if err == nil || errors.As(err, &usage) {
		return
	}
	fmt.Fprintf(w, "%s: %v\n", name, err)
}
