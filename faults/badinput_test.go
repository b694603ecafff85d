package faults_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/streamgen/streamgen/generated/sensor"
)

// What the files source does with each kind of input (runtime.FilesSource):
const (
	// deadLetter: the input is listed and read, and is one dead letter
	// with its position and the reason; the rest of its file is read.
	deadLetter = "dead letter"
	// skipped: the entry is a named pipe or a directory, not a file to
	// read, so listing skips it, with one warning on stderr naming it and
	// why. (A broken link is a dead letter.)
	skipped = "skipped with a warning"
	// read: odd but valid input, whose rows are all read.
	read = "read"
)

// A badInput is an entry put in the input directory beside the good
// files.
type badInput struct {
	name string // its name in the input directory
	what string // what it is, for the summary
	// expect is deadLetter, skipped or read; reason is a part of the
	// dead letter's error or of the warning, and position the dead
	// letter's position.
	expect, reason, position string
	// good are the file's good rows: the same file, with them alone, is
	// in the reference run's input.
	good []sensor.Event
	// create makes the entry at path, from the good rows' lines.
	create func(t *testing.T, path string, good [][]byte)
}

// maxLineBytes is the files source's default longest line, which the
// examples do not change (runtime.FilesOptions.MaxLineBytes).
const maxLineBytes = 64 << 20

// badInputs returns the campaign's bad inputs. extra are the readings
// their good rows are taken from.
func badInputs(r *rand.Rand, extra []sensor.Event) []badInput {
	take := func(n int) []sensor.Event {
		rows := extra[:n]
		extra = extra[n:]
		return rows
	}
	regular := func(content func(good [][]byte) []byte) func(*testing.T, string, [][]byte) {
		return func(t *testing.T, path string, good [][]byte) {
			t.Helper()
			writeFileAtomic(t, filepath.Dir(path), filepath.Base(path), content(good))
		}
	}
	link := func(target string) func(*testing.T, string, [][]byte) {
		return func(t *testing.T, path string, _ [][]byte) {
			t.Helper()
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}
	}
	// between puts line between the first good row and the second.
	between := func(line string) func(good [][]byte) []byte {
		return func(good [][]byte) []byte {
			return fmt.Appendf(nil, "%s\n%s\n%s\n", good[0], line, good[1])
		}
	}
	cases := []badInput{
		{name: "fifo.json", what: "a named pipe", expect: skipped, reason: "is a named pipe",
			create: func(t *testing.T, path string, _ [][]byte) {
				t.Helper()
				if err := syscall.Mkfifo(path, 0o666); err != nil {
					t.Fatal(err)
				}
			}},
		{name: "dangling.json", what: "a dangling symbolic link", expect: deadLetter, reason: "no such file or directory", position: "dangling.json", create: link("missing.json")},
		{name: "loop.json", what: "a symbolic link to itself", expect: deadLetter, reason: "too many levels of symbolic links", position: "loop.json", create: link("loop.json")},
		{name: "dirlink.json", what: "a symbolic link to a directory", expect: deadLetter, reason: "is a directory", position: "dirlink.json", create: link("subdir")},
		{name: "dir.json", what: "a directory", expect: skipped, reason: "is a directory",
			create: func(t *testing.T, path string, _ [][]byte) {
				t.Helper()
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			}},
		unreadable(),
		{name: "longline.json", what: fmt.Sprintf("a line of %d bytes, one over the limit", maxLineBytes+1), expect: deadLetter,
			reason: fmt.Sprintf("line too long: %d bytes, more than MaxLineBytes %d", maxLineBytes+1, maxLineBytes), position: "longline.json:2",
			good: take(2), create: writeLongLine},
		{name: "invalid.json", what: "a line of invalid JSON (cut short)", expect: deadLetter, reason: "unexpected end of JSON input", position: "invalid.json:2",
			good: take(2), create: regular(between(`{"User": "ana", "gt": "walk", "Creation_Time": `))},
		{name: "nokey.json", what: "a row without its key (User)", expect: deadLetter, reason: `required field "User"`, position: "nokey.json:2",
			good: take(2), create: regular(between(`{"Creation_Time": 1424686733000000000, "gt": "walk", "Device": "s3_1"}`))},
		{name: "nullkey.json", what: "a row whose key is null", expect: deadLetter, reason: `required field "User"`, position: "nullkey.json:2",
			good: take(2), create: regular(between(`{"User": null, "Creation_Time": 1424686733000000000, "gt": "walk"}`))},
		{name: "noeventtime.json", what: "a row without its event time (Creation_Time)", expect: deadLetter, reason: `required field "Creation_Time"`, position: "noeventtime.json:2",
			good: take(2), create: regular(between(`{"User": "ana", "gt": "walk", "Device": "s3_1"}`))},
		{name: "nullrow.json", what: "a row that is null", expect: deadLetter, reason: "the value is null", position: "nullrow.json:2",
			good: take(2), create: regular(between(`null`))},
		{name: "wrongtype.json", what: "a row with a string for a number", expect: deadLetter, reason: "cannot unmarshal string", position: "wrongtype.json:2",
			good: take(2), create: regular(between(`{"User": "ana", "Creation_Time": 1424686733000000000, "x": "high"}`))},
		{name: "garbage.json", what: "4 KiB of binary garbage", expect: deadLetter, reason: "invalid character", position: "garbage.json:1",
			create: regular(func([][]byte) []byte { return garbage(r, 4<<10) })},
		{name: "bom.json", what: "a row after a UTF-8 byte order mark", expect: deadLetter, reason: "invalid character", position: "bom.json:1",
			create: regular(func([][]byte) []byte {
				return []byte("\xef\xbb\xbf{\"User\": \"ana\", \"Creation_Time\": 1424686733000000000}\n")
			})},
		{name: "empty.json", what: "an empty file", expect: read, create: regular(func([][]byte) []byte { return nil })},
		{name: "nonewline.json", what: "a file without a final newline", expect: read, good: take(3),
			create: regular(func(good [][]byte) []byte { return bytes.Join(good, []byte("\n")) })},
		{name: "blanks.json", what: "a million blank lines around a row", expect: read, good: take(1),
			create: regular(func(good [][]byte) []byte {
				blanks := strings.Repeat("\n\r\n \t\n", 1_000_000/3)
				return []byte(blanks + string(good[0]) + "\n" + blanks)
			})},
		{name: "crlf.json", what: "rows ended by \\r\\n", expect: read, good: take(3),
			create: regular(func(good [][]byte) []byte { return append(bytes.Join(good, []byte("\r\n")), "\r\n"...) })},
	}
	return cases
}

