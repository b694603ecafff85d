package bench

import (
	"testing"

	"github.com/streamgen/streamgen/bench/joinrec"
	"github.com/streamgen/streamgen/typed"
)

func TestJoinProfile(t *testing.T) {
	const rows, perBatch = 300_000, 100_000
	left, right := joinInput(rows, 1), joinInput(rows, 2)
	l := typed.NewMemoryStream[joinrec.Row]("left", perBatch)
	r := typed.NewMemoryStream[joinrec.Row]("right", perBatch)
	l.Add(left...)
	r.Add(right...)
	if err := runJoinStreamgen(l, r, t.TempDir(), &pairSink{}); err != nil {
		t.Fatal(err)
	}
}
