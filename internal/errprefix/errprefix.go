// Package errprefix keeps this module's error messages saying
// "streamgen: " once: the packages that wrap each other's errors strip
// the prefix from the error they wrap (Strip).
package errprefix

import "strings"

// Prefix starts the messages of this module's errors: its sentinels and
// the errors its functions return.
const Prefix = "streamgen: "

// Strip returns err without Prefix at the start of its message, for an
// error about to be wrapped under another message that says it.
// errors.Is and errors.As see err as before, and no message says
// "streamgen: " twice. Safe for concurrent use.
func Strip(err error) error {
	if err == nil || !strings.HasPrefix(err.Error(), Prefix) {
		return err
	}
	return prefixless{err}
}

// prefixless is an error whose message is its wrapped error's without
// Prefix.
type prefixless struct{ err error }

func (p prefixless) Error() string { return strings.TrimPrefix(p.err.Error(), Prefix) }
func (p prefixless) Unwrap() error { return p.err }
