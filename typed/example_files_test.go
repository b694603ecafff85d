package typed_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// printLetters is a dead-letter sink that prints where each letter's
// record was.
type printLetters struct{}

func (printLetters) WriteDeadLetters(_ context.Context, _ int64, letters []runtime.DeadLetter) error {
	for _, l := range letters {
		fmt.Printf("dead letter at %s\n", l.Position)
	}
	return nil
}

// A query over a directory of JSON-lines files, as Spark's file source:
// each record decoded with its generated decoder, a line that does not
// decode sent to the dead letters with its position, counts per user
// written as JSON lines, a file per batch (Update mode: the users whose
// count changed). The checkpoint keeps which files were read and the
// counts, so a second run on it reads only the file that came since, and
// goes on from the counts.
func ExampleFrom() {
	dir, err := os.MkdirTemp("", "example-from-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	in, out, ckpt := filepath.Join(dir, "in"), filepath.Join(dir, "out"), filepath.Join(dir, "checkpoint")
	write := func(name string, lines ...string) {
		if err := os.MkdirAll(in, 0o755); err != nil {
			fmt.Println(err)
		}
		if err := os.WriteFile(filepath.Join(in, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			fmt.Println(err)
		}
	}
	run := func() {
		clicks := typed.From[fixtures.Click](runtime.FilesSource(in, runtime.FilesOptions{}))
		counts := typed.MapGroupsWithState(typed.GroupByKey(clicks, func(c *fixtures.Click) string { return c.User }), typed.NoTimeout,
			func(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
				c, _ := state.Get()
				for r := range rows {
					if c.Count == 0 || r.Time.Before(c.First) {
						c.First = r.Time
					}
					if r.Time.After(c.Last) {
						c.Last = r.Time
					}
					c.Count++
				}
				state.Update(c)
				return fixtures.UserCount{User: user, Count: c.Count, First: c.First, Last: c.Last}, nil
			})
		q, err := typed.WriteTo(counts, typed.FilesSink[fixtures.UserCount](out)).OutputMode(typed.Update).
			Start(context.Background(), runtime.Checkpoint(ckpt), runtime.WithTrigger(runtime.AvailableNow()), runtime.DeadLetters(printLetters{}))
		if err != nil {
			fmt.Println(err)
			return
		}
		if err := q.AwaitTermination(); err != nil {
			fmt.Println(err)
			return
		}
	}
	show := func() {
		files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
		for _, f := range files {
			b, _ := os.ReadFile(f)
			fmt.Printf("%s: %s", filepath.Base(f), b)
		}
	}

	write("1.jsonl",
		`{"user": "ann", "time": "2026-03-01T09:00:00Z", "page": "/"}`,
		`{"user": "bob", "time": "2026-03-01T09:01:00Z", "page": "/"}`,
		`{"user": "ann", "time": `, // cut short
	)
	run()
	write("2.jsonl", `{"user": "ann", "time": "2026-03-01T09:02:00Z", "page": "/cart"}`)
	run()
	show()
	// Output:
	// dead letter at 1.jsonl:3
	// part-0000000000.jsonl: {"user":"ann","count":1,"first":"2026-03-01T09:00:00Z","last":"2026-03-01T09:00:00Z"}
	// {"user":"bob","count":1,"first":"2026-03-01T09:01:00Z","last":"2026-03-01T09:01:00Z"}
	// part-0000000001.jsonl: {"user":"ann","count":2,"first":"2026-03-01T09:00:00Z","last":"2026-03-01T09:02:00Z"}
}

// A query over a tree of directories of compressed JSON-lines files
// (day/hour/part.jsonl.gz), as a log shipper writes them: Recursive reads
// the directories within, and CleanArchive moves each file to the
// archive once the batch that read it is committed, so the input
// directory holds only what is still to be read.
func ExampleFrom_archive() {
	dir, err := os.MkdirTemp("", "example-archive-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	in, archive := filepath.Join(dir, "in"), filepath.Join(dir, "archive")
	for i, name := range []string{"2026-03-01/09/part-0.jsonl.gz", "2026-03-01/10/part-0.jsonl.gz"} {
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		fmt.Fprintf(z, `{"user": "ann", "time": "2026-03-01T%02d:00:00Z", "page": "/"}`+"\n", 9+i)
		z.Close()
		os.MkdirAll(filepath.Join(in, filepath.Dir(name)), 0o755)
		os.WriteFile(filepath.Join(in, name), buf.Bytes(), 0o644)
	}
	src := runtime.FilesSource(in, runtime.FilesOptions{Recursive: true, CleanSource: runtime.CleanArchive, ArchiveDir: archive})
	sink := typed.NewMemorySink[fixtures.Click]()
	q, err := typed.WriteTo(typed.From[fixtures.Click](src), sink).
		Start(context.Background(), runtime.Checkpoint(filepath.Join(dir, "checkpoint")), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range sink.Rows() {
		fmt.Println(c.User, c.Time.Format("15:04"))
	}
	left, _ := filepath.Glob(filepath.Join(in, "*", "*", "*.gz"))
	archived, _ := filepath.Glob(filepath.Join(archive, "*", "*", "*.gz"))
	fmt.Println(len(left), "files left,", len(archived), "archived")
	// Output:
	// ann 09:00
	// ann 10:00
	// 0 files left, 2 archived
}

// A query over a partitioned directory (page=%2F/, page=%2Fcart/), as
// Spark's partitionBy writes one and its partition discovery reads it: a
// line's file, and the key=value directories above it (unescaped), are
// its record's runtime.FileMeta, which FromFunc's decoder sees. Here each
// click takes its page from its directory.
func ExampleFromFunc_partitions() {
	dir, err := os.MkdirTemp("", "example-partitions-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	for _, f := range []struct{ name, line string }{
		{"page=%2F/1.jsonl", `{"user": "ann", "time": "2026-03-01T09:00:00Z"}`},
		{"page=%2Fcart/1.jsonl", `{"user": "bob", "time": "2026-03-01T09:01:00Z"}`},
	} {
		path := filepath.Join(dir, f.name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			fmt.Println(err)
		}
		if err := os.WriteFile(path, []byte(f.line+"\n"), 0o644); err != nil {
			fmt.Println(err)
		}
	}
	clicks := typed.FromFunc(runtime.FilesSource(dir, runtime.FilesOptions{Recursive: true}),
		func(r runtime.Record) (fixtures.Click, error) {
			var c fixtures.Click
			if err := c.UnmarshalJSON(r.Data); err != nil {
				return c, err
			}
			c.Page, _ = r.Meta.(*runtime.FileMeta).Partition("page")
			return c, nil
		})
	sink := typed.NewMemorySink[fixtures.Click]()
	q, err := typed.WriteTo(clicks, sink).Start(context.Background(), runtime.WithTrigger(runtime.AvailableNow()))
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := q.AwaitTermination(); err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range sink.Rows() {
		fmt.Println(c.User, c.Page)
	}
	// Output:
	// ann /
	// bob /cart
}
