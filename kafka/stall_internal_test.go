package kafka

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestStallContextEndsOnlyAfterASilence: the context a write into the
// transaction runs under (ProduceTimeout) ends once the timeout passes
// without a touch (an acknowledgement), however long the write has
// gone on; stop ends it at once.
func TestStallContextEndsOnlyAfterASilence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const timeout = time.Second
		ctx, touch, stop := stallContext(context.Background(), timeout)
		defer stop()
		// Ten acknowledgements, each just inside the timeout: the write
		// goes on for nine times the timeout.
		for i := range 10 {
			time.Sleep(timeout - time.Millisecond)
			synctest.Wait()
			if err := ctx.Err(); err != nil {
				t.Fatalf("after %d acknowledgements %v apart: %v", i, timeout-time.Millisecond, err)
			}
			touch()
		}
		time.Sleep(timeout)
		synctest.Wait()
		if ctx.Err() == nil {
			t.Fatalf("the context did not end after %v without an acknowledgement", timeout)
		}

		ctx, _, stop = stallContext(context.Background(), timeout)
		stop()
		if ctx.Err() == nil {
			t.Fatal("stop left the context running")
		}
	})
}
