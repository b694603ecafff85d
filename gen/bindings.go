package gen

import (
	"fmt"
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
		if !ok || emit.Params().Len() != 1 || emit.Results().Len() != 0 || emit.Variadic() {
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
	// The right signature with this function's types, for the messages
	// about rows, state and output that the sinks would refuse later.
	wantHere := func(in, s, out types.Type) string {
		ts := func(t types.Type) string { return typeString(b.pkg, t) }
		if flat {
			return fmt.Sprintf("func(key %s, rows iter.Seq[%s], state *typed.GroupState[%s], emit func(%s)) error", ts(sig.Params().At(0).Type()), ts(in), ts(s), ts(out))
		}
		return fmt.Sprintf("func(key %s, rows iter.Seq[%s], state *typed.GroupState[%s]) (%s, error)", ts(sig.Params().At(0).Type()), ts(in), ts(s), ts(out))
	}
	if why, fixed := b.rowType("rows", in, false); why != "" {
		b.rep.errorf(fd.Name.Pos(), "//streamgen:%s on %s: %s; want %s", d.Name, fd.Name.Name, why, wantHere(fixed, elemOf(s), elemOf(out)))
		return nil, false
	}
	what := "the result"
	if flat {
		what = "emit's parameter"
	}
	if why, fixed := b.rowType(what, out, true); why != "" {
		b.rep.errorf(fd.Name.Pos(), "//streamgen:%s on %s: %s; want %s", d.Name, fd.Name.Name, why, wantHere(in, elemOf(s), fixed))
		return nil, false
	}
	named, ok := types.Unalias(s).(*types.Named)
	if !ok || !b.isRecord(named) {
		fix := "add //streamgen:record to its doc comment"
		if p, ok := types.Unalias(s).(*types.Pointer); ok && isNamedStruct(p.Elem()) {
			fix = fmt.Sprintf("state is kept by value, so take *typed.GroupState[%s]; want %s", typeString(b.pkg, p.Elem()), wantHere(in, p.Elem(), out))
		}
		b.rep.errorf(fd.Name.Pos(), "//streamgen:%s on %s: the state type %s is not a record: %s", d.Name, fd.Name.Name, typeString(b.pkg, s), fix)
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

// rowType says why t, the type of a binding's input rows or output rows
// (what names it in the message; output says which), would fail later,
// and the type that fits ("" when t is fine). Rows are values: a stream
// of pointers would reach the sinks, which encode records
// (typed.FilesSink[T], typed.ConsoleSink[T] with T a record), as pointers
// they cannot take. An output that is a named struct of this package but
// not a record has no codec for those sinks either.
func (b *builder) rowType(what string, t types.Type, output bool) (why string, fixed types.Type) {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		return fmt.Sprintf("%s is a pointer, %s: rows are values, so take %s", what, typeString(b.pkg, t), typeString(b.pkg, p.Elem())), p.Elem()
	}
	if n, ok := types.Unalias(t).(*types.Named); ok && output && isNamedStruct(n) && n.Obj().Pkg() == b.pkg && !b.isRecord(n) {
		return fmt.Sprintf("%s, %s, is a struct that is not a record, which typed.FilesSink, typed.ConsoleSink and the kafka sink cannot encode: add //streamgen:record to its doc comment", what, typeString(b.pkg, t)), t
	}
	return "", t
}

// elemOf is t's element type when t is a pointer, else t.
func elemOf(t types.Type) types.Type {
	if p, ok := types.Unalias(t).(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}

// isNamedStruct reports whether t is a named struct type.
func isNamedStruct(t types.Type) bool {
	n, ok := types.Unalias(t).(*types.Named)
	if !ok {
		return false
	}
	_, ok = n.Underlying().(*types.Struct)
	return ok
}
