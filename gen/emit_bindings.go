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
	kind := "mapGroupsWithState"
	if b.Flat {
		kind = "flatMapGroupsWithState"
	}
	what := fmt.Sprintf("%s groups in by %s and applies %s with %s (%s", b.Name, b.Key.Name(), b.Func.Name(), kind, b.Timeout)
	if b.Flat {
		what += ", " + b.Mode
	}
	what += ")"
	body, after := e.keyedInput(b.In, b.Keying)
	if b.Flat {
		body = append(body, jen.Return(jen.Qual(typedPath, "FlatMapGroupsWithState").Call(
			jen.Id("byKey"), jen.Qual(typedPath, b.Mode), jen.Qual(typedPath, b.Timeout), jen.Id(b.Func.Name()), jen.Id("opts").Op("..."))))
	} else {
		body = append(body, jen.Return(jen.Qual(typedPath, "MapGroupsWithState").Call(
			jen.Id("byKey"), jen.Qual(typedPath, b.Timeout), jen.Id(b.Func.Name()), jen.Id("opts").Op("..."))))
	}
	what += after + "; opts, such as typed.InitialState, configure the operator"
	return jen.Comment(what+".").Line().Func().Id(b.Name).
		Params(
			jen.Id("in").Qual(typedPath, "Stream").Types(e.typeCode(b.In)),
			jen.Id("opts").Op("...").Qual(typedPath, "GroupsOption").Types(e.typeCode(b.Key.Type()), e.typeCode(b.State)),
		).
		Qual(typedPath, "Stream").Types(e.typeCode(b.Out)).
		Block(body...)
}

// keyedInput emits the start of a binding's body, which turns its
// parameter in, a typed.Stream of in, into byKey, a typed.KeyedStream: the
// watermark (if asked for), then the grouping by the key field. after
// describes the watermark for the binding's doc comment ("" without one).
func (e *emitter) keyedInput(in types.Type, k Keying) (body []jen.Code, after string) {
	row := func() *jen.Statement { return jen.Id("r").Op("*").Add(e.typeCode(in)) }
	if k.HasDelay {
		after = fmt.Sprintf(", after a watermark %v behind %s", k.Delay, k.Event.Name())
		var eventTime jen.Code = jen.Id("r").Dot(k.Event.Name())
		if !isNamed(k.Event.Type(), "time", "Time") {
			eventTime = jen.Qual(timePath, "Unix").Call(jen.Lit(0), jen.Int64().Parens(jen.Id("r").Dot(k.Event.Name())))
		}
		body = append(body, jen.Id("in").Op("=").Qual(typedPath, "WithWatermark").Call(
			jen.Id("in"),
			jen.Func().Params(row()).Qual(timePath, "Time").Block(jen.Return(eventTime)),
			durationCode(k.Delay),
		))
	}
	body = append(body, jen.Id("byKey").Op(":=").Qual(typedPath, "GroupByKey").Call(
		jen.Id("in"),
		jen.Func().Params(row()).Add(e.typeCode(k.Key.Type())).Block(jen.Return(jen.Id("r").Dot(k.Key.Name()))),
	))
	return body, after
}

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
