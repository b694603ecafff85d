package faults_test

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// A damage is done to one file of a copy of a checkpoint.
type damage struct {
	name string
	// applies says whether the damage changes a file of size bytes.
	applies func(size int64) bool
	do      func(path string, size int64) error
}

func nonEmpty(size int64) bool { return size > 0 }

// damages are what every campaign does to each checkpoint file; flips
// adds single bytes flipped at random offsets.
func damages(r *rand.Rand, flips int) []damage {
	d := []damage{
		{"truncated to half", nonEmpty, func(path string, size int64) error { return os.Truncate(path, size/2) }},
		{"emptied", nonEmpty, func(path string, size int64) error { return os.Truncate(path, 0) }},
		{"middle overwritten", nonEmpty, func(path string, size int64) error {
			// Up to 16 bytes around the middle, each inverted, so that
			// every one changes.
			n := min(size, 16)
			return invert(path, size/2-n/2, n)
		}},
		{"deleted", func(int64) bool { return true }, func(path string, _ int64) error { return os.Remove(path) }},
	}
	for range flips {
		// The offset is drawn when the damage is done, as a fraction of
		// the file's size.
		frac := r.Float64()
		d = append(d, damage{"byte flipped", nonEmpty, func(path string, size int64) error {
			return invert(path, int64(frac*float64(size)), 1)
		}})
	}
	return d
}

// invert inverts n bytes of the file at path from off.
func invert(path string, off, n int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		return err
	}
	for i := range b {
		b[i] ^= 0xff
	}
	_, err = f.WriteAt(b, off)
	return err
}

// fileKind names a checkpoint file by what it is, not by its number.
func fileKind(name, currentManifest string) string {
	switch {
	case name == "STREAMGEN-COMMIT":
		return "STREAMGEN-COMMIT (commit file)"
	case name == "LOCK":
		return "LOCK"
	case strings.HasSuffix(name, ".sst"):
		return "NNNNNN.sst (table)"
	case strings.HasSuffix(name, ".log"):
		return "NNNNNN.log (write-ahead log)"
	case name == currentManifest:
		return "MANIFEST-NNNNNN (current)"
	case strings.HasPrefix(name, "MANIFEST-"):
		return "MANIFEST-NNNNNN (obsolete)"
	case strings.HasPrefix(name, "OPTIONS-"):
		return "OPTIONS-NNNNNN"
	case strings.HasPrefix(name, "marker.manifest."):
		return "marker.manifest.* (names the MANIFEST)"
	case strings.HasPrefix(name, "marker.format-version."):
		return "marker.format-version.*"
	}
	return name
}

// outcome is how a program took a damaged checkpoint.
type outcome struct {
	program, file, kind, damage string
	// recovered: it ran and wrote the undamaged checkpoint's output.
	// detected: it refused, exit status 1, with an error naming the
	// checkpoint; refusal is the error's class (see refusalClass).
	recovered, detected bool
	refusal             string
	// failure says what went wrong otherwise.
	failure string
}

// refusalClasses name the runtime's errors for a checkpoint it will not
// use, by the start of their messages (runtime.ErrCorruptCheckpoint, ...).
var refusalClasses = []struct{ text, class string }{
	{"streamgen: checkpoint lost committed batches", "ErrRewoundCheckpoint"},
	{"streamgen: corrupt checkpoint", "ErrCorruptCheckpoint"},
	{"streamgen: incompatible checkpoint", "ErrIncompatibleCheckpoint"},
	{"streamgen: checkpoint store failed", "ErrStoreFailed"},
}

func refusalClass(stderr string) string {
	for _, c := range refusalClasses {
		if strings.Contains(stderr, c.text) {
			return c.class
		}
	}
	return "other"
}

