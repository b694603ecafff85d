package runtime

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestBatchFilesRemoveWithNothingCommitted: a start with nothing
// committed removes the batch files only when the directory's marker names
// its query, that is, when that query wrote them; another query's files,
// and the files of other prefixes, stay.
func TestBatchFilesRemoveWithNothingCommitted(t *testing.T) {
	dir := t.TempDir()
	a := context.WithValue(context.Background(), queryKey{}, queryIdent{id: "query-a"})
	b := context.WithValue(context.Background(), queryKey{}, queryIdent{id: "query-b"})
	parts, letters := NewBatchFiles(dir, "part-"), NewBatchFiles(dir, "dead-letters-")
	write := func(w io.Writer) error { _, err := io.WriteString(w, "row\n"); return err }
	for id := range int64(3) {
		if err := parts.Write(a, id, false, write); err != nil {
			t.Fatal(err)
		}
	}
	if err := letters.Write(b, 0, false, write); err != nil {
		t.Fatal(err)
	}
	files := func() []string { return dirNames(t, dir, true) }
	all := []string{".dead-letters-query", ".part-query", "dead-letters-0000000000.jsonl", "part-0000000000.jsonl", "part-0000000001.jsonl", "part-0000000002.jsonl"}
	if got := files(); !slices.Equal(got, all) {
		t.Fatalf("after the writes: %v, want %v", got, all)
	}
	for _, ctx := range []context.Context{b, context.Background()} {
		if err := parts.RemoveAfter(ctx, -1); err != nil {
			t.Fatal(err)
		}
		if got := files(); !slices.Equal(got, all) {
			t.Fatalf("another query's start removed files: %v, want %v", got, all)
		}
	}
	if err := parts.RemoveAfter(a, -1); err != nil {
		t.Fatal(err)
	}
	want := []string{".dead-letters-query", ".part-query", "dead-letters-0000000000.jsonl"}
	if got := files(); !slices.Equal(got, want) {
		t.Fatalf("the query's own start: %v, want %v", got, want)
	}
	// Query b takes the directory over: the marker names it from its first
	// file on, even with the same BatchFiles.
	if err := parts.Write(b, 0, false, write); err != nil {
		t.Fatal(err)
	}
	if owner, err := parts.owner(); err != nil || owner != "query-b" {
		t.Fatalf("the marker names %q (%v), want query-b", owner, err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, ".part-query")); err != nil || string(got) != "query-b\n" {
		t.Fatalf("the marker holds %q (%v)", got, err)
	}
	// Another BatchFiles of the directory (another start of query a, in
	// the same process) takes it back at its next file, and then the
	// first, writing for b again, too: neither trusts what it last wrote.
	again := NewBatchFiles(dir, "part-")
	for _, w := range []struct {
		f     *BatchFiles
		ctx   context.Context
		owner string
	}{{again, a, "query-a"}, {parts, b, "query-b"}} {
		if err := w.f.Write(w.ctx, 1, false, write); err != nil {
			t.Fatal(err)
		}
		if owner, err := parts.owner(); err != nil || owner != w.owner {
			t.Fatalf("the marker names %q (%v), want %s", owner, err, w.owner)
		}
	}
}

// TestPublishedBatchFiles: published batch files are hidden, once a
// query's start has called RemoveAfter, until their batch is published; a start's RemoveAfter publishes those of the
// batches up to the last committed that a process that died left
// hidden, removes those after it, hidden or not, and leaves the files of
// other prefixes (a dead-letter directory's, shown at once) alone.
func TestPublishedBatchFiles(t *testing.T) {
	dir := t.TempDir()
	ctx := context.WithValue(context.Background(), queryKey{}, queryIdent{id: "query-a"})
	parts, letters := NewPublishedBatchFiles(dir, "part-"), NewBatchFiles(dir, "dead-letters-")
	write := func(w io.Writer) error { _, err := io.WriteString(w, "row\n"); return err }
	if err := parts.RemoveAfter(ctx, -1); err != nil { // the query's start
		t.Fatal(err)
	}
	for id := range int64(4) {
		if err := parts.Write(ctx, id, false, write); err != nil {
			t.Fatal(err)
		}
	}
	if err := letters.Write(ctx, 3, false, write); err != nil {
		t.Fatal(err)
	}
	visible := func() []string { return dirNames(t, dir, false) }
	if got, want := visible(), []string{"dead-letters-0000000003.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("before any batch is published: %q, want %q", got, want)
	}
	if err := parts.Publish(0); err != nil {
		t.Fatal(err)
	}
	if err := parts.Publish(0); err != nil { // again: nothing to do
		t.Fatal(err)
	}
	if err := parts.RemoveAfter(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got, want := visible(), []string{"dead-letters-0000000003.jsonl", "part-0000000000.jsonl", "part-0000000001.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("after batch 0's publishing and a start after batch 1: %q, want %q", got, want)
	}
	for _, name := range dirNames(t, dir, true) {
		if name != parts.markerName() && name != letters.markerName() && name[0] == '.' {
			t.Errorf("%s left: batches 2 and 3 were not committed", name)
		}
	}
}

// dirNames lists the names in dir, in order, hidden ones too if hidden.
func dirNames(t *testing.T, dir string, hidden bool) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if name := e.Name(); hidden || name[0] != '.' {
			names = append(names, name)
		}
	}
	return names
}

// TestPublishedBatchFilesUnheld: the files of published batch files that
// no query's start has called RemoveAfter on (a sink wrapped in one that
// does not pass it on) appear at once, as no one will publish them.
func TestPublishedBatchFilesUnheld(t *testing.T) {
	dir := t.TempDir()
	parts := NewPublishedBatchFiles(dir, "part-")
	write := func(w io.Writer) error { _, err := io.WriteString(w, "row\n"); return err }
	if err := parts.Write(context.Background(), 5, false, write); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, parts.Name(5))); err != nil {
		t.Fatal(err)
	}
}
