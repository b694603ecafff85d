package gen

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/parser"
	"go/scanner"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"
)

// OutputFile is the name of the file the generator writes in each package
// directory.
const OutputFile = "streamgen_gen.go"

// load reads the packages matching patterns (relative to dir), in one
// load however many they are. It returns every matched package; those with
// a streamgen directive in their files come with full type information,
// the others with their name and files and an empty types.Package (they
// get no output, and earlier output of theirs is removed).
//
// Only the packages that get output are type-checked from source. Their
// dependencies are read from the compiler's export data, which the go
// command builds once and keeps in its build cache, so a run costs about
// what `go vet` of the same packages costs instead of type-checking every
// dependency from source. Two kinds of dependency are type-checked from
// source instead (declarations only, without function bodies): one that
// imports, directly or not, a package that gets output, so that both see
// the same types; and one whose export data cannot be built because it
// does not compile (its own generated file may be stale).
//
// The generator's own earlier output in a matched package is left out, so
// that output that is stale (it names fields since removed), broken or
// missing never stops the generator from reading the types it needs to
// write it again. Function bodies are not type-checked: the generator
// reads declarations only, and bodies are where code that calls the
// generated functions not written yet usually is.
//
// The type checks run in the background: each returned package's Wait
// gives it once its own check is done, so that the caller can work on one
// package while others are still checked; the caller must call Wait on
// every package it is given.
func load(dir string, patterns []string) ([]*loaded, error) {
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	what := strings.Join(patterns, " ")
	ld := &loader{dir: dir, fset: token.NewFileSet(), byPath: map[string]*loadPkg{}}
	listed, err := ld.goList(append([]string{"--"}, patterns...), listFields)
	if err != nil {
		return nil, fmt.Errorf("streamgen: load %s: %w", what, err)
	}
	var roots []*loadPkg
	for _, lp := range listed {
		if ld.byPath[lp.ImportPath] != nil {
			continue
		}
		lp.root = true
		lp.done = make(chan struct{})
		ld.byPath[lp.ImportPath] = lp
		roots = append(roots, lp)
	}
	if len(roots) == 0 {
		return nil, fmt.Errorf("streamgen: no packages match %s", what)
	}
	if err := ld.findDirectives(roots); err != nil {
		return nil, err
	}
	if err := ld.typeCheck(roots); err != nil {
		return nil, fmt.Errorf("streamgen: load %s: %w", what, err)
	}
	out := make([]*loaded, len(roots))
	for i, r := range roots {
		out[i] = &loaded{lp: r, fset: ld.fset}
	}
	return out, nil
}

// loaded is a matched package whose type check may still be running.
type loaded struct {
	lp   *loadPkg
	fset *token.FileSet
}

// Wait returns the package once it is type-checked.
func (l *loaded) Wait() *packages.Package {
	if l.lp.generate {
		<-l.lp.done
	}
	return l.lp.result(l.fset)
}

// listFields are the fields of go list's output the loader reads.
const listFields = "ImportPath,Name,Dir,GoFiles,CgoFiles,Imports,ImportMap,Module,Error"

// loadPkg is one package as go list describes it, and what the loader
// made of it.
type loadPkg struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	CgoFiles   []string
	Imports    []string
	ImportMap  map[string]string
	Export     string
	Module     *struct{ GoVersion string }
	Error      *struct{ Pos, Err string }

	root     bool // matched by the patterns
	generate bool // a matched package with directives: it gets output
	source   bool // type-checked from source, else read from export data
	parsed   map[string]*ast.File
	files    []*ast.File // the parsed files, in the order go list gives them
	errs     []packages.Error
	types    *types.Package
	info     *types.Info
	done     chan struct{} // closed when types is set (source packages)
}

// goFiles are the package's Go files as absolute paths.
func (lp *loadPkg) goFiles() []string {
	var fs []string
	for _, f := range append(append([]string{}, lp.GoFiles...), lp.CgoFiles...) {
		if !filepath.IsAbs(f) {
			f = filepath.Join(lp.Dir, f)
		}
		fs = append(fs, f)
	}
	return fs
}

func (lp *loadPkg) hasFiles() bool { return len(lp.GoFiles)+len(lp.CgoFiles) > 0 }

// result is the package as the rest of the generator reads it.
func (lp *loadPkg) result(fset *token.FileSet) *packages.Package {
	p := &packages.Package{
		ID:              lp.ImportPath,
		Name:            lp.Name,
		PkgPath:         lp.ImportPath,
		GoFiles:         lp.goFiles(),
		CompiledGoFiles: lp.goFiles(),
		Fset:            fset,
		Errors:          lp.errs,
	}
	switch {
	case lp.generate:
		p.Syntax, p.Types, p.TypesInfo = lp.files, lp.types, lp.info
		p.IllTyped = len(lp.errs) > 0
	case lp.Error == nil || lp.hasFiles():
		// Nothing to generate: an empty package, so that earlier output,
		// if any, is removed. A package that could not be listed keeps
		// Types nil, and its errors are reported.
		p.Types = types.NewPackage(lp.ImportPath, lp.Name)
		p.TypesInfo = &types.Info{Defs: map[*ast.Ident]types.Object{}}
	}
	return p
}

