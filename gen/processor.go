package gen

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"
)

// Processor is a type annotated with //streamgen:processor: its value or
// pointer implements typed.StatefulProcessor[K, In, Out], and the
// generator emits a function that applies it to a stream with
// transformWithState.
//
// For
//
//	//streamgen:processor mode=update time=processing
//	type counter struct{ n *typed.ValueState[int64] }
//
//	func (c *counter) Init(h *typed.Handle) error
//	func (c *counter) HandleInputRows(ctx context.Context, user string, rows iter.Seq[Click], timers typed.TimerValues, emit func(Count)) error
//
// the model is Processor{Name: "counterStream", Type: counter, Recv:
// *counter, Mode: "Update", TimeMode: "TimeModeProcessingTime", In: Click,
// Out: Count, Keying: {Key: Click's field tagged `stream:"key"`, of type
// string}}.
type Processor struct {
	Name     string          // the emitted function
	Type     *types.TypeName // the annotated type
	Recv     types.Type      // Type's type, or a pointer to it: the form that has every method checked
	Mode     string          // "Append" or "Update"
	TimeMode string          // "TimeModeNone", "TimeModeProcessingTime" or "TimeModeEventTime"
	In, Out  types.Type
	Keying   // of In; the key field's type is K
}

// processorMethod is a method a processor has, or may have, as the typed
// package declares it.
type processorMethod struct {
	name     string
	iface    string // the typed interface that declares it ("" for io.Closer)
	required bool   // in StatefulProcessor; else the runtime looks for it
}

// processorMethods are the methods checked, in this order: those of
// typed.StatefulProcessor, then those that TransformWithState calls when a
// processor has them. A processor without an optional one is fine, but
// one with the wrong signature would be ignored at run time, so it is an
// error here.
var processorMethods = []processorMethod{
	{"Init", "StatefulProcessor", true},
	{"HandleInputRows", "StatefulProcessor", true},
	{"HandleExpiredTimer", "ExpiredTimerHandler", false},
	{"HandleInitialState", "InitialStateHandler", false},
	{"Close", "", false},
}

// wantInputRows is how HandleInputRows must read, in messages about the
// method from which K, In and Out are read.
const wantInputRows = "HandleInputRows(ctx context.Context, key K, rows iter.Seq[In], timers typed.TimerValues, emit func(Out)) error"

