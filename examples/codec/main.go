// Command codec shows what streamgen generates, on the sensor schema: it
// reads sensor readings as JSON lines (a built-in deterministic sample, or
// the *.json / *.jsonl files of -input), decodes each with the generated
// JSON decoder, sends lines that do not decode to a dead-letter file with
// their position and error, round-trips every reading through the
// generated binary codec, and prints a table of readings per user and
// activity with the sizes of both encodings.
//
//	go run ./examples/codec
//	go run ./examples/codec -input testdata/ -dead-letter /tmp/dlq
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/streamgen/streamgen/generated/sensor"
)

func main() {
	input := flag.String("input", "", "directory of JSON-lines files (*.json, *.jsonl), read in lexical order; default: a built-in sample")
	deadLetter := flag.String("dead-letter", "", "directory for lines that do not decode (default: report them on stderr)")
	flag.Usage = func() {
		out := flag.CommandLine.Output()
		fmt.Fprintf(out, `Usage: codec [flags]

Decodes sensor readings from JSON lines with the generated decoder (lines
that do not decode go to the dead letters), round-trips each through the
generated binary codec, and prints the readings per user and activity
and the size of both encodings.

Flags:
`)
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*input, *deadLetter, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "codec:", err)
		os.Exit(1)
	}
}

// line is one input line and where it came from.
type line struct {
	file string
	num  int
	text []byte
}

func run(input, deadLetter string, stdout, stderr io.Writer) error {
	lines, err := readInput(input)
	if err != nil {
		return err
	}
	var dlq io.Writer = stderr
	if deadLetter != "" {
		if err := os.MkdirAll(deadLetter, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(deadLetter, "dead-letter.jsonl"))
		if err != nil {
			return err
		}
		defer f.Close()
		dlq = f
	}

	type key struct{ user, activity string }
	counts := map[key]int{}
	var jsonBytes, binaryBytes, bad int
	var buf []byte
	for _, l := range lines {
		var ev sensor.Event
		if err := ev.UnmarshalJSON(l.text); err != nil {
			bad++
			fmt.Fprintf(dlq, "{\"file\":%q,\"line\":%d,\"error\":%q,\"raw\":%q}\n", l.file, l.num, err.Error(), l.text)
			continue
		}
		buf, _ = ev.AppendBinary(buf[:0])
		var back sensor.Event
		if err := back.UnmarshalBinary(buf); err != nil || back != ev {
			return fmt.Errorf("%s:%d: binary round trip changed the reading: %v", l.file, l.num, err)
		}
		jsonBytes += len(l.text)
		binaryBytes += len(buf)
		counts[key{ev.User, ev.Activity}]++
	}

	keys := make([]key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return strings.Compare(a.user+"\x00"+a.activity, b.user+"\x00"+b.activity)
	})
	tw := tabwriter.NewWriter(stdout, 0, 0, 1, ' ', tabwriter.Debug)
	fmt.Fprintln(tw, "user\tactivity\treadings\t")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%d\t\n", k.user, k.activity, counts[k])
	}
	tw.Flush()
	good := len(lines) - bad
	fmt.Fprintf(stdout, "%d readings decoded, %d lines to the dead-letter sink\n", good, bad)
	if good > 0 {
		fmt.Fprintf(stdout, "JSON %d bytes, binary %d bytes (%.0f%%)\n", jsonBytes, binaryBytes, 100*float64(binaryBytes)/float64(jsonBytes))
	}
	return nil
}

func readInput(dir string) ([]line, error) {
	if dir == "" {
		return sample(), nil
	}
	var files []string
	for _, pattern := range []string{"*.json", "*.jsonl"} {
		m, err := filepath.Glob(filepath.Join(dir, pattern))
		if err != nil {
			return nil, err
		}
		files = append(files, m...)
	}
	slices.Sort(files)
	var out []line
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<20)
		for n := 1; sc.Scan(); n++ {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			out = append(out, line{file: name, num: n, text: append([]byte(nil), sc.Bytes()...)})
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return out, nil
}

// sample makes a deterministic sample in the data set's shape, with one
// line that is not valid JSON and one whose Index is not a number.
func sample() []line {
	r := rand.New(rand.NewPCG(42, 42))
	users := []string{"a", "b", "c"}
	activities := []string{"stand", "sit", "walk", "bike"}
	var out []line
	start := int64(1424686733000000000)
	for i := range 200 {
		ev := sensor.Event{
			ArrivalTime:  start/1e6 + int64(i)*20 + int64(r.IntN(5)),
			CreationTime: start + int64(i)*20_000_000,
			Device:       fmt.Sprintf("nexus4_%d", 1+r.IntN(2)),
			Index:        int64(i),
			Model:        "nexus4",
			User:         users[r.IntN(len(users))],
			Activity:     activities[(i/50)%len(activities)],
			X:            r.NormFloat64() / 100,
			Y:            r.NormFloat64() / 100,
			Z:            r.NormFloat64() / 100,
		}
		b, _ := ev.MarshalJSON()
		out = append(out, line{file: "sample", num: len(out) + 1, text: b})
	}
	out = append(out,
		line{file: "sample", num: len(out) + 1, text: []byte(`{"User": "a", "gt": "walk", `)},
		line{file: "sample", num: len(out) + 2, text: []byte(`{"User": "b", "Index": "seven"}`)},
	)
	return out
}
