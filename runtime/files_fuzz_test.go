package runtime_test

import (
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/streamgen/streamgen/runtime"
)

// FuzzFilesRead reads a file of any bytes through the files source, plain,
// compressed by the test, or as the bytes of a file named compressed,
// through line buffers and MaxLineBytes of many sizes, and checks the
// records against the test's own reading: its non-blank lines, each in
// place; a line past MaxLineBytes a dead letter of its first bytes; a
// compressed file that does not decompress one dead letter of the file.
func FuzzFilesRead(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n\n{\"a\":2}\r\n  \t\n{\"a\":3}"), uint16(0), uint8(0), uint8(0))
	f.Add([]byte("abc\r\ndefghijklmnopqrstuvwxyz\r\r\n\r"), uint16(5), uint8(1), uint8(1))
	f.Add([]byte(strings.Repeat("x", 100)+"\n"+strings.Repeat("y", 40)+"\r\n"), uint16(30), uint8(3), uint8(2))
	f.Add([]byte("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"), uint16(0), uint8(0), uint8(3))
	f.Add([]byte("(\xb5/\xfd\x00\x00"), uint16(0), uint8(0), uint8(4))
	f.Add([]byte("BZh91AY&SY"), uint16(0), uint8(0), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, limit uint16, buffer uint8, form uint8) {
		defer runtime.SetLineBuffer(16 + int(buffer))()
		keep := 8 << 20
		if buffer%2 == 1 { // the compressed file is read twice: checked, then its lines
			keep = 16
		}
		defer runtime.SetKeepDecompressed(keep)()

		name, file, content, bad := "a.jsonl", data, data, false
		switch form % 6 {
		case 1:
			name, file = "a.jsonl.gz", gzipped(t, data)
		case 2:
			name, file = "a.jsonl.zst", zstded(t, data)
		case 3, 4, 5: // the bytes as a compressed file's
			name = []string{"a.jsonl.gz", "a.jsonl.zst", "a.jsonl.bz2"}[form%6-3]
			var err error
			content, err = decompressAll(name, data)
			bad = err != nil && len(data) > 0
		}
		dir := t.TempDir()
		writeFile(t, dir, name, string(file))
		src := runtime.FilesSource(dir, runtime.FilesOptions{MaxLineBytes: int(limit)})
		got := readAll(t, src, nil, available(t, src))

		if bad {
			if len(got) != 1 || got[0].Position != name || got[0].Err == nil {
				t.Fatalf("%s that does not decompress: read %q, want one dead letter of the file", name, got)
			}
			return
		}
		want := linesOf(name, content, int(limit))
		if !slices.EqualFunc(got, want, equalRecord) {
			t.Fatalf("%s read\n%q\nthe test's reading\n%q", name, got, want)
		}
	})
}

// linesOf is the test's reading of a file's content: each non-blank line
// without its "\n" or "\r\n", and each line longer than limit (0: the
// default) a dead letter of its first bytes.
func linesOf(name string, content []byte, limit int) []runtime.Record {
	if limit == 0 {
		limit = 64 << 20
	}
	var want []runtime.Record
	for i, line := range bytes.Split(content, []byte("\n")) {
		line = bytes.TrimSuffix(line, []byte("\r"))
		rec := runtime.Record{Partition: "files", Data: line, Position: fmt.Sprintf("%s:%d", name, i+1)}
		switch {
		case len(line) > limit:
			rec.Data = line[:min(limit, 1024)]
			rec.Err = fmt.Errorf("line too long: %d bytes, more than MaxLineBytes %d", len(line), limit)
		case len(bytes.TrimSpace(line)) == 0:
			continue
		}
		want = append(want, rec)
	}
	return want
}

// decompressAll is the whole content of data, compressed as name's suffix
// says, read with the decompressors' own readers.
func decompressAll(name string, data []byte) ([]byte, error) {
	if len(data) == 0 {
		return nil, nil
	}
	var r io.Reader
	switch {
	case strings.HasSuffix(name, ".gz"):
		// Zero bytes after a member are padding, as gzip(1) takes them.
		var err error
		for k := len(bytes.TrimRight(data, "\x00")); k <= len(data); k++ {
			var content []byte
			if content, err = gunzip(data[:k]); err == nil {
				return content, nil
			}
		}
		return nil, err
	case strings.HasSuffix(name, ".zst"):
		z, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer z.Close()
		r = z
	default:
		r = bzip2.NewReader(bytes.NewReader(data))
	}
	return io.ReadAll(r)
}

func gunzip(data []byte) ([]byte, error) {
	z, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(z)
}

func gzipped(t *testing.T, data []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zstded(t *testing.T, data []byte) []byte {
	w, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	return w.EncodeAll(data, nil)
}
