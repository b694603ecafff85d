package typed_test

import (
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/streamgen/streamgen/generated/fixtures"
	"github.com/streamgen/streamgen/runtime"
	"github.com/streamgen/streamgen/typed"
)

// clicks makes a deterministic input: users clicking at increasing times.
func clicks(n int, seed uint64) []fixtures.Click {
	r := rand.New(rand.NewPCG(seed, seed))
	users := []string{"ann", "bob", "cy", "dee", "eve"}
	base := time.Unix(1_700_000_000, 0).UTC()
	out := make([]fixtures.Click, n)
	for i := range out {
		out[i] = fixtures.Click{User: users[r.IntN(len(users))], Time: base.Add(time.Duration(i) * time.Second), Page: fmt.Sprint("p", r.IntN(4))}
	}
	return out
}

// countClicks is the stateful function under test: count per user.
func countClicks(user string, rows iter.Seq[fixtures.Click], state *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
	c, _ := state.Get()
	for r := range rows {
		if c.Count == 0 {
			c.First = r.Time
		}
		c.Count++
		c.Last = r.Time
	}
	state.Update(c)
	return fixtures.UserCount{User: user, Count: c.Count, First: c.First, Last: c.Last}, nil
}

// expectedCounts is the independent answer: a plain loop.
func expectedCounts(in []fixtures.Click) map[string]fixtures.UserCount {
	out := map[string]fixtures.UserCount{}
	for _, c := range in {
		u := out[c.User]
		if u.Count == 0 {
			u.User, u.First = c.User, c.Time
		}
		u.Count++
		u.Last = c.Time
		out[c.User] = u
	}
	return out
}

// latest keeps the last row per user, as an Update-mode sink's table.
func latest(rows []fixtures.UserCount) map[string]fixtures.UserCount {
	out := map[string]fixtures.UserCount{}
	for _, r := range rows {
		out[r.User] = r
	}
	return out
}

func sameCounts(t *testing.T, got, want map[string]fixtures.UserCount) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d users, want %d: %v", len(got), len(want), got)
	}
	for u, w := range want {
		g := got[u]
		if g.Count != w.Count || !g.First.Equal(w.First) || !g.Last.Equal(w.Last) {
			t.Fatalf("user %s: got %+v, want %+v", u, g, w)
		}
	}
}

func countPipeline(m *typed.MemoryStream[fixtures.Click], sink typed.Sink[fixtures.UserCount]) *typed.Writer[fixtures.UserCount] {
	byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
	counts := typed.MapGroupsWithState(byUser, typed.NoTimeout, countClicks)
	return typed.WriteTo(counts, sink).OutputMode(typed.Update)
}

// TestCountsUnderSplitsAndRestarts runs the count under several batch
// sizes, with the input arriving in chunks and the query restarted on the
// same checkpoint between chunks, and compares with a plain loop.
func TestCountsUnderSplitsAndRestarts(t *testing.T) {
	in := clicks(200, 1)
	want := expectedCounts(in)
	for _, perBatch := range []int{0, 1, 7, 50} {
		for _, chunks := range []int{1, 3, 10} {
			t.Run(fmt.Sprintf("rowsPerBatch=%d/chunks=%d", perBatch, chunks), func(t *testing.T) {
				m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
				sink := newSink[fixtures.UserCount]()
				ck := newCheckpoint()
				size := (len(in) + chunks - 1) / chunks
				for start := 0; start < len(in); start += size {
					m.Add(in[start:min(start+size, len(in))]...)
					if err := runToEnd(t, countPipeline(m, sink), ck.opts()...); err != nil {
						t.Fatal(err)
					}
				}
				sameCounts(t, latest(sink.rows()), want)
			})
		}
	}
}

// TestLargeBatchesCountLikeALoop counts over batches of thousands of
// keys, whose writes the store commits in key order while the next batch
// runs (the commit in flight of an AvailableNow query), with a restart
// between two halves of the input, and compares with a plain loop.
func TestLargeBatchesCountLikeALoop(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	base := time.Unix(1_700_000_000, 0).UTC()
	in := make([]fixtures.Click, 60_000)
	for i := range in {
		in[i] = fixtures.Click{User: fmt.Sprintf("user-%05d", r.IntN(20_000)), Time: base.Add(time.Duration(i) * time.Millisecond)}
	}
	want := expectedCounts(in)
	m := typed.NewMemoryStream[fixtures.Click]("clicks", 10_000)
	sink := newSink[fixtures.UserCount]()
	ck := newCheckpoint()
	for _, half := range [][]fixtures.Click{in[:len(in)/2], in[len(in)/2:]} {
		m.Add(half...)
		if err := runToEnd(t, countPipeline(m, sink), ck.opts()...); err != nil {
			t.Fatal(err)
		}
	}
	sameCounts(t, latest(sink.rows()), want)
}