// unreadable is a file that is listed as a regular file but cannot be
// read: for root, who can read any file, /proc/self/mem (a regular file
// that no one can read from its start, see runtime/files_test.go); for
// others, a file without read permission.
func unreadable() badInput {
	if os.Getuid() == 0 {
		return badInput{name: "unreadable.json", what: "a link to /proc/self/mem, which no one can read", expect: deadLetter,
			reason: "input/output error", position: "unreadable.json",
			create: func(t *testing.T, path string, _ [][]byte) {
				t.Helper()
				if _, err := os.Stat("/proc/self/mem"); err != nil {
					t.Skipf("no /proc/self/mem: %v", err)
				}
				if err := os.Symlink("/proc/self/mem", path); err != nil {
					t.Fatal(err)
				}
			}}
	}
	return badInput{name: "unreadable.json", what: "a file without read permission", expect: deadLetter,
		reason: "permission denied", position: "unreadable.json",
		create: func(t *testing.T, path string, _ [][]byte) {
			t.Helper()
			if err := os.WriteFile(path, []byte("{}\n"), 0); err != nil {
				t.Fatal(err)
			}
		}}
}

// writeLongLine writes a good row, a row that would be good but is one
// byte longer than maxLineBytes, and a good row.
func writeLongLine(t *testing.T, path string, good [][]byte) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	head := `{"User": "ana", "Creation_Time": 1424686733000000000, "gt": "`
	tail := `"}`
	fill := bytes.Repeat([]byte("x"), 1<<20)
	fmt.Fprintf(f, "%s\n%s", good[0], head)
	for n := maxLineBytes + 1 - len(head) - len(tail); n > 0; n -= len(fill) {
		if _, err := f.Write(fill[:min(n, len(fill))]); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Fprintf(f, "%s\n%s\n", tail, good[1])
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// garbage returns n random bytes on one line: no newline in them.
func garbage(r *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.IntN(256))
		if b[i] == '\n' {
			b[i] = 0
		}
	}
	b[0] = 0xff // not blank, whatever follows
	return b
}

// letter is a dead letter as the dead-letter directory holds it
// (runtime.DeadLetter).
type letter struct {
	Source, Position, Error, Raw string
}

func readLetters(t *testing.T, r result) []letter {
	t.Helper()
	var out []letter
	for _, l := range r.deadLetters {
		var d letter
		if err := json.Unmarshal([]byte(l), &d); err != nil {
			t.Fatalf("dead letter %s: %v", l, err)
		}
		out = append(out, d)
	}
	return out
}

// badInputStats is what one program did with the bad inputs.
type badInputStats struct {
	program                    string
	deadLetters, skipped, read int // cases handled as expected, by expectation
	failed                     int
	goodRows                   int // output rows, the same as the reference's
	comparison                     // the output against the reference's
}