// corruptProgram makes a checkpoint of p in two runs (so that it holds a
// table as well as a log: Pebble flushes the replayed log when it opens
// the store again), over the first two thirds of the input, then adds the
// last third. A copy of it, run to the end, gives the output to expect.
// Then, for each file of the checkpoint and each damage, a copy with that
// file damaged is run to the end: the program must refuse it, with an
// error that names the checkpoint, or write the expected output; never
// exit 0 with another output, never panic.
func corruptProgram(t *testing.T, r *rand.Rand, p program, files int, damages []damage) []outcome {
	input := filepath.Join(t.TempDir(), "input")
	events := sample(r, files, 200)
	base := newDirs(t)
	// The stages run without p.args: the sessions example's -flush would
	// end event time at the first stage's end.
	stageArgs := []string{"-input", input, "-output", base.output, "-checkpoint", base.checkpoint, "-dead-letter", base.deadLetters, "-max-files-per-trigger", "1"}
	for stage := range 2 {
		writeSample(t, input, events, stage*files/3, (stage+1)*files/3)
		if status, stderr := run(t, p.name, stageArgs...).exit(t); status != 0 {
			t.Fatalf("%s, stage %d: exit status %d; stderr:\n%s", p.name, stage, status, stderr)
		}
	}
	writeSample(t, input, events, 2*files/3, files)

	entries, err := os.ReadDir(base.checkpoint)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	currentManifest := ""
	for _, e := range entries {
		names = append(names, e.Name())
		if m, ok := strings.CutPrefix(e.Name(), "marker.manifest."); ok {
			currentManifest = m[strings.IndexByte(m, '.')+1:]
		}
	}
	if !slices.ContainsFunc(names, func(n string) bool { return strings.HasSuffix(n, ".sst") }) {
		t.Fatalf("%s: the checkpoint has no table to damage: %v", p.name, names)
	}

	finish := func(d dirs) (int, string) {
		return run(t, p.name, p.argsFor(input, d, "-max-files-per-trigger", "1")...).exit(t)
	}
	control := copyDirs(t, base)
	if status, stderr := finish(control); status != 0 {
		t.Fatalf("%s, the undamaged checkpoint: exit status %d; stderr:\n%s", p.name, status, stderr)
	}
	want := readResult(t, control)

	var outcomes []outcome
	for _, name := range names {
		info, err := os.Stat(filepath.Join(base.checkpoint, name))
		if err != nil {
			t.Fatal(err)
		}
		for _, dmg := range damages {
			if !dmg.applies(info.Size()) {
				continue
			}
			o := outcome{program: p.name, file: name, kind: fileKind(name, currentManifest), damage: dmg.name}
			d := copyDirs(t, base)
			if err := dmg.do(filepath.Join(d.checkpoint, name), info.Size()); err != nil {
				t.Fatalf("%s %s: %v", name, dmg.name, err)
			}
			status, stderr := finish(d)
			switch {
			case strings.Contains(stderr, "panic:") || strings.Contains(stderr, "fatal error:"):
				o.failure = fmt.Sprintf("exit status %d with a panic", status)
			case status == 0:
				if c := p.compare(t, want, readResult(t, d)); c.ok() {
					o.recovered = true
				} else {
					o.failure = "exit status 0 with another output: " + c.String()
				}
			case status == 1 && strings.Contains(stderr, d.checkpoint):
				o.detected = true
				o.refusal = refusalClass(stderr)
			case status == 1:
				o.failure = "exit status 1 with an error that does not name the checkpoint " + d.checkpoint
			default:
				o.failure = fmt.Sprintf("exit status %d", status)
			}
			if o.failure != "" {
				t.Errorf("%s: checkpoint file %s %s: %s; stderr:\n%s", p.name, name, dmg.name, o.failure, lastLines(stderr, 20))
			} else if testing.Verbose() && o.detected {
				t.Logf("%s: %s %s: refused (%s): %s", p.name, name, dmg.name, o.refusal, errorLine(stderr, p.name))
			}
			outcomes = append(outcomes, o)
		}
	}
	return outcomes
}

// errorLine is the program's error message from its stderr, shortened.
func errorLine(stderr, program string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if msg, ok := strings.CutPrefix(l, program+": "); ok && !committedLine.MatchString(l) {
			if len(msg) > 300 {
				msg = msg[:300] + "…"
			}
			return msg
		}
	}
	return ""
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// copyDirs copies d's directories (flat: a checkpoint, an output and the
// dead letters have no subdirectories) into fresh ones, as far as they
// exist.
func copyDirs(t *testing.T, d dirs) dirs {
	t.Helper()
	c := newDirs(t)
	copyDir(t, d.checkpoint, c.checkpoint)
	copyDir(t, d.output, c.output)
	copyDir(t, d.deadLetters, c.deadLetters)
	return c
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if errors.Is(err, fs.ErrNotExist) {
		return // not made yet: a program makes its output directories when it first writes to them
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			t.Fatalf("%s in %s is not a regular file", e.Name(), from)
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err == nil {
			_, err = io.Copy(dst, src)
			if cerr := dst.Close(); err == nil {
				err = cerr
			}
		}
		src.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}

// corruptionTable summarizes outcomes per file kind and damage.
func corruptionTable(outcomes []outcome) string {
	type row struct {
		recovered, detected int
		classes             map[string]int
		failed              int
	}
	rows := map[string]*row{}
	var keys []string
	for _, o := range outcomes {
		k := o.kind + " | " + o.damage
		if rows[k] == nil {
			rows[k] = &row{classes: map[string]int{}}
			keys = append(keys, k)
		}
		switch {
		case o.recovered:
			rows[k].recovered++
		case o.detected:
			rows[k].detected++
			rows[k].classes[o.refusal]++
		default:
			rows[k].failed++
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		rw := rows[k]
		var classes []string
		for c, n := range rw.classes {
			classes = append(classes, fmt.Sprintf("%s %d", c, n))
		}
		slices.Sort(classes)
		fmt.Fprintf(&b, "    %-60s recovered %2d, detected %2d", k, rw.recovered, rw.detected)
		if len(classes) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(classes, ", "))
		}
		if rw.failed > 0 {
			fmt.Fprintf(&b, ", FAILED %d", rw.failed)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
