package gen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/tools/go/packages"
)

// OutputFile is the name of the file the generator writes in each package
// directory.
const OutputFile = "streamgen_gen.go"

// load reads the packages matching patterns (relative to dir) with full
// type information. The generator's own earlier output is replaced by an
// empty file first, so that output that is stale (it names fields since
// removed), broken or missing never stops the generator from reading the
// types it needs to write it again.
func load(dir string, patterns []string) ([]*packages.Package, error) {
	if len(patterns) == 0 {
		patterns = []string{"."}
	}
	// First pass, without types: find the package directories and names.
	listCfg := &packages.Config{Mode: packages.NeedName | packages.NeedFiles, Dir: dir}
	listed, err := packages.Load(listCfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("streamgen: load %s: %w", strings.Join(patterns, " "), err)
	}
	overlay := make(map[string][]byte)
	for _, p := range listed {
		for _, d := range packageDirs(p) {
			out := filepath.Join(d, OutputFile)
			if _, err := os.Stat(out); err == nil && p.Name != "" {
				overlay[out] = []byte("package " + p.Name + "\n")
			}
		}
	}
	cfg := &packages.Config{
		Mode: packages.NeedName | packages.NeedFiles | packages.NeedTypes |
			packages.NeedTypesInfo | packages.NeedSyntax | packages.NeedImports |
			packages.NeedDeps,
		Dir:     dir,
		Overlay: overlay,
		Fset:    token.NewFileSet(),
		// Type errors elsewhere in the package (code that calls generated
		// methods not written yet) must not stop the generator; errors
		// that touch a record are reported where the record is read.
		ParseFile: func(fset *token.FileSet, filename string, src []byte) (*ast.File, error) {
			return parser.ParseFile(fset, filename, src, parser.ParseComments|parser.SkipObjectResolution)
		},
	}
	pkgs, err := packages.Load(cfg, patterns...)
	if err != nil {
		return nil, fmt.Errorf("streamgen: load %s: %w", strings.Join(patterns, " "), err)
	}
	if len(pkgs) == 0 {
		return nil, fmt.Errorf("streamgen: no packages match %s", strings.Join(patterns, " "))
	}
	return pkgs, nil
}

// packageDirs returns the directories holding a listed package's files.
func packageDirs(p *packages.Package) []string {
	seen := map[string]bool{}
	var dirs []string
	for _, f := range append(append([]string{}, p.GoFiles...), p.OtherFiles...) {
		d := filepath.Dir(f)
		if !seen[d] {
			seen[d] = true
			dirs = append(dirs, d)
		}
	}
	return dirs
}
