package codec

import (
	"encoding/json"
	"strings"
	"sync"
	"testing"
)

// TestJSONSize: the buffer follows the sizes observed, up when a value
// does not fit and down when one uses less than half, and stays bounded.
func TestJSONSize(t *testing.T) {
	var s JSONSize
	if got := cap(s.Buffer()); got < jsonSizeFirst {
		t.Fatalf("first buffer: cap %d, want at least %d", got, jsonSizeFirst)
	}
	steps := []struct {
		observe        int
		minCap, maxCap int
	}{
		{1000, 1000, 1200},            // grows to fit
		{900, 1000, 1200},             // fits: unchanged
		{100, 100, 200},               // under half: shrinks
		{1 << 30, 1, jsonBufMax + 64}, // huge: bounded
		{50, 50, 100},
	}
	if !s.Small() {
		t.Fatalf("first estimate: not Small")
	}
	for _, st := range steps {
		s.Observe(st.observe)
		b := s.Buffer()
		if want := cap(b) <= JSONStackSize; s.Small() != want {
			t.Errorf("after Observe(%d): Small() = %v with an estimate of %d bytes", st.observe, s.Small(), cap(b))
		}
		if len(b) != 0 || cap(b) < st.minCap || cap(b) > st.maxCap {
			t.Errorf("after Observe(%d): len %d cap %d, want 0 and cap in [%d, %d]", st.observe, len(b), cap(b), st.minCap, st.maxCap)
		}
	}
}

// TestMarshalJSONSizes: MarshalJSON (as generated) gives encoding/json's
// bytes whether the estimate is too small, right or too large, on the
// stack buffer's path and the other, also from many goroutines at once;
// and every result is its own memory: results kept from earlier calls
// are unchanged by later ones.
func TestMarshalJSONSizes(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var kept, keptWant [][]byte
			defer func() {
				for i := range kept {
					if string(kept[i]) != string(keptWant[i]) {
						t.Errorf("a result kept from an earlier call changed: %.40q, want %.40q", kept[i], keptWant[i])
						return
					}
				}
			}()
			for i := range 200 {
				e := jbSample()
				e.Comment = strings.Repeat("x", (i*37+g*101)%3000)
				e.Tags = e.Tags[:i%len(e.Tags)]
				plain := jbEventPlain(e)
				want, err := json.Marshal(&plain)
				if err != nil {
					t.Error(err)
					return
				}
				got, err := e.MarshalJSON()
				if err != nil || string(got) != string(want) {
					t.Errorf("MarshalJSON differs from encoding/json (%d bytes): %v", len(want), err)
					return
				}
				kept, keptWant = append(kept, got), append(keptWant, want)
			}
		}()
	}
	wg.Wait()
}
