// Package gen is the streamgen generator as a library: it loads Go packages
// with full type information, builds a model of the records annotated with
// //streamgen:record and of every struct reached from them, and emits their
// binary and JSON codecs and schemas into one file per package, with the
// bindings of the annotated stateful functions and processor types.
//
// The stages are files: load.go (go list; the packages with directives
// type-checked from source, their dependencies read from export data),
// directives.go and shape.go and jsonfields.go (the model), bindings.go
// and processor.go and keying.go (the bindings' model), emit*.go (code),
// format.go and write.go (output). The command cmd/streamgen is a thin
// wrapper over Run.
package gen

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/tools/go/packages"
)

// Config says what to generate.
type Config struct {
	// Dir is the directory patterns are relative to; "" means the
	// current directory.
	Dir string
	// Patterns are package patterns as for go build; none means ".".
	Patterns []string
	// DryRun renders everything but writes nothing.
	DryRun bool
	// Log, when set, is called with a line per file written or removed.
	Log func(string)
	// Poison, when a package holds a mistake, replaces its earlier output
	// with a file that does not compile and says what the mistakes are,
	// so that the stale output does not build as if nothing had failed.
	// A package that had no output gets none. Nothing else is written.
	Poison bool
}

// Result is one output file and what happened to it.
type Result struct {
	Path    string // the output file
	Content []byte // nil when the package has no records
	Changed bool   // whether the file on disk was (or would be) changed
}

// Run generates code for every package matched by cfg.Patterns, loaded
// together (one go list for the patterns, one for the dependencies of the
// packages with directives, however many packages match). It returns an
// ErrorList when the packages hold anything the generator cannot handle,
// or a pattern names no package; then no file is written at all. Run is
// safe to call from several goroutines, on packages that do not overlap.
func Run(cfg Config) ([]Result, error) {
	pkgs, err := load(cfg.Dir, cfg.Patterns)
	if err != nil {
		return nil, err
	}
	// Each package is modelled and rendered as soon as it is
	// type-checked, in parallel, with its own reporter; the errors are
	// merged and sorted at the end.
	dones := make([]done, len(pkgs))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i := range pkgs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := pkgs[i].Wait()
			sem <- struct{}{}
			defer func() { <-sem }()
			modelAndRender(p, &dones[i])
		}()
	}
	wg.Wait()
	var (
		errs    ErrorList
		outputs []Result
	)
	for _, d := range dones {
		if d.failure != nil {
			return nil, d.failure
		}
		errs = append(errs, d.errs...)
		if d.out != nil {
			outputs = append(outputs, *d.out)
		}
	}
	if len(errs) > 0 {
		errs = errs.sorted()
		if cfg.Poison && !cfg.DryRun {
			for _, d := range dones {
				if len(d.errs) > 0 && d.path != "" {
					if err := poison(d.path, d.pkgName, d.errs.sorted()); err != nil {
						return nil, errors.Join(errs, err)
					}
				}
			}
		}
		return nil, errs
	}
	return writeAll(outputs, cfg)
}

// done is what came of one package: its errors, or its output; and where
// its output goes, and its name.
type done struct {
	errs          ErrorList
	out           *Result
	failure       error
	path, pkgName string
}

// modelAndRender models a package and renders its output into d.
func modelAndRender(p *packages.Package, d *done) {
	rep := &reporter{fset: p.Fset}
	defer func() { d.errs = rep.errs }()
	if len(p.GoFiles)+len(p.CompiledGoFiles) > 0 {
		d.path, d.pkgName = outputPath(p), p.Name
	}
	if len(p.Errors) > 0 && p.Types == nil {
		for _, e := range p.Errors {
			rep.errs = append(rep.errs, &Error{Pos: parsePos(e.Pos), Msg: e.Msg})
		}
		return
	}
	// A syntax error can hide a record, whose output would then be
	// dropped: it stops the package.
	for _, e := range p.Errors {
		if e.Kind == packages.ParseError {
			rep.errs = append(rep.errs, &Error{Pos: parsePos(e.Pos), Msg: e.Msg})
		}
	}
	if len(rep.errs) > 0 {
		return
	}
	model := buildModel(rep, p)
	if model == nil {
		return
	}
	path := outputPath(p)
	hasOutput := len(model.Records) > 0 || len(model.Bindings) > 0 || len(model.Processors) > 0
	if !hasOutput {
		d.out = &Result{Path: path}
		return
	}
	e := &emitter{pkg: model, types: p.Types}
	f := e.file()
	f.NoFormat = true // formatOutput formats, or finds it done
	var src bytes.Buffer
	err := f.Render(&src)
	if err == nil && hidesBuiltins(rep, p.Types, src.Bytes()) {
		return
	}
	var content []byte
	if err == nil {
		content, err = formatOutput(path, src.Bytes())
	}
	if err != nil {
		d.failure = fmt.Errorf("streamgen: %s: rendering the output failed (a generator bug): %w", p.PkgPath, err)
		return
	}
	d.out = &Result{Path: path, Content: content}
}

// hidesBuiltins reports each declaration of the package that hides a
// predeclared identifier (append, string, nil, ...) that src, the
// package's output, uses, which would then refer to the declaration.
// Output is parsed only for a package that declares such a name.
func hidesBuiltins(rep *reporter, pkg *types.Package, src []byte) bool {
	var hiding []types.Object
	for _, name := range pkg.Scope().Names() {
		if types.Universe.Lookup(name) != nil {
			hiding = append(hiding, pkg.Scope().Lookup(name))
		}
	}
	if len(hiding) == 0 {
		return false
	}
	f, err := parser.ParseFile(token.NewFileSet(), OutputFile, src, 0)
	if err != nil {
		return false // formatting reports it
	}
	// The identifiers the output does not declare: the predeclared ones
	// it uses, its imports and the package's declarations.
	used := map[string]bool{}
	for _, id := range f.Unresolved {
		used[id.Name] = true
	}
	found := false
	for _, obj := range hiding {
		if used[obj.Name()] {
			rep.errorf(obj.Pos(), "%s hides Go's predeclared %s, which the generated code uses; rename it", obj.Name(), obj.Name())
			found = true
		}
	}
	return found
}