// processor checks the type ts annotated with d and returns its model, or
// reports what is wrong with it. K, In and Out are read from the
// signature of HandleInputRows; then each method of processorMethods must
// be in the method set of the type's pointer (the optional ones may be
// absent) with the signature the typed package declares for those K, In
// and Out, and the binding takes the type by value when the value's method
// set has them all.
func (b *builder) processor(ts *ast.TypeSpec, d directive, info *types.Info) (*Processor, bool) {
	obj, _ := info.Defs[ts.Name].(*types.TypeName)
	if obj == nil {
		b.rep.errorf(ts.Pos(), "%s: the type did not type-check", ts.Name.Name)
		return nil, false
	}
	bad := func(at *types.Func, why string) (*Processor, bool) {
		pos := ts.Name.Pos()
		if at != nil && at.Pkg() == b.pkg && at.Pos().IsValid() {
			pos = at.Pos() // the method to fix, when it is in this package
		}
		b.rep.errorf(pos, "//streamgen:%s on %s: %s", d.Name, obj.Name(), why)
		return nil, false
	}
	named, _ := obj.Type().(*types.Named)
	switch {
	case named == nil:
		return bad(nil, "an alias cannot be bound; annotate the type it stands for")
	case named.TypeParams().Len() > 0:
		return bad(nil, "a generic type cannot be bound")
	case types.IsInterface(named):
		return bad(nil, "an interface cannot be bound; annotate a type that implements it")
	}
	ptr := types.NewPointer(named)
	methods, valueMethods := types.NewMethodSet(ptr), types.NewMethodSet(named)
	method := func(name string) *types.Func {
		if sel := methods.Lookup(b.pkg, name); sel != nil {
			fn, _ := sel.Obj().(*types.Func)
			return fn
		}
		return nil
	}
	// missing says why the method set has no method name, and whether
	// that is all right for an optional method (it is not when embedded
	// types at the same depth both have it).
	missing := func(name string) (why string, absent bool) {
		switch found, index, _ := types.LookupFieldOrMethod(ptr, false, b.pkg, name); {
		case found != nil:
			return fmt.Sprintf("it has a field %s, not a method", name), true
		case index != nil:
			return fmt.Sprintf("its method %s is ambiguous: embedded types at the same depth have it", name), false
		}
		return "it has no method " + name, true
	}

	// K, In and Out, from HandleInputRows.
	hir := method("HandleInputRows")
	if hir == nil {
		why, _ := missing("HandleInputRows")
		return bad(nil, "the type implements no typed.StatefulProcessor: "+why+"; want "+wantInputRows)
	}
	sig := hir.Type().(*types.Signature)
	if sig.Params().Len() != 5 {
		return bad(hir, "HandleInputRows: wrong number of parameters; want "+wantInputRows)
	}
	key := sig.Params().At(1).Type()
	in, ok := typeArg(sig.Params().At(2).Type(), "iter", "Seq")
	if !ok {
		return bad(hir, "HandleInputRows: the third parameter is not an iter.Seq; want "+wantInputRows)
	}
	emit, ok := sig.Params().At(4).Type().Underlying().(*types.Signature)
	if !ok || emit.Params().Len() != 1 || emit.Results().Len() != 0 || emit.Variadic() {
		return bad(hir, "HandleInputRows: the fifth parameter is not a func(Out); want "+wantInputRows)
	}
	out := emit.Params().At(0).Type()
	// Pointers as rows, and plain structs as output, fail later at the
	// sink: say so here, with the signature that works.
	hereText := func(in, out types.Type) string {
		return fmt.Sprintf("HandleInputRows(ctx context.Context, key %s, rows iter.Seq[%s], timers typed.TimerValues, emit func(%s)) error",
			typeString(b.pkg, key), typeString(b.pkg, in), typeString(b.pkg, out))
	}
	if why, fixed := b.rowType("rows", in, false); why != "" {
		return bad(hir, "HandleInputRows: "+why+"; want "+hereText(fixed, elemOf(out)))
	}
	if why, fixed := b.rowType("emit's parameter", out, true); why != "" {
		return bad(hir, "HandleInputRows: "+why+"; want "+hereText(in, fixed))
	}
	if !types.Comparable(key) {
		return bad(hir, fmt.Sprintf("HandleInputRows: the key type %s is not comparable", typeString(b.pkg, key)))
	}
	typedPkg := importedPackage(b.pkg, typedPath)
	if typedPkg == nil {
		return bad(nil, "the type implements no typed.StatefulProcessor: the package does not import "+typedPath)
	}

	// Each method against the interface that declares it, with K, In and
	// Out (and, for HandleInitialState, its own S) filled in.
	byValue := true
	for _, m := range processorMethods {
		got := method(m.name)
		var gotSig *types.Signature
		if got != nil {
			gotSig = got.Type().(*types.Signature)
		}
		want, generic, err := processorMethodSig(m, typedPkg, key, in, out, gotSig)
		if err != nil {
			return bad(got, fmt.Sprintf("%s: %v", m.name, err))
		}
		wantText := m.name + strings.TrimPrefix(typeString(b.pkg, want), "func")
		if m.name == "HandleInitialState" && (gotSig == nil || gotSig.Params().Len() <= 2) {
			wantText = m.name + strings.TrimPrefix(typeString(b.pkg, generic), "func") // S is the processor's choice
		}
		if got == nil {
			why, absent := missing(m.name)
			if m.required || !absent {
				return bad(nil, why+"; want "+wantText)
			}
			continue
		}
		if !types.Identical(gotSig, want) {
			return bad(got, fmt.Sprintf("%s: %s; want %s", m.name, b.signatureDiff(gotSig, want, generic), wantText))
		}
		byValue = byValue && valueMethods.Lookup(b.pkg, m.name) != nil
	}

	keys, ok := b.bindingKeys(d, "time", ts.Name, in, key)
	if !ok {
		return nil, false
	}
	p := &Processor{
		Name: keys.name, Type: obj, Recv: ptr, Mode: keys.mode, In: in, Out: out, Keying: keys.Keying,
		TimeMode: [...]string{"TimeModeNone", "TimeModeProcessingTime", "TimeModeEventTime"}[keys.clock],
	}
	if byValue {
		p.Recv = named
	}
	return p, true
}

