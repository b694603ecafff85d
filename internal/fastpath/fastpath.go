// Package fastpath switches off the fast path of generated binary
// decoders, so that tests can check that it decodes every input as the
// Decoder's methods alone do.
package fastpath

// Off, when set, makes every fast path read nothing. Only tests set it,
// and only while no other goroutine decodes.
var Off bool
