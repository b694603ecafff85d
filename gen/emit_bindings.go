package gen

import (
	"fmt"
	"go/types"
	"time"

	"github.com/dave/jennifer/jen"
)

// binding emits the function that wires an annotated processor into a
// stream: the watermark (if asked for), the grouping by the key field, and
// the stateful operator.
func (e *emitter) binding(b *Binding) jen.Code {
	// The body refers to the bound function, and to types.
	e.function(func(n string) bool { return e.isType(n) || n == b.Func.Name() }, "in", "opts", "byKey", "r")
	kind := "mapGroupsWithState"
	if b.Flat {
		kind = "flatMapGroupsWithState"
	}
	what := fmt.Sprintf("%s groups %s by %s and applies %s with %s (%s", b.Name, e.local("in"), b.Key.Name(), b.Func.Name(), kind, b.Timeout)
	if b.Flat {
		what += ", " + b.Mode
	}
	what += ")"
	body, after := e.keyedInput(b.In, b.Keying, jen.Qual(typedPath, "BindingWatermarkOptions").
		Types(e.typeCode(b.Key.Type()), e.typeCode(b.State), e.typeCode(b.In)).Call(e.id("opts")).Op("..."))
	if b.Flat {
		body = append(body, jen.Return(jen.Qual(typedPath, "FlatMapGroupsWithState").Call(
			e.id("byKey"), jen.Qual(typedPath, b.Mode), jen.Qual(typedPath, b.Timeout), jen.Id(b.Func.Name()), e.id("opts").Op("..."))))
	} else {
		body = append(body, jen.Return(jen.Qual(typedPath, "MapGroupsWithState").Call(
			e.id("byKey"), jen.Qual(typedPath, b.Timeout), jen.Id(b.Func.Name()), e.id("opts").Op("..."))))
	}
	what += after + "; " + e.local("opts") + ", such as typed.InitialState, configure the operator"
	if b.HasDelay {
		what += fmt.Sprintf(", and %sLateRows sends the rows too late for the watermark to a sink", b.Name)
	}
	option := jen.Qual(typedPath, "GroupsOption").Types(e.typeCode(b.Key.Type()), e.typeCode(b.State))
	code := jen.Comment(what+".").Line().Func().Id(b.Name).
		Params(
			e.id("in").Qual(typedPath, "Stream").Types(e.typeCode(b.In)),
			e.id("opts").Op("...").Add(option),
		).
		Qual(typedPath, "Stream").Types(e.typeCode(b.Out)).
		Block(body...)
	if b.HasDelay {
		code.Line().Line().Add(e.lateRows(b.Name, b.In, b.Timeout == "EventTimeTimeout", option,
			jen.Qual(typedPath, "BindingLateRows").Types(e.typeCode(b.Key.Type()), e.typeCode(b.State), e.typeCode(b.In))))
	}
	return code
}

// lateRows emits <binding>LateRows, the option of a binding with a
// watermark that sends its late rows to a sink; drops says whether the
// operator drops late rows at all (with an event-time timeout or time
// mode, as in Spark), which its comment says; option is the binding's
// option type, and makes the typed function that builds it.
func (e *emitter) lateRows(binding string, in types.Type, drops bool, option, makes *jen.Statement) jen.Code {
	name := binding + "LateRows"
	e.function(e.isType, "sink")
	doc := fmt.Sprintf("%s is an option of %s: the rows of its input that are too late for its watermark, which it drops, go to %s batch by batch (see typed.LateRows).", name, binding, e.local("sink"))
	if !drops {
		doc = fmt.Sprintf("%s is an option of %s: the rows of its input that are too late for its watermark go to %s batch by batch (see typed.LateRows); without an event-time timeout the operator drops none, as in Spark, so none go there.", name, binding, e.local("sink"))
	}
	return jen.Comment(doc).Line().Func().Id(name).
		Params(e.id("sink").Qual(typedPath, "Sink").Types(e.typeCode(in))).
		Add(option).
		Block(jen.Return(makes.Call(e.id("sink"))))
}

// keyedInput emits the start of a binding's body, which turns its
// parameter in, a typed.Stream of in, into byKey, a typed.KeyedStream: the
// watermark (if asked for), then the grouping by the key field. after
// describes the watermark for the binding's doc comment ("" without one).
// wmOpts is the code of the options of the watermark (from the binding's
// options).
func (e *emitter) keyedInput(in types.Type, k Keying, wmOpts jen.Code) (body []jen.Code, after string) {
	row := func() *jen.Statement { return e.id("r").Op("*").Add(e.typeCode(in)) }
	if k.HasDelay {
		after = fmt.Sprintf(", after a watermark %v behind %s", k.Delay, k.Event.Name())
		var eventTime jen.Code = e.id("r").Dot(k.Event.Name())
		if !isNamed(k.Event.Type(), "time", "Time") {
			n := jen.Int64().Parens(e.id("r").Dot(k.Event.Name()))
			switch k.Unit {
			case "s":
				eventTime = jen.Qual(timePath, "Unix").Call(n, jen.Lit(0))
			case "ms":
				eventTime = jen.Qual(timePath, "UnixMilli").Call(n)
			case "us":
				eventTime = jen.Qual(timePath, "UnixMicro").Call(n)
			default: // ns
				eventTime = jen.Qual(timePath, "Unix").Call(jen.Lit(0), n)
			}
			after += fmt.Sprintf(" (%s since the Unix epoch)", unitNames[k.Unit])
		}
		body = append(body, e.id("in").Op("=").Qual(typedPath, "WithWatermark").Call(
			e.id("in"),
			jen.Func().Params(row()).Qual(timePath, "Time").Block(jen.Return(eventTime)),
			durationCode(k.Delay),
			wmOpts,
		))
	}
	body = append(body, e.id("byKey").Op(":=").Qual(typedPath, "GroupByKey").Call(
		e.id("in"),
		jen.Func().Params(row()).Add(e.typeCode(k.Key.Type())).Block(jen.Return(e.id("r").Dot(k.Key.Name()))),
	))
	return body, after
}

// unitNames spell the units of integer event times in doc comments.
var unitNames = map[string]string{"ns": "nanoseconds", "us": "microseconds", "ms": "milliseconds", "s": "seconds"}

// durationCode writes d as a readable constant expression, as 5 *
// time.Second.
func durationCode(d time.Duration) jen.Code {
	units := []struct {
		name string
		d    time.Duration
	}{{"Hour", time.Hour}, {"Minute", time.Minute}, {"Second", time.Second}, {"Millisecond", time.Millisecond}, {"Microsecond", time.Microsecond}}
	for _, u := range units {
		if d != 0 && d%u.d == 0 {
			return jen.Lit(int(d/u.d)).Op("*").Qual(timePath, u.name)
		}
	}
	return jen.Qual(timePath, "Duration").Parens(jen.Lit(int64(d)))
}
