package gen

import (
	"go/parser"
	"go/token"
	"testing"
)

// TestDirectiveScan: the cheap byte test that decides which packages are
// type-checked lets through every file whose comments the directive
// reader acts on (and parsing then decides), so no package with a
// directive is skipped.
func TestDirectiveScan(t *testing.T) {
	cases := []struct {
		src       string
		directive bool // a comment that reads //streamgen: or // streamgen:
	}{
		{"package p\n\n//streamgen:record\ntype T struct{}\n", true},
		{"package p\n\n// streamgen:record\ntype T struct{}\n", true},
		{"package p\n\ntype T struct{} //streamgen:record\n", true},
		{"package p\n\n//streamgen:\nfunc f() {}\n", true},
		{"package p\n\n// The output says streamgen: nothing.\ntype T struct{}\n", false},
		{"package p\n\n// // streamgen:record, in a doc comment.\ntype T struct{}\n", false},
		{"package p\n\nconst prefix = \"//streamgen:\"\n", false},
		{"package p\n\n/* //streamgen:record */\ntype T struct{}\n", false},
		{"package p\n\n//go:generate streamgen\ntype T struct{}\n", false},
	}
	for _, c := range cases {
		f, err := parser.ParseFile(token.NewFileSet(), "p.go", c.src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		got := false
		for _, cg := range f.Comments {
			for _, cm := range cg.List {
				got = got || isDirectiveComment(cm.Text)
			}
		}
		if got != c.directive {
			t.Errorf("%q: directive comment = %v, want %v", c.src, got, c.directive)
		}
		if c.directive && !mayHoldDirective([]byte(c.src)) {
			t.Errorf("%q: the byte test skips a file with a directive", c.src)
		}
	}
}
