package gen

import (
	"go/ast"
	"go/token"
	"go/types"
	"time"
)

// typedPath is the import path of the typed API, which bindings call.
const typedPath = "github.com/streamgen/streamgen/typed"

// Binding is a stateful processor function annotated with
// //streamgen:mapGroupsWithState or //streamgen:flatMapGroupsWithState,
// for which the generator emits a function that wires it into a stream.
type Binding struct {
	Name     string // the emitted function
	Func     *types.Func
	Flat     bool   // flatMapGroupsWithState
	Mode     string // "Append" or "Update", for flatMapGroupsWithState
	Timeout  string // "NoTimeout", "ProcessingTimeTimeout" or "EventTimeTimeout"
	In, Out  types.Type
	State    types.Type
	Key      *types.Var // the field of In that is the key
	Event    *types.Var // the field of In that is the event time, with a watermark
	Delay    time.Duration
	HasDelay bool
}

// binding checks the function fd annotated with d and returns its model,
// or reports what is wrong with it.
func (b *builder) binding(fd *ast.FuncDecl, d directive, info *types.Info) (*Binding, bool) {
	fn, _ := info.Defs[fd.Name].(*types.Func)
	if fn == nil {
		b.rep.errorf(fd.Pos(), "%s: the function did not type-check", fd.Name.Name)
		return nil, false
	}
	sig := fn.Type().(*types.Signature)
	flat := d.Name == "flatMapGroupsWithState"
	want := "func(key K, rows iter.Seq[In], state *typed.GroupState[S]) (Out, error)"
	if flat {
		want = "func(key K, rows iter.Seq[In], state *typed.GroupState[S], emit func(Out)) error"
	}
	bad := func(why string) (*Binding, bool) {
		b.rep.errorf(fd.Name.Pos(), "//streamgen:%s on %s: %s; want %s", d.Name, fd.Name.Name, why, want)
		return nil, false
	}
	switch {
	case sig.Recv() != nil:
		return bad("a method cannot be bound")
	case sig.TypeParams().Len() > 0:
		return bad("a generic function cannot be bound")
	case flat && (sig.Params().Len() != 4 || sig.Results().Len() != 1):
		return bad("wrong number of parameters or results")
	case !flat && (sig.Params().Len() != 3 || sig.Results().Len() != 2):
		return bad("wrong number of parameters or results")
	}
	errType := types.Universe.Lookup("error").Type()
	in, ok := typeArg(sig.Params().At(1).Type(), "iter", "Seq")
	if !ok {
		return bad("the second parameter is not an iter.Seq")
	}
	stateArg, ok := sig.Params().At(2).Type().(*types.Pointer)
	if !ok {
		return bad("the third parameter is not a *typed.GroupState")
	}
	s, ok := typeArg(stateArg.Elem(), typedPath, "GroupState")
	if !ok {
		return bad("the third parameter is not a *typed.GroupState")
	}
	var out types.Type
	if flat {
		emit, ok := sig.Params().At(3).Type().(*types.Signature)
		if !ok || emit.Params().Len() != 1 || emit.Results().Len() != 0 {
			return bad("the fourth parameter is not a func(Out)")
		}
		out = emit.Params().At(0).Type()
		if !types.Identical(sig.Results().At(0).Type(), errType) {
			return bad("the result is not an error")
		}
	} else {
		out = sig.Results().At(0).Type()
		if !types.Identical(sig.Results().At(1).Type(), errType) {
			return bad("the second result is not an error")
		}
	}
	named, ok := types.Unalias(s).(*types.Named)
	if !ok || !(b.records[named.Obj()] || named.Obj().Pkg() != b.pkg && b.isForeignRecord(named.Obj())) {
		b.rep.errorf(fd.Name.Pos(), "//streamgen:%s on %s: the state type %s is not a record (//streamgen:record)", d.Name, fd.Name.Name, typeString(b.pkg, s))
		return nil, false
	}
	bd := &Binding{Name: fd.Name.Name + "Stream", Func: fn, Flat: flat, Mode: "Append", Timeout: "NoTimeout", In: in, Out: out, State: s}
	if v, ok := d.Args["name"]; ok {
		if !token.IsIdentifier(v) {
			b.rep.errorf(d.Pos, "//streamgen:%s: name=%q is not an identifier", d.Name, v)
			return nil, false
		}
		bd.Name = v
	}
	switch v := d.Args["timeout"]; v {
	case "", "none":
	case "processing":
		bd.Timeout = "ProcessingTimeTimeout"
	case "event":
		bd.Timeout = "EventTimeTimeout"
	default:
		b.rep.errorf(d.Pos, "//streamgen:%s: timeout=%s: want none, processing or event", d.Name, v)
		return nil, false
	}
	if flat {
		switch v := d.Args["mode"]; v {
		case "", "append":
		case "update":
			bd.Mode = "Update"
		default:
			b.rep.errorf(d.Pos, "//streamgen:%s: mode=%s: want append or update", d.Name, v)
			return nil, false
		}
	}
	st, ok := in.Underlying().(*types.Struct)
	if !ok {
		b.rep.errorf(fd.Name.Pos(), "//streamgen:%s on %s: the input type %s is not a struct, so it has no key field", d.Name, fd.Name.Name, typeString(b.pkg, in))
		return nil, false
	}
	key, ok := b.taggedField(st, d, "key", func(t streamTag) bool { return t.key })
	if !ok {
		return nil, false
	}
	if !types.Identical(key.Type(), sig.Params().At(0).Type()) {
		b.rep.errorf(fd.Name.Pos(), "//streamgen:%s on %s: the key parameter is %s but the key field %s is %s", d.Name, fd.Name.Name,
			typeString(b.pkg, sig.Params().At(0).Type()), key.Name(), typeString(b.pkg, key.Type()))
		return nil, false
	}
	bd.Key = key
	if v, ok := d.Args["watermark"]; ok {
		delay, err := time.ParseDuration(v)
		if err != nil || delay < 0 {
			b.rep.errorf(d.Pos, "//streamgen:%s: watermark=%s: want a duration such as 5s", d.Name, v)
			return nil, false
		}
		ev, ok := b.taggedField(st, d, "eventtime", func(t streamTag) bool { return t.eventTime })
		if !ok {
			return nil, false
		}
		if !isNamed(ev.Type(), "time", "Time") && !isInteger(ev.Type()) {
			b.rep.errorf(d.Pos, "//streamgen:%s: the event-time field %s must be a time.Time or an integer of Unix nanoseconds", d.Name, ev.Name())
			return nil, false
		}
		bd.Event, bd.Delay, bd.HasDelay = ev, delay, true
	}
	if bd.Timeout == "EventTimeTimeout" && !bd.HasDelay {
		b.rep.errorf(d.Pos, "//streamgen:%s: timeout=event needs watermark=DURATION", d.Name)
		return nil, false
	}
	return bd, true
}

