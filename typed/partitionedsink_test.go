package typed_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// byPageAndUser partitions clicks by page, then user.
func byPageAndUser(c *fixtures.Click) []runtime.PartitionValue {
	return []runtime.PartitionValue{{Key: "page", Value: c.Page}, {Key: "user", Value: c.User}}
}

// partitionedClicks are clicks whose pages need escaping in a directory's
// name, or are empty (null).
func partitionedClicks(n int) []fixtures.Click {
	pages := []string{"/", "/cart?id=7", "a=b", "100%", "", "Zürich", "x:y#z", "plain"}
	base := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	out := make([]fixtures.Click, n)
	for i := range out {
		out[i] = fixtures.Click{User: fmt.Sprintf("u%d", i%3), Time: base.Add(time.Duration(i) * time.Second), Page: pages[i%len(pages)]}
	}
	return out
}

// readPartitioned reads the clicks under dir as a user would, through a
// recursive files source, checking that each line's directories name its
// page and user, as Spark's partition discovery would read them.
func readPartitioned(t *testing.T, dir string) []fixtures.Click {
	t.Helper()
	var got []fixtures.Click
	src := runtime.FilesSource(dir, runtime.FilesOptions{Recursive: true})
	clicks := typed.FromFunc(src, func(r runtime.Record) (fixtures.Click, error) {
		var c fixtures.Click
		if err := c.UnmarshalJSON(r.Data); err != nil {
			return c, err
		}
		m := r.Meta.(*runtime.FileMeta)
		page, ok := m.Partition("page")
		user, _ := m.Partition("user")
		if page != c.Page || ok != (c.Page != "") || user != c.User || !strings.HasSuffix(m.Name, ".jsonl") {
			t.Errorf("%s holds %+v: its directories say page %q (%v), user %q", r.Position, c, page, ok, user)
		}
		return c, nil
	})
	sink := typed.NewMemorySink[fixtures.Click]()
	if err := runToEnd(t, typed.WriteTo(clicks, sink)); err != nil {
		t.Fatal(err)
	}
	got = sink.Rows()
	sortClicks(got)
	return got
}

func sortClicks(cs []fixtures.Click) {
	slices.SortFunc(cs, func(a, b fixtures.Click) int { return a.Time.Compare(b.Time) })
}

// TestPartitionedFilesSink writes clicks through a query to a sink
// partitioned by page and user, in batches of several sizes and over a
// restart, and reads them back as a user would: every click once, in the
// directory of its page and user (escaped, and the null directory for no
// page), and no file left hidden.
func TestPartitionedFilesSink(t *testing.T) {
	in := partitionedClicks(40)
	for _, per := range []int{0, 1, 7} {
		t.Run(fmt.Sprintf("per=%d", per), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			m := typed.NewMemoryStream[fixtures.Click]("clicks", per)
			ck := newCheckpoint()
			run := func() {
				t.Helper()
				w := typed.WriteTo(typed.FromMemory(m), typed.PartitionedFilesSink[fixtures.Click](out, byPageAndUser))
				if err := runToEnd(t, w, ck.opts()...); err != nil {
					t.Fatal(err)
				}
			}
			m.Add(in[:25]...)
			run()
			m.Add(in[25:]...)
			run() // a restart on the checkpoint
			want := slices.Clone(in)
			sortClicks(want)
			if got := readPartitioned(t, out); !slices.Equal(got, want) {
				t.Fatalf("read back %d clicks, want the %d written:\n%v\n%v", len(got), len(want), got, want)
			}
			for _, dir := range []string{"page=%2F", "page=%2Fcart%3Fid%3D7", "page=a%3Db", "page=100%25", "page=__HIVE_DEFAULT_PARTITION__", "page=Zürich", "page=x%3Ay%23z"} {
				if _, err := os.Stat(filepath.Join(out, dir, "user=u0")); err != nil {
					t.Errorf("no directory %s/user=u0: %v", dir, err)
				}
			}
			filepath.WalkDir(out, func(path string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && strings.HasSuffix(d.Name(), ".pending") {
					t.Errorf("%s left hidden", path)
				}
				return nil
			})
		})
	}
}

