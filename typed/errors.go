package typed

import "github.com/streamgen/streamgen/internal/errprefix"

// unprefixed returns err without "streamgen: " at the start of its
// message, for an error about to be wrapped under another message that
// says it (here, or in the runtime, which wraps what typed's operators,
// sinks and stages return). Every error this package wraps goes through
// it. See errprefix.Strip.
func unprefixed(err error) error { return errprefix.Strip(err) }
