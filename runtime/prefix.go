package runtime

import "strings"

// errPrefix starts the messages of this module's errors.
const errPrefix = "streamgen: "

// unprefixed returns err without errPrefix at the start of its message,
// for an error about to be wrapped under a message that says it: a
// sink's or a source's (this module's say it too) under the query's
// "streamgen: batch N: ...". errors.Is and errors.As see err as before,
// and no message says "streamgen: " twice.
func unprefixed(err error) error {
	if err == nil || !strings.HasPrefix(err.Error(), errPrefix) {
		return err
	}
	return prefixless{err}
}

// prefixless is an error whose message is its wrapped error's without
// errPrefix.
type prefixless struct{ err error }

func (p prefixless) Error() string { return strings.TrimPrefix(p.err.Error(), errPrefix) }
func (p prefixless) Unwrap() error { return p.err }
