package gen

import (
	"go/ast"
	"go/token"
	"strings"
)

// directivePrefix starts every streamgen directive. Directives use the Go
// directive form: no space after the slashes.
const directivePrefix = "//streamgen:"

// directive is one parsed //streamgen:name k=v ... comment.
type directive struct {
	Name string
	Args map[string]string
	Pos  token.Pos
}

// directiveSpec says where a directive may stand and which keys it takes.
type directiveSpec struct {
	onType bool     // attaches to a type declaration
	keys   []string // allowed keys
}

// directives is the table of every directive the generator knows.
var directives = map[string]directiveSpec{
	// //streamgen:record
	//
	// Marks a struct type as a record: the generator emits binary and JSON
	// codecs and a schema for it.
	"record": {onType: true},
}

// parseDirective parses c if it is a streamgen directive.
func parseDirective(rep *reporter, c *ast.Comment) (directive, bool) {
	if !strings.HasPrefix(c.Text, directivePrefix) {
		return directive{}, false
	}
	words := strings.Fields(strings.TrimPrefix(c.Text, directivePrefix))
	d := directive{Pos: c.Slash, Args: map[string]string{}}
	if len(words) == 0 {
		rep.errorf(c.Slash, "streamgen directive without a name")
		return d, false
	}
	d.Name = words[0]
	spec, ok := directives[d.Name]
	if !ok {
		rep.errorf(c.Slash, "unknown directive //streamgen:%s (known: %s)", d.Name, knownDirectives())
		return d, false
	}
	for _, w := range words[1:] {
		k, v, _ := strings.Cut(w, "=")
		if !contains(spec.keys, k) {
			rep.errorf(c.Slash, "//streamgen:%s: unknown key %q", d.Name, k)
			return d, false
		}
		d.Args[k] = v
	}
	return d, true
}

func knownDirectives() string {
	names := make([]string, 0, len(directives))
	for n := range directives {
		names = append(names, "//streamgen:"+n)
	}
	return strings.Join(names, ", ")
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// typeDirectives returns, for each type spec of f that carries directives,
// its directives. A directive anywhere else in the file is an error.
func typeDirectives(rep *reporter, f *ast.File) map[*ast.TypeSpec][]directive {
	out := map[*ast.TypeSpec][]directive{}
	attached := map[*ast.Comment]bool{}
	collect := func(ts *ast.TypeSpec, g *ast.CommentGroup) {
		if g == nil {
			return
		}
		for _, c := range g.List {
			if d, ok := parseDirective(rep, c); ok {
				out[ts] = append(out[ts], d)
			}
			attached[c] = true
		}
	}
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.TYPE {
			continue
		}
		for _, spec := range gd.Specs {
			ts := spec.(*ast.TypeSpec)
			collect(ts, ts.Doc)
			if len(gd.Specs) == 1 || !gd.Lparen.IsValid() {
				collect(ts, gd.Doc)
			}
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, directivePrefix) && !attached[c] {
				if d, ok := parseDirective(rep, c); ok {
					rep.errorf(c.Slash, "//streamgen:%s must be in the doc comment of a type declaration", d.Name)
				}
			}
		}
	}
	return out
}
