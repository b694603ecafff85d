package runtime_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/streamgen/streamgen/runtime"
)

// BenchmarkFilesCompressed reads one file of JSON lines, plain, gzip and
// zstd, with a files source (which decompresses a file whole to check it
// before it hands on a line: once, for 50,000 lines, 4.5 MB, which it
// keeps; twice, for 150,000, 13.5 MB, more than it keeps), beside the
// building block: one pass of the decompressor with a bufio.Scanner over
// its lines.
func BenchmarkFilesCompressed(b *testing.B) {
	for _, lines := range []int{50_000, 150_000} {
		b.Run(fmt.Sprintf("lines=%d", lines), func(b *testing.B) { benchmarkFilesCompressed(b, lines) })
	}
}

func benchmarkFilesCompressed(b *testing.B, n int) {
	var plain bytes.Buffer
	for i := range n {
		fmt.Fprintf(&plain, `{"user":"user-%d","time":"2026-03-01T09:%02d:%02d Z","page":"/products/%d","amount":%d.%02d}`+"\n", i%5000, i/60%60, i%60, i%977, i%500, i%100)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(plain.Bytes())
	zw.Close()
	enc, _ := zstd.NewWriter(nil)
	zst := enc.EncodeAll(plain.Bytes(), nil)
	enc.Close()
	for _, c := range []struct {
		name string
		data []byte
	}{{"events.jsonl", plain.Bytes()}, {"events.jsonl.gz", gz.Bytes()}, {"events.jsonl.zst", zst}} {
		dir := b.TempDir()
		if err := os.WriteFile(filepath.Join(dir, c.name), c.data, 0o644); err != nil {
			b.Fatal(err)
		}
		src := runtime.FilesSource(dir, runtime.FilesOptions{})
		ctx := context.Background()
		upTo, err := src.Available(ctx)
		if err != nil {
			b.Fatal(err)
		}
		end, err := src.Next(ctx, nil, upTo, runtime.Limited)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("file="+filepath.Ext(c.name)+"/reader=source", func(b *testing.B) {
			b.SetBytes(int64(plain.Len()))
			for b.Loop() {
				lines := 0
				if err := src.Read(ctx, nil, end, func(runtime.Record) error { lines++; return nil }); err != nil || lines != n {
					b.Fatal(lines, err)
				}
			}
		})
		if c.name == "events.jsonl" {
			continue
		}
		b.Run("file="+filepath.Ext(c.name)+"/reader=one_pass", func(b *testing.B) {
			b.SetBytes(int64(plain.Len()))
			for b.Loop() {
				f, err := os.Open(filepath.Join(dir, c.name))
				if err != nil {
					b.Fatal(err)
				}
				var r *bufio.Scanner
				if filepath.Ext(c.name) == ".gz" {
					z, err := gzip.NewReader(bufio.NewReaderSize(f, 64<<10))
					if err != nil {
						b.Fatal(err)
					}
					r = bufio.NewScanner(z)
				} else {
					z, err := zstd.NewReader(bufio.NewReaderSize(f, 64<<10), zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
					if err != nil {
						b.Fatal(err)
					}
					defer z.Close()
					r = bufio.NewScanner(z)
				}
				lines := 0
				for r.Scan() {
					lines++
				}
				f.Close()
				if r.Err() != nil || lines != n {
					b.Fatal(lines, r.Err())
				}
			}
		})
	}
}