// processorMethodSig returns the signature m must have, with K, In and
// Out filled in, and as its interface declares it (with type parameters).
// HandleInitialState's S is the third parameter of got, the method the
// processor has; got may be nil when the processor has none.
func processorMethodSig(m processorMethod, typedPkg *types.Package, key, in, out types.Type, got *types.Signature) (want, generic *types.Signature, err error) {
	if m.iface == "" { // io.Closer
		closeSig := types.NewSignatureType(nil, nil, nil, nil,
			types.NewTuple(types.NewVar(0, nil, "", types.Universe.Lookup("error").Type())), false)
		return closeSig, closeSig, nil
	}
	obj := typedPkg.Scope().Lookup(m.iface)
	if obj == nil {
		return nil, nil, fmt.Errorf("the typed package has no %s: upgrade %s", m.iface, typedPath)
	}
	var args []types.Type
	switch m.iface {
	case "StatefulProcessor":
		args = []types.Type{key, in, out}
	case "ExpiredTimerHandler":
		args = []types.Type{key, out}
	case "InitialStateHandler":
		var state types.Type = types.NewInterfaceType(nil, nil) // S, when got does not say
		if got != nil && got.Params().Len() > 2 {
			state = got.Params().At(2).Type()
		}
		args = []types.Type{key, state}
	}
	inst, err := types.Instantiate(nil, obj.Type(), args, true)
	if err != nil {
		return nil, nil, fmt.Errorf("typed.%s: %v", m.iface, err)
	}
	want = interfaceMethod(inst.Underlying().(*types.Interface), m.name).Type().(*types.Signature)
	generic = interfaceMethod(obj.Type().Underlying().(*types.Interface), m.name).Type().(*types.Signature)
	return want, generic, nil
}

// signatureDiff says how got differs from want, the signature of the
// interface method with K, In and Out filled in; generic is the method as
// the interface declares it, to tell which parameters K, In and Out come
// from HandleInputRows.
func (b *builder) signatureDiff(got, want, generic *types.Signature) string {
	if got.Params().Len() != want.Params().Len() || got.Results().Len() != want.Results().Len() {
		return fmt.Sprintf("wrong number of parameters or results (it is %s)", typeString(b.pkg, got))
	}
	differs := func(what string, i int, got, want, generic *types.Tuple) string {
		g, w := got.At(i).Type(), want.At(i).Type()
		msg := fmt.Sprintf("%s %s is %s, not %s", ordinals[i], what, typeString(b.pkg, g), typeString(b.pkg, w))
		if t := generic.At(i).Type(); mentionsTypeParam(t) {
			msg += fmt.Sprintf(" (%s, from HandleInputRows)", typeString(b.pkg, t))
		}
		return msg
	}
	for i := range want.Params().Len() {
		if !types.Identical(got.Params().At(i).Type(), want.Params().At(i).Type()) {
			return differs("parameter", i, got.Params(), want.Params(), generic.Params())
		}
	}
	for i := range want.Results().Len() {
		if !types.Identical(got.Results().At(i).Type(), want.Results().At(i).Type()) {
			return differs("result", i, got.Results(), want.Results(), generic.Results())
		}
	}
	return "it is variadic where the interface's method is not"
}

var ordinals = []string{"the first", "the second", "the third", "the fourth", "the fifth", "the sixth"}

// mentionsTypeParam reports whether t is, or is built from, a type
// parameter (K, In or Out of typed.StatefulProcessor).
func mentionsTypeParam(t types.Type) bool {
	switch t := t.(type) {
	case *types.TypeParam:
		return true
	case *types.Pointer:
		return mentionsTypeParam(t.Elem())
	case *types.Slice:
		return mentionsTypeParam(t.Elem())
	case *types.Signature:
		for i := range t.Params().Len() {
			if mentionsTypeParam(t.Params().At(i).Type()) {
				return true
			}
		}
		for i := range t.Results().Len() {
			if mentionsTypeParam(t.Results().At(i).Type()) {
				return true
			}
		}
	case *types.Named:
		for i := range t.TypeArgs().Len() {
			if mentionsTypeParam(t.TypeArgs().At(i)) {
				return true
			}
		}
	}
	return false
}

// interfaceMethod returns the method of iface named name.
func interfaceMethod(iface *types.Interface, name string) *types.Func {
	for i := range iface.NumMethods() {
		if m := iface.Method(i); m.Name() == name {
			return m
		}
	}
	panic("gen: typed.StatefulProcessor has no method " + name)
}

// importedPackage returns the package of path among those pkg imports,
// directly or not, or nil.
func importedPackage(pkg *types.Package, path string) *types.Package {
	seen := map[*types.Package]bool{}
	var visit func(*types.Package) *types.Package
	visit = func(p *types.Package) *types.Package {
		if p.Path() == path {
			return p
		}
		if seen[p] {
			return nil
		}
		seen[p] = true
		for _, q := range p.Imports() {
			if found := visit(q); found != nil {
				return found
			}
		}
		return nil
	}
	return visit(pkg)
}
