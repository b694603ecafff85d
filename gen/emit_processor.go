package gen

import (
	"fmt"

	"github.com/dave/jennifer/jen"
)

// processor emits the function that applies an annotated processor type
// to a stream: the watermark (if asked for), the grouping by the key
// field, and transformWithState. The processor is a parameter, not made
// here: it holds its state variables, and the caller may want it back.
func (e *emitter) processor(p *Processor) jen.Code {
	e.function(e.isType, "in", "p", "opts", "byKey", "r")
	body, after := e.keyedInput(p.In, p.Keying, jen.Qual(typedPath, "ProcessorWatermarkOptions").Types(e.typeCode(p.In)).Call(e.id("opts")).Op("..."))
	body = append(body, jen.Return(jen.Qual(typedPath, "TransformWithState").Call(
		e.id("byKey"), e.id("p"), jen.Qual(typedPath, p.TimeMode), jen.Qual(typedPath, p.Mode), e.id("opts").Op("..."))))
	what := fmt.Sprintf("%s groups %s by %s and applies the processor %s (a %s) with transformWithState (%s, %s)%s; %s, such as typed.Concurrency and typed.ProcessorInitialState, configure the operator.",
		p.Name, e.local("in"), p.Key.Name(), e.local("p"), typeString(e.types, p.Recv), p.TimeMode, p.Mode, after, e.local("opts"))
	if p.HasDelay {
		what = what[:len(what)-1] + fmt.Sprintf(", and %sLateRows sends the rows too late for the watermark to a sink.", p.Name)
	}
	code := jen.Comment(what).Line().Func().Id(p.Name).
		Params(
			e.id("in").Qual(typedPath, "Stream").Types(e.typeCode(p.In)),
			e.id("p").Add(e.typeCode(p.Recv)),
			e.id("opts").Op("...").Qual(typedPath, "ProcessorOption"),
		).
		Qual(typedPath, "Stream").Types(e.typeCode(p.Out)).
		Block(body...)
	if p.HasDelay {
		// transformWithState drops late rows whenever its input has a
		// watermark.
		code.Line().Line().Add(e.lateRows(p.Name, p.In, true, jen.Qual(typedPath, "ProcessorOption"),
			jen.Qual(typedPath, "ProcessorLateRows").Types(e.typeCode(p.In))))
	}
	return code
}
