package runtime

import "github.com/streamgen/streamgen/internal/errprefix"

// unprefixed returns err without "streamgen: " at the start of its
// message, for an error about to be wrapped under a message that says
// it: a sink's or a source's (this module's say it too) under the query's
// "streamgen: batch N: ...". See errprefix.Strip.
func unprefixed(err error) error { return errprefix.Strip(err) }
