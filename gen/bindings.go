package gen

import (
	"go/ast"
	"go/types"
)

// typedPath is the import path of the typed API, which bindings call.
const typedPath = "github.com/streamgen/streamgen/typed"

// Binding is a stateful processor function annotated with
// //streamgen:mapGroupsWithState or //streamgen:flatMapGroupsWithState,
// for which the generator emits a function that wires it into a stream.
type Binding struct {
	Name    string // the emitted function
	Func    *types.Func
	Flat    bool   // flatMapGroupsWithState
	Mode    string // "Append" or "Update", for flatMapGroupsWithState
	Timeout string // "NoTimeout", "ProcessingTimeTimeout" or "EventTimeTimeout"
	In, Out types.Type
	State   types.Type
	Keying  // of In
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
	keys, ok := b.bindingKeys(d, "timeout", fd.Name, in, sig.Params().At(0).Type())
	if !ok {
		return nil, false
	}
	return &Binding{
		Name: keys.name, Func: fn, Flat: flat, Mode: keys.mode, In: in, Out: out, State: s, Keying: keys.Keying,
		Timeout: [...]string{"NoTimeout", "ProcessingTimeTimeout", "EventTimeTimeout"}[keys.clock],
	}, true
}
