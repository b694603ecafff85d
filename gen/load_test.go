package gen_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/streamgen/streamgen/gen"
)

// The packages of TestDependencies: app's record holds dep's record, app
// imports mid (no records), which imports dep. app's code and dep's code
// call their generated methods, which do not exist while the output is
// missing.
var dependencyPackages = map[string]string{
	"dep/dep.go": `package dep

// Point is a record of another package.
//
//streamgen:record
type Point struct {
	X, Y int64
}

var _ = (*Point).MarshalJSON
`,
	"mid/mid.go": `package mid

import "github.com/streamgen/streamgen/gen/%s/dep"

// Origin is not a record.
type Origin struct{ At dep.Point }

// Zero calls dep's generated code.
func Zero() ([]byte, error) { return (&dep.Point{}).MarshalJSON() }
`,
	"app/app.go": `package app

import (
	"github.com/streamgen/streamgen/gen/%s/dep"
	"github.com/streamgen/streamgen/gen/%s/mid"
)

// Trip is a record with a field of another package's record type.
//
//streamgen:record
type Trip struct {
	From dep.Point
	To   *dep.Point
	Via  []dep.Point
	Base mid.Origin
}

func encode(t *Trip) ([]byte, error) { return t.MarshalJSON() }
`,
}

// writeDependencies writes dependencyPackages into a new directory of this
// module and returns it.
func writeDependencies(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("testdata", "scratch-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	base := filepath.ToSlash(dir)
	for name, src := range dependencyPackages {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		src = strings.ReplaceAll(src, "%s", base)
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func outputs(t *testing.T, res []gen.Result) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, r := range res {
		if r.Content != nil {
			out[filepath.Base(filepath.Dir(r.Path))] = r.Content
		}
	}
	return out
}

// TestDependencies: a package's output does not depend on whether the
// output of the packages it imports is current, stale or missing, nor on
// whether they are generated in the same run; packages in one run are
// loaded once.
func TestDependencies(t *testing.T) {
	dir := writeDependencies(t)
	all := "./" + filepath.ToSlash(dir) + "/..."
	app, dep := "./"+filepath.ToSlash(dir)+"/app", "./"+filepath.ToSlash(dir)+"/dep"
	run := func(patterns ...string) map[string][]byte {
		t.Helper()
		res, err := gen.Run(gen.Config{Patterns: patterns})
		if err != nil {
			t.Fatalf("%v: %v", patterns, err)
		}
		return outputs(t, res)
	}

	// Reference: each package alone, dep first, so that app is
	// generated against a dep whose output is current.
	want := map[string][]byte{}
	want["dep"] = run(dep)["dep"]
	want["app"] = run(app)["app"]
	if want["dep"] == nil || want["app"] == nil {
		t.Fatalf("no output: %q", want)
	}
	if !bytes.Contains(want["app"], []byte("dep.Point")) {
		t.Fatalf("app's output does not use dep.Point:\n%s", want["app"])
	}
	// dep.Point is known as a record of another package (its directive is
	// read from the file its export data names), so app calls its methods.
	if !bytes.Contains(want["app"], []byte(".ReadJSON(")) {
		t.Fatalf("app's output does not decode dep.Point with its ReadJSON:\n%s", want["app"])
	}

	depOut := filepath.Join(dir, "dep", gen.OutputFile)
	appOut := filepath.Join(dir, "app", gen.OutputFile)
	stale := bytes.ReplaceAll(want["dep"], []byte("v.X"), []byte("v.Gone"))
	if bytes.Equal(stale, want["dep"]) {
		t.Fatal("the stale output is not stale")
	}
	cases := []struct {
		name     string
		dep, app []byte // output on disk before the run; nil: none
		patterns []string
	}{
		{"app alone, dep stale", stale, nil, []string{app}},
		{"app alone, dep missing", nil, nil, []string{app}},
		{"both, dep stale", stale, nil, []string{app, dep}},
		{"all, both missing", nil, nil, []string{all}},
		{"all, both stale", stale, append([]byte{}, want["app"][:len(want["app"])/2]...), []string{all}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for path, content := range map[string][]byte{depOut: c.dep, appOut: c.app} {
				os.Remove(path)
				if content != nil {
					os.WriteFile(path, content, 0o644)
				}
			}
			got := run(c.patterns...)
			for pkg, w := range want {
				if g, ok := got[pkg]; ok && !bytes.Equal(g, w) {
					t.Errorf("%s's output differs from the reference at byte %d", pkg, firstDiff(g, w))
				}
			}
			if _, ok := got["app"]; !ok {
				t.Errorf("no output for app")
			}
			if disk, _ := os.ReadFile(appOut); !bytes.Equal(disk, want["app"]) {
				t.Errorf("app's file differs from the reference")
			}
		})
	}
}

// TestPatternErrors: a pattern that names no package is an error that
// says why, not a silent success.
func TestPatternErrors(t *testing.T) {
	for _, pattern := range []string{"./testdata/no-such-dir", "./testdata/no-such-dir/..."} {
		_, err := gen.Run(gen.Config{Patterns: []string{pattern}, DryRun: true})
		if err == nil || !strings.Contains(err.Error(), "no-such-dir") {
			t.Errorf("%s: err = %v, want one naming the directory", pattern, err)
		}
	}
}

// TestSyntaxErrorKeepsOutput: a syntax error in a package with records is
// reported, and its output is left alone rather than removed because the
// records cannot be read.
func TestSyntaxErrorKeepsOutput(t *testing.T) {
	golden, err := os.ReadFile("testdata/golden/basic/" + gen.OutputFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := scratch(t, "testdata/golden/basic")
	out := filepath.Join(dir, gen.OutputFile)
	os.WriteFile(out, golden, 0o644)
	src := filepath.Join(dir, "basic.go")
	b, _ := os.ReadFile(src)
	os.WriteFile(src, bytes.Replace(b, []byte("type Reading struct {"), []byte("type Reading struct {{"), 1), 0o644)
	_, err = gen.Run(gen.Config{Patterns: []string{"./" + dir}})
	if err == nil || !strings.Contains(err.Error(), "basic.go:8:") {
		t.Fatalf("err = %v, want the syntax error at basic.go:8", err)
	}
	if disk, _ := os.ReadFile(out); !bytes.Equal(disk, golden) {
		t.Fatal("the output was changed or removed")
	}
}
