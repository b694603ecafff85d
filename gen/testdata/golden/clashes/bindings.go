package clashes

import (
	"context"
	"iter"
	stdtime "time"

	stream "github.com/streamgen/streamgen/typed"
)

// typed is named like the package that bindings call.
var typed = "not the typed package"

// opts is a key type named like the bindings' options.
type opts string

// in is an input row named like the bindings' input.
//
//streamgen:record
type in struct {
	Key opts         `stream:"key"`
	At  stdtime.Time `stream:"eventtime"`
}

// sink is state and output named like the parameter of LateRows options.
//
//streamgen:record
type sink struct{ N int64 }

// byKey is named like the grouped stream in a binding's body.
//
//streamgen:mapGroupsWithState timeout=event watermark=10s
func byKey(key opts, rows iter.Seq[in], state *stream.GroupState[sink]) (sink, error) {
	s, _ := state.Get()
	for range rows {
		s.N++
	}
	state.Update(s)
	return s, nil
}

// p is an input row named like a processor binding's processor.
//
//streamgen:record
type p struct {
	Key opts         `stream:"key"`
	At  stdtime.Time `stream:"eventtime"`
}

// counter counts p rows per key.
//
//streamgen:processor time=event watermark=5s
type counter struct{ n *stream.ValueState[int64] }

func (c *counter) Init(h *stream.Handle) error {
	c.n = stream.NewValueState[int64](h, "n")
	return nil
}

func (c *counter) HandleInputRows(ctx context.Context, key opts, rows iter.Seq[p], _ stream.TimerValues, emit func(sink)) error {
	n, _, e := c.n.Get(ctx)
	if e != nil {
		return e
	}
	for range rows {
		n++
	}
	emit(sink{N: n})
	return c.n.Update(ctx, n)
}
