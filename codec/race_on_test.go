//go:build race

package codec

// raceEnabled says the race detector is on: it changes what allocates
// (sync.Pool drops a share of what is put back, at random).
const raceEnabled = true
