package gen

import (
	"go/ast"
	"go/token"
	"slices"
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
	onType bool     // attaches to a type declaration, else to a function
	keys   []string // allowed keys
}

// directives is the table of every directive the generator knows.
var directives = map[string]directiveSpec{
	// //streamgen:record
	//
	// Marks a struct type as a record: the generator emits binary and JSON
	// codecs and a schema for it.
	"record": {onType: true},

	// //streamgen:mapGroupsWithState [timeout=none|processing|event]
	//         [watermark=DURATION] [key=Field] [eventtime=Field] [name=Binding]
	//
	// On a function
	//
	//	func(key K, rows iter.Seq[In], state *typed.GroupState[S]) (Out, error)
	//
	// emits Binding(in typed.Stream[In]) typed.Stream[Out] (by default the
	// function's name + "Stream"), which groups in by In's field tagged
	// `stream:"key"` (or key=Field) and applies the function. With
	// watermark=DURATION it first sets the watermark on In's field tagged
	// `stream:"eventtime"` (or eventtime=Field): a time.Time, or an integer
	// with its unit, `stream:"eventtime,unit=ms"` (ns, us, ms or s since
	// the Unix epoch). timeout=event needs a watermark. A binding with a
	// watermark comes with Binding+"LateRows"(sink), its option that sends
	// the rows too late for the watermark to sink. The function's rows,
	// state and output are values, and its output a record when it is a
	// struct of the package: what sinks take.
	"mapGroupsWithState": {keys: []string{"timeout", "watermark", "key", "eventtime", "name"}},

	// //streamgen:flatMapGroupsWithState [mode=append|update] and the keys
	// of mapGroupsWithState
	//
	// As mapGroupsWithState, on a function
	//
	//	func(key K, rows iter.Seq[In], state *typed.GroupState[S], emit func(Out)) error
	"flatMapGroupsWithState": {keys: []string{"mode", "timeout", "watermark", "key", "eventtime", "name"}},

	// //streamgen:processor [mode=append|update] [time=none|processing|event]
	//         [watermark=DURATION] [key=Field] [eventtime=Field] [name=Binding]
	//
	// On a type T whose pointer (or value) implements
	// typed.StatefulProcessor[K, In, Out], as read from its method
	//
	//	HandleInputRows(ctx context.Context, key K, rows iter.Seq[In], timers typed.TimerValues, emit func(Out)) error
	//
	// emits Binding(in typed.Stream[In], p *T, opts
	// ...typed.ProcessorOption) typed.Stream[Out] (by default T's name +
	// "Stream"; p is a T when T's methods have value receivers), which
	// groups in as mapGroupsWithState does and applies p with
	// typed.TransformWithState. The optional methods HandleExpiredTimer,
	// HandleInitialState and Close, when T has them, must have the
	// signatures the runtime looks for. mode= is its output mode (default
	// append, as flatMapGroupsWithState); time= its time mode (default
	// none); time=event needs a watermark.
	"processor": {onType: true, keys: []string{"mode", "time", "watermark", "key", "eventtime", "name"}},
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
	slices.Sort(names)
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

// fileDirectives returns the directives of f's type specs and functions.
// A directive anywhere else, or of the wrong sort for where it stands, is
// an error.
func fileDirectives(rep *reporter, f *ast.File) (map[*ast.TypeSpec][]directive, map[*ast.FuncDecl][]directive) {
	types := map[*ast.TypeSpec][]directive{}
	funcs := map[*ast.FuncDecl][]directive{}
	attached := map[*ast.Comment]bool{}
	collect := func(g *ast.CommentGroup, onType bool, add func(directive)) {
		if g == nil {
			return
		}
		for _, c := range g.List {
			attached[c] = true
			d, ok := parseDirective(rep, c)
			if !ok {
				continue
			}
			if directives[d.Name].onType != onType {
				where := "a function"
				if directives[d.Name].onType {
					where = "a type declaration"
				}
				rep.errorf(c.Slash, "//streamgen:%s belongs in the doc comment of %s", d.Name, where)
				continue
			}
			add(d)
		}
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			if decl.Tok != token.TYPE {
				continue
			}
			for _, spec := range decl.Specs {
				ts := spec.(*ast.TypeSpec)
				add := func(d directive) { types[ts] = append(types[ts], d) }
				collect(ts.Doc, true, add)
				if len(decl.Specs) == 1 || !decl.Lparen.IsValid() {
					collect(decl.Doc, true, add)
				}
			}
		case *ast.FuncDecl:
			collect(decl.Doc, false, func(d directive) { funcs[decl] = append(funcs[decl], d) })
		}
	}
	for _, g := range f.Comments {
		for _, c := range g.List {
			if strings.HasPrefix(c.Text, directivePrefix) && !attached[c] {
				if d, ok := parseDirective(rep, c); ok {
					where := "a function"
					if directives[d.Name].onType {
						where = "a type declaration"
					}
					rep.errorf(c.Slash, "//streamgen:%s must be in the doc comment of %s", d.Name, where)
				}
			}
		}
	}
	return types, funcs
}

// typeDirectives returns the directives of f's type specs.
func typeDirectives(rep *reporter, f *ast.File) map[*ast.TypeSpec][]directive {
	types, _ := fileDirectives(rep, f)
	return types
}
