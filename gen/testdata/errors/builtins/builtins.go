// Package builtins declares functions named like predeclared ones: those
// the generated code calls are refused, the others are not.
package builtins

//streamgen:record
type Event struct {
	Name string
	Tags []string
}

// append hides the builtin, which generated code calls.
func append(s []string, v string) []string { return s }

// len hides the builtin, which generated code calls.
func len(s string) int { return 0 }

// min hides the builtin, which generated code does not call.
func min(a, b int) int { return a }