// TestFaultsReplayTheBatch injects failures inside a batch — in the user
// function (before the commit), and in the sink after it stored the rows
// (as if the process died between the sink and the commit) — and checks
// that restarting gives the same answer with no row counted twice.
func TestFaultsReplayTheBatch(t *testing.T) {
	in := clicks(120, 2)
	want := expectedCounts(in)
	for _, where := range []string{"function", "sink"} {
		t.Run(where, func(t *testing.T) {
			m := typed.NewMemoryStream[fixtures.Click]("clicks", 10)
			m.Add(in...)
			sink := newSink[fixtures.UserCount]()
			ck := newCheckpoint()
			failures := 0
			boom := errors.New("injected fault")
			for attempt := 0; ; attempt++ {
				if attempt > 50 {
					t.Fatal("the query never finished")
				}
				fail := attempt < 4 // the first attempts each fail once, in a later batch each time
				calls := 0
				sink.fail = nil
				f := countClicks
				if where == "function" {
					f = func(user string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter]) (fixtures.UserCount, error) {
						calls++
						if fail && calls == 3*(attempt+1) {
							return fixtures.UserCount{}, boom
						}
						return countClicks(user, rows, st)
					}
				} else if fail {
					sink.fail = func(id int64) error {
						if id == int64(attempt*2+1) {
							return boom
						}
						return nil
					}
				}
				byUser := typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User })
				w := typed.WriteTo(typed.MapGroupsWithState(byUser, typed.NoTimeout, f), sink).OutputMode(typed.Update)
				err := runToEnd(t, w, ck.opts()...)
				if err == nil {
					break
				}
				if !errors.Is(err, boom) {
					t.Fatalf("attempt %d: %v", attempt, err)
				}
				if where == "function" && !strings.Contains(err.Error(), "mapGroupsWithState") {
					t.Fatalf("the error does not name the operator: %v", err)
				}
				failures++
			}
			if failures == 0 {
				t.Fatal("no fault was injected")
			}
			sameCounts(t, latest(sink.rows()), want)
		})
	}
}

// TestSpillGivesTheSameOutput runs a query whose rows pass its batch memory
// budget, so that the operator spills them to sorted runs on disk and
// merges them back, and compares every batch's output, row for row and in
// order, with the same query held in memory, under several batch sizes and
// a restart. (A spill directory that does not exist makes the query fail:
// proof that it spills.)
func TestSpillGivesTheSameOutput(t *testing.T) {
	in := clicks(3000, 9)
	f := func(user string, rows iter.Seq[fixtures.Click], st *typed.GroupState[fixtures.Counter], emit func(fixtures.UserCount)) error {
		c, _ := st.Get()
		for r := range rows {
			c.Count++
			c.Pages = append(c.Pages, r.Page) // order-sensitive
			emit(fixtures.UserCount{User: user, Count: c.Count, Last: r.Time})
		}
		st.Update(c)
		return nil
	}
	run := func(perBatch int, opts ...runtime.Option) (map[int64][]fixtures.UserCount, error) {
		m := typed.NewMemoryStream[fixtures.Click]("clicks", perBatch)
		sink := newSink[fixtures.UserCount]()
		w := typed.WriteTo(typed.FlatMapGroupsWithState(typed.GroupByKey(typed.FromMemory(m), func(c *fixtures.Click) string { return c.User }), typed.Update, typed.NoTimeout, f), sink)
		ck := newCheckpoint()
		m.Add(in[:1000]...)
		if err := runToEnd(t, w, ck.opts(opts...)...); err != nil {
			return nil, err
		}
		m.Add(in[1000:]...)
		if err := runToEnd(t, w, ck.opts(opts...)...); err != nil {
			return nil, err
		}
		return sink.snapshot(), nil
	}
	if _, err := run(0, runtime.BatchMemory(4<<10), runtime.SpillDirectory(filepath.Join(t.TempDir(), "missing"))); err == nil || !strings.Contains(err.Error(), "spill") {
		t.Fatalf("a query over its memory budget with a missing spill directory: err = %v, want a spill error", err)
	}
	for _, perBatch := range []int{0, 700} {
		want, err := run(perBatch)
		if err != nil {
			t.Fatal(err)
		}
		for _, budget := range []int64{1 << 10, 16 << 10} {
			got, err := run(perBatch, runtime.BatchMemory(budget), runtime.SpillDirectory(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%d rows per batch, budget %d: the output differs from the one held in memory", perBatch, budget)
			}
		}
	}
}