// badInputProgram runs p once on a directory of good files and once on
// the same with the bad inputs beside them (the good rows of the bad
// inputs' files are in both): the second must exit 0 with the same
// output, each bad input must be one dead letter with its reason or a
// warning, as cases say, and nothing else may change.
func badInputProgram(t *testing.T, p program, goodDir, badDir string, cases []badInput, wantCounts map[string]int64) badInputStats {
	st := badInputStats{program: p.name}
	runOn := func(input string) (result, string) {
		d := newDirs(t)
		status, stderr := run(t, p.name, p.argsFor(input, d)...).exit(t)
		if status != 0 {
			t.Fatalf("%s on %s: exit status %d; stderr:\n%s", p.name, input, status, lastLines(stderr, 30))
		}
		return readResult(t, d), stderr
	}
	want, _ := runOn(goodDir)
	got, stderr := runOn(badDir)

	// The good rows: all there, none twice.
	w, g := want, got
	w.deadLetters, g.deadLetters = nil, nil
	st.comparison = p.compare(t, w, g)
	if !st.ok() {
		t.Errorf("%s: with bad inputs beside them, the good rows' output differs: %v", p.name, st.comparison)
	}
	st.goodRows = len(got.rows)
	if wantCounts != nil {
		checkCounts(t, got, wantCounts)
	}

	// The dead letters: the reference's (the sample's own bad lines),
	// then one per bad input that is read.
	letters := map[string][]letter{}
	for _, l := range readLetters(t, got) {
		letters[l.Position] = append(letters[l.Position], l)
	}
	for _, l := range readLetters(t, want) {
		if n := len(letters[l.Position]); n != 1 {
			t.Errorf("%s: %d dead letters at %s, want 1 as without the bad inputs", p.name, n, l.Position)
		}
		delete(letters, l.Position)
	}
	for _, c := range cases {
		warnings := 0
		for _, line := range strings.Split(stderr, "\n") {
			if strings.Contains(line, "skipping an entry that is not a regular file") && strings.Contains(line, "file="+c.name+" ") {
				warnings++
				if !strings.Contains(line, c.reason) {
					t.Errorf("%s: %s (%s): the warning does not say %q: %s", p.name, c.name, c.what, c.reason, line)
				}
			}
		}
		ok := true
		switch c.expect {
		case deadLetter:
			l := letters[c.position]
			delete(letters, c.position)
			if len(l) != 1 || !strings.Contains(l[0].Error, c.reason) || warnings != 0 {
				t.Errorf("%s: %s (%s): %d dead letters at %s (%+v) and %d warnings, want one dead letter saying %q",
					p.name, c.name, c.what, len(l), c.position, l, warnings, c.reason)
				ok = false
			} else {
				st.deadLetters++
				if testing.Verbose() {
					t.Logf("%s: %s: dead letter at %s: %.200s", p.name, c.name, c.position, l[0].Error)
				}
			}
		case skipped:
			if warnings != 1 {
				t.Errorf("%s: %s (%s): %d warnings, want one", p.name, c.name, c.what, warnings)
				ok = false
			} else {
				st.skipped++
			}
		case read:
			if warnings != 0 {
				t.Errorf("%s: %s (%s): %d warnings, want none", p.name, c.name, c.what, warnings)
				ok = false
			} else {
				st.read++
			}
		}
		if !ok {
			st.failed++
		}
	}
	for pos, l := range letters {
		t.Errorf("%s: unexpected dead letters at %s: %+v", p.name, pos, l)
		st.failed++
	}
	return st
}

// prepareBadInputs writes the good files, in goodDir and badDir alike,
// then in badDir the bad inputs, and in goodDir their good rows alone. It
// returns the number of good readings per user.
func prepareBadInputs(t *testing.T, r *rand.Rand, goodDir, badDir string) ([]badInput, map[string]int64) {
	t.Helper()
	// Twelve files of 150 readings fill a window of the devicewindows
	// example per device; a thirteenth holds the bad inputs' good rows.
	files := sample(r, 13, 150)
	writeSample(t, goodDir, files, 0, 12)
	writeSample(t, badDir, files, 0, 12)
	counts := countRows(files[:12])
	cases := badInputs(r, files[12])
	if err := os.Mkdir(filepath.Join(badDir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		var lines [][]byte
		for _, ev := range c.good {
			line, err := ev.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, line)
			counts[ev.User]++
		}
		c.create(t, filepath.Join(badDir, c.name), lines)
		if len(lines) > 0 {
			writeFileAtomic(t, goodDir, c.name, append(bytes.Join(lines, []byte("\n")), '\n'))
		}
	}
	return cases, counts
}
