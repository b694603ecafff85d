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
	body, after := e.keyedInput(p.In, p.Keying, jen.Qual(typedPath, "ProcessorWatermarkOptions").Types(e.typeCode(p.In)).Call(jen.Id("opts")).Op("..."))
	body = append(body, jen.Return(jen.Qual(typedPath, "TransformWithState").Call(
		jen.Id("byKey"), jen.Id("p"), jen.Qual(typedPath, p.TimeMode), jen.Qual(typedPath, p.Mode), jen.Id("opts").Op("..."))))
	what := fmt.Sprintf("%s groups in by %s and applies the processor p (a %s) with transformWithState (%s, %s)%s; opts, such as typed.Concurrency and typed.ProcessorInitialState, configure the operator.",
		p.Name, p.Key.Name(), typeString(e.types, p.Recv), p.TimeMode, p.Mode, after)
	if p.HasDelay {
		what = what[:len(what)-1] + fmt.Sprintf(", and %sLateRows sends the rows too late for the watermark to a sink.", p.Name)
	}
	code := jen.Comment(what).Line().Func().Id(p.Name).
		Params(
			jen.Id("in").Qual(typedPath, "Stream").Types(e.typeCode(p.In)),
			jen.Id("p").Add(e.typeCode(p.Recv)),
			jen.Id("opts").Op("...").Qual(typedPath, "ProcessorOption"),
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