// taggedField finds the field of st named by the directive's key (as in
// key=Field), or else the one tagged `stream:"<what>"`.
func (b *builder) taggedField(st *types.Struct, d directive, what string, tagged func(streamTag) bool) (*types.Var, bool) {
	if name, ok := d.Args[what]; ok {
		for i := 0; i < st.NumFields(); i++ {
			if f := st.Field(i); f.Name() == name && f.Exported() {
				return f, true
			}
		}
		b.rep.errorf(d.Pos, "//streamgen:%s: %s=%s: the input has no exported field %s", d.Name, what, name, name)
		return nil, false
	}
	var found *types.Var
	for i := 0; i < st.NumFields(); i++ {
		t, err := parseStreamTag(st.Tag(i))
		if err == nil && tagged(t) {
			if found != nil {
				b.rep.errorf(d.Pos, "//streamgen:%s: the input has two fields tagged stream:%q (%s and %s); choose one with %s=Field", d.Name, what, found.Name(), st.Field(i).Name(), what)
				return nil, false
			}
			found = st.Field(i)
		}
	}
	if found == nil {
		b.rep.errorf(d.Pos, "//streamgen:%s: the input has no field tagged `stream:%q`; tag one or name it with %s=Field", d.Name, what, what)
		return nil, false
	}
	return found, true
}

// typeArg returns the type argument of t when t is pkg.name[X].
func typeArg(t types.Type, pkg, name string) (types.Type, bool) {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok || n.Obj().Pkg() == nil || n.Obj().Pkg().Path() != pkg || n.Obj().Name() != name || n.TypeArgs().Len() != 1 {
		return nil, false
	}
	return n.TypeArgs().At(0), true
}

func isInteger(t types.Type) bool {
	b, ok := t.Underlying().(*types.Basic)
	return ok && b.Info()&types.IsInteger != 0
}
