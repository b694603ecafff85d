package typed

import "strings"

// errPrefix starts the messages of this module's errors: its sentinels
// (ErrGroupState, runtime.ErrIncompatibleCheckpoint, ...) and the errors
// its functions return.
const errPrefix = "streamgen: "

// unprefixed returns err without errPrefix at the start of its message,
// for an error about to be wrapped under another message that says it
// (here, or in the runtime, which wraps what typed's operators, sinks and
// stages return). errors.Is and errors.As see err as before, and no
// message says "streamgen: " twice. Every error this package wraps goes
// through it.
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
