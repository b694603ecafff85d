package bench

import (
	"os"
	"testing"
	"time"
)

func TestScratchHand(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	in := uniformInput(1_000_000, 2, 1)
	h, err := openHand(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sink := &countSink{}
	for start, end := range batches(len(in), 100_000) {
		st := time.Now()
		if err := h.batch(in[start:end], end, sink); err != nil {
			t.Fatal(err)
		}
		m := h.db.Metrics()
		t.Logf("batch end=%d %v L0files=%d sublevels=%d readamp=%d cache=%d/%d hits=%d miss=%d", end, time.Since(st), m.Levels[0].TablesCount, m.Levels[0].Sublevels, m.ReadAmp(), m.BlockCache.Size, m.BlockCache.Count, m.BlockCache.Hits, m.BlockCache.Misses)
	}
	t.Log(h.db.Metrics().String())
	h.db.Close()
}
