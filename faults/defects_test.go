package faults_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The defects the campaign found, each now a test that holds: each damaged
// checkpoint is refused, as it must be, and the refusal says it is damaged,
// names the file and gives the way out.

// finishedCheckpoint runs countkeys to the end of a small input and
// returns the input and the directories it used.
func finishedCheckpoint(t *testing.T) (string, dirs) {
	t.Helper()
	input := filepath.Join(t.TempDir(), "input")
	writeSample(t, input, sample(rand.New(rand.NewPCG(1, 2)), 4, 50), 0, 4)
	d := newDirs(t)
	p := programNamed(t, "countkeys")
	if status, stderr := run(t, p.name, p.argsFor(input, d)...).exit(t); status != 0 {
		t.Fatalf("exit status %d; stderr:\n%s", status, stderr)
	}
	return input, d
}

// TestDamagedPebbleMetadataIsCorrupt: a checkpoint whose Pebble format
// marker (marker.format-version.NNNNNN.NNN, an empty file whose name holds
// the store's format) is gone, or whose OPTIONS file has one byte changed
// in the merger's name, is refused as damaged (it was refused as a failed
// store, with the advice to free disk space, which changes nothing). The package doc ("Storage faults") says a checkpoint
// whose files are damaged is refused at start with ErrCorruptCheckpoint,
// the file, and the way out. (A damaged OPTIONS file is one Pebble can do
// without: the campaign's checkpoints with it deleted run to the right
// output.)
func TestDamagedPebbleMetadataIsCorrupt(t *testing.T) {
	for _, c := range []struct {
		name, file string // file is a glob in the checkpoint
		damage     func(path string) error
	}{
		{"format marker deleted", "marker.format-version.*", os.Remove},
		{"OPTIONS merger name damaged", "OPTIONS-*", func(path string) error {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			i := bytes.Index(data, []byte("pebble.concatenate"))
			if i < 0 {
				return fmt.Errorf("no merger name in %s", data)
			}
			return invert(path, int64(i+3), 1) // "peb\x9dle.concatenate"
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			input, d := finishedCheckpoint(t)
			files, _ := filepath.Glob(filepath.Join(d.checkpoint, c.file))
			if len(files) != 1 {
				t.Fatalf("%s in the checkpoint: %v", c.file, files)
			}
			if err := c.damage(files[0]); err != nil {
				t.Fatal(err)
			}
			p := programNamed(t, "countkeys")
			status, stderr := run(t, p.name, p.argsFor(input, d)...).exit(t)
			// A deleted marker is named by its pattern: its number is gone
			// with it.
			name := filepath.Base(files[0])
			if strings.HasPrefix(name, "marker.format-version.") {
				name = "marker.format-version.*"
			}
			if status != 1 || !strings.Contains(stderr, "streamgen: corrupt checkpoint in "+d.checkpoint) ||
				!strings.Contains(stderr, name) || strings.Contains(stderr, "free disk space") {
				t.Fatalf("exit status %d; stderr:\n%s\nwant status 1 and a corrupt checkpoint that names %s, without advice to free disk space",
					status, stderr, filepath.Base(files[0]))
			}
		})
	}
}

// TestDamagedCommitFileIsCorrupt: a commit file whose bytes were
// changed so that it still parses as JSON, but without its fields (here
// the middle 16 bytes of {"format":1,"batchId":N} inverted, which leaves
// the object {"fo\x99…":N}), is refused as corrupt, with the way out that
// fits: "if the store itself is sound, delete the commit file and start
// again" (it was refused as a commit file of format 0, a format that never
// existed, with the advice to start from a new checkpoint directory, which
// throws the sound store away).
func TestDamagedCommitFileIsCorrupt(t *testing.T) {
	input, d := finishedCheckpoint(t)
	commit := filepath.Join(d.checkpoint, "STREAMGEN-COMMIT")
	info, err := os.Stat(commit)
	if err != nil {
		t.Fatal(err)
	}
	n := min(info.Size(), 16)
	if err := invert(commit, info.Size()/2-n/2, n); err != nil {
		t.Fatal(err)
	}
	p := programNamed(t, "countkeys")
	status, stderr := run(t, p.name, p.argsFor(input, d)...).exit(t)
	if status != 1 || !strings.Contains(stderr, "streamgen: corrupt checkpoint in "+d.checkpoint) || !strings.Contains(stderr, "delete the commit file") {
		t.Fatalf("exit status %d; stderr:\n%s\nwant status 1 and a corrupt commit file, with the advice to delete it if the store is sound", status, stderr)
	}
}
