// Command streamgen generates zero-reflection binary and JSON codecs and
// schemas for Go structs annotated with //streamgen:record.
//
// Use it from go:generate in the package that declares the records:
//
//	//go:generate go run github.com/streamgen/streamgen/cmd/streamgen
//
// or run it on packages from anywhere in the module:
//
//	go run github.com/streamgen/streamgen/cmd/streamgen ./events ./state/...
//
// It writes streamgen_gen.go beside each package's files, and removes that
// file from a package that no longer has records. Functions annotated with
// //streamgen:mapGroupsWithState or //streamgen:flatMapGroupsWithState, and
// types annotated with //streamgen:processor (typed.StatefulProcessor
// implementations, for transformWithState), get a binding that wires them
// into a typed stream.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/streamgen/streamgen/gen"
)

const usage = `usage: streamgen [flags] [packages]

streamgen writes %s beside the files of each package (default ".")
with binary and JSON codecs and a schema for every struct type whose doc
comment holds the directive //streamgen:record. Run it from go:generate:

	//go:generate go run github.com/streamgen/streamgen/cmd/streamgen

On a function, //streamgen:mapGroupsWithState or //streamgen:flatMapGroupsWithState
[timeout=none|processing|event] [mode=append|update] [watermark=DURATION]
[key=Field] [eventtime=Field] [name=Binding] emits <name>Stream(in), which
groups in by the key field and applies the function.

On a type T whose pointer (or value) implements typed.StatefulProcessor[K, In, Out],
//streamgen:processor [mode=append|update] [time=none|processing|event]
[watermark=DURATION] [key=Field] [eventtime=Field] [name=Binding] emits
<T>Stream(in, p, opts...), which groups in by the key field and applies p
with typed.TransformWithState. K, In and Out are read from T's method
HandleInputRows(ctx, key K, rows iter.Seq[In], timers, emit func(Out)) error,
and the optional HandleExpiredTimer, HandleInitialState and Close, if T has
them, must agree; p is a *T, or a T when the methods have value receivers.
Defaults: mode=append, time=none; time=event (and timeout=event) needs
watermark=.

Keys of the binding directives: the key field is In's field tagged
stream:"key" or key=Field, of type K; watermark=DURATION (such as 5s) first
sets the watermark DURATION behind the event-time field, tagged
stream:"eventtime" or eventtime=Field, a time.Time or an integer with its
unit (stream:"eventtime,unit=ms": ns, us, ms or s); name= names the emitted
function, and <name>LateRows(sink) routes the rows too late for the
watermark to a sink.

Field tags it reads (stream options combine: stream:"required,id=7"):
	stream:"-"          leave the field out of the binary encoding
	stream:"id=N"       pin the field's binary id (1..131071), e.g. to rename it
	stream:"key"        the field is the record's grouping key; required in JSON
	stream:"eventtime"  the field is the record's event time (an integer: ,unit=ns|us|ms|s); required in JSON
	stream:"required"   JSON input must have the field, not null: UnmarshalJSON
	                    refuses an object without it or with null for it, and
	                    null for the whole struct, with a *codec.RequiredFieldError
	                    (errors.Is codec.ErrRequired); binary does not check
	json:"..."          names, "-", omitempty, omitzero and string, as encoding/json

A field type with its own MarshalJSON or MarshalText (and the Unmarshal
method) is written and read through them in JSON, as encoding/json does. In
binary it is its MarshalBinary/UnmarshalBinary output if it has the pair,
else its value, else (for a struct with unexported fields) its text or JSON.

streamgen inspect DIR shows what a query's checkpoint holds (streamgen
inspect -h for more). streamgen broker runs a Kafka broker in-process on
loopback, for the instances of an App on one machine (streamgen broker -h).

Flags:
`

func main() {
	// A run is short and allocates a lot: collect garbage less often,
	// unless GOGC says otherwise.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(400)
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "inspect" {
		return runInspect(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "broker" {
		return runBroker(args[1:], stdout, stderr)
	}
	fs := flag.NewFlagSet("streamgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "write nothing; exit with status 1 if any output file is missing or stale")
	verbose := fs.Bool("v", false, "print each file written or removed")
	keep := fs.Bool("keep-on-error", false, "when a package holds a mistake, leave its last output as it is (by default it is replaced by a file that does not compile and says what the mistakes are, so that the stale code does not build)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, usage, gen.OutputFile)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	cfg := gen.Config{Patterns: fs.Args(), DryRun: *check, Poison: !*keep}
	if *verbose {
		cfg.Log = func(line string) { fmt.Fprintln(stdout, line) }
	}
	results, err := gen.Run(cfg)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if *check {
		stale := 0
		for _, r := range results {
			if r.Changed {
				fmt.Fprintf(stderr, "streamgen: %s is stale; run go generate\n", r.Path)
				stale++
			}
		}
		if stale > 0 {
			return 1
		}
	}
	return 0
}
