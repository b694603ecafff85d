package bench

import (
	"os"
	"testing"
	"time"

	"github.com/streamgen/streamgen/bench/countrec"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

type progLog struct {
	t   *testing.T
	sum map[string]int64
}

func (p *progLog) OnQueryProgress(q runtime.QueryProgress) {
	for k, v := range q.DurationMs {
		p.sum[k] += v
	}
}

func TestScratchSG(t *testing.T) {
	if os.Getenv("SCRATCH") == "" {
		t.Skip()
	}
	in := uniformInput(10_000, 100, 1)
	for i := 0; i < 2; i++ {
		m := typed.NewMemoryStream[countrec.Event]("events", 100_000)
		m.Add(in...)
		pl := &progLog{t: t, sum: map[string]int64{}}
		st := time.Now()
		if err := runStreamgen(m, t.TempDir(), &countSink{}, runtime.Listener(pl)); err != nil {
			t.Fatal(err)
		}
		t.Logf("streamgen %v %v", time.Since(st), pl.sum)
		st = time.Now()
		if err := runHandwritten(in, 100_000, t.TempDir(), &countSink{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("hand %v", time.Since(st))
	}
}
