package typed_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// TestProcessingTimeOnTheWallClock runs a query on the real clock API in
// a bubble of virtual time: an interval trigger fires every 10 s, a
// processing-time timeout of 30 s fires in the first batch strictly after
// it with no new data, and a query polling for data (AsSoonAsPossible)
// picks up rows added while it waits. No test time passes.
func TestProcessingTimeOnTheWallClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", 0)
		r := &recorder{timeout: func(st *typed.GroupState[fixtures.Counter], _ time.Time) error {
			return st.SetTimeoutDuration(30 * time.Second)
		}}
		byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
		sink := newSink[fixtures.UserCount]()
		w := typed.WriteTo(typed.FlatMapGroupsWithState(byUser, typed.Append, typed.ProcessingTimeTimeout, r.fn), sink)
		q, err := w.Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		synctest.Wait() // the query waits for its first trigger
		m.Add(click("a", 1))
		time.Sleep(10 * time.Second) // the trigger at 10 s reads a; its timeout is 40 s
		synctest.Wait()
		if p := q.RecentProgress(); len(p) != 1 || p[0].Timestamp.Sub(start) != 10*time.Second {
			t.Fatalf("after 10 s: %d batches", len(p))
		}
		time.Sleep(30 * time.Second) // the trigger at 40 s: not strictly after the timeout
		synctest.Wait()
		if got := r.timedOut(); len(got) != 0 {
			t.Fatalf("timed out at 40 s: %v", got)
		}
		time.Sleep(10 * time.Second) // at 50 s
		synctest.Wait()
		if got := strings.Join(r.timedOut(), ","); got != "a" {
			t.Fatalf("after 50 s, timed out: %q, want a", got)
		}
		p := q.RecentProgress()
		if last := p[len(p)-1]; last.Timestamp.Sub(start) != 50*time.Second || last.NumInputRows != 0 {
			t.Fatalf("the timeout ran in batch %d at %v with %d rows, want a batch without data at 50 s", last.BatchID, last.Timestamp.Sub(start), last.NumInputRows)
		}
		if err := q.Stop(); err != nil {
			t.Fatal(err)
		}

		// Polling: rows added while the query waits are read at the
		// next poll.
		m2 := typed.NewMemoryStream[fixtures.Click]("more", 0)
		q, err = countPipeline(m2, newSink[fixtures.UserCount]()).Start(context.Background(),
			newCheckpoint().opts(runtime.PollInterval(5*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		m2.Add(click("b", 1))
		time.Sleep(4 * time.Second)
		synctest.Wait()
		if _, ok := q.LastProgress(); ok {
			t.Fatal("a batch ran before the poll")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if p, ok := q.LastProgress(); !ok || p.NumInputRows != 1 {
			t.Fatalf("after the poll: %+v", p)
		}
		if err := q.Stop(); err != nil {
			t.Fatal(err)
		}
	})
}

// slowSink takes d of the clock to write a batch.
type slowSink[T any] struct{ d time.Duration }

func (s slowSink[T]) Write(context.Context, int64, []T) error {
	time.Sleep(s.d)
	return nil
}

// TestProcessingTimeTriggersOnTime: on the wall clock, an interval
// trigger starts a batch every interval, however long the batch before
// took within it, and a batch that took longer than the interval is
// followed by the next at once, as Spark's ProcessingTimeExecutor does.
func TestProcessingTimeTriggersOnTime(t *testing.T) {
	for _, tc := range []struct {
		takes, apart time.Duration
	}{{4 * time.Second, 10 * time.Second}, {15 * time.Second, 15 * time.Second}} {
		synctest.Test(t, func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 1)
			for i := range 5 {
				m.Add(click("a", i))
			}
			q, err := typed.WriteTo(typed.FromMemory(m), typed.Sink[fixtures.Click](slowSink[fixtures.Click]{tc.takes})).
				Start(context.Background(), newCheckpoint().opts(runtime.WithTrigger(runtime.ProcessingTime(10*time.Second)))...)
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			if err := q.Stop(); err != nil {
				t.Fatal(err)
			}
			p := q.RecentProgress()
			if len(p) < 3 {
				t.Fatalf("%d batches in a minute", len(p))
			}
			for i := 1; i < len(p); i++ {
				if gap := p[i].Timestamp.Sub(p[i-1].Timestamp); gap != tc.apart {
					t.Fatalf("batches that take %v: batch %d started %v after the one before, want %v", tc.takes, p[i].BatchID, gap, tc.apart)
				}
			}
		})
	}
}