// TestPartitionedFilesSinkBatches: a batch's files are hidden until it
// is published; a batch written again removes its earlier attempt's files
// in directories it no longer writes to; a start removes the files of the
// batches after the last committed in every directory.
func TestPartitionedFilesSinkBatches(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	sink := typed.PartitionedFilesSink[fixtures.Click](dir, func(c *fixtures.Click) []runtime.PartitionValue {
		return []runtime.PartitionValue{{Key: "user", Value: c.User}}
	})
	rewind, publish := sink.(runtime.BatchRewinder), sink.(runtime.BatchPublisher)
	visible := func() []string {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(dir, "*", "part-*.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for i, f := range files {
			files[i], _ = filepath.Rel(dir, f)
		}
		return files
	}
	pending := func() []string {
		files, _ := filepath.Glob(filepath.Join(dir, "*", ".part-*.pending"))
		return files
	}
	click := func(user string) fixtures.Click { return fixtures.Click{User: user, Time: time.Unix(0, 0).UTC()} }
	if err := rewind.RewindAfter(ctx, -1); err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, 0, []fixtures.Click{click("a"), click("b"), click("a")}); err != nil {
		t.Fatal(err)
	}
	if v, p := visible(), pending(); len(v) != 0 || len(p) != 2 {
		t.Fatalf("batch 0 written: %q visible, %d pending; want none visible, 2 pending", v, len(p))
	}
	if err := publish.PublishBatch(0); err != nil {
		t.Fatal(err)
	}
	if v := visible(); !slices.Equal(v, []string{"user=a/part-0000000000.jsonl", "user=b/part-0000000000.jsonl"}) {
		t.Fatalf("batch 0 published: %q", v)
	}
	// Batch 1 written to a and b, then again to b and c only.
	if err := sink.Write(ctx, 1, []fixtures.Click{click("a"), click("b")}); err != nil {
		t.Fatal(err)
	}
	if err := sink.Write(ctx, 1, []fixtures.Click{click("b"), click("c")}); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 2 || !slices.ContainsFunc(p, func(f string) bool { return strings.Contains(f, "user=c") }) {
		t.Fatalf("batch 1 written again to b and c: pending %q", p)
	}
	// A new start, after batch 0 committed: batch 1's files go, in
	// every directory, and a directory new since writes hidden files.
	again := typed.PartitionedFilesSink[fixtures.Click](dir, func(c *fixtures.Click) []runtime.PartitionValue {
		return []runtime.PartitionValue{{Key: "user", Value: c.User}}
	})
	if err := again.(runtime.BatchRewinder).RewindAfter(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if p := pending(); len(p) != 0 {
		t.Fatalf("after a start at batch 0: pending %q", p)
	}
	if err := again.Write(ctx, 1, []fixtures.Click{click("d")}); err != nil {
		t.Fatal(err)
	}
	if v, p := visible(), pending(); len(v) != 2 || len(p) != 1 {
		t.Fatalf("batch 1 written to a new directory: %q visible, pending %q", v, p)
	}
	// An empty key fails the batch.
	bad := typed.PartitionedFilesSink[fixtures.Click](dir, func(*fixtures.Click) []runtime.PartitionValue {
		return []runtime.PartitionValue{{Value: "x"}}
	})
	if err := bad.Write(ctx, 2, []fixtures.Click{click("e")}); err == nil || !strings.Contains(err.Error(), "empty key") {
		t.Errorf("a row with an empty partition key: %v", err)
	}
}

// TestPartitionedFilesSinkHiddenNames: a partition key that begins with
// "_" makes directories readers read (Spark hides "_" names only without
// a "="), whose batches a start publishes and rewinds as any other's; one
// that begins with "." would make hidden directories, and fails the batch.
func TestPartitionedFilesSinkHiddenNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bySource := func(c *fixtures.Click) []runtime.PartitionValue {
		return []runtime.PartitionValue{{Key: "_src", Value: c.User}}
	}
	sink := typed.PartitionedFilesSink[fixtures.Click](dir, bySource)
	if err := sink.(runtime.BatchRewinder).RewindAfter(ctx, -1); err != nil {
		t.Fatal(err)
	}
	click := fixtures.Click{User: "a", Time: time.Unix(0, 0).UTC()}
	for id := range int64(2) {
		if err := sink.Write(ctx, id, []fixtures.Click{click}); err != nil {
			t.Fatal(err)
		}
	}
	// The process dies with batches 0 and 1 written, 0 committed: a
	// start publishes 0 and removes 1.
	again := typed.PartitionedFilesSink[fixtures.Click](dir, bySource)
	if err := again.(runtime.BatchRewinder).RewindAfter(ctx, 0); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "_src=a"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Contains(names, "part-0000000000.jsonl") || slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "0000000001") }) {
		t.Fatalf("_src=a holds %q after a start at batch 0: want batch 0 published, batch 1 gone", names)
	}
	if got := readPartitionedSources(t, dir); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("a files source reads the sources %q, want [a]", got)
	}
	hidden := typed.PartitionedFilesSink[fixtures.Click](dir, func(*fixtures.Click) []runtime.PartitionValue {
		return []runtime.PartitionValue{{Key: ".src", Value: "a"}}
	})
	if err := hidden.Write(ctx, 2, []fixtures.Click{click}); err == nil || !strings.Contains(err.Error(), `".src"`) {
		t.Errorf("a partition key beginning with \".\": %v", err)
	}
}

// readPartitionedSources reads the files under dir with a recursive files
// source and returns the _src partition of each line.
func readPartitionedSources(t *testing.T, dir string) []string {
	t.Helper()
	src := runtime.FilesSource(dir, runtime.FilesOptions{Recursive: true})
	var got []string
	sources := typed.FromFunc(src, func(r runtime.Record) (string, error) {
		v, _ := r.Meta.(*runtime.FileMeta).Partition("_src")
		return v, nil
	})
	sink := typed.NewMemorySink[string]()
	if err := runToEnd(t, typed.WriteTo(sources, sink)); err != nil {
		t.Fatal(err)
	}
	got = sink.Rows()
	return got
}