type loader struct {
	dir    string
	fset   *token.FileSet
	byPath map[string]*loadPkg

	// universes are the sets of types the source packages are checked
	// in: one per group of source packages that import each other.
	universes map[*loadPkg]*universe
}

// universe is the packages read from export data for a group of source
// packages that import each other, by path, as gcexportdata wants them.
// Groups that do not import each other never share a type, so each reads
// its own, and one does not wait for another's reading.
type universe struct {
	mu      sync.Mutex // gcexportdata fills one map; it is not safe for concurrent use
	fset    *token.FileSet
	imports map[string]*types.Package
}

// goList runs go list -e -json=fields with args and decodes its output.
func (ld *loader) goList(args []string, fields string) ([]*loadPkg, error) {
	full := append([]string{"list", "-e", "-json=" + fields, "-pgo=off", "-buildvcs=false"}, args...)
	cmd := exec.Command("go", full...)
	cmd.Dir = ld.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return nil, fmt.Errorf("go list: %s", msg)
	}
	var out []*loadPkg
	dec := json.NewDecoder(&stdout)
	for {
		lp := new(loadPkg)
		if err := dec.Decode(lp); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: reading its output: %w", err)
		}
		out = append(out, lp)
	}
	return out, nil
}

// parallel runs f on each element with at most GOMAXPROCS at once, and
// returns the first error.
func parallel[T any](items []T, f func(T) error) error {
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, it := range items {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(it); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// findDirectives marks the matched packages that get output: those with a
// comment that reads //streamgen:..., or // streamgen:... with spaces (a
// superset of what directives.go reads, so that it can report a directive
// it does not accept). It parses the files that have one.
func (ld *loader) findDirectives(roots []*loadPkg) error {
	err := parallel(roots, ld.scanRoot)
	for _, r := range roots {
		if r.Error != nil {
			r.errs = append([]packages.Error{listError(r)}, r.errs...)
		}
	}
	return err
}

// directiveMark is what every directive, and every near miss the
// generator reports, holds after // and optional spaces.
var directiveMark = []byte("streamgen:")

// mayHoldDirective reports whether src has //streamgen: or // streamgen:
// (spaces between) anywhere: a cheap test whose false positives (in
// strings, or after another //) parsing weeds out.
func mayHoldDirective(src []byte) bool {
	for i := 0; ; {
		j := bytes.Index(src[i:], directiveMark)
		if j < 0 {
			return false
		}
		k := i + j
		for k > 0 && src[k-1] == ' ' {
			k--
		}
		if k >= 2 && src[k-1] == '/' && src[k-2] == '/' {
			return true
		}
		i += j + len(directiveMark)
	}
}

// isDirectiveComment reports whether a comment reads //streamgen:... or
// // streamgen:... .
func isDirectiveComment(text string) bool {
	rest, ok := strings.CutPrefix(text, "//")
	return ok && bytes.HasPrefix([]byte(strings.TrimLeft(rest, " ")), directiveMark)
}

// scanRoot reads a matched package's files and sets generate when one of
// them has a directive comment, keeping the files it parsed.
func (ld *loader) scanRoot(r *loadPkg) error {
	for _, f := range r.goFiles() {
		if filepath.Base(f) == OutputFile {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("streamgen: %w", err)
		}
		if !mayHoldDirective(src) {
			continue
		}
		file, err := parser.ParseFile(ld.fset, f, src, parser.ParseComments|parser.SkipObjectResolution)
		if file == nil {
			continue
		}
		if r.parsed == nil {
			r.parsed = map[string]*ast.File{}
		}
		r.parsed[f] = file
		r.errs = append(r.errs, parseErrors(err)...)
		for _, cg := range file.Comments {
			for _, c := range cg.List {
				r.generate = r.generate || isDirectiveComment(c.Text)
			}
		}
	}
	if !r.generate {
		r.parsed, r.errs = nil, nil
	}
	r.source = r.generate
	return nil
}

// typeCheck type-checks the matched packages that get output, and the
// dependencies that must be read from source, reading the others from
// export data.
func (ld *loader) typeCheck(roots []*loadPkg) error {
	var gen []*loadPkg
	for _, r := range roots {
		if r.generate {
			gen = append(gen, r)
		}
	}
	if len(gen) == 0 {
		return nil
	}
	// One go list call gives the export data of every dependency of the
	// packages that get output, and the import graph below them; their
	// files are parsed meanwhile.
	want := map[string]bool{}
	for _, g := range gen {
		for _, imp := range g.Imports {
			if dep := ld.byPath[imp]; (dep == nil || !dep.generate) && imp != "unsafe" && imp != "C" {
				want[imp] = true
			}
		}
	}
	var (
		listed  []*loadPkg
		listErr error
		done    = make(chan struct{})
	)
	go func() {
		defer close(done)
		if len(want) > 0 {
			listed, listErr = ld.goList(append([]string{"-deps", "-export", "--"}, slices.Sorted(maps.Keys(want))...), listFields+",Export")
		}
	}()
	parseErr := parallel(gen, ld.parse)
	<-done
	if listErr != nil {
		return listErr
	}
	if parseErr != nil {
		return parseErr
	}
	for _, lp := range listed {
		if known := ld.byPath[lp.ImportPath]; known != nil {
			known.Export = lp.Export
			continue
		}
		lp.done = make(chan struct{})
		ld.byPath[lp.ImportPath] = lp
	}
	// A dependency whose export data could not be built (it does not
	// compile), or that imports, directly or not, a package checked from
	// source, is checked from source too.
	memo := map[*loadPkg]bool{}
	var needsSource func(lp *loadPkg) bool
	needsSource = func(lp *loadPkg) bool {
		if v, ok := memo[lp]; ok {
			return v
		}
		lp.source = lp.source || lp.Export == "" && lp.hasFiles() && lp.ImportPath != "unsafe"
		memo[lp] = lp.source // an import cycle is go list's to report
		for _, imp := range lp.Imports {
			if dep := ld.byPath[imp]; dep != nil && needsSource(dep) {
				lp.source = true
			}
		}
		memo[lp] = lp.source
		return lp.source
	}
	for _, g := range gen {
		needsSource(g)
	}
	src := ld.sourcePackages(gen)
	if err := parallel(src, ld.parse); err != nil {
		return err
	}
	ld.checkAll(src)
	return nil
}

// sourcePackages lists the packages checked from source that the
// generated packages reach, dependencies first.
func (ld *loader) sourcePackages(gen []*loadPkg) []*loadPkg {
	seen := map[*loadPkg]bool{}
	var order []*loadPkg
	var visit func(lp *loadPkg)
	visit = func(lp *loadPkg) {
		if seen[lp] || !lp.source {
			return
		}
		seen[lp] = true
		for _, imp := range lp.Imports {
			if dep := ld.byPath[imp]; dep != nil {
				visit(dep)
			}
		}
		order = append(order, lp)
	}
	for _, g := range gen {
		visit(g)
	}
	return order
}

// parse parses the files of a source package not parsed yet. The files of
// a package that gets output keep their comments, for the directives. The
// earlier output of a matched package is left out (that of a dependency
// is read, as the compiler reads it).
func (ld *loader) parse(lp *loadPkg) error {
	if lp.files != nil {
		return nil
	}
	mode := parser.SkipObjectResolution
	if lp.generate {
		mode |= parser.ParseComments
	}
	for _, f := range lp.goFiles() {
		if lp.root && filepath.Base(f) == OutputFile {
			continue
		}
		file := lp.parsed[f]
		if file == nil {
			var err error
			file, err = parser.ParseFile(ld.fset, f, nil, mode)
			if file == nil && err != nil {
				var list scanner.ErrorList
				if !errors.As(err, &list) {
					return fmt.Errorf("streamgen: %w", err)
				}
			}
			lp.errs = append(lp.errs, parseErrors(err)...)
		}
		if file != nil {
			lp.files = append(lp.files, file)
		}
	}
	if lp.files == nil {
		lp.files = []*ast.File{}
	}
	return nil
}

// checkAll starts type-checking the source packages, each once its source
// imports are done, reading export data as the checks ask for it; each
// package's done is closed when its check is. Every check finishes before
// the packages that import it, so the last of the matched packages to be
// done is the last check.
func (ld *loader) checkAll(src []*loadPkg) {
	order := make(map[*loadPkg]int, len(src))
	for i, lp := range src {
		order[lp] = i
	}
	ld.groupUniverses(src)
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, lp := range src {
		go func() {
			defer close(lp.done)
			for _, imp := range lp.Imports {
				// Wait only for packages earlier in the order: a later
				// one would be an import cycle, which fails the import.
				if dep := ld.byPath[imp]; dep != nil && dep.source && order[dep] < order[lp] {
					<-dep.done
				}
			}
			sem <- struct{}{}
			defer func() { <-sem }()
			ld.check(lp, order)
		}()
	}
}

// groupUniverses gives each group of source packages that import each
// other one universe.
func (ld *loader) groupUniverses(src []*loadPkg) {
	parent := map[*loadPkg]*loadPkg{}
	var find func(lp *loadPkg) *loadPkg
	find = func(lp *loadPkg) *loadPkg {
		if p, ok := parent[lp]; ok && p != lp {
			root := find(p)
			parent[lp] = root
			return root
		}
		return lp
	}
	for _, lp := range src {
		for _, imp := range lp.Imports {
			if dep := ld.byPath[imp]; dep != nil && dep.source {
				parent[find(dep)] = find(lp)
			}
		}
	}
	ld.universes = map[*loadPkg]*universe{}
	byRoot := map[*loadPkg]*universe{}
	for _, lp := range src {
		root := find(lp)
		if byRoot[root] == nil {
			byRoot[root] = &universe{fset: ld.fset, imports: map[string]*types.Package{}}
		}
		ld.universes[lp] = byRoot[root]
	}
}

// check type-checks a source package whose source imports are done.
// Errors are kept with the package: a package is generated even if code
// that does not touch its records fails to check.
func (ld *loader) check(lp *loadPkg, order map[*loadPkg]int) {
	conf := types.Config{
		Importer:         importerFunc(func(path string) (*types.Package, error) { return ld.importFor(lp, path, order) }),
		IgnoreFuncBodies: true,
		FakeImportC:      len(lp.CgoFiles) > 0,
		Sizes:            types.SizesFor("gc", build.Default.GOARCH),
		Error: func(err error) {
			var terr types.Error
			if errors.As(err, &terr) {
				lp.errs = append(lp.errs, packages.Error{Pos: terr.Fset.Position(terr.Pos).String(), Msg: terr.Msg, Kind: packages.TypeError})
				return
			}
			lp.errs = append(lp.errs, packages.Error{Pos: "-", Msg: err.Error(), Kind: packages.UnknownError})
		},
	}
	if lp.Module != nil && lp.Module.GoVersion != "" {
		conf.GoVersion = "go" + lp.Module.GoVersion
	}
	if lp.generate {
		lp.info = &types.Info{
			Types:      map[ast.Expr]types.TypeAndValue{},
			Defs:       map[*ast.Ident]types.Object{},
			Uses:       map[*ast.Ident]types.Object{},
			Implicits:  map[ast.Node]types.Object{},
			Instances:  map[*ast.Ident]types.Instance{},
			Selections: map[*ast.SelectorExpr]*types.Selection{},
			Scopes:     map[ast.Node]*types.Scope{},
		}
	}
	pkg := types.NewPackage(lp.ImportPath, lp.Name)
	_ = types.NewChecker(&conf, ld.fset, pkg, lp.info).Files(lp.files)
	lp.types = pkg
}

// importFor resolves an import of the source package from: a source
// package already checked, or a package read from its export data.
func (ld *loader) importFor(from *loadPkg, path string, order map[*loadPkg]int) (*types.Package, error) {
	if path == "unsafe" {
		return types.Unsafe, nil
	}
	if mapped, ok := from.ImportMap[path]; ok {
		path = mapped
	}
	dep := ld.byPath[path]
	switch {
	case dep == nil:
		return nil, fmt.Errorf("no metadata for %s", path)
	case dep.source:
		if order[dep] >= order[from] {
			return nil, fmt.Errorf("import cycle through %s", path)
		}
		return dep.types, nil
	case dep.Export != "":
		return ld.universes[from].readExport(dep)
	case dep.Error != nil:
		return nil, errors.New(strings.TrimSpace(dep.Error.Err))
	}
	return nil, fmt.Errorf("no export data for %s", path)
}

// readExport returns a package's types, read from its export data on first
// use.
func (u *universe) readExport(lp *loadPkg) (*types.Package, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if p := u.imports[lp.ImportPath]; p != nil && p.Complete() {
		return p, nil
	}
	f, err := os.Open(lp.Export)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := gcexportdata.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("reading export data of %s: %w", lp.ImportPath, err)
	}
	p, err := gcexportdata.Read(r, u.fset, u.imports, lp.ImportPath)
	if err != nil {
		return nil, fmt.Errorf("reading export data of %s: %w", lp.ImportPath, err)
	}
	return p, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

// listError is the error go list reported for a package, as go/packages
// gives it.
func listError(lp *loadPkg) packages.Error {
	return packages.Error{Pos: lp.Error.Pos, Msg: strings.TrimSpace(lp.Error.Err), Kind: packages.ListError}
}

// parseErrors turns a parser error into package errors.
func parseErrors(err error) []packages.Error {
	if err == nil {
		return nil
	}
	var list scanner.ErrorList
	if errors.As(err, &list) {
		out := make([]packages.Error, len(list))
		for i, e := range list {
			out[i] = packages.Error{Pos: e.Pos.String(), Msg: e.Msg, Kind: packages.ParseError}
		}
		return out
	}
	return []packages.Error{{Pos: "-", Msg: err.Error(), Kind: packages.ParseError}}
}
