package gen

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Error is a problem found in the user's code, at a position.
type Error struct {
	Pos token.Position
	Msg string
}

// Error formats the problem as file:line:col: message, with the file
// relative to the working directory when it is below it.
func (e *Error) Error() string {
	pos := e.Pos
	if wd, err := os.Getwd(); err == nil && pos.Filename != "" {
		if rel, err := filepath.Rel(wd, pos.Filename); err == nil && !strings.HasPrefix(rel, "..") {
			pos.Filename = rel
		}
	}
	if !pos.IsValid() {
		if pos.Filename != "" {
			return pos.Filename + ": " + e.Msg
		}
		return e.Msg
	}
	return fmt.Sprintf("%s: %s", pos, e.Msg)
}

// ErrorList is every problem found in a run, sorted by position.
type ErrorList []*Error

// Error lists the problems one per line.
func (l ErrorList) Error() string {
	lines := make([]string, len(l))
	for i, e := range l {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

func (l ErrorList) sorted() ErrorList {
	sort.SliceStable(l, func(i, j int) bool {
		a, b := l[i].Pos, l[j].Pos
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	return l
}

// reporter collects positioned errors.
type reporter struct {
	fset *token.FileSet
	errs ErrorList
}

func (r *reporter) errorf(pos token.Pos, format string, args ...any) {
	r.errs = append(r.errs, &Error{Pos: r.fset.Position(pos), Msg: fmt.Sprintf(format, args...)})
}