// buildModel finds the package's records and models them, reporting what
// it cannot handle. It returns nil when the package has errors.
func buildModel(rep *reporter, p *packages.Package) *Package {
	before := len(rep.errs)
	b := &builder{
		rep:         rep,
		pkg:         p.Types,
		model:       &Package{Name: p.Name, Path: p.PkgPath},
		records:     map[*types.TypeName]bool{},
		named:       map[*types.TypeName]*Struct{},
		anon:        map[*types.Struct]*Struct{},
		helpers:     map[string]bool{},
		generated:   map[string]bool{},
		foreign:     map[*types.TypeName]bool{},
		parsedFiles: map[string]*astFile{},
	}
	var order []*types.TypeName
	type bound struct {
		fd *ast.FuncDecl
		d  directive
	}
	var toBind []bound
	type processed struct {
		ts *ast.TypeSpec
		d  directive
	}
	var toProcess []processed
	for _, f := range p.Syntax {
		typeDirs, funcDirs := fileDirectives(rep, f)
		for fd, ds := range funcDirs {
			for _, d := range ds {
				toBind = append(toBind, bound{fd, d})
			}
		}
		for ts, ds := range typeDirs {
			for _, d := range ds {
				if d.Name == "processor" {
					toProcess = append(toProcess, processed{ts, d})
				}
				if d.Name != "record" {
					continue
				}
				obj, _ := p.TypesInfo.Defs[ts.Name].(*types.TypeName)
				if obj == nil {
					rep.errorf(ts.Pos(), "%s: the type did not type-check: %v", ts.Name.Name, packageErrors(p))
					continue
				}
				if _, isStruct := obj.Type().Underlying().(*types.Struct); !isStruct {
					rep.errorf(ts.Pos(), "//streamgen:record on %s: a record must be a struct type, not %s", obj.Name(), typeString(p.Types, obj.Type().Underlying()))
					continue
				}
				if ts.TypeParams != nil {
					rep.errorf(ts.Pos(), "//streamgen:record on %s: records cannot be generic", obj.Name())
					continue
				}
				b.records[obj] = true
				order = append(order, obj)
			}
		}
	}
	sortByPosition(p.Fset, order, (*types.TypeName).Pos)
	for _, obj := range order {
		if hasInvalid(obj.Type()) {
			rep.errorf(obj.Pos(), "%s: a field's type did not type-check: %v", obj.Name(), packageErrors(p))
			continue
		}
		b.checkMethodNames(obj)
		s, ok := b.structOf(obj.Type(), obj.Pos())
		if ok {
			b.model.Records = append(b.model.Records, s)
		}
	}
	sortByPosition(p.Fset, toBind, func(tb bound) token.Pos { return tb.fd.Pos() })
	for _, tb := range toBind {
		if bd, ok := b.binding(tb.fd, tb.d, p.TypesInfo); ok {
			b.model.Bindings = append(b.model.Bindings, bd)
		}
	}
	sortByPosition(p.Fset, toProcess, func(tp processed) token.Pos { return tp.ts.Pos() })
	for _, tp := range toProcess {
		if pr, ok := b.processor(tp.ts, tp.d, p.TypesInfo); ok {
			b.model.Processors = append(b.model.Processors, pr)
		}
	}
	if len(rep.errs) > before {
		return nil
	}
	markRecursive(b.model.Structs)
	return b.model
}

// sortByPosition orders things by the file name and offset of their
// positions. token.Pos order is not enough: go/packages parses files in
// parallel, so the order of files in the file set changes from run to run,
// and the output must not.
func sortByPosition[T any](fset *token.FileSet, things []T, pos func(T) token.Pos) {
	sort.SliceStable(things, func(i, j int) bool {
		a, b := fset.Position(pos(things[i])), fset.Position(pos(things[j]))
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Offset < b.Offset
	})
}

// hasInvalid reports whether a struct's fields mention a type that failed
// to type-check.
func hasInvalid(t types.Type) bool {
	st, ok := t.Underlying().(*types.Struct)
	if !ok {
		return false
	}
	for i := 0; i < st.NumFields(); i++ {
		if types.TypeString(st.Field(i).Type(), nil) == "invalid type" {
			return true
		}
	}
	return false
}

func packageErrors(p *packages.Package) string {
	if len(p.Errors) == 0 {
		return "no details"
	}
	return p.Errors[0].Error()
}

// parsePos turns a go/packages error position ("file:line:col", or
// "file:line") into a token.Position.
func parsePos(s string) token.Position {
	pos := token.Position{Filename: s}
	rest, last, ok := cutLastNumber(s)
	if !ok {
		return pos
	}
	if file, line, ok := cutLastNumber(rest); ok {
		return token.Position{Filename: file, Line: line, Column: last}
	}
	return token.Position{Filename: rest, Line: last}
}

// cutLastNumber splits "prefix:N" into prefix and N.
func cutLastNumber(s string) (string, int, bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, 0, false
	}
	n, err := strconv.Atoi(s[i+1:])
	if err != nil || n <= 0 {
		return s, 0, false
	}
	return s[:i], n, true
}
